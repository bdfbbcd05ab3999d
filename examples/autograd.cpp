// Fits y = 3x - 2 (plus noise) with a one-feature linear model, by gradient descent on
// gradients from autograd: requires_grad_, backward, a no_grad update, grad reset.
#include <cstdio>

#include <tessera/tessera.h>

int main() {
  ts::manual_seed(0);
  const auto x = ts::randn({256, 1});
  const auto y = x.mul(3.0).sub(2.0).add(ts::randn({256, 1}).mul(0.1));

  auto w = ts::zeros({1, 1}).requires_grad_();
  auto b = ts::zeros({1}).requires_grad_();
  for (int step = 0; step < 200; ++step) {
    const auto pred = ts::linear(x, w, b);
    const auto loss = ts::square(pred.sub(y)).mean();
    loss.backward();
    {
      ts::autograd::NoGradGuard no_grad;  // the update itself is not part of the graph
      w.sub_(w.grad().mul(0.1));
      b.sub_(b.grad().mul(0.1));
    }
    w.mutable_grad() = {};
    b.mutable_grad() = {};
    if (step % 50 == 0) std::printf("step %3d  loss %.5f\n", step, loss.item<double>());
  }
  std::printf("w = %.3f (3), b = %.3f (-2)\n", w.item<double>(), b.item<double>());
  return 0;
}
