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
//                    U12 = L11^{-1} A12 (trsm) and A22 -= L21 U12 through the GEMM engine,
//                    with a look-ahead of one panel: each step's update is split by columns
//                    over the pool's threads, and the task that updates the next panel's
//                    columns factors that panel at once, while the others update the rest (a
//                    panel is a serial ~5% of one thread's factorization; without look-ahead
//                    every other thread waited on it).
//
// getri (the inverse from the factor) is A^{-1} = U^{-1} L^{-1} P, 4n^3/3 flops as LAPACK's
// getri: L^{-1} by column blocks of the identity, each solved from its diagonal down (the rows
// above it are zero: n^3/3 flops, where a solve on the whole identity costs n^3), its columns
// permuted, then one triangular solve with U (n^3).
#include <algorithm>
#include <chrono>
#include <vector>

#include "core/cached_vector.h"
#include "linalg/kernels.h"
#include "linalg/leaf/leaf_kernels.h"
#include "tessera/core/parallel.h"

namespace tessera::linalg::detail {

namespace {

constexpr int64_t kUnblockedMax = 32;  // min(m, n) up to this runs getf2 on the matrix itself
constexpr int64_t kLeafCols = 8;       // getrf_recursive's leaves
constexpr int64_t kNb = 128;           // panel width of the blocked form
// The narrowest column chunk of a look-ahead step: a narrow solve or product takes other paths
// (the engine's unpacked small products, the leaves' tails) whose roundings differ from those of
// the same columns inside a wide one; with no narrower chunks the factor is the same bits on any
// thread count.
constexpr int64_t kMinCols = 128;

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

namespace {

// Panel [j, j + jb) of the blocked form: rows j .. m of its columns factored on a column-major
// copy (contiguous pivot searches and swaps), its pivots made global. Returns the panel's info.
template <class T>
int64_t factor_panel(int64_t m, T* a, int64_t lda, int64_t j, int64_t jb, int32_t* ipiv) {
  thread_local cached_vector<T> panel;  // 64-byte aligned: its columns' transposes move whole lines
  const int64_t rows = m - j;
  T* ajj = a + j * lda + j;
  panel.resize(static_cast<size_t>(rows * jb));
  transpose_into(rows, jb, ajj, lda, panel.data(), rows);
  const int64_t info = getrf_recursive(rows, jb, panel.data(), 1, rows, ipiv + j);
  transpose_into(jb, rows, panel.data(), rows, ajj, lda);
  for (int64_t i = j; i < j + jb; ++i) ipiv[i] += static_cast<int32_t>(j);
  return info;
}

// Step j's update of columns [c0, c1) right of panel [j, j + jb): the panel's row interchanges,
// U12 = L11^{-1} A12 (trsm), A22 -= L21 U12 (GEMM).
template <class T>
void update_columns(int64_t m, T* a, int64_t lda, int64_t j, int64_t jb, int64_t c0, int64_t c1,
                    const int32_t* ipiv) {
  const int64_t w = c1 - c0;
  if (w <= 0) return;
  laswp(w, a + c0, lda, 1, j, j + jb, ipiv);
  const T* ajj = a + j * lda + j;
  T* a12 = a + j * lda + c0;
  trsm_left(jb, w, ajj, lda, 1, /*lower=*/true, /*conj=*/false, /*unit=*/true, a12, lda, 1);
  gemm_minus(m - j - jb, w, jb, ajj + jb * lda, lda, 1, a12, lda, 1, false, a12 + jb * lda, lda, 1);
}

// Where the tasks of a step split the columns [from, n) that follow the next panel: task 0,
// which first updates the next panel's `next` columns and factors it, takes what is left of an
// equal share; `panel_cols` is the panel's cost in columns of the update. tasks > 1.
std::vector<int64_t> split_columns(int64_t from, int64_t n, int64_t next, double panel_cols,
                                   int64_t tasks) {
  constexpr int64_t kAlign = 16;  // whole register tiles of the GEMM
  const double rest = static_cast<double>(n - from);
  const double share = (rest + static_cast<double>(next) + panel_cols) / static_cast<double>(tasks);
  const double first = std::clamp(share - static_cast<double>(next) - panel_cols, 0.0, rest);
  const double others = (rest - first) / static_cast<double>(tasks - 1);
  std::vector<int64_t> s(static_cast<size_t>(tasks + 1));
  s[0] = from;
  for (int64_t t = 1; t < tasks; ++t) {
    const double x = first + others * static_cast<double>(t - 1);
    s[t] = std::min(n, from + static_cast<int64_t>(std::llround(x / kAlign)) * kAlign);
  }
  s[tasks] = n;
  // Chunks narrower than kMinCols are folded into the next one (the last into the one before).
  for (int64_t t = 1; t < tasks; ++t)
    if (s[t] - s[t - 1] < kMinCols) s[t] = s[t - 1];
  if (n - s[tasks - 1] < kMinCols) s[tasks - 1] = n;
  return s;
}

}  // namespace

template <class T>
int64_t getrf(int64_t m, int64_t n, T* a, int64_t lda, int32_t* ipiv) {
  const int64_t mn = std::min(m, n);
  if (mn <= kUnblockedMax) return getf2(m, n, a, lda, int64_t{1}, ipiv);
  // Look-ahead: a step's task 0 updates the next panel's columns first and factors that panel
  // while the other tasks update the rest, so no thread waits on the panel. One thread runs the
  // plain blocked order (one update of all columns, then the panel: 2% faster at n = 1024 than
  // the look-ahead order, which packs the update's left operand twice).
  const int64_t tasks = in_parallel_region() ? 1 : get_num_threads();
  int64_t info = 0;
  auto record = [&](int64_t panel_info, int64_t j) {
    if (info == 0 && panel_info > 0) info = panel_info + j;
  };
  record(factor_panel(m, a, lda, 0, std::min(kNb, mn), ipiv), 0);
  // The panel's cost in update columns (both scale with the rows left), measured each step.
  double panel_cols = static_cast<double>(kNb) / 2;
  for (int64_t j = 0; j < mn; j += kNb) {
    const int64_t jb = std::min(kNb, mn - j), c = j + jb;
    laswp(j, a, lda, 1, j, c, ipiv);  // columns left of the panel
    if (c == n) continue;
    const int64_t next = std::min(kNb, mn - c);  // the next panel's width (0: none)
    if (tasks == 1) {  // one update for every column: its operands are packed once
      update_columns(m, a, lda, j, jb, c, n, ipiv);
      if (next > 0) record(factor_panel(m, a, lda, c, next, ipiv), c);
      continue;
    }
    // Task 0's columns before the panel: the next panel's, or all when the rest is narrow.
    const int64_t lead = n - (c + next) < kMinCols ? n : c + next;
    const std::vector<int64_t> s = split_columns(lead, n, next, next ? panel_cols : 0, tasks);
    int64_t panel_info = 0;
    parallel_tasks(tasks, [&](int64_t t) {
      if (t == 0) {
        using Clock = std::chrono::steady_clock;
        const Clock::time_point t0 = Clock::now();
        update_columns(m, a, lda, j, jb, c, lead, ipiv);
        const Clock::time_point t1 = Clock::now();
        if (next > 0) {
          panel_info = factor_panel(m, a, lda, c, next, ipiv);
          const double update = std::chrono::duration<double>(t1 - t0).count();
          if (update > 0)
            panel_cols = std::chrono::duration<double>(Clock::now() - t1).count() / update *
                         static_cast<double>(lead - c);
        }
      }
      update_columns(m, a, lda, j, jb, s[t], s[t + 1], ipiv);
    });
    record(panel_info, c);
  }
  return info;
}

template <class T>
void getri(int64_t n, const T* lu, const int32_t* ipiv, T* x) {
  if (n == 0) return;
  // Z = L^{-1}, column block by column block: block [c0, c1) of the identity is zero above row
  // c0, so only L's trailing (n - c0) x (n - c0) part solves for it. The blocks are independent
  // and run as pool tasks (each solve serially inside; the first blocks, the largest, are taken
  // first); one large solve at a time left a second thread idle in the small GEMMs of each.
  parallel_tasks((n + kNb - 1) / kNb, [&](int64_t b) {
    const int64_t c0 = b * kNb, w = std::min(kNb, n - c0);
    for (int64_t i = 0; i < n; ++i) std::fill_n(x + i * n + c0, w, T(0));
    for (int64_t j = c0; j < c0 + w; ++j) x[j * n + j] = T(1);
    trsm_left(n - c0, w, lu + c0 * n + c0, n, 1, /*lower=*/true, /*conj=*/false, /*unit=*/true,
              x + c0 * n + c0, n, 1);
  });
  // Z := Z P: P A = L U takes row perm[k] of A to row k, so column k of Z goes to perm[k].
  std::vector<int64_t> perm(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) perm[i] = i;
  for (int64_t i = 0; i < n; ++i) std::swap(perm[i], perm[ipiv[i] - 1]);
  parallel_for(0, n, kNb, [&](int64_t i0, int64_t i1) {
    std::vector<T> row(static_cast<size_t>(n));
    for (int64_t i = i0; i < i1; ++i) {
      T* xi = x + i * n;
      for (int64_t k = 0; k < n; ++k) row[perm[k]] = xi[k];
      std::copy(row.begin(), row.end(), xi);
    }
  });
  // X = U^{-1} Z (its columns split over the pool: trsm_left).
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
