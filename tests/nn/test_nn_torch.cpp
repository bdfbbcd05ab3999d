// nn, losses and optimizers against PyTorch 1.13 (tests/nn/nn_reference.py): the same float64
// inputs through both, values and gradients compared to 1e-10 relative.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tessera/nn/functional.h"
#include "tessera/nn/layers.h"
#include "tessera/nn/optim.h"
#include "tessera/tessera.h"
#include "torch_reference.h"

namespace tessera {
namespace {

namespace F = nn::functional;
using Json = nlohmann::json;

// Runs the reference script on `inputs`; returns its outputs by name.
std::map<std::string, Tensor> run_torch(const std::map<std::string, Tensor>& inputs) {
  Json j;
  for (const auto& [k, t] : inputs) j[k] = testing::tensor_to_json(t);
  const Json o =
      testing::run_reference_script(std::string(TS_ORACLE_DIR) + "/../nn/nn_reference.py", j);
  std::map<std::string, Tensor> result;
  if (o.is_null()) return result;
  for (auto it = o.begin(); it != o.end(); ++it)
    result[it.key()] = testing::tensor_from_json(it.value());
  return result;
}

class NnVsTorch : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    manual_seed(2026);
    auto r = [](DimVector s) { return randn(s, kFloat64); };
    T["ce.logits"] = r({6, 5});
    T["ce.target"] = tensor<double>({0, 4, 2, 2, 1, 3});
    T["ce.weight"] = rand({5}, kFloat64).add(0.5);
    T["ce.gout"] = r({6});
    T["ce3.logits"] = r({3, 4, 2});
    T["ce3.target"] = tensor<double>({1, 3, 0, 0, 2, 3}).view({3, 2});
    T["reg.a"] = r({4, 3});
    T["reg.b"] = r({4, 3});
    T["bce.x"] = r({4, 3}).mul(3);
    T["bce.t"] = rand({4, 3}, kFloat64);
    T["bce.w"] = rand({4, 3}, kFloat64);
    T["bce.pw"] = rand({3}, kFloat64).add(0.5);
    T["ln.x"] = r({3, 7});
    T["ln.w"] = r({7});
    T["ln.b"] = r({7});
    T["ln.gout"] = r({3, 7});
    T["attn.x"] = r({2, 5, 8});
    T["attn.gout"] = r({2, 5, 8});
    manual_seed(7);
    attn = std::make_shared<nn::CausalSelfAttention>(8, 4, 2, true, 0.0, kFloat64);
    for (auto& [k, t] : attn->named_parameters()) T["attn.p." + k] = t.detach();
    // CTC: T=12, N=3, C=6; targets padded to 4, lengths 4, 2, 0.
    T["ctc.lp"] = r({12, 3, 6}).log_softmax(2);
    T["ctc.targets"] = tensor<double>({1, 3, 3, 5, 4, 1, 0, 0, 0, 0, 0, 0}).view({3, 4});
    T["ctc.il"] = tensor<double>({12, 9, 5});
    T["ctc.tl"] = tensor<double>({4, 2, 0});
    T["ctc.gout"] = r({3});
    T["opt.p"] = r({3, 2});
    for (int i = 0; i < 3; ++i) T[fmt::format("opt.g{}", i)] = r({3, 2});
    ref = run_torch(T);
  }
  static const Tensor& want(const std::string& name) {
    auto it = ref.find(name);
    if (it == ref.end()) throw std::runtime_error("no reference value " + name);
    return it->second;
  }
  static void expect_close(const Tensor& got, const std::string& name, double tol = 1e-10) {
    const Tensor& w = want(name);
    ASSERT_EQ(got.sizes(), w.sizes()) << name;
    const Tensor g = got.detach().to(kFloat64);
    EXPECT_TRUE(allclose(g, w, tol, tol))
        << name << ": max |got - want| = " << g.sub(w).abs().max().item<double>() << "\ngot  "
        << got << "\nwant " << w;
  }
  static Tensor leaf(const std::string& name) { return T.at(name).clone().requires_grad_(); }
  static inline std::map<std::string, Tensor> T, ref;
  static inline std::shared_ptr<nn::CausalSelfAttention> attn;
};

TEST_F(NnVsTorch, CrossEntropyVariants) {
  const Tensor tgt = T["ce.target"].to(kInt64);
  Tensor tgt_ign = tgt.clone();
  tgt_ign.select(0, 1).fill_(-100);
  const Tensor w = T["ce.weight"];
  struct V {
    std::string name;
    Tensor target, weight;
    std::string reduction = "mean";
    double smoothing = 0;
  };
  for (const V& v : {V{"mean", tgt, {}}, V{"sum", tgt, {}, "sum"}, V{"none", tgt, {}, "none"},
                     V{"weight", tgt, w}, V{"ignore", tgt_ign, {}},
                     V{"weight_ignore_smooth", tgt_ign, w, "mean", 0.2},
                     V{"smooth", tgt, {}, "mean", 0.1}, V{"smooth_sum", tgt, {}, "sum", 0.3}}) {
    SCOPED_TRACE(v.name);
    const Tensor x = leaf("ce.logits");
    const Tensor out = F::cross_entropy(x, v.target, v.weight, -100, v.reduction, v.smoothing);
    out.mul(T["ce.gout"].narrow(0, 0, out.numel()).reshape(out.sizes())).sum().backward();
    expect_close(out, "ce." + v.name + ".out");
    expect_close(x.grad(), "ce." + v.name + ".grad");
  }
  const Tensor x3 = leaf("ce3.logits");
  const Tensor out3 = F::cross_entropy(x3, T["ce3.target"].to(kInt64), {}, -100, "mean", 0.05);
  out3.backward();
  expect_close(out3, "ce3.out");
  expect_close(x3.grad(), "ce3.grad");
}

TEST_F(NnVsTorch, RegressionAndBinaryLosses) {
  for (const std::string red : {"mean", "sum"}) {
    for (const std::string name : {"mse", "l1"}) {
      const Tensor a = leaf("reg.a");
      const Tensor out =
          name == "mse" ? F::mse_loss(a, T["reg.b"], red) : F::l1_loss(a, T["reg.b"], red);
      out.backward();
      expect_close(out, name + "." + red + ".out");
      expect_close(a.grad(), name + "." + red + ".grad");
    }
  }
  const Tensor x = leaf("bce.x");
  const Tensor out =
      F::binary_cross_entropy_with_logits(x, T["bce.t"], T["bce.w"], T["bce.pw"], "mean");
  out.backward();
  expect_close(out, "bce.out");
  expect_close(x.grad(), "bce.grad");
}

TEST_F(NnVsTorch, LayerNormAndRmsNorm) {
  {
    const Tensor x = leaf("ln.x"), w = leaf("ln.w"), b = leaf("ln.b");
    const Tensor y = F::layer_norm(x, {7}, w, b, 1e-5);
    y.mul(T["ln.gout"]).sum().backward();
    expect_close(y, "ln.out");
    expect_close(x.grad(), "ln.gx");
    expect_close(w.grad(), "ln.gw");
    expect_close(b.grad(), "ln.gb");
  }
  const Tensor x = leaf("ln.x"), w = leaf("ln.w");
  const Tensor y = F::rms_norm(x, {7}, w);
  y.mul(T["ln.gout"]).sum().backward();
  expect_close(y, "rms.out");
  expect_close(x.grad(), "rms.gx");
  expect_close(w.grad(), "rms.gw");
}

TEST_F(NnVsTorch, CausalGroupedQueryAttention) {
  const Tensor x = leaf("attn.x");
  attn->zero_grad();
  const Tensor y = attn->forward(x);
  y.mul(T["attn.gout"]).sum().backward();
  expect_close(y, "attn.out");
  expect_close(x.grad(), "attn.gx");
  for (auto& [k, p] : attn->named_parameters()) expect_close(p.grad(), "attn.g." + k);
}

TEST_F(NnVsTorch, CtcLoss) {
  const Tensor tg2 = T["ctc.targets"].to(kInt64);
  const Tensor il = T["ctc.il"].to(kInt64), tl = T["ctc.tl"].to(kInt64);
  const Tensor flat = cat({tg2[0].narrow(0, 0, 4), tg2[1].narrow(0, 0, 2)});
  struct V {
    std::string name;
    Tensor targets;
    std::string reduction;
    int64_t blank;
  };
  for (const V& v :
       {V{"mean", tg2, "mean", 0}, V{"sum", tg2, "sum", 0}, V{"none_flat", flat, "none", 0},
        V{"blank2", tg2, "mean", 2}}) {  // no target uses 2
    SCOPED_TRACE(v.name);
    const Tensor x = leaf("ctc.lp");
    const Tensor out = F::ctc_loss(x, v.targets, il, tl, v.blank, v.reduction);
    out.mul(T["ctc.gout"].narrow(0, 0, out.numel()).reshape(out.sizes())).sum().backward();
    expect_close(out, "ctc." + v.name + ".out");
    expect_close(x.grad(), "ctc." + v.name + ".grad");
  }
  const Tensor x = leaf("ctc.lp");
  Tensor il2 = il.clone();
  il2.select(0, 0).fill_(1);
  const Tensor out = F::ctc_loss(x, tg2, il2, tl, 0, "none", /*zero_infinity=*/true);
  out.sum().backward();
  expect_close(out, "ctc.zeroinf.out");
  expect_close(x.grad(), "ctc.zeroinf.grad");
}

TEST_F(NnVsTorch, OptimizersClippingAndSchedules) {
  using optim::AdamOptions;
  using optim::SGDOptions;
  std::vector<std::pair<std::string, std::function<std::unique_ptr<optim::Optimizer>(Tensor)>>>
      configs = {
          {"sgd",
           [](Tensor p) {
             return std::make_unique<optim::SGD>(std::vector{p}, SGDOptions{.lr = 0.1});
           }},
          {"sgd_momentum",
           [](Tensor p) {
             return std::make_unique<optim::SGD>(
                 std::vector{p},
                 SGDOptions{.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01});
           }},
          {"sgd_nesterov",
           [](Tensor p) {
             return std::make_unique<optim::SGD>(
                 std::vector{p}, SGDOptions{.lr = 0.05, .momentum = 0.8, .nesterov = true});
           }},
          {"adam",
           [](Tensor p) {
             return std::make_unique<optim::Adam>(
                 std::vector{p},
                 AdamOptions{
                     .lr = 0.01, .beta1 = 0.8, .beta2 = 0.9, .eps = 1e-6, .weight_decay = 0.1});
           }},
          {"adamw",
           [](Tensor p) {
             return std::make_unique<optim::AdamW>(
                 std::vector{p},
                 AdamOptions{.lr = 0.01, .beta1 = 0.9, .beta2 = 0.95, .weight_decay = 0.1});
           }},
      };
  for (const auto& [name, make] : configs) {
    SCOPED_TRACE(name);
    const Tensor p = leaf("opt.p");
    auto opt = make(p);
    for (int i = 0; i < 3; ++i) {
      p.mutable_grad() = T[fmt::format("opt.g{}", i)].clone();
      opt->step();
      expect_close(p, fmt::format("opt.{}.{}", name, i), 1e-12);
    }
  }
  const Tensor p = leaf("opt.p"), q = leaf("opt.g1");
  p.mutable_grad() = T["opt.g0"].mul(10);
  q.mutable_grad() = T["opt.g2"].clone();
  const double total = optim::clip_grad_norm_({p, q}, 1.5);
  EXPECT_NEAR(total, want("clip.total").item<double>(), 1e-10);
  expect_close(p.grad(), "clip.p");
  expect_close(q.grad(), "clip.q");
  optim::SGD opt({leaf("opt.p")}, SGDOptions{.lr = 0.5});
  optim::StepLR sched(opt, 3, 0.5);
  std::vector<double> lrs;
  for (int i = 0; i < 8; ++i) {
    sched.step();
    lrs.push_back(opt.lr());
  }
  expect_close(tensor<double>(lrs), "steplr", 1e-15);
}

}  // namespace
}  // namespace tessera
