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
  // cpuid vendor "AuthenticAMD". Its hardware prefetchers follow a contiguous stream on their
  // own, and software prefetches of that stream only cost (core/prefetch.h).
  bool amd = false;
};

const CpuFeatures& cpu_features();
CpuIsa cpu_isa();   // the ISA kernels run with
CpuIsa best_isa();  // the best ISA this CPU can run (TESSERA_ISA aside)
std::string_view isa_name(CpuIsa isa);

}  // namespace tessera
