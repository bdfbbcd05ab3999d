#include <tessera/tessera.h>

#include <iostream>

int main() {
  auto x = tessera::ones({2, 3}, tessera::kFloat32);
  std::cout << x.sum() << "\n";  // tensor(6.)
  return x.sum().item<float>() == 6.0f ? 0 : 1;
}
