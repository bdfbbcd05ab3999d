// Packing into micro-panels: the routines are per-ISA kernels (gemm/kernels/pack_kernels.h),
// chosen once at start-up like the microkernels.
#include "gemm/pack.h"

#include <type_traits>

#include "gemm/kernels/pack_kernels.h"

namespace tessera::gemm {

template <class T>
void pack_panel(int64_t valid, int64_t width, int64_t kc, const T* src, int64_t ls, int64_t ks,
                T* dst) {
  const cpu::PackKernels& k = TS_DISPATCH(pack_kernels);
  if constexpr (std::is_same_v<T, float>) {
    k.panel_f32(valid, width, kc, src, ls, ks, dst);
  } else {
    k.panel_f64(valid, width, kc, src, ls, ks, dst);
  }
}

template <class T>
void pack_b_rows(int64_t kc, int64_t nc, const T* b, int64_t rs, int64_t nr, T* dst) {
  const cpu::PackKernels& k = TS_DISPATCH(pack_kernels);
  if constexpr (std::is_same_v<T, float>) {
    k.b_rows_f32(kc, nc, b, rs, nr, dst);
  } else {
    k.b_rows_f64(kc, nc, b, rs, nr, dst);
  }
}

template void pack_panel<float>(int64_t, int64_t, int64_t, const float*, int64_t, int64_t, float*);
template void pack_panel<double>(int64_t, int64_t, int64_t, const double*, int64_t, int64_t,
                                 double*);
template void pack_b_rows<float>(int64_t, int64_t, const float*, int64_t, int64_t, float*);
template void pack_b_rows<double>(int64_t, int64_t, const double*, int64_t, int64_t, double*);

}  // namespace tessera::gemm
