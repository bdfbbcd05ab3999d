// torch.linalg.pinv / matrix_rank / matrix_norm / cond, built on svd_work and eigh_work
// (svd_internal.h) and inv_ex, with PyTorch 1.13's tolerances and special values.
#include <cmath>
#include <limits>

#include "linalg/common.h"
#include "linalg/svd_internal.h"
#include "tessera/ops/factory.h"
#include "tessera/ops/pointwise.h"

namespace tessera::linalg {

using namespace detail;

namespace {

// PyTorch's get_atol_rtol: atol defaults to 0; rtol to eps * max(m, n), or to 0 when a positive
// atol is given.
std::pair<double, double> tolerances(const Tensor& A, std::optional<double> atol,
                                     std::optional<double> rtol) {
  const double eps = to_real_type(A.dtype()) == kFloat32 ? std::numeric_limits<float>::epsilon()
                                                         : std::numeric_limits<double>::epsilon();
  const double a = atol.value_or(0.0);
  const double r =
      rtol ? *rtol : (atol && *atol > 0 ? 0.0 : eps * double(std::max(A.size(-2), A.size(-1))));
  return {a, r};
}

void check_spectral_input(std::string_view op, const Tensor& A, bool hermitian) {
  check_no_grad(op, {A});
  if (hermitian) {
    check_square_input(op, A, "A");
  } else {
    check_matrix_input(op, A, "A");
  }
}

// Singular values [*, k] (|eigenvalues| when hermitian) and the tolerance max(atol, rtol * max)
// [*, 1].
std::pair<Tensor, Tensor> values_and_tolerance(const Tensor& S, double atol, double rtol) {
  const Tensor tol = S.amax({-1}, /*keepdim=*/true).mul(rtol).clamp(atol);
  return {S, tol};
}

}  // namespace

Tensor pinv(const Tensor& A, std::optional<double> atol, std::optional<double> rtol,
            bool hermitian) {
  constexpr std::string_view op = "linalg.pinv";
  check_spectral_input(op, A, hermitian);
  const int64_t m = A.size(-2), n = A.size(-1);
  const DimVector batch = batch_shape(A);
  if (A.numel() == 0) return zeros(concat(batch, {n, m}), A.dtype());
  const auto [at, rt] = tolerances(A, atol, rtol);
  if (hermitian) {
    auto [W, V] = eigh_work(A, /*lower=*/true, /*compute_v=*/true, op);
    const auto [Wabs, tol] = values_and_tolerance(W.abs(), at, rt);
    const Tensor winv = where(Wabs.gt(tol), ones_like(W).div(W), 0.0).to(A.dtype());
    return V.mul(winv.unsqueeze(-2)).matmul(adjoint_of(V));
  }
  auto [U, S, Vh] = svd_work(A, /*full_matrices=*/false, /*compute_uv=*/true, op);
  const auto [Sv, tol] = values_and_tolerance(S, at, rt);
  const Tensor sinv = where(Sv.gt(tol), ones_like(S).div(S), 0.0).to(A.dtype());
  return adjoint_of(Vh).mul(sinv.unsqueeze(-2)).matmul(adjoint_of(U));
}

Tensor matrix_rank(const Tensor& A, std::optional<double> atol, std::optional<double> rtol,
                   bool hermitian) {
  constexpr std::string_view op = "linalg.matrix_rank";
  check_spectral_input(op, A, hermitian);
  const DimVector batch = batch_shape(A);
  if (std::min(A.size(-2), A.size(-1)) == 0) return zeros(batch, kInt64);
  const auto [at, rt] = tolerances(A, atol, rtol);
  const Tensor S = hermitian ? std::get<0>(eigh_work(A, true, false, op)).abs()
                             : std::get<1>(svd_work(A, false, false, op));
  const auto [Sv, tol] = values_and_tolerance(S, at, rt);
  return Sv.gt(tol).sum({-1}, false, kInt64);
}

namespace {

constexpr std::string_view kNormOrders = "'fro', 'nuc', 2, -2, 1, -1, inf, -inf";

// The two matrix dims of `dim`, wrapped and checked.
std::pair<int64_t, int64_t> matrix_dims(std::string_view op, const Tensor& A,
                                        std::array<int64_t, 2> dim) {
  const int64_t nd = A.dim();
  int64_t d[2];
  for (int i = 0; i < 2; ++i) {
    TS_CHECK(dim[i] >= -nd && dim[i] < nd, IndexError,
             "{}(): argument 'dim' expected dims in [{}, {}], but got {}", op, -nd, nd - 1, dim[i]);
    d[i] = dim[i] < 0 ? dim[i] + nd : dim[i];
  }
  TS_CHECK(d[0] != d[1], RuntimeError,
           "{}(): argument 'dim' expected two different dimensions, but got ({}, {})", op, dim[0],
           dim[1]);
  return {d[0], d[1]};
}

// Singular values of the matrices spanned by dims (d0, d1): [other dims..., k].
Tensor singular_values_over(const Tensor& A, int64_t d0, int64_t d1, std::string_view op) {
  std::vector<int64_t> order;
  for (int64_t i = 0; i < A.dim(); ++i)
    if (i != d0 && i != d1) order.push_back(i);
  order.push_back(d0);
  order.push_back(d1);
  return std::get<1>(svd_work(A.permute(order), false, false, op));
}

// Puts back the two reduced dims (size 1) for keepdim.
Tensor restore_dims(Tensor r, int64_t d0, int64_t d1) {
  return r.unsqueeze(std::min(d0, d1)).unsqueeze(std::max(d0, d1));
}

Tensor matrix_norm_impl(const Tensor& A, std::string_view ord_name, double ord,
                        std::array<int64_t, 2> dim, bool keepdim) {
  constexpr std::string_view op = "linalg.matrix_norm";
  check_no_grad(op, {A});
  check_matrix_input(op, A, "A");
  const auto [d0, d1] = matrix_dims(op, A, dim);
  if (ord_name == "fro") return A.abs().pow(2).sum({d0, d1}, keepdim).sqrt();
  const bool spectral = ord_name == "nuc" || (ord_name.empty() && std::abs(ord) == 2);
  if (spectral) {
    const Tensor S = singular_values_over(A, d0, d1, op);
    Tensor r = ord_name == "nuc" ? S.sum({-1}) : ord > 0 ? S.amax({-1}) : S.amin({-1});
    return keepdim ? restore_dims(r, d0, d1) : r;
  }
  TS_CHECK(ord_name.empty() && (std::abs(ord) == 1 || std::isinf(ord)), RuntimeError,
           "{}(): argument 'ord' expected one of {}, but got {}", op, kNormOrders,
           ord_name.empty() ? fmt::format("{}", ord) : fmt::format("'{}'", ord_name));
  // ord 1: max over columns (d1) of the sum over rows (d0); inf: the other way round.
  const int64_t summed = std::abs(ord) == 1 ? d0 : d1, extreme = std::abs(ord) == 1 ? d1 : d0;
  const Tensor sums = A.abs().sum({summed}, /*keepdim=*/true);
  Tensor r = ord > 0 ? sums.amax({extreme}, true) : sums.amin({extreme}, true);
  return keepdim ? r : r.squeeze(std::max(d0, d1)).squeeze(std::min(d0, d1));
}

}  // namespace

Tensor matrix_norm(const Tensor& A, std::string_view ord, std::array<int64_t, 2> dim,
                   bool keepdim) {
  TS_CHECK(ord == "fro" || ord == "nuc", RuntimeError,
           "linalg.matrix_norm(): argument 'ord' expected one of {}, but got '{}'", kNormOrders,
           ord);
  return matrix_norm_impl(A, ord, 0.0, dim, keepdim);
}

Tensor matrix_norm(const Tensor& A, double ord, std::array<int64_t, 2> dim, bool keepdim) {
  return matrix_norm_impl(A, "", ord, dim, keepdim);
}

namespace {

// sigma_max / sigma_min (or its inverse for p = -2) of any m x n matrices.
Tensor cond_spectral(const Tensor& A, bool inverse) {
  constexpr std::string_view op = "linalg.cond";
  check_no_grad(op, {A});
  check_matrix_input(op, A, "A");
  const Tensor S = std::get<1>(svd_work(A, false, false, op));
  const int64_t k = S.size(-1);
  TS_CHECK(k > 0, RuntimeError,
           "{}(): argument 'A' expected non-empty matrices, but got {} by {} matrices", op,
           A.size(-2), A.size(-1));
  const Tensor hi = S.select(-1, 0), lo = S.select(-1, k - 1);
  return inverse ? lo.div(hi) : hi.div(lo);
}

// norm(A, p) * norm(A^-1, p) of square A; inf where A is singular.
template <class Ord>
Tensor cond_by_inverse(const Tensor& A, Ord p, std::string_view p_text) {
  constexpr std::string_view op = "linalg.cond";
  check_no_grad(op, {A});
  check_matrix_input(op, A, "A");
  TS_CHECK(A.size(-1) == A.size(-2), RuntimeError,
           "{}(): argument 'A' expected a batch of square matrices for p = {}, but got {} by {} "
           "matrices",
           op, p_text, A.size(-2), A.size(-1));
  auto [Ainv, info] = inv_ex(A);
  const Tensor r = matrix_norm(A, p).mul(matrix_norm(Ainv, p));
  return where(info.gt(0), std::numeric_limits<double>::infinity(), r);
}

}  // namespace

Tensor cond(const Tensor& A) {
  return cond_spectral(A, false);
}

Tensor cond(const Tensor& A, double p) {
  if (std::abs(p) == 2) return cond_spectral(A, p < 0);
  TS_CHECK(std::abs(p) == 1 || std::isinf(p), RuntimeError,
           "linalg.cond(): argument 'p' expected one of {}, but got {}", kNormOrders, p);
  return cond_by_inverse(A, p, fmt::format("{}", p));
}

Tensor cond(const Tensor& A, std::string_view p) {
  TS_CHECK(p == "fro" || p == "nuc", RuntimeError,
           "linalg.cond(): argument 'p' expected one of {}, but got '{}'", kNormOrders, p);
  return cond_by_inverse(A, p, fmt::format("'{}'", p));
}

}  // namespace tessera::linalg
