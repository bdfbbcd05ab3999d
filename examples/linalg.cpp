// tessera::linalg in one page: factor, solve, invert and take determinants of a batch of
// matrices, and read the info of a failed factorization instead of catching the error.
#include <iostream>

#include "tessera/tessera.h"

namespace la = ts::linalg;

int main() {
  ts::manual_seed(0);
  // A batch of 4 symmetric positive-definite 3x3 matrices: B B^T + 3 I.
  const ts::Tensor b = ts::randn({4, 3, 3}, ts::kFloat64);
  const ts::Tensor a = b.bmm(b.transpose(1, 2)).add(ts::eye(3, 3, ts::kFloat64).mul(3));
  const ts::Tensor rhs = ts::randn({4, 3, 2}, ts::kFloat64);

  const ts::Tensor L = la::cholesky(a);             // A = L L^T
  const ts::Tensor x = la::cholesky_solve(rhs, L);  // A X = rhs
  std::cout << "max |A X - rhs| = " << a.bmm(x).sub(rhs).abs().max().item<double>() << "\n";

  auto [LU, pivots] = la::lu_factor(a);                // P A = L U, pivots 1-based int32
  const ts::Tensor y = la::lu_solve(LU, pivots, rhs);  // the same solution from LU
  std::cout << "max |X_lu - X_chol| = " << y.sub(x).abs().max().item<double>() << "\n";
  std::cout << "det: " << la::det(a) << "\n";
  auto [sign, logabsdet] = la::slogdet(a);
  std::cout << "log|det|: " << logabsdet << "\n";
  std::cout << "A^-1 A = I: " << la::inv(a[0]).mm(a[0]) << "\n";

  // A matrix that is not positive-definite: cholesky throws LinAlgError naming the batch
  // element and the leading minor; cholesky_ex reports it in info instead.
  ts::Tensor bad = a.clone();
  bad[2].select(0, 1).select(0, 1).fill_(-1.0);
  try {
    la::cholesky(bad);
  } catch (const la::LinAlgError& e) {
    std::cout << "LinAlgError: " << e.what() << "\n";
  }
  auto [L2, info] = la::cholesky_ex(bad);
  std::cout << "info per matrix: " << info << "\n";
  return 0;
}
