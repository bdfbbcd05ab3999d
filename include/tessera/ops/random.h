// Random numbers from a counter-based generator (Philox 4x32-10). A draw of n numbers takes
// counters [offset, offset + n) from the generator and advances it, so element i of a
// result depends only on (seed, offset, i): the same seed gives the same numbers whatever
// the thread count.
#pragma once

#include <cstdint>
#include <optional>

#include "tessera/core/tensor.h"

namespace tessera {

class Generator {
 public:
  explicit Generator(uint64_t seed = 67280421310721ull) : seed_(seed) {}
  void manual_seed(uint64_t seed) {
    seed_ = seed;
    offset_ = 0;
  }
  uint64_t seed() const { return seed_; }
  uint64_t offset() const { return offset_; }
  void set_offset(uint64_t offset) { offset_ = offset; }
  // Reserves n 128-bit counters and returns the first.
  uint64_t advance(uint64_t n) {
    const uint64_t o = offset_;
    offset_ += n;
    return o;
  }

 private:
  uint64_t seed_;
  uint64_t offset_ = 0;
};

// The process-wide default generator (not thread-safe: seed it before spawning threads that
// draw from it, or pass each thread its own Generator).
Generator& default_generator();
void manual_seed(uint64_t seed);

// Uniform [0, 1).
Tensor rand(IntArrayRef size, TensorOptions options = {}, Generator* gen = nullptr);
// Standard normal.
Tensor randn(IntArrayRef size, TensorOptions options = {}, Generator* gen = nullptr);
// Uniform integers in [low, high); int64 unless options say otherwise.
Tensor randint(int64_t low, int64_t high, IntArrayRef size, TensorOptions options = {},
               Generator* gen = nullptr);
Tensor normal(double mean, double std, IntArrayRef size, TensorOptions options = {},
              Generator* gen = nullptr);
// Each element 1 with probability p (a tensor of probabilities), else 0; dtype of p.
Tensor bernoulli(const Tensor& p, Generator* gen = nullptr);
Tensor bernoulli(const Tensor& like, double p, Generator* gen = nullptr);
// Rows of `probs` ([n] or [m, n], non-negative weights) -> num_samples indices each.
Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement = false,
                   Generator* gen = nullptr);
// In place: fills t from the distribution.
const Tensor& uniform_(const Tensor& t, double from = 0, double to = 1, Generator* gen = nullptr);
const Tensor& normal_(const Tensor& t, double mean = 0, double std = 1, Generator* gen = nullptr);

}  // namespace tessera
