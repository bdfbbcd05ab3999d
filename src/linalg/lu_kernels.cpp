// LU with partial pivoting, P A = L U, on row-major storage (LAPACK's getrf semantics).
//
// Pivot choice: the first row of the column with the largest |re| + |im| (LAPACK's i?amax; a
// NaN is never preferred to an earlier number, as there). A zero pivot is recorded in info and
// skipped (no division), and the factorization continues.
//
// Three forms, by size:
//   getf2            unblocked right-looking: a rank-1 update per column along contiguous
//                    rows (or columns); for min(m, n) <= kUnblockedMax and the leaves of the
//                    recursion. Compiled per ISA (linalg/leaf/leaf_kernels.h).
//   getrf_recursive  LAPACK's getrf2: factor the left half of the columns, swap and solve the
//                    right half (trsm), one GEMM for the Schur complement, recurse on it.
//   getrf            blocked right-looking with kNb-wide panels factored by getrf_recursive on
//                    a column-major copy of the panel (contiguous pivot searches and swaps);
//                    U12 = L11^{-1} A12 (trsm) and A22 -= L21 U12 through the GEMM engine.
//
// getri (the inverse from the factor) is A^{-1} = U^{-1} L^{-1} P, 4n^3/3 flops as LAPACK's
// getri: L^{-1} by column blocks of the identity, each solved from its diagonal down (the rows
// above it are zero: n^3/3 flops, where a solve on the whole identity costs n^3), its columns
// permuted, then one triangular solve with U (n^3).
#include <algorithm>
#include <vector>

#include "linalg/kernels.h"
#include "linalg/leaf/leaf_kernels.h"

namespace tessera::linalg::detail {

namespace {

constexpr int64_t kUnblockedMax = 32;  // min(m, n) up to this runs getf2 on the matrix itself
constexpr int64_t kLeafCols = 8;       // getrf_recursive's leaves
constexpr int64_t kNb = 128;           // panel width of the blocked form

// The unblocked LU, on the ISA chosen at start-up (linalg/leaf/leaf_kernels.h).
template <class T>
int64_t getf2(int64_t m, int64_t n, T* a, int64_t rs, int64_t cs, int32_t* ipiv) {
  const cpu::LinalgLeafKernels& k = TS_DISPATCH(linalg_leaf_kernels);
  return cpu::leaf_for<T>(k.getf2_f32, k.getf2_f64, k.getf2_c64, k.getf2_c128)(m, n, a, rs, cs,
                                                                               ipiv);
}

}  // namespace

template <class T>
void laswp(int64_t ncols, T* a, int64_t rs, int64_t cs, int64_t k0, int64_t k1, const int32_t* ipiv,
           bool reverse) {
  if (ncols == 0) return;
  for (int64_t s = k0; s < k1; ++s) {
    const int64_t k = reverse ? k1 - 1 - (s - k0) : s;
    const int64_t p = ipiv[k] - 1;
    if (p != k) swap_rows(a, rs, cs, k, p, ncols);
  }
}

template <class T>
int64_t getrf_recursive(int64_t m, int64_t n, T* a, int64_t rs, int64_t cs, int32_t* ipiv) {
  const int64_t mn = std::min(m, n);
  if (mn == 0) return 0;
  if (n <= kLeafCols || m == 1) return getf2(m, n, a, rs, cs, ipiv);
  const int64_t n1 = mn / 2, n2 = n - n1;
  int64_t info = getrf_recursive(m, n1, a, rs, cs, ipiv);
  T* a12 = a + n1 * cs;
  T* a21 = a + n1 * rs;
  T* a22 = a21 + n1 * cs;
  laswp(n2, a12, rs, cs, 0, n1, ipiv);
  trsm_left(n1, n2, a, rs, cs, /*lower=*/true, /*conj=*/false, /*unit=*/true, a12, rs, cs);
  gemm_minus(m - n1, n2, n1, a21, rs, cs, a12, rs, cs, false, a22, rs, cs);
  const int64_t info2 = getrf_recursive(m - n1, n2, a22, rs, cs, ipiv + n1);
  if (info == 0 && info2 > 0) info = info2 + n1;
  for (int64_t i = n1; i < mn; ++i) ipiv[i] += static_cast<int32_t>(n1);
  laswp(n1, a, rs, cs, n1, mn, ipiv);
  return info;
}

template <class T>
int64_t getrf(int64_t m, int64_t n, T* a, int64_t lda, int32_t* ipiv) {
  const int64_t mn = std::min(m, n);
  if (mn <= kUnblockedMax) return getf2(m, n, a, lda, int64_t{1}, ipiv);
  // Panels are factored in a column-major copy: the pivot search, the row swaps inside the
  // panel and the leaves' updates then run down contiguous columns.
  thread_local std::vector<T> panel;
  int64_t info = 0;
  for (int64_t j = 0; j < mn; j += kNb) {
    const int64_t jb = std::min(kNb, mn - j), rows = m - j;
    T* ajj = a + j * lda + j;
    panel.resize(static_cast<size_t>(rows * jb));
    transpose_into(rows, jb, ajj, lda, panel.data(), rows);
    const int64_t panel_info = getrf_recursive(rows, jb, panel.data(), 1, rows, ipiv + j);
    transpose_into(jb, rows, panel.data(), rows, ajj, lda);
    if (info == 0 && panel_info > 0) info = panel_info + j;
    for (int64_t i = j; i < j + jb; ++i) ipiv[i] += static_cast<int32_t>(j);
    laswp(j, a, lda, 1, j, j + jb, ipiv);  // columns left of the panel
    const int64_t right = n - j - jb;
    if (right == 0) continue;
    laswp(right, a + j + jb, lda, 1, j, j + jb, ipiv);
    T* a12 = ajj + jb;
    trsm_left(jb, right, ajj, lda, 1, /*lower=*/true, /*conj=*/false, /*unit=*/true, a12, lda, 1);
    gemm_minus(m - j - jb, right, jb, ajj + jb * lda, lda, 1, a12, lda, 1, false, a12 + jb * lda,
               lda, 1);
  }
  return info;
}

template <class T>
void getri(int64_t n, const T* lu, const int32_t* ipiv, T* x) {
  if (n == 0) return;
  // Z = L^{-1}, column block by column block: block [c0, c1) of the identity is zero above row
  // c0, so only L's trailing (n - c0) x (n - c0) part solves for it.
  for (int64_t i = 0; i < n; ++i) std::fill_n(x + i * n, n, T(0));
  for (int64_t c0 = 0; c0 < n; c0 += kNb) {
    const int64_t w = std::min(kNb, n - c0);
    for (int64_t j = c0; j < c0 + w; ++j) x[j * n + j] = T(1);
    trsm_left(n - c0, w, lu + c0 * n + c0, n, 1, /*lower=*/true, /*conj=*/false, /*unit=*/true,
              x + c0 * n + c0, n, 1);
  }
  // Z := Z P: P A = L U takes row perm[k] of A to row k, so column k of Z goes to perm[k].
  std::vector<int64_t> perm(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) perm[i] = i;
  for (int64_t i = 0; i < n; ++i) std::swap(perm[i], perm[ipiv[i] - 1]);
  std::vector<T> row(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    T* xi = x + i * n;
    for (int64_t k = 0; k < n; ++k) row[perm[k]] = xi[k];
    std::copy(row.begin(), row.end(), xi);
  }
  // X = U^{-1} Z.
  trsm_left(n, n, lu, n, 1, /*lower=*/false, /*conj=*/false, /*unit=*/false, x, n, 1);
}

#define TS_LINALG_INSTANTIATE(T)                                                                 \
  template void getri<T>(int64_t, const T*, const int32_t*, T*);                                 \
  template void laswp<T>(int64_t, T*, int64_t, int64_t, int64_t, int64_t, const int32_t*, bool); \
  template int64_t getrf_recursive<T>(int64_t, int64_t, T*, int64_t, int64_t, int32_t*);         \
  template int64_t getrf<T>(int64_t, int64_t, T*, int64_t, int32_t*);
TS_LINALG_FOR_EACH_TYPE(TS_LINALG_INSTANTIATE)
#undef TS_LINALG_INSTANTIATE

}  // namespace tessera::linalg::detail
