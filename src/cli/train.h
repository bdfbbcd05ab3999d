// `tessera train` and `tessera sample`: a small decoder-only transformer trained by Tessera's
// autograd and optimizers (issue 4's main job, what `make demo` runs).
#pragma once

#include <cstdint>
#include <string>

namespace tessera::cli {

struct TrainOptions {
  std::string task = "reverse";  // the built-in task; "bytes" with --data
  std::string data;              // a text file: byte-level language model
  std::string out = "runs/demo";
  std::string resume;    // checkpoint to continue from
  int64_t digits = 12;   // reverse: digits per example
  int64_t seq_len = 64;  // bytes: context length
  int64_t dim = 64, layers = 2, heads = 4, kv_heads = 2;
  int64_t batch = 64;
  int64_t max_steps = 3000;
  double lr = 3e-3;
  double target_accuracy = 0.99;  // reverse: stop once exact match reaches it
  double time_limit = 170;        // seconds
  int64_t eval_every = 50;
  uint64_t seed = 1234;
  int threads = 0;  // 0: Tessera's default
};

int run_train(const TrainOptions& options);

struct SampleOptions {
  std::string checkpoint;
  std::string prompt;  // reverse: digits; bytes: text
  int64_t count = 5;
  int64_t max_new = 200;  // bytes: how many to generate
  double temperature = 0.8;
  uint64_t seed = 1;
};

int run_sample(const SampleOptions& options);

}  // namespace tessera::cli
