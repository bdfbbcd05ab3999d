// torch.linalg.eigh / eigvalsh.
//
// Each matrix is copied (contiguous, row-major) and its other triangle filled with the
// conjugate of the one read, then decomposed by heev (spectral.h: Jacobi up to
// kJacobiMaxOrder, tridiagonal QL above). Batches of small real matrices go to the
// lane-interleaved tridiagonal QR (small/lane_tridiagonal.h), which reads the triangle in place
// when the batch is in the plain layout; a matrix it does not finish is redone by heev.
#include <cmath>

#include "linalg/common.h"
#include "linalg/small_batch.h"
#include "linalg/spectral.h"
#include "linalg/svd_internal.h"
#include "tessera/ops/factory.h"

namespace tessera::linalg {

using namespace detail;

namespace {

template <class T>
void heev_small_batch(int64_t n, int64_t count, const T* a, bool upper, T* w, T* v, int32_t* info) {
  const auto& k = TS_DISPATCH(spectral_small_kernels);
  if constexpr (std::is_same_v<T, float>) k.heev_f32(n, count, a, upper, w, v, info);
  if constexpr (std::is_same_v<T, double>) k.heev_f64(n, count, a, upper, w, v, info);
}

// Fills the other triangle of the n x n row-major matrix `a` with the conjugate of the one
// read (`lower` or upper) and makes the diagonal real.
template <class T>
void hermitian_from_triangle(T* a, int64_t n, bool lower) {
  for (int64_t i = 0; i < n; ++i) {
    a[i * n + i] = T(real_part(a[i * n + i]));
    for (int64_t j = i + 1; j < n; ++j) {
      if (lower) {
        a[i * n + j] = conj_of(a[j * n + i]);
      } else {
        a[j * n + i] = conj_of(a[i * n + j]);
      }
    }
  }
}

// The first of `batch` row-major n x n matrices (n * n apart) with a non-finite entry in the
// triangle read, or -1.
template <class T>
int64_t first_nonfinite(const T* p, int64_t batch, int64_t n, bool lower) {
  auto finite = [](T x) { return std::isfinite(real_part(x)) && std::isfinite(std::abs(x)); };
  for (int64_t b = 0; b < batch; ++b) {
    const T* a = p + b * n * n;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = lower ? 0 : i; j < (lower ? i + 1 : n); ++j)
        if (!finite(a[i * n + j])) return b;
  }
  return -1;
}

}  // namespace

namespace detail {

std::tuple<Tensor, Tensor> eigh_work(const Tensor& A, bool lower, bool compute_v,
                                     std::string_view op) {
  const int64_t n = A.size(-1);
  const DimVector batch_dims = batch_shape(A);
  const int64_t batch = numel_of(batch_dims);
  Tensor W = empty(concat(batch_dims, {n}), to_real_type(A.dtype()));
  Tensor V = compute_v ? empty(concat(batch_dims, {n, n}), A.dtype()) : Tensor();
  std::vector<int32_t> info(static_cast<size_t>(batch), 0);
  auto check_finite = [&]<class T>(const T* p) {
    const int64_t bad = first_nonfinite(p, batch, n, lower);
    if (bad >= 0)
      throw LinAlgError(
          fmt::format("{}(): {}The algorithm failed to converge because the input matrix contained "
                      "non-finite values.",
                      op, batch_prefix(A.dim() - 2, bad)));
  };
  visit_linalg_dtype(A.dtype(), op, [&]<class T>() {
    using R = real_t<T>;
    R* w = static_cast<R*>(W.data_ptr());
    T* v = compute_v ? static_cast<T*>(V.data_ptr()) : nullptr;
    // heev on `m`, the Hermitian matrix b (row-major), which it overwrites.
    auto one = [&](T* m, int64_t b) {
      info[b] = static_cast<int32_t>(heev(n, m, w + b * n, compute_v ? v + b * n * n : nullptr));
    };
    if constexpr (std::is_same_v<T, R>) {
      if (use_small_kernels<T>(n, batch)) {
        // The lane kernels read the triangle (in place when A is in the plain layout); heev
        // redoes on a copy what they hand back.
        const Tensor plain = plain_or_copy(A, batch_dims);
        const T* a = plain.data_ptr<T>();
        check_finite(a);
        for_each_group<T>(batch, [&](int64_t b0, int64_t count) {
          heev_small_batch(n, count, a + b0 * n * n, !lower, w + b0 * n,
                           compute_v ? v + b0 * n * n : nullptr, info.data() + b0);
        });
        std::vector<T> copy(static_cast<size_t>(n * n));
        for (int64_t b = 0; b < batch; ++b) {
          if (!info[b]) continue;
          std::copy(a + b * n * n, a + (b + 1) * n * n, copy.begin());
          hermitian_from_triangle(copy.data(), n, lower);
          one(copy.data(), b);
        }
        return;
      }
    }
    Tensor work = contiguous_matrices(A, batch_dims);
    T* base = static_cast<T*>(work.data_ptr());
    for (int64_t b = 0; b < batch; ++b) hermitian_from_triangle(base + b * n * n, n, lower);
    check_finite(base);
    for_each_matrix(batch, n, [&](int64_t b) { one(base + b * n * n, b); });
  });
  throw_if_not_converged(op, A.dim() - 2, info, "eigenvalues");
  return {W, V};
}

void throw_if_not_converged(std::string_view op, int64_t batch_dims,
                            const std::vector<int32_t>& info, std::string_view repeated) {
  for (size_t b = 0; b < info.size(); ++b)
    if (info[b])
      throw LinAlgError(
          fmt::format("{}(): {}The algorithm failed to converge because the input matrix is "
                      "ill-conditioned or has too many repeated {} (error code: {}).",
                      op, batch_prefix(batch_dims, static_cast<int64_t>(b)), repeated, info[b]));
}

}  // namespace detail

namespace {

std::tuple<Tensor, Tensor> eigh_impl(const Tensor& A, std::string_view UPLO, bool compute_v,
                                     std::string_view op) {
  check_no_grad(op, {A});
  check_square_input(op, A, "A");
  TS_CHECK(UPLO == "L" || UPLO == "U", RuntimeError,
           "{}(): argument 'UPLO' expected 'L' or 'U', but got '{}'", op, UPLO);
  return eigh_work(A, UPLO == "L", compute_v, op);
}

}  // namespace

std::tuple<Tensor, Tensor> eigh(const Tensor& A, std::string_view UPLO) {
  return eigh_impl(A, UPLO, true, "linalg.eigh");
}

Tensor eigvalsh(const Tensor& A, std::string_view UPLO) {
  return std::get<0>(eigh_impl(A, UPLO, false, "linalg.eigvalsh"));
}

}  // namespace tessera::linalg
