// `tessera bench ctc`: ctc_loss forward + backward against PyTorch 1.13 (bench/torch_ctc.py)
// on (T=200, B=16, C=30, S=50) and (T=1000, B=8, C=100, S=200): log_probs from a seeded
// log_softmax, padded targets, full lengths, reduction "mean".
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/bench.h"
#include "cli/bench_util.h"
#include "tessera/tessera.h"

namespace tessera::cli {

int run_bench_ctc(const BenchOptions& options) {
  const std::vector<int> threads = options.threads.empty() ? default_threads() : options.threads;
  const Budget budget = options.quick ? Budget{5, 1.0, 50} : Budget{10, 3.0, 200};
  struct Case {
    int64_t t, b, c, s;
    std::string name() const { return fmt::format("ctc/float32/{}x{}x{}x{}", t, b, c, s); }
  };
  std::vector<Case> cases = {{200, 16, 30, 50}, {1000, 8, 100, 200}};
  std::erase_if(cases,
                [&](const Case& c) { return c.name().find(options.filter) == std::string::npos; });
  std::vector<BenchRow> rows;
  const int saved = get_num_threads();
  for (int th : threads) {
    set_num_threads(th);
    for (const Case& c : cases) {
      manual_seed(0);
      const Tensor lp = randn({c.t, c.b, c.c}).log_softmax(2).requires_grad_();
      const Tensor tg = randint(1, c.c, {c.b, c.s});
      const Tensor il = full({c.b}, c.t, kInt64), tl = full({c.b}, c.s, kInt64);
      BenchRow row{"ctc", c.name(), "tessera", th};
      row.stats = measure(
          [&] {
            lp.mutable_grad() = Tensor();
            nn::functional::ctc_loss(lp, tg, il, tl).backward();
          },
          budget);
      rows.push_back(row);
    }
  }
  set_num_threads(saved);
  std::vector<std::string> notes;
  std::string list;
  for (const Case& c : cases)
    list += fmt::format("{}{}x{}x{}x{}", list.empty() ? "" : ",", c.t, c.b, c.c, c.s);
  if (!cases.empty())
    for (auto& r :
         run_torch_anchor("torch_ctc.py", {"--cases", list}, threads, budget, "torch", notes))
      rows.push_back(r);
  for (int th : threads) {
    std::printf("\nctc_loss forward + backward, %d thread%s\n", th, th == 1 ? "" : "s");
    std::printf("%-32s %10s %10s %9s\n", "case", "ms", "torch ms", "x torch");
    for (const Case& c : cases) {
      const BenchRow* ts = find_row(rows, "tessera", c.name(), th, true);
      const BenchRow* tt = find_row(rows, "torch", c.name(), th, true);
      if (!ts) continue;
      std::printf(
          "%-32s %10.2f %10s %9s\n", c.name().c_str(), ts->stats->median_s * 1e3,
          tt ? fmt::format("{:.2f}", tt->stats->median_s * 1e3).c_str() : "skipped",
          tt ? fmt::format("{:.2f}x", tt->stats->median_s / ts->stats->median_s).c_str() : "-");
    }
  }
  return finish_bench("ctc", notes, options.json_path, rows);
}

}  // namespace tessera::cli
