// `tessera bench linalg`, eigh and svd: tessera::linalg::eigh / svd (full_matrices) against
// LAPACK (OpenBLAS's ?syevd and ?gesdd with vectors; ?gesvj, LAPACK's own one-sided Jacobi, for
// single matrices) and PyTorch 1.13's batched calls (bench/torch_linalg.py), float32
// and float64.
//
// Cases `eigh/<dtype>/<batch>x<n>x<n>`, `svd/<dtype>/<batch>x<n>x<n>`: batches of 10,000 with
// n = 4, 8, 16, 32 and single matrices with n = 256 and 1024 (symmetric B + B^T for eigh,
// Gaussian for svd). Every LAPACK call copies its input first (they overwrite it), as
// Tessera's and PyTorch's calls copy too. Threads as in bench_linalg.cpp: a batch spreads over
// Tessera's pool with OpenBLAS single-threaded inside; a single matrix runs OpenBLAS with t
// threads.
//
// Accuracy table: graded matrices (svd: B D, eigh: D H D with H positive definite, D from 1 to
// 1e-8), float32, n = 32 (the Jacobi path): the largest relative error of the four smallest
// values, Tessera's and LAPACK's, against float64 Jacobi on the same input.
#include "cli/bench_linalg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#include "linalg/spectral.h"
#include "tessera/tessera.h"

extern "C" {
void ssyevd_(const char*, const char*, const int*, float*, const int*, float*, float*, const int*,
             int*, const int*, int*);
void dsyevd_(const char*, const char*, const int*, double*, const int*, double*, double*,
             const int*, int*, const int*, int*);
void sgesdd_(const char*, const int*, const int*, float*, const int*, float*, float*, const int*,
             float*, const int*, float*, const int*, int*, int*);
void dgesdd_(const char*, const int*, const int*, double*, const int*, double*, double*, const int*,
             double*, const int*, double*, const int*, int*, int*);
void sgesvj_(const char*, const char*, const char*, const int*, const int*, float*, const int*,
             float*, const int*, float*, const int*, float*, const int*, int*);
void dgesvj_(const char*, const char*, const char*, const int*, const int*, double*, const int*,
             double*, const int*, double*, const int*, double*, const int*, int*);
}

namespace tessera::cli {

namespace {

struct SpectralCase {
  std::string op;  // "eigh" or "svd"
  ScalarType dtype;
  int64_t batch, n;
  std::string name() const { return fmt::format("{}/{}/{}x{}x{}", op, dtype, batch, n, n); }
};

Tensor spectral_input(const SpectralCase& c) {
  manual_seed(0);
  const Tensor b = randn({c.batch, c.n, c.n}, c.dtype);
  return c.op == "eigh" ? b.add(b.transpose(1, 2)) : b;
}

// One LAPACK call with vectors on a copy: work buffers per thread, sized by a query.
template <class T>
struct LapackCall {
  int n;
  std::vector<T> a, w, u, vt, work;
  std::vector<int> iwork;
  explicit LapackCall(int n_)
      : n(n_), a(n_ * n_), w(n_), u(n_ * n_), vt(n_ * n_), iwork(8 * n_ + 8) {
    work.resize(
        static_cast<size_t>(std::max(3 * n * n + 8 * n + 64, 2 * n * n + 6 * n + 64) + 4 * n * n));
  }
  void eigh(const T* in) {
    std::memcpy(a.data(), in, sizeof(T) * n * n);
    int info = 0, lwork = int(work.size()), liwork = int(iwork.size());
    if constexpr (std::is_same_v<T, float>)
      ssyevd_("V", "L", &n, a.data(), &n, w.data(), work.data(), &lwork, iwork.data(), &liwork,
              &info);
    if constexpr (std::is_same_v<T, double>)
      dsyevd_("V", "L", &n, a.data(), &n, w.data(), work.data(), &lwork, iwork.data(), &liwork,
              &info);
  }
  void gesdd(const T* in, const char* jobz = "A") {
    std::memcpy(a.data(), in, sizeof(T) * n * n);
    int info = 0, lwork = int(work.size());
    if constexpr (std::is_same_v<T, float>)
      sgesdd_(jobz, &n, &n, a.data(), &n, w.data(), u.data(), &n, vt.data(), &n, work.data(),
              &lwork, iwork.data(), &info);
    if constexpr (std::is_same_v<T, double>)
      dgesdd_(jobz, &n, &n, a.data(), &n, w.data(), u.data(), &n, vt.data(), &n, work.data(),
              &lwork, iwork.data(), &info);
  }
  void gesvj(const T* in) {
    std::memcpy(a.data(), in, sizeof(T) * n * n);
    int info = 0, lwork = int(work.size()), mv = 0;
    if constexpr (std::is_same_v<T, float>)
      sgesvj_("G", "U", "V", &n, &n, a.data(), &n, w.data(), &mv, vt.data(), &n, work.data(),
              &lwork, &info);
    if constexpr (std::is_same_v<T, double>)
      dgesvj_("G", "U", "V", &n, &n, a.data(), &n, w.data(), &mv, vt.data(), &n, work.data(),
              &lwork, &info);
  }
};

template <class T>
void lapack_run(const SpectralCase& c, const Tensor& input, const std::string& which) {
  const T* in = input.data_ptr<T>();
  const int n = static_cast<int>(c.n);
  auto call = [&](LapackCall<T>& l, int64_t b) {
    if (which == "syevd") l.eigh(in + b * n * n);
    if (which == "gesdd") l.gesdd(in + b * n * n);
    if (which == "gesvj") l.gesvj(in + b * n * n);
  };
  if (c.batch == 1) {
    LapackCall<T> l(n);
    call(l, 0);
    return;
  }
  parallel_for(0, c.batch, 64, [&](int64_t b0, int64_t b1) {
    thread_local std::unique_ptr<LapackCall<T>> l;
    if (!l || l->n != n) l = std::make_unique<LapackCall<T>>(n);
    for (int64_t b = b0; b < b1; ++b) call(*l, b);
  });
}

// Largest relative error of the four smallest values (ours, LAPACK's) on graded float32
// matrices, against float64 Jacobi on the same input.
void print_accuracy_table() {
  using namespace linalg::detail;
  const int n = 32;
  std::printf(
      "\nrelative error of the 4 smallest values, graded float32 matrices, n = %d "
      "(reference: float64 Jacobi on the same input)\n",
      n);
  std::printf("%-34s %14s %14s\n", "case", "tessera", "lapack");
  for (double grade : {1e-4, 1e-6, 1e-8}) {
    manual_seed(7);
    std::vector<double> d(n);
    for (int i = 0; i < n; ++i) d[i] = std::pow(grade, double(i) / (n - 1));
    const Tensor dv = tensor<double>(d);
    const Tensor g = randn({n, n}, kFloat64);
    const Tensor a = g.mul(dv.unsqueeze(0)).to(kFloat32);  // columns graded
    const Tensor h0 = g.mm(g.transpose(0, 1)).add(eye(n, n, kFloat64).mul(double(n)));
    Tensor h = h0.mul(dv.unsqueeze(0)).mul(dv.unsqueeze(1));
    h = h.add(h.transpose(0, 1)).mul(0.5).to(kFloat32);
    for (const char* op : {"svd", "eigh"}) {
      const bool svd = std::string(op) == "svd";
      const Tensor x = svd ? a : h;
      const Tensor x64 = x.to(kFloat64).contiguous();
      std::vector<double> ref(n);
      if (svd) {
        svdvals_reference<double>(n, n, x64.data_ptr<double>(), ref.data());
      } else {
        heev_reference<double>(n, x64.data_ptr<double>(), ref.data(), nullptr);
        std::reverse(ref.begin(), ref.end());  // descending, as singular values
      }
      const Tensor vals = (svd ? linalg::svdvals(x) : linalg::eigvalsh(x)).contiguous();
      std::vector<float> ours(vals.data_ptr<float>(), vals.data_ptr<float>() + n);
      if (!svd) std::reverse(ours.begin(), ours.end());
      LapackCall<float> l(n);
      const Tensor xc = x.contiguous();
      if (svd) {
        l.gesdd(xc.data_ptr<float>(), "N");
      } else {
        l.eigh(xc.data_ptr<float>());
        std::reverse(l.w.begin(), l.w.end());
      }
      double e_ours = 0, e_lapack = 0;
      for (int i = n - 4; i < n; ++i) {
        e_ours = std::max(e_ours, std::abs(ours[i] - ref[i]) / std::abs(ref[i]));
        e_lapack = std::max(e_lapack, std::abs(l.w[i] - ref[i]) / std::abs(ref[i]));
      }
      std::printf("%-34s %14.2e %14.2e\n",
                  fmt::format("{}/float32/graded {:.0e}", op, grade).c_str(), e_ours, e_lapack);
    }
  }
}

}  // namespace

void run_bench_linalg_spectral(const BenchOptions& options, const LinalgTurns& turns,
                               std::vector<BenchRow>& rows) {
  std::vector<SpectralCase> cases;
  for (const char* op : {"eigh", "svd"})
    for (ScalarType dt : {kFloat32, kFloat64}) {
      for (int64_t n : {4, 8, 16, 32}) cases.push_back({op, dt, 10000, n});
      for (int64_t n : {256, 1024}) cases.push_back({op, dt, 1, n});
    }
  if (options.quick)
    std::erase_if(
        cases, [](const SpectralCase& c) { return c.dtype == kFloat64 || c.n == 4 || c.n == 16; });
  std::erase_if(cases, [&](const SpectralCase& c) {
    return c.name().find(options.filter) == std::string::npos;
  });
  if (cases.empty()) return;
  const int saved = get_num_threads();
  size_t done = 0;
  for (const SpectralCase& c : cases) {
    std::fprintf(stderr, "bench linalg: eigh/svd [%zu/%zu] %s\n", ++done, cases.size(),
                 c.name().c_str());
    const Tensor a = spectral_input(c);
    auto lapack = [&](const std::string& which) {
      return [&c, &a, which] {
        if (c.dtype == kFloat32) {
          lapack_run<float>(c, a, which);
        } else {
          lapack_run<double>(c, a, which);
        }
      };
    };
    for (int th : turns.threads) {
      std::vector<Contender> cs = {
          tessera_contender("tessera", th,
                            [&] {
                              if (c.op == "eigh") {
                                (void)linalg::eigh(a);
                              } else {
                                (void)linalg::svd(a);
                              }
                            }),
          lapack_contender("lapack", c.batch, th, lapack(c.op == "eigh" ? "syevd" : "gesdd"))};
      if (c.op == "svd" && c.batch == 1)
        cs.push_back(lapack_contender("lapack-gesvj", c.batch, th, lapack("gesvj")));
      for (BenchRow& r : turns.take(c.name(), th, std::move(cs))) rows.push_back(std::move(r));
    }
  }
  set_num_threads(saved);
  const std::vector<int>& threads = turns.threads;
  for (int th : threads) {
    std::printf(
        "\nlinalg eigh/svd, %d thread%s: time per call (all matrices of the batch); "
        "lapack = syevd / gesdd\n",
        th, th == 1 ? "" : "s");
    std::printf("%-28s %10s %10s %9s %10s %9s %10s %9s\n", "case", "ms", "lapack ms", "x lapack",
                "gesvj ms", "x gesvj", "torch ms", "x torch");
    for (const SpectralCase& c : cases) {
      const BenchRow* ts = find_row(rows, "tessera", c.name(), th, true);
      if (!ts) continue;
      auto anchor = [&](const char* impl, std::string* ms, std::string* ratio) {
        const BenchRow* r = find_row(rows, impl, c.name(), th, true);
        *ms = r ? fmt::format("{:.3f}", r->stats->median_s * 1e3) : "-";
        *ratio = r ? fmt::format("{:.2f}x", r->stats->median_s / ts->stats->median_s) : "-";
      };
      std::string lms, lx, jms, jx, tms, tx;
      anchor("lapack", &lms, &lx);
      anchor("lapack-gesvj", &jms, &jx);
      anchor("torch", &tms, &tx);
      std::printf("%-28s %10.3f %10s %9s %10s %9s %10s %9s\n", c.name().c_str(),
                  ts->stats->median_s * 1e3, lms.c_str(), lx.c_str(), jms.c_str(), jx.c_str(),
                  tms.c_str(), tx.c_str());
    }
  }
  print_accuracy_table();
}

}  // namespace tessera::cli
