// The eigh and svd kernels (src/linalg/spectral.h) on raw buffers: every path (Jacobi,
// tridiagonal QL, bidiagonal QR, the lane-interleaved batches of every ISA, the row rotation
// sweep) against the plain references and LAPACK (?syevd/?heevd, ?gesdd), on random,
// ill-conditioned, rank-deficient, zero, identity, diagonal and graded matrices. Residuals
// ||A V - V W||, ||A - U S V^H||, ||U^H U - I||, ||V^H V - I|| within c n eps ||A||.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "linalg/secular.h"
#include "spectral_test_util.h"
#include "test_support.h"

namespace tessera::linalg_test {
namespace {

using namespace tessera::linalg::detail;

const ScalarType kDtypes[] = {kFloat32, kFloat64, kComplex64, kComplex128};

// Calls fn.template operator()<T>() for the dtype.
template <class Fn>
void with_type(ScalarType dt, Fn&& fn) {
  switch (dt) {
    case kFloat32:
      return fn.template operator()<float>();
    case kFloat64:
      return fn.template operator()<double>();
    case kComplex64:
      return fn.template operator()<complex64>();
    default:
      return fn.template operator()<complex128>();
  }
}

template <class T>
Tensor as_tensor(const std::vector<T>& v, int64_t rows, int64_t cols, ScalarType dt) {
  Tensor t = empty({rows, cols}, dt);
  std::copy(v.begin(), v.end(), static_cast<T*>(t.data_ptr()));
  return t;
}

// Eigen-residuals of (w, v) for a, in units of n eps ||A||_F (orthogonality in n eps).
template <class T>
std::pair<double, double> eigh_residuals(const Tensor& a, const std::vector<real_t<T>>& w,
                                         const std::vector<T>& v, int64_t n, ScalarType dt) {
  const LMat A = to_lmat(a), V = to_lmat(as_tensor(v, n, n, dt));
  LMat AV = matmul(A, V), VW = V;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) VW(i, j) *= (long double)w[j];
  const double unit = double(n) * eps_of(dt);
  const double scale = std::max(double(frob(A)), 1e-300);
  return {double(frob_diff(AV, VW)) / (unit * scale),
          double(orthogonality_error(as_tensor(v, n, n, dt))) / unit};
}

template <class R>
double max_abs_diff(const std::vector<R>& a, const std::vector<R>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(double(a[i]) - double(b[i])));
  return d;
}

TEST(SpectralKernels, EighEveryPathMatchesLapackAndReference) {
  manual_seed(41);
  for (ScalarType dt : kDtypes) {
    for (int64_t n : {1, 2, 5, 16, 33, 64, 65, 90}) {
      for (SKind kind : kAllKinds) {
        SCOPED_TRACE(fmt::format("{} n={} {}", dt, n, skind_name(kind)));
        const Tensor a = spectral_matrix(n, n, dt, kind, /*hermitian=*/true);
        with_type(dt, [&]<class T>() {
          using R = real_t<T>;
          const std::vector<T> av = to_vector<T>(a);
          const std::vector<R> wl = lapack_eigvalsh<T>(int(n), av);
          const double scale = std::max(double(frob(to_lmat(a))), 1e-300);
          const double unit = double(n) * eps_of(dt) * scale;
          using Path = std::function<int64_t(T*, R*, T*)>;
          const std::vector<std::pair<std::string, Path>> paths = {
              {"jacobi", [&](T* x, R* w, T* v) { return heev_jacobi(n, x, w, v); }},
              {"tridiagonal", [&](T* x, R* w, T* v) { return heev_tridiagonal(n, x, w, v); }},
              {"heev", [&](T* x, R* w, T* v) { return heev(n, x, w, v); }},
              {"reference", [&](T*, R* w, T* v) { return heev_reference(n, av.data(), w, v); }}};
          for (const auto& [name, run] : paths) {
            SCOPED_TRACE(name);
            std::vector<T> x = av, v(static_cast<size_t>(n * n));
            std::vector<R> w(static_cast<size_t>(n));
            ASSERT_EQ(run(x.data(), w.data(), v.data()), 0);
            EXPECT_TRUE(std::is_sorted(w.begin(), w.end()));
            EXPECT_LE(max_abs_diff(w, wl), 20 * unit);
            const auto [res, orth] = eigh_residuals<T>(a, w, v, n, dt);
            EXPECT_LE(res, 20.0);
            EXPECT_LE(orth, 20.0);
            // Values only: the same values.
            std::vector<T> y = av;
            std::vector<R> w2(static_cast<size_t>(n));
            if (name != "reference") {
              ASSERT_EQ(run(y.data(), w2.data(), nullptr), 0);
              EXPECT_LE(max_abs_diff(w2, wl), 20 * unit);
            }
          }
        });
      }
    }
  }
}

// Tridiagonal matrices that exercise divide and conquer's deflation and secular equation.
enum class TriKind {
  kRandom,
  kWilkinson,
  kGluedWilkinson,
  kToeplitz,
  kZeroDiagonal,
  kSplit,
  kGraded,
  kEqualDiagonal
};
const TriKind kTriKinds[] = {TriKind::kRandom,   TriKind::kWilkinson,    TriKind::kGluedWilkinson,
                             TriKind::kToeplitz, TriKind::kZeroDiagonal, TriKind::kSplit,
                             TriKind::kGraded,   TriKind::kEqualDiagonal};

template <class R>
void tridiagonal_of(TriKind kind, int64_t n, std::vector<R>& d, std::vector<R>& e) {
  d.assign(static_cast<size_t>(n), R(0));
  e.assign(static_cast<size_t>(n), R(0));
  const std::vector<double> g = to_vector<double>(randn({2 * n}, kFloat64));
  for (int64_t i = 0; i < n; ++i) {
    switch (kind) {
      case TriKind::kRandom:
        d[i] = R(g[i]), e[i] = R(g[n + i]);
        break;
      case TriKind::kWilkinson:  // W+: pairs of eigenvalues agreeing to many digits
        d[i] = R(std::abs(double(i) - double(n - 1) / 2)), e[i] = 1;
        break;
      case TriKind::kGluedWilkinson:  // W21+ blocks glued by 1e-7: tight clusters
        d[i] = R(std::abs(double(i % 21) - 10)), e[i] = i % 21 == 20 ? R(1e-7) : R(1);
        break;
      case TriKind::kToeplitz:  // 2, -1: eigenvalues 2 - 2 cos(k pi / (n + 1))
        d[i] = 2, e[i] = -1;
        break;
      case TriKind::kZeroDiagonal:  // +-pairs
        d[i] = 0, e[i] = R(1 + 0.1 * g[n + i]);
        break;
      case TriKind::kSplit:  // zero and tiny couplings, signs mixed
        d[i] = R(g[i]), e[i] = i % 7 == 3 ? R(0) : (i % 5 == 2 ? R(1e-30) : R(g[n + i]));
        break;
      case TriKind::kGraded:
        d[i] = R(std::pow(10.0, -12.0 * double(i) / double(n))),
        e[i] = R(0.5 * std::pow(10.0, -12.0 * (double(i) + 0.5) / double(n)));
        break;
      case TriKind::kEqualDiagonal:  // one value, weak couplings: nearly everything deflates
        d[i] = 1, e[i] = R(1e-9 * g[n + i]);
        break;
    }
  }
  e[n - 1] = 0;
}

TEST(SpectralKernels, DivideAndConquerOnHardTridiagonals) {
  manual_seed(43);
  for (ScalarType dt : {kFloat32, kFloat64}) {
    for (int64_t n : {1, 2, 31, 33, 64, 97, 200, 333}) {
      for (TriKind kind : kTriKinds) {
        SCOPED_TRACE(fmt::format("{} n={} kind={}", dt, n, int(kind)));
        with_type(dt, [&]<class R>() {
          if constexpr (!kIsComplex<R>) {
            std::vector<R> d, e;
            tridiagonal_of(kind, n, d, e);
            std::vector<R> full(static_cast<size_t>(n * n), R(0));
            long double norm2 = 0;
            for (int64_t i = 0; i < n; ++i) {
              full[i * n + i] = d[i];
              norm2 += (long double)d[i] * d[i];
              if (i + 1 < n) {
                full[i * n + i + 1] = full[(i + 1) * n + i] = e[i];
                norm2 += 2 * (long double)e[i] * e[i];
              }
            }
            const std::vector<R> wl = lapack_eigvalsh<R>(int(n), full);
            std::vector<R> w = d, scratch = e, z(static_cast<size_t>(n * n));
            ASSERT_EQ(stedc<R>(n, w.data(), scratch.data(), z.data()), 0);
            EXPECT_TRUE(std::is_sorted(w.begin(), w.end()));
            const double unit = double(n) * eps_of(dt);
            const double scale = std::max(double(std::sqrt(norm2)), 1e-300);
            EXPECT_LE(max_abs_diff(w, wl), 20 * unit * scale);
            // ||T Z - Z W||_F and ||Z^T Z - I||_F in long double.
            long double res = 0, orth = 0;
            for (int64_t i = 0; i < n; ++i)
              for (int64_t j = 0; j < n; ++j) {
                long double t = ((long double)d[i] - w[j]) * z[i * n + j];
                if (i > 0) t += (long double)e[i - 1] * z[(i - 1) * n + j];
                if (i + 1 < n) t += (long double)e[i] * z[(i + 1) * n + j];
                res += t * t;
              }
            for (int64_t a = 0; a < n; ++a)
              for (int64_t b = a; b < n; ++b) {
                long double dot = 0;
                for (int64_t i = 0; i < n; ++i) dot += (long double)z[i * n + a] * z[i * n + b];
                if (a == b) dot -= 1;
                orth += (a == b ? 1 : 2) * dot * dot;
              }
            EXPECT_LE(double(std::sqrt(res)), 20 * unit * scale);
            EXPECT_LE(double(std::sqrt(orth)), 20 * unit);
          }
        });
      }
    }
  }
}

// The secular equation's roots are the eigenvalues of diag(p) + z z^T (LAPACK on the dense
// matrix), each with its differences p_j - lambda_i; a root given too few steps says so.
TEST(SpectralKernels, SecularRootsAreTheRankOneEigenvalues) {
  manual_seed(46);
  for (int64_t k : {1, 2, 7, 40}) {
    SCOPED_TRACE(fmt::format("k={}", k));
    const std::vector<double> g = to_vector<double>(randn({2 * k}, kFloat64));
    std::vector<double> p(static_cast<size_t>(k)), z(static_cast<size_t>(k));
    for (int64_t j = 0; j < k; ++j) p[j] = double(j) + 0.5 * std::abs(g[j]) / double(k + 1);
    for (int64_t j = 0; j < k; ++j) z[j] = j % 3 == 1 ? 1e-6 * g[k + j] : g[k + j];
    std::vector<double> dense(static_cast<size_t>(k * k));
    for (int64_t a = 0; a < k; ++a)
      for (int64_t b = 0; b < k; ++b) dense[a * k + b] = z[a] * z[b] + (a == b ? p[a] : 0.0);
    const std::vector<double> lambda = lapack_eigvalsh<double>(int(k), dense);
    double znorm2 = 0;
    for (double v : z) znorm2 += v * v;
    const double scale = double(k) + znorm2;
    std::vector<double> w(static_cast<size_t>(k)), delta(static_cast<size_t>(k));
    for (int64_t j = 0; j < k; ++j) w[j] = z[j] * z[j];
    auto diff = [&](int64_t a, int64_t b) { return p[a] - p[b]; };
    for (int64_t i = 0; i < k; ++i) {
      int64_t origin = -1;
      bool converged = false;
      const double tau =
          secular_root<double>(k, w.data(), diff, i, origin, delta.data(), converged);
      EXPECT_TRUE(converged);
      ASSERT_TRUE(origin == i || origin == i + 1);
      EXPECT_LE(std::abs(p[origin] + tau - lambda[i]), 20 * k * 2.2e-16 * scale);
      for (int64_t j = 0; j < k; ++j)
        EXPECT_LE(std::abs(delta[j] - (p[j] - (p[origin] + tau))), 4 * 2.2e-16 * scale);
    }
  }
  // One step is not enough for a root of a 40-term equation.
  std::vector<double> p(40), w(40, 1.0), delta(40);
  for (int j = 0; j < 40; ++j) p[j] = j;
  int64_t origin = -1;
  bool converged = true;
  secular_root<double>(
      40, w.data(), [&](int64_t a, int64_t b) { return p[a] - p[b]; }, 20, origin, delta.data(),
      converged, /*max_iterations=*/1);
  EXPECT_FALSE(converged);
}

TEST(SpectralKernels, DivideAndConquerBitsDoNotDependOnThreads) {
  manual_seed(44);
  const int64_t n = 300;
  std::vector<double> d, e;
  tridiagonal_of(TriKind::kRandom, n, d, e);
  const int saved = get_num_threads();
  std::vector<double> w[2], z[2];
  for (int t = 0; t < 2; ++t) {
    set_num_threads(t + 1);
    w[t] = d;
    std::vector<double> scratch = e;
    z[t].resize(static_cast<size_t>(n * n));
    ASSERT_EQ(stedc<double>(n, w[t].data(), scratch.data(), z[t].data()), 0);
  }
  set_num_threads(saved);
  EXPECT_EQ(w[0], w[1]);
  EXPECT_EQ(z[0], z[1]);
  // The bidiagonal one alike.
  std::vector<double> s[2], u[2], v[2];
  for (int t = 0; t < 2; ++t) {
    set_num_threads(t + 1);
    s[t] = d;
    std::vector<double> scratch = e;
    u[t].resize(static_cast<size_t>(n * n));
    v[t].resize(static_cast<size_t>(n * n));
    ASSERT_EQ(bdsdc<double>(n, s[t].data(), scratch.data(), u[t].data(), v[t].data()), 0);
  }
  set_num_threads(saved);
  EXPECT_EQ(s[0], s[1]);
  EXPECT_EQ(u[0], u[1]);
  EXPECT_EQ(v[0], v[1]);
}

// Upper bidiagonal matrices for the bidiagonal divide and conquer: random, graded, equal
// diagonal with weak couplings (clusters), zero diagonal entries, split (zero couplings),
// tiny diagonal entries, constant.
const char* const kBidiagonalKinds[] = {"random", "graded", "cluster", "zero-d",
                                        "split",  "tiny-d", "constant"};

template <class R>
void bidiagonal_of(const std::string& kind, int64_t n, std::vector<R>& d, std::vector<R>& e) {
  d.assign(static_cast<size_t>(n), R(0));
  e.assign(static_cast<size_t>(n), R(0));
  const std::vector<double> g = to_vector<double>(randn({2 * n}, kFloat64));
  for (int64_t i = 0; i < n; ++i) {
    d[i] = R(g[i]), e[i] = R(g[n + i]);
    if (kind == "graded") {
      d[i] = R(std::pow(10.0, -12.0 * double(i) / double(n))), e[i] = d[i] * R(0.3);
    } else if (kind == "cluster") {
      d[i] = 1, e[i] = R(1e-9 * g[n + i]);
    } else if (kind == "zero-d") {
      if (i % 9 == 4) d[i] = 0;
    } else if (kind == "split") {
      if (i % 7 == 3) e[i] = 0;
    } else if (kind == "tiny-d") {
      if (i % 5 == 1) d[i] = R(1e-30);
    } else if (kind == "constant") {
      d[i] = 1, e[i] = 1;
    }
  }
  e[n - 1] = 0;
}

TEST(SpectralKernels, BidiagonalDivideAndConquer) {
  manual_seed(45);
  for (ScalarType dt : {kFloat32, kFloat64}) {
    for (int64_t n : {1, 2, 32, 33, 65, 100, 211, 300}) {
      for (const char* kind : kBidiagonalKinds) {
        SCOPED_TRACE(fmt::format("{} n={} {}", dt, n, kind));
        with_type(dt, [&]<class R>() {
          if constexpr (!kIsComplex<R>) {
            std::vector<R> d, e;
            bidiagonal_of<R>(kind, n, d, e);
            std::vector<R> dense(static_cast<size_t>(n * n), R(0));
            long double norm2 = 0;
            for (int64_t i = 0; i < n; ++i) {
              dense[i * n + i] = d[i];
              if (i + 1 < n) dense[i * n + i + 1] = e[i];
              norm2 += (long double)d[i] * d[i] + (long double)e[i] * e[i];
            }
            std::vector<R> sl = lapack_svdvals<R>(int(n), int(n), dense);
            std::sort(sl.begin(), sl.end());
            std::vector<R> s = d, scratch = e, u(static_cast<size_t>(n * n)),
                           v(static_cast<size_t>(n * n));
            ASSERT_EQ(bdsdc<R>(n, s.data(), scratch.data(), u.data(), v.data()), 0);
            EXPECT_TRUE(std::is_sorted(s.begin(), s.end()));
            EXPECT_GE(s[0], R(0));
            const double unit = double(n) * eps_of(dt);
            const double scale = std::max(double(std::sqrt(norm2)), 1e-300);
            EXPECT_LE(max_abs_diff(s, sl), 20 * unit * scale);
            // ||B V - U S||_F, ||U^T U - I||_F, ||V^T V - I||_F in long double.
            long double res = 0, ou = 0, ov = 0;
            for (int64_t i = 0; i < n; ++i)
              for (int64_t j = 0; j < n; ++j) {
                long double t = (long double)d[i] * v[i * n + j] - (long double)u[i * n + j] * s[j];
                if (i + 1 < n) t += (long double)e[i] * v[(i + 1) * n + j];
                res += t * t;
              }
            for (int64_t a = 0; a < n; ++a)
              for (int64_t b = a; b < n; ++b) {
                long double du = 0, dv = 0;
                for (int64_t i = 0; i < n; ++i) {
                  du += (long double)u[i * n + a] * u[i * n + b];
                  dv += (long double)v[i * n + a] * v[i * n + b];
                }
                if (a == b) du -= 1, dv -= 1;
                ou += (a == b ? 1 : 2) * du * du;
                ov += (a == b ? 1 : 2) * dv * dv;
              }
            EXPECT_LE(double(std::sqrt(res)), 20 * unit * scale);
            EXPECT_LE(double(std::sqrt(ou)), 20 * unit);
            EXPECT_LE(double(std::sqrt(ov)), 20 * unit);
          }
        });
      }
    }
  }
}

// (s, U, V) of a tall m x n matrix through one of the two cores, as tensors.
template <class T>
void check_tall_core(const std::string& name, const Tensor& a, int64_t m, int64_t n, bool full,
                     ScalarType dt) {
  using R = real_t<T>;
  SCOPED_TRACE(fmt::format("{} full={}", name, full));
  const std::vector<T> av = to_vector<T>(a);
  std::vector<T> ac(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) ac[j * m + i] = av[i * n + j];
  const int64_t ucount = full ? m : n;
  std::vector<T> uc(static_cast<size_t>(ucount * m)), vc(static_cast<size_t>(n * n));
  std::vector<R> s(static_cast<size_t>(n));
  const int64_t info =
      name == "jacobi"
          ? svd_jacobi_tall(m, n, ac.data(), s.data(), uc.data(), ucount, vc.data())
          : svd_bidiagonal_tall(m, n, ac.data(), s.data(), uc.data(), ucount, vc.data());
  ASSERT_EQ(info, 0);
  EXPECT_TRUE(std::is_sorted(s.rbegin(), s.rend()));
  const Tensor U = as_tensor(uc, ucount, m, dt).transpose(0, 1);
  const Tensor V = as_tensor(vc, n, n, dt).transpose(0, 1);
  std::vector<T> sd(s.begin(), s.end());
  const Tensor S = as_tensor(sd, 1, n, dt);
  const Tensor usv = U.narrow(1, 0, n).mul(S).mm(V.transpose(0, 1).conj());
  const double unit = double(std::max(m, n)) * eps_of(dt);
  const double scale = std::max(double(frob(to_lmat(a))), 1e-300);
  EXPECT_LE(double(frob_diff(to_lmat(usv), to_lmat(a))), 20 * unit * scale);
  EXPECT_LE(double(orthogonality_error(U)), 20 * unit);
  EXPECT_LE(double(orthogonality_error(V)), 20 * unit);
  const std::vector<R> sl = lapack_svdvals<T>(int(m), int(n), av);
  EXPECT_LE(max_abs_diff(s, sl), 20 * unit * scale);
}

TEST(SpectralKernels, SvdBothCoresOnTallMatrices) {
  manual_seed(42);
  for (ScalarType dt : kDtypes) {
    for (auto [m, n] : std::vector<std::pair<int64_t, int64_t>>{
             {1, 1}, {3, 3}, {5, 3}, {17, 17}, {40, 13}, {70, 70}, {90, 66}}) {
      for (SKind kind : kAllKinds) {
        SCOPED_TRACE(fmt::format("{} {}x{} {}", dt, m, n, skind_name(kind)));
        const Tensor a = spectral_matrix(m, n, dt, kind);
        with_type(dt, [&]<class T>() {
          for (const char* core : {"jacobi", "bidiagonal"})
            for (bool full : {false, true}) check_tall_core<T>(core, a, m, n, full, dt);
        });
      }
    }
  }
}

TEST(SpectralKernels, GesvdAnyShapeMatchesLapackAndReference) {
  manual_seed(43);
  for (ScalarType dt : kDtypes) {
    for (auto [m, n] : std::vector<std::pair<int64_t, int64_t>>{
             {0, 3}, {3, 0}, {1, 4}, {4, 1}, {6, 6}, {7, 19}, {19, 7}, {80, 70}, {70, 80}}) {
      for (SKind kind : {SKind::kRandom, SKind::kRankDeficient, SKind::kIllConditioned}) {
        SCOPED_TRACE(fmt::format("{} {}x{} {}", dt, m, n, skind_name(kind)));
        const Tensor a = spectral_matrix(m, n, dt, kind);
        with_type(dt, [&]<class T>() {
          using R = real_t<T>;
          const int64_t k = std::min(m, n);
          const std::vector<T> av = to_vector<T>(a);
          for (bool full : {false, true}) {
            const int64_t uc = full ? m : k, vr = full ? n : k;
            std::vector<T> u(static_cast<size_t>(m * uc)), vh(static_cast<size_t>(vr * n));
            std::vector<R> s(static_cast<size_t>(k));
            ASSERT_EQ(gesvd(m, n, av.data(), n, s.data(), u.data(), vh.data(), full), 0);
            const Tensor U = as_tensor(u, m, uc, dt), Vh = as_tensor(vh, vr, n, dt);
            std::vector<T> sd(s.begin(), s.end());
            const Tensor usv =
                U.narrow(1, 0, k).mul(as_tensor(sd, 1, k, dt)).mm(Vh.narrow(0, 0, k));
            const double unit = double(std::max<int64_t>({m, n, 1})) * eps_of(dt);
            const double scale = std::max(double(frob(to_lmat(a))), 1e-300);
            if (m * n > 0) {
              EXPECT_LE(double(frob_diff(to_lmat(usv), to_lmat(a))), 20 * unit * scale);
            }
            EXPECT_LE(double(orthogonality_error(U)), 20 * unit);
            EXPECT_LE(double(orthogonality_error(Vh.transpose(0, 1))), 20 * unit);
            std::vector<R> sr(static_cast<size_t>(k));
            ASSERT_EQ(svdvals_reference(m, n, av.data(), sr.data()), 0);
            EXPECT_LE(max_abs_diff(s, sr), 20 * unit * scale);
            if (k > 0) {
              EXPECT_LE(max_abs_diff(s, lapack_svdvals<T>(int(m), int(n), av)), 20 * unit * scale);
            }
            // Values only.
            std::vector<R> s2(static_cast<size_t>(k));
            ASSERT_EQ(gesvd<T>(m, n, av.data(), n, s2.data(), nullptr, nullptr, false), 0);
            EXPECT_LE(max_abs_diff(s2, sr), 20 * unit * scale);
          }
        });
      }
    }
  }
}

// Jacobi's strength: on column-graded matrices (columns scaled from 1 to 1e-10) the small
// singular values keep their relative accuracy (float32 against float64 on the same input).
TEST(SpectralKernels, JacobiKeepsRelativeAccuracyOnGradedMatrices) {
  manual_seed(44);
  const int64_t n = 16;
  std::vector<double> d(n);
  for (int64_t i = 0; i < n; ++i) d[i] = std::pow(10.0, -10.0 * i / double(n - 1));
  const Tensor a = randn({n, n}, kFloat64).mul(tensor<double>(d).unsqueeze(0)).to(kFloat32);
  const std::vector<float> af = to_vector<float>(a);
  const std::vector<double> ad = to_vector<double>(a.to(kFloat64));
  std::vector<float> sf(n);
  std::vector<double> sd(n);
  ASSERT_EQ(gesvd<float>(n, n, af.data(), n, sf.data(), nullptr, nullptr, false), 0);
  ASSERT_EQ(svdvals_reference<double>(n, n, ad.data(), sd.data()), 0);
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(sf[i] / sd[i], 1.0, 1e-4) << i;
}

TEST(SpectralKernels, RankDeficientUIsOrthonormal) {
  // Exact zero columns and an all-zero matrix: U must still be orthonormal (null columns
  // completed), in both cores and the full and reduced forms.
  for (ScalarType dt : kDtypes) {
    Tensor a = zeros({6, 4}, dt);
    a.select(1, 0).fill_(1);
    a.select(1, 2).fill_(2);
    with_type(dt, [&]<class T>() {
      for (const char* core : {"jacobi", "bidiagonal"})
        for (bool full : {false, true}) {
          check_tall_core<T>(core, a, 6, 4, full, dt);
          check_tall_core<T>(core, zeros({5, 5}, dt), 5, 5, full, dt);
        }
    });
  }
}

// The ISA tables of the spectral kernels this CPU can run.
std::vector<std::pair<std::string, const cpu::SpectralSmallKernels*>> spectral_tables() {
  return TS_RUNNABLE_TABLES(spectral_small_kernels);
}

// Batches of 37 (not a multiple of any lane count) through every ISA's interleaved kernels,
// against LAPACK and the residuals (heev from either triangle); below the svd's bidiagonal
// path, a rank-deficient matrix must be handed back (info 1) for the per-matrix kernel when U is
// wanted; from it, every matrix is finished in the lanes.
TEST(SpectralKernels, LaneKernelsOnEveryIsa) {
  manual_seed(45);
  const int64_t batch = 37;
  for (const auto& [isa, table] : spectral_tables()) {
    for (ScalarType dt : {kFloat32, kFloat64}) {
      for (int64_t n : {1, 2, 3, 4, 6, 7, 8, 13, 16, 32}) {
        SCOPED_TRACE(fmt::format("{} {} n={}", isa, dt, n));
        std::vector<Tensor> mats;
        for (int64_t b = 0; b < batch; ++b)
          mats.push_back(spectral_matrix(n, n, dt, kAllKinds[b % 7], /*hermitian=*/true));
        with_type(dt, [&]<class T>() {
          if constexpr (!kIsComplex<T>) {
            std::vector<T> all;
            for (const Tensor& m : mats) {
              const auto v = to_vector<T>(m);
              all.insert(all.end(), v.begin(), v.end());
            }
            // heev reads one triangle (lower, then upper): NaN in the other one must not matter.
            auto with_nan_in = [&](bool upper_read) {
              std::vector<T> x = all;
              for (int64_t b = 0; b < batch; ++b)
                for (int64_t i = 0; i < n; ++i)
                  for (int64_t j = 0; j < n; ++j)
                    if (upper_read ? j < i : j > i)
                      x[(b * n + i) * n + j] = std::numeric_limits<T>::quiet_NaN();
              return x;
            };
            std::vector<T> w(2 * batch * n), v(2 * batch * n * n), s(batch * n), u(batch * n * n),
                vh(batch * n * n);
            std::vector<int32_t> info(2 * batch), sinfo(batch);
            for (int upper = 0; upper < 2; ++upper) {
              const std::vector<T> x = with_nan_in(upper);
              if constexpr (std::is_same_v<T, float>) {
                table->heev_f32(n, batch, x.data(), upper, w.data() + upper * batch * n,
                                v.data() + upper * batch * n * n, info.data() + upper * batch);
              } else {
                table->heev_f64(n, batch, x.data(), upper, w.data() + upper * batch * n,
                                v.data() + upper * batch * n * n, info.data() + upper * batch);
              }
            }
            if constexpr (std::is_same_v<T, float>) {
              table->svd_f32(n, batch, all.data(), s.data(), u.data(), vh.data(), sinfo.data());
            } else {
              table->svd_f64(n, batch, all.data(), s.data(), u.data(), vh.data(), sinfo.data());
            }
            const double unit = double(n) * eps_of(dt);
            for (int64_t b = 0; b < batch; ++b) {
              SCOPED_TRACE(b);
              const double scale = std::max(double(frob(to_lmat(mats[b]))), 1e-300);
              const std::vector<T> av = to_vector<T>(mats[b]);
              for (int upper = 0; upper < 2; ++upper) {
                SCOPED_TRACE(upper ? "upper" : "lower");
                const int64_t at = upper * batch + b;
                ASSERT_EQ(info[at], 0);
                std::vector<T> wb(w.begin() + at * n, w.begin() + (at + 1) * n);
                std::vector<T> vb(v.begin() + at * n * n, v.begin() + (at + 1) * n * n);
                EXPECT_LE(max_abs_diff(wb, lapack_eigvalsh<T>(int(n), av)), 20 * unit * scale);
                const auto [res, orth] = eigh_residuals<T>(mats[b], wb, vb, n, dt);
                EXPECT_LE(res, 20.0);
                EXPECT_LE(orth, 20.0);
              }
              std::vector<T> sb(s.begin() + b * n, s.begin() + (b + 1) * n);
              EXPECT_LE(max_abs_diff(sb, lapack_svdvals<T>(int(n), int(n), av)), 20 * unit * scale);
              const SKind kind = kAllKinds[b % 7];
              if (n >= cpu::kSvdBidiagonalMinOrder) {
                ASSERT_EQ(sinfo[b], 0);  // the bidiagonal path's U is orthonormal as it is
              } else if (kind == SKind::kZero || (kind == SKind::kRankDeficient && n > 1)) {
                EXPECT_EQ(sinfo[b], 1);  // Jacobi hands back for the completion of U
                continue;
              } else if (sinfo[b]) {
                continue;  // e.g. float32 graded with a value at the noise floor
              }
              const Tensor U = as_tensor(
                  std::vector<T>(u.begin() + b * n * n, u.begin() + (b + 1) * n * n), n, n, dt);
              const Tensor Vh = as_tensor(
                  std::vector<T>(vh.begin() + b * n * n, vh.begin() + (b + 1) * n * n), n, n, dt);
              const Tensor usv = U.mul(as_tensor(sb, 1, n, dt)).mm(Vh);
              EXPECT_LE(double(frob_diff(to_lmat(usv), to_lmat(mats[b]))), 20 * unit * scale);
              EXPECT_LE(double(orthogonality_error(U)), 20 * unit);
              EXPECT_LE(double(orthogonality_error(Vh.transpose(0, 1))), 20 * unit);
            }
          }
        });
      }
    }
  }
}

// The blocked rotation sweep equals one rotation at a time over whole rows (and leaves the
// columns past ncols alone).
template <class R>
void check_rotation_sweep(const cpu::SpectralSmallKernels& table, double tol) {
  const int64_t rows = 40, cols = 300, ld = 310;
  std::vector<cpu::RowRotation<R>> rots;
  for (int32_t r = 0; r < 500; ++r) {
    const int32_t p = r % int32_t(rows), q = (r * 7 + 3) % int32_t(rows);
    rots.push_back(
        {p, q == p ? (p + 1) % int32_t(rows) : q, R(std::cos(0.1 * r)), R(std::sin(0.1 * r))});
  }
  const std::vector<R> start = to_vector<R>(randn({rows, ld}, kFloat64).to(scalar_type_of<R>));
  std::vector<R> fast = start, ref = start;
  if constexpr (std::is_same_v<R, float>) {
    table.rotate_f32(rots.data(), int64_t(rots.size()), fast.data(), cols, ld);
  } else {
    table.rotate_f64(rots.data(), int64_t(rots.size()), fast.data(), cols, ld);
  }
  for (const auto& r : rots)
    for (int64_t j = 0; j < cols; ++j) {
      const R x = ref[r.p * ld + j], y = ref[r.q * ld + j];
      ref[r.p * ld + j] = r.c * x - r.s * y;
      ref[r.q * ld + j] = r.s * x + r.c * y;
    }
  EXPECT_LE(max_abs_diff(fast, ref), tol);
  EXPECT_EQ(fast[cols], start[cols]);
}

TEST(SpectralKernels, RotationSweepMatchesOneAtATime) {
  manual_seed(46);
  for (const auto& [isa, table] : spectral_tables()) {
    SCOPED_TRACE(isa);
    check_rotation_sweep<double>(*table, 1e-12);
    check_rotation_sweep<float>(*table, 1e-4);
  }
}

// RotatedRows (the QR iterations' blocked rotation of eigenvector rows): chained and unchained
// rotations, a partial last column block, complex rows, and a batch large enough to split the
// blocks over two threads, against one rotation at a time on the row-major matrix; rows past
// `rows` and columns past ncols stay as they were.
template <class T>
void check_rotated_rows(double tol) {
  using R = real_t<T>;
  const int64_t rows = 40, cols = 300, ld = 310, total_rows = 45;
  std::vector<PlaneRotation<R>> rots;
  for (int32_t r = 0; r < 12000; ++r) {
    // Runs of chained rotations (i, i+1), (i-1, i), ... broken every 7th by a jump.
    const int32_t i =
        r % 7 == 0 ? (r * 13) % int32_t(rows - 1) : (rows - 2) - (r % int32_t(rows - 1));
    rots.push_back({i, i + 1, R(std::cos(0.01 * r)), R(std::sin(0.01 * r))});
  }
  const Tensor start_t =
      randn({total_rows, ld}, kIsComplex<T> ? kComplex128 : kFloat64).to(scalar_type_of<T>);
  const std::vector<T> start = to_vector<T>(start_t);
  std::vector<T> fast = start, ref = start;
  const int saved = get_num_threads();
  set_num_threads(2);
  RotatedRows<T> held(fast.data(), rows, cols, ld);
  held.apply(std::vector<PlaneRotation<R>>(rots.begin(), rots.begin() + 4000));
  held.apply(
      std::vector<PlaneRotation<R>>(rots.begin() + 4000, rots.end()));  // split over the pool
  held.finish();
  set_num_threads(saved);
  for (const auto& r : rots)
    for (int64_t j = 0; j < cols; ++j) {
      const T x = ref[r.p * ld + j], y = ref[r.q * ld + j];
      ref[r.p * ld + j] = r.c * x - r.s * y;
      ref[r.q * ld + j] = r.s * x + r.c * y;
    }
  double diff = 0;
  for (size_t i = 0; i < fast.size(); ++i)
    diff = std::max(diff, double(std::abs(fast[i] - ref[i])));
  EXPECT_LE(diff, tol);
  for (int64_t i = 0; i < total_rows; ++i)
    for (int64_t j = (i < rows ? cols : 0); j < ld; ++j)
      ASSERT_EQ(fast[i * ld + j], start[i * ld + j]) << i << ", " << j;
}

TEST(SpectralKernels, RotatedRowsMatchOneAtATime) {
  manual_seed(47);
  check_rotated_rows<double>(1e-10);
  check_rotated_rows<float>(2e-3);
  check_rotated_rows<complex128>(1e-10);
}

}  // namespace
}  // namespace tessera::linalg_test
