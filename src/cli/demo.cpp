// `tessera demo`: a short showcase of the tensor library with a live progress line. Until
// training lands (issue 4), this is `make demo`'s main job: it builds tensors, runs views,
// promotion, pointwise ops, reductions and indexing on real data, and checks each result
// against a plain computation so the showcase doubles as a smoke test.
#include "cli/demo.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "cli/bench_util.h"
#include "tessera/tessera.h"

namespace tessera::cli {

namespace {

using Clock = std::chrono::steady_clock;

struct Step {
  std::string title;
  std::function<std::string()> run;  // returns a one-line result; throws on a wrong answer
};

void progress(size_t done, size_t total, const std::string& what, double elapsed) {
  const int width = 30;
  const int filled = static_cast<int>(width * done / std::max<size_t>(total, 1));
  std::string bar(filled, '#');
  bar.resize(width, '.');
  std::fprintf(stderr, "\r[%s] %zu/%zu  %-44.44s %6.2fs", bar.c_str(), done, total, what.c_str(),
               elapsed);
  std::fflush(stderr);
}

void expect(bool ok, const std::string& what) {
  TS_CHECK(ok, RuntimeError, "demo: check failed: {}", what);
}

}  // namespace

int run_demo() {
  manual_seed(2026);
  std::vector<std::string> report;
  const std::vector<Step> steps = {
      {"tensors and views",
       [] {
         Tensor x = arange(24, kFloat32).view({2, 3, 4});
         Tensor p = x.permute({2, 0, 1});
         expect(p.is_alias_of(x) && !p.is_contiguous(), "permute is a view");
         expect(x.slice(2, 1, 4, 2)[1][2][1].item<float>() == 23, "strided slice");
         return fmt::format("x = {}\n  x.permute(2,0,1).shape = [{}] (a view: same storage)",
                            x.repr(), fmt::join(p.sizes(), ", "));
       }},
      {"type promotion",
       [] {
         Tensor i = arange(4, kInt32), h = ones({4}, kFloat16);
         Tensor a = i + 2.5, b = i + h, c = i.to(kUInt8) + ones({4}, kInt8);
         expect(a.dtype() == kFloat32 && b.dtype() == kFloat16 && c.dtype() == kInt16, "promotion");
         return fmt::format("int32 + 2.5 -> {}, int32 + float16 -> {}, uint8 + int8 -> {}",
                            a.dtype(), b.dtype(), c.dtype());
       }},
      {"pointwise math on 16M floats",
       [] {
         Tensor x = randn({1 << 24});
         Tensor g = gelu(x), s = sigmoid(x);
         const double m = g.mean().item<double>();
         expect(std::fabs(m - 0.2821) < 0.01, "mean of gelu(N(0,1)) is about 0.282");
         return fmt::format("mean(gelu(x)) = {:.4f} (theory 0.2821), mean(sigmoid(x)) = {:.4f}", m,
                            s.mean().item<double>());
       }},
      {"reductions over 64M floats",
       [] {
         Tensor x = rand({1 << 26});
         const auto t0 = Clock::now();
         const double s = x.sum().item<double>();
         const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
         const double var = x.var().item<double>();
         expect(std::fabs(s / (1 << 26) - 0.5) < 1e-3 && std::fabs(var - 1.0 / 12) < 1e-3,
                "uniform moments");
         return fmt::format("sum = {:.1f}, var = {:.5f} (1/12 = 0.08333), sum at {:.1f} GB/s", s,
                            var, 4.0 * (1 << 26) / secs / 1e9);
       }},
      {"softmax and argmax over rows",
       [] {
         Tensor logits = randn({4096, 1024});
         Tensor p = softmax(logits, -1);
         Tensor rows = p.sum({-1});
         expect(allclose(rows, ones({4096}), 1e-5, 1e-5), "softmax rows sum to 1");
         expect(equal(p.argmax(-1), logits.argmax(-1)), "softmax keeps the argmax");
         return fmt::format("rows sum to 1 (max error {:.2e}); argmax unchanged",
                            (rows - 1).abs().amax().item<double>());
       }},
      {"indexing: gather, topk, sort",
       [] {
         Tensor x = randn({8, 100});
         auto [vals, idx] = topk(x, 3, -1);
         Tensor g = gather(x, 1, idx);
         expect(equal(g, vals), "gather(topk indices) == topk values");
         auto [sorted, order] = sort(x, -1, /*descending=*/true);
         expect(equal(sorted.slice(1, 0, 3), vals), "sort agrees with topk");
         return fmt::format("top-3 of row 0: {}", vals[0].repr());
       }},
      {"matrix multiply 1024x1024 (Tessera's GEMM engine)",
       [] {
         Tensor a = randn({1024, 1024}), b = randn({1024, 1024});
         Tensor c = matmul(a, b);  // warm-up: packing buffers, thread pool
         double best = 1e9;
         for (int rep = 0; rep < 3; ++rep) {
           const auto t0 = Clock::now();
           c = matmul(a, b);
           best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
         }
         Tensor ref = (a.select(0, 7).unsqueeze(1) * b).sum({0});
         expect(allclose(c[7], ref, 1e-4, 1e-3), "row 7 of a@b");
         return fmt::format("a @ b: {:.1f} GFLOP/s on {} thread(s)",
                            2.0 * 1024 * 1024 * 1024 / best / 1e9, get_num_threads());
       }},
  };
  const auto start = Clock::now();
  for (size_t i = 0; i < steps.size(); ++i) {
    progress(i, steps.size(), steps[i].title,
             std::chrono::duration<double>(Clock::now() - start).count());
    report.push_back(fmt::format("== {}\n  {}", steps[i].title, steps[i].run()));
  }
  progress(steps.size(), steps.size(), "done",
           std::chrono::duration<double>(Clock::now() - start).count());
  std::fprintf(stderr, "\n");
  for (const auto& r : report) std::printf("%s\n", r.c_str());
  std::printf("\n%s%s", build_info().c_str(), anchor_info().c_str());
  return 0;
}

}  // namespace tessera::cli
