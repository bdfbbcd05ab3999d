// Tessera against PyTorch 1.13 / NumPy: every case make_cases.py writes is rebuilt here with
// Tessera's view ops, run through the op table below, and compared (oracle_cases.h).
//
// One test per op family. A failing case prints its id (op/dtypes/shape/layout/args), the
// dtype and shape, the max error and where; each family ends with a per-op tally.
// TESSERA_ORACLE_FILTER=<substring of the case id> runs a subset, TESSERA_ORACLE_SKIP=<s1>,<s2>
// leaves out cases whose id contains one of the substrings (to get past a crash while
// debugging); TESSERA_ORACLE_MAX_PRINT (default 400) caps the printed failures per family.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "oracle/oracle_cases.h"
#include "tessera/autograd/autograd.h"

namespace tessera::oracle {
namespace {

using Json = nlohmann::json;
using Inputs = std::vector<Tensor>;
using Outputs = std::vector<Tensor>;
using OpFn = std::function<Outputs(const Inputs&, const Json&)>;

// ---- argument helpers (names and defaults as in make_cases.py's OPS table) -----------------

Scalar sarg(const Json& a, const char* k, Scalar dflt = 1) {
  return a.contains(k) ? parse_scalar(a[k]) : dflt;
}
bool barg(const Json& a, const char* k, bool dflt = false) {
  return a.contains(k) ? a[k].get<bool>() : dflt;
}
int64_t iarg(const Json& a, const char* k) {
  return a.at(k).get<int64_t>();
}
std::optional<int64_t> oiarg(const Json& a, const char* k) {
  if (!a.contains(k) || a[k].is_null()) return std::nullopt;
  return a[k].get<int64_t>();
}
std::optional<Scalar> osarg(const Json& a, const char* k) {
  if (!a.contains(k) || a[k].is_null()) return std::nullopt;
  return parse_scalar(a[k]);
}
// "dim": absent/null (all dims), an int, or a list.
DimVector dims(const Json& a, const char* k = "dim") {
  DimVector d;
  if (!a.contains(k) || a[k].is_null()) return d;
  if (a[k].is_number()) return {a[k].get<int64_t>()};
  for (const auto& v : a[k]) d.push_back(v.get<int64_t>());
  return d;
}
std::optional<ScalarType> dtarg(const Json& a) {
  if (!a.contains("dtype") || a["dtype"].is_null()) return std::nullopt;
  return parse_dtype(a["dtype"]);
}
std::optional<std::string_view> rounding(const Json& a) {
  if (!a.contains("rounding_mode") || a["rounding_mode"].is_null()) return std::nullopt;
  return a["rounding_mode"].get_ref<const std::string&>();
}
Outputs two(std::tuple<Tensor, Tensor> t) {
  return {std::get<0>(t), std::get<1>(t)};
}

// In-place ops: the result is the updated operand (a clone unless args.clone is false).
// `apply(out, other)` is called with other a Tensor (x[1]) or the Scalar args.other.
template <class Apply>
OpFn inplace(Apply apply) {
  return [apply](const Inputs& x, const Json& a) -> Outputs {
    Tensor out = barg(a, "clone", true) ? x[0].clone() : x[0];
    if (x.size() > 1)
      apply(out, x[1]);
    else
      apply(out, parse_scalar(a.at("other")));
    return {out};
  };
}

// ---- the op table --------------------------------------------------------------------------

const std::unordered_map<std::string, OpFn>& ops() {
  static auto* table = new std::unordered_map<std::string, OpFn>{
      // binary arithmetic
      {"add", [](auto& x, auto& a) -> Outputs { return {add(x[0], x[1], sarg(a, "alpha"))}; }},
      {"sub", [](auto& x, auto& a) -> Outputs { return {sub(x[0], x[1], sarg(a, "alpha"))}; }},
      {"mul", [](auto& x, auto&) -> Outputs { return {mul(x[0], x[1])}; }},
      {"div", [](auto& x, auto& a) -> Outputs { return {div(x[0], x[1], rounding(a))}; }},
      {"remainder", [](auto& x, auto&) -> Outputs { return {remainder(x[0], x[1])}; }},
      {"fmod", [](auto& x, auto&) -> Outputs { return {fmod(x[0], x[1])}; }},
      {"pow", [](auto& x, auto&) -> Outputs { return {pow(x[0], x[1])}; }},
      {"maximum", [](auto& x, auto&) -> Outputs { return {maximum(x[0], x[1])}; }},
      {"minimum", [](auto& x, auto&) -> Outputs { return {minimum(x[0], x[1])}; }},
      {"atan2", [](auto& x, auto&) -> Outputs { return {atan2(x[0], x[1])}; }},
      // tensor-scalar forms
      {"add_scalar",
       [](auto& x, auto& a) -> Outputs { return {x[0].add(sarg(a, "other"), sarg(a, "alpha"))}; }},
      {"sub_scalar",
       [](auto& x, auto& a) -> Outputs { return {x[0].sub(sarg(a, "other"), sarg(a, "alpha"))}; }},
      {"mul_scalar", [](auto& x, auto& a) -> Outputs { return {x[0].mul(sarg(a, "other"))}; }},
      {"div_scalar",
       [](auto& x, auto& a) -> Outputs { return {x[0].div(sarg(a, "other"), rounding(a))}; }},
      {"remainder_scalar",
       [](auto& x, auto& a) -> Outputs { return {x[0].remainder(sarg(a, "other"))}; }},
      {"pow_scalar", [](auto& x, auto& a) -> Outputs { return {pow(x[0], sarg(a, "other"))}; }},
      {"rpow_scalar", [](auto& x, auto& a) -> Outputs { return {pow(sarg(a, "other"), x[0])}; }},
      {"rsub_scalar", [](auto& x, auto& a) -> Outputs { return {sarg(a, "other") - x[0]}; }},
      {"rdiv_scalar", [](auto& x, auto& a) -> Outputs { return {sarg(a, "other") / x[0]}; }},
      {"eq_scalar", [](auto& x, auto& a) -> Outputs { return {x[0].eq(sarg(a, "other"))}; }},
      {"lt_scalar", [](auto& x, auto& a) -> Outputs { return {x[0].lt(sarg(a, "other"))}; }},
      // in place
      {"add_", inplace([](const Tensor& t, const auto& o) { t.add_(o); })},
      {"sub_", inplace([](const Tensor& t, const auto& o) { t.sub_(o); })},
      {"mul_", inplace([](const Tensor& t, const auto& o) { t.mul_(o); })},
      {"div_", inplace([](const Tensor& t, const auto& o) { t.div_(o); })},
      // comparisons, logical, bitwise
      {"eq", [](auto& x, auto&) -> Outputs { return {eq(x[0], x[1])}; }},
      {"ne", [](auto& x, auto&) -> Outputs { return {ne(x[0], x[1])}; }},
      {"lt", [](auto& x, auto&) -> Outputs { return {lt(x[0], x[1])}; }},
      {"le", [](auto& x, auto&) -> Outputs { return {le(x[0], x[1])}; }},
      {"gt", [](auto& x, auto&) -> Outputs { return {gt(x[0], x[1])}; }},
      {"ge", [](auto& x, auto&) -> Outputs { return {ge(x[0], x[1])}; }},
      {"logical_and", [](auto& x, auto&) -> Outputs { return {logical_and(x[0], x[1])}; }},
      {"logical_or", [](auto& x, auto&) -> Outputs { return {logical_or(x[0], x[1])}; }},
      {"logical_xor", [](auto& x, auto&) -> Outputs { return {logical_xor(x[0], x[1])}; }},
      {"logical_not", [](auto& x, auto&) -> Outputs { return {logical_not(x[0])}; }},
      {"bitwise_and", [](auto& x, auto&) -> Outputs { return {bitwise_and(x[0], x[1])}; }},
      {"bitwise_or", [](auto& x, auto&) -> Outputs { return {bitwise_or(x[0], x[1])}; }},
      {"bitwise_xor", [](auto& x, auto&) -> Outputs { return {bitwise_xor(x[0], x[1])}; }},
      {"bitwise_not", [](auto& x, auto&) -> Outputs { return {bitwise_not(x[0])}; }},
      {"isnan", [](auto& x, auto&) -> Outputs { return {isnan(x[0])}; }},
      {"isinf", [](auto& x, auto&) -> Outputs { return {isinf(x[0])}; }},
      {"isfinite", [](auto& x, auto&) -> Outputs { return {isfinite(x[0])}; }},
      // selection
      {"where", [](auto& x, auto&) -> Outputs { return {where(x[0], x[1], x[2])}; }},
      {"where_scalar",
       [](auto& x, auto& a) -> Outputs { return {where(x[0], x[1], sarg(a, "other"))}; }},
      {"clamp",
       [](auto& x, auto& a) -> Outputs { return {clamp(x[0], osarg(a, "min"), osarg(a, "max"))}; }},
      {"clamp_tensor",
       [](auto& x, auto&) -> Outputs {
         return {clamp(x[0], std::optional<Tensor>(x[1]), std::optional<Tensor>(x[2]))};
       }},
      {"masked_fill",
       [](auto& x, auto& a) -> Outputs { return {masked_fill(x[0], x[1], sarg(a, "value"))}; }},
      // unary math
      {"abs", [](auto& x, auto&) -> Outputs { return {abs(x[0])}; }},
      {"neg", [](auto& x, auto&) -> Outputs { return {neg(x[0])}; }},
      {"sign", [](auto& x, auto&) -> Outputs { return {sign(x[0])}; }},
      {"exp", [](auto& x, auto&) -> Outputs { return {exp(x[0])}; }},
      {"expm1", [](auto& x, auto&) -> Outputs { return {expm1(x[0])}; }},
      {"log", [](auto& x, auto&) -> Outputs { return {log(x[0])}; }},
      {"log1p", [](auto& x, auto&) -> Outputs { return {log1p(x[0])}; }},
      {"log2", [](auto& x, auto&) -> Outputs { return {log2(x[0])}; }},
      {"sqrt", [](auto& x, auto&) -> Outputs { return {sqrt(x[0])}; }},
      {"rsqrt", [](auto& x, auto&) -> Outputs { return {rsqrt(x[0])}; }},
      {"sin", [](auto& x, auto&) -> Outputs { return {sin(x[0])}; }},
      {"cos", [](auto& x, auto&) -> Outputs { return {cos(x[0])}; }},
      {"tanh", [](auto& x, auto&) -> Outputs { return {tanh(x[0])}; }},
      {"sigmoid", [](auto& x, auto&) -> Outputs { return {sigmoid(x[0])}; }},
      {"erf", [](auto& x, auto&) -> Outputs { return {erf(x[0])}; }},
      {"reciprocal", [](auto& x, auto&) -> Outputs { return {reciprocal(x[0])}; }},
      {"square", [](auto& x, auto&) -> Outputs { return {square(x[0])}; }},
      {"floor", [](auto& x, auto&) -> Outputs { return {floor(x[0])}; }},
      {"ceil", [](auto& x, auto&) -> Outputs { return {ceil(x[0])}; }},
      {"round", [](auto& x, auto&) -> Outputs { return {round(x[0])}; }},
      {"trunc", [](auto& x, auto&) -> Outputs { return {trunc(x[0])}; }},
      {"relu", [](auto& x, auto&) -> Outputs { return {relu(x[0])}; }},
      {"gelu",
       [](auto& x, auto& a) -> Outputs {
         return {gelu(x[0], a.contains("approximate") ? a["approximate"].template get<std::string>()
                                                      : std::string("none"))};
       }},
      {"silu", [](auto& x, auto&) -> Outputs { return {silu(x[0])}; }},
      {"softplus",
       [](auto& x, auto& a) -> Outputs {
         return {softplus(x[0], sarg(a, "beta", 1), sarg(a, "threshold", 20))};
       }},
      {"lerp", [](auto& x, auto& a) -> Outputs { return {lerp(x[0], x[1], sarg(a, "weight"))}; }},
      {"lerp_tensor", [](auto& x, auto&) -> Outputs { return {lerp(x[0], x[1], x[2])}; }},
      {"addcmul",
       [](auto& x, auto& a) -> Outputs { return {addcmul(x[0], x[1], x[2], sarg(a, "value"))}; }},
      {"addcdiv",
       [](auto& x, auto& a) -> Outputs { return {addcdiv(x[0], x[1], x[2], sarg(a, "value"))}; }},
      // complex
      {"real", [](auto& x, auto&) -> Outputs { return {real(x[0])}; }},
      {"imag", [](auto& x, auto&) -> Outputs { return {imag(x[0])}; }},
      {"conj", [](auto& x, auto&) -> Outputs { return {conj(x[0])}; }},
      {"angle", [](auto& x, auto&) -> Outputs { return {angle(x[0])}; }},
      {"polar", [](auto& x, auto&) -> Outputs { return {polar(x[0], x[1])}; }},
      {"complex", [](auto& x, auto&) -> Outputs { return {complex(x[0], x[1])}; }},
      {"view_as_real", [](auto& x, auto&) -> Outputs { return {view_as_real(x[0])}; }},
      // conversion
      {"to", [](auto& x, auto& a) -> Outputs { return {x[0].to(*dtarg(a))}; }},
      // reductions
      {"sum",
       [](auto& x, auto& a) -> Outputs {
         return {sum(x[0], dims(a), barg(a, "keepdim"), dtarg(a))};
       }},
      {"mean",
       [](auto& x, auto& a) -> Outputs {
         return {mean(x[0], dims(a), barg(a, "keepdim"), dtarg(a))};
       }},
      {"prod",
       [](auto& x, auto& a) -> Outputs {
         return {prod(x[0], oiarg(a, "dim"), barg(a, "keepdim"), dtarg(a))};
       }},
      {"amax", [](auto& x, auto& a) -> Outputs { return {amax(x[0], dims(a), barg(a, "keepdim"))}; }},
      {"amin", [](auto& x, auto& a) -> Outputs { return {amin(x[0], dims(a), barg(a, "keepdim"))}; }},
      {"max_all", [](auto& x, auto&) -> Outputs { return {x[0].max()}; }},
      {"min_all", [](auto& x, auto&) -> Outputs { return {x[0].min()}; }},
      {"max_dim",
       [](auto& x, auto& a) -> Outputs { return two(max(x[0], iarg(a, "dim"), barg(a, "keepdim"))); }},
      {"min_dim",
       [](auto& x, auto& a) -> Outputs { return two(min(x[0], iarg(a, "dim"), barg(a, "keepdim"))); }},
      {"argmax",
       [](auto& x, auto& a) -> Outputs {
         return {argmax(x[0], oiarg(a, "dim"), barg(a, "keepdim"))};
       }},
      {"argmin",
       [](auto& x, auto& a) -> Outputs {
         return {argmin(x[0], oiarg(a, "dim"), barg(a, "keepdim"))};
       }},
      {"var",
       [](auto& x, auto& a) -> Outputs {
         return {var(x[0], dims(a), a.contains("correction") ? parse_double(a["correction"]) : 1.0,
                     barg(a, "keepdim"))};
       }},
      {"std",
       [](auto& x, auto& a) -> Outputs {
         return {tessera::std(x[0], dims(a),
                              a.contains("correction") ? parse_double(a["correction"]) : 1.0,
                              barg(a, "keepdim"))};
       }},
      {"norm",
       [](auto& x, auto& a) -> Outputs {
         return {norm(x[0], parse_scalar(a.at("p")), dims(a), barg(a, "keepdim"))};
       }},
      {"logsumexp",
       [](auto& x, auto& a) -> Outputs { return {logsumexp(x[0], dims(a), barg(a, "keepdim"))}; }},
      {"softmax",
       [](auto& x, auto& a) -> Outputs { return {softmax(x[0], iarg(a, "dim"), dtarg(a))}; }},
      {"log_softmax",
       [](auto& x, auto& a) -> Outputs { return {log_softmax(x[0], iarg(a, "dim"), dtarg(a))}; }},
      {"cumsum", [](auto& x, auto& a) -> Outputs { return {cumsum(x[0], iarg(a, "dim"), dtarg(a))}; }},
      {"cumprod",
       [](auto& x, auto& a) -> Outputs { return {cumprod(x[0], iarg(a, "dim"), dtarg(a))}; }},
      {"all", [](auto& x, auto& a) -> Outputs { return {all(x[0], dims(a), barg(a, "keepdim"))}; }},
      {"any", [](auto& x, auto& a) -> Outputs { return {any(x[0], dims(a), barg(a, "keepdim"))}; }},
      {"count_nonzero", [](auto& x, auto& a) -> Outputs { return {count_nonzero(x[0], dims(a))}; }},
      {"median_all", [](auto& x, auto&) -> Outputs { return {median(x[0])}; }},
      {"median_dim",
       [](auto& x, auto& a) -> Outputs {
         return two(median(x[0], iarg(a, "dim"), barg(a, "keepdim")));
       }},
      // shape and indexing
      {"cat", [](auto& x, auto& a) -> Outputs { return {cat(x, iarg(a, "dim"))}; }},
      {"stack", [](auto& x, auto& a) -> Outputs { return {stack(x, iarg(a, "dim"))}; }},
      {"split",
       [](auto& x, auto& a) -> Outputs {
         if (a.at("split").is_number()) return split(x[0], iarg(a, "split"), iarg(a, "dim"));
         return split(x[0], IntArrayRef(dims(a, "split")), iarg(a, "dim"));
       }},
      {"chunk",
       [](auto& x, auto& a) -> Outputs { return chunk(x[0], iarg(a, "chunks"), iarg(a, "dim")); }},
      {"index_select",
       [](auto& x, auto& a) -> Outputs { return {index_select(x[0], iarg(a, "dim"), x[1])}; }},
      {"gather", [](auto& x, auto& a) -> Outputs { return {gather(x[0], iarg(a, "dim"), x[1])}; }},
      {"scatter",
       [](auto& x, auto& a) -> Outputs { return {scatter(x[0], iarg(a, "dim"), x[1], x[2])}; }},
      {"scatter_value",
       [](auto& x, auto& a) -> Outputs {
         return {scatter(x[0], iarg(a, "dim"), x[1], sarg(a, "value"))};
       }},
      {"scatter_add",
       [](auto& x, auto& a) -> Outputs { return {scatter_add(x[0], iarg(a, "dim"), x[1], x[2])}; }},
      {"index_add",
       [](auto& x, auto& a) -> Outputs {
         return {index_add(x[0], iarg(a, "dim"), x[1], x[2], sarg(a, "alpha"))};
       }},
      {"index_put",
       [](auto& x, auto& a) -> Outputs {
         std::vector<std::optional<Tensor>> idx;
         const DimVector none_at = dims(a, "none_at");
         size_t next = 2;  // index tensors follow self and values; None slots have none
         for (int64_t i = 0; i < iarg(a, "nidx"); ++i) {
           const bool none = std::find(none_at.begin(), none_at.end(), i) != none_at.end();
           idx.push_back(none ? std::nullopt : std::optional<Tensor>(x.at(next++)));
         }
         return {index_put(x[0], idx, x[1], barg(a, "accumulate"))};
       }},
      {"masked_select", [](auto& x, auto&) -> Outputs { return {masked_select(x[0], x[1])}; }},
      {"nonzero", [](auto& x, auto&) -> Outputs { return {nonzero(x[0])}; }},
      {"topk",
       [](auto& x, auto& a) -> Outputs {
         return two(topk(x[0], iarg(a, "k"), iarg(a, "dim"), barg(a, "largest"), true));
       }},
      {"sort",
       [](auto& x, auto& a) -> Outputs {
         return two(sort(x[0], iarg(a, "dim"), barg(a, "descending"), true));
       }},
      {"argsort",
       [](auto& x, auto& a) -> Outputs {
         return {argsort(x[0], iarg(a, "dim"), barg(a, "descending"), true)};
       }},
      {"unique",
       [](auto& x, auto& a) -> Outputs {
         auto [values, inverse, counts] = unique(x[0], true, barg(a, "inverse"), barg(a, "counts"));
         Outputs out{values};
         if (barg(a, "inverse")) out.push_back(inverse);
         if (barg(a, "counts")) out.push_back(counts);
         return out;
       }},
      {"tril", [](auto& x, auto& a) -> Outputs { return {tril(x[0], iarg(a, "diagonal"))}; }},
      {"triu", [](auto& x, auto& a) -> Outputs { return {triu(x[0], iarg(a, "diagonal"))}; }},
      {"one_hot", [](auto& x, auto& a) -> Outputs { return {one_hot(x[0], iarg(a, "num_classes"))}; }},
      {"embedding", [](auto& x, auto&) -> Outputs { return {embedding(x[0], x[1])}; }},
      // matrix
      {"mm", [](auto& x, auto&) -> Outputs { return {mm(x[0], x[1])}; }},
      {"bmm", [](auto& x, auto&) -> Outputs { return {bmm(x[0], x[1])}; }},
      {"matmul", [](auto& x, auto&) -> Outputs { return {matmul(x[0], x[1])}; }},
      {"dot", [](auto& x, auto&) -> Outputs { return {dot(x[0], x[1])}; }},
      {"outer", [](auto& x, auto&) -> Outputs { return {outer(x[0], x[1])}; }},
      {"addmm",
       [](auto& x, auto& a) -> Outputs {
         return {addmm(x[0], x[1], x[2], sarg(a, "beta"), sarg(a, "alpha"))};
       }},
      {"mv", [](auto& x, auto&) -> Outputs { return {mv(x[0], x[1])}; }},
      {"addmv",
       [](auto& x, auto& a) -> Outputs {
         return {addmv(x[0], x[1], x[2], sarg(a, "beta"), sarg(a, "alpha"))};
       }},
      {"vdot", [](auto& x, auto&) -> Outputs { return {vdot(x[0], x[1])}; }},
      // views and reductions the autograd family differentiates
      {"index",
       [](auto& x, auto&) -> Outputs {
         return {index(x[0], std::vector<std::optional<Tensor>>(x.begin() + 1, x.end()))};
       }},
      {"unfold",
       [](auto& x, auto& a) -> Outputs {
         return {x[0].unfold(iarg(a, "dim"), iarg(a, "size"), iarg(a, "step"))};
       }},
      {"diagonal",
       [](auto& x, auto& a) -> Outputs {
         return {x[0].diagonal(iarg(a, "offset"), iarg(a, "dim1"), iarg(a, "dim2"))};
       }},
      {"as_strided",
       [](auto& x, auto& a) -> Outputs {
         return {x[0].as_strided(dims(a, "size"), dims(a, "stride"), iarg(a, "offset"))};
       }},
      {"view_as_complex", [](auto& x, auto&) -> Outputs { return {view_as_complex(x[0])}; }},
      {"var_mean_lin",
       [](auto& x, auto& a) -> Outputs {
         auto [v, m] = var_mean(x[0], dims(a),
                                a.contains("correction") ? parse_double(a["correction"]) : 1.0,
                                barg(a, "keepdim"));
         return {v.add(m.mul(2))};
       }},
      // in-place ops on views of a tensor with history (make_cases.py's helpers)
      {"setitem_mul",
       [](auto& x, auto& a) -> Outputs {
         Tensor t = x[0].mul(1);
         t[iarg(a, "row")].mul_(x[1]);
         return {t};
       }},
      {"chain_add",
       [](auto& x, auto&) -> Outputs {
         Tensor t = x[0].mul(1);
         t.narrow(0, 1, 2).select(1, 0).add_(x[1]);
         return {t};
       }},
      {"siblings_mul",
       [](auto& x, auto&) -> Outputs {
         Tensor t = x[0].mul(1);
         const Tensor first = t.slice(0, 0, 3), second = t.slice(0, 1, 4);
         second.mul_(x[1]);
         return {first.mul(1)};
       }},
      {"copy_into_zeros",
       [](auto& x, auto&) -> Outputs {
         Tensor z = zeros({x[0].size(0) + 2, x[0].size(1)}, x[0].dtype());
         z.narrow(0, 1, x[0].size(0)).copy_(x[0].exp());
         return {z};
       }},
      {"transposed_twice",
       [](auto& x, auto&) -> Outputs {
         Tensor t = x[0].mul(1);
         t.t()[1].add_(x[1]);
         t.t().select(1, 2).mul_(x[1].sum());
         return {t};
       }},
  };
  // "grad_<op>": the gradients of <op>'s first output (seeded with the last input) with
  // respect to the listed inputs (all when empty), as make_cases.py's GRAD_OPS.
  static const bool grads_added = [] {
    const std::vector<std::pair<std::vector<std::string>, std::vector<size_t>>> groups = {
        {{"exp",
          "expm1",
          "log",
          "log1p",
          "log2",
          "sqrt",
          "rsqrt",
          "sin",
          "cos",
          "tanh",
          "sigmoid",
          "erf",
          "reciprocal",
          "abs",
          "neg",
          "square",
          "relu",
          "gelu",
          "silu",
          "clamp",
          "sum",
          "mean",
          "amax",
          "amin",
          "max_dim",
          "var",
          "std",
          "norm",
          "logsumexp",
          "softmax",
          "log_softmax",
          "index_select",
          "gather",
          "embedding",
          "topk",
          "sort",
          "tril",
          "triu",
          "masked_fill",
          "mul_scalar",
          "pow_scalar",
          "prod",
          "cumsum",
          "cumprod",
          "median_all",
          "median_dim",
          "var_mean_lin",
          "masked_select",
          "scatter_value",
          "index",
          "softplus",
          "remainder_scalar",
          "unfold",
          "diagonal",
          "as_strided",
          "view_as_real",
          "view_as_complex",
          "copy_into_zeros"},
         {0}},
        {{"add",       "sub",          "mul",
          "div",       "pow",          "maximum",
          "minimum",   "mm",           "bmm",
          "matmul",    "dot",          "outer",
          "lerp",      "atan2",        "remainder",
          "fmod",      "index_put",    "setitem_mul",
          "chain_add", "siblings_mul", "transposed_twice",
          "mv",        "vdot"},
         {0, 1}},
        {{"scatter", "scatter_add", "index_add"}, {0, 2}},
        {{"where"}, {1, 2}},
        {{"addmm", "addmv", "lerp_tensor", "addcmul", "addcdiv"}, {0, 1, 2}},
        {{"cat", "stack"}, {}},
    };
    for (const auto& [names, diff] : groups) {
      for (const std::string& name : names) {
        const OpFn base = table->at(name);
        (*table)["grad_" + name] = [base, diff](const Inputs& x, const Json& a) -> Outputs {
          Inputs ins(x.begin(), x.end() - 1);
          std::vector<size_t> idx = diff;
          if (idx.empty())
            for (size_t i = 0; i < ins.size(); ++i) idx.push_back(i);
          autograd::tensor_list wrt;
          for (size_t i : idx) {
            ins[i] = ins[i].detach().requires_grad_();
            wrt.push_back(ins[i]);
          }
          const Tensor out = base(ins, a).at(0);
          Outputs g = autograd::grad({out}, wrt, {x.back()}, std::nullopt, false, true);
          for (size_t k = 0; k < g.size(); ++k)
            if (!g[k].defined()) g[k] = zeros_like(wrt[k]);
          return g;
        };
      }
    }
    return true;
  }();
  (void)grads_added;
  return *table;
}

// ---- running a family ----------------------------------------------------------------------

std::string shape_string(IntArrayRef s) {
  return fmt::format("[{}]", fmt::join(s, ", "));
}

std::string describe(const Case& c) {
  std::string in;
  for (const auto& i : c.inputs)
    in += fmt::format("{}{}{} ", i.dtype, shape_string(i.shape), i.recipe.empty() ? "" : "*");
  return fmt::format("[{}] op={} inputs={}(* = view) oracle={}", c.id, c.op, in, c.oracle);
}

// The case being run, so that a crash names it before the process dies.
const Case* g_current = nullptr;

void on_crash(int sig) {
  if (g_current) {
    const char head[] = "\noracle: crashed (signal) while running case ";
    (void)!::write(2, head, sizeof(head) - 1);
    (void)!::write(2, g_current->id.data(), g_current->id.size());
    (void)!::write(2, "\n", 1);
  }
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

// Runs one case; returns "" on success, else why it failed.
std::string run_case(const CaseSet& set, const Case& c) {
  g_current = &c;
  static const bool installed = [] {
    std::signal(SIGSEGV, on_crash);
    std::signal(SIGBUS, on_crash);
    std::signal(SIGFPE, on_crash);
    std::signal(SIGABRT, on_crash);
    return true;
  }();
  (void)installed;
  const auto it = ops().find(c.op);
  if (it == ops().end()) return "no Tessera entry for this op in the oracle table";
  Inputs x;
  try {
    for (const auto& spec : c.inputs) x.push_back(set.make_input(spec));
  } catch (const std::exception& e) {
    return fmt::format("building the inputs threw: {}", e.what());
  }
  Outputs got;
  try {
    got = it->second(x, c.args);
  } catch (const Error& e) {
    if (c.error) return "";
    return fmt::format("threw {} but PyTorch returns a result", e.what());
  } catch (const std::exception& e) {
    return fmt::format("threw a non-tessera exception: {}", e.what());
  }
  if (c.error) {
    std::string shapes;
    for (const auto& t : got) shapes += fmt::format("{}{} ", t.dtype(), shape_string(t.sizes()));
    return fmt::format("returned {}but PyTorch raises {}", shapes, *c.error);
  }
  if (got.size() != c.outputs.size())
    return fmt::format("returned {} tensors, expected {}", got.size(), c.outputs.size());
  for (size_t k = 0; k < got.size(); ++k) {
    std::string why;
    try {
      why = compare_output(set, c.outputs[k], got[k]);
    } catch (const std::exception& e) {
      why = fmt::format("reading the result threw: {}", e.what());
    }
    if (!why.empty())
      return fmt::format("output {} ({}{}): {}", k, c.outputs[k].dtype,
                         shape_string(c.outputs[k].shape), why);
  }
  return "";
}

void run_family(const std::string& family) {
  const CaseSet* set = nullptr;
  try {
    set = &CaseSet::get();
  } catch (const std::exception& e) {
    FAIL() << "the oracle script failed: " << e.what();
  }
  const char* filter = std::getenv("TESSERA_ORACLE_FILTER");
  std::vector<std::string> skips;
  if (const char* env = std::getenv("TESSERA_ORACLE_SKIP")) {
    std::string s = env;
    for (size_t pos = 0; pos <= s.size();) {
      const size_t comma = std::min(s.find(',', pos), s.size());
      if (comma > pos) skips.push_back(s.substr(pos, comma - pos));
      pos = comma + 1;
    }
  }
  const char* max_print_env = std::getenv("TESSERA_ORACLE_MAX_PRINT");
  const int64_t max_print = max_print_env ? std::atoll(max_print_env) : 400;
  std::map<std::string, std::pair<int64_t, int64_t>> tally;  // op -> (passed, failed)
  int64_t failed = 0, run = 0;
  for (const auto& c : set->cases()) {
    if (c.family != family) continue;
    if (filter && c.id.find(filter) == std::string::npos) continue;
    if (std::any_of(skips.begin(), skips.end(),
                    [&](const std::string& k) { return c.id.find(k) != std::string::npos; }))
      continue;
    ++run;
    const std::string why = run_case(*set, c);
    if (why.empty()) {
      ++tally[c.op].first;
      continue;
    }
    ++tally[c.op].second;
    if (++failed <= max_print) ADD_FAILURE() << describe(c) << "\n    " << why;
  }
  std::string summary;
  for (const auto& [op, pf] : tally)
    if (pf.second) summary += fmt::format("  {}: {} failed, {} passed\n", op, pf.second, pf.first);
  std::printf("oracle family '%s': %lld cases, %lld failed\n%s", family.c_str(),
              static_cast<long long>(run), static_cast<long long>(failed), summary.c_str());
  EXPECT_EQ(failed, 0) << "in family '" << family << "' (per-op tally above)";
  EXPECT_GT(run, 0) << "no cases for family '" << family << "'";
}

TEST(Oracle, CasesGenerated) {
  const CaseSet& set = CaseSet::get();
  EXPECT_GT(set.cases().size(), 1000u);
  std::printf("oracle: %zu cases in %s; %zu combinations PyTorch 1.13 cannot compute\n",
              set.cases().size(), set.directory().c_str(), set.skipped().size());
  // Every op the script uses has an entry in the table.
  for (const auto& c : set.cases()) ASSERT_TRUE(ops().count(c.op)) << c.op;
}

TEST(Oracle, Pointwise) {
  run_family("pointwise");
}
TEST(Oracle, Promotion) {
  run_family("promotion");
}
TEST(Oracle, Conversion) {
  run_family("conversion");
}
TEST(Oracle, Reduction) {
  run_family("reduce");
}
TEST(Oracle, ShapeAndIndex) {
  run_family("shape");
}
TEST(Oracle, Matrix) {
  run_family("matrix");
}
TEST(Oracle, Autograd) {
  run_family("autograd");
}

}  // namespace
}  // namespace tessera::oracle
