// Which kernel ISA this process uses. Chosen once from cpuid (and the OS's saved-state
// support), overridable downward with TESSERA_ISA=generic|avx2|avx512 for testing.
#pragma once

#include <string_view>

namespace tessera {

enum class CpuIsa : int { Generic = 0, Avx2 = 1, Avx512 = 2 };

struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512_bf16 = false, avx512_vnni = false, avx512_vbmi = false;
  // AMX tiles with TDPBF16PS (cpuid AMX-TILE and AMX-BF16, the OS saving tile state). Linux
  // still asks each process to request the tile data state before its first tile instruction:
  // request_amx_tiles().
  bool amx_bf16 = false;
  // cpuid vendor "AuthenticAMD". Its hardware prefetchers follow a contiguous stream on their
  // own, and software prefetches of that stream only cost (core/prefetch.h).
  bool amd = false;
};

const CpuFeatures& cpu_features();
// Asks the OS, once per process, for the AMX tile data state (Linux arch_prctl
// ARCH_REQ_XCOMP_PERM); true when granted and cpu_features().amx_bf16 holds.
bool request_amx_tiles();
CpuIsa cpu_isa();   // the ISA kernels run with
CpuIsa best_isa();  // the best ISA this CPU can run (TESSERA_ISA aside)
std::string_view isa_name(CpuIsa isa);

}  // namespace tessera
