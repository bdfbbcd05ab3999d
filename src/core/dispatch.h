// Runtime ISA dispatch for kernel tables.
//
// A kernel file (src/ops/cpu/*.cpp) is compiled three times, with -DTS_ISA=generic, avx2 and
// avx512 and that ISA's flags; everything in it lives in namespace tessera::cpu::TS_ISA, so
// the three copies never collide. Each copy defines an accessor for its table:
//
//   // reduce_kernels.h (shared):   struct ReduceKernels { void (*sum)(...); ... };
//   //                               TS_DECLARE_ISA_TABLE(ReduceKernels, reduce_kernels)
//   // reduce_kernels.cpp (per ISA): namespace tessera::cpu::TS_ISA {
//   //                                 const ReduceKernels& reduce_kernels() { ... } }
//   // caller:                       const ReduceKernels& k = TS_DISPATCH(reduce_kernels);
//
// The generic objects are linked before the avx2 and avx512 ones, so where the three copies
// share an inline function from a common header, the linker keeps the generic one.
#pragma once

#include "core/cpu_features.h"

#define TS_DECLARE_ISA_TABLE(Type, name) \
  namespace tessera::cpu {               \
  namespace generic {                    \
  const Type& name();                    \
  }                                      \
  namespace avx2 {                       \
  const Type& name();                    \
  }                                      \
  namespace avx512 {                     \
  const Type& name();                    \
  }                                      \
  }

// The table for the ISA chosen at start-up (looked up once per call site).
#define TS_DISPATCH(name)                                                                         \
  ([]() -> decltype(::tessera::cpu::generic::name())& {                                           \
    static const auto& table = ::tessera::cpu::select_isa_table(                                  \
        ::tessera::cpu::generic::name, ::tessera::cpu::avx2::name, ::tessera::cpu::avx512::name); \
    return table;                                                                                 \
  }())

namespace tessera::cpu {

template <class T>
const T& select_isa_table(const T& (*g)(), const T& (*a2)(), const T& (*a5)()) {
  switch (cpu_isa()) {
    case CpuIsa::Avx512:
      return a5();
    case CpuIsa::Avx2:
      return a2();
    default:
      return g();
  }
}

}  // namespace tessera::cpu
