// Module bookkeeping (names, state_dict, strict loading and its messages, to(dtype),
// train/eval), containers, optimizer state round trips and bfloat16 master weights.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include <fmt/format.h>

#include "tessera/nn/functional.h"
#include "tessera/nn/layers.h"
#include "tessera/nn/optim.h"
#include "tessera/tessera.h"
#include "test_support.h"

namespace tessera {
namespace {

using testing::expect_error_mentions;

struct Net : nn::Module {
  Net() : Module("Net") {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(4, 8));
    norm = register_module("norm", std::make_shared<nn::LayerNorm>(8));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(8, 3, false));
    scale = register_buffer("scale", full({3}, 2.0));
  }
  Tensor forward(const Tensor& x) override {
    return fc2->forward(norm->forward(fc1->forward(x)).relu()).mul(scale);
  }
  std::shared_ptr<nn::Linear> fc1, fc2;
  std::shared_ptr<nn::LayerNorm> norm;
  Tensor scale;
};

std::vector<std::string> keys(const nn::StateDict& sd) {
  std::vector<std::string> k;
  for (const auto& [name, _] : sd) k.push_back(name);
  return k;
}

TEST(Module, NamesShapesAndStateDict) {
  manual_seed(1);
  Net net;
  EXPECT_EQ(keys(net.named_parameters()),
            (std::vector<std::string>{"fc1.weight", "fc1.bias", "norm.weight", "norm.bias",
                                      "fc2.weight"}));
  EXPECT_EQ(keys(net.state_dict()),
            (std::vector<std::string>{"scale", "fc1.weight", "fc1.bias", "norm.weight", "norm.bias",
                                      "fc2.weight"}));
  EXPECT_EQ(net.num_parameters(), 4 * 8 + 8 + 8 + 8 + 8 * 3);
  EXPECT_EQ(net.fc1->weight.sizes(), (DimVector{8, 4}));
  for (const Tensor& p : net.parameters()) EXPECT_TRUE(p.requires_grad());
  EXPECT_FALSE(net.scale.requires_grad());
  // Linear's init bound is 1/sqrt(in_features).
  EXPECT_LE(net.fc1->weight.abs().max().item<double>(), 0.5);
}

TEST(Module, LoadStateDictCopiesAndReportsEveryProblem) {
  manual_seed(2);
  Net a, b;
  b.load_state_dict(a.state_dict());
  for (auto& [k, t] : a.state_dict()) {
    bool found = false;
    for (auto& [k2, t2] : b.state_dict())
      if (k2 == k) found = equal(t, t2);
    EXPECT_TRUE(found) << k;
  }
  nn::StateDict bad = a.state_dict();
  bad.erase(bad.begin() + 2);                  // fc1.bias missing
  bad.emplace_back("fc3.weight", zeros({1}));  // unexpected
  bad[1].second = zeros({2, 4});               // fc1.weight mis-shaped
  const Tensor before = b.fc1->weight.clone();
  expect_error_mentions(
      [&] { b.load_state_dict(bad); },
      {"Error(s) in loading state_dict for Net", "Missing key(s)", "\"fc1.bias\"",
       "Unexpected key(s)", "\"fc3.weight\"", "size mismatch for fc1.weight", "[2, 4]", "[8, 4]"});
  EXPECT_TRUE(equal(b.fc1->weight, before)) << "a failed load must not write anything";
  nn::StateDict partial = a.state_dict();
  partial.erase(partial.begin() + 2);
  b.load_state_dict(partial, /*strict=*/false);  // missing keys are fine when not strict
}

TEST(Module, ToDtypeUpdatesTheLayersHandles) {
  manual_seed(3);
  Net net;
  const Tensor handle = net.fc1->weight;
  net.to(kBFloat16);
  EXPECT_EQ(handle.dtype(), kBFloat16);
  EXPECT_EQ(net.scale.dtype(), kBFloat16);
  EXPECT_TRUE(handle.requires_grad());
  const Tensor y = net.forward(randn({2, 4}).to(kBFloat16));
  EXPECT_EQ(y.dtype(), kBFloat16);
  y.sum().backward();
  EXPECT_EQ(net.fc1->weight.grad().dtype(), kBFloat16);
}

TEST(Module, TrainEvalAndDropout) {
  manual_seed(4);
  nn::Sequential seq({std::make_shared<nn::Linear>(6, 6), std::make_shared<nn::Dropout>(0.5)});
  const Tensor x = ones({64, 6});
  EXPECT_TRUE(seq.is_training());
  const Tensor train_out = seq.forward(x);
  EXPECT_GT(train_out.eq(0).sum().item<int64_t>(), 0) << "dropout zeroes elements in training";
  seq.eval();
  EXPECT_FALSE(seq[1].is_training());
  const Tensor eval_out = seq.forward(x);
  EXPECT_EQ(eval_out.eq(0).sum().item<int64_t>(), 0);
  EXPECT_TRUE(allclose(eval_out, seq[0].forward(x), 0, 0));
}

TEST(Module, EmbeddingPaddingAndErrors) {
  manual_seed(5);
  nn::Embedding emb(10, 4, 0);
  EXPECT_TRUE(equal(emb.weight.select(0, 0), zeros({4})));
  emb.forward(tensor<int64_t>({0, 3, 3})).sum().backward();
  EXPECT_TRUE(equal(emb.weight.grad().select(0, 0), zeros({4})));
  EXPECT_TRUE(equal(emb.weight.grad().select(0, 3), full({4}, 2.0)));
  expect_error_mentions([] { nn::Linear(0, 3); }, {"Linear", "in_features", "0"});
  expect_error_mentions([] { nn::CausalSelfAttention(8, 3); }, {"embed_dim", "num_heads"});
  expect_error_mentions([] { nn::CausalSelfAttention(8, 4, 3); }, {"num_kv_heads"});
  nn::Linear lin(3, 2);
  expect_error_mentions([&] { lin.forward(zeros({2, 4})); }, {"linear", "in_features 4"});
  expect_error_mentions([&] { nn::Module().forward(zeros({1})); }, {"Module.forward"});
}

TEST(Optim, StateDictRoundTripContinuesExactly) {
  manual_seed(6);
  auto run = [](optim::Optimizer& opt, const Tensor& p, int from, int to) {
    for (int i = from; i < to; ++i) {
      manual_seed(100 + i);
      p.mutable_grad() = randn(p.sizes());
      opt.step();
    }
  };
  const Tensor p0 = randn({5, 3});
  const Tensor a = p0.clone().requires_grad_(), b = p0.clone().requires_grad_();
  optim::AdamW oa({a}, {.lr = 0.05, .weight_decay = 0.1});
  run(oa, a, 0, 6);
  optim::AdamW ob({b}, {.lr = 0.05, .weight_decay = 0.1});
  run(ob, b, 0, 3);
  const nn::StateDict saved = ob.state_dict();
  const Tensor c = b.detach().clone().requires_grad_();
  optim::AdamW oc({c}, {.lr = 1.0});  // hyper-parameters come from the state
  oc.load_state_dict(saved);
  EXPECT_EQ(oc.lr(), 0.05);
  run(oc, c, 3, 6);
  EXPECT_TRUE(equal(c, a));
  nn::StateDict bad = saved;
  bad.emplace_back("state.7.exp_avg", zeros({5, 3}));
  expect_error_mentions([&] { oc.load_state_dict(bad); }, {"AdamW", "parameter 7"});
}

TEST(Optim, BFloat16ParametersKeepAFloat32Master) {
  manual_seed(7);
  const Tensor w32 = randn({64});
  const Tensor p = w32.to(kBFloat16).requires_grad_();
  optim::SGD opt({p}, {.lr = 1e-3});
  // Steps far below bfloat16's resolution: applied to a bfloat16 parameter they would vanish;
  // the master accumulates them.
  for (int i = 0; i < 50; ++i) {
    p.mutable_grad() = ones({64}, kBFloat16);
    opt.step();
  }
  const Tensor master = opt.state_dict()[1].second;
  // 50 float32 subtractions of 1e-3 (each rounded): the master moved by 0.05.
  EXPECT_TRUE(allclose(master, w32.to(kBFloat16).to(kFloat32).sub(0.05), 1e-5, 1e-5));
  EXPECT_TRUE(equal(p, master.to(kBFloat16)));
}

TEST(Optim, WarmupCosineSchedule) {
  const Tensor p = zeros({1}).requires_grad_();
  optim::SGD opt({p}, {.lr = 1.0});
  optim::WarmupCosineLR sched(opt, 4, 20, 0.1);
  EXPECT_DOUBLE_EQ(opt.lr(), 0.2);  // (t + 1) / (warmup + 1) at t = 0
  std::vector<double> lrs;
  for (int t = 1; t <= 24; ++t) {
    sched.step();
    lrs.push_back(opt.lr());
  }
  EXPECT_DOUBLE_EQ(lrs[2], 0.8);  // t = 3
  EXPECT_DOUBLE_EQ(lrs[3], 1.0);  // t = 4: the peak
  EXPECT_NEAR(lrs[11], 0.1 + 0.9 * 0.5 * (1 + std::cos(std::numbers::pi * 8 / 16)), 1e-15);
  EXPECT_DOUBLE_EQ(lrs[23], 0.1);  // held at min_lr after total
  expect_error_mentions([&] { optim::WarmupCosineLR(opt, 5, 5); }, {"WarmupCosineLR", "warmup"});
}

TEST(Optim, ClipGradNormRejectsNonFiniteWhenAsked) {
  const Tensor p = zeros({2}).requires_grad_();
  p.mutable_grad() = tensor<float>({INFINITY, 1.0f});
  expect_error_mentions([&] { optim::clip_grad_norm_({p}, 1.0, 2.0, true); },
                        {"clip_grad_norm_", "non-finite"});
}

// The attention kernels (4-D, no mask, no dropout: the fused float32 prefill and decode
// kernels, the blocked float64 path) against the math path (forced by an all-true mask):
// outputs and all three gradients, causal and not, several query blocks with a partial last
// one, L != S (L > S too), decode-length queries, one key, head sizes that are not whole
// vectors, Ev != E, grouped-query heads, float64, float32 and bfloat16.
TEST(Attention, KernelsMatchTheMathPath) {
  namespace F = nn::functional;
  struct Shape {
    int64_t b, h, hk, l, s, e, ev;
    bool causal;
  };
  for (const Shape& c :
       {Shape{2, 4, 2, 300, 300, 16, 16, true}, Shape{1, 2, 2, 70, 200, 8, 8, false},
        Shape{1, 3, 1, 260, 140, 8, 8, true}, Shape{1, 2, 2, 200, 100, 33, 17, true},
        Shape{1, 4, 2, 1, 300, 64, 64, false}, Shape{2, 2, 2, 3, 50, 20, 12, true},
        Shape{1, 2, 1, 37, 1, 24, 40, false}, Shape{1, 1, 1, 130, 600, 64, 64, false}}) {
    for (ScalarType t : {kFloat64, kFloat32, kBFloat16}) {
      SCOPED_TRACE(fmt::format("b={} h={} hk={} l={} s={} e={} ev={} causal={} {}", c.b, c.h, c.hk,
                               c.l, c.s, c.e, c.ev, c.causal, dtype_name(t)));
      manual_seed(9);
      const Tensor q0 = randn({c.b, c.h, c.l, c.e}, kFloat64).to(t);
      const Tensor k0 = randn({c.b, c.hk, c.s, c.e}, kFloat64).to(t);
      const Tensor v0 = randn({c.b, c.hk, c.s, c.ev}, kFloat64).to(t);
      const Tensor gout = randn({c.b, c.h, c.l, c.ev}, kFloat64).to(t);
      auto run = [&](bool math) {
        const Tensor q = q0.clone().requires_grad_(), k = k0.clone().requires_grad_(),
                     v = v0.clone().requires_grad_();
        const Tensor mask = math ? ones({c.l, c.s}, kBool).tril(c.causal ? 0 : c.s) : Tensor();
        const Tensor y = F::scaled_dot_product_attention(q, k, v, mask, 0.0, c.causal && !math,
                                                         std::nullopt, c.hk != c.h);
        y.mul(gout).sum().backward();
        return std::vector<Tensor>{y, q.grad(), k.grad(), v.grad()};
      };
      const auto fast = run(false), math = run(true);
      const double tol = t == kFloat64 ? 1e-10 : t == kFloat32 ? 2e-5 : 3e-2;
      for (size_t i = 0; i < fast.size(); ++i)
        EXPECT_TRUE(allclose(fast[i].to(kFloat64), math[i].to(kFloat64), tol, tol)) << i;
      EXPECT_EQ(fast[0].dtype(), t);
    }
  }
}

// ctc_loss returns PyTorch's gradient, that of the logits behind a log_softmax: checked by
// finite differences through the log_softmax, on variable lengths, repeated labels (which
// forbid the skip) and an empty target.
TEST(CtcLoss, GradcheckThroughLogSoftmax) {
  manual_seed(8);
  const Tensor logits = randn({9, 3, 5}, kFloat64).requires_grad_();
  const Tensor targets = tensor<int64_t>({1, 1, 3, 2, 4, 0, 0, 0, 0}).view({3, 3});
  const Tensor il = tensor<int64_t>({9, 7, 4}), tl = tensor<int64_t>({3, 2, 0});
  for (const char* reduction : {"mean", "sum", "none"}) {
    SCOPED_TRACE(reduction);
    EXPECT_TRUE(autograd::gradcheck(
        [&](const autograd::tensor_list& in) {
          return autograd::tensor_list{
              nn::functional::ctc_loss(in[0].log_softmax(2), targets, il, tl, 0, reduction)};
        },
        {logits}));
  }
  expect_error_mentions(
      [&] {
        nn::functional::ctc_loss(logits.log_softmax(2), targets, tensor<int64_t>({10, 7, 4}), tl);
      },
      {"ctc_loss", "input_lengths[0] = 10", "[0, 9]"});
  expect_error_mentions(
      [&] { nn::functional::ctc_loss(logits.log_softmax(2), targets.add(4), il, tl); },
      {"ctc_loss", "labels must be in [0, 5)"});
}

}  // namespace
}  // namespace tessera
