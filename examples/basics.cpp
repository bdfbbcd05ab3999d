// The tensor library in one page: factories, views, promotion, ops, reductions, printing.
#include <iostream>

#include "tessera/tessera.h"

int main() {
  ts::manual_seed(0);
  auto x = ts::arange(12, ts::kFloat32).view({3, 4});
  std::cout << "x =\n" << x << "\n";
  std::cout << "x.t() is a view: " << x.t().is_alias_of(x) << "\n";
  std::cout << "row sums (keepdim): " << x.sum(-1, /*keepdim=*/true) << "\n";
  std::cout << "int32 + 0.5 -> " << ts::dtype_name((ts::arange(3, ts::kInt32) + 0.5).dtype())
            << "\n";
  auto logits = ts::randn({2, 5});
  std::cout << "softmax rows: " << logits.softmax(-1) << "\n";
  auto [values, indices] = ts::topk(logits, 2, -1);
  std::cout << "top-2 indices: " << indices << "\n";
  std::cout << "bfloat16: " << x.to(ts::kBFloat16) << "\n";
  return 0;
}
