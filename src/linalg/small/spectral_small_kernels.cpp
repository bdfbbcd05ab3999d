// Per-ISA kernels of eigh and svd (spectral_small_kernels.h): lane-interleaved Jacobi for
// batches of small real matrices, and the blocked rotation sweep of the large-n QR iterations.
//
// The batched loops are the per-matrix Jacobi loops (jacobi_eigh.cpp, jacobi_svd.cpp) with
// scalars replaced by vectors of W matrices. Each lane is scaled by a power of two so that its
// largest entry is in [1, 2) (no overflow in squares and dot products, exact to undo). A lane
// whose pair (p, q) is already below the threshold gets t = 0, the identity rotation.
#include "linalg/small/spectral_small_kernels.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "core/vec.h"
#include "linalg/small/interleave.h"
#include "linalg/small/small_kernels.h"

namespace tessera::cpu::TS_ISA {

namespace {

using vec::TS_ISA::Vec;

constexpr int kMaxSweeps = 40;

// Scales every lane of the interleaved group (nn elements) so that its largest |entry| is in
// [1, 2); scale[l] is the factor applied (1 for an all-zero or non-finite lane).
template <class T>
void scale_lanes(int64_t nn, T* buf, T* scale) {
  using V = Vec<T>;
  constexpr int W = V::kSize;
  V amax(T(0));
  for (int64_t e = 0; e < nn; ++e) amax = V::max(amax, V::load(buf + e * W).abs());
  alignas(64) T lane[W];
  amax.store(lane);
  for (int l = 0; l < W; ++l)
    scale[l] =
        lane[l] > T(0) && std::isfinite(lane[l]) ? std::ldexp(T(1), -std::ilogb(lane[l])) : T(1);
  const V s = V::load(scale);
  for (int64_t e = 0; e < nn; ++e) (V::load(buf + e * W) * s).store(buf + e * W);
}

// The Jacobi rotation angle t = tan(theta) for the 2 x 2 problem with off-diagonal g and
// zeta = (b - a) / (2 g), where `rotate` (thresh < |g|); 0 elsewhere.
template <class T>
Vec<T> jacobi_tangent(Vec<T> a, Vec<T> b, Vec<T> g, Vec<T> thresh) {
  using V = Vec<T>;
  const V one(T(1)), zero(T(0));
  const V zeta = (b - a) / (g + g);
  const V az = zeta.abs();
  V t = V::copysign(one, zeta) / (az + (one + zeta * zeta).sqrt());
  // |zeta| so large that zeta^2 overflows: t ~ 1 / (2 zeta).
  t = V::select_lt(V(T(1e15)), az, V(T(0.5)) / zeta, t);
  return V::select_lt(thresh, g.abs(), t, zero);
}

// Two-sided cyclic Jacobi on one group of symmetric matrices.
template <class T>
void heev_group(int64_t n, const T* a, T* w, T* v, int used, int32_t* info) {
  using V = Vec<T>;
  constexpr int W = V::kSize;
  thread_local std::vector<T> abuf, vbuf;
  // Rows padded to an odd length: the column operations stride by ld vectors.
  const int64_t ld = n | 1;
  T* buf = interleave_into(n, a, used, abuf, ld);
  T* vb = v ? interleaved_identity(n, vbuf, ld) : nullptr;
  alignas(64) T scale[W];
  scale_lanes(n * ld, buf, scale);
  auto at = [&](int64_t i, int64_t j) { return buf + (i * ld + j) * W; };
  auto vat = [&](int64_t i, int64_t j) { return vb + (i * ld + j) * W; };
  const V eps(std::numeric_limits<T>::epsilon()), tiny(std::numeric_limits<T>::min());
  const V one(T(1)), zero(T(0));
  V still(T(0));  // lanes that rotated in the last sweep
  for (int sweep = 0; sweep < kMaxSweeps; ++sweep) {
    still = zero;
    for (int64_t p = 0; p < n - 1; ++p) {
      for (int64_t q = p + 1; q < n; ++q) {
        const V app = V::load(at(p, p)), aqq = V::load(at(q, q)), apq = V::load(at(p, q));
        const V thresh = V::max(eps * (app * aqq).abs().sqrt(), tiny);
        const V t = jacobi_tangent(app, aqq, apq, thresh);
        const V rotated = V::select_lt(thresh, apq.abs(), one, zero);
        still = V::max(still, rotated);
        const V c = one / (one + t * t).sqrt(), s = t * c;
        for (int64_t k = 0; k < n; ++k) {  // rows p, q
          const V xp = V::load(at(p, k)), xq = V::load(at(q, k));
          (c * xp - s * xq).store(at(p, k));
          (s * xp + c * xq).store(at(q, k));
        }
        for (int64_t k = 0; k < n; ++k) {  // columns p, q
          const V xp = V::load(at(k, p)), xq = V::load(at(k, q));
          (c * xp - s * xq).store(at(k, p));
          (s * xp + c * xq).store(at(k, q));
        }
        (app - t * apq).store(at(p, p));
        (aqq + t * apq).store(at(q, q));
        const V off = V::select_lt(V(T(0.5)), rotated, zero, apq);
        off.store(at(p, q));
        off.store(at(q, p));
        if (vb) {
          for (int64_t k = 0; k < n; ++k) {
            const V xp = V::load(vat(k, p)), xq = V::load(vat(k, q));
            (c * xp - s * xq).store(vat(k, p));
            (s * xp + c * xq).store(vat(k, q));
          }
        }
      }
    }
    alignas(64) T lane[W];
    still.store(lane);
    if (std::all_of(lane, lane + W, [](T x) { return x == T(0); })) break;
  }
  alignas(64) T left[W];
  still.store(left);
  std::vector<int64_t> perm(static_cast<size_t>(n));
  for (int l = 0; l < used; ++l) {
    info[l] = left[l] != T(0) ? 1 : 0;
    T* wl = w + l * n;
    for (int64_t j = 0; j < n; ++j) wl[j] = at(j, j)[l];
    std::iota(perm.begin(), perm.end(), int64_t{0});
    std::stable_sort(perm.begin(), perm.end(), [&](int64_t x, int64_t y) { return wl[x] < wl[y]; });
    std::vector<T> sorted(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) sorted[j] = wl[perm[j]] / scale[l];
    std::copy(sorted.begin(), sorted.end(), wl);
    if (!v) continue;
    T* vl = v + l * n * n;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) vl[i * n + j] = vat(i, perm[j])[l];
  }
}

// One-sided (Hestenes) cyclic Jacobi on the columns of one group of square matrices.
template <class T>
void svd_group(int64_t n, const T* a, T* sv, T* u, T* vh, int used, int32_t* info) {
  using V = Vec<T>;
  constexpr int W = V::kSize;
  thread_local std::vector<T> abuf, vbuf;
  // Columns contiguous (the Jacobi pairs are columns), V likewise (the identity is symmetric).
  T* buf = interleave_into(n, a, used, abuf, n, /*transpose=*/true);
  const bool vectors = u != nullptr;
  T* vb = vectors ? interleaved_identity(n, vbuf) : nullptr;
  alignas(64) T scale[W];
  scale_lanes(n * n, buf, scale);
  auto at = [&](int64_t i, int64_t j) { return buf + (j * n + i) * W; };
  auto vat = [&](int64_t i, int64_t j) { return vb + (j * n + i) * W; };
  const V tol(std::numeric_limits<T>::epsilon() * std::sqrt(T(n)));
  const V one(T(1)), zero(T(0));
  V still(T(0));
  for (int sweep = 0; sweep < kMaxSweeps; ++sweep) {
    still = zero;
    for (int64_t p = 0; p < n - 1; ++p) {
      for (int64_t q = p + 1; q < n; ++q) {
        V alpha = zero, beta = zero, gamma = zero;
        for (int64_t i = 0; i < n; ++i) {
          const V xp = V::load(at(i, p)), xq = V::load(at(i, q));
          alpha = V::fmadd(xp, xp, alpha);
          beta = V::fmadd(xq, xq, beta);
          gamma = V::fmadd(xp, xq, gamma);
        }
        // A zero column has alpha or beta 0, hence gamma 0: never rotated.
        const V thresh = tol * alpha.sqrt() * beta.sqrt();
        const V t = jacobi_tangent(alpha, beta, gamma, thresh);
        still = V::max(still, V::select_lt(thresh, gamma.abs(), one, zero));
        const V c = one / (one + t * t).sqrt(), s = t * c;
        for (int64_t i = 0; i < n; ++i) {
          const V xp = V::load(at(i, p)), xq = V::load(at(i, q));
          (c * xp - s * xq).store(at(i, p));
          (s * xp + c * xq).store(at(i, q));
        }
        if (vb) {
          for (int64_t i = 0; i < n; ++i) {
            const V xp = V::load(vat(i, p)), xq = V::load(vat(i, q));
            (c * xp - s * xq).store(vat(i, p));
            (s * xp + c * xq).store(vat(i, q));
          }
        }
      }
    }
    alignas(64) T lane[W];
    still.store(lane);
    if (std::all_of(lane, lane + W, [](T x) { return x == T(0); })) break;
  }
  // Column norms of every lane at once.
  std::vector<T> norms(static_cast<size_t>(n * W));
  for (int64_t j = 0; j < n; ++j) {
    V ss = zero;
    for (int64_t i = 0; i < n; ++i) {
      const V x = V::load(at(i, j));
      ss = V::fmadd(x, x, ss);
    }
    ss.sqrt().store(norms.data() + j * W);
  }
  alignas(64) T left[W];
  still.store(left);
  const T floor = T(n) * std::numeric_limits<T>::epsilon();
  std::vector<int64_t> perm(static_cast<size_t>(n));
  for (int l = 0; l < used; ++l) {
    auto norm = [&](int64_t j) { return norms[j * W + l]; };
    std::iota(perm.begin(), perm.end(), int64_t{0});
    std::stable_sort(perm.begin(), perm.end(),
                     [&](int64_t x, int64_t y) { return norm(x) > norm(y); });
    T* sl = sv + l * n;
    for (int64_t j = 0; j < n; ++j) sl[j] = norm(perm[j]) / scale[l];
    const bool noise = vectors && !(norm(perm[n - 1]) > floor * norm(perm[0]));
    info[l] = left[l] != T(0) || noise ? 1 : 0;
    if (!vectors || info[l]) continue;
    T* ul = u + l * n * n;
    T* vl = vh + l * n * n;
    for (int64_t j = 0; j < n; ++j) {
      const T r = T(1) / norm(perm[j]);
      for (int64_t i = 0; i < n; ++i) {
        ul[i * n + j] = at(i, perm[j])[l] * r;
        vl[j * n + i] = vat(i, perm[j])[l];
      }
    }
  }
}

template <class T>
void heev_batch(int64_t n, int64_t count, const T* a, T* w, T* v, int32_t* info) {
  constexpr int W = Vec<T>::kSize;
  for (int64_t g = 0; g < count; g += W) {
    const int used = static_cast<int>(std::min<int64_t>(W, count - g));
    heev_group(n, a + g * n * n, w + g * n, v ? v + g * n * n : nullptr, used, info + g);
  }
}

template <class T>
void svd_batch(int64_t n, int64_t count, const T* a, T* s, T* u, T* vh, int32_t* info) {
  constexpr int W = Vec<T>::kSize;
  for (int64_t g = 0; g < count; g += W) {
    const int used = static_cast<int>(std::min<int64_t>(W, count - g));
    svd_group(n, a + g * n * n, s + g * n, u ? u + g * n * n : nullptr,
              vh ? vh + g * n * n : nullptr, used, info + g);
  }
}

// Columns in blocks of kBlockBytes per row, so that every row the rotations touch stays in
// cache while all of them are applied to the block.
template <class T>
void rotate(const RowRotation<T>* rots, int64_t count, T* z, int64_t ncols, int64_t ld) {
  using V = Vec<T>;
  constexpr int W = V::kSize;
  constexpr int64_t kBlock = 512 / sizeof(T);
  for (int64_t j0 = 0; j0 < ncols; j0 += kBlock) {
    const int64_t len = std::min(kBlock, ncols - j0);
    for (int64_t r = 0; r < count; ++r) {
      T* x = z + rots[r].p * ld + j0;
      T* y = z + rots[r].q * ld + j0;
      const T c = rots[r].c, s = rots[r].s;
      const V cv(c), sv(s);
      int64_t j = 0;
      for (; j + W <= len; j += W) {
        const V xp = V::load(x + j), yq = V::load(y + j);
        (cv * xp - sv * yq).store(x + j);
        (sv * xp + cv * yq).store(y + j);
      }
      for (; j < len; ++j) {
        const T xp = x[j], yq = y[j];
        x[j] = c * xp - s * yq;
        y[j] = s * xp + c * yq;
      }
    }
  }
}

template <class T>
void dot3(int64_t n, const T* x, const T* y, T* out) {
  using V = Vec<T>;
  constexpr int W = V::kSize;
  V xx(T(0)), yy(T(0)), xy(T(0));
  int64_t i = 0;
  for (; i + W <= n; i += W) {
    const V a = V::load(x + i), b = V::load(y + i);
    xx = V::fmadd(a, a, xx);
    yy = V::fmadd(b, b, yy);
    xy = V::fmadd(a, b, xy);
  }
  alignas(64) T lane[3][W];
  xx.store(lane[0]);
  yy.store(lane[1]);
  xy.store(lane[2]);
  T s[3] = {0, 0, 0};
  for (int r = 0; r < 3; ++r)
    for (int l = 0; l < W; ++l) s[r] += lane[r][l];
  for (; i < n; ++i) {
    s[0] += x[i] * x[i];
    s[1] += y[i] * y[i];
    s[2] += x[i] * y[i];
  }
  std::copy(s, s + 3, out);
}

template <class T>
void axpy(int64_t n, T a, const T* x, T* y) {
  using V = Vec<T>;
  constexpr int W = V::kSize;
  const V av(a);
  int64_t i = 0;
  for (; i + W <= n; i += W) V::fmadd(av, V::load(x + i), V::load(y + i)).store(y + i);
  for (; i < n; ++i) y[i] += a * x[i];
}

}  // namespace

const SpectralSmallKernels& spectral_small_kernels() {
  static const SpectralSmallKernels k{
      heev_batch<float>, heev_batch<double>, svd_batch<float>, svd_batch<double>, rotate<float>,
      rotate<double>,    dot3<float>,        dot3<double>,     axpy<float>,       axpy<double>};
  return k;
}

}  // namespace tessera::cpu::TS_ISA
