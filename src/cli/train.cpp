// `tessera train`: a decoder-only transformer learns to reverse digit strings (or, with
// --data, a byte-level model of a text file) with Tessera's autograd, AdamW, warm-up + cosine
// schedule and gradient clipping, showing a live progress line; it writes a checkpoint and a
// loss/accuracy curve (SVG) and prints samples. `tessera sample` generates from a checkpoint.
#include "cli/train.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/bench.h"
#include "cli/bench_util.h"
#include "tessera/nn/functional.h"
#include "tessera/nn/layers.h"
#include "tessera/nn/optim.h"
#include "tessera/nn/serialize.h"
#include "tessera/tessera.h"

namespace tessera::cli {

namespace {

namespace F = nn::functional;
using Clock = std::chrono::steady_clock;

constexpr int64_t kEquals = 10;  // the separator token of the reverse task (digits are 0-9)

// ---- the model ------------------------------------------------------------------------------

struct Config {
  std::string task;
  int64_t vocab = 0, max_len = 0, dim = 0, layers = 0, heads = 0, kv_heads = 0, digits = 0;

  nn::Metadata to_metadata() const {
    return {{"task", task},
            {"vocab", std::to_string(vocab)},
            {"max_len", std::to_string(max_len)},
            {"dim", std::to_string(dim)},
            {"layers", std::to_string(layers)},
            {"heads", std::to_string(heads)},
            {"kv_heads", std::to_string(kv_heads)},
            {"digits", std::to_string(digits)}};
  }
  static Config from_metadata(const nn::Metadata& m, const std::string& path) {
    auto get = [&](const char* k) -> int64_t {
      auto it = m.find(k);
      TS_CHECK(it != m.end(), ValueError, "{}: checkpoint lacks the model setting \"{}\"", path, k);
      try {
        return std::stoll(it->second);
      } catch (const std::exception&) {
        TS_THROW(ValueError, "{}: model setting \"{}\" = \"{}\" is not a number", path, k,
                 it->second);
      }
    };
    Config c;
    auto t = m.find("task");
    TS_CHECK(t != m.end() && (t->second == "reverse" || t->second == "bytes"), ValueError,
             "{}: not a `tessera train` checkpoint (no task reverse/bytes in its metadata)", path);
    c.task = t->second;
    c.vocab = get("vocab"), c.max_len = get("max_len"), c.dim = get("dim");
    c.layers = get("layers"), c.heads = get("heads"), c.kv_heads = get("kv_heads");
    c.digits = get("digits");
    return c;
  }
};

class Block : public nn::Module {
 public:
  explicit Block(const Config& c) : Module("Block") {
    ln1 = register_module("ln1", std::make_shared<nn::LayerNorm>(c.dim));
    attn = register_module("attn",
                           std::make_shared<nn::CausalSelfAttention>(c.dim, c.heads, c.kv_heads));
    ln2 = register_module("ln2", std::make_shared<nn::LayerNorm>(c.dim));
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(c.dim, 4 * c.dim));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(4 * c.dim, c.dim));
  }
  Tensor forward(const Tensor& x) override {
    const Tensor h = x.add(attn->forward(ln1->forward(x)));
    // fc1 and its GELU run as one GEMM with the bias and activation in its epilogue.
    return h.add(fc2->forward(linear_act(ln2->forward(h), fc1->weight, fc1->bias, "gelu")));
  }

 private:
  std::shared_ptr<nn::LayerNorm> ln1, ln2;
  std::shared_ptr<nn::CausalSelfAttention> attn;
  std::shared_ptr<nn::Linear> fc1, fc2;
};

// tokens [B, T] int64 -> logits [B, T, vocab].
class TransformerLM : public nn::Module {
 public:
  explicit TransformerLM(const Config& c) : Module("TransformerLM"), config(c) {
    tok = register_module("tok", std::make_shared<nn::Embedding>(c.vocab, c.dim));
    pos = register_module("pos", std::make_shared<nn::Embedding>(c.max_len, c.dim));
    blocks = register_module("blocks", std::make_shared<nn::ModuleList>());
    for (int64_t i = 0; i < c.layers; ++i) blocks->push_back(std::make_shared<Block>(c));
    ln = register_module("ln", std::make_shared<nn::LayerNorm>(c.dim));
    head = register_module("head", std::make_shared<nn::Linear>(c.dim, c.vocab));
    // Small embeddings, as GPT-2 initialises them (N(0, 1) is too loud for a residual stream).
    autograd::NoGradGuard no_grad;
    tok->weight.mul_(0.02);
    pos->weight.mul_(0.02);
  }
  Tensor forward(const Tensor& tokens) override {
    const int64_t t = tokens.size(1);
    TS_CHECK(t <= config.max_len, ValueError, "TransformerLM: sequence of {} exceeds max_len {}", t,
             config.max_len);
    Tensor x = tok->forward(tokens).add(pos->forward(arange(t)));
    for (size_t i = 0; i < blocks->size(); ++i) x = (*blocks)[i].forward(x);
    return head->forward(ln->forward(x));
  }
  Config config;

 private:
  std::shared_ptr<nn::Embedding> tok, pos;
  std::shared_ptr<nn::ModuleList> blocks;
  std::shared_ptr<nn::LayerNorm> ln;
  std::shared_ptr<nn::Linear> head;
};

// ---- the tasks ------------------------------------------------------------------------------

// Reverse: "d1 .. dL = dL .. d1"; the model sees all but the last token and is scored on the
// answer (the tokens after '='); the digits before it are random, so they are ignored.
struct ReverseBatch {
  Tensor input, target, digits, answer;
};

ReverseBatch reverse_batch(int64_t batch, int64_t digits, Generator& gen) {
  const Tensor d = randint(0, 10, {batch, digits}, kInt64, &gen);
  const Tensor rev_idx = arange(digits - 1, -1, -1);
  const Tensor answer = d.index_select(1, rev_idx);
  const Tensor seq = cat({d, full({batch, 1}, kEquals, kInt64), answer}, 1);
  ReverseBatch b;
  b.input = seq.narrow(1, 0, 2 * digits);
  b.target = seq.narrow(1, 1, 2 * digits).clone();
  b.target.narrow(1, 0, digits).fill_(-100);  // only the answer counts
  b.digits = d;
  b.answer = answer;
  return b;
}

// Greedy decoding of the answer after "digits =".
Tensor reverse_decode(TransformerLM& model, const Tensor& digits) {
  autograd::NoGradGuard no_grad;
  const int64_t b = digits.size(0), l = digits.size(1);
  Tensor seq = cat({digits, full({b, 1}, kEquals, kInt64)}, 1);
  for (int64_t i = 0; i < l; ++i) {
    const Tensor logits = model.forward(seq).select(1, -1).narrow(1, 0, 10);  // digits only
    seq = cat({seq, logits.argmax(1, /*keepdim=*/true)}, 1);
  }
  return seq.narrow(1, l + 1, l);
}

double exact_match(TransformerLM& model, const ReverseBatch& eval) {
  const Tensor got = reverse_decode(model, eval.digits);
  return got.eq(eval.answer).all(1, false).to(kFloat64).mean().item<double>();
}

std::string digits_string(const Tensor& row) {
  std::string s;
  for (int64_t i = 0; i < row.size(0); ++i) s += static_cast<char>('0' + row[i].item<int64_t>());
  return s;
}

// Bytes: windows of a file; the score is next-byte accuracy on held-out windows.
struct ByteData {
  Tensor train, held;  // uint8 -> int64 token streams
};

ByteData load_bytes(const std::string& path, int64_t seq_len) {
  std::ifstream f(path, std::ios::binary);
  TS_CHECK(f.good(), ValueError, "train: --data {}: cannot open the file for reading", path);
  std::vector<char> bytes{std::istreambuf_iterator<char>(f), {}};
  TS_CHECK(!f.bad(), ValueError, "train: --data {}: read error", path);
  const int64_t n = static_cast<int64_t>(bytes.size());
  TS_CHECK(n >= 4 * (seq_len + 1), ValueError,
           "train: --data {}: {} bytes is too short for a context of {} (need at least {})", path,
           n, seq_len, 4 * (seq_len + 1));
  std::vector<int64_t> tokens(bytes.size());
  for (size_t i = 0; i < bytes.size(); ++i) tokens[i] = static_cast<unsigned char>(bytes[i]);
  const Tensor all = tensor<int64_t>(tokens);
  const int64_t split = n - std::max<int64_t>(n / 10, seq_len + 1);
  return {all.narrow(0, 0, split), all.narrow(0, split, n - split)};
}

std::pair<Tensor, Tensor> byte_batch(const Tensor& stream, int64_t batch, int64_t seq_len,
                                     Generator& gen) {
  const Tensor starts = randint(0, stream.size(0) - seq_len - 1, {batch}, kInt64, &gen);
  const Tensor offsets = arange(seq_len + 1);
  const Tensor idx = starts.unsqueeze(1).add(offsets.unsqueeze(0));  // [B, T + 1]
  const Tensor windows = stream.index_select(0, idx.reshape({-1})).view({batch, seq_len + 1});
  return {windows.narrow(1, 0, seq_len), windows.narrow(1, 1, seq_len)};
}

// ---- reporting ------------------------------------------------------------------------------

std::atomic<bool> g_interrupted{false};

extern "C" void on_sigint(int) {
  g_interrupted = true;
}

std::string clock_string(double seconds) {
  const int64_t s = static_cast<int64_t>(std::max(0.0, seconds) + 0.5);
  return fmt::format("{}:{:02d}", s / 60, s % 60);
}

struct Point {
  int64_t step;
  double loss, accuracy;  // accuracy < 0: not measured at this step
};

// Loss (left axis, log scale) and accuracy (right axis, 0-100%) against steps.
void write_curve(const std::string& path, const std::vector<Point>& points,
                 const std::string& acc_name) {
  const double w = 720, h = 360, l = 60, r = 60, t = 30, b = 40;
  int64_t max_step = 1;
  double lo = 1e30, hi = -1e30;
  for (const Point& p : points) {
    max_step = std::max(max_step, p.step);
    lo = std::min(lo, std::log10(std::max(p.loss, 1e-6)));
    hi = std::max(hi, std::log10(std::max(p.loss, 1e-6)));
  }
  if (hi - lo < 1e-9) hi = lo + 1;
  auto x = [&](double s) { return l + (w - l - r) * s / static_cast<double>(max_step); };
  auto yl = [&](double v) {
    return t + (h - t - b) * (hi - std::log10(std::max(v, 1e-6))) / (hi - lo);
  };
  auto ya = [&](double a) { return t + (h - t - b) * (1 - a); };
  std::string loss_path, acc_path;
  for (const Point& p : points) {
    loss_path +=
        fmt::format("{}{:.1f},{:.1f}", loss_path.empty() ? "M" : " L", x(p.step), yl(p.loss));
    if (p.accuracy >= 0)
      acc_path +=
          fmt::format("{}{:.1f},{:.1f}", acc_path.empty() ? "M" : " L", x(p.step), ya(p.accuracy));
  }
  std::ofstream f(path);
  f << fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n"
      "<rect x=\"{2}\" y=\"{3}\" width=\"{4}\" height=\"{5}\" fill=\"none\" stroke=\"#888\"/>\n"
      "<path d=\"{6}\" fill=\"none\" stroke=\"#c0392b\" stroke-width=\"1.5\"/>\n"
      "<path d=\"{7}\" fill=\"none\" stroke=\"#2471a3\" stroke-width=\"2\"/>\n"
      "<text x=\"{2}\" y=\"18\" fill=\"#c0392b\">training loss (log scale, {8:.3g} .. "
      "{9:.3g})</text>\n"
      "<text x=\"{10}\" y=\"18\" fill=\"#2471a3\" text-anchor=\"end\">{11} (0-100%)</text>\n"
      "<text x=\"{12}\" y=\"{13}\" text-anchor=\"middle\">step (0 .. {14})</text>\n"
      "</svg>\n",
      w, h, l, t, w - l - r, h - t - b, loss_path, acc_path, std::pow(10, lo), std::pow(10, hi),
      w - r, acc_name, (l + w - r) / 2, h - 10, max_step);
}

class Progress {
 public:
  Progress() : tty_(isatty(fileno(stderr)) != 0) {}
  void update(const std::string& line, bool force) {
    const auto now = Clock::now();
    if (tty_) {
      if (!force && now - last_ < std::chrono::milliseconds(100)) return;
      std::fprintf(stderr, "\r%-100s", line.c_str());
    } else {
      // Logs (CI): a line every few seconds instead of carriage returns.
      if (!force && now - last_ < std::chrono::seconds(5)) return;
      std::fprintf(stderr, "%s\n", line.c_str());
    }
    last_ = now;
  }
  void finish() {
    if (tty_) std::fprintf(stderr, "\n");
  }

 private:
  bool tty_;
  Clock::time_point last_{};
};

}  // namespace

int run_train(const TrainOptions& o) {
  TS_CHECK(o.batch > 0 && o.max_steps > 0 && o.dim > 0 && o.layers > 0 && o.heads > 0 &&
               o.kv_heads > 0 && o.lr > 0 && o.time_limit > 0 && o.eval_every > 0,
           ValueError, "train: sizes, steps, --lr, --time-limit and --eval-every must be positive");
  TS_CHECK(o.digits >= 1 && o.digits <= 32, ValueError,
           "train: --digits expected 1..32, but got {}", o.digits);
  if (o.threads > 0) set_num_threads(o.threads);
  const bool bytes = !o.data.empty();
  ByteData data;
  if (bytes) data = load_bytes(o.data, o.seq_len);

  Config cfg;
  int64_t start_step = 0;
  nn::Metadata resume_meta;
  if (!o.resume.empty()) {
    resume_meta = nn::read_checkpoint_metadata(o.resume);
    cfg = Config::from_metadata(resume_meta, o.resume);
    TS_CHECK(cfg.task == (bytes ? "bytes" : "reverse"), ValueError,
             "train: --resume {} is a '{}' checkpoint, but this run trains '{}'", o.resume,
             cfg.task, bytes ? "bytes" : "reverse");
  } else {
    cfg.task = bytes ? "bytes" : "reverse";
    cfg.vocab = bytes ? 256 : 11;
    cfg.max_len = bytes ? o.seq_len : 2 * o.digits;
    cfg.dim = o.dim, cfg.layers = o.layers, cfg.heads = o.heads, cfg.kv_heads = o.kv_heads;
    cfg.digits = o.digits;
  }
  manual_seed(o.seed);
  TransformerLM model(cfg);
  optim::AdamW opt(model.parameters(), {.lr = o.lr, .beta2 = 0.99, .weight_decay = 0.01});
  if (!o.resume.empty()) {
    start_step = nn::load_checkpoint(o.resume, model, &opt).step;
    std::printf("train: resumed from step %lld of %s\n", static_cast<long long>(start_step),
                o.resume.c_str());
  }
  optim::WarmupCosineLR sched(opt, std::min<int64_t>(100, o.max_steps / 10), o.max_steps,
                              o.lr * 0.1);
  for (int64_t s = 0; s < start_step; ++s) sched.step();

  Generator data_gen(o.seed + 1 + static_cast<uint64_t>(start_step));
  Generator eval_gen(o.seed + 7);
  const ReverseBatch eval = bytes ? ReverseBatch{} : reverse_batch(512, cfg.digits, eval_gen);
  const auto held =
      bytes ? byte_batch(data.held, 64, cfg.max_len, eval_gen) : std::pair<Tensor, Tensor>{};
  auto evaluate = [&]() -> double {
    if (!bytes) return exact_match(model, eval);
    autograd::NoGradGuard no_grad;
    const Tensor pred = model.forward(held.first).argmax(-1);
    return pred.eq(held.second).to(kFloat64).mean().item<double>();
  };
  const std::string acc_name = bytes ? "next-byte accuracy" : "exact-match accuracy";

  std::filesystem::create_directories(o.out);
  const std::string ckpt = (std::filesystem::path(o.out) / "model.safetensors").string();
  const std::string curve = (std::filesystem::path(o.out) / "curve.svg").string();
  std::printf(
      "train: %s task, %lld parameters (dim %lld, %lld layers, %lld heads / %lld kv), "
      "batch %lld, up to %lld steps or %.0f s, %d threads\n",
      cfg.task.c_str(), static_cast<long long>(model.num_parameters()),
      static_cast<long long>(cfg.dim), static_cast<long long>(cfg.layers),
      static_cast<long long>(cfg.heads), static_cast<long long>(cfg.kv_heads),
      static_cast<long long>(o.batch), static_cast<long long>(o.max_steps), o.time_limit,
      get_num_threads());
  std::fflush(stdout);

  g_interrupted = false;
  auto previous = std::signal(SIGINT, on_sigint);
  Progress progress;
  std::vector<Point> points;
  const auto t0 = Clock::now();
  int64_t step = start_step, tokens = 0;
  double loss_ema = NAN, accuracy = -1;
  bool reached = false, interrupted = false;
  while (step < o.max_steps) {
    Tensor input, target;
    if (bytes) {
      std::tie(input, target) = byte_batch(data.train, o.batch, cfg.max_len, data_gen);
    } else {
      const ReverseBatch b = reverse_batch(o.batch, cfg.digits, data_gen);
      input = b.input, target = b.target;
    }
    const Tensor logits = model.forward(input);
    const Tensor loss = F::cross_entropy(logits.reshape({-1, cfg.vocab}), target.reshape({-1}));
    loss.backward();
    optim::clip_grad_norm_(model.parameters(), 1.0);
    opt.step();
    opt.zero_grad();
    sched.step();
    ++step;
    tokens += input.numel();
    const double l = loss.item<double>();
    TS_CHECK(std::isfinite(l), RuntimeError,
             "train: the loss became {} at step {} (try a smaller --lr)", l, step);
    loss_ema = std::isnan(loss_ema) ? l : 0.9 * loss_ema + 0.1 * l;
    const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
    const bool eval_now = step % o.eval_every == 0 || step == o.max_steps;
    if (eval_now) {
      accuracy = evaluate();
      reached = !bytes && accuracy >= o.target_accuracy;
    }
    points.push_back({step, l, eval_now ? accuracy : -1.0});
    const double rate = static_cast<double>(tokens) / std::max(elapsed, 1e-9);
    const double eta =
        std::min(o.time_limit - elapsed, elapsed / static_cast<double>(step - start_step) *
                                             static_cast<double>(o.max_steps - step));
    progress.update(
        fmt::format("step {}/{} | loss {:.4f} | {} {} | {:.1f}k tok/s | {} | ETA {}", step,
                    o.max_steps, loss_ema, acc_name,
                    accuracy < 0 ? std::string("-") : fmt::format("{:.1f}%", 100 * accuracy),
                    rate / 1e3, clock_string(elapsed), clock_string(eta)),
        eval_now);
    if (reached || elapsed >= o.time_limit) break;
    if (g_interrupted) {
      interrupted = true;
      break;
    }
  }
  progress.finish();
  std::signal(SIGINT, previous);
  if (accuracy < 0 || points.empty() || points.back().accuracy < 0) {
    accuracy = evaluate();
    if (!points.empty()) points.back().accuracy = accuracy;
  }
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  nn::Metadata meta = cfg.to_metadata();
  nn::save_checkpoint(ckpt, model, &opt, step, meta);
  write_curve(curve, points, acc_name);
  std::printf("train: checkpoint %s, curve %s\n", ckpt.c_str(), curve.c_str());

  if (!bytes) {
    model.eval();
    const Tensor got = reverse_decode(model, eval.digits.narrow(0, 0, 5));
    for (int64_t i = 0; i < 5; ++i) {
      const std::string in = digits_string(eval.digits[i]), out = digits_string(got[i]),
                        want = digits_string(eval.answer[i]);
      std::printf("  %s = %s  %s\n", in.c_str(), out.c_str(),
                  out == want ? "ok" : ("expected " + want).c_str());
    }
  }
  std::printf("train: final loss %.4f, %s %.1f%%, %.0f tokens/s, %lld steps, wall %s%s\n",
              points.empty() ? NAN : points.back().loss, acc_name.c_str(), 100 * accuracy,
              static_cast<double>(tokens) / std::max(wall, 1e-9), static_cast<long long>(step),
              clock_string(wall).c_str(),
              interrupted ? " (interrupted: checkpoint saved)"
              : reached   ? ""
                          : (bytes ? "" : " (target accuracy not reached)"));
  if (interrupted) return 130;
  return bytes || reached ? 0 : 2;
}

int run_sample(const SampleOptions& o) {
  const nn::Metadata meta = nn::read_checkpoint_metadata(o.checkpoint);
  const Config cfg = Config::from_metadata(meta, o.checkpoint);
  TransformerLM model(cfg);
  nn::load_checkpoint(o.checkpoint, model, nullptr);
  model.eval();
  Generator gen(o.seed);
  if (cfg.task == "reverse") {
    Tensor digits;
    if (!o.prompt.empty()) {
      TS_CHECK(static_cast<int64_t>(o.prompt.size()) == cfg.digits &&
                   o.prompt.find_first_not_of("0123456789") == std::string::npos,
               ValueError, "sample: --prompt expected {} digits for this model, but got \"{}\"",
               cfg.digits, o.prompt);
      std::vector<int64_t> v;
      for (char c : o.prompt) v.push_back(c - '0');
      digits = tensor<int64_t>(v).unsqueeze(0);
    } else {
      digits = randint(0, 10, {o.count, cfg.digits}, kInt64, &gen);
    }
    const Tensor got = reverse_decode(model, digits);
    for (int64_t i = 0; i < digits.size(0); ++i) {
      const std::string in = digits_string(digits[i]), out = digits_string(got[i]);
      const std::string want(in.rbegin(), in.rend());
      std::printf("%s = %s  %s\n", in.c_str(), out.c_str(),
                  out == want ? "ok" : ("expected " + want).c_str());
    }
    return 0;
  }
  TS_CHECK(o.temperature > 0, ValueError, "sample: --temperature must be positive");
  std::vector<int64_t> seq;
  for (char c : o.prompt.empty() ? std::string("\n") : o.prompt)
    seq.push_back(static_cast<unsigned char>(c));
  autograd::NoGradGuard no_grad;
  std::string text = o.prompt;
  for (int64_t i = 0; i < o.max_new; ++i) {
    const int64_t n = static_cast<int64_t>(seq.size());
    const int64_t from = std::max<int64_t>(0, n - cfg.max_len);
    const Tensor ctx =
        tensor<int64_t>(std::vector<int64_t>(seq.begin() + from, seq.end())).unsqueeze(0);
    const Tensor logits = model.forward(ctx).select(1, -1).squeeze(0).div(o.temperature);
    const int64_t next = multinomial(logits.softmax(0), 1, false, &gen).item<int64_t>();
    seq.push_back(next);
    text += static_cast<char>(next);
  }
  std::printf("%s\n", text.c_str());
  return 0;
}

// ---- bench train ----------------------------------------------------------------------------

int run_bench_train(const BenchOptions& options) {
  const std::vector<int> threads = options.threads.empty() ? default_threads() : options.threads;
  const Budget budget = options.quick ? Budget{10, 2.0, 60} : Budget{20, 5.0, 200};
  const TrainOptions d;  // the demo's model
  Config cfg;
  cfg.task = "reverse", cfg.vocab = 11, cfg.max_len = 2 * d.digits, cfg.dim = d.dim;
  cfg.layers = d.layers, cfg.heads = d.heads, cfg.kv_heads = d.kv_heads, cfg.digits = d.digits;
  const std::string name =
      fmt::format("train/float32/{}x{}/dim{}-layers{}", d.batch, 2 * d.digits, d.dim, d.layers);
  const double tokens_per_step = static_cast<double>(d.batch * 2 * d.digits);
  std::vector<BenchRow> rows;
  const int saved = get_num_threads();
  for (int t : threads) {
    set_num_threads(t);
    manual_seed(0);
    TransformerLM model(cfg);
    optim::AdamW opt(model.parameters(), {.lr = 3e-3, .beta2 = 0.99, .weight_decay = 0.01});
    Generator gen(1);
    BenchRow row{"train", name, "tessera", t};
    row.stats = measure(
        [&] {
          const ReverseBatch b = reverse_batch(d.batch, d.digits, gen);
          const Tensor loss = F::cross_entropy(model.forward(b.input).reshape({-1, cfg.vocab}),
                                               b.target.reshape({-1}));
          loss.backward();
          optim::clip_grad_norm_(model.parameters(), 1.0);
          opt.step();
          opt.zero_grad();
        },
        budget);
    std::fprintf(stderr, "bench train: tessera %d thread(s): %.0f tokens/s\n", t,
                 tokens_per_step / row.stats->median_s);
    rows.push_back(row);
  }
  set_num_threads(saved);
  std::vector<std::string> notes;
  for (auto& r : run_torch_anchor(
           "torch_train.py",
           {"--batch", std::to_string(d.batch), "--digits", std::to_string(d.digits), "--dim",
            std::to_string(d.dim), "--layers", std::to_string(d.layers), "--heads",
            std::to_string(d.heads), "--kv-heads", std::to_string(d.kv_heads)},
           threads, budget, "torch", notes))
    rows.push_back(r);
  std::printf(
      "\ntrain (the demo model: %lld parameters, batch %lld x %lld tokens; a step is "
      "forward, loss, backward, clipping, AdamW)\n",
      static_cast<long long>(TransformerLM(cfg).num_parameters()), static_cast<long long>(d.batch),
      static_cast<long long>(2 * d.digits));
  std::printf("%-8s %12s %12s %12s %12s %9s\n", "threads", "ms/step", "tokens/s", "torch ms",
              "torch tok/s", "x torch");
  for (int t : threads) {
    const BenchRow* ts = find_row(rows, "tessera", name, t, true);
    const BenchRow* th = find_row(rows, "torch", name, t, true);
    if (!ts) continue;
    std::string line = fmt::format("{:<8} {:12.2f} {:12.0f}", t, ts->stats->median_s * 1e3,
                                   tokens_per_step / ts->stats->median_s);
    line += th ? fmt::format(" {:12.2f} {:12.0f} {:8.2f}x", th->stats->median_s * 1e3,
                             tokens_per_step / th->stats->median_s,
                             th->stats->median_s / ts->stats->median_s)
               : fmt::format(" {:>12} {:>12} {:>9}", "skipped", "-", "-");
    std::printf("%s\n", line.c_str());
  }
  return finish_bench("train", notes, options.json_path, rows);
}

}  // namespace tessera::cli
