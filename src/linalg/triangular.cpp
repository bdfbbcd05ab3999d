// torch.linalg.solve_triangular: trsm_left (trsm.cpp) on a contiguous copy of B broadcast to
// the common batch, A read in place through its strides. The right form X A = B runs as
// A^T X^T = B^T (both transposes are stride swaps; the triangle flips).
#include "linalg/common.h"
#include "linalg/kernels.h"

namespace tessera::linalg {

using namespace detail;

Tensor solve_triangular(const Tensor& A, const Tensor& B, bool upper, bool left,
                        bool unitriangular) {
  constexpr std::string_view op = "linalg.solve_triangular";
  check_no_grad(op, {A, B});
  check_square_input(op, A, "A");
  check_matrix_input(op, B, "B");
  const int64_t n = A.size(-1);
  TS_CHECK((left ? B.size(-2) : B.size(-1)) == n, RuntimeError,
           "{}(): incompatible shapes of A and B for the equation {} ({}x{} and {}x{})", op,
           left ? "AX = B" : "XA = B", n, n, B.size(-2), B.size(-1));
  const DimVector batch_dims = broadcast_batch(op, batch_shape(A), batch_shape(B));
  // Mixed dtypes promote, as PyTorch's solve_triangular does.
  const ScalarType dtype = promote_types(A.dtype(), B.dtype());
  const Tensor Ac = A.to(dtype);
  Tensor X = contiguous_matrices(B.to(dtype), batch_dims);
  const int64_t batch = numel_of(batch_dims);
  const int64_t k = left ? X.size(-1) : X.size(-2);
  if (X.numel() == 0) return X;
  const Tensor Ax = Ac.expand(concat(batch_dims, {n, n}));
  const std::vector<int64_t> off = matrix_offsets(Ax);
  const int64_t rs = Ac.stride(-2), cs = Ac.stride(-1);
  visit_linalg_dtype(dtype, op, [&]<class T>() {
    const T* a_base = static_cast<const T*>(Ax.data_ptr());
    T* x_base = static_cast<T*>(X.data_ptr());
    for_each_matrix(batch, n, [&](int64_t b) {
      const T* a = a_base + off[b];
      T* x = x_base + b * n * k;
      if (left) {
        trsm_left(n, k, a, rs, cs, !upper, false, unitriangular, x, k, 1);
      } else {
        trsm_left(n, k, a, cs, rs, upper, false, unitriangular, x, 1, n);
      }
    });
  });
  return X;
}

}  // namespace tessera::linalg
