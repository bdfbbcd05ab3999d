// torch.linalg.svd / svdvals.
//
// Each matrix goes through gesvd (spectral.h: one-sided Jacobi up to kJacobiMaxOrder, QR-
// preconditioned when tall, the transpose when wide; bidiagonal QR above). Batches of small
// square real matrices run the lane-interleaved one-sided Jacobi
// (small/spectral_small_kernels.h); a matrix it does not finish, or one with a singular value
// at the noise floor (whose U column needs completing), is redone by gesvd.
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
void svd_small_batch(int64_t n, int64_t count, const T* a, T* s, T* u, T* vh, int32_t* info) {
  const auto& k = TS_DISPATCH(spectral_small_kernels);
  if constexpr (std::is_same_v<T, float>) k.svd_f32(n, count, a, s, u, vh, info);
  if constexpr (std::is_same_v<T, double>) k.svd_f64(n, count, a, s, u, vh, info);
}

}  // namespace

namespace detail {

std::tuple<Tensor, Tensor, Tensor> svd_work(const Tensor& A, bool full_matrices, bool compute_uv,
                                            std::string_view op) {
  const int64_t m = A.size(-2), n = A.size(-1), k = std::min(m, n);
  const DimVector batch_dims = batch_shape(A);
  const int64_t batch = numel_of(batch_dims);
  const Tensor in = A.contiguous();
  const bool full = full_matrices && compute_uv;
  const int64_t ucols = full ? m : k, vrows = full ? n : k;
  Tensor S = empty(concat(batch_dims, {k}), to_real_type(A.dtype()));
  Tensor U = compute_uv ? empty(concat(batch_dims, {m, ucols}), A.dtype()) : Tensor();
  Tensor Vh = compute_uv ? empty(concat(batch_dims, {vrows, n}), A.dtype()) : Tensor();
  std::vector<int32_t> info(static_cast<size_t>(batch), 0);
  visit_linalg_dtype(A.dtype(), op, [&]<class T>() {
    using R = real_t<T>;
    const T* a = static_cast<const T*>(in.data_ptr());
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t i = 0; i < m * n; ++i) {
        const T x = a[b * m * n + i];
        if (!std::isfinite(real_part(x)) || !std::isfinite(std::abs(x)))
          throw LinAlgError(fmt::format(
              "{}(): {}The algorithm failed to converge because the input matrix contained "
              "non-finite values.",
              op, batch_prefix(A.dim() - 2, b)));
      }
    R* s = static_cast<R*>(S.data_ptr());
    T* u = compute_uv ? static_cast<T*>(U.data_ptr()) : nullptr;
    T* vh = compute_uv ? static_cast<T*>(Vh.data_ptr()) : nullptr;
    auto one = [&](int64_t b) {
      info[b] = static_cast<int32_t>(gesvd(m, n, a + b * m * n, n, s + b * k,
                                           u ? u + b * m * ucols : nullptr,
                                           vh ? vh + b * vrows * n : nullptr, full));
    };
    if constexpr (std::is_same_v<T, R>) {
      if (m == n && use_small_kernels<T>(n, batch)) {
        for_each_group<T>(batch, [&](int64_t b0, int64_t count) {
          svd_small_batch(n, count, a + b0 * n * n, s + b0 * n, u ? u + b0 * n * n : nullptr,
                          vh ? vh + b0 * n * n : nullptr, info.data() + b0);
        });
        for (int64_t b = 0; b < batch; ++b)
          if (info[b]) one(b);
        return;
      }
    }
    for_each_matrix(batch, k, one);
  });
  throw_if_not_converged(op, A.dim() - 2, info, "singular values");
  return {U, S, Vh};
}

}  // namespace detail

std::tuple<Tensor, Tensor, Tensor> svd(const Tensor& A, bool full_matrices) {
  constexpr std::string_view op = "linalg.svd";
  check_no_grad(op, {A});
  check_matrix_input(op, A, "A");
  return svd_work(A, full_matrices, true, op);
}

Tensor svdvals(const Tensor& A) {
  constexpr std::string_view op = "linalg.svdvals";
  check_no_grad(op, {A});
  check_matrix_input(op, A, "A");
  return std::get<1>(svd_work(A, false, false, op));
}

}  // namespace tessera::linalg
