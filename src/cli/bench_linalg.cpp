// `tessera bench linalg`: tessera::linalg::cholesky, lu_factor, solve and inv against LAPACK
// (OpenBLAS's potrf/getrf/gesv/getri) and PyTorch 1.13 (bench/torch_linalg.py), float32 and
// float64, on single matrices (n = 64, 256, 1024, 2048) and batches of 10,000 small ones (8, 16,
// 32). QR rows: geqrf (against LAPACK's geqrf and torch.geqrf) and qr (Q and R: against geqrf +
// orgqr and torch.linalg.qr) on n = 256, 1024, 2048 and batches of 10,000 of n = 4, 8, 16, 32.
//
// Case names: `<op>/<dtype>/<batch>x<n>x<n>`. Every implementation starts from the same input
// and returns a new factor, so each LAPACK call is preceded by a copy of its matrix (potrf and
// getrf overwrite their input), as Tessera's and PyTorch's calls copy too.
//
// Tessera, LAPACK and PyTorch take turns on each case (LinalgTurns, bench_linalg.h).
// Threads: Tessera's pool at each thread count. The LAPACK anchor spreads a batch over the same
// pool with OpenBLAS single-threaded inside each call (ARCHITECTURE.md: one pool); a single
// matrix runs OpenBLAS with openblas_set_num_threads(t). GFLOP/s count n^3/3 (Cholesky) and
// 2n^3/3 (LU), 4n^3/3 (geqrf) and 8n^3/3 (qr) per matrix.
//
// Factor + solve rows (`cholesky-solve`, `lu-solve`, batches of 10,000 of n = 4, 8, 16, 32):
// the factorization and one solve with a single right-hand side per matrix, as a user solving
// many small systems runs them: linalg::cholesky + cholesky_solve and lu_factor + lu_solve,
// LAPACK's potrf + potrs and getrf + getrs, PyTorch's linalg.cholesky + cholesky_solve and
// linalg.lu_factor + linalg.lu_solve. GFLOP/s count the factorization and 2n^2 for the solve.
//
// Solve and inverse rows (`solve`, `inv`; single matrices of n = 256, 1024, 2048 and batches of
// 10,000 of n = 4, 8, 16, 32): linalg::solve against LAPACK's gesv and torch.linalg.solve, with
// n right-hand sides (B n x n) on a single matrix, 8n^3/3 flops (getrf and two triangular
// solves), and one per matrix in a batch, 2n^3/3 + 2n^2 (LU factor + solve in one call, where
// the lu-solve rows make two); linalg::inv against LAPACK's getrf + getri and torch.linalg.inv,
// 2n^3 flops (getri's count, whatever the method).
//
// Least squares rows (`lstsq`, single matrices of n = 256, 1024, 2048): linalg::lstsq with its
// default driver (gelsy: QR with column pivoting, rank by condition estimation) and one
// right-hand side, against LAPACK's gelsy and torch.linalg.lstsq (whose CPU default is gelsy),
// rcond = eps * n as PyTorch's default; 4n^3/3 flops (geqp3's count).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/bench.h"
#include "cli/bench_anchors.h"
#include "cli/bench_linalg.h"
#include "cli/bench_util.h"
#include "tessera/tessera.h"

extern "C" {
void spotrf_(const char*, const int*, float*, const int*, int*);
void dpotrf_(const char*, const int*, double*, const int*, int*);
void sgetrf_(const int*, const int*, float*, const int*, int*, int*);
void dgetrf_(const int*, const int*, double*, const int*, int*, int*);
void spotrs_(const char*, const int*, const int*, const float*, const int*, float*, const int*,
             int*);
void dpotrs_(const char*, const int*, const int*, const double*, const int*, double*, const int*,
             int*);
void sgetrs_(const char*, const int*, const int*, const float*, const int*, const int*, float*,
             const int*, int*);
void dgetrs_(const char*, const int*, const int*, const double*, const int*, const int*, double*,
             const int*, int*);
void sgesv_(const int*, const int*, float*, const int*, int*, float*, const int*, int*);
void dgesv_(const int*, const int*, double*, const int*, int*, double*, const int*, int*);
void sgetri_(const int*, float*, const int*, const int*, float*, const int*, int*);
void dgetri_(const int*, double*, const int*, const int*, double*, const int*, int*);
// QR rows (geqrf, qr).
void sgeqrf_(const int*, const int*, float*, const int*, float*, float*, const int*, int*);
void dgeqrf_(const int*, const int*, double*, const int*, double*, double*, const int*, int*);
void sorgqr_(const int*, const int*, const int*, float*, const int*, const float*, float*,
             const int*, int*);
void dorgqr_(const int*, const int*, const int*, double*, const int*, const double*, double*,
             const int*, int*);
// lstsq rows.
void sgelsy_(const int*, const int*, const int*, float*, const int*, float*, const int*, int*,
             const float*, int*, float*, const int*, int*);
void dgelsy_(const int*, const int*, const int*, double*, const int*, double*, const int*, int*,
             const double*, int*, double*, const int*, int*);
}

namespace tessera::cli {

namespace {

struct LinalgCase {
  // "cholesky", "lu_factor", "cholesky-solve", "lu-solve", "geqrf", "qr", "solve", "inv" or
  // "lstsq"
  std::string op;
  ScalarType dtype;
  int64_t batch, n;
  std::string name() const { return fmt::format("{}/{}/{}x{}x{}", op, dtype, batch, n, n); }
  bool solves() const { return op.ends_with("-solve"); }
  bool cholesky() const { return op.starts_with("cholesky"); }
  // Right-hand sides per matrix: one in the factor + solve rows and batched solves, n in a
  // single matrix's solve.
  int64_t rhs_cols() const {
    if (solves() || op == "lstsq") return 1;
    if (op == "solve") return batch == 1 ? n : 1;
    return 0;
  }
  double flops() const {
    const double n3 = double(n) * double(n) * double(n);
    if (op == "geqrf" || op == "lstsq") return double(batch) * 4 * n3 / 3;
    if (op == "qr") return double(batch) * 8 * n3 / 3;  // geqrf + orgqr
    if (op == "inv") return double(batch) * 2 * n3;     // getrf + getri
    const double solve = 2.0 * double(n) * double(n) * double(rhs_cols());
    return double(batch) * ((cholesky() ? n3 / 3 : 2 * n3 / 3) + solve);
  }
};

// Symmetric positive-definite inputs for cholesky (B B^T / n + I), Gaussian ones for LU.
Tensor bench_input(const LinalgCase& c) {
  manual_seed(0);
  const Tensor b = randn({c.batch, c.n, c.n}, c.dtype);
  if (!c.cholesky()) return b;
  return b.bmm(b.transpose(1, 2)).div(double(c.n)).add(eye(c.n, c.n, c.dtype));
}

// One LAPACK factorization of the n x n matrix `a` (column-major; the inputs are symmetric or
// random, so row-major data serves as well) in place, then (rhs non-null) one solve with the
// right-hand side rhs (n values) in place.
template <class T>
void lapack_factor(bool cholesky, int n, T* a, int* ipiv, T* rhs) {
  int info = 0;
  const int one = 1;
  if (cholesky) {
    if constexpr (std::is_same_v<T, float>) spotrf_("L", &n, a, &n, &info);
    if constexpr (std::is_same_v<T, double>) dpotrf_("L", &n, a, &n, &info);
    if (!rhs) return;
    if constexpr (std::is_same_v<T, float>) spotrs_("L", &n, &one, a, &n, rhs, &n, &info);
    if constexpr (std::is_same_v<T, double>) dpotrs_("L", &n, &one, a, &n, rhs, &n, &info);
  } else {
    if constexpr (std::is_same_v<T, float>) sgetrf_(&n, &n, a, &n, ipiv, &info);
    if constexpr (std::is_same_v<T, double>) dgetrf_(&n, &n, a, &n, ipiv, &info);
    if (!rhs) return;
    if constexpr (std::is_same_v<T, float>) sgetrs_("N", &n, &one, a, &n, ipiv, rhs, &n, &info);
    if constexpr (std::is_same_v<T, double>) dgetrs_("N", &n, &one, a, &n, ipiv, rhs, &n, &info);
  }
}

// ---- QR rows: geqrf alone, and qr = geqrf + orgqr (Q in `q`, R left in `a`) -------------------

template <class T>
void lapack_qr(const std::string& op, int n, T* a, T* q) {
  thread_local std::vector<T> tau, work;
  int info = 0, lwork = std::max(1, n) * 64;
  tau.resize(static_cast<size_t>(n));
  work.resize(static_cast<size_t>(lwork));
  if constexpr (std::is_same_v<T, float>)
    sgeqrf_(&n, &n, a, &n, tau.data(), work.data(), &lwork, &info);
  if constexpr (std::is_same_v<T, double>)
    dgeqrf_(&n, &n, a, &n, tau.data(), work.data(), &lwork, &info);
  if (op != "qr") return;
  std::memcpy(q, a, sizeof(T) * n * n);
  if constexpr (std::is_same_v<T, float>)
    sorgqr_(&n, &n, &n, q, &n, tau.data(), work.data(), &lwork, &info);
  if constexpr (std::is_same_v<T, double>)
    dorgqr_(&n, &n, &n, q, &n, tau.data(), work.data(), &lwork, &info);
}

bool is_qr_op(const std::string& op) {
  return op == "geqrf" || op == "qr";
}

// ---- solve (gesv; B n x nrhs in `b`, overwritten by X) and inv (getrf + getri) rows ----------

template <class T>
void lapack_solve_or_inv(const std::string& op, int n, int nrhs, T* a, int* ipiv, T* b) {
  int info = 0;
  if (op == "solve") {
    if constexpr (std::is_same_v<T, float>) sgesv_(&n, &nrhs, a, &n, ipiv, b, &n, &info);
    if constexpr (std::is_same_v<T, double>) dgesv_(&n, &nrhs, a, &n, ipiv, b, &n, &info);
    return;
  }
  thread_local std::vector<T> work;
  int lwork = std::max(1, n) * 64;
  work.resize(static_cast<size_t>(lwork));
  if constexpr (std::is_same_v<T, float>) {
    sgetrf_(&n, &n, a, &n, ipiv, &info);
    sgetri_(&n, a, &n, ipiv, work.data(), &lwork, &info);
  }
  if constexpr (std::is_same_v<T, double>) {
    dgetrf_(&n, &n, a, &n, ipiv, &info);
    dgetri_(&n, a, &n, ipiv, work.data(), &lwork, &info);
  }
}

bool is_solve_or_inv(const std::string& op) {
  return op == "solve" || op == "inv";
}

// ---- lstsq (gelsy with rcond = eps * n; B n x nrhs in `b`, overwritten by X) -----------------

template <class T>
void lapack_gelsy(int n, int nrhs, T* a, T* b) {
  thread_local std::vector<T> work;
  thread_local std::vector<int> jpvt;
  jpvt.assign(static_cast<size_t>(n), 0);  // every column free to move
  const T rcond = std::numeric_limits<T>::epsilon() * T(n);
  int rank = 0, info = 0, lwork = -1;
  T query = 0;
  auto call = [&](T* w, int lw) {
    if constexpr (std::is_same_v<T, float>)
      sgelsy_(&n, &n, &nrhs, a, &n, b, &n, jpvt.data(), &rcond, &rank, w, &lw, &info);
    if constexpr (std::is_same_v<T, double>)
      dgelsy_(&n, &n, &nrhs, a, &n, b, &n, jpvt.data(), &rcond, &rank, w, &lw, &info);
  };
  call(&query, lwork);
  lwork = static_cast<int>(query);
  work.resize(static_cast<size_t>(std::max(1, lwork)));
  call(work.data(), lwork);
}

// `rhs` / `x`: the right-hand sides and their solutions ([batch, n, rhs_cols]) of the -solve and
// solve rows.
template <class T>
void lapack_batch(const LinalgCase& c, const Tensor& input, Tensor& work, Tensor& pivots, Tensor& q,
                  const Tensor& rhs, Tensor& x) {
  const int n = static_cast<int>(c.n);
  const T* in = input.data_ptr<T>();
  T* out = work.data_ptr<T>();
  int* piv = pivots.data_ptr<int32_t>();
  auto one = [&](int64_t b) {
    std::memcpy(out + b * n * n, in + b * n * n, sizeof(T) * n * n);
    if (is_qr_op(c.op)) {
      lapack_qr(c.op, n, out + b * n * n, q.data_ptr<T>() + b * n * n);
      return;
    }
    const int nrhs = static_cast<int>(c.rhs_cols());
    T* xb = nullptr;
    if (nrhs > 0) {
      xb = x.data_ptr<T>() + b * n * nrhs;
      std::memcpy(xb, rhs.data_ptr<T>() + b * n * nrhs, sizeof(T) * n * nrhs);
    }
    if (is_solve_or_inv(c.op)) {
      lapack_solve_or_inv(c.op, n, nrhs, out + b * n * n, piv + b * n, xb);
      return;
    }
    if (c.op == "lstsq") {
      lapack_gelsy(n, nrhs, out + b * n * n, xb);
      return;
    }
    lapack_factor(c.cholesky(), n, out + b * n * n, piv + b * n, xb);
  };
  if (c.batch == 1) {
    one(0);
    return;
  }
  parallel_for(0, c.batch, 64, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) one(b);
  });
}

}  // namespace

std::vector<BenchRow> LinalgTurns::take(const std::string& name, int t,
                                        std::vector<Contender> cs) const {
  if (const auto it = torch.find(t); it != torch.end())
    cs.push_back(script_contender(it->second.get(), t));
  return take_turns("linalg", name, t, rounds, turn, cs);
}

Contender lapack_contender(std::string impl, int64_t batch, int t, std::function<void()> run) {
  Contender c = openblas_contender(batch == 1 ? t : 1, std::move(run));
  c.impl = std::move(impl);
  if (batch > 1) {
    c.enter = [enter = c.enter, t] {
      enter();
      set_num_threads(t);
    };
  }
  return c;
}

int run_bench_linalg(const BenchOptions& options) {
  LinalgTurns turns;
  turns.threads = options.threads.empty() ? default_threads() : options.threads;
  turns.rounds = options.quick ? 5 : 11;
  turns.turn = Budget{1, 0.03, 2000};
  std::vector<LinalgCase> cases;
  for (const char* op : {"cholesky", "lu_factor"})
    for (ScalarType dt : {kFloat32, kFloat64}) {
      for (int64_t n : {64, 256, 1024, 2048}) cases.push_back({op, dt, 1, n});
      for (int64_t n : {8, 16, 32}) cases.push_back({op, dt, 10000, n});
    }
  for (const char* op : {"cholesky-solve", "lu-solve"})
    for (ScalarType dt : {kFloat32, kFloat64})
      for (int64_t n : {4, 8, 16, 32}) cases.push_back({op, dt, 10000, n});
  // QR rows: geqrf (R and the reflectors) and qr (with Q: geqrf + orgqr).
  for (const char* op : {"geqrf", "qr"})
    for (ScalarType dt : {kFloat32, kFloat64}) {
      for (int64_t n : {256, 1024, 2048}) cases.push_back({op, dt, 1, n});
      for (int64_t n : {4, 8, 16, 32}) cases.push_back({op, dt, 10000, n});
    }
  for (const char* op : {"solve", "inv"})
    for (ScalarType dt : {kFloat32, kFloat64}) {
      for (int64_t n : {256, 1024, 2048}) cases.push_back({op, dt, 1, n});
      for (int64_t n : {4, 8, 16, 32}) cases.push_back({op, dt, 10000, n});
    }
  for (ScalarType dt : {kFloat32, kFloat64})
    for (int64_t n : {256, 1024, 2048}) cases.push_back({"lstsq", dt, 1, n});
  if (options.quick)
    std::erase_if(cases, [](const LinalgCase& c) { return c.n == 64 || c.n == 16; });
  std::erase_if(cases, [&](const LinalgCase& c) {
    return c.name().find(options.filter) == std::string::npos;
  });
  turns.torch =
      lockstep_per_thread_count("torch_linalg.py", {}, turns.threads, turns.turn, "torch");

  std::vector<BenchRow> rows;
  const int saved = get_num_threads();
  size_t done = 0;
  for (const LinalgCase& c : cases) {
    std::fprintf(stderr, "bench linalg: [%zu/%zu] %s\n", ++done, cases.size(), c.name().c_str());
    const Tensor a = bench_input(c);
    const Tensor rhs = c.rhs_cols() > 0 ? randn({c.batch, c.n, c.rhs_cols()}, c.dtype) : Tensor();
    Tensor work = empty_like(a), pivots = empty({c.batch, c.n}, kInt32);
    Tensor q = is_qr_op(c.op) ? empty_like(a) : Tensor();
    Tensor x = rhs.defined() ? empty_like(rhs) : Tensor();
    auto tessera = [&] {
      if (c.op == "cholesky-solve") {
        (void)linalg::cholesky_solve(rhs, linalg::cholesky(a));
      } else if (c.op == "lu-solve") {
        auto [lu, piv] = linalg::lu_factor(a);
        (void)linalg::lu_solve(lu, piv, rhs);
      } else if (c.op == "cholesky") {
        (void)linalg::cholesky(a);
      } else if (c.op == "geqrf") {
        (void)linalg::geqrf(a);
      } else if (c.op == "qr") {
        (void)linalg::qr(a);
      } else if (c.op == "solve") {
        (void)linalg::solve(a, rhs);
      } else if (c.op == "inv") {
        (void)linalg::inv(a);
      } else if (c.op == "lstsq") {
        (void)linalg::lstsq(a, rhs);
      } else {
        (void)linalg::lu_factor(a);
      }
    };
    auto lapack = [&] {
      if (c.dtype == kFloat32) {
        lapack_batch<float>(c, a, work, pivots, q, rhs, x);
      } else {
        lapack_batch<double>(c, a, work, pivots, q, rhs, x);
      }
    };
    for (int th : turns.threads) {
      for (BenchRow& r : turns.take(c.name(), th,
                                    {tessera_contender("tessera", th, tessera),
                                     lapack_contender("lapack", c.batch, th, lapack)})) {
        if (r.stats && r.impl != "torch") r.gflops = c.flops() / r.stats->median_s * 1e-9;
        rows.push_back(std::move(r));
      }
    }
  }
  set_num_threads(saved);
  std::vector<std::string> notes = {openblas_kernel_note()};
  for (int th : turns.threads) {
    std::printf("\nlinalg, %d thread%s: time per call (all matrices of the batch)\n", th,
                th == 1 ? "" : "s");
    std::printf("%-34s %10s %8s %10s %9s %10s %9s\n", "case", "ms", "GFLOP/s", "lapack ms",
                "x lapack", "torch ms", "x torch");
    for (const LinalgCase& c : cases) {
      const BenchRow* ts = find_row(rows, "tessera", c.name(), th, true);
      if (!ts) continue;
      auto anchor = [&](const char* impl, std::string* ms, std::string* ratio) {
        const BenchRow* r = find_row(rows, impl, c.name(), th, true);
        *ms = r ? fmt::format("{:.3f}", r->stats->median_s * 1e3) : "skipped";
        *ratio = r ? fmt::format("{:.2f}x", r->stats->median_s / ts->stats->median_s) : "-";
      };
      std::string lms, lx, tms, tx;
      anchor("lapack", &lms, &lx);
      anchor("torch", &tms, &tx);
      std::printf("%-34s %10.3f %8.1f %10s %9s %10s %9s\n", c.name().c_str(),
                  ts->stats->median_s * 1e3, *ts->gflops, lms.c_str(), lx.c_str(), tms.c_str(),
                  tx.c_str());
    }
  }
  // ---- eigh / svd (bench_linalg_spectral.cpp) ----
  run_bench_linalg_spectral(options, turns, rows);
  for (const auto& [t, server] : turns.torch)
    if (!server->note().empty()) notes.push_back(server->note());
  for (const auto& r : rows)
    if (!r.skipped.empty())
      notes.push_back(
          fmt::format("{} {} ({} threads) skipped: {}", r.impl, r.case_name, r.threads, r.skipped));
  return finish_bench("linalg", notes, options.json_path, rows);
}

}  // namespace tessera::cli
