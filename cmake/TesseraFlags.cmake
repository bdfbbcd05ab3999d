# Warnings and per-ISA kernel flags.
#
# Release builds never use -march=native. Kernel sources are compiled once per ISA into
# separate object libraries, each inside its own namespace (tessera::cpu::<isa>), and the
# runtime picks one by cpuid at start-up (src/core/cpu_features.cpp).
add_library(tessera_warnings INTERFACE)
target_compile_options(tessera_warnings INTERFACE -Wall -Wextra -Wno-unused-parameter
                       -Wno-psabi)

set(TESSERA_ISAS generic avx2 avx512)
set(TESSERA_ISA_FLAGS_generic "")
set(TESSERA_ISA_FLAGS_avx2 -mavx2 -mfma -mf16c -mbmi2)
set(TESSERA_ISA_FLAGS_avx512 -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx2 -mfma -mf16c
    -mbmi2 -mprefer-vector-width=512
    # GCC 12 reports false "(may be) used uninitialized" inside its own AVX-512 intrinsic
    # headers (the _mm512_undefined_* pass-through operands), at -O2 -g with sanitizers too.
    -Wno-maybe-uninitialized -Wno-uninitialized)
# One more build of the GEMV kernels only (src/CMakeLists.txt), chosen at run time where cpuid
# reports AVX512_VBMI: float8_e4m3fn weights decode by byte-table permutes there.
set(TESSERA_ISA_FLAGS_avx512vbmi ${TESSERA_ISA_FLAGS_avx512} -mavx512vbmi)

# -O1, as AddressSanitizer's documentation advises: at -O0 the sanitizer tests took 16-22
# minutes of CI's 30 on 2 cores, most of it in unoptimized kernels and oracles.
add_library(tessera_sanitize INTERFACE)
if(TESSERA_SANITIZE)
  target_compile_options(tessera_sanitize INTERFACE -O1 -fsanitize=address,undefined
                         -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  target_link_options(tessera_sanitize INTERFACE -fsanitize=address,undefined)
endif()
