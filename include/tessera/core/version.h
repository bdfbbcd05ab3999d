#pragma once

#include <string>

namespace tessera {

std::string version();       // "0.1.0"
std::string build_type();    // "Release", "Debug", ...
std::string cpu_isa_name();  // the kernel ISA chosen at start-up: "avx512", "avx2", "generic"
std::string build_info();    // multi-line: versions, ISA, threads, linked libraries

}  // namespace tessera
