// torch.linalg.cholesky / cholesky_ex, torch.cholesky_solve, torch.cholesky_inverse.
//
// The factor is computed in the upper form A = U^H U (potrf_upper, cholesky_kernels.cpp) on a
// copy of the triangle it reads: upper=true copies A's upper triangle and returns U; the default
// copies A's lower triangle transposed (the upper triangle of A^H) and returns L = U^H, transposed
// back in place. Batches of small real matrices run the lane kernels in the lower form. Solves run
// two triangular solves per matrix with L read in place through its own strides (trsm_left; a
// transpose is a swap of strides, the adjoint a swap plus conj).
#include <algorithm>
#include <cmath>

#include "linalg/common.h"
#include "linalg/kernels.h"
#include "linalg/leaf/leaf_kernels.h"
#include "linalg/small_batch.h"
#include "tessera/core/parallel.h"
#include "tessera/ops/factory.h"
#include "tessera/ops/pointwise.h"

namespace tessera::linalg {

using namespace detail;

namespace {

// conj(t)^T over the last two dims (a view for real tensors, a copy for complex ones).
Tensor adjoint(const Tensor& t) {
  const Tensor tt = t.transpose(-2, -1);
  return t.is_complex() ? tt.conj() : tt;
}

constexpr int64_t kCopyTile = 64;  // tiles of the transposing copies (64 rows' lines per tile)

// From this order on the transposing copies in and out of the upper form run their rows of tiles
// on the pool: they move the matrix three times (read the triangle, write it, clear the other)
// at memory speed, serially a fifth of a float32 1024 factorization on one thread and a larger
// share on two, where the factorization's GEMMs use both cores and the copies did not.
constexpr int64_t kParallelCopyOrder = 512;

// f(i0, i1) for each row of tiles [i0, i1) of an n x n matrix: on the pool (rows of tiles taken
// one at a time: the triangles give them unequal work) from kParallelCopyOrder, else in order.
template <class F>
void for_each_tile_row(int64_t n, F f) {
  const int64_t rows = (n + kCopyTile - 1) / kCopyTile;
  const auto row = [&](int64_t t) { f(t * kCopyTile, std::min(n, (t + 1) * kCopyTile)); };
  if (n >= kParallelCopyOrder) {
    parallel_tasks(rows, row);
  } else {
    for (int64_t t = 0; t < rows; ++t) row(t);
  }
}

// dst's upper triangle (row-major n x n, diagonal included) := the upper triangle of the view
// V(i, j) = v[i * rs + j * cs], conjugated when `conj`. Transposed views move in tiles through
// the per-ISA transpose; the strict lower triangle of dst's diagonal tiles is scratch. Rows of
// tiles write disjoint parts of dst.
template <class T>
void copy_upper(int64_t n, const T* v, int64_t rs, int64_t cs, bool conj, T* dst) {
  for_each_tile_row(n, [&](int64_t i0, int64_t i1) {
    if (cs == 1) {
      for (int64_t i = i0; i < i1; ++i) std::copy_n(v + i * rs + i, n - i, dst + i * n + i);
    } else {
      for (int64_t j0 = i0; j0 < n; j0 += kCopyTile) {
        const int64_t j1 = std::min(n, j0 + kCopyTile);
        const T* s = v + i0 * rs + j0 * cs;
        T* d = dst + i0 * n + j0;
        if (rs == 1) {
          transpose_into(j1 - j0, i1 - i0, s, cs, d, n);
        } else {
          for (int64_t i = 0; i < i1 - i0; ++i)
            for (int64_t j = 0; j < j1 - j0; ++j) d[i * n + j] = s[i * rs + j * cs];
        }
      }
    }
    if (kIsComplex<T> && conj)
      for (int64_t i = i0; i < i1; ++i)
        for (int64_t j = i; j < n; ++j) dst[i * n + j] = conj_of(dst[i * n + j]);
  });
}

// In place on row-major a (n x n): the lower triangle := U^H for the upper triangle U, the strict
// upper triangle := 0. Each tile of U is transposed into its mirror tile, then cleared (a diagonal
// tile into itself, through a copy). Row of tiles i0 writes its own tiles left of the diagonal
// and clears those of column of tiles i0 above it: rows of tiles touch disjoint tiles, so they
// run in any order.
template <class T>
void adjoint_upper_to_lower(int64_t n, T* a) {
  for_each_tile_row(n, [&](int64_t i0, int64_t i1) {
    for (int64_t j0 = 0; j0 < i0; j0 += kCopyTile) {
      const int64_t j1 = j0 + kCopyTile;
      transpose_into(j1 - j0, i1 - i0, a + j0 * n + i0, n, a + i0 * n + j0, n);
      for (int64_t j = j0; j < j1; ++j) std::fill_n(a + j * n + i0, i1 - i0, T(0));
    }
    // The diagonal tile through a copy, so that it too moves as register blocks (element by
    // element, its column stores n apart took a fifth of a float64 256 factorization).
    const int64_t b = i1 - i0;
    T tile[kCopyTile * kCopyTile];
    for (int64_t i = 0; i < b; ++i) std::copy_n(a + (i0 + i) * n + i0, b, tile + i * b);
    transpose_into(b, b, tile, b, a + i0 * n + i0, n);
    for (int64_t i = i0; i < i1; ++i) std::fill(a + i * n + i + 1, a + i * n + i1, T(0));
    if constexpr (kIsComplex<T>)
      for (int64_t i = i0; i < i1; ++i)
        for (int64_t j = 0; j <= i; ++j) a[i * n + j] = conj_of(a[i * n + j]);
  });
}

// One matrix's factor into out (row-major n x n, the other strict triangle zeroed), A(i, j) =
// a[i * rs + j * cs]: U with A = U^H U from A's upper triangle, or L with A = L L^H from its
// lower one. Both run potrf_upper; the lower form factors the upper triangle of A^H (A's strides
// swapped, conjugated) and returns its adjoint. Returns potrf's info.
template <class T>
int64_t factor_matrix(int64_t n, const T* a, int64_t rs, int64_t cs, bool upper, T* out) {
  if (upper) {
    copy_upper(n, a, rs, cs, /*conj=*/false, out);
  } else {
    copy_upper(n, a, cs, rs, /*conj=*/true, out);
  }
  const int64_t info = potrf_upper(n, out, n);
  if (upper) {
    for (int64_t i = 1; i < n; ++i) std::fill_n(out + i * n, i, T(0));
  } else {
    adjoint_upper_to_lower(n, out);
  }
  return info;
}

// (F, info) for every matrix of A [*, n, n]: F = L (lower, A = L L^H, A's lower triangle read) or
// U (upper, A = U^H U, its upper triangle read), contiguous with the other strict triangle zeroed;
// info [*] int32. Batches of small real matrices run the lane-interleaved kernels (small/
// small_kernels.h, lower form), reading A once and writing L once; a matrix they report as failing
// is factored again by factor_matrix for its partial factor.
std::tuple<Tensor, Tensor> factor(const Tensor& A, bool upper, std::string_view op) {
  const int64_t n = A.size(-1);
  const DimVector batch_dims = batch_shape(A);
  const int64_t batch = numel_of(batch_dims);
  Tensor info = zeros(batch_dims, kInt32);
  int32_t* ip = info.data_ptr<int32_t>();
  Tensor F;
  visit_linalg_dtype(A.dtype(), op, [&]<class T>() {
    if (use_small_kernels<T>(n, batch)) {
      const Tensor in = (upper ? adjoint(A) : A).contiguous();
      Tensor L = empty(A.sizes(), A.dtype());
      const T* src = static_cast<const T*>(in.data_ptr());
      T* dst = static_cast<T*>(L.data_ptr());
      const bool stream = streams_factors<T>(n, batch);
      for_each_group<T>(batch, [&](int64_t b0, int64_t count) {
        small_potrf(n, count, src + b0 * n * n, dst + b0 * n * n, ip + b0, small_kernels(), stream);
      });
      if (first_failure(info) >= 0) {  // a vectorized scan first: failures are rare
        for (int64_t b = 0; b < batch; ++b) {
          if (ip[b] != 0)
            ip[b] = static_cast<int32_t>(
                factor_matrix(n, src + b * n * n, n, int64_t{1}, false, dst + b * n * n));
        }
      }
      F = upper ? adjoint(L).contiguous() : L;
      return;
    }
    F = empty(concat(batch_dims, {n, n}), A.dtype());
    const T* abase = static_cast<const T*>(A.data_ptr());
    T* fbase = static_cast<T*>(F.data_ptr());
    const std::vector<int64_t> off = matrix_offsets(A);
    const int64_t rs = A.stride(-2), cs = A.stride(-1);
    for_each_matrix(batch, n, [&](int64_t b) {
      ip[b] =
          static_cast<int32_t>(factor_matrix(n, abase + off[b], rs, cs, upper, fbase + b * n * n));
    });
  });
  return {F, info};
}

std::tuple<Tensor, Tensor> cholesky_impl(const Tensor& A, bool upper, std::string_view op) {
  check_no_grad(op, {A});
  check_square_input(op, A, "A");
  return factor(A, upper, op);
}

// X := A^{-1} X for A = L L^H (or U^H U when upper), X contiguous [batch, n, k], L [*, n, n]
// broadcast over X's batch (any strides). Batches of small real systems whose lower factors are
// plain (contiguous, one per system) run the lane-interleaved potrs (small/small_kernels.h).
void cholesky_solve_in_place(const Tensor& X, const Tensor& L, bool upper, std::string_view op) {
  const int64_t n = X.size(-2), k = X.size(-1);
  const int64_t batch = numel_of(batch_shape(X));
  const Tensor Lx = L.expand(concat(batch_shape(X), {n, n}));
  const int64_t rs = L.stride(-2), cs = L.stride(-1);
  visit_linalg_dtype(X.dtype(), op, [&]<class T>() {
    const T* lbase = static_cast<const T*>(Lx.data_ptr());
    T* xbase = static_cast<T*>(X.data_ptr());
    if (!upper && use_small_kernels<T>(n, batch) && plain_matrices(L, batch)) {
      for_each_group<T>(batch, [&](int64_t b0, int64_t count) {
        small_potrs(n, k, count, lbase + b0 * n * n, xbase + b0 * n * k);
      });
      return;
    }
    const std::vector<int64_t> off = matrix_offsets(Lx);
    for_each_matrix(batch, n, [&](int64_t b) {
      const T* l = lbase + off[b];
      T* x = xbase + b * n * k;
      if (!upper) {  // L Y = B, then L^H X = Y
        trsm_left(n, k, l, rs, cs, true, false, false, x, k, 1);
        trsm_left(n, k, l, cs, rs, false, true, false, x, k, 1);
      } else {  // U^H Y = B, then U X = Y
        trsm_left(n, k, l, cs, rs, true, true, false, x, k, 1);
        trsm_left(n, k, l, rs, cs, false, false, false, x, k, 1);
      }
    });
  });
}

}  // namespace

Tensor cholesky(const Tensor& A, bool upper) {
  constexpr std::string_view op = "linalg.cholesky";
  auto [L, info] = cholesky_impl(A, upper, op);
  const int64_t bad = first_failure(info);
  if (bad >= 0)
    throw LinAlgError(
        fmt::format("{}(): {}The factorization could not be completed because the input is not "
                    "positive-definite (the leading minor of order {} is not positive-definite).",
                    op, batch_prefix(A.dim() - 2, bad), info.data_ptr<int32_t>()[bad]));
  return L;
}

std::tuple<Tensor, Tensor> cholesky_ex(const Tensor& A, bool upper) {
  return cholesky_impl(A, upper, "linalg.cholesky_ex");
}

Tensor cholesky_solve(const Tensor& B, const Tensor& L, bool upper) {
  constexpr std::string_view op = "cholesky_solve";
  check_no_grad(op, {B, L});
  check_matrix_input(op, B, "input");
  check_square_input(op, L, "input2");
  check_same_dtype(op, B, "input", L, "input2");
  TS_CHECK(B.size(-2) == L.size(-1), RuntimeError,
           "{}(): incompatible matrix sizes: each A matrix is {} by {} but each b matrix is {} by "
           "{}",
           op, L.size(-1), L.size(-1), B.size(-2), B.size(-1));
  const DimVector batch = broadcast_batch(op, batch_shape(B), batch_shape(L));
  Tensor X = contiguous_matrices(B, batch);
  if (X.numel() > 0) cholesky_solve_in_place(X, L, upper, op);
  return X;
}

Tensor cholesky_inverse(const Tensor& L, bool upper) {
  constexpr std::string_view op = "cholesky_inverse";
  check_no_grad(op, {L});
  check_square_input(op, L, "input");
  const int64_t n = L.size(-1);
  const DimVector batch = batch_shape(L);
  // A zero on L's diagonal makes A singular: LAPACK's potri reports it as info.
  const Tensor diag = L.diagonal(0, -2, -1).eq(0);
  const Tensor any_zero = diag.numel() > 0 ? diag.any(-1) : zeros(batch, kBool);
  const Tensor flat = any_zero.reshape({-1}).contiguous();
  for (int64_t b = 0; b < flat.numel(); ++b) {
    if (!flat.data_ptr<bool>()[b]) continue;
    const Tensor d = diag.reshape({-1, n}).select(0, b).contiguous();
    int64_t first = 0;
    while (!d.data_ptr<bool>()[first]) ++first;
    throw LinAlgError(fmt::format(
        "{}(): {}The diagonal element {} is zero, the inversion could not be completed because "
        "the input matrix is singular.",
        op, batch_prefix(L.dim() - 2, b), first + 1));
  }
  Tensor X = contiguous_matrices(eye(n, n, L.dtype()), batch);
  if (X.numel() > 0) cholesky_solve_in_place(X, L, upper, op);
  return X;
}

}  // namespace tessera::linalg
