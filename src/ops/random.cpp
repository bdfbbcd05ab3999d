// Random tensors from Philox 4x32-10 (Salmon et al., "Parallel random numbers: as easy as
// 1, 2, 3"). Element i of a draw depends only on (seed, first counter, i): results are the
// same for every thread count and every chunking.
#include "tessera/ops/random.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

#include "autograd/record.h"
#include "core/convert.h"
#include "core/dtype_dispatch.h"
#include "core/tensor_make.h"
#include "tessera/core/parallel.h"
#include "tessera/ops/factory.h"
#include "tessera/ops/pointwise.h"
#include "tessera/ops/reduce.h"

namespace tessera {

namespace {

struct Philox {
  uint32_t c[4];
};

inline Philox philox(uint64_t seed, uint64_t counter) {
  uint32_t c0 = static_cast<uint32_t>(counter), c1 = static_cast<uint32_t>(counter >> 32);
  uint32_t c2 = 0, c3 = 0;
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int r = 0; r < 10; ++r) {
    const uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c0;
    const uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c2;
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return {{c0, c1, c2, c3}};
}

// Uniform double in [0, 1) from 53 random bits, and in (0, 1] for logs.
inline double u53(uint32_t a, uint32_t b) {
  return static_cast<double>(((static_cast<uint64_t>(a) << 32 | b) >> 11)) * 0x1p-53;
}

Generator& gen_or_default(Generator* g) {
  return g ? *g : default_generator();
}

// Fills each element i of a contiguous tensor with f(philox(seed, base + i / per) , i % per).
template <class T, class F>
void fill_random(const Tensor& out, Generator& gen, int per_counter, F f) {
  const int64_t n = out.numel();
  if (n == 0) return;
  const uint64_t seed = gen.seed();
  const uint64_t base = gen.advance(static_cast<uint64_t>((n + per_counter - 1) / per_counter));
  T* p = out.data_ptr<T>();
  parallel_for(0, n, 16384, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const Philox r = philox(seed, base + static_cast<uint64_t>(i / per_counter));
      p[i] = f(r, static_cast<int>(i % per_counter));
    }
  });
}

constexpr DtypeMask kRandFloat = kFloatingTypes;

Tensor fill_uniform(const Tensor& out, double lo, double hi, Generator& gen) {
  // Complex: real and imaginary parts each uniform in [lo, hi), as PyTorch.
  if (is_complex(out.dtype())) return fill_uniform(view_as_real(out), lo, hi, gen), out;
  visit_dtype<kRandFloat>(out.dtype(), "uniform_", [&]<class T>() {
    // 2 draws per counter (53 bits each); bits above the target's precision are dropped so the
    // result never rounds up to `hi`.
    fill_random<T>(out, gen, 2, [lo, hi](const Philox& r, int lane) {
      const double u = u53(r.c[2 * lane], r.c[2 * lane + 1]);
      double v = lo + (hi - lo) * u;
      T t = convert<T>(v);
      if (static_cast<double>(t) >= hi && hi > lo)
        t = convert<T>(std::nextafter(static_cast<float>(hi), static_cast<float>(lo)));
      return t;
    });
  });
  return out;
}

Tensor fill_normal(const Tensor& out, double mean, double std, Generator& gen) {
  // Complex: real and imaginary parts each normal with std / sqrt(2), so that E|z - mean|^2 is
  // std^2 (PyTorch's complex normal).
  if (is_complex(out.dtype()))
    return fill_normal(view_as_real(out), mean, std / std::numbers::sqrt2, gen), out;
  visit_dtype<kRandFloat>(out.dtype(), "normal_", [&]<class T>() {
    // Box-Muller: one counter gives a pair of independent normals.
    fill_random<T>(out, gen, 2, [mean, std](const Philox& r, int lane) {
      const double u1 = 1.0 - u53(r.c[0], r.c[1]);  // (0, 1]
      const double u2 = u53(r.c[2], r.c[3]);
      const double rad = std::sqrt(-2.0 * std::log(u1));
      const double ang = 2.0 * std::numbers::pi * u2;
      const double z = lane == 0 ? rad * std::cos(ang) : rad * std::sin(ang);
      return convert<T>(mean + std * z);
    });
  });
  return out;
}

Tensor contiguous_output(IntArrayRef size, ScalarType dtype, std::string_view op) {
  return make_empty(size, dtype, op);
}

}  // namespace

Generator& default_generator() {
  static Generator g;
  return g;
}

void manual_seed(uint64_t seed) {
  default_generator().manual_seed(seed);
}

namespace {

// An in-place fill from a distribution: the old values get no gradient (PyTorch's
// UniformBackward0 / NormalBackward0), the version counter moves like any in-place write.
template <class Fill>
const Tensor& fill_in_place(const Tensor& t, std::string_view op, const char* node, Fill fill) {
  autograd::Recorder rec({t});
  if (rec) autograd::check_inplace(t, true, op);
  if (t.is_contiguous()) {
    fill(t);
    t.bump_version();
  } else {
    t.copy_(fill(contiguous_output(t.sizes(), t.dtype(), op)));
  }
  if (rec)
    rec.finish(node, {t}, [](const autograd::tensor_list&, const autograd::Node&) {
      return autograd::tensor_list{Tensor()};
    });
  return t;
}

}  // namespace

const Tensor& uniform_(const Tensor& t, double from, double to, Generator* gen) {
  TS_CHECK(from <= to, ValueError, "uniform_(): expects 'from' <= 'to', but got from={} to={}",
           from, to);
  return fill_in_place(t, "uniform_", "UniformBackward0", [&](const Tensor& out) {
    return fill_uniform(out, from, to, gen_or_default(gen));
  });
}

const Tensor& normal_(const Tensor& t, double mean, double std, Generator* gen) {
  TS_CHECK(std >= 0, ValueError, "normal_(): expects std >= 0.0, but got std={}", std);
  return fill_in_place(t, "normal_", "NormalBackward0", [&](const Tensor& out) {
    return fill_normal(out, mean, std, gen_or_default(gen));
  });
}

Tensor rand(IntArrayRef size, TensorOptions options, Generator* gen) {
  return fill_uniform(contiguous_output(size, options.dtype(), "rand"), 0, 1, gen_or_default(gen));
}

Tensor randn(IntArrayRef size, TensorOptions options, Generator* gen) {
  return fill_normal(contiguous_output(size, options.dtype(), "randn"), 0, 1, gen_or_default(gen));
}

Tensor normal(double mean, double std, IntArrayRef size, TensorOptions options, Generator* gen) {
  TS_CHECK(std >= 0, ValueError, "normal(): expects std >= 0.0, but got std={}", std);
  return fill_normal(contiguous_output(size, options.dtype(), "normal"), mean, std,
                     gen_or_default(gen));
}

Tensor randint(int64_t low, int64_t high, IntArrayRef size, TensorOptions options, Generator* gen) {
  TS_CHECK(low < high, ValueError,
           "randint(): random_ expects 'from' to be less than 'to', but got from={} >= to={}", low,
           high);
  const ScalarType dtype = options.has_dtype() ? options.dtype() : kInt64;
  Tensor out = contiguous_output(size, dtype, "randint");
  const uint64_t range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  visit_dtype<kRealTypes>(dtype, "randint", [&]<class T>() {
    fill_random<T>(out, gen_or_default(gen), 2, [low, range](const Philox& r, int lane) {
      const uint64_t x = static_cast<uint64_t>(r.c[2 * lane]) << 32 | r.c[2 * lane + 1];
      return convert<T>(static_cast<int64_t>(static_cast<uint64_t>(low) + x % range));
    });
  });
  return out;
}

Tensor bernoulli(const Tensor& p, Generator* gen) {
  TS_CHECK(is_floating_point(p.dtype()) && !is_float8(p.dtype()), TypeError,
           "bernoulli(): expected a floating point tensor of probabilities, but got dtype {}",
           p.dtype());
  autograd::Recorder rec({p});
  Tensor probs = p.to(kFloat64).contiguous();
  const double* pp = probs.data_ptr<double>();
  for (int64_t i = 0; i < probs.numel(); ++i)
    TS_CHECK(pp[i] >= 0 && pp[i] <= 1, ValueError,
             "bernoulli(): expected all probabilities in [0, 1], but got {} at index {}", pp[i], i);
  Tensor out = contiguous_output(p.sizes(), p.dtype(), "bernoulli");
  // Each element is (u_i < p_i) for its own uniform draw u_i.
  Tensor u =
      fill_uniform(contiguous_output(p.sizes(), kFloat64, "bernoulli"), 0, 1, gen_or_default(gen));
  out.copy_(lt(u, probs));
  // A sample is piecewise constant in p: zero gradient, as PyTorch's BernoulliBackward0.
  if (rec)
    rec.finish("BernoulliBackward0", {out},
               [](const autograd::tensor_list& g, const autograd::Node&) {
                 return autograd::tensor_list{zeros_like(g[0])};
               });
  return out;
}

Tensor bernoulli(const Tensor& like, double p, Generator* gen) {
  return bernoulli(full(like.sizes(), p, like.dtype()), gen);
}

Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement, Generator* gen) {
  TS_CHECK(probs.dim() == 1 || probs.dim() == 2, RuntimeError,
           "multinomial(): prob_dist must be 1 or 2 dim, but got {} dims", probs.dim());
  TS_CHECK(is_floating_point(probs.dtype()), TypeError,
           "multinomial(): expected a floating point tensor, but got dtype {}", probs.dtype());
  TS_CHECK(num_samples > 0, ValueError,
           "multinomial(): cannot sample num_samples <= 0 samples (got {})", num_samples);
  Tensor w = (probs.dim() == 1 ? probs.unsqueeze(0) : probs).to(kFloat64).contiguous();
  const int64_t rows = w.size(0), n = w.size(1);
  TS_CHECK(n > 0, RuntimeError, "multinomial(): number of categories cannot be zero");
  TS_CHECK(replacement || num_samples <= n, RuntimeError,
           "multinomial(): cannot sample n_sample ({}) > prob_dist.size(-1) ({}) samples without "
           "replacement",
           num_samples, n);
  const double* wp = w.data_ptr<double>();
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0;
    int64_t nonzero = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double v = wp[r * n + i];
      TS_CHECK(std::isfinite(v) && v >= 0, ValueError,
               "multinomial(): probability tensor contains either `inf`, `nan` or element < 0 "
               "(row {}, column {}: {})",
               r, i, v);
      sum += v;
      nonzero += v > 0;
    }
    TS_CHECK(replacement || nonzero >= num_samples, RuntimeError,
             "multinomial(): invalid multinomial distribution (with replacement=False, not "
             "enough non-zero categories to sample): row {} has {} for {} samples",
             r, nonzero, num_samples);
    TS_CHECK(sum > 0, ValueError,
             "multinomial(): invalid multinomial distribution (sum of "
             "probabilities <= 0) in row {}",
             r);
  }
  Tensor out = contiguous_output({rows, num_samples}, kInt64, "multinomial");
  int64_t* op = out.data_ptr<int64_t>();
  // One uniform per (row, category) for sampling without replacement (exponential race), or
  // per (row, sample) with replacement (inverse CDF).
  const int64_t draws = replacement ? rows * num_samples : rows * n;
  Tensor u =
      fill_uniform(contiguous_output({draws}, kFloat64, "multinomial"), 0, 1, gen_or_default(gen));
  const double* up = u.data_ptr<double>();
  parallel_for(0, rows, 1, [&](int64_t b, int64_t e) {
    std::vector<double> cdf(n);
    std::vector<std::pair<double, int64_t>> keys(n);
    for (int64_t r = b; r < e; ++r) {
      const double* row = wp + r * n;
      if (replacement) {
        double acc = 0;
        for (int64_t i = 0; i < n; ++i) cdf[i] = acc += row[i];
        for (int64_t s = 0; s < num_samples; ++s) {
          const double x = up[r * num_samples + s] * acc;
          int64_t k = std::upper_bound(cdf.begin(), cdf.end(), x) - cdf.begin();
          k = std::min(k, n - 1);
          while (row[k] == 0 && k > 0) --k;  // never pick a zero-weight category
          op[r * num_samples + s] = k;
        }
      } else {
        // Exponential race: key = -log(u) / w; the num_samples smallest keys win, in order.
        for (int64_t i = 0; i < n; ++i) {
          const double ui = 1.0 - up[r * n + i];
          keys[i] = {row[i] > 0 ? -std::log(ui) / row[i] : INFINITY, i};
        }
        std::partial_sort(keys.begin(), keys.begin() + num_samples, keys.end());
        for (int64_t s = 0; s < num_samples; ++s) op[r * num_samples + s] = keys[s].second;
      }
    }
  });
  return probs.dim() == 1 ? out.squeeze(0) : out;
}

}  // namespace tessera
