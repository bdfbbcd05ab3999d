// Random tensors from Philox 4x32-10 (Salmon et al., "Parallel random numbers: as easy as
// 1, 2, 3"), evaluated 16 counters at a time by the per-ISA kernels (ops/cpu/random_kernels.h,
// which also defines the stream's layout). Element i of a draw depends only on (seed, first
// counter, i): results are the same for every thread count and every chunking.
#include "tessera/ops/random.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

#include "autograd/record.h"
#include "core/convert.h"
#include "core/dtype_dispatch.h"
#include "core/tensor_make.h"
#include "ops/cpu/random_kernels.h"
#include "tessera/core/parallel.h"
#include "tessera/ops/factory.h"
#include "tessera/ops/pointwise.h"
#include "tessera/ops/reduce.h"

namespace tessera {

namespace {

using cpu::PhiloxStream;

Generator& gen_or_default(Generator* g) {
  return g ? *g : default_generator();
}

// Reserves the counters of an n-element draw taking `per_block` values from each block of
// kPhiloxLanes counters (see ops/cpu/random_kernels.h for the stream's layout).
PhiloxStream reserve(Generator& gen, int64_t n, int64_t per_block) {
  const auto blocks = static_cast<uint64_t>((n + per_block - 1) / per_block);
  return {gen.seed(), gen.advance(blocks * cpu::kPhiloxLanes)};
}

constexpr int64_t kGrain = 1 << 14;

// out[0, n) from a kernel that draws values of type D: `draw(dst, begin, end)` fills
// dst[0, end - begin) with elements [begin, end). When T is D the kernel writes out directly;
// otherwise it fills a D buffer and each value goes through `finish` into out.
template <class D, class T, class Draw, class Finish>
void fill_drawn(T* out, int64_t n, Draw draw, Finish finish) {
  parallel_for(0, n, kGrain, [&](int64_t begin, int64_t end) {
    if constexpr (std::is_same_v<T, D>) {
      draw(out + begin, begin, end);
    } else {
      constexpr int64_t kChunk = 1024;
      D buf[kChunk];
      for (int64_t b = begin; b < end; b += kChunk) {
        const int64_t e = std::min(end, b + kChunk);
        draw(buf, b, e);
        for (int64_t i = b; i < e; ++i) out[i] = finish(buf[i - b]);
      }
    }
  });
}

// The next value of a 16-bit float type toward -inf (t finite).
template <class T>
T next_down(T t) {
  constexpr uint16_t kSign = 0x8000;
  if (t.x == 0) return T(from_bits, uint16_t{kSign | 1});
  return T(from_bits, static_cast<uint16_t>((t.x & kSign) ? t.x + 1 : t.x - 1));
}

constexpr DtypeMask kRandFloat = kFloatingTypes;

Tensor fill_uniform(const Tensor& out, double lo, double hi, Generator& gen) {
  // Complex: real and imaginary parts each uniform in [lo, hi), as PyTorch.
  if (is_complex(out.dtype())) return fill_uniform(view_as_real(out), lo, hi, gen), out;
  const int64_t n = out.numel();
  if (n == 0) return out;
  const cpu::RandomKernels& k = TS_DISPATCH(random_kernels);
  visit_dtype<kRandFloat>(out.dtype(), "uniform_", [&]<class T>() {
    T* p = out.data_ptr<T>();
    if constexpr (std::is_same_v<T, double>) {
      const PhiloxStream s = reserve(gen, n, cpu::kDoubleDrawsPerBlock);
      parallel_for(0, n, kGrain,
                   [&](int64_t b, int64_t e) { k.uniform_double(p + b, b, e, s, lo, hi); });
    } else {
      // The bounds in T's precision, as PyTorch; a value that rounds up to hi in T is replaced
      // by the largest T below it.
      const float flo = static_cast<float>(convert<T>(lo)),
                  fhi = static_cast<float>(convert<T>(hi));
      T top = convert<T>(fhi);
      if constexpr (!std::is_same_v<T, float>)
        if (fhi > flo) top = next_down(top);
      const PhiloxStream s = reserve(gen, n, cpu::kFloatDrawsPerBlock);
      fill_drawn<float>(
          p, n, [&](float* dst, int64_t b, int64_t e) { k.uniform_float(dst, b, e, s, flo, fhi); },
          [&](float v) {
            const T t = convert<T>(v);
            return static_cast<float>(t) < fhi ? t : top;
          });
    }
  });
  return out;
}

Tensor fill_normal(const Tensor& out, double mean, double std, Generator& gen) {
  // Complex: real and imaginary parts each normal with std / sqrt(2), so that E|z - mean|^2 is
  // std^2 (PyTorch's complex normal).
  if (is_complex(out.dtype()))
    return fill_normal(view_as_real(out), mean, std / std::numbers::sqrt2, gen), out;
  const int64_t n = out.numel();
  if (n == 0) return out;
  const cpu::RandomKernels& k = TS_DISPATCH(random_kernels);
  visit_dtype<kRandFloat>(out.dtype(), "normal_", [&]<class T>() {
    T* p = out.data_ptr<T>();
    if constexpr (std::is_same_v<T, double>) {
      const PhiloxStream s = reserve(gen, n, cpu::kDoubleDrawsPerBlock);
      parallel_for(0, n, kGrain,
                   [&](int64_t b, int64_t e) { k.normal_double(p + b, b, e, s, mean, std); });
    } else {
      const PhiloxStream s = reserve(gen, n, cpu::kFloatDrawsPerBlock);
      const auto fmean = static_cast<float>(mean), fstd = static_cast<float>(std);
      fill_drawn<float>(
          p, n,
          [&](float* dst, int64_t b, int64_t e) { k.normal_float(dst, b, e, s, fmean, fstd); },
          [](float v) { return convert<T>(v); });
    }
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
  const int64_t n = out.numel();
  if (n == 0) return out;
  // One 64-bit draw per element, reduced modulo the range (as PyTorch's random_(from, to)).
  const PhiloxStream stream = reserve(gen_or_default(gen), n, cpu::kDoubleDrawsPerBlock);
  const cpu::RandomKernels& k = TS_DISPATCH(random_kernels);
  visit_dtype<kRealTypes>(dtype, "randint", [&]<class T>() {
    fill_drawn<uint64_t>(
        out.data_ptr<T>(), n,
        [&](uint64_t* dst, int64_t b, int64_t e) { k.bits64(dst, b, e, stream); },
        [&](uint64_t bits) {
          return convert<T>(static_cast<int64_t>(static_cast<uint64_t>(low) + bits % range));
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
