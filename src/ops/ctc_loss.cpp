// CTC loss (Graves et al. 2006) in log space, forward and backward, as PyTorch 1.13's
// torch.nn.functional.ctc_loss.
//
// For each batch element n, with the target l extended by blanks to l' = (b, l1, b, ..., lS, b)
// (2S + 1 states), alpha_t(s) is the log-probability of the paths that reach state s at time t
// and beta_t(s) that of the paths from (t, s) to the end, both including the emission at t:
//   alpha_t(s) = lp_t(l'_s) + lse(alpha_{t-1}(s), alpha_{t-1}(s-1), [skip] alpha_{t-1}(s-2))
// where the skip is allowed when l'_s is a label different from l'_{s-2}. The loss is
// nll = -lse(alpha_{T-1}(2S), alpha_{T-1}(2S-1)). The gradient with respect to the log
// probabilities is PyTorch's:
//   d/d lp_t(c) = exp(lp_t(c)) - exp(lse_{s: l'_s = c}(alpha_t(s) + beta_t(s)) + nll - lp_t(c))
// (the gradient through a log_softmax of the logits folded in: it equals the logits' gradient
// and is what PyTorch returns). Batch elements run in parallel, each in double precision, in
// probability space with per-step rescaling (run_element_scaled), falling back to log space
// (run_element) for alignments that underflow or cannot happen.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "autograd/record.h"
#include "core/tensor_make.h"
#include "tessera/core/parallel.h"
#include "tessera/nn/functional.h"
#include "tessera/ops/factory.h"
#include "tessera/ops/pointwise.h"
#include "tessera/ops/reduce.h"

namespace tessera::nn::functional {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

inline double lse2(double a, double b) {
  if (a == kNegInf) return b;
  if (b == kNegInf) return a;
  const double m = a > b ? a : b;
  return m + std::log1p(std::exp(-std::fabs(a - b)));
}

inline double lse3(double a, double b, double c) {
  return lse2(lse2(a, b), c);
}

std::vector<int64_t> lengths_of(const Tensor& t, int64_t n, std::string_view arg) {
  TS_CHECK(t.dtype() == kInt64 || t.dtype() == kInt32, TypeError,
           "ctc_loss(): argument '{}' expected an int64 or int32 tensor, but got {}", arg,
           t.dtype());
  TS_CHECK(t.dim() == 1 && t.size(0) == n, ValueError,
           "ctc_loss(): argument '{}' expected shape [{}] (one per batch element), but got [{}]",
           arg, n, fmt::join(t.sizes(), ", "));
  const Tensor c = t.to(kInt64).contiguous();
  const int64_t* p = c.data_ptr<int64_t>();
  return std::vector<int64_t>(p, p + n);
}

struct Problem {
  int64_t T, N, C, blank;
  std::vector<int64_t> in_len, tgt_len, tgt_offset;
  const int64_t* targets;  // element n's labels at targets[tgt_offset[n] .. + tgt_len[n])
  const double* lp;        // [T, N, C] contiguous, float64
};

// The fast path: the recursions in probability space, each time step rescaled to sum 1 (the
// scales' logs accumulate), so only T * C exponentials and T logarithms are needed instead of
// three transcendentals per state. Returns false (nothing written) when a step's total
// underflows or no path survives: the log-space path below then decides, exactly.
// Per-thread buffers of the scaled path, grown once and reused: a fresh multi-megabyte
// vector per call cost more in zeroing and page faults than the recursion itself.
struct Scratch {
  std::vector<double> y, alpha, beta, log_c, log_d, acc;
  std::vector<uint8_t> skip;
};

template <class V>
typename V::value_type* sized(V& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
  return v.data();
}

bool run_element_scaled(const Problem& p, int64_t n, double* grad, double* nll_out) {
  const int64_t T = p.in_len[n], S = p.tgt_len[n], L = 2 * S + 1, C = p.C;
  if (T == 0) return false;
  const int64_t* l = p.targets + p.tgt_offset[n];
  auto lab = [&](int64_t s) { return s % 2 == 0 ? p.blank : l[s / 2]; };
  auto lp = [&](int64_t t, int64_t c) { return p.lp[(t * p.N + n) * C + c]; };
  thread_local Scratch w;
  double* y = sized(w.y, T * C);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t c = 0; c < C; ++c) y[t * C + c] = std::exp(lp(t, c));
  uint8_t* skip = sized(w.skip, L);  // may s be reached from s - 2?
  for (int64_t s = 0; s < L; ++s) skip[s] = s >= 2 && lab(s) != p.blank && lab(s) != lab(s - 2);
  constexpr double kTiny = 1e-280;  // below this a rescale could lose the whole step

  double* alpha = sized(w.alpha, T * L);
  double* log_c = sized(w.log_c, T);
  std::fill(alpha, alpha + L, 0.0);  // later rows are written whole
  alpha[0] = y[p.blank];
  if (L > 1) alpha[1] = y[lab(1)];
  for (int64_t t = 0; t < T; ++t) {
    double* cur = &alpha[t * L];
    if (t > 0) {
      const double* prev = &alpha[(t - 1) * L];
      const double* yt = &y[t * C];
      for (int64_t s = 0; s < L; ++s) {
        double a = prev[s];
        if (s >= 1) a += prev[s - 1];
        if (skip[s]) a += prev[s - 2];
        cur[s] = a * yt[lab(s)];
      }
    }
    double total = 0;
    for (int64_t s = 0; s < L; ++s) total += cur[s];
    if (!(total > kTiny) || !std::isfinite(total)) return false;
    const double inv = 1.0 / total;
    for (int64_t s = 0; s < L; ++s) cur[s] *= inv;
    log_c[t] = std::log(total) + (t > 0 ? log_c[t - 1] : 0.0);
  }
  const double* last = &alpha[(T - 1) * L];
  const double tail = L > 1 ? last[L - 1] + last[L - 2] : last[0];
  if (!(tail > kTiny)) return false;
  const double log_p = log_c[T - 1] + std::log(tail);
  *nll_out = -log_p;
  if (!grad) return true;

  double* beta = sized(w.beta, T * L);
  double* log_d = sized(w.log_d, T);
  std::fill(beta + (T - 1) * L, beta + T * L, 0.0);
  beta[(T - 1) * L + L - 1] = y[(T - 1) * C + p.blank];
  if (L > 1) beta[(T - 1) * L + L - 2] = y[(T - 1) * C + lab(L - 2)];
  for (int64_t t = T - 1; t >= 0; --t) {
    double* cur = &beta[t * L];
    if (t < T - 1) {
      const double* next = &beta[(t + 1) * L];
      const double* yt = &y[t * C];
      for (int64_t s = 0; s < L; ++s) {
        double b = next[s];
        if (s + 1 < L) b += next[s + 1];
        if (s + 2 < L && skip[s + 2]) b += next[s + 2];
        cur[s] = b * yt[lab(s)];
      }
    }
    double total = 0;
    for (int64_t s = 0; s < L; ++s) total += cur[s];
    if (!(total > kTiny) || !std::isfinite(total)) return false;
    const double inv = 1.0 / total;
    for (int64_t s = 0; s < L; ++s) cur[s] *= inv;
    log_d[t] = std::log(total) + (t < T - 1 ? log_d[t + 1] : 0.0);
  }
  double* acc = sized(w.acc, C);
  for (int64_t t = 0; t < T; ++t) {
    std::fill(acc, acc + C, 0.0);
    const double* a = &alpha[t * L];
    const double* b = &beta[t * L];
    for (int64_t s = 0; s < L; ++s) acc[lab(s)] += a[s] * b[s];
    // sum_s alpha_t(s) beta_t(s) = acc * C_t * D_t; the gradient's second term is that over
    // y_t(c) * P.
    const double scale = log_c[t] + log_d[t] - log_p;
    double* g = grad + t * p.N * C;
    for (int64_t c = 0; c < C; ++c) {
      const double x = lp(t, c);
      g[c] = y[t * C + c] - (acc[c] > 0 ? std::exp(std::log(acc[c]) + scale - x) : 0.0);
    }
  }
  return true;
}

// nll of element n; fills grad[T, C] (strided by N * C in the caller's layout) when asked.
// Log space throughout: the reference, and the path for alignments the scaled one cannot
// represent.
double run_element(const Problem& p, int64_t n, double* grad) {
  const int64_t T = p.in_len[n], S = p.tgt_len[n], L = 2 * S + 1, C = p.C;
  const int64_t* l = p.targets + p.tgt_offset[n];
  auto lab = [&](int64_t s) { return s % 2 == 0 ? p.blank : l[s / 2]; };
  auto lp = [&](int64_t t, int64_t c) { return p.lp[(t * p.N + n) * C + c]; };
  if (T == 0) return S == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  std::vector<double> alpha(static_cast<size_t>(T * L), kNegInf);
  alpha[0] = lp(0, p.blank);
  if (L > 1) alpha[1] = lp(0, lab(1));
  for (int64_t t = 1; t < T; ++t) {
    const double* prev = &alpha[(t - 1) * L];
    double* cur = &alpha[t * L];
    for (int64_t s = 0; s < L; ++s) {
      const int64_t c = lab(s);
      double a = prev[s];
      if (s >= 1) a = lse2(a, prev[s - 1]);
      if (s >= 2 && c != p.blank && c != lab(s - 2)) a = lse2(a, prev[s - 2]);
      cur[s] = a == kNegInf ? kNegInf : a + lp(t, c);
    }
  }
  const double* last = &alpha[(T - 1) * L];
  const double ll = L > 1 ? lse2(last[L - 1], last[L - 2]) : last[0];
  const double nll = -ll;
  if (!grad) return nll;

  std::vector<double> beta(static_cast<size_t>(T * L), kNegInf);
  beta[(T - 1) * L + L - 1] = lp(T - 1, p.blank);
  if (L > 1) beta[(T - 1) * L + L - 2] = lp(T - 1, lab(L - 2));
  for (int64_t t = T - 2; t >= 0; --t) {
    const double* next = &beta[(t + 1) * L];
    double* cur = &beta[t * L];
    for (int64_t s = 0; s < L; ++s) {
      const int64_t c = lab(s);
      double b = next[s];
      if (s + 1 < L) b = lse2(b, next[s + 1]);
      if (s + 2 < L && c != p.blank && c != lab(s + 2)) b = lse2(b, next[s + 2]);
      cur[s] = b == kNegInf ? kNegInf : b + lp(t, c);
    }
  }
  std::vector<double> lcab(static_cast<size_t>(C));
  for (int64_t t = 0; t < T; ++t) {
    std::fill(lcab.begin(), lcab.end(), kNegInf);
    for (int64_t s = 0; s < L; ++s) {
      const double ab = alpha[t * L + s] + beta[t * L + s];
      if (ab != kNegInf) lcab[lab(s)] = lse2(lcab[lab(s)], ab);
    }
    double* g = grad + t * p.N * C;
    for (int64_t c = 0; c < C; ++c) {
      const double x = lp(t, c);
      g[c] = std::exp(x) - (lcab[c] == kNegInf ? 0.0 : std::exp(lcab[c] + nll - x));
    }
  }
  return nll;
}

}  // namespace

Tensor ctc_loss(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                const Tensor& target_lengths, int64_t blank, std::string_view reduction,
                bool zero_infinity) {
  constexpr std::string_view op = "ctc_loss";
  TS_CHECK(log_probs.dim() == 3, ValueError,
           "{}(): argument 'log_probs' expected [T, N, C], but got [{}]", op,
           fmt::join(log_probs.sizes(), ", "));
  TS_CHECK(log_probs.dtype() == kFloat32 || log_probs.dtype() == kFloat64, TypeError,
           "{}(): argument 'log_probs' expected float32 or float64, but got {}", op,
           log_probs.dtype());
  TS_CHECK(reduction == "mean" || reduction == "sum" || reduction == "none", ValueError,
           "{}(): argument 'reduction' expected 'mean', 'sum' or 'none', but got '{}'", op,
           reduction);
  Problem p;
  p.T = log_probs.size(0), p.N = log_probs.size(1), p.C = log_probs.size(2), p.blank = blank;
  TS_CHECK(blank >= 0 && blank < p.C, IndexError,
           "{}(): blank must be in label range [0, {}), but got {}", op, p.C, blank);
  p.in_len = lengths_of(input_lengths, p.N, "input_lengths");
  p.tgt_len = lengths_of(target_lengths, p.N, "target_lengths");
  TS_CHECK(targets.dtype() == kInt64 || targets.dtype() == kInt32, TypeError,
           "{}(): argument 'targets' expected int64 or int32 class indices, but got {}", op,
           targets.dtype());
  const Tensor tg = targets.to(kInt64).contiguous();
  int64_t total = 0;
  for (int64_t n = 0; n < p.N; ++n) {
    TS_CHECK(p.in_len[n] >= 0 && p.in_len[n] <= p.T, ValueError,
             "{}(): input_lengths[{}] = {} must be in [0, {}] (the time steps of log_probs)", op, n,
             p.in_len[n], p.T);
    TS_CHECK(p.tgt_len[n] >= 0, ValueError, "{}(): target_lengths[{}] = {} is negative", op, n,
             p.tgt_len[n]);
    total += p.tgt_len[n];
  }
  if (tg.dim() == 2) {
    TS_CHECK(tg.size(0) == p.N, ValueError, "{}(): a 2-D 'targets' expected [{}, S], but got [{}]",
             op, p.N, fmt::join(tg.sizes(), ", "));
    for (int64_t n = 0; n < p.N; ++n) {
      TS_CHECK(p.tgt_len[n] <= tg.size(1), ValueError,
               "{}(): target_lengths[{}] = {} exceeds the targets' width {}", op, n, p.tgt_len[n],
               tg.size(1));
      p.tgt_offset.push_back(n * tg.size(1));
    }
  } else {
    TS_CHECK(tg.dim() == 1 && tg.size(0) == total, ValueError,
             "{}(): a 1-D 'targets' must hold the {} concatenated labels (sum of "
             "target_lengths), but got [{}]",
             op, total, fmt::join(tg.sizes(), ", "));
    int64_t at = 0;
    for (int64_t n = 0; n < p.N; ++n) p.tgt_offset.push_back(at), at += p.tgt_len[n];
  }
  p.targets = tg.data_ptr<int64_t>();
  for (int64_t n = 0; n < p.N; ++n)
    for (int64_t i = 0; i < p.tgt_len[n]; ++i) {
      const int64_t c = p.targets[p.tgt_offset[n] + i];
      TS_CHECK(c >= 0 && c < p.C && c != blank, IndexError,
               "{}(): target {} of batch element {} is {}: labels must be in [0, {}) and not "
               "the blank ({})",
               op, i, n, c, p.C, blank);
    }

  autograd::Recorder rec({log_probs});
  const Tensor lp = log_probs.to(kFloat64).contiguous();
  p.lp = lp.data_ptr<double>();
  Tensor grad = rec ? zeros({p.T, p.N, p.C}, kFloat64) : Tensor();
  std::vector<double> nll(static_cast<size_t>(p.N));
  parallel_for(0, p.N, 1, [&](int64_t b, int64_t e) {
    for (int64_t n = b; n < e; ++n) {
      double* g = grad.defined() ? grad.data_ptr<double>() + n * p.C : nullptr;
      if (!run_element_scaled(p, n, g, &nll[n])) nll[n] = run_element(p, n, g);
    }
  });
  if (zero_infinity) {
    for (int64_t n = 0; n < p.N; ++n) {
      if (!std::isinf(nll[n])) continue;
      nll[n] = 0;
      if (grad.defined()) grad.select(1, n).zero_();
    }
  }
  // Per-element weights of the reduction: the loss is sum_n w_n nll_n (none: w = 1 each).
  std::vector<double> w(static_cast<size_t>(p.N), 1.0);
  if (reduction == "mean")
    for (int64_t n = 0; n < p.N; ++n)
      w[n] =
          1.0 / static_cast<double>(std::max<int64_t>(p.tgt_len[n], 1)) / static_cast<double>(p.N);
  Tensor per = tensor<double>(nll);
  Tensor out = reduction == "none" ? per : per.mul(tensor<double>(w)).sum();
  out = out.to(log_probs.dtype());
  if (rec) {
    rec.finish("CtcLossBackward0", {out},
               [grad, w, none = reduction == "none", dtype = log_probs.dtype()](
                   const autograd::tensor_list& g, const autograd::Node&) {
                 // Scale each element's gradient by its upstream gradient and weight.
                 const Tensor scale =
                     none ? g[0].to(kFloat64) : tensor<double>(w).mul(g[0].to(kFloat64));
                 return autograd::tensor_list{grad.mul(scale.view({1, -1, 1})).to(dtype)};
               });
  }
  return out;
}

}  // namespace tessera::nn::functional
