// Packing into micro-panels (layout: src/gemm/pack.h). Two source layouts are common and get
// their own loop: lanes contiguous (ls == 1: row-major B, column-major A) copies one
// contiguous run per k step; steps contiguous (ks == 1: row-major A, column-major B) reads
// each lane's run contiguously and writes it with stride `width` into the L1-resident panel.
// Anything else goes element by element.
#include "gemm/pack.h"

#include <cstring>

namespace tessera::gemm {

template <class T>
void pack_panel(int64_t valid, int64_t width, int64_t kc, const T* src, int64_t ls, int64_t ks,
                T* dst) {
  if (valid < width) {
    for (int64_t p = 0; p < kc; ++p)
      for (int64_t l = valid; l < width; ++l) dst[p * width + l] = T(0);
  }
  if (ls == 1) {
    for (int64_t p = 0; p < kc; ++p) std::memcpy(dst + p * width, src + p * ks, valid * sizeof(T));
  } else if (ks == 1) {
    // Four lanes at a time: four read streams, short strided writes.
    int64_t l = 0;
    for (; l + 4 <= valid; l += 4) {
      const T* s0 = src + l * ls;
      const T* s1 = s0 + ls;
      const T* s2 = s1 + ls;
      const T* s3 = s2 + ls;
      T* d = dst + l;
      for (int64_t p = 0; p < kc; ++p) {
        d[p * width + 0] = s0[p];
        d[p * width + 1] = s1[p];
        d[p * width + 2] = s2[p];
        d[p * width + 3] = s3[p];
      }
    }
    for (; l < valid; ++l) {
      const T* s = src + l * ls;
      for (int64_t p = 0; p < kc; ++p) dst[p * width + l] = s[p];
    }
  } else {
    for (int64_t p = 0; p < kc; ++p)
      for (int64_t l = 0; l < valid; ++l) dst[p * width + l] = src[l * ls + p * ks];
  }
}

template <class T>
void pack_b_rows(int64_t kc, int64_t nc, const T* b, int64_t rs, int64_t nr, T* dst) {
  const int64_t full = nc / nr * nr, rest = nc - full;
  for (int64_t p = 0; p < kc; ++p) {
    const T* row = b + p * rs;
    T* d = dst + p * nr;
    for (int64_t j = 0; j < full; j += nr, d += nr * kc)
      for (int64_t x = 0; x < nr; ++x) d[x] = row[j + x];
    if (rest > 0) {
      for (int64_t x = 0; x < rest; ++x) d[x] = row[full + x];
      for (int64_t x = rest; x < nr; ++x) d[x] = T(0);
    }
  }
}

template void pack_b_rows<float>(int64_t, int64_t, const float*, int64_t, int64_t, float*);
template void pack_b_rows<double>(int64_t, int64_t, const double*, int64_t, int64_t, double*);

template void pack_panel<float>(int64_t, int64_t, int64_t, const float*, int64_t, int64_t, float*);
template void pack_panel<double>(int64_t, int64_t, int64_t, const double*, int64_t, int64_t,
                                 double*);

}  // namespace tessera::gemm
