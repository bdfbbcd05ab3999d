// Low-precision GEMM (internal API): bfloat16/float16 products accumulated in float32, and the
// scaled products behind scaled_mm (float8 with per-tensor/row/column scales, NVFP4 with
// block scales), all on one path:
//
//   C = alpha * diag(row_scale) * (A B) * diag(col_scale) + bias + beta * C
//
// where A (m x k) and B (k x n) are decoded while packing and C is float32, bfloat16 or
// float16. Operand formats (LowpOperand::dtype):
//   - BFloat16, Float16: A(i, p) = a[i * rs + p * cs] (element strides, any sign);
//   - Float8_e4m3fn, Float8_e5m2: the same, one byte per element;
//   - Float4_e2m1fn_x2 (NVFP4): strides count 4-bit elements; element e is nibble e & 1 of
//     byte e / 2 (low nibble first). K must be contiguous (A: cs == 1, B: rs == 1) and the
//     other stride even and positive, so each byte holds two consecutive k. Every 16
//     consecutive k of a row of A (column of B) share a float8_e4m3fn block scale:
//     A(i, p) = e2m1 * scale[i * scale_ls + (p / 16) * scale_ks], k a multiple of 16.
//
// Decoding: bfloat16, float8 and NVFP4 (value times block scale: at most 6 significant bits)
// are exact in bfloat16, so on a CPU with AVX512_BF16 they are packed as bfloat16 k-pairs for
// the vdpbf16ps kernel, or for AMX tiles where the CPU has AMX-BF16; float16 (11 significant bits),
// or any operand on a CPU without AVX512_BF16, is decoded to float32 and runs the float32
// microkernel. Either way products are exact and accumulate in float32; the scales, bias, beta and
// the one rounding to C's dtype happen in the epilogue, as each tile is stored (never a separate
// pass over C). Semantics otherwise those of gemm(): beta == 0 never reads C; alpha == 0 or k == 0
// reads neither A nor B; results are bitwise identical for every thread count.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gemm/blocksizes.h"
#include "gemm/kernels/lowp_kernels.h"
#include "tessera/core/dtype.h"

namespace tessera::gemm {

struct LowpOperand {
  ScalarType dtype = ScalarType::BFloat16;
  const void* data = nullptr;
  int64_t rs = 0, cs = 0;
  // NVFP4 only: float8_e4m3fn block scales, indexed by (lane, k / 16) where the lane is the
  // row of A or the column of B.
  const void* block_scale = nullptr;
  int64_t scale_ls = 0, scale_ks = 0;
};

struct LowpProblem {
  int64_t m = 0, n = 0, k = 0;
  LowpOperand a, b;
  ScalarType c_dtype = ScalarType::Float32;  // Float32, BFloat16 or Float16
  void* c = nullptr;
  int64_t c_rs = 0, c_cs = 0;
  float alpha = 1, beta = 0;
  const float* row_scale = nullptr;  // [m] or null
  const float* col_scale = nullptr;  // [n] or null
  const float* bias = nullptr;       // [n] or null
};

// Whether `dtype` is an operand format of this path.
bool gemm_lowp_supports(ScalarType dtype);

// Which kernel the default dispatch gives bfloat16 products, decided once per process: the AMX
// tile kernel where the CPU has AMX-BF16 and the OS grants the tile state; else the vdpbf16ps
// pair kernel where the CPU has AVX512_BF16 and the instruction measurably beats the float32
// FMA (a 1 ms probe on first use); else the float32 kernel on operands decoded while packing.
// TESSERA_GEMM_BF16=amx|pairs|float32 forces one. `tessera info` prints it.
struct Bf16Path {
  bool pairs = false;  // bf16 k-pairs: the vdpbf16ps kernel, or AMX where amx
  bool amx = false;
  double gain = 0;     // measured multiply-adds of vdpbf16ps per FMA's (0: not measured)
  std::string reason;  // why this path, for tessera info
};
const Bf16Path& bf16_path();

// Validates p (throws tessera::Error naming `op`) and runs it on the kernels of the ISA chosen
// at start-up (bfloat16: the path bf16_path() chose), or on `kernels` (tests pass each ISA's
// table, and one with bf16.fn cleared).
void gemm_lowp(const LowpProblem& p, const cpu::LowpGemmKernels* kernels = nullptr,
               std::string_view op = "gemm_lowp");

// B packed once for many products (a low-precision Linear weight): the panels run_block
// would pack on every call, decoded to float32 or in vdpbf16ps pairs as the kernels the pack
// was made for (the default: bf16_path()'s choice) want, KC block after KC block, so any
// NR-aligned column range of a block is contiguous. Tied to those kernels and block sizes.
// Every operand format packs: bfloat16, float16, float8 and NVFP4 (block scales multiplied in
// while decoding, as run_block does); per-column scales, bias and alpha stay in the problem.
class PackedLowpB {
 public:
  // Packs the k x n operand b (LowpOperand's conventions, validated as gemm_lowp's B).
  PackedLowpB(int64_t k, int64_t n, const LowpOperand& b,
              const cpu::LowpGemmKernels* kernels = nullptr, std::string_view op = "pack_b");
  // The same for B(p, j) = b[p * b_rs + j * b_cs] of a format without block scales.
  PackedLowpB(ScalarType dtype, int64_t k, int64_t n, const void* b, int64_t b_rs, int64_t b_cs,
              const cpu::LowpGemmKernels* kernels = nullptr, std::string_view op = "pack_b")
      : PackedLowpB(k, n, LowpOperand{dtype, b, b_rs, b_cs}, kernels, op) {}
  ~PackedLowpB();
  PackedLowpB(const PackedLowpB&) = delete;
  PackedLowpB& operator=(const PackedLowpB&) = delete;

  ScalarType dtype() const { return dtype_; }
  int64_t k() const { return k_; }
  int64_t n() const { return n_; }
  const cpu::LowpGemmKernels& kernels() const { return *kernels_; }
  bool pairs() const { return pairs_; }
  const BlockSizes& block_sizes() const { return bs_; }
  const void* data() const { return data_; }
  int64_t bytes() const { return bytes_; }
  // The panels of KC block `block` starting at column `col` (a multiple of NR).
  const void* panels(int64_t block, int64_t col) const;

 private:
  ScalarType dtype_;
  int64_t k_, n_;
  const cpu::LowpGemmKernels* kernels_;
  bool pairs_ = false;
  BlockSizes bs_;
  std::vector<int64_t> block_offsets_, panel_bytes_;  // bytes, per KC block
  void* data_ = nullptr;
  int64_t bytes_ = 0;
};

// gemm_lowp with B prepacked: p.k and p.n must match the pack's, p.a's dtype its dtype; p.b is
// ignored. Runs on the pack's kernels and block sizes: bitwise gemm_lowp() on the unpacked B
// with those kernels.
void gemm_lowp_prepacked(const LowpProblem& p, const PackedLowpB& b,
                         std::string_view op = "gemm_lowp");

// The oracle: operands decoded to double, one k-ordered sum in double per element, the
// epilogue in double, one rounding to C's dtype. Serial; for tests.
void gemm_lowp_reference(const LowpProblem& p);

// Decoded value of element (lane, step) of an operand seen lane-major (tests use it too).
double lowp_decode(const LowpOperand& o, bool is_b, int64_t row, int64_t col);

}  // namespace tessera::gemm
