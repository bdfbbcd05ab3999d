// Helpers for the GEMM engine tests: strided matrices inside guarded buffers, the float64
// (long double) oracle with an error bound per element, and the ISA tables this CPU can run.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "core/cpu_features.h"
#include "gemm/blocksizes.h"
#include "gemm/gemm.h"
#include "tessera/core/error.h"
#include "test_support.h"

namespace tessera::gemm::testing {

// How a matrix is laid out in memory.
enum class Layout { RowMajor, ColMajor, General };

inline const char* layout_name(Layout l) {
  switch (l) {
    case Layout::RowMajor:
      return "row";
    case Layout::ColMajor:
      return "col";
    default:
      return "general";
  }
}

inline constexpr Layout kLayouts[] = {Layout::RowMajor, Layout::ColMajor, Layout::General};

// TESSERA_GEMM_BLOCKS=`blocks` for a scope ("" leaves it unset), which the engine reads once
// per process: read again on entry and, unset, on exit (also when an assertion returns early).
class ScopedGemmBlocks {
 public:
  explicit ScopedGemmBlocks(const char* blocks) {
    if (*blocks) ::setenv("TESSERA_GEMM_BLOCKS", blocks, 1);
    reload_block_override();
  }
  ~ScopedGemmBlocks() {
    ::unsetenv("TESSERA_GEMM_BLOCKS");
    reload_block_override();
  }
  ScopedGemmBlocks(const ScopedGemmBlocks&) = delete;
  ScopedGemmBlocks& operator=(const ScopedGemmBlocks&) = delete;
};

// A rows x cols matrix at element strides (rs, cs) inside a buffer with kGuard sentinel
// elements before and after everything the strides can reach; gaps between rows/columns
// hold sentinels too, so any write outside the matrix is caught.
template <class T>
struct GuardedMatrix {
  static constexpr int64_t kGuard = 64;
  static constexpr T kSentinel = T(-7777.25);

  int64_t rows = 0, cols = 0, rs = 0, cs = 0;
  std::vector<T> buf;

  GuardedMatrix(int64_t r, int64_t c, Layout layout) : rows(r), cols(c) {
    switch (layout) {
      case Layout::RowMajor:
        rs = c + 3, cs = 1;  // padded leading dimension
        break;
      case Layout::ColMajor:
        rs = 1, cs = r + 2;
        break;
      default:
        rs = 2 * c + 1, cs = 2;  // neither stride is 1
        break;
    }
    const int64_t span = (r > 0 && c > 0) ? (r - 1) * rs + (c - 1) * cs + 1 : 0;
    buf.assign(span + 2 * kGuard, kSentinel);
  }
  T* data() { return buf.data() + kGuard; }
  const T* data() const { return buf.data() + kGuard; }
  T& at(int64_t i, int64_t j) { return data()[i * rs + j * cs]; }
  T at(int64_t i, int64_t j) const { return data()[i * rs + j * cs]; }

  void fill_random(std::mt19937_64& rng) {
    std::uniform_real_distribution<double> d(-1.0, 1.0);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) at(i, j) = static_cast<T>(d(rng));
  }
  void fill(T v) {
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) at(i, j) = v;
  }
  // Every element the matrix does not own still holds the sentinel.
  bool sentinels_intact() const {
    std::vector<char> owned(buf.size(), 0);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) owned[kGuard + i * rs + j * cs] = 1;
    for (size_t x = 0; x < buf.size(); ++x)
      if (!owned[x] && !(buf[x] == kSentinel)) return false;
    return true;
  }
};

template <class T>
constexpr ScalarType dtype_of() {
  if constexpr (std::is_same_v<T, std::complex<float>>) return ScalarType::Complex64;
  if constexpr (std::is_same_v<T, std::complex<double>>) return ScalarType::Complex128;
  return std::is_same_v<T, float> ? ScalarType::Float32 : ScalarType::Float64;
}

template <class T>
GemmProblem make_problem(int64_t m, int64_t n, int64_t k, const GuardedMatrix<T>& a,
                         const GuardedMatrix<T>& b, GuardedMatrix<T>& c, double alpha,
                         double beta) {
  GemmProblem p;
  p.dtype = dtype_of<T>();
  p.m = m, p.n = n, p.k = k;
  p.a = a.data(), p.a_rs = a.rs, p.a_cs = a.cs;
  p.b = b.data(), p.b_rs = b.rs, p.b_cs = b.cs;
  p.c = c.data(), p.c_rs = c.rs, p.c_cs = c.cs;
  p.alpha = alpha, p.beta = beta;
  return p;
}

// Checks `got` (C after the engine ran) against the oracle run on a copy of the original C.
// Bound per element: 4 * (k + 2) * eps * (|alpha| * sum_p |A(i,p)| |B(p,j)| + |beta C(i,j)|).
template <class T>
::testing::AssertionResult matches_reference(const GemmProblem& p, const GuardedMatrix<T>& a,
                                             const GuardedMatrix<T>& b,
                                             const GuardedMatrix<T>& c_before,
                                             const GuardedMatrix<T>& got) {
  if (!got.sentinels_intact()) return ::testing::AssertionFailure() << "write outside C";
  GuardedMatrix<T> ref = c_before;
  GemmProblem q = p;
  q.c = ref.data();
  gemm_reference(q);
  const double eps = std::numeric_limits<T>::epsilon();
  for (int64_t i = 0; i < p.m; ++i) {
    for (int64_t j = 0; j < p.n; ++j) {
      double mag = 0;
      if (p.alpha != 0)
        for (int64_t x = 0; x < p.k; ++x) mag += std::fabs(double(a.at(i, x)) * b.at(x, j));
      const double prev = p.beta == 0 ? 0.0 : std::fabs(p.beta * double(c_before.at(i, j)));
      const double bound = 4.0 * (p.k + 2) * eps * (std::fabs(p.alpha) * mag + prev) + 1e-300;
      const double g = got.at(i, j), r = ref.at(i, j);
      if (!(std::fabs(g - r) <= bound))
        return ::testing::AssertionFailure()
               << "C(" << i << ", " << j << ") = " << g << ", expected " << r << " (bound " << bound
               << ") for m=" << p.m << " n=" << p.n << " k=" << p.k << " alpha=" << p.alpha
               << " beta=" << p.beta;
    }
  }
  return ::testing::AssertionSuccess();
}

// The ISA tables this CPU can execute, by name.
struct NamedKernels {
  std::string isa;
  const cpu::GemmKernels* kernels;
};

inline std::vector<NamedKernels> runnable_kernels() {
  std::vector<NamedKernels> out;
  for (const auto& [isa, table] : TS_RUNNABLE_TABLES(gemm_kernels)) out.push_back({isa, table});
  return out;
}

using tessera::testing::expect_error_mentions;

}  // namespace tessera::gemm::testing
