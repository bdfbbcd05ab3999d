// Tessera's GEMM engine (internal API): C = alpha * A * B + beta * C for strided operands.
//
// A problem is a plain struct. Every operand is a strided matrix given by a pointer and
// element strides (row stride, column stride), so row-major, column-major, transposed views
// (swap the strides) and general strides need no copies:
//
//   A: m x k, A(i, p) = a[i * a_rs + p * a_cs]
//   B: k x n, B(p, j) = b[p * b_rs + j * b_cs]
//   C: m x n, C(i, j) = c[i * c_rs + j * c_cs]
//
// Semantics (those of BLAS):
//   - beta == 0: C is written, never read (NaN/Inf garbage in C does not reach the result);
//   - alpha == 0 or k == 0: A and B are not read; C := beta * C (0 when beta == 0);
//   - m == 0 or n == 0: nothing is touched.
//
// Numerics: each C element is one k-ordered dot product per KC block (see docs/gemm.md), and
// work is split across threads only over rows and columns of C, never over k. Results are
// therefore bitwise identical for every thread count.
//
// Threads: Tessera's pool (tessera::parallel_tasks); a call from inside a parallel region
// runs serially. Workspaces (packed panels) are cached per thread and reused.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <string_view>

#include "gemm/blocksizes.h"
#include "gemm/kernels/microkernel.h"
#include "tessera/core/dtype.h"

namespace tessera::gemm {

struct GemmProblem {
  ScalarType dtype = ScalarType::Float32;
  int64_t m = 0, n = 0, k = 0;
  const void* a = nullptr;
  int64_t a_rs = 0, a_cs = 0;
  const void* b = nullptr;
  int64_t b_rs = 0, b_cs = 0;
  void* c = nullptr;
  int64_t c_rs = 0, c_cs = 0;
  double alpha = 1, beta = 0;
};

// Whether every element offset i * rs + j * cs of a rows x cols strided operand fits in int64
// (checked in double, so the check itself cannot overflow).
inline bool offsets_fit_int64(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  return static_cast<double>(rows) * std::fabs(static_cast<double>(rs)) +
             static_cast<double>(cols) * std::fabs(static_cast<double>(cs)) <
         9.0e18;
}

// The dtypes the engine computes: float32 and float64 on their kernels, complex64 and
// complex128 as four real products each on the same kernels (BLIS's "4m" method; alpha and
// beta real).
bool gemm_supports(ScalarType dtype);

// Validates p (throws tessera::Error naming `op`) and runs it on the kernels of the ISA chosen
// at start-up, or on `kernels` when given (tests and benchmarks compare ISAs that way).
void gemm(const GemmProblem& p, const cpu::GemmKernels* kernels = nullptr,
          std::string_view op = "gemm");

// The part of C that gemm_triangle computes: the elements on and above the diagonal (kUpper:
// j >= i) or on and below it (kLower: j <= i), as BLAS syrk's uplo; kAll is gemm().
enum class Triangle { kAll, kUpper, kLower };

// C = alpha A B + beta C on one triangle of C only: the other strict triangle is neither read
// nor written (m and n need not be equal; the diagonal is i == j). The packed path skips the
// register tiles wholly outside the triangle and runs those across the diagonal through a
// buffer, so a symmetric rank-k update (A B = X X^H) costs half a GEMM plus a sliver, with
// each operand packed once. Threads split C's columns into slices of equal triangle area.
void gemm_triangle(const GemmProblem& p, Triangle triangle,
                   const cpu::GemmKernels* kernels = nullptr,
                   std::string_view op = "gemm_triangle");

// `batch` problems shaped like p; problem i uses a + i * a_bs, b + i * b_bs, c + i * c_bs
// (element offsets; a stride of 0 shares an operand). The C matrices must not overlap.
void gemm_strided_batched(const GemmProblem& p, int64_t batch, int64_t a_bs, int64_t b_bs,
                          int64_t c_bs, const cpu::GemmKernels* kernels = nullptr,
                          std::string_view op = "gemm_strided_batched");

// A list of independent problems, any shapes (a pointer-array batch, or grouped GEMM with a
// different m per problem as mixture-of-experts layers need). Small problems are spread over
// the threads one problem per task; large ones are each split over all threads. Their C
// matrices must not overlap.
void gemm_grouped(std::span<const GemmProblem> problems, const cpu::GemmKernels* kernels = nullptr,
                  std::string_view op = "gemm_grouped");

// B packed once into the microkernel's panel layout, for many products with the same B (a
// Linear weight; oneDNN calls this prepacked weights): gemm_prepacked skips the packing step
// that gemm() repeats on every call. The layout is that of pack_b_block (gemm/pack.h) for each
// NC x KC block, blocks column-major over (NC, KC), so a thread working on any NR-aligned
// column range finds its panels contiguous. A pack is tied to the kernels (ISA) and block
// sizes it was made for; float32 and float64.
class PackedB {
 public:
  // Packs the k x n matrix B(p, j) = b[p * b_rs + j * b_cs] (threads over blocks).
  PackedB(ScalarType dtype, int64_t k, int64_t n, const void* b, int64_t b_rs, int64_t b_cs,
          const cpu::GemmKernels* kernels = nullptr, std::string_view op = "pack_b");
  ~PackedB();
  PackedB(const PackedB&) = delete;
  PackedB& operator=(const PackedB&) = delete;

  ScalarType dtype() const { return dtype_; }
  int64_t k() const { return k_; }
  int64_t n() const { return n_; }
  const cpu::GemmKernels& kernels() const { return *kernels_; }
  const BlockSizes& block_sizes() const { return bs_; }  // fixed at packing time
  const void* data() const { return data_; }
  int64_t bytes() const { return bytes_; }

 private:
  ScalarType dtype_;
  int64_t k_, n_;
  const cpu::GemmKernels* kernels_;
  BlockSizes bs_;
  void* data_ = nullptr;
  int64_t bytes_ = 0;
};

// C = alpha * A * b + beta * C with a prepacked B: p.k and p.n must match b's, p.b is ignored.
// Runs on the kernels b was packed for; bitwise the same result as gemm() on the unpacked B.
void gemm_prepacked(const GemmProblem& p, const PackedB& b, std::string_view op = "gemm");

// The oracle: a plain triple loop accumulating in double (long double for float64), same
// semantics as gemm() (beta == 0 never reads C). Serial and slow; for tests.
void gemm_reference(const GemmProblem& p);

}  // namespace tessera::gemm
