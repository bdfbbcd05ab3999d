// Triangular solves and the C -= A B update that the factorizations share.
//
// trsm_left is recursive: the triangle is halved, the first half solved, the second half's
// right-hand sides updated by one GEMM, the second half solved. Almost all flops land in GEMMs
// of size (n/2 x nrhs x n/2), (n/4 x nrhs x n/4), ...; only diagonal blocks of at most kLeaf
// rows run the unblocked substitution. The unblocked kernel runs along rows of B (an axpy per
// step, which vectorizes; it is compiled per ISA, linalg/leaf/); a B whose columns are not
// adjacent is solved on a row-major copy.
//
// Columns of B are independent systems: trsm_left splits a wide B's columns over the pool
// (for_column_shares, kernels.h) and each share runs the whole recursion, so the leaves and the
// small GEMMs of the deep levels no longer leave the other threads idle.
#include <algorithm>
#include <vector>

#include "gemm/gemm.h"
#include "linalg/kernels.h"
#include "linalg/leaf/leaf_kernels.h"
#include "linalg/scalar_ops.h"
#include "tessera/core/dtype.h"
#include "tessera/core/parallel.h"

namespace tessera::linalg::detail {

namespace {

constexpr int64_t kLeaf = 16;              // unblocked below this many rows
constexpr int64_t kSmallGemmFlops = 4096;  // m*n*k below which gemm_minus loops

// Row-major copy of the rows x cols strided matrix x, conjugated, into ws (reused buffer).
template <class T>
const T* conj_copy(int64_t rows, int64_t cols, const T* x, int64_t rs, int64_t cs,
                   std::vector<T>& ws) {
  ws.resize(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) ws[i * cols + j] = conj_of(x[i * rs + j * cs]);
  return ws.data();
}

// Plain C -= A B (B conjugated when conj_b); inner loop along C's and B's rows.
template <class T>
void gemm_minus_loops(int64_t m, int64_t n, int64_t k, const T* a, int64_t a_rs, int64_t a_cs,
                      const T* b, int64_t b_rs, int64_t b_cs, bool conj_b, T* c, int64_t c_rs,
                      int64_t c_cs) {
  for (int64_t i = 0; i < m; ++i) {
    T* ci = c + i * c_rs;
    for (int64_t p = 0; p < k; ++p) {
      const T aip = a[i * a_rs + p * a_cs];
      const T* bp = b + p * b_rs;
      if (c_cs == 1 && b_cs == 1 && !conj_b) {
        for (int64_t j = 0; j < n; ++j) ci[j] = fms(ci[j], aip, bp[j]);
      } else {
        for (int64_t j = 0; j < n; ++j)
          ci[j * c_cs] = fms(ci[j * c_cs], aip, maybe_conj(bp[j * b_cs], conj_b));
      }
    }
  }
}

// C = alpha A B + beta C on the engine (on one triangle of C with `tri`).
template <class T>
void engine_gemm(int64_t m, int64_t n, int64_t k, const T* a, int64_t a_rs, int64_t a_cs,
                 const T* b, int64_t b_rs, int64_t b_cs, T* c, int64_t c_rs, int64_t c_cs,
                 double alpha, double beta, gemm::Triangle tri = gemm::Triangle::kAll) {
  gemm::GemmProblem p;
  p.dtype = scalar_type_of<T>;
  p.m = m, p.n = n, p.k = k;
  p.a = a, p.a_rs = a_rs, p.a_cs = a_cs;
  p.b = b, p.b_rs = b_rs, p.b_cs = b_cs;
  p.c = c, p.c_rs = c_rs, p.c_cs = c_cs;
  p.alpha = alpha, p.beta = beta;
  if (tri == gemm::Triangle::kAll) {
    gemm::gemm(p, nullptr, "linalg");
  } else {
    gemm::gemm_triangle(p, tri, nullptr, "linalg");
  }
}

// The substitution itself, on the ISA chosen at start-up (linalg/leaf/leaf_kernels.h).
template <class T>
void trsm_leaf(int64_t n, int64_t nrhs, const T* a, int64_t a_rs, int64_t a_cs, bool lower,
               bool conj, bool unit, T* b, int64_t b_rs, int64_t b_cs) {
  const cpu::LinalgLeafKernels& k = TS_DISPATCH(linalg_leaf_kernels);
  cpu::leaf_for<T>(k.trsm_f32, k.trsm_f64, k.trsm_c64, k.trsm_c128)(n, nrhs, a, a_rs, a_cs, lower,
                                                                    conj, unit, b, b_rs, b_cs);
}

}  // namespace

template <class T>
void gemm_minus(int64_t m, int64_t n, int64_t k, const T* a, int64_t a_rs, int64_t a_cs, const T* b,
                int64_t b_rs, int64_t b_cs, bool conj_b, T* c, int64_t c_rs, int64_t c_cs) {
  if (m == 0 || n == 0 || k == 0) return;
  // m and n count up to kMinShareColumns (for_column_shares may split either).
  if (std::min(m, kMinShareColumns) * std::min(n, kMinShareColumns) * k < kSmallGemmFlops) {
    gemm_minus_loops(m, n, k, a, a_rs, a_cs, b, b_rs, b_cs, conj_b, c, c_rs, c_cs);
    return;
  }
  thread_local std::vector<T> ws;
  if (kIsComplex<T> && conj_b) {
    b = conj_copy(k, n, b, b_rs, b_cs, ws);
    b_rs = n, b_cs = 1;
  }
  engine_gemm(m, n, k, a, a_rs, a_cs, b, b_rs, b_cs, c, c_rs, c_cs, /*alpha=*/-1, /*beta=*/1);
}

template <class T>
void gemm_minus_upper(int64_t n, int64_t k, const T* a, int64_t a_rs, int64_t a_cs, const T* b,
                      int64_t b_rs, int64_t b_cs, T* c, int64_t c_rs, int64_t c_cs) {
  if (n == 0 || k == 0) return;
  if (n * n * k < 2 * kSmallGemmFlops) {  // the triangle's multiply-adds: about n^2 k / 2
    for (int64_t i = 0; i < n; ++i)       // row i's part of the triangle: columns i .. n
      gemm_minus_loops(1, n - i, k, a + i * a_rs, a_rs, a_cs, b + i * b_cs, b_rs, b_cs, false,
                       c + i * c_rs + i * c_cs, c_rs, c_cs);
    return;
  }
  engine_gemm(n, n, k, a, a_rs, a_cs, b, b_rs, b_cs, c, c_rs, c_cs, /*alpha=*/-1, /*beta=*/1,
              gemm::Triangle::kUpper);
}

template <class T>
void gemm_product(int64_t m, int64_t n, int64_t k, const T* a, int64_t a_rs, int64_t a_cs,
                  const T* b, int64_t b_rs, int64_t b_cs, T* c, int64_t c_rs, int64_t c_cs) {
  if (m == 0 || n == 0) return;
  engine_gemm(m, n, k, a, a_rs, a_cs, b, b_rs, b_cs, c, c_rs, c_cs, /*alpha=*/1, /*beta=*/0);
}

template <class T>
void trsm_left_unblocked(int64_t n, int64_t nrhs, const T* a, int64_t a_rs, int64_t a_cs,
                         bool lower, bool conj, bool unit, T* b, int64_t b_rs, int64_t b_cs) {
  if (b_cs == 1 || nrhs == 1) {
    trsm_leaf(n, nrhs, a, a_rs, a_cs, lower, conj, unit, b, b_rs, b_cs);
    return;
  }
  // B's columns are not adjacent: solve on a row-major copy so that the axpy runs along
  // contiguous memory. A transposed view (b_rs == 1) moves in tiles.
  thread_local std::vector<T> ws;
  ws.resize(static_cast<size_t>(n * nrhs));
  if (b_rs == 1) {
    transpose_into(nrhs, n, b, b_cs, ws.data(), nrhs);
  } else {
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < nrhs; ++j) ws[i * nrhs + j] = b[i * b_rs + j * b_cs];
  }
  trsm_leaf(n, nrhs, a, a_rs, a_cs, lower, conj, unit, ws.data(), nrhs, int64_t{1});
  if (b_rs == 1) {
    transpose_into(n, nrhs, ws.data(), nrhs, b, b_cs);
  } else {
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < nrhs; ++j) b[i * b_rs + j * b_cs] = ws[i * nrhs + j];
  }
}

namespace {

// trsm_left on the calling thread.
template <class T>
void trsm_left_serial(int64_t n, int64_t nrhs, const T* a, int64_t a_rs, int64_t a_cs, bool lower,
                      bool conj, bool unit, T* b, int64_t b_rs, int64_t b_cs) {
  if (n == 0 || nrhs == 0) return;
  if (n <= kLeaf) {
    trsm_left_unblocked(n, nrhs, a, a_rs, a_cs, lower, conj, unit, b, b_rs, b_cs);
    return;
  }
  // Split at a multiple of kLeaf so the leaves stay full.
  const int64_t n1 = std::max<int64_t>(kLeaf, (n / 2) / kLeaf * kLeaf), n2 = n - n1;
  const T* a11 = a;
  const T* a21 = a + n1 * a_rs;  // n2 x n1, below the diagonal
  const T* a12 = a + n1 * a_cs;  // n1 x n2, right of the diagonal
  const T* a22 = a + n1 * a_rs + n1 * a_cs;
  T* b1 = b;
  T* b2 = b + n1 * b_rs;
  // C -= op(A_block) B_rows: conj applies to A, so run it as (B^T op(A)^T)^T when conj is set:
  // gemm_minus conjugates its second operand.
  auto update = [&](int64_t rows, const T* ablk, int64_t k, const T* bsrc, T* bdst) {
    if (!conj || !kIsComplex<T>) {
      gemm_minus(rows, nrhs, k, ablk, a_rs, a_cs, bsrc, b_rs, b_cs, false, bdst, b_rs, b_cs);
    } else {
      // bdst^T (nrhs x rows) -= bsrc^T (nrhs x k) conj(ablk)^T (k x rows)
      gemm_minus(nrhs, rows, k, bsrc, b_cs, b_rs, ablk, a_cs, a_rs, true, bdst, b_cs, b_rs);
    }
  };
  if (lower) {
    trsm_left_serial(n1, nrhs, a11, a_rs, a_cs, lower, conj, unit, b1, b_rs, b_cs);
    update(n2, a21, n1, b1, b2);
    trsm_left_serial(n2, nrhs, a22, a_rs, a_cs, lower, conj, unit, b2, b_rs, b_cs);
  } else {
    trsm_left_serial(n2, nrhs, a22, a_rs, a_cs, lower, conj, unit, b2, b_rs, b_cs);
    update(n1, a12, n2, b2, b1);
    trsm_left_serial(n1, nrhs, a11, a_rs, a_cs, lower, conj, unit, b1, b_rs, b_cs);
  }
}

}  // namespace

void for_column_shares(int64_t ncols, int64_t work, FunctionRef<void(int64_t, int64_t)> fn) {
  static_assert(kMinShareColumns % 16 == 0);
  const int64_t shares = in_parallel_region() || work < kMinShareWork
                             ? 1
                             : std::min<int64_t>(get_num_threads(), ncols / kMinShareColumns);
  if (shares <= 1) {
    fn(0, ncols);
    return;
  }
  const int64_t width = ncols / shares / 16 * 16;  // >= kMinShareColumns
  parallel_tasks(shares, [&](int64_t s) {
    const int64_t c0 = s * width;
    fn(c0, s == shares - 1 ? ncols - c0 : width);
  });
}

template <class T>
void trsm_left(int64_t n, int64_t nrhs, const T* a, int64_t a_rs, int64_t a_cs, bool lower,
               bool conj, bool unit, T* b, int64_t b_rs, int64_t b_cs) {
  if (n == 0 || nrhs == 0) return;
  for_column_shares(nrhs, n * n * nrhs, [&](int64_t c0, int64_t cols) {
    trsm_left_serial(n, cols, a, a_rs, a_cs, lower, conj, unit, b + c0 * b_cs, b_rs, b_cs);
  });
}

#define TS_LINALG_INSTANTIATE(T)                                                                 \
  template void gemm_minus<T>(int64_t, int64_t, int64_t, const T*, int64_t, int64_t, const T*,   \
                              int64_t, int64_t, bool, T*, int64_t, int64_t);                     \
  template void gemm_minus_upper<T>(int64_t, int64_t, const T*, int64_t, int64_t, const T*,      \
                                    int64_t, int64_t, T*, int64_t, int64_t);                     \
  template void gemm_product<T>(int64_t, int64_t, int64_t, const T*, int64_t, int64_t, const T*, \
                                int64_t, int64_t, T*, int64_t, int64_t);                         \
  template void trsm_left_unblocked<T>(int64_t, int64_t, const T*, int64_t, int64_t, bool, bool, \
                                       bool, T*, int64_t, int64_t);                              \
  template void trsm_left<T>(int64_t, int64_t, const T*, int64_t, int64_t, bool, bool, bool, T*, \
                             int64_t, int64_t);
TS_LINALG_FOR_EACH_TYPE(TS_LINALG_INSTANTIATE)
#undef TS_LINALG_INSTANTIATE

}  // namespace tessera::linalg::detail
