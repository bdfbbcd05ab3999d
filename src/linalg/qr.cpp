// torch.linalg.qr, torch.geqrf and torch.linalg.householder_product: geqrf / orgqr
// (qr_kernels.cpp) on a contiguous copy of every matrix, one matrix per task for batches of
// small matrices (for_each_matrix), each large matrix with its GEMMs spread over the pool.
// Batches of real matrices of at most kSmallMax rows and columns run the lane-interleaved
// kernels instead (small/small_kernels.h: one matrix per SIMD lane).
#include <algorithm>
#include <cmath>
#include <optional>

#include "linalg/common.h"
#include "linalg/qr_internal.h"
#include "linalg/small_batch.h"
#include "tessera/ops/factory.h"

namespace tessera::linalg {

using namespace detail;

namespace {

enum class QrMode { kReduced, kComplete, kR };

QrMode parse_mode(std::string_view op, std::string_view mode) {
  if (mode == "reduced") return QrMode::kReduced;
  if (mode == "complete") return QrMode::kComplete;
  if (mode == "r") return QrMode::kR;
  throw RuntimeError(fmt::format(
      "{}(): argument 'mode' expected one of 'reduced', 'complete' or 'r', but got '{}'", op,
      mode));
}

// The order whose cube is the flop count of an m x n QR (for_each_matrix's cost hint).
int64_t qr_order(int64_t m, int64_t n) {
  const double mnk = double(m) * double(n) * double(std::min(m, n));
  return static_cast<int64_t>(std::cbrt(mnk));
}

}  // namespace

namespace detail {

std::tuple<Tensor, Tensor> geqrf_work(const Tensor& A, std::string_view op) {
  const DimVector batch_dims = batch_shape(A);
  const int64_t m = A.size(-2), n = A.size(-1), k = std::min(m, n);
  const int64_t batch = numel_of(batch_dims);
  Tensor a, tau;
  visit_linalg_dtype(A.dtype(), op, [&]<class T>() {
    if (k > 0 && use_small_kernels<T>(std::max(m, n), batch)) {
      // Lane-interleaved: A read once, the factor written once.
      const Tensor in = plain_or_copy(A, batch_dims);
      a = empty(concat(batch_dims, {m, n}), A.dtype());
      tau = empty(concat(batch_dims, {k}), A.dtype());
      const T* src = static_cast<const T*>(in.data_ptr());
      T* dst = static_cast<T*>(a.data_ptr());
      T* tb = static_cast<T*>(tau.data_ptr());
      for_each_group<T>(batch, [&](int64_t b0, int64_t count) {
        small_geqrf(m, n, count, src + b0 * m * n, dst + b0 * m * n, tb + b0 * k);
      });
      return;
    }
    a = contiguous_matrices(A, batch_dims);
    tau = zeros(concat(batch_dims, {k}), A.dtype());
    if (k == 0) return;
    T* ab = static_cast<T*>(a.data_ptr());
    T* tb = static_cast<T*>(tau.data_ptr());
    for_each_matrix(batch, qr_order(m, n),
                    [&](int64_t b) { geqrf(m, n, ab + b * m * n, n, int64_t{1}, tb + b * k); });
  });
  return {a, tau};
}

Tensor orgqr_work(const Tensor& a, const Tensor& tau, int64_t nq, std::string_view op) {
  const DimVector batch_dims = batch_shape(a);
  const int64_t m = a.size(-2), na = a.size(-1), k = tau.size(-1);
  Tensor q = empty(concat(batch_dims, {m, nq}), a.dtype());
  if (q.numel() == 0) return q;
  const Tensor t = tau.contiguous();
  const int64_t batch = numel_of(batch_dims);
  visit_linalg_dtype(a.dtype(), op, [&]<class T>() {
    T* qb = static_cast<T*>(q.data_ptr());
    const T* tb = static_cast<const T*>(t.data_ptr());
    if (use_small_kernels<T>(std::max(m, na), batch)) {
      const Tensor in = plain_or_copy(a, batch_dims);
      const T* src = static_cast<const T*>(in.data_ptr());
      for_each_group<T>(batch, [&](int64_t b0, int64_t count) {
        small_orgqr(m, na, nq, k, count, src + b0 * m * na, tb + b0 * k, qb + b0 * m * nq);
      });
      return;
    }
    if (k > 0) q.narrow(-1, 0, k).copy_(a.narrow(-1, 0, k));
    for_each_matrix(batch, qr_order(m, nq), [&](int64_t b) {
      orgqr(m, nq, k, qb + b * m * nq, nq, int64_t{1}, tb + b * k);
    });
  });
  return q;
}

}  // namespace detail

std::tuple<Tensor, Tensor> qr(const Tensor& A, std::string_view mode) {
  constexpr std::string_view op = "linalg.qr";
  check_no_grad(op, {A});
  check_matrix_input(op, A, "A");
  const QrMode md = parse_mode(op, mode);
  const int64_t m = A.size(-2), n = A.size(-1), k = std::min(m, n);
  const DimVector batch_dims = batch_shape(A);
  const int64_t batch = numel_of(batch_dims);
  const int64_t nq = md == QrMode::kComplete ? m : k;
  // Batches of small real matrices: Q and R from one pass of the lane kernels.
  std::optional<std::tuple<Tensor, Tensor>> lanes;
  visit_linalg_dtype(A.dtype(), op, [&]<class T>() {
    if (k == 0 || !use_small_kernels<T>(std::max(m, n), batch)) return;
    const Tensor in = plain_or_copy(A, batch_dims);
    const bool want_q = md != QrMode::kR;
    Tensor Q = want_q ? empty(concat(batch_dims, {m, nq}), A.dtype()) : empty({0}, A.dtype());
    Tensor R = empty(concat(batch_dims, {nq, n}), A.dtype());
    const T* src = static_cast<const T*>(in.data_ptr());
    T* qd = want_q ? static_cast<T*>(Q.data_ptr()) : nullptr;
    T* rd = static_cast<T*>(R.data_ptr());
    for_each_group<T>(batch, [&](int64_t b0, int64_t count) {
      small_qr(m, n, nq, nq, count, src + b0 * m * n, qd ? qd + b0 * m * nq : nullptr,
               rd + b0 * nq * n);
    });
    lanes.emplace(Q, R);
  });
  if (lanes) return *lanes;
  auto [a, tau] = geqrf_work(A, op);
  const Tensor R = a.narrow(-2, 0, nq).triu().contiguous();
  if (md == QrMode::kR) return {empty({0}, A.dtype()), R};
  return {orgqr_work(a, tau, nq, op), R};
}

std::tuple<Tensor, Tensor> geqrf(const Tensor& A) {
  constexpr std::string_view op = "geqrf";
  check_no_grad(op, {A});
  check_matrix_input(op, A, "A");
  return geqrf_work(A, op);
}

Tensor householder_product(const Tensor& A, const Tensor& tau) {
  constexpr std::string_view op = "linalg.householder_product";
  check_no_grad(op, {A, tau});
  check_matrix_input(op, A, "A");
  TS_CHECK(tau.defined(), ValueError, "{}(): argument 'tau' expected a tensor, but got undefined",
           op);
  check_same_dtype(op, A, "A", tau, "tau");
  TS_CHECK(tau.dim() == A.dim() - 1, RuntimeError,
           "{}(): argument 'tau' expected {} dimensions (one less than A), but got {}", op,
           A.dim() - 1, tau.dim());
  const DimVector batch_dims = batch_shape(A);
  TS_CHECK(batch_shape(tau, 1) == batch_dims, RuntimeError,
           "{}(): argument 'tau' expected batch dimensions {} (those of A), but got {}", op,
           batch_dims, batch_shape(tau, 1));
  const int64_t m = A.size(-2), n = A.size(-1), k = tau.size(-1);
  TS_CHECK(m >= n, RuntimeError,
           "{}(): argument 'A' expected at least as many rows as columns, but got {} by {} "
           "matrices",
           op, m, n);
  TS_CHECK(k <= n, RuntimeError,
           "{}(): argument 'tau' expected at most {} reflectors (A's columns), but got {}", op, n,
           k);
  return orgqr_work(A, tau, n, op);
}

}  // namespace tessera::linalg
