"""The oracle case lists, one function per op family (make_cases.py writes them).

Every function takes the Cases writer `c` and calls c.add(family, op, inputs, args, tag).
Inputs come from make() (a random base tensor plus a view recipe: contiguous, transposed,
expanded or sliced) or fixed() (a given tensor). Keep the total blob under ~100 MB.
"""

import math

import torch

from make_cases import ALL, BIG, COMPLEX, FLOATS, INTS, SIZES, fixed, make

SMALL_SHAPES = [[0], [1], [3], [7], [17], [3, 7], [17, 5], [2, 3, 5], [4, 0]]


def big(c, dt, which="contig"):
    """A 1000003-element operand. float32 and bfloat16 share one base of 2n+1 elements for the
    contiguous operand, a second contiguous operand (`other`) and a stride-2 one (`sliced`)."""
    from make_cases import Inp
    if dt not in ("float32", "bfloat16"):
        key = (dt, "plain")
        if key not in c.shared:
            c.shared[key] = make(c.gen, dt, [BIG])
        return c.shared[key]
    if dt not in c.shared:
        c.shared[dt] = c.gen.data(dt, [2 * BIG + 1])
    base = c.shared[dt]
    start, end, step = {"contig": (0, BIG, 1), "other": (BIG + 1, 2 * BIG + 1, 1),
                        "sliced": (1, None, 2)}[which]
    return Inp(base, [{"op": "slice", "dim": 0, "start": start, "end": end, "step": step}])


def layouts_for(shape):
    out = ["contig"]
    if len(shape) >= 2:
        out.append("transposed")
    if 0 not in shape and any(s > 1 for s in shape):
        out.append("expanded")
    if len(shape) >= 1:
        out.append("sliced")
    return out


# ---- pointwise -----------------------------------------------------------------------------

UNARY_FLOAT = ["exp", "expm1", "log", "log1p", "log2", "sqrt", "rsqrt", "sin", "cos", "tanh",
               "sigmoid", "erf", "reciprocal"]
UNARY_ANY = ["abs", "neg", "sign", "square"]
ROUNDING = ["floor", "ceil", "round", "trunc"]
ACTIVATIONS = [("relu", {}), ("gelu", {"approximate": "none"}), ("gelu", {"approximate": "tanh"}),
               ("silu", {}), ("softplus", {}), ("softplus", {"beta": 2, "threshold": 5})]
POSITIVE_DOMAIN = {"log", "log1p", "log2", "sqrt", "rsqrt"}


def pointwise(c):
    g = c.gen
    # Unary float math on every float dtype, every layout, specials included; int/bool inputs
    # promote to the default float dtype.
    for op in UNARY_FLOAT:
        kind = "positive" if op in POSITIVE_DOMAIN else "normal"
        for dt in FLOATS:
            for shape in SMALL_SHAPES:
                for lay in layouts_for(shape):
                    c.add("pointwise", op, [make(g, dt, shape, lay, kind)], tag=lay)
            c.add("pointwise", op, [make(g, dt, [17], "contig", "special")], tag="special")
        for dt in ["bool", "uint8", "int32", "int64"]:
            c.add("pointwise", op, [make(g, dt, [3, 7], "contig", "positive")])
        for dt in COMPLEX:
            if op in ("exp", "log", "sqrt", "sin", "cos", "tanh", "sigmoid", "reciprocal"):
                c.add("pointwise", op, [make(g, dt, [3, 7], "transposed", kind)], tag="transposed")
    for op in UNARY_ANY + ROUNDING:
        for dt in ALL:
            if op in ROUNDING and dt in COMPLEX:
                continue
            for shape in [[0], [7], [3, 7], [2, 3, 5]]:
                for lay in layouts_for(shape):
                    c.add("pointwise", op, [make(g, dt, shape, lay)], tag=lay)
            if dt in FLOATS:
                c.add("pointwise", op, [make(g, dt, [17], "contig", "special")], tag="special")
    for op, args in ACTIVATIONS:
        for dt in FLOATS:
            for shape in SMALL_SHAPES:
                for lay in layouts_for(shape):
                    c.add("pointwise", op, [make(g, dt, shape, lay)], args, tag=lay)
            c.add("pointwise", op, [make(g, dt, [17], "contig", "special")], args, tag="special")
        c.add("pointwise", op, [make(g, "int64", [7])], args)
    # Big sizes for a few pointwise ops (the vector loop, its tail and the thread split).
    for dt in ["float32", "bfloat16"]:
        x, y = big(c, dt), big(c, dt, "other")
        if dt == "float32":
            c.add("pointwise", "exp", [x], tag="big")
            c.add("pointwise", "gelu", [x], {"approximate": "none"}, tag="big")
            c.add("pointwise", "add", [x, y], {"alpha": 2}, tag="big")
        else:
            c.add("pointwise", "gelu", [x], {"approximate": "tanh"}, tag="big")
            c.add("pointwise", "mul", [x, y], tag="big")
    c.add("pointwise", "add", [big(c, "float32", "sliced"), big(c, "float32", "other")],
          tag="big-sliced")

    # Binary arithmetic, same dtype, every layout and broadcasting pattern.
    bshapes = [([3, 7], [3, 7]), ([3, 7], [7]), ([3, 1], [1, 7]), ([2, 3, 5], [3, 1]),
               ([0, 3], [3]), ([17], [17]), ([1], [7])]
    arith = [("add", {}), ("add", {"alpha": 2}), ("sub", {}), ("mul", {}), ("div", {}),
             ("div", {"rounding_mode": "trunc"}), ("div", {"rounding_mode": "floor"}),
             ("remainder", {}), ("fmod", {}), ("pow", {}), ("maximum", {}), ("minimum", {}),
             ("atan2", {})]
    for op, args in arith:
        for dt in ALL:
            if dt in COMPLEX and op in ("remainder", "fmod", "maximum", "minimum", "atan2"):
                continue
            if dt in COMPLEX and op == "div" and args:
                continue
            if dt == "bool" and op in ("sub", "div", "remainder", "fmod", "pow", "atan2"):
                continue
            rhs_kind = "nonzero" if op in ("div", "remainder", "fmod") else "normal"
            if op == "pow":
                rhs_kind = "positive" if dt not in FLOATS else "small"
            lhs_kind = "positive" if op == "pow" and dt in FLOATS else "normal"
            for sa, sb in bshapes:
                for lay in (["contig", "transposed", "sliced", "expanded"] if sa == sb else ["contig"]):
                    if len(sa) < 2 and lay == "transposed":
                        continue
                    c.add("pointwise", op, [make(g, dt, sa, lay, lhs_kind),
                                            make(g, dt, sb, lay, rhs_kind)], args, tag=lay)
            if dt in FLOATS:
                c.add("pointwise", op, [make(g, dt, [17], "contig", "special"),
                                        make(g, dt, [17], "contig", "special")], args,
                      tag="special")
    # Integer division by zero raises in PyTorch (ZeroDivisionError as RuntimeError).
    zi = fixed(torch.tensor([1, 2, 3], dtype=torch.int32))
    z0 = fixed(torch.tensor([1, 0, 3], dtype=torch.int32))
    for op, args in [("div", {"rounding_mode": "trunc"}), ("remainder", {})]:
        c.add("pointwise", op, [zi, z0], args, tag="int-zero")

    # Comparisons, logical and bitwise ops.
    for op in ["eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor"]:
        for dt in ALL:
            if dt in COMPLEX and op in ("lt", "le", "gt", "ge"):
                continue
            for sa, sb in [([3, 7], [3, 7]), ([3, 7], [7]), ([2, 3, 5], [3, 1]), ([0], [0])]:
                for lay in (["contig", "transposed", "sliced"] if sa == sb and len(sa) > 1 else ["contig"]):
                    c.add("pointwise", op, [make(g, dt, sa, lay, "small"), make(g, dt, sb, lay, "small")],
                          tag=lay)
            if dt in FLOATS:
                c.add("pointwise", op, [make(g, dt, [17], "contig", "special"),
                                        make(g, dt, [17], "contig", "special")], tag="special")
    for op in ["bitwise_and", "bitwise_or", "bitwise_xor"]:
        for dt in ["bool"] + INTS:
            for sa, sb in [([3, 7], [3, 7]), ([3, 7], [7])]:
                for lay in ["contig", "transposed", "sliced"] if sa == sb else ["contig"]:
                    c.add("pointwise", op, [make(g, dt, sa, lay, "wide"), make(g, dt, sb, lay, "wide")],
                          tag=lay)
        c.add("pointwise", op, [make(g, "float32", [3]), make(g, "float32", [3])], tag="float-error")
    for op in ["logical_not", "bitwise_not", "isnan", "isinf", "isfinite"]:
        for dt in ALL:
            if op == "bitwise_not" and dt not in ["bool"] + INTS:
                continue
            for lay in ["contig", "transposed", "sliced"]:
                c.add("pointwise", op, [make(g, dt, [3, 7], lay, "special" if dt in FLOATS else "wide")],
                      tag=lay)

    # where, clamp, masked_fill.
    for dt in ALL:
        for sc, sa, sb in [([3, 7], [3, 7], [3, 7]), ([3, 7], [7], [3, 1]), ([7], [3, 7], [1])]:
            c.add("pointwise", "where", [make(g, "bool", sc), make(g, dt, sa), make(g, dt, sb)])
        c.add("pointwise", "where", [make(g, "bool", [3, 7], "transposed"),
                                     make(g, dt, [3, 7], "sliced"), make(g, dt, [3, 7], "expanded")],
              tag="mixed-layouts")
        c.add("pointwise", "masked_fill", [make(g, dt, [3, 7], "transposed"), make(g, "bool", [7])],
              {"value": 2}, tag="transposed")
    c.add("pointwise", "where", [make(g, "bool", [3, 7]), make(g, "float32", [3, 7]),
                                 make(g, "int64", [3, 7])], tag="promote")
    c.add("pointwise", "where_scalar", [make(g, "bool", [3, 7]), make(g, "float16", [3, 7])],
          {"other": 2.5})
    c.add("pointwise", "where_scalar", [make(g, "bool", [3, 7]), make(g, "int32", [3, 7])],
          {"other": 2.5})
    c.add("pointwise", "masked_fill", [make(g, "float32", [3, 7]), make(g, "bool", [3, 7])],
          {"value": math.nan}, tag="nan")
    for dt in ["uint8", "int8", "int32", "int64"] + FLOATS:
        for args in [{"min": -1, "max": 2}, {"min": -1}, {"max": 1}, {"min": 3, "max": 1}]:
            for lay in ["contig", "transposed", "sliced"]:
                c.add("pointwise", "clamp", [make(g, dt, [3, 7], lay, "small")], args, tag=lay)
        if dt in FLOATS:
            c.add("pointwise", "clamp", [make(g, dt, [17], "contig", "special")],
                  {"min": -0.5, "max": 0.5}, tag="special")
            c.add("pointwise", "clamp", [make(g, dt, [17])], {"min": -0.5, "max": math.nan},
                  tag="nan-bound")
        c.add("pointwise", "clamp_tensor", [make(g, dt, [3, 7], "contig", "small"),
                                            make(g, dt, [7], "contig", "small"),
                                            make(g, dt, [3, 1], "contig", "small")])
    c.add("pointwise", "clamp", [make(g, "int32", [7])], {"min": -1.5, "max": 2.5}, tag="int-float")

    # lerp, addcmul, addcdiv.
    for dt in FLOATS + ["complex64"]:
        for lay in ["contig", "transposed", "sliced"]:
            c.add("pointwise", "lerp", [make(g, dt, [3, 7], lay), make(g, dt, [3, 7], lay)],
                  {"weight": 0.3}, tag=lay)
            c.add("pointwise", "lerp", [make(g, dt, [3, 7], lay), make(g, dt, [3, 7], lay)],
                  {"weight": 0.75}, tag=lay)
            c.add("pointwise", "lerp_tensor", [make(g, dt, [3, 7], lay), make(g, dt, [7]),
                                               make(g, dt, [3, 1], "contig", "unit")], tag=lay)
            c.add("pointwise", "addcmul", [make(g, dt, [3, 7], lay), make(g, dt, [7]),
                                           make(g, dt, [3, 7], lay)], {"value": 0.5}, tag=lay)
            c.add("pointwise", "addcdiv", [make(g, dt, [3, 7], lay), make(g, dt, [7]),
                                           make(g, dt, [3, 7], lay, "nonzero")], {"value": 2},
                  tag=lay)
    c.add("pointwise", "addcmul", [make(g, "int64", [7]), make(g, "int64", [7]),
                                   make(g, "int64", [7])], {"value": 3}, tag="int")
    c.add("pointwise", "addcdiv", [make(g, "int64", [7]), make(g, "int64", [7]),
                                   make(g, "int64", [7], "contig", "nonzero")], tag="int-error")

    # Complex.
    for dt in COMPLEX:
        for lay in ["contig", "transposed", "sliced", "expanded"]:
            for op in ["real", "imag", "conj", "angle", "abs", "view_as_real"]:
                c.add("pointwise", op, [make(g, dt, [3, 7], lay)], tag=lay)
    for dt in FLOATS:
        c.add("pointwise", "angle", [make(g, dt, [17], "contig", "special")], tag="special")
    for dt in ["float32", "float64"]:
        for lay in ["contig", "transposed", "sliced"]:
            c.add("pointwise", "polar", [make(g, dt, [3, 7], lay, "positive"), make(g, dt, [3, 7], lay)],
                  tag=lay)
            c.add("pointwise", "complex", [make(g, dt, [3, 7], lay), make(g, dt, [3, 7], lay)], tag=lay)
        c.add("pointwise", "real", [make(g, dt, [7])], tag="real-input")


# ---- type promotion ------------------------------------------------------------------------

SCALARS = [3, -2, 2.5, True, complex(1, 2)]


def promotion(c):
    g = c.gen
    # Every dtype pair through add, mul, div and eq; 1-d against 1-d and against 0-dim.
    for a in ALL:
        for b in ALL:
            x, y = make(g, a, [3, 7], "contig", "nonzero"), make(g, b, [7], "contig", "nonzero")
            for op in ["add", "mul", "div", "eq"]:
                c.add("promotion", op, [x, y], tag="pair")
            y0 = make(g, b, [], "contig", "nonzero")
            c.add("promotion", "add", [x, y0], tag="zero-dim")
            c.add("promotion", "mul", [y0, x], tag="zero-dim-left")
            c.add("promotion", "add_", [make(g, a, [3, 7]), y], tag="inplace")
        for s in SCALARS:
            x = make(g, a, [3, 7], "sliced", "nonzero")
            for op in ["add_scalar", "mul_scalar", "div_scalar", "sub_scalar", "rsub_scalar",
                       "rdiv_scalar", "eq_scalar", "lt_scalar", "pow_scalar", "rpow_scalar"]:
                if op in ("lt_scalar",) and (a in COMPLEX or isinstance(s, complex)):
                    continue
                if op in ("pow_scalar", "rpow_scalar") and isinstance(s, int) and s < 0:
                    continue
                c.add("promotion", op, [x], {"other": s}, tag="scalar")
            c.add("promotion", "add_", [make(g, a, [3, 7])], {"other": s}, tag="inplace-scalar")
            c.add("promotion", "mul_", [make(g, a, [3, 7])], {"other": s}, tag="inplace-scalar")
        if a not in COMPLEX:
            c.add("promotion", "remainder_scalar", [make(g, a, [7], "contig", "nonzero")],
                  {"other": 3}, tag="scalar")
            c.add("promotion", "div_scalar", [make(g, a, [7], "contig", "nonzero")],
                  {"other": 2, "rounding_mode": "floor"}, tag="scalar")
    # 0-dim tensors of a higher category win; same category: the dimensioned operand wins.
    for a, b in [("int32", "float64"), ("float16", "float64"), ("uint8", "int64"),
                 ("int8", "uint8"), ("bfloat16", "float16"), ("float32", "complex128"),
                 ("bool", "int64")]:
        c.add("promotion", "add", [make(g, a, [5]), make(g, b, [])], tag="zero-dim-category")
        c.add("promotion", "add", [make(g, a, []), make(g, b, [])], tag="both-zero-dim")
    # In-place into an expanded operand is refused.
    c.add("promotion", "add_", [make(g, "float32", [3, 7], "expanded"), make(g, "float32", [3, 7])],
          {"clone": False}, tag="inplace-expanded")
    c.add("promotion", "sub_", [make(g, "int64", [7]), make(g, "float32", [7])], tag="inplace-error")
    c.add("promotion", "div_", [make(g, "int32", [7]), make(g, "int32", [7], "contig", "nonzero")],
          tag="inplace-error")


# ---- conversions ---------------------------------------------------------------------------

def conversions(c):
    g = c.gen
    for a in ALL:
        for b in ALL:
            kind = "normal"
            if b in INTS or b == "bool":
                kind = "wide" if a in INTS else "small"
            if a in FLOATS and b in FLOATS + COMPLEX + ["bool"]:
                kind = "special"
            if a in FLOATS and b == "uint8":
                kind = "positive"
            for lay in ["contig", "transposed", "sliced"]:
                c.add("conversion", "to", [make(g, a, [3, 17], lay, kind)], {"dtype": b}, tag=lay)
    # Rounding to nearest even and overflow: float64/float32 values near float16/bfloat16
    # limits and ties.
    vals = [65504.0, 65519.9, 65520.0, 1e5, -1e5, 6e-8, 3e-8, 1e-40, 3.4e38, 1.0009765625,
            1.00048828125, 1.00146484375, 1.00390625, 1.01171875, 1.005859375, 2.0 ** -149,
            math.nan, math.inf, -math.inf, -0.0]
    for a in ["float32", "float64"]:
        t = fixed(torch.tensor(vals, dtype=torch.float64).to(getattr(torch, a)))
        for b in ["float16", "bfloat16", "float32"]:
            c.add("conversion", "to", [t], {"dtype": b}, tag="edges")
    big = fixed(torch.tensor([2 ** 31 - 1, -2 ** 31, 2 ** 40 + 3, -(2 ** 50) - 7, 255, 256, -1, 70000],
                             dtype=torch.int64))
    for b in INTS + ["float16", "bfloat16", "float32", "float64"]:
        c.add("conversion", "to", [big], {"dtype": b}, tag="int-edges")


# ---- reductions ----------------------------------------------------------------------------

def reductions(c):
    g = c.gen
    bigs = {dt: big(c, dt) for dt in FLOATS + ["int32", "bool"]}
    bigs["float32-sliced"] = big(c, "float32", "sliced")
    exact_big = {"float32": make(g, "float32", [BIG], "contig", "exact")}

    def vec(dt, n, kind="normal"):
        if n == BIG and kind == "normal":
            return bigs[dt]
        if n == BIG and kind == "exact":
            return exact_big.get(dt) or make(g, dt, [n], "contig", kind)
        return make(g, dt, [n], "contig", kind)

    float_ops = [("sum", {}), ("mean", {}), ("var", {}), ("var", {"correction": 0}), ("std", {}),
                 ("norm", {"p": 2}), ("norm", {"p": 1}), ("norm", {"p": 0}), ("norm", {"p": "inf"}),
                 ("norm", {"p": "-inf"}), ("norm", {"p": 3}), ("amax", {}), ("amin", {}),
                 ("max_all", {}), ("min_all", {}), ("argmax", {}), ("argmin", {}),
                 ("logsumexp", {"dim": [0]}), ("softmax", {"dim": 0}), ("log_softmax", {"dim": 0}),
                 ("cumsum", {"dim": 0}), ("median_all", {}), ("count_nonzero", {}),
                 ("all", {}), ("any", {}), ("max_dim", {"dim": 0}), ("min_dim", {"dim": 0})]
    # 1-d over the odd sizes, every float dtype.
    for dt in FLOATS:
        for n in SIZES:
            for op, args in float_ops:
                # Full-size outputs at 1000003 only for float32 (keeps the blob small).
                if n == BIG and dt != "float32" and op in ("median_all", "softmax",
                                                           "log_softmax", "cumsum"):
                    continue
                c.add("reduce", op, [vec(dt, n)], args, tag=f"n{n}")
            if n != BIG or dt == "float32":
                c.add("reduce", "prod", [vec(dt, n, "exact")], tag=f"n{n}-exact")
            c.add("reduce", "cumprod", [make(g, dt, [min(n, 17)], "contig", "positive")], {"dim": 0})
    for op, args in float_ops:
        if op not in ("softmax", "log_softmax", "cumsum"):
            c.add("reduce", op, [bigs["float32-sliced"]], args, tag="big-sliced")
    c.add("reduce", "sum", [bigs["float16"]], {"dtype": "float32"}, tag="dtype-arg")
    c.add("reduce", "sum", [bigs["float32"]], {"dtype": "float64"}, tag="dtype-arg")
    c.add("reduce", "mean", [bigs["bfloat16"]], {"dtype": "float32"}, tag="dtype-arg")
    # NaN handling: NaN wins max/min/argmax; sums propagate it.
    for dt in ["float32", "float16"]:
        for op, args in float_ops:
            c.add("reduce", op, [make(g, dt, [17], "contig", "special")], args, tag="special")
        for op, args in [("max_dim", {"dim": 1}), ("argmin", {"dim": 1}), ("amax", {"dim": [0]}),
                         ("sum", {"dim": [1]}), ("median_dim", {"dim": 1})]:
            c.add("reduce", op, [make(g, dt, [5, 17], "transposed", "special")], args, tag="special")
    # Ties pick the first index; median's lower middle.
    ties = fixed(torch.tensor([[1., 3., 3., 0., 3.], [2., 2., -1., -1., 2.]]))
    for op, args in [("argmax", {"dim": 1}), ("argmin", {"dim": 1}), ("max_dim", {"dim": 1}),
                     ("min_dim", {"dim": 1}), ("median_dim", {"dim": 1}), ("argmax", {}),
                     ("median_all", {})]:
        c.add("reduce", op, [ties], args, tag="ties")
    # Integer and bool inputs: sums widen to int64, mean refuses, argmax works.
    for dt in ["bool"] + INTS:
        for n in [0, 1, 7, 17, BIG]:
            if n == BIG and dt not in ("int32", "bool"):
                continue
            x = bigs[dt] if n == BIG else make(g, dt, [n])
            for op, args in [("sum", {}), ("amax", {}), ("argmax", {}), ("argmin", {}),
                             ("count_nonzero", {}), ("all", {}), ("any", {}), ("cumsum", {"dim": 0}),
                             ("max_all", {}), ("min_dim", {"dim": 0}), ("median_all", {}),
                             ("mean", {}), ("prod", {})]:
                if n == BIG and op in ("prod", "cumsum"):
                    continue
                # PyTorch 1.13 has no bool median and returns INT_MIN for an empty int median.
                if op == "median_all" and (dt == "bool" or n == 0):
                    continue
                c.add("reduce", op, [x], args, tag=f"n{n}")
        c.add("reduce", "mean", [make(g, dt, [7])], {"dtype": "float64"}, tag="dtype-arg")
    # Over dims, keepdim, every layout, zero-size.
    shapes_dims = [([17, 7], [0]), ([17, 7], [1]), ([17, 7], [-1]), ([17, 7], [0, 1]),
                   ([2, 3, 5], [0, 2]), ([2, 3, 5], [1]), ([3, 0], [0]), ([3, 0], [1]),
                   ([7, 1000], [0]), ([1000, 7], [1])]
    for dt in ["float32", "float64", "bfloat16", "float16", "int64", "complex64"]:
        for shape, dims in shapes_dims:
            for lay in layouts_for(shape):
                if dt in ("float16", "int64", "complex64") and lay not in ("contig", "transposed"):
                    continue
                for keep in [False, True]:
                    ops = [("sum", {"dim": dims, "keepdim": keep}), ("mean", {"dim": dims, "keepdim": keep}),
                           ("amax", {"dim": dims, "keepdim": keep}), ("var", {"dim": dims, "keepdim": keep}),
                           ("std", {"dim": dims, "keepdim": keep, "correction": 0}),
                           ("norm", {"p": 2, "dim": dims, "keepdim": keep}),
                           ("norm", {"p": "inf", "dim": dims, "keepdim": keep}),
                           ("logsumexp", {"dim": dims, "keepdim": keep}),
                           ("count_nonzero", {"dim": dims}),
                           ("argmax", {"dim": dims[0], "keepdim": keep}),
                           ("max_dim", {"dim": dims[0], "keepdim": keep}),
                           ("min_dim", {"dim": dims[0], "keepdim": keep}),
                           ("median_dim", {"dim": dims[0], "keepdim": keep}),
                           ("prod", {"dim": dims[0], "keepdim": keep}),
                           ("all", {"dim": dims[0], "keepdim": keep}),
                           ("any", {"dim": dims[0], "keepdim": keep})]
                    if not keep:
                        ops += [("softmax", {"dim": dims[0]}), ("log_softmax", {"dim": dims[0]}),
                                ("cumsum", {"dim": dims[0]}), ("cumprod", {"dim": dims[0]})]
                    kind = "small" if dt != "complex64" else "normal"
                    x = make(g, dt, shape, lay, kind)
                    for op, args in ops:
                        # PyTorch has no integer softmax family; it returns empty results for
                        # empty inputs only because no kernel runs.
                        if dt == "int64" and op in ("softmax", "log_softmax", "logsumexp", "mean",
                                                    "var", "std", "norm"):
                            continue
                        if dt == "complex64" and op in ("amax", "argmax", "max_dim", "min_dim",
                                                        "median_dim", "logsumexp", "softmax",
                                                        "log_softmax", "cumprod"):
                            continue
                        if dt == "complex64" and op == "norm" and args["p"] == "inf":
                            continue
                        c.add("reduce", op, [x], args, tag=lay)
    c.add("reduce", "softmax", [make(g, "float16", [3, 7])], {"dim": 1, "dtype": "float32"},
          tag="dtype-arg")
    c.add("reduce", "log_softmax", [make(g, "bfloat16", [3, 7])], {"dim": 0, "dtype": "float32"},
          tag="dtype-arg")
    c.add("reduce", "cumsum", [make(g, "int32", [3, 7])], {"dim": 1}, tag="int")
    c.add("reduce", "cumsum", [make(g, "float32", [3, 7])], {"dim": 1, "dtype": "float64"},
          tag="dtype-arg")
    c.add("reduce", "amax", [make(g, "float32", [0])], tag="empty-error")
    c.add("reduce", "argmax", [make(g, "float32", [0])], tag="empty-error")
    c.add("reduce", "sum", [make(g, "float32", [3, 7])], {"dim": [2]}, tag="dim-error")
    c.add("reduce", "median_all", [make(g, "float32", [0])], tag="empty")


# ---- shape and indexing --------------------------------------------------------------------

def indexing(c):
    g = c.gen
    dts = ["float32", "int64", "bool", "float16", "bfloat16", "complex64", "int8", "float64"]
    for dt in dts:
        for lay in ["contig", "transposed", "sliced", "expanded"]:
            a, b = make(g, dt, [3, 7], lay), make(g, dt, [4, 7], "contig")
            c.add("shape", "cat", [a, b], {"dim": 0}, tag=lay)
            c.add("shape", "cat", [a, make(g, dt, [3, 2], lay)], {"dim": 1}, tag=lay)
            c.add("shape", "cat", [a, make(g, dt, [3, 0])], {"dim": -1}, tag=lay)
            c.add("shape", "stack", [a, make(g, dt, [3, 7], lay)], {"dim": 1}, tag=lay)
            c.add("shape", "stack", [a, make(g, dt, [3, 7])], {"dim": 2}, tag=lay)
            c.add("shape", "split", [a], {"split": 3, "dim": 1}, tag=lay)
            c.add("shape", "split", [a], {"split": [1, 2], "dim": 0}, tag=lay)
            c.add("shape", "chunk", [a], {"chunks": 3, "dim": 1}, tag=lay)
            c.add("shape", "chunk", [a], {"chunks": 5, "dim": 0}, tag=lay)
            c.add("shape", "index_select", [a, fixed(torch.tensor([6, 0, 0, 3]))], {"dim": 1},
                  tag=lay)
            c.add("shape", "index_select", [a, fixed(torch.tensor([2, 1], dtype=torch.int32))],
                  {"dim": 0}, tag=lay)
            c.add("shape", "gather", [a, make(g, "int64", [3, 4], "contig", "index:7")], {"dim": 1},
                  tag=lay)
            c.add("shape", "gather", [a, make(g, "int64", [2, 7], "contig", "index:3")], {"dim": 0},
                  tag=lay)
            c.add("shape", "masked_select", [a, make(g, "bool", [7])], tag=lay)
            c.add("shape", "nonzero", [a], tag=lay)
            for d in [-1, 0, 1]:
                c.add("shape", "tril", [a], {"diagonal": d}, tag=lay)
                c.add("shape", "triu", [a], {"diagonal": d}, tag=lay)
        # scatter: distinct indices per column/row (PyTorch leaves duplicates unspecified).
        dst = make(g, dt, [4, 7], "transposed")
        perm = fixed(torch.stack([torch.randperm(4, generator=g.g)[:3] for _ in range(5)], 1))
        c.add("shape", "scatter", [dst, perm, make(g, dt, [3, 5])], {"dim": 0})
        c.add("shape", "scatter_value", [dst, perm], {"dim": 0, "value": 1}, tag="value")
        if dt not in ("bool",):
            c.add("shape", "scatter_add", [dst, make(g, "int64", [5, 7], "contig", "index:4"),
                                           make(g, dt, [5, 7])], {"dim": 0})
            c.add("shape", "index_add", [dst, fixed(torch.tensor([0, 2, 0, 3, 2])),
                                         make(g, dt, [5, 7])], {"dim": 0, "alpha": 2 if dt != "bool" else 1})
            c.add("shape", "index_put", [dst, make(g, dt, [5]), fixed(torch.tensor([0, 1, 0, 3, 3])),
                                         fixed(torch.tensor([6, 2, 6, 0, 1]))],
                  {"nidx": 2, "accumulate": True}, tag="accumulate")
        c.add("shape", "index_put", [dst, make(g, dt, [3]), fixed(torch.tensor([0, -1, 2])),
                                     fixed(torch.tensor([6, 2, -7]))], {"nidx": 2, "accumulate": False})
        c.add("shape", "index_put", [dst, make(g, dt, [4, 1]), fixed(torch.tensor([5, 0]))],
              {"nidx": 2, "none_at": [0], "accumulate": False}, tag="colon")
        c.add("shape", "index_put", [dst, make(g, dt, [2, 7]),
                                     fixed(torch.tensor([True, False, False, True]))],
              {"nidx": 1, "accumulate": False}, tag="bool-mask")
    # Sorting: distinct values so that indices are defined; then ties for stability.
    for dt in ["float32", "float64", "int32", "int64", "float16", "bfloat16", "int16", "uint8"]:
        for shape, lay in [([17], "contig"), ([5, 17], "transposed"), ([5, 17], "sliced"),
                           ([100003 if dt == "float32" else 1003], "contig"), ([0], "contig")]:
            x = make(g, dt, shape, lay, "distinct" if dt in FLOATS else "wide")
            for desc in ([False] if shape[-1] > 1003 else [False, True]):
                c.add("shape", "sort", [x], {"dim": -1, "descending": desc}, tag=lay)
                c.add("shape", "argsort", [x], {"dim": 0, "descending": desc}, tag=lay)
            if shape[-1] >= 3:
                # topk leaves the order of equal values unspecified: distinct values only,
                # exactly representable (bfloat16 holds 8 significant bits).
                n = shape[-1] if dt not in ("bfloat16", "uint8", "int8") else min(shape[-1], 200)
                xd = make(g, dt, shape[:-1] + [n], lay, "distinct")
                c.add("shape", "topk", [xd], {"k": 3, "dim": -1, "largest": True}, tag=lay)
                c.add("shape", "topk", [xd], {"k": 1, "dim": -1, "largest": False}, tag=lay)
        x = make(g, dt, [3, 40], "contig", "small")  # many ties: stable order is defined
        c.add("shape", "sort", [x], {"dim": 1, "descending": False}, tag="ties")
        c.add("shape", "sort", [x], {"dim": 1, "descending": True}, tag="ties")
        c.add("shape", "unique", [x], {"inverse": True, "counts": True})
        c.add("shape", "unique", [make(g, dt, [17], "sliced", "small")], {"inverse": False, "counts": False})
    c.add("shape", "sort", [make(g, "float32", [17], "contig", "special")],
          {"dim": 0, "descending": False}, tag="special")
    c.add("shape", "unique", [make(g, "bool", [17])], {"inverse": True, "counts": True})
    # one_hot and embedding.
    idx = make(g, "int64", [3, 5], "contig", "index:6")
    c.add("shape", "one_hot", [idx], {"num_classes": 6})
    c.add("shape", "one_hot", [idx], {"num_classes": -1})
    c.add("shape", "one_hot", [fixed(torch.tensor([0, 7]))], {"num_classes": 5}, tag="error")
    for dt in ["float32", "bfloat16", "float64"]:
        for lay in ["contig", "transposed", "sliced"]:
            c.add("shape", "embedding", [make(g, dt, [10, 4], lay), make(g, "int64", [2, 3], "contig", "index:10")],
                  tag=lay)
    c.add("shape", "embedding", [make(g, "float32", [10, 4]), fixed(torch.tensor([10]))], tag="error")
    c.add("shape", "gather", [make(g, "float32", [3, 4]), fixed(torch.tensor([[4]]))], {"dim": 1},
          tag="error")
    c.add("shape", "cat", [make(g, "float32", [3, 4]), make(g, "float32", [2, 5])], {"dim": 0},
          tag="error")
    c.add("shape", "cat", [make(g, "float32", [3, 4]), make(g, "int32", [2, 4])], {"dim": 0},
          tag="promote")


# ---- matrix products -----------------------------------------------------------------------

def matrix(c):
    g = c.gen
    for dt in ["float32", "float64", "bfloat16", "complex64", "int64", "float16"]:
        for (m, k, n) in [(3, 7, 17), (1, 1, 1), (17, 3, 1), (0, 3, 4), (5, 0, 6), (64, 33, 65)]:
            for la, lb in [("contig", "contig"), ("transposed", "contig"), ("contig", "transposed"),
                           ("sliced", "sliced"), ("expanded", "contig")]:
                c.add("matrix", "mm", [make(g, dt, [m, k], la), make(g, dt, [k, n], lb)],
                      tag=f"{la}-{lb}")
        c.add("matrix", "bmm", [make(g, dt, [4, 3, 7]), make(g, dt, [4, 7, 5], "transposed")],
              tag="transposed")
        c.add("matrix", "bmm", [make(g, dt, [4, 3, 7], "expanded"), make(g, dt, [4, 7, 5])],
              tag="expanded")
        for sa, sb in [([2, 1, 3, 4], [5, 4, 2]), ([4], [4, 3]), ([3, 4], [4]), ([7], [7]),
                       ([2, 3, 4], [4]), ([5], [2, 5, 3]), ([3, 4], [2, 4, 6])]:
            c.add("matrix", "matmul", [make(g, dt, sa), make(g, dt, sb)])
        for n in [0, 1, 17, 1000]:
            c.add("matrix", "dot", [make(g, dt, [n]), make(g, dt, [n], "sliced")])
            c.add("matrix", "outer", [make(g, dt, [n]), make(g, dt, [3], "sliced")])
        c.add("matrix", "addmm", [make(g, dt, [17]), make(g, dt, [3, 7]), make(g, dt, [7, 17])],
              {"beta": 2, "alpha": 3} if dt in ("int64",) else {"beta": 0.5, "alpha": 2.0})
        # Matrix-vector: A row-major (rows form), transposed (columns form), sliced; k past the
        # vector widths; empty sides.
        for (n, k) in [(17, 33), (1, 1), (70, 130), (0, 3), (4, 0)]:
            for la in ["contig", "transposed", "sliced"]:
                c.add("matrix", "mv", [make(g, dt, [n, k], la), make(g, dt, [k], "sliced")],
                      tag=la)
        c.add("matrix", "addmv", [make(g, dt, [70]), make(g, dt, [70, 33], "transposed"),
                                  make(g, dt, [33])],
              {"beta": 2, "alpha": 3} if dt in ("int64",) else {"beta": 0.5, "alpha": 2.0})
        c.add("matrix", "addmv", [make(g, dt, [1]), make(g, dt, [5, 9]), make(g, dt, [9])],
              tag="broadcast")
        for n in [0, 1, 17, 1000]:
            c.add("matrix", "vdot", [make(g, dt, [n]), make(g, dt, [n], "sliced")])
    c.add("matrix", "mm", [make(g, "float32", [3, 4]), make(g, "float32", [5, 6])], tag="error")
    c.add("matrix", "mm", [make(g, "float32", [3, 4]), make(g, "float64", [4, 6])], tag="dtype-error")
    c.add("matrix", "dot", [make(g, "float32", [3]), make(g, "float32", [4])], tag="error")
    c.add("matrix", "mv", [make(g, "float32", [3, 4]), make(g, "float32", [5])], tag="error")
    c.add("matrix", "mv", [make(g, "float32", [3, 4]), make(g, "float32", [4, 1])], tag="error")
    c.add("matrix", "addmv", [make(g, "float32", [2]), make(g, "float32", [3, 4]),
                              make(g, "float32", [4])], tag="error")
    c.add("matrix", "vdot", [make(g, "float32", [3, 1]), make(g, "float32", [3])], tag="error")


def autograd(c):
    """Gradients of the differentiable ops (PyTorch's autograd on the same float64 inputs),
    strided inputs included: a case is grad_<op> with the op's inputs plus the output's
    gradient, which gets the output's shape."""
    from make_cases import NAMES, OPS
    g = c.gen

    def add(op, inputs, args=None, tag=""):
        args = dict(args or {})
        out = OPS[op]([i.view.contiguous() for i in inputs], args)
        out = out[0] if isinstance(out, (tuple, list)) else out
        seed = make(g, NAMES[out.dtype], list(out.shape))  # the output's dtype (complex too)
        c.add("autograd", "grad_" + op, inputs + [seed], args, tag)

    f = "float64"
    for op in ["exp", "expm1", "sin", "cos", "tanh", "sigmoid", "erf", "abs", "neg", "square",
               "relu", "silu"]:
        for lay in ["contig", "transposed"]:
            add(op, [make(g, f, [3, 5], lay)], tag=lay)
    for op in ["log", "log1p", "log2", "sqrt", "rsqrt", "reciprocal"]:
        add(op, [make(g, f, [3, 5], "contig", "positive")])
    for approx in ["none", "tanh"]:
        add("gelu", [make(g, f, [4, 6])], {"approximate": approx})
    add("clamp", [make(g, f, [4, 6])], {"min": -0.5, "max": 0.5})
    add("mul_scalar", [make(g, f, [4, 6], "sliced")], {"other": -2.5}, tag="sliced")
    add("pow_scalar", [make(g, f, [4, 6], "contig", "positive")], {"other": 2.5})
    for op in ["add", "sub", "mul", "div", "maximum", "minimum"]:
        add(op, [make(g, f, [2, 3, 4]), make(g, f, [3, 1], "contig", "positive")], tag="broadcast")
        add(op, [make(g, f, [3, 4], "transposed"), make(g, f, [4], "expanded")], tag="strided")
    add("add", [make(g, f, [3, 4]), make(g, f, [3, 4])], {"alpha": 2.5})
    add("pow", [make(g, f, [3, 4], "contig", "positive"), make(g, f, [3, 4])])
    add("where", [fixed(torch.rand(3, 4) > 0.5), make(g, f, [3, 4]), make(g, f, [4])])
    add("masked_fill", [make(g, f, [3, 4]), fixed(torch.rand(4) > 0.5)], {"value": 2.0})
    x = [3, 4, 5]
    for args in [{}, {"dim": [1]}, {"dim": [0, 2], "keepdim": True}]:
        add("sum", [make(g, f, x, "transposed")], args, tag="transposed")
        add("mean", [make(g, f, x)], args)
    add("amax", [make(g, f, x)], {"dim": [1]})
    add("amin", [make(g, f, x)], {"dim": [0, 2], "keepdim": True})
    add("max_dim", [make(g, f, x)], {"dim": 2})
    add("var", [make(g, f, x)], {"dim": [1], "correction": 1})
    add("std", [make(g, f, x)], {"dim": [0, 2], "correction": 0, "keepdim": True})
    add("norm", [make(g, f, x)], {"p": 2, "dim": [2]})
    add("logsumexp", [make(g, f, x)], {"dim": [1]})
    add("softmax", [make(g, f, x, "transposed")], {"dim": 1}, tag="transposed")
    add("log_softmax", [make(g, f, x)], {"dim": -1})
    idx = fixed(torch.tensor([4, 0, 4, 2]))
    add("index_select", [make(g, f, [5, 3]), idx], {"dim": 0})
    add("gather", [make(g, f, [5, 3]), fixed(torch.randint(0, 3, (5, 2)))], {"dim": 1})
    add("embedding", [make(g, f, [6, 4]), fixed(torch.tensor([[1, 5], [1, 0]]))])
    add("topk", [make(g, f, [4, 6])], {"k": 3, "dim": 1, "largest": True})
    add("sort", [make(g, f, [4, 6])], {"dim": 0, "descending": True})
    add("tril", [make(g, f, [4, 6])], {"diagonal": 1})
    add("triu", [make(g, f, [4, 6])], {"diagonal": -1})
    add("cat", [make(g, f, [2, 3]), make(g, f, [4, 3], "transposed")], {"dim": 0})
    add("stack", [make(g, f, [2, 3]), make(g, f, [2, 3])], {"dim": 1})
    add("mm", [make(g, f, [3, 7], "transposed"), make(g, f, [7, 5])], tag="transposed")
    add("bmm", [make(g, f, [2, 3, 4]), make(g, f, [2, 4, 5], "transposed")], tag="transposed")
    add("matmul", [make(g, f, [2, 1, 3, 4]), make(g, f, [5, 4, 2])])
    add("matmul", [make(g, f, [3, 4]), make(g, f, [4])])
    add("dot", [make(g, f, [7]), make(g, f, [7], "sliced")], tag="sliced")
    add("outer", [make(g, f, [3]), make(g, f, [4])])
    add("mv", [make(g, f, [4, 7], "transposed"), make(g, f, [7], "sliced")], tag="transposed")
    add("vdot", [make(g, f, [7]), make(g, f, [7], "sliced")], tag="sliced")
    add("addmv", [make(g, f, [1]), make(g, f, [4, 7]), make(g, f, [7])], {"beta": 0.5, "alpha": 2.0})
    add("addmm", [make(g, f, [5]), make(g, f, [3, 7]), make(g, f, [7, 5])],
        {"beta": 0.5, "alpha": 2.0})
    autograd_more(c, add)


def autograd_more(c, add):
    """Products with zeros, scans, medians, norms of every p, scatter/index ops, ternary and
    piecewise pointwise ops, strided views, and in-place writes through views (CopySlices)."""
    g, f = c.gen, "float64"
    # One zero in a row, two in another, none in the third; columns with one zero each.
    zeros = fixed(torch.tensor([[0.5, 0.0, 1.5, -2.0], [0.0, 0.7, 0.0, 1.1],
                                [0.9, -1.3, 0.8, 1.2]], dtype=torch.float64))
    single = fixed(torch.tensor([[0.5, 1.0, 0.0, -2.0, 1.5]], dtype=torch.float64))
    for name, x in [("zeros", zeros), ("one-zero", single), ("plain", None)]:
        x = x or make(g, f, [3, 4], "transposed")
        add("prod", [x], {}, tag=name)
        add("prod", [x], {"dim": 1}, tag=name)
        add("prod", [x], {"dim": 0, "keepdim": True}, tag=name)
        add("cumprod", [x], {"dim": 1}, tag=name)
        add("cumprod", [x], {"dim": 0}, tag=name)
    add("cumsum", [make(g, f, [3, 5], "transposed")], {"dim": 1}, tag="transposed")
    add("cumsum", [make(g, f, [3, 5])], {"dim": 0})
    dist = make(g, f, [3, 5], "contig", "distinct")
    ties = fixed(torch.tensor([[1.0, 2.0, 2.0, 3.0, 2.0], [4.0, 4.0, 1.0, 0.0, 4.0]],
                              dtype=torch.float64))
    for name, x in [("distinct", dist), ("ties", ties)]:
        add("median_all", [x], tag=name)
        add("median_dim", [x], {"dim": 1}, tag=name)
        add("median_dim", [x], {"dim": 0, "keepdim": True}, tag=name)
    add("var_mean_lin", [make(g, f, [3, 4, 5])], {"dim": [1], "correction": 1})
    add("var_mean_lin", [make(g, f, [3, 4, 5], "transposed")],
        {"dim": [0, 2], "correction": 0, "keepdim": True}, tag="transposed")
    for p in [1, 3, 1.5, 0.5, "inf", "-inf", 0]:
        add("norm", [make(g, f, [3, 4, 5], "contig", "nonzero")], {"p": p})
        add("norm", [make(g, f, [3, 4, 5], "contig", "nonzero")], {"p": p, "dim": [1]})
        add("norm", [make(g, f, [3, 4, 5], "transposed", "nonzero")],
            {"p": p, "dim": [0, 2], "keepdim": True}, tag="transposed")
    # Ties in |x| for the inf-norms: the gradient is shared.
    add("norm", [fixed(torch.tensor([[-3.0, 1.0, 3.0], [2.0, -2.0, 0.5]], dtype=torch.float64))],
        {"p": "inf", "dim": [1]}, tag="ties")
    add("norm", [fixed(torch.tensor([-3.0, 1.0, 3.0, -1.0], dtype=torch.float64))], {"p": "-inf"},
        tag="ties")
    add("masked_select", [make(g, f, [3, 4], "transposed"), fixed(torch.rand(4) > 0.5)],
        tag="broadcast")
    idx = fixed(torch.tensor([[3, 0, 4], [1, 1, 2], [0, 0, 3]]))
    add("scatter", [make(g, f, [4, 5]), idx, make(g, f, [3, 3])], {"dim": 1})
    add("scatter_value", [make(g, f, [4, 5]), idx], {"dim": 1, "value": 2.5})
    add("scatter_add", [make(g, f, [4, 5], "transposed"), idx, make(g, f, [3, 3])], {"dim": 1},
        tag="transposed")
    rows = fixed(torch.tensor([2, 0, 2]))
    add("index_add", [make(g, f, [4, 5]), rows, make(g, f, [3, 5])], {"dim": 0, "alpha": -2.0})
    add("index_add", [make(g, f, [4, 5]), fixed(torch.tensor([4, 1])), make(g, f, [4, 2])],
        {"dim": 1})
    at = [fixed(torch.tensor([3, 1, 3])), fixed(torch.tensor([0, 4, 0]))]
    add("index", [make(g, f, [4, 5])] + at)
    add("index", [make(g, f, [4, 5], "transposed"), fixed(torch.tensor([1, 1, 0]))],
        tag="transposed")
    for acc in [False, True]:
        add("index_put", [make(g, f, [4, 5]), make(g, f, [3])] + at,
            {"nidx": 2, "accumulate": acc})
    add("lerp", [make(g, f, [3, 4]), make(g, f, [4])], {"weight": 0.3}, tag="broadcast")
    add("lerp_tensor", [make(g, f, [3, 4]), make(g, f, [4]), make(g, f, [3, 1])],
        tag="broadcast")
    pos = make(g, f, [3, 4], "contig", "positive")
    add("addcmul", [make(g, f, [4]), make(g, f, [3, 4]), make(g, f, [3, 1])], {"value": -1.5},
        tag="broadcast")
    add("addcdiv", [make(g, f, [3, 4]), make(g, f, [4]), pos], {"value": 0.5}, tag="broadcast")
    for args in [{}, {"beta": 2, "threshold": 3}]:
        add("softplus", [make(g, f, [4, 6])], args)
    add("atan2", [make(g, f, [3, 4]), make(g, f, [4], "expanded")], tag="expanded")
    add("remainder", [make(g, f, [3, 4]), make(g, f, [3, 4], "contig", "positive")])
    add("remainder_scalar", [make(g, f, [3, 4])], {"other": 0.7})
    add("fmod", [make(g, f, [3, 4], "transposed"), make(g, f, [3, 4], "contig", "positive")],
        tag="transposed")
    add("unfold", [make(g, f, [4, 7])], {"dim": 1, "size": 3, "step": 2})
    add("unfold", [make(g, f, [5, 3], "transposed")], {"dim": 0, "size": 2, "step": 1},
        tag="transposed")
    add("diagonal", [make(g, f, [4, 6])], {"offset": 1, "dim1": 0, "dim2": 1})
    add("diagonal", [make(g, f, [2, 3, 4])], {"offset": -1, "dim1": 2, "dim2": 1})
    add("as_strided", [make(g, f, [4, 6])], {"size": [3, 2], "stride": [6, 2], "offset": 1})
    add("as_strided", [make(g, f, [4, 6])], {"size": [3, 4], "stride": [1, 2], "offset": 2},
        tag="overlapping-output")
    add("view_as_real", [make(g, "complex128", [3, 4])])
    add("view_as_complex", [make(g, f, [3, 2])])
    # In-place writes through views of a tensor with history (CopySlices).
    add("setitem_mul", [make(g, f, [3, 4]), make(g, f, [4])], {"row": 1})
    add("chain_add", [make(g, f, [4, 4], "transposed"), make(g, f, [2])], tag="transposed")
    add("siblings_mul", [make(g, f, [5, 3]), make(g, f, [3])])
    add("copy_into_zeros", [make(g, f, [2, 3])])
    add("transposed_twice", [make(g, f, [4, 3]), make(g, f, [4])])


def add_all(c):
    pointwise(c)
    promotion(c)
    conversions(c)
    reductions(c)
    indexing(c)
    matrix(c)
    autograd(c)
