// Packing: copies a block of A or B into the micro-panel layout the microkernels read
// (src/gemm/kernels/microkernel.h), so that the kernel's inner loop streams through
// contiguous, aligned memory whatever the operand's strides.
//
// A block (mc x kc) becomes ceil(mc / MR) micro-panels, one after another; panel r holds rows
// [r*MR, r*MR + MR) stored k-major: dst[r*MR*kc + p*MR + i] = A(r*MR + i, p).
// A B block (kc x nc) becomes ceil(nc / NR) micro-panels of NR columns, stored k-major:
// dst[s*NR*kc + p*NR + j] = B(p, s*NR + j).
// Rows (columns) past the edge of the block are written as zeros, so edge tiles multiply
// through the same full-size kernel.
//
// Both are one routine: a panel of `width` lanes (MR or NR) over kc steps, with lane stride
// `ls` and step stride `ks` in the source. Packing B is packing A with its strides swapped.
#pragma once

#include <cstdint>

namespace tessera::gemm {

// dst[p * width + l] = src[l * ls + p * ks] for l < valid, 0 for valid <= l < width.
template <class T>
void pack_panel(int64_t valid, int64_t width, int64_t kc, const T* src, int64_t ls, int64_t ks,
                T* dst);

// A(i, p) = a[i * rs + p * cs], mc x kc, into MR-row micro-panels.
template <class T>
void pack_a_block(int64_t mc, int64_t kc, const T* a, int64_t rs, int64_t cs, int64_t mr, T* dst) {
  for (int64_t i = 0; i < mc; i += mr)
    pack_panel<T>(mc - i < mr ? mc - i : mr, mr, kc, a + i * rs, rs, cs, dst + i * kc);
}

// B(p, j) = b[p * rs + j * cs], kc x nc, into NR-column micro-panels. A row-major B
// (cs == 1) is swept eight source rows at a time across all panels (pack_b_rows): panel by
// panel, every NR-element step would land on a new page of a wide B.
template <class T>
void pack_b_rows(int64_t kc, int64_t nc, const T* b, int64_t rs, int64_t nr, T* dst);

template <class T>
void pack_b_block(int64_t kc, int64_t nc, const T* b, int64_t rs, int64_t cs, int64_t nr, T* dst) {
  if (cs == 1) {
    pack_b_rows<T>(kc, nc, b, rs, nr, dst);
    return;
  }
  for (int64_t j = 0; j < nc; j += nr)
    pack_panel<T>(nc - j < nr ? nc - j : nr, nr, kc, b + j * cs, cs, rs, dst + j * kc);
}

extern template void pack_panel<float>(int64_t, int64_t, int64_t, const float*, int64_t, int64_t,
                                       float*);
extern template void pack_panel<double>(int64_t, int64_t, int64_t, const double*, int64_t, int64_t,
                                        double*);
extern template void pack_b_rows<float>(int64_t, int64_t, const float*, int64_t, int64_t, float*);
extern template void pack_b_rows<double>(int64_t, int64_t, const double*, int64_t, int64_t,
                                         double*);

}  // namespace tessera::gemm
