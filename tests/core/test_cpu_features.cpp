// What cpuid reports, against the kernel's own view in /proc/cpuinfo (Linux).
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "core/cpu_features.h"

namespace tessera {
namespace {

// The value of the first "key : value" line of /proc/cpuinfo; empty when there is none.
std::string cpuinfo_field(const std::string& key) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key, 0) == 0 && line.find(':') != std::string::npos)
      return line.substr(line.find(':') + 2);
  return "";
}

// The vendor flag switches the streaming loops' software prefetch (core/prefetch.h).
TEST(CpuFeatures, VendorMatchesProcCpuinfo) {
  const std::string vendor = cpuinfo_field("vendor_id");
  if (vendor.empty()) GTEST_SKIP() << "no vendor_id in /proc/cpuinfo";
  EXPECT_EQ(cpu_features().amd, vendor == "AuthenticAMD") << "vendor_id: " << vendor;
}

// The SIMD flags agree with the kernel's.
TEST(CpuFeatures, FlagsMatchProcCpuinfo) {
  // Built by append: GCC 12 warns falsely (-Wrestrict) inside `" " + std::string`.
  std::string flags(" ");
  flags.append(cpuinfo_field("flags")).append(" ");
  if (flags.size() == 2) GTEST_SKIP() << "no flags in /proc/cpuinfo";
  auto has = [&](const char* f) {
    return flags.find(std::string(" ") + f + " ") != std::string::npos;
  };
  const CpuFeatures& c = cpu_features();
  EXPECT_EQ(c.avx2, has("avx2"));
  EXPECT_EQ(c.fma, has("fma"));
  EXPECT_EQ(c.avx512f, has("avx512f"));
  EXPECT_EQ(c.avx512bw, has("avx512bw"));
  EXPECT_EQ(c.avx512_bf16, has("avx512_bf16"));
  EXPECT_EQ(c.avx512_vbmi, has("avx512vbmi"));
}

}  // namespace
}  // namespace tessera
