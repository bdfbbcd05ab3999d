// Pieces shared by the eigh and svd kernels (spectral.h): the blocked application of recorded
// plane rotations (RotatedRows), sorting with vectors, and the orthonormal completion of U's
// null columns.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "linalg/small/spectral_small_kernels.h"
#include "linalg/spectral.h"
#include "tessera/core/parallel.h"

namespace tessera::linalg::detail {

template <class T>
RotatedRows<T>::RotatedRows(T* z, int64_t rows, int64_t ncols, int64_t ld)
    : z_(z), rows_(rows), total_(ncols * kParts), ld_(ld * kParts) {
  const int64_t chunks = (total_ + kChunk - 1) / kChunk;
  blocks_.assign(static_cast<size_t>(chunks * rows_ * kChunk), R(0));
  const R* zr = reinterpret_cast<const R*>(z_);
  for (int64_t i = 0; i < rows_; ++i)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t j0 = c * kChunk, len = std::min(kChunk, total_ - j0);
      std::copy(zr + i * ld_ + j0, zr + i * ld_ + j0 + len, block(c) + i * kChunk);
    }
}

template <class T>
void RotatedRows<T>::apply(const std::vector<PlaneRotation<R>>& rots) {
  if (rots.empty() || rows_ == 0 || total_ == 0) return;
  const auto& k = TS_DISPATCH(spectral_small_kernels);
  const int64_t count = static_cast<int64_t>(rots.size());
  const int64_t chunks = (total_ + kChunk - 1) / kChunk;
  auto run = [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t len = std::min(kChunk, total_ - c * kChunk);
      if constexpr (std::is_same_v<R, float>) {
        k.rotate_f32(rots.data(), count, block(c), len, kChunk);
      } else {
        k.rotate_f64(rots.data(), count, block(c), len, kChunk);
      }
    }
  };
  // Blocks are independent: large batches split them over the pool. Below 2^21 rotated
  // elements a batch is not worth waking the pool (n = 256 eigh ran slower on two threads at
  // 2^18).
  if (count * total_ < (int64_t{1} << 21) || chunks < 2) {
    run(0, chunks);
    return;
  }
  parallel_for(0, chunks, 1, run);
}

template <class T>
void RotatedRows<T>::finish() {
  R* zr = reinterpret_cast<R*>(z_);
  const int64_t chunks = (total_ + kChunk - 1) / kChunk;
  for (int64_t i = 0; i < rows_; ++i)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t j0 = c * kChunk, len = std::min(kChunk, total_ - j0);
      const R* src = block(c) + i * kChunk;
      std::copy(src, src + len, zr + i * ld_ + j0);
    }
}

template <class R, class T>
void sort_with_rows(int64_t n, R* s, bool ascending, T* rows1, int64_t len1, T* rows2,
                    int64_t len2) {
  // Selection sort: at most n - 1 row swaps, and equal values keep their order.
  for (int64_t i = 0; i < n; ++i) {
    int64_t best = i;
    for (int64_t j = i + 1; j < n; ++j)
      if (ascending ? s[j] < s[best] : s[j] > s[best]) best = j;
    if (best == i) continue;
    std::swap(s[i], s[best]);
    if (rows1) std::swap_ranges(rows1 + i * len1, rows1 + (i + 1) * len1, rows1 + best * len1);
    if (rows2) std::swap_ranges(rows2 + i * len2, rows2 + (i + 1) * len2, rows2 + best * len2);
  }
}

namespace {

template <class T>
real_t<T> row_norm(int64_t m, const T* x) {
  real_t<T> s = 0;
  for (int64_t i = 0; i < m; ++i) s += abs2(x[i]);
  return std::sqrt(s);
}

// x -= sum_r (u_r^H x) u_r over rows r < j of uc, twice (classical Gram-Schmidt repeated,
// orthogonal to working accuracy).
template <class T>
void project_out(int64_t m, int64_t j, const T* uc, T* x) {
  for (int pass = 0; pass < 2; ++pass) {
    for (int64_t r = 0; r < j; ++r) {
      const T* u = uc + r * m;
      T d = T(0);
      for (int64_t i = 0; i < m; ++i) d += mul(conj_of(u[i]), x[i]);
      for (int64_t i = 0; i < m; ++i) x[i] = fms(x[i], d, u[i]);
    }
  }
}

}  // namespace

template <class T>
void complete_orthonormal(int64_t m, int64_t k0, int64_t count, T* uc) {
  using R = real_t<T>;
  for (int64_t j = k0; j < count; ++j) {
    T* x = uc + j * m;
    R before = row_norm(m, x);
    if (before > R(0) && std::isfinite(before)) {
      for (int64_t i = 0; i < m; ++i) x[i] *= R(1) / before;
      project_out(m, j, uc, x);
      const R after = row_norm(m, x);
      if (after > R(0.5)) {
        for (int64_t i = 0; i < m; ++i) x[i] *= R(1) / after;
        continue;
      }
    }
    // The canonical vector with the largest part outside the rows so far: 1 - sum_r |u_r(i)|^2.
    int64_t best = 0;
    R best_rest = -1;
    for (int64_t i = 0; i < m; ++i) {
      R rest = 1;
      for (int64_t r = 0; r < j; ++r) rest -= abs2(uc[r * m + i]);
      if (rest > best_rest) best_rest = rest, best = i;
    }
    std::fill(x, x + m, T(0));
    x[best] = T(1);
    project_out(m, j, uc, x);
    const R after = row_norm(m, x);
    for (int64_t i = 0; i < m; ++i) x[i] *= R(1) / after;
  }
}

#define TS_LINALG_INSTANTIATE(T)                                                                   \
  template class RotatedRows<T>;                                                                   \
  template void sort_with_rows<real_t<T>, T>(int64_t, real_t<T>*, bool, T*, int64_t, T*, int64_t); \
  template void complete_orthonormal<T>(int64_t, int64_t, int64_t, T*);
TS_LINALG_FOR_EACH_TYPE(TS_LINALG_INSTANTIATE)
#undef TS_LINALG_INSTANTIATE

}  // namespace tessera::linalg::detail
