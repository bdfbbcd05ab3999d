// Per-ISA kernels of eigh and svd (spectral_small_kernels.h): the batched kernels for small
// real matrices, and the blocked rotation sweep of the large-n QR iterations.
//
// Batched eigh runs the tridiagonal QR of lane_tridiagonal.h on pairs of vectors. Batched svd
// runs one-sided Jacobi on vectors of W matrices, with the pairs in tournament order (below)
// rather than the per-matrix kernels' row-cyclic order: the n / 2 rotations of a round are
// disjoint, so their angles (divisions and square roots) are computed together or overlapped
// with other work instead of each waiting for the one before. Each lane is scaled by a power
// of two so that its largest entry is in [1, 2) (no overflow in squares and dot products,
// exact to undo). A lane whose pair (p, q) is already below the threshold gets t = 0, the
// identity rotation; a pair below it in every lane is skipped.
#include "linalg/small/spectral_small_kernels.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "core/cached_vector.h"
#include "core/vec.h"
#include "linalg/small/interleave.h"
#include "linalg/small/lane_bidiagonal.h"
#include "linalg/small/lane_tridiagonal.h"
#include "linalg/small/small_kernels.h"

namespace tessera::cpu::TS_ISA {

namespace {

using vec::TS_ISA::Vec;

constexpr int kMaxSweeps = 40;

// The Jacobi rotation angle t = tan(theta) for the 2 x 2 problem with off-diagonal g and
// zeta = (b - a) / (2 g), where `rotate` (thresh < |g|); 0 elsewhere.
template <class T>
Vec<T> jacobi_tangent(Vec<T> a, Vec<T> b, Vec<T> g, Vec<T> thresh) {
  using V = Vec<T>;
  const V one(T(1)), zero(T(0));
  const V zeta = (b - a) / (g + g);
  const V az = zeta.abs();
  // |zeta| so large that zeta^2 could overflow: sqrt(1 + zeta^2) ~ |zeta|, t ~ 1 / (2 zeta)
  // (the same bits as 0.5 / zeta, without a second division).
  const V root = V::select_lt(V(T(1e15)), az, az, (one + zeta * zeta).sqrt());
  const V t = V::copysign(one, zeta) / (az + root);
  return V::select_lt(thresh, g.abs(), t, zero);
}

// The round-robin ("tournament") order of the pairs of `order` indices (`order` even):
// order - 1 rounds of order / 2 disjoint pairs, every pair once per sweep. The rotations of a
// round commute, so a round's angles are computed together and its updates run without a
// dependency from one rotation to the next.
struct Tournament {
  int64_t order = 0, pairs = 0;
  std::vector<int32_t> p, q;  // pair i of round r at r * pairs + i, p < q

  explicit Tournament(int64_t even_order) : order(even_order), pairs(even_order / 2) {
    std::vector<int32_t> seat(static_cast<size_t>(order));
    std::iota(seat.begin(), seat.end(), 0);
    for (int64_t r = 0; r + 1 < order; ++r) {
      for (int64_t i = 0; i < pairs; ++i) {
        const int32_t x = seat[i], y = seat[order - 1 - i];
        p.push_back(std::min(x, y));
        q.push_back(std::max(x, y));
      }
      std::rotate(seat.begin() + 1, seat.end() - 1, seat.end());  // seat 0 stays
    }
  }
  int64_t rounds() const { return order - 1; }
};

// Groups of 2 W matrices on LanePairs (lane_tridiagonal.h): element (i, j) of the group at
// vectors 2 (i ld + j) (lanes 0 .. W-1) and 2 (i ld + j) + 1 (lanes W .. 2W-1), ld odd so that
// a column's vectors never 4K-alias.
enum class Part { kAll, kLower, kUpperAsLower };

// Interleaves the `used` matrices at `a` (n x n, row-major, n * n apart; identity in the lanes
// past `used`) into buf: each half by block transposes, then merged. kLower / kUpperAsLower
// fill only buf's lower triangle, from a's lower triangle or the transpose of its upper one.
template <class T>
void to_pairs(int64_t n, const T* a, int used, Part part, cached_vector<T>& buf, int64_t ld) {
  constexpr int W = Vec<T>::kSize;
  thread_local cached_vector<T> half_tls;
  cached_vector<T>& half = half_tls;
  buf.resize(static_cast<size_t>(n * ld * 2 * W));
  for (int h = 0; h < 2; ++h) {
    const int lanes = std::clamp(used - h * W, 0, W);
    const T* src = interleave_into(n, lanes > 0 ? a + h * W * n * n : a, lanes, half);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < (part == Part::kAll ? n : i + 1); ++j)
        Vec<T>::load(src + (part == Part::kUpperAsLower ? j * n + i : i * n + j) * W)
            .store(buf.data() + ((i * ld + j) * 2 + h) * W);
  }
}

// Half h of the pair-layout matrices in buf (transposed when `transpose`) back to one matrix
// per lane in out: lane l's element (i, j) at out[(l n + i) ld + j], for `lanes` lanes.
template <class T>
void half_from_pairs(int64_t n, const T* buf, int64_t ld, int h, bool transpose, int lanes,
                     cached_vector<T>& out) {
  constexpr int W = Vec<T>::kSize;
  thread_local cached_vector<T> split_tls;
  cached_vector<T>& split = split_tls;
  split.resize(static_cast<size_t>(n * ld * W));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j)
      Vec<T>::load(buf + ((transpose ? j * ld + i : i * ld + j) * 2 + h) * W)
          .store(split.data() + (i * ld + j) * W);
  out.resize(static_cast<size_t>(n * ld * W));
  interleaved_to_lanes(split.data(), n * ld, lanes, out.data());
}

// The order that sorts lane `lane` of the n values (pair layout) by `before`, ties by index
// (what a stable sort gives, without its buffer).
template <class T, class Less>
void lane_order(int64_t n, const T* values, int lane, Less before, std::vector<int64_t>& perm) {
  constexpr int PW = LanePair<T>::kSize;
  thread_local std::vector<std::pair<T, int64_t>> keyed_tls;
  std::vector<std::pair<T, int64_t>>& keyed = keyed_tls;
  keyed.resize(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) keyed[j] = {values[j * PW + lane], j};
  std::sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    return before(x.first, y.first) || (!before(y.first, x.first) && x.second < y.second);
  });
  perm.resize(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) perm[j] = keyed[j].second;
}

// out (n x n, row-major) := the columns of q (n rows of ld) in the order perm.
template <class T>
void columns_in_order(int64_t n, const T* q, int64_t ld, const int64_t* perm, T* out) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) out[i * n + j] = q[i * ld + perm[j]];
}

// The tridiagonal path (lane_tridiagonal.h) on a group of 2 W symmetric matrices: reduction,
// Q^T when vectors are wanted, QR sweeps. The eigenvectors are the rows of Q^T.
template <class T>
void heev_tridiagonal_group(int64_t n, const T* a, bool upper, T* w, T* v, int used,
                            int32_t* info) {
  using P = LanePair<T>;
  constexpr int W = Vec<T>::kSize, PW = P::kSize;
  const int64_t ld = n | 1;
  thread_local cached_vector<T> abuf_tls, qbuf_tls, scratch_tls, lanes_tls;
  cached_vector<T>&abuf = abuf_tls, &qbuf = qbuf_tls, &scratch = scratch_tls, &out = lanes_tls;
  to_pairs(n, a, used, upper ? Part::kUpperAsLower : Part::kLower, abuf, ld);
  T* buf = abuf.data();  // its upper triangle is never read
  alignas(64) T scale[PW];
  scale_lanes_to_one<T, P>(n, n, buf, ld, /*lower=*/true, scale);
  scratch.resize(static_cast<size_t>(5 * n * PW));
  T* d = scratch.data();
  T* e = d + n * PW;
  T* tau = e + n * PW;
  T* work = tau + n * PW;  // 2 n pairs: the reduction's, then the sweeps' rotations
  tridiagonalize_lanes<T, P>(n, buf, ld, d, e, tau, work);
  T* qt = nullptr;
  if (v) {
    qbuf.resize(static_cast<size_t>(n * ld * PW));
    qt = qbuf.data();
    form_qt_lanes<T, P>(n, buf, ld, 1, /*shift=*/1, n - 2, tau, qt, ld);
  }
  alignas(64) T failed[PW];
  tridiagonal_qr_lanes<T, P>(n, d, e, qt, ld, work, 30 * n).store(failed);
  std::vector<int64_t> perm;
  for (int h = 0; h < 2; ++h) {
    const int lanes = std::clamp(used - h * W, 0, W);
    if (lanes == 0) break;
    if (v) half_from_pairs(n, qt, ld, h, /*transpose=*/true, lanes, out);  // Q: vectors as columns
    for (int l = 0; l < lanes; ++l) {
      const int lane = h * W + l;  // also the matrix's index in the group
      info[lane] = failed[lane] != T(0) ? 1 : 0;
      lane_order(n, d, lane, std::less<T>(), perm);
      T* wl = w + lane * n;
      for (int64_t j = 0; j < n; ++j) wl[j] = d[perm[j] * PW + lane] / scale[lane];
      if (!v) continue;
      columns_in_order(n, out.data() + l * n * ld, ld, perm.data(), v + lane * n * n);
    }
  }
}

// The bidiagonal path (lane_bidiagonal.h) on a group of 2 W square matrices: reduction, U^T and
// V^T when vectors are wanted, QR sweeps. Singular values are |d| (a negative d flips its row
// of V^T), sorted descending.
template <class T>
void svd_bidiagonal_group(int64_t n, const T* a, T* sv, T* u, T* vh, int used, int32_t* info) {
  using P = LanePair<T>;
  constexpr int W = Vec<T>::kSize, PW = P::kSize;
  const int64_t ld = n | 1;
  thread_local cached_vector<T> abuf_tls, ubuf_tls, vbuf_tls, scratch_tls, lanes_tls;
  cached_vector<T>&abuf = abuf_tls, &ubuf = ubuf_tls, &vbuf = vbuf_tls, &scratch = scratch_tls,
  &out = lanes_tls;
  to_pairs(n, a, used, Part::kAll, abuf, ld);
  T* buf = abuf.data();
  alignas(64) T scale[PW];
  scale_lanes_to_one<T, P>(n, n, buf, ld, /*lower=*/false, scale);
  scratch.resize(static_cast<size_t>(8 * n * PW));
  T* d = scratch.data();
  T* e = d + n * PW;
  T* tauq = e + n * PW;
  T* taup = tauq + n * PW;
  T* work = taup + n * PW;  // 4 n pairs: the reduction's 3 n, then the sweeps' rotations
  bidiagonalize_lanes<T, P>(n, buf, ld, d, e, tauq, taup, work);
  T *ut = nullptr, *vt = nullptr;
  if (u) {
    ubuf.resize(static_cast<size_t>(n * ld * PW));
    vbuf.resize(static_cast<size_t>(n * ld * PW));
    ut = ubuf.data();
    vt = vbuf.data();
    form_qt_lanes<T, P>(n, buf, ld, 1, /*shift=*/0, n, tauq, ut, ld);
    form_qt_lanes<T, P>(n, buf, 1, ld, /*shift=*/1, n - 1, taup, vt, ld);
  }
  alignas(64) T failed[PW];
  bidiagonal_qr_lanes<T, P>(n, d, e, ut, vt, ld, work, 30 * n).store(failed);
  // Per lane: the order of |d| descending, the singular values, info.
  thread_local std::vector<int64_t> perms_tls;
  std::vector<int64_t>& perms = perms_tls;
  perms.resize(static_cast<size_t>(used * n));
  std::vector<int64_t> perm;
  auto larger = [](T x, T y) { return std::abs(x) > std::abs(y); };
  for (int lane = 0; lane < used; ++lane) {
    info[lane] = failed[lane] != T(0) ? 1 : 0;
    lane_order(n, d, lane, larger, perm);
    std::copy(perm.begin(), perm.end(), perms.begin() + lane * n);
    T* sl = sv + lane * n;
    for (int64_t j = 0; j < n; ++j) sl[j] = std::abs(d[perm[j] * PW + lane]) / scale[lane];
  }
  if (!u) return;
  for (int h = 0; h < 2; ++h) {
    const int lanes = std::clamp(used - h * W, 0, W);
    if (lanes == 0) break;
    half_from_pairs(n, ut, ld, h, /*transpose=*/true, lanes, out);  // U, vectors as columns
    for (int l = 0; l < lanes; ++l) {
      const int lane = h * W + l;
      columns_in_order(n, out.data() + l * n * ld, ld, perms.data() + lane * n, u + lane * n * n);
    }
    half_from_pairs(n, vt, ld, h, /*transpose=*/false, lanes, out);  // V^T, vectors as rows
    for (int l = 0; l < lanes; ++l) {
      const int lane = h * W + l;
      const int64_t* p = perms.data() + lane * n;
      T* vl = vh + lane * n * n;
      const T* q = out.data() + l * n * ld;
      for (int64_t j = 0; j < n; ++j) {
        const T sign = d[p[j] * PW + lane] < T(0) ? T(-1) : T(1);
        const T* row = q + p[j] * ld;
        for (int64_t i = 0; i < n; ++i) vl[j * n + i] = sign * row[i];
      }
    }
  }
}

// One-sided (Hestenes) Jacobi on the columns of one group of square matrices, pairs in
// tournament order. Within a round the angle of pair i + 1 is computed before pair i rotates,
// so that its divisions and square roots overlap that work. An odd order gets a zero column,
// which never rotates. V's columns are contiguous like A's and rotate with them.
template <class T>
void svd_group(int64_t n, const T* a, T* sv, T* u, T* vh, int used, int32_t* info) {
  using V = Vec<T>;
  constexpr int W = V::kSize;
  const int64_t order = n + (n & 1);
  thread_local cached_vector<T> abuf_tls, vbuf_tls, cbuf_tls, sbuf_tls;
  thread_local std::vector<uint8_t> active_tls;
  cached_vector<T>&abuf = abuf_tls, &vbuf = vbuf_tls, &cbuf = cbuf_tls, &sbuf = sbuf_tls;
  std::vector<uint8_t>& active = active_tls;
  const Tournament tour(order);
  const int64_t pairs = tour.pairs;
  // Columns contiguous (the Jacobi pairs are columns).
  T* buf = interleave_into(n, a, used, abuf, n, /*transpose=*/true, order);
  const bool vectors = u != nullptr;
  // V's columns contiguous too: V's rotations are the columns' rotations.
  T* vb = vectors ? interleaved_identity(order, vbuf) : nullptr;
  cbuf.resize(static_cast<size_t>(pairs * W));
  sbuf.resize(static_cast<size_t>(pairs * W));
  active.resize(static_cast<size_t>(pairs));
  alignas(64) T scale[W];
  scale_lanes_to_one<T, V>(n, n, buf, n, /*lower=*/false, scale);  // the zero column stays zero
  auto col = [&](int64_t j) { return buf + j * n * W; };
  const V tol(std::numeric_limits<T>::epsilon() * std::sqrt(T(n)));
  const V one(T(1)), zero(T(0)), half(T(0.5));
  V still(T(0));
  for (int sweep = 0; sweep < kMaxSweeps; ++sweep) {
    still = zero;
    for (int64_t r = 0; r < tour.rounds(); ++r) {
      const int32_t* ps = tour.p.data() + r * pairs;
      const int32_t* qs = tour.q.data() + r * pairs;
      auto angle = [&](int64_t i) {
        const T* xp = col(ps[i]);
        const T* xq = col(qs[i]);
        V alpha = zero, beta = zero, gamma = zero;
        for (int64_t k = 0; k < n; ++k) {
          const V x = V::load(xp + k * W), y = V::load(xq + k * W);
          alpha = V::fmadd(x, x, alpha);
          beta = V::fmadd(y, y, beta);
          gamma = V::fmadd(x, y, gamma);
        }
        // A zero column has alpha or beta 0, hence gamma 0: never rotated.
        const V thresh = tol * alpha.sqrt() * beta.sqrt();
        const V rotated = V::select_lt(thresh, gamma.abs(), one, zero);
        active[i] = !V::all_lt(rotated, half);
        if (!active[i]) return;
        still = V::max(still, rotated);
        const V t = jacobi_tangent(alpha, beta, gamma, thresh);
        const V c = one / (one + t * t).sqrt(), s = t * c;
        c.store(cbuf.data() + i * W);
        s.store(sbuf.data() + i * W);
      };
      auto rotate_pair = [&](int64_t i) {
        if (!active[i]) return;
        const V c = V::load(cbuf.data() + i * W), s = V::load(sbuf.data() + i * W);
        T* xp = col(ps[i]);
        T* xq = col(qs[i]);
        for (int64_t k = 0; k < n; ++k) {
          const V x = V::load(xp + k * W), y = V::load(xq + k * W);
          (c * x - s * y).store(xp + k * W);
          (s * x + c * y).store(xq + k * W);
        }
        if (!vb) return;
        T* vp = vb + ps[i] * order * W;
        T* vq = vb + qs[i] * order * W;
        for (int64_t k = 0; k < n; ++k) {
          const V x = V::load(vp + k * W), y = V::load(vq + k * W);
          (c * x - s * y).store(vp + k * W);
          (s * x + c * y).store(vq + k * W);
        }
      };
      angle(0);
      for (int64_t i = 1; i < pairs; ++i) {
        angle(i);
        rotate_pair(i - 1);
      }
      rotate_pair(pairs - 1);
    }
    if (V::all_lt(still, half)) break;
  }
  auto at = [&](int64_t i, int64_t j) { return col(j) + i * W; };
  auto vat = [&](int64_t i, int64_t j) { return vb + (j * order + i) * W; };
  // Column norms of every lane at once.
  cached_vector<T> norms(static_cast<size_t>(n * W));
  for (int64_t j = 0; j < n; ++j) {
    V ss = zero;
    for (int64_t i = 0; i < n; ++i) {
      const V x = V::load(at(i, j));
      ss = V::fmadd(x, x, ss);
    }
    ss.sqrt().store(norms.data() + j * W);
  }
  alignas(64) T left[W];
  still.store(left);
  const T floor = T(n) * std::numeric_limits<T>::epsilon();
  std::vector<int64_t> perm(static_cast<size_t>(n));
  for (int l = 0; l < used; ++l) {
    auto norm = [&](int64_t j) { return norms[j * W + l]; };
    std::iota(perm.begin(), perm.end(), int64_t{0});
    std::stable_sort(perm.begin(), perm.end(),
                     [&](int64_t x, int64_t y) { return norm(x) > norm(y); });
    T* sl = sv + l * n;
    for (int64_t j = 0; j < n; ++j) sl[j] = norm(perm[j]) / scale[l];
    const bool noise = vectors && !(norm(perm[n - 1]) > floor * norm(perm[0]));
    info[l] = left[l] != T(0) || noise ? 1 : 0;
    if (!vectors || info[l]) continue;
    T* ul = u + l * n * n;
    T* vl = vh + l * n * n;
    for (int64_t j = 0; j < n; ++j) {
      const T r = T(1) / norm(perm[j]);
      for (int64_t i = 0; i < n; ++i) {
        ul[i * n + j] = at(i, perm[j])[l] * r;
        vl[j * n + i] = vat(i, perm[j])[l];
      }
    }
  }
}

template <class T>
void heev_batch(int64_t n, int64_t count, const T* a, bool upper, T* w, T* v, int32_t* info) {
  constexpr int W = LanePair<T>::kSize;
  std::fill(info, info + count, 0);
  if (n == 0) return;
  for (int64_t g = 0; g < count; g += W) {
    const int used = static_cast<int>(std::min<int64_t>(W, count - g));
    heev_tridiagonal_group(n, a + g * n * n, upper, w + g * n, v ? v + g * n * n : nullptr, used,
                           info + g);
  }
}

template <class T>
void svd_batch(int64_t n, int64_t count, const T* a, T* s, T* u, T* vh, int32_t* info) {
  if (n >= kSvdBidiagonalMinOrder) {
    constexpr int W = LanePair<T>::kSize;
    for (int64_t g = 0; g < count; g += W) {
      const int used = static_cast<int>(std::min<int64_t>(W, count - g));
      svd_bidiagonal_group(n, a + g * n * n, s + g * n, u ? u + g * n * n : nullptr,
                           vh ? vh + g * n * n : nullptr, used, info + g);
    }
    return;
  }
  constexpr int W = Vec<T>::kSize;
  for (int64_t g = 0; g < count; g += W) {
    const int used = static_cast<int>(std::min<int64_t>(W, count - g));
    svd_group(n, a + g * n * n, s + g * n, u ? u + g * n * n : nullptr,
              vh ? vh + g * n * n : nullptr, used, info + g);
  }
}

// Columns in blocks of kVecs vectors: a block of a row is held in registers from one rotation to
// the next when they share the row (the QR sweeps' chains (i, i+1), (i-1, i), ... or (k, k+1),
// (k+1, k+2), ...), so a chained rotation loads and stores one row instead of two. Which of the
// two rows stays is chosen by a look at the next rotation. Columns past the last whole block
// are rotated one rotation at a time.
template <class T>
void rotate(const RowRotation<T>* rots, int64_t count, T* z, int64_t ncols, int64_t ld) {
  using V = Vec<T>;
  constexpr int W = V::kSize;
  constexpr int kVecs = sizeof(V) >= 64 ? 8 : 4;  // 16 of the 32 AVX-512 registers, 8 of 16
  constexpr int64_t kBlock = kVecs * W;
  int64_t j0 = 0;
  for (; j0 + kBlock <= ncols; j0 += kBlock) {
    V held[kVecs] = {};
    int64_t held_row = -1;
    auto store_held = [&] {
      T* row = z + held_row * ld + j0;
#pragma GCC unroll 8
      for (int t = 0; t < kVecs; ++t) held[t].store(row + t * W);
    };
    for (int64_t r = 0; r < count; ++r) {
      const int64_t p = rots[r].p, q = rots[r].q;
      if (held_row >= 0 && held_row != p && held_row != q) {
        store_held();
        held_row = -1;
      }
      const V c(rots[r].c), s(rots[r].s);
      T* xp = z + p * ld + j0;
      T* yq = z + q * ld + j0;
      // Rows a page apart are not prefetched by the hardware: fetch those of two rotations on.
      if (r + 2 < count) {
        const T* ahead_p = z + rots[r + 2].p * ld + j0;
        const T* ahead_q = z + rots[r + 2].q * ld + j0;
        for (int64_t t = 0; t < kBlock; t += 64 / static_cast<int64_t>(sizeof(T))) {
          __builtin_prefetch(ahead_p + t);
          __builtin_prefetch(ahead_q + t);
        }
      }
      V x[kVecs], y[kVecs];
#pragma GCC unroll 8
      for (int t = 0; t < kVecs; ++t) {
        x[t] = held_row == p ? held[t] : V::load(xp + t * W);
        y[t] = held_row == q ? held[t] : V::load(yq + t * W);
      }
      // Keep the row the next rotation uses (row q when both or neither: either is right).
      const bool next_uses_p = r + 1 < count && (rots[r + 1].p == p || rots[r + 1].q == p) &&
                               !(rots[r + 1].p == q || rots[r + 1].q == q);
      T* store_row = next_uses_p ? yq : xp;
#pragma GCC unroll 8
      for (int t = 0; t < kVecs; ++t) {
        const V nx = c * x[t] - s * y[t], ny = s * x[t] + c * y[t];
        held[t] = next_uses_p ? nx : ny;
        (next_uses_p ? ny : nx).store(store_row + t * W);
      }
      held_row = next_uses_p ? p : q;
    }
    if (held_row >= 0) store_held();
  }
  if (j0 == ncols) return;
  const int64_t len = ncols - j0;
  for (int64_t r = 0; r < count; ++r) {
    T* x = z + rots[r].p * ld + j0;
    T* y = z + rots[r].q * ld + j0;
    const T c = rots[r].c, s = rots[r].s;
    const V cv(c), sv(s);
    int64_t j = 0;
    for (; j + W <= len; j += W) {
      const V xp = V::load(x + j), yq = V::load(y + j);
      (cv * xp - sv * yq).store(x + j);
      (sv * xp + cv * yq).store(y + j);
    }
    for (; j < len; ++j) {
      const T xp = x[j], yq = y[j];
      x[j] = c * xp - s * yq;
      y[j] = s * xp + c * yq;
    }
  }
}

// Accumulates in A (T, or double for float input).
template <class T, class A = T>
void dot3(int64_t n, const T* x, const T* y, A* out) {
  using V = Vec<A>;
  constexpr int W = V::kSize;
  V xx(A(0)), yy(A(0)), xy(A(0));
  int64_t i = 0;
  for (; i + W <= n; i += W) {
    const V a = V::load_convert(x + i), b = V::load_convert(y + i);
    xx = V::fmadd(a, a, xx);
    yy = V::fmadd(b, b, yy);
    xy = V::fmadd(a, b, xy);
  }
  alignas(64) A lane[3][W];
  xx.store(lane[0]);
  yy.store(lane[1]);
  xy.store(lane[2]);
  A s[3] = {0, 0, 0};
  for (int r = 0; r < 3; ++r)
    for (int l = 0; l < W; ++l) s[r] += lane[r][l];
  for (; i < n; ++i) {
    const A a = x[i], b = y[i];
    s[0] += a * a;
    s[1] += b * b;
    s[2] += a * b;
  }
  std::copy(s, s + 3, out);
}

// x . y summed as dot3 sums it (lanes, then the lanes in order, then the tail): the same bits
// as dot3's third output, without the other two sums.
template <class T>
T dot(int64_t n, const T* x, const T* y) {
  using V = Vec<T>;
  constexpr int W = V::kSize;
  V xy(T(0));
  int64_t i = 0;
  for (; i + W <= n; i += W) xy = V::fmadd(V::load(x + i), V::load(y + i), xy);
  alignas(64) T lane[W];
  xy.store(lane);
  T s = 0;
  for (int l = 0; l < W; ++l) s += lane[l];
  for (; i < n; ++i) s += x[i] * y[i];
  return s;
}

template <class T>
void axpy(int64_t n, T a, const T* x, T* y) {
  using V = Vec<T>;
  constexpr int W = V::kSize;
  const V av(a);
  int64_t i = 0;
  for (; i + W <= n; i += W) V::fmadd(av, V::load(x + i), V::load(y + i)).store(y + i);
  for (; i < n; ++i) y[i] += a * x[i];
}

template <class T>
T dot_axpy(int64_t n, const T* x, const T* v, T a, T* y) {
  using V = Vec<T>;
  constexpr int W = V::kSize;
  const V av(a);
  V acc(T(0));
  int64_t i = 0;
  for (; i + W <= n; i += W) {
    const V xv = V::load(x + i);
    acc = V::fmadd(xv, V::load(v + i), acc);
    V::fmadd(av, xv, V::load(y + i)).store(y + i);
  }
  T dot = acc.reduce_add();
  for (; i < n; ++i) {
    dot += x[i] * v[i];
    y[i] += a * x[i];
  }
  return dot;
}

}  // namespace

const SpectralSmallKernels& spectral_small_kernels() {
  static const SpectralSmallKernels k{
      heev_batch<float>, heev_batch<double>, svd_batch<float>,    svd_batch<double>, rotate<float>,
      rotate<double>,    dot3<double>,       dot3<float, double>, axpy<float>,       axpy<double>,
      dot_axpy<float>,   dot_axpy<double>,   dot<float>,          dot<double>};
  return k;
}

}  // namespace tessera::cpu::TS_ISA
