#include "ops/pointwise_grad.h"

#include <cctype>
#include <cmath>
#include <numbers>

#include "tessera/ops/factory.h"
#include "tessera/ops/pointwise.h"

namespace tessera {

using autograd::Node;
using autograd::Recorder;
using autograd::SavedTensor;
using autograd::sum_to;
using autograd::tensor_list;
using cpu::BinaryOp;
using cpu::UnaryOp;

std::string backward_name(std::string_view op) {
  std::string n;
  bool up = true;
  for (char c : op) {
    if (c == '_') {
      up = true;
      continue;
    }
    n += up ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    up = false;
  }
  return n + "Backward0";
}

bool binary_is_differentiable(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add:
    case BinaryOp::Sub:
    case BinaryOp::Mul:
    case BinaryOp::Div:
    case BinaryOp::Pow:
    case BinaryOp::Maximum:
    case BinaryOp::Minimum:
    case BinaryOp::DivTrunc:
    case BinaryOp::DivFloor:
    case BinaryOp::Remainder:
    case BinaryOp::Fmod:
    case BinaryOp::Atan2:
      return true;
    default:
      return false;
  }
}

bool unary_is_differentiable(UnaryOp op) {
  switch (op) {
    case UnaryOp::BitNot:
    case UnaryOp::LogicalNot:
    case UnaryOp::IsNan:
    case UnaryOp::IsInf:
    case UnaryOp::IsFinite:
      return false;
    default:
      return true;
  }
}

namespace {

Tensor conj_if_complex(const Tensor& t) {
  return t.is_complex() ? t.conj() : t;
}

}  // namespace

void record_binary(Recorder& rec, BinaryOp op, std::string_view name, const Tensor& out,
                   const Tensor* a, const Tensor* a_before, const Tensor* b, const Tensor* b_before,
                   const Scalar* sa, const Scalar* sb, const Scalar& alpha) {
  // Shapes of the tensor operands (a Scalar operand gets no gradient).
  const DimVector a_shape = a ? a->sizes().vec() : DimVector{};
  const DimVector b_shape = b ? b->sizes().vec() : DimVector{};
  const bool has_a = a != nullptr, has_b = b != nullptr;
  auto pack = [a_shape, b_shape, has_a, has_b](Tensor ga, Tensor gb) {
    tensor_list r;
    if (has_a) r.push_back(ga.defined() ? sum_to(ga, a_shape) : ga);
    if (has_b) r.push_back(gb.defined() ? sum_to(gb, b_shape) : gb);
    return r;
  };
  const SavedTensor sva = has_a ? Recorder::save(*a_before) : SavedTensor();
  const SavedTensor svb = has_b ? Recorder::save(*b_before) : SavedTensor();
  const Scalar sca = sa ? *sa : Scalar(0), scb = sb ? *sb : Scalar(0);
  const std::string node = backward_name(name);
  switch (op) {
    case BinaryOp::Add:
    case BinaryOp::Sub: {
      const bool sub = op == BinaryOp::Sub;
      rec.finish(node, {out}, [pack, alpha, sub](const tensor_list& g, const Node&) {
        Tensor gb = g[0].mul(alpha);
        return pack(g[0], sub ? gb.neg() : gb);
      });
      return;
    }
    case BinaryOp::Mul:
      rec.finish(node, {out}, [pack, sva, svb, sca, scb](const tensor_list& g, const Node& n) {
        const Tensor av = sva.defined() ? conj_if_complex(sva.unpack(n)) : Tensor();
        const Tensor bv = svb.defined() ? conj_if_complex(svb.unpack(n)) : Tensor();
        const Tensor ga = bv.defined() ? g[0].mul(bv) : g[0].mul(scb);
        const Tensor gb = av.defined() ? g[0].mul(av) : g[0].mul(sca);
        return pack(ga, gb);
      });
      return;
    case BinaryOp::Div:
      rec.finish(node, {out}, [pack, sva, svb, sca, scb](const tensor_list& g, const Node& n) {
        const Tensor bv = svb.defined() ? conj_if_complex(svb.unpack(n)) : Tensor();
        const Tensor av = sva.defined() ? conj_if_complex(sva.unpack(n)) : Tensor();
        const Tensor ga = bv.defined() ? g[0].div(bv) : g[0].div(scb);
        Tensor gb;
        if (bv.defined()) {
          const Tensor num = av.defined() ? g[0].mul(av) : g[0].mul(sca);
          gb = num.div(bv.mul(bv)).neg();
        }
        return pack(ga, gb);
      });
      return;
    case BinaryOp::Pow:
      rec.finish(node, {out},
                 [pack, sva, svb, sca, scb, so = Recorder::save_output(out)](const tensor_list& g,
                                                                             const Node& n) {
                   Tensor ga, gb;
                   const Tensor av = sva.defined() ? sva.unpack(n) : Tensor();
                   if (av.defined()) {
                     if (svb.defined()) {
                       const Tensor e = svb.unpack(n);
                       ga = g[0].mul(e).mul(av.pow(e.sub(1)));
                       ga = where(e.eq(0), zeros_like(ga), ga);
                     } else if (scb.to_double() == 0 && !scb.is_complex()) {
                       ga = zeros_like(g[0]);
                     } else {
                       ga = g[0].mul(scb).mul(av.pow(scb.to_double() - 1));
                     }
                   }
                   if (svb.defined()) {
                     // d/de a^e = a^e log a; 0 where a == 0 and e >= 0 (PyTorch's convention).
                     const Tensor base = av.defined() ? av : full_like(g[0], sca);
                     const Tensor o = so.unpack(n);
                     gb = g[0].mul(o).mul(base.log());
                     const Tensor e = svb.unpack(n);
                     gb = where(base.eq(0).logical_and(e.ge(0)), zeros_like(gb), gb);
                   }
                   return pack(ga, gb);
                 });
      return;
    case BinaryOp::Maximum:
    case BinaryOp::Minimum: {
      const bool is_max = op == BinaryOp::Maximum;
      rec.finish(node, {out}, [pack, sva, svb, is_max](const tensor_list& g, const Node& n) {
        const Tensor av = sva.unpack(n), bv = svb.unpack(n);
        // Ties split the gradient evenly, as PyTorch.
        const Tensor half = g[0].div(2);
        const Tensor wins_a = is_max ? av.gt(bv) : av.lt(bv);
        const Tensor wins_b = is_max ? bv.gt(av) : bv.lt(av);
        const Tensor tie = av.eq(bv);
        const Tensor zero = zeros_like(g[0]);
        const Tensor ga = where(wins_a, g[0], where(tie, half, zero));
        const Tensor gb = where(wins_b, g[0], where(tie, half, zero));
        return pack(ga, gb);
      });
      return;
    }
    case BinaryOp::DivTrunc:
    case BinaryOp::DivFloor:
      // A rounded quotient is piecewise constant: zero gradients (PyTorch's DivBackward2).
      rec.finish("DivBackward2", {out}, [pack](const tensor_list& g, const Node&) {
        return pack(zeros_like(g[0]), zeros_like(g[0]));
      });
      return;
    case BinaryOp::Remainder:
    case BinaryOp::Fmod: {
      // a - b * q with q = floor(a / b) (remainder) or trunc(a / b) (fmod), q piecewise
      // constant: da = g, db = -g * q. A Scalar divisor is PyTorch's Backward0 overload.
      const bool floor = op == BinaryOp::Remainder;
      std::string n = floor ? "RemainderBackward" : "FmodBackward";
      n += has_b ? "1" : "0";
      rec.finish(n, {out}, [pack, sva, svb, floor](const tensor_list& g, const Node& nd) {
        Tensor gb;
        if (svb.defined()) {
          const Tensor av = sva.unpack(nd), bv = svb.unpack(nd);
          gb = g[0].mul(av.div(bv, floor ? "floor" : "trunc")).neg();
        }
        return pack(g[0], gb);
      });
      return;
    }
    case BinaryOp::Atan2:
      // d atan2(a, b) = (b da - a db) / (a^2 + b^2)
      rec.finish(node, {out}, [pack, sva, svb](const tensor_list& g, const Node& n) {
        const Tensor av = sva.unpack(n), bv = svb.unpack(n);
        const Tensor scale = g[0].div(av.mul(av).add(bv.mul(bv)));
        return pack(scale.mul(bv), scale.mul(av).neg());
      });
      return;
    default:
      TS_THROW(RuntimeError,
               "{}(): the derivative is not implemented (detach() the inputs or compute it under "
               "tessera::autograd::NoGradGuard)",
               name);
  }
}

UnaryDerivative unary_derivative(UnaryOp op) {
  using S = const SavedTensor&;
  switch (op) {
    case UnaryOp::Neg:
      return [](const Tensor& g, S, S, const Node&) { return g.neg(); };
    case UnaryOp::Abs:
      return [](const Tensor& g, S a, S, const Node& n) { return g.mul(a.unpack(n).sign()); };
    case UnaryOp::AbsComplex:
      return [](const Tensor& g, S a, S o, const Node& n) {
        // d|z|: g * z / |z| (0 at z == 0)
        const Tensor z = a.unpack(n), r = o.unpack(n);
        return where(r.eq(0), zeros_like(z), z.mul(g.div(r)));
      };
    case UnaryOp::Exp:
      return [](const Tensor& g, S, S o, const Node& n) {
        return g.mul(conj_if_complex(o.unpack(n)));
      };
    case UnaryOp::Expm1:
      return [](const Tensor& g, S, S o, const Node& n) {
        return g.mul(conj_if_complex(o.unpack(n)).add(1));
      };
    case UnaryOp::Log:
      return [](const Tensor& g, S a, S, const Node& n) {
        return g.div(conj_if_complex(a.unpack(n)));
      };
    case UnaryOp::Log1p:
      return [](const Tensor& g, S a, S, const Node& n) {
        return g.div(conj_if_complex(a.unpack(n)).add(1));
      };
    case UnaryOp::Log2:
      return [](const Tensor& g, S a, S, const Node& n) {
        return g.div(conj_if_complex(a.unpack(n)).mul(std::numbers::ln2));
      };
    case UnaryOp::Sqrt:
      return [](const Tensor& g, S, S o, const Node& n) {
        return g.div(conj_if_complex(o.unpack(n)).mul(2));
      };
    case UnaryOp::Rsqrt:
      return [](const Tensor& g, S, S o, const Node& n) {
        const Tensor r = conj_if_complex(o.unpack(n));
        return g.mul(r.mul(r).mul(r)).mul(-0.5);
      };
    case UnaryOp::Sin:
      return [](const Tensor& g, S a, S, const Node& n) {
        return g.mul(conj_if_complex(a.unpack(n)).cos());
      };
    case UnaryOp::Cos:
      return [](const Tensor& g, S a, S, const Node& n) {
        return g.mul(conj_if_complex(a.unpack(n)).sin()).neg();
      };
    case UnaryOp::Tanh:
      return [](const Tensor& g, S, S o, const Node& n) {
        const Tensor t = conj_if_complex(o.unpack(n));
        return g.mul(t.mul(t).neg().add(1));
      };
    case UnaryOp::Sigmoid:
      return [](const Tensor& g, S, S o, const Node& n) {
        const Tensor s = conj_if_complex(o.unpack(n));
        return g.mul(s.mul(s.neg().add(1)));
      };
    case UnaryOp::Erf:
      return [](const Tensor& g, S a, S, const Node& n) {
        const Tensor x = a.unpack(n);
        return g.mul(x.mul(x).neg().exp().mul(2.0 / std::sqrt(std::numbers::pi)));
      };
    case UnaryOp::Reciprocal:
      return [](const Tensor& g, S, S o, const Node& n) {
        const Tensor r = conj_if_complex(o.unpack(n));
        return g.mul(r.mul(r)).neg();
      };
    case UnaryOp::Square:
      return [](const Tensor& g, S a, S, const Node& n) {
        return g.mul(conj_if_complex(a.unpack(n)).mul(2));
      };
    case UnaryOp::Relu:
      return [](const Tensor& g, S, S o, const Node& n) {
        return where(o.unpack(n).gt(0), g, zeros_like(g));
      };
    case UnaryOp::GeluErf:
      return [](const Tensor& g, S a, S, const Node& n) {
        // d/dx x Phi(x) = Phi(x) + x phi(x)
        const Tensor x = a.unpack(n);
        const Tensor cdf = x.mul(M_SQRT1_2).erf().add(1).mul(0.5);
        const Tensor pdf = x.mul(x).mul(-0.5).exp().mul(0.5 * M_2_SQRTPI * M_SQRT1_2);
        return g.mul(cdf.add(x.mul(pdf)));
      };
    case UnaryOp::GeluTanh:
      return [](const Tensor& g, S a, S, const Node& n) {
        // 0.5 x (1 + tanh(u)), u = k (x + c x^3): 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 c x^2)
        const double k = M_2_SQRTPI * M_SQRT1_2, c = 0.044715;
        const Tensor x = a.unpack(n);
        const Tensor x2 = x.mul(x);
        const Tensor t = x.add(x2.mul(x).mul(c)).mul(k).tanh();
        const Tensor left = t.add(1).mul(0.5);
        const Tensor right = x.mul(0.5).mul(t.mul(t).neg().add(1)).mul(x2.mul(3 * c).add(1)).mul(k);
        return g.mul(left.add(right));
      };
    case UnaryOp::Silu:
      return [](const Tensor& g, S a, S, const Node& n) {
        const Tensor x = a.unpack(n);
        const Tensor s = x.sigmoid();
        return g.mul(s.mul(x.mul(s.neg().add(1)).add(1)));
      };
    case UnaryOp::Sign:
    case UnaryOp::Floor:
    case UnaryOp::Ceil:
    case UnaryOp::Round:
    case UnaryOp::Trunc:
      return [](const Tensor& g, S, S, const Node&) { return zeros_like(g); };
    case UnaryOp::Conj:
      return [](const Tensor& g, S, S, const Node&) { return g.conj(); };
    case UnaryOp::Angle:  // real inputs (record_unary rejects complex ones): 0 or pi, constant
      return [](const Tensor& g, S, S, const Node&) { return zeros_like(g); };
    default:
      return nullptr;
  }
}

void record_unary(Recorder& rec, UnaryOp op, std::string_view name, const Tensor& out,
                  const Tensor& a_before) {
  TS_CHECK(!(op == UnaryOp::Angle && a_before.is_complex()), RuntimeError,
           "angle(): the derivative for complex inputs is not implemented (detach() the "
           "input or compute it under tessera::autograd::NoGradGuard)");
  const UnaryDerivative f = unary_derivative(op);
  TS_CHECK(f != nullptr, RuntimeError,
           "{}(): the derivative is not implemented (detach() the input or compute it under "
           "tessera::autograd::NoGradGuard)",
           name);
  rec.finish(backward_name(name), {out},
             [sa = Recorder::save(a_before), so = Recorder::save_output(out), f](
                 const tensor_list& g, const Node& n) { return tensor_list{f(g[0], sa, so, n)}; });
}

void record_lerp(Recorder& rec, const Tensor& out, const Tensor& start, const Tensor& end,
                 const Tensor* weight, const Scalar& w) {
  const DimVector ss = start.sizes().vec(), es = end.sizes().vec();
  if (weight == nullptr) {
    // d start = g (1 - w), d end = g w
    rec.finish("LerpBackward0", {out}, [ss, es, w](const tensor_list& g, const Node&) {
      const Tensor gw = g[0].mul(w);
      return tensor_list{sum_to(g[0].sub(gw), ss), sum_to(gw, es)};
    });
    return;
  }
  // ... and d weight = g (end - start)
  rec.finish(
      "LerpBackward1", {out},
      [ss, es, ws = weight->sizes().vec(), s0 = Recorder::save(start), s1 = Recorder::save(end),
       s2 = Recorder::save(*weight)](const tensor_list& g, const Node& n) {
        const Tensor wv = s2.unpack(n);
        const Tensor gw = g[0].mul(wv);
        return tensor_list{sum_to(g[0].sub(gw), ss), sum_to(gw, es),
                           sum_to(g[0].mul(s1.unpack(n).sub(s0.unpack(n))), ws)};
      });
}

void record_addc(Recorder& rec, bool div, const Tensor& out, const Tensor& self, const Tensor& t1,
                 const Tensor& t2, const Scalar& value) {
  const DimVector s0 = self.sizes().vec(), s1 = t1.sizes().vec(), s2 = t2.sizes().vec();
  rec.finish(div ? "AddcdivBackward0" : "AddcmulBackward0", {out},
             [div, value, s0, s1, s2, a = Recorder::save(t1), b = Recorder::save(t2)](
                 const tensor_list& g, const Node& n) {
               const Tensor x = conj_if_complex(a.unpack(n)), y = conj_if_complex(b.unpack(n));
               const Tensor gv = g[0].mul(value);
               // addcmul: d t1 = g v t2, d t2 = g v t1
               // addcdiv: d t1 = g v / t2, d t2 = -g v t1 / t2^2
               const Tensor g1 = div ? gv.div(y) : gv.mul(y);
               const Tensor g2 = div ? gv.mul(x).div(y.mul(y)).neg() : gv.mul(x);
               return tensor_list{sum_to(g[0], s0), sum_to(g1, s1), sum_to(g2, s2)};
             });
}

void record_softplus(Recorder& rec, const Tensor& out, const Tensor& a, const Scalar& beta,
                     const Scalar& threshold) {
  rec.finish("SoftplusBackward0", {out},
             [beta, threshold, sa = Recorder::save(a)](const tensor_list& g, const Node& n) {
               // d/dx log(1 + e^(beta x)) / beta = sigmoid(beta x); 1 past the threshold.
               const Tensor bx = sa.unpack(n).mul(beta);
               return tensor_list{where(bx.gt(threshold), g[0], g[0].mul(bx.sigmoid()))};
             });
}

}  // namespace tessera
