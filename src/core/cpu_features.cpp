#include "core/cpu_features.h"

#include <cpuid.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include <cstdlib>
#include <cstring>
#include <string_view>

namespace tessera {

namespace {

uint64_t xgetbv0() {
  uint32_t eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}

CpuFeatures detect() {
  CpuFeatures f;
  unsigned a, b, c, d;
  if (__get_cpuid(0, &a, &b, &c, &d)) {
    char vendor[12];
    std::memcpy(vendor, &b, 4);
    std::memcpy(vendor + 4, &d, 4);
    std::memcpy(vendor + 8, &c, 4);
    f.amd = std::string_view(vendor, 12) == "AuthenticAMD";
  }
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = (c >> 27) & 1;
  f.fma = (c >> 12) & 1;
  f.f16c = (c >> 29) & 1;
  const bool avx = (c >> 28) & 1;
  if (!osxsave || !avx) return f;
  const uint64_t xcr0 = xgetbv0();
  const bool ymm_state = (xcr0 & 0x6) == 0x6;
  const bool zmm_state = (xcr0 & 0xe6) == 0xe6;
  if (!ymm_state) return CpuFeatures{.amd = f.amd};  // no AVX state saved: SSE only
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    f.avx2 = (b >> 5) & 1;
    if (zmm_state) {
      f.avx512f = (b >> 16) & 1;
      f.avx512dq = (b >> 17) & 1;
      f.avx512bw = (b >> 30) & 1;
      f.avx512vl = (b >> 31) & 1;
      f.avx512_vnni = (c >> 11) & 1;
      f.avx512_vbmi = (c >> 1) & 1;
    }
    // AMX-BF16 (EDX bit 22) and AMX-TILE (bit 24), with XTILECFG and XTILEDATA (XCR0 bits 17
    // and 18) managed by the OS.
    const bool tile_state = (xcr0 & 0x60000) == 0x60000;
    f.amx_bf16 = zmm_state && tile_state && ((d >> 22) & 1) && ((d >> 24) & 1);
  }
  if (zmm_state && __get_cpuid_count(7, 1, &a, &b, &c, &d)) f.avx512_bf16 = (a >> 5) & 1;
  return f;
}

CpuIsa choose() {
  CpuIsa best = best_isa();
  // TESSERA_ISA may only lower the choice: asking for an ISA the CPU lacks would crash.
  if (const char* env = std::getenv("TESSERA_ISA")) {
    const std::string_view v(env);
    CpuIsa want = best;
    if (v == "generic") want = CpuIsa::Generic;
    if (v == "avx2") want = CpuIsa::Avx2;
    if (v == "avx512") want = CpuIsa::Avx512;
    if (static_cast<int>(want) < static_cast<int>(best)) best = want;
  }
  return best;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect();
  return f;
}

bool request_amx_tiles() {
  static const bool granted = [] {
    if (!cpu_features().amx_bf16) return false;
#if defined(__linux__)
    constexpr long kArchReqXcompPerm = 0x1023;  // asm/prctl.h
    constexpr long kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
    return false;
#endif
  }();
  return granted;
}

CpuIsa best_isa() {
  const CpuFeatures& f = cpu_features();
  CpuIsa best = CpuIsa::Generic;
  if (f.avx2 && f.fma && f.f16c) best = CpuIsa::Avx2;
  if (best == CpuIsa::Avx2 && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq)
    best = CpuIsa::Avx512;
  return best;
}

CpuIsa cpu_isa() {
  static const CpuIsa isa = choose();
  return isa;
}

std::string_view isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::Avx512:
      return "avx512";
    case CpuIsa::Avx2:
      return "avx2";
    default:
      return "generic";
  }
}

}  // namespace tessera
