#include "tessera/core/version.h"

#include <fmt/format.h>
#include <sleef.h>

#include "core/cpu_features.h"
#include "tessera/core/parallel.h"

namespace tessera {

std::string version() {
  return TS_VERSION;
}
std::string build_type() {
  return TS_BUILD_TYPE;
}
std::string cpu_isa_name() {
  return std::string(isa_name(cpu_isa()));
}

std::string build_info() {
  const CpuFeatures& f = cpu_features();
  std::string flags;
  auto add = [&](bool on, const char* name) {
    if (on) flags += flags.empty() ? name : fmt::format(" {}", name);
  };
  add(f.avx2, "avx2");
  add(f.fma, "fma");
  add(f.f16c, "f16c");
  add(f.avx512f, "avx512f");
  add(f.avx512bw, "avx512bw");
  add(f.avx512vl, "avx512vl");
  add(f.avx512dq, "avx512dq");
  add(f.avx512_bf16, "avx512_bf16");
  add(f.avx512_vnni, "avx512_vnni");
  add(f.avx512_vbmi, "avx512_vbmi");
  add(f.amx_bf16, "amx_bf16");
  return fmt::format(
      "tessera {}\n"
      "build type:   {}\n"
      "compiler:     GCC {}.{}.{}\n"
      "kernel ISA:   {} (cpu flags: {})\n"
      "threads:      {}\n"
      "libraries:    Sleef {}.{}.{}\n"
      "              fmt {}.{}.{}\n",
      version(), build_type(), __GNUC__, __GNUC_MINOR__, __GNUC_PATCHLEVEL__, cpu_isa_name(),
      flags.empty() ? "none" : flags, get_num_threads(), SLEEF_VERSION_MAJOR, SLEEF_VERSION_MINOR,
      SLEEF_VERSION_PATCHLEVEL, FMT_VERSION / 10000, FMT_VERSION / 100 % 100, FMT_VERSION % 100);
}

}  // namespace tessera
