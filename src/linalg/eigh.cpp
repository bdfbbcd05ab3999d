// torch.linalg.eigh / eigvalsh.
//
// Each matrix is copied (contiguous, row-major) and its other triangle filled with the
// conjugate of the one read, then decomposed by heev (spectral.h: Jacobi up to
// kJacobiMaxOrder, tridiagonal QL above). Batches of small real matrices run the
// lane-interleaved Jacobi (small/spectral_small_kernels.h); a matrix it does not finish is
// redone by heev.
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
void heev_small_batch(int64_t n, int64_t count, const T* a, T* w, T* v, int32_t* info) {
  const auto& k = TS_DISPATCH(spectral_small_kernels);
  if constexpr (std::is_same_v<T, float>) k.heev_f32(n, count, a, w, v, info);
  if constexpr (std::is_same_v<T, double>) k.heev_f64(n, count, a, w, v, info);
}

// The first matrix of `work` (contiguous [batch, n, n]) with a non-finite entry, or -1.
template <class T>
int64_t first_nonfinite(const T* p, int64_t batch, int64_t per_matrix) {
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < per_matrix; ++i) {
      const T x = p[b * per_matrix + i];
      if (!std::isfinite(real_part(x)) || !std::isfinite(std::abs(x))) return b;
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
  Tensor work = contiguous_matrices(A, batch_dims);
  Tensor W = empty(concat(batch_dims, {n}), to_real_type(A.dtype()));
  Tensor V = compute_v ? empty(concat(batch_dims, {n, n}), A.dtype()) : Tensor();
  std::vector<int32_t> info(static_cast<size_t>(batch), 0);
  visit_linalg_dtype(A.dtype(), op, [&]<class T>() {
    using R = real_t<T>;
    T* base = static_cast<T*>(work.data_ptr());
    for (int64_t b = 0; b < batch; ++b) {  // the Hermitian matrix from the triangle read
      T* a = base + b * n * n;
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
    const int64_t bad = first_nonfinite(base, batch, n * n);
    if (bad >= 0)
      throw LinAlgError(
          fmt::format("{}(): {}The algorithm failed to converge because the input matrix contained "
                      "non-finite values.",
                      op, batch_prefix(A.dim() - 2, bad)));
    R* w = static_cast<R*>(W.data_ptr());
    T* v = compute_v ? static_cast<T*>(V.data_ptr()) : nullptr;
    auto one = [&](int64_t b) {
      info[b] = static_cast<int32_t>(
          heev(n, base + b * n * n, w + b * n, compute_v ? v + b * n * n : nullptr));
    };
    if constexpr (std::is_same_v<T, R>) {
      if (use_small_kernels<T>(n, batch)) {
        // The lane kernels only read `work`; heev (which overwrites it) redoes the rest.
        for_each_group<T>(batch, [&](int64_t b0, int64_t count) {
          heev_small_batch(n, count, base + b0 * n * n, w + b0 * n,
                           compute_v ? v + b0 * n * n : nullptr, info.data() + b0);
        });
        for (int64_t b = 0; b < batch; ++b)
          if (info[b]) one(b);
        return;
      }
    }
    for_each_matrix(batch, n, one);
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
