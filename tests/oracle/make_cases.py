#!/usr/bin/python3
"""Writes Tessera's outside-oracle cases: PyTorch 1.13 (and NumPy) compute, Tessera compares.

Usage: make_cases.py OUTDIR [--seed N]

Writes OUTDIR/index.json and OUTDIR/cases.bin. The C++ reader (oracle_cases.cpp) documents
the format; in short:

  index.json = {"version": 1, "seed": N, "blob": "cases.bin", "cases": [CASE, ...]}
  CASE   = {"id", "family", "op", "args": {...}, "inputs": [INPUT], "outputs": [OUTPUT],
            "error": null | "RuntimeError: ...", "oracle": "torch" | "torch-f32" | "numpy"}
  INPUT  = {"dtype", "base_shape", "offset", "recipe": [STEP], "shape"}
  STEP   = {"op": "transpose", "dim0", "dim1"} | {"op": "permute", "dims"}
         | {"op": "expand", "size"} | {"op": "slice", "dim", "start", "end", "step"}
  OUTPUT = {"dtype", "shape", "offset", "store": dtype of the stored data,
            "cmp": "exact" | "close" | "reduce", "scale_offset": optional float32 data,
            "alt_offset": optional second expected value (same store dtype)}

A base tensor is stored contiguous and little-endian (bool as one byte, float16/bfloat16 as
their 16 bits, complex as interleaved (re, im)); the reader rebuilds the input by applying
the recipe with Tessera's own view ops, so strides and offsets are exercised, not copied.
Scalar arguments that JSON cannot spell are written as strings "inf", "-inf", "nan" and
complex scalars as {"re": x, "im": y}.

"torch-f32" marks a case with float16/bfloat16 inputs: they are upcast to float32, computed,
and the results rounded once to PyTorch's result dtype, which is the semantics Tessera
promises (PyTorch 1.13 lacks many such CPU kernels and rounds intermediates in others; see
Cases.compute). Where PyTorch's own kernel gives a different rounding, that result is kept as
"alt_offset" and either one passes. Values are computed on contiguous copies of the inputs.

"reduce" outputs are compared against a float64 (complex128) reference computed from the same
inputs upcast (stored rounded to float32 unless the result is float64); "scale_offset" then
points at float32 data (same shape) holding the same reduction over magnitudes, so the
tolerance follows the summation error bound eps * sum|x|.
"""

import argparse
import warnings
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

DTYPES = {
    "bool": torch.bool, "uint8": torch.uint8, "int8": torch.int8, "int16": torch.int16,
    "int32": torch.int32, "int64": torch.int64, "float16": torch.float16,
    "bfloat16": torch.bfloat16, "float32": torch.float32, "float64": torch.float64,
    "complex64": torch.complex64, "complex128": torch.complex128,
}
NAMES = {v: k for k, v in DTYPES.items()}
INTS = ["uint8", "int8", "int16", "int32", "int64"]
FLOATS = ["float16", "bfloat16", "float32", "float64"]
COMPLEX = ["complex64", "complex128"]
ALL = ["bool"] + INTS + FLOATS + COMPLEX
BIG = 1000003
SIZES = [1, 3, 7, 17, BIG]
LAYOUTS = ["contig", "transposed", "expanded", "sliced"]


def is_float(name):
    return name in FLOATS


# ---- the blob ------------------------------------------------------------------------------

class Blob:
    """Appends tensors' bytes, 64-byte aligned; a base tensor shared by cases is stored once."""

    def __init__(self, path):
        self.f = open(path, "wb")
        self.size = 0
        self.seen = {}  # id(tensor) -> offset; the tensors are kept alive in self.keep
        self.keep = []

    def put(self, t):
        key = id(t)
        if key in self.seen:
            return self.seen[key]
        self.keep.append(t)
        pad = (-self.size) % 64
        self.f.write(b"\0" * pad)
        self.size += pad
        off = self.size
        data = raw_bytes(t)
        self.f.write(data)
        self.size += len(data)
        self.seen[key] = off
        return off

    def close(self):
        self.f.close()


def raw_bytes(t):
    t = t.detach().contiguous().reshape(-1)
    if t.dtype == torch.bool:
        t = t.to(torch.uint8)
    elif t.dtype in (torch.float16, torch.bfloat16):
        t = t.view(torch.int16)
    elif t.is_complex():
        t = torch.view_as_real(t)
    return t.numpy().astype(t.numpy().dtype.newbyteorder("<"), copy=False).tobytes()


# ---- random data ---------------------------------------------------------------------------

class Gen:
    def __init__(self, seed):
        self.g = torch.Generator().manual_seed(seed)

    def data(self, dtype, shape, kind="normal"):
        """A fresh contiguous tensor. kind: normal, positive, nonzero, special, small, exact,
        index:<n> (int64 in [0, n)), perm:<n> (int64 rows of distinct values < n),
        distinct (a permutation of exactly representable floats)."""
        g, shape = self.g, list(shape)
        n = math.prod(shape)
        dt = DTYPES[dtype]
        if kind.startswith("index:"):
            hi = int(kind.split(":")[1])
            return torch.randint(0, max(hi, 1), shape, generator=g, dtype=torch.int64)
        if dtype == "bool":
            return torch.randint(0, 2, shape, generator=g).to(torch.bool)
        if kind == "distinct" and dtype in INTS:  # all distinct (n must fit the dtype)
            t = torch.randperm(n, generator=g).reshape(shape)
            return (t - (0 if dtype == "uint8" else n // 2)).to(dt)
        if dtype in INTS:
            lo, hi = (0, 40) if dtype == "uint8" else (-20, 21)
            if kind == "positive":
                lo, hi = 1, 20
            if kind == "wide":
                lo, hi = (0, 256) if dtype == "uint8" else (-30000, 30000)
            t = torch.randint(lo, hi, shape, generator=g, dtype=torch.int64)
            if kind == "nonzero":
                t = torch.where(t == 0, torch.ones_like(t), t)
            return t.to(dt)
        if kind == "distinct":
            t = (torch.randperm(n, generator=g).to(torch.float64) - n // 2) / 4
            return t.reshape(shape).to(dt)
        if kind == "exact":  # products stay exact: mostly +-1, a few 2 and 0.5
            t = torch.randint(0, 2, shape, generator=g).to(torch.float64) * 2 - 1
            flat = t.reshape(-1)
            k = min(n, 20)
            if k:
                idx = torch.randperm(n, generator=g)[:k]
                flat[idx[: k // 2]] *= 2
                flat[idx[k // 2:]] *= 0.5
            return t.to(dt)
        real = dt if dtype not in COMPLEX else (torch.float32 if dtype == "complex64" else torch.float64)
        if kind == "positive":
            t = torch.rand(shape, generator=g, dtype=torch.float64) * 4.9 + 0.1
        elif kind == "unit":
            t = torch.rand(shape, generator=g, dtype=torch.float64) * 1.8 - 0.9
        else:
            t = torch.randn(shape, generator=g, dtype=torch.float64) * 2
            if kind == "nonzero":
                t = torch.where(t.abs() < 0.1, torch.full_like(t, 0.5), t)
            if kind == "small":
                t = torch.round(t * 4) / 4
        if dtype in COMPLEX:
            im = torch.randn(shape, generator=g, dtype=torch.float64) * 2
            t = torch.complex(t, im)
        t = t.to(dt) if dtype in COMPLEX else t.to(real)
        if kind == "special" and n > 0:
            specials = torch.tensor([math.nan, math.inf, -math.inf, 0.0, -0.0], dtype=torch.float64)
            flat = t.reshape(-1)
            k = max(1, n // 8)
            idx = torch.randperm(n, generator=g)[:k]
            flat[idx] = specials[torch.arange(k) % 5].to(flat.dtype)
        return t


class Inp:
    """An input: a stored base tensor plus the view recipe that turns it into the operand."""

    def __init__(self, base, recipe=()):
        self.base, self.recipe = base, list(recipe)
        self.view = apply_recipe(base, self.recipe)


def apply_recipe(t, recipe):
    for s in recipe:
        if s["op"] == "transpose":
            t = t.transpose(s["dim0"], s["dim1"])
        elif s["op"] == "permute":
            t = t.permute(*s["dims"])
        elif s["op"] == "expand":
            t = t.expand(*s["size"])
        elif s["op"] == "slice":
            idx = [slice(None)] * t.dim()
            idx[s["dim"] % t.dim()] = slice(s["start"], s["end"], s["step"])
            t = t[tuple(idx)]
        else:
            raise ValueError(s)
    return t


def make(gen, dtype, shape, layout="contig", kind="normal"):
    """An Inp of the given final shape whose memory layout is `layout`."""
    shape = list(shape)
    nd = len(shape)
    if layout == "transposed" and nd >= 2:
        if nd == 2:
            base = gen.data(dtype, [shape[1], shape[0]], kind)
            return Inp(base, [{"op": "transpose", "dim0": 0, "dim1": 1}])
        perm = list(range(nd))[::-1]  # reverse all dims: the view's innermost stride is largest
        base = gen.data(dtype, [shape[p] for p in perm], kind)
        return Inp(base, [{"op": "permute", "dims": perm}])
    if layout == "expanded" and nd >= 1 and 0 not in shape and any(s > 1 for s in shape):
        bshape = list(shape)
        d = next(i for i, s in enumerate(shape) if s > 1)
        bshape[d] = 1
        base = gen.data(dtype, bshape, kind)
        return Inp(base, [{"op": "expand", "size": shape}])
    if layout == "sliced" and nd >= 1:
        bshape = list(shape)
        bshape[-1] = 2 * shape[-1] + 1
        recipe = [{"op": "slice", "dim": -1, "start": 1, "end": None, "step": 2}]
        if nd >= 2:
            bshape[0] = shape[0] + 2
            recipe.append({"op": "slice", "dim": 0, "start": 1, "end": shape[0] + 1, "step": 1})
        base = gen.data(dtype, bshape, kind)
        return Inp(base, recipe)
    return Inp(gen.data(dtype, shape, kind))


def fixed(t):
    return Inp(t)


# ---- the ops, as PyTorch spells them -------------------------------------------------------
# Each takes (list of input views, args) and returns a tensor or a tuple/list of tensors.
# test_oracle.cpp has the same table with Tessera's calls: the names and args must agree.

def _opt(a, k):
    return a.get(k)


def _unique(x, a):
    r = torch.unique(x[0], sorted=True, return_inverse=a["inverse"], return_counts=a["counts"])
    return r if isinstance(r, tuple) else (r,)


def _index_put(x, a):
    tensors = iter(x[2:])  # index tensors follow self and values; None slots have none
    idx = [None if i in a.get("none_at", []) else next(tensors) for i in range(a["nidx"])]
    # PyTorch 1.13 rejects None inside index_put's tuple; a[:, idx] = v is the spelling.
    out = x[0].clone()
    if None in idx:
        key = tuple(slice(None) if i is None else i for i in idx)
        if a["accumulate"]:
            raise ValueError("oracle: accumulate with ':' is not generated")
        out[key] = x[1]
        return out
    return out.index_put_(tuple(idx), x[1], accumulate=a["accumulate"])


def _inplace(name):
    def f(x, a):
        out = x[0].clone() if a.get("clone", True) else x[0]
        other = x[1] if len(x) > 1 else a["other"]
        return getattr(out, name)(other)
    return f


def _kd(a):
    return a.get("keepdim", False)


def _over_dims(f, x, a, **kw):
    """f over args.dim (an int or a list) with keepdim, or over everything when dim is absent."""
    if a.get("dim") is None:
        return f(x[0], **kw)
    return f(x[0], a["dim"], keepdim=_kd(a), **kw)


OPS = {
    # binary arithmetic
    "add": lambda x, a: torch.add(x[0], x[1], alpha=a.get("alpha", 1)),
    "sub": lambda x, a: torch.sub(x[0], x[1], alpha=a.get("alpha", 1)),
    "mul": lambda x, a: torch.mul(x[0], x[1]),
    "div": lambda x, a: torch.div(x[0], x[1], rounding_mode=a.get("rounding_mode")),
    "remainder": lambda x, a: torch.remainder(x[0], x[1]),
    "fmod": lambda x, a: torch.fmod(x[0], x[1]),
    "pow": lambda x, a: torch.pow(x[0], x[1]),
    "maximum": lambda x, a: torch.maximum(x[0], x[1]),
    "minimum": lambda x, a: torch.minimum(x[0], x[1]),
    "atan2": lambda x, a: torch.atan2(x[0], x[1]),
    # tensor-scalar forms
    "add_scalar": lambda x, a: torch.add(x[0], a["other"], alpha=a.get("alpha", 1)),
    "sub_scalar": lambda x, a: torch.sub(x[0], a["other"], alpha=a.get("alpha", 1)),
    "mul_scalar": lambda x, a: torch.mul(x[0], a["other"]),
    "div_scalar": lambda x, a: torch.div(x[0], a["other"], rounding_mode=a.get("rounding_mode")),
    "remainder_scalar": lambda x, a: torch.remainder(x[0], a["other"]),
    "pow_scalar": lambda x, a: torch.pow(x[0], a["other"]),
    "rpow_scalar": lambda x, a: torch.pow(a["other"], x[0]),
    "rsub_scalar": lambda x, a: a["other"] - x[0],
    "rdiv_scalar": lambda x, a: a["other"] / x[0],
    "eq_scalar": lambda x, a: torch.eq(x[0], a["other"]),
    "lt_scalar": lambda x, a: torch.lt(x[0], a["other"]),
    # in place: the result is the updated (cloned) first operand
    "add_": _inplace("add_"),
    "mul_": _inplace("mul_"),
    "sub_": _inplace("sub_"),
    "div_": _inplace("div_"),
    # comparisons, logical, bitwise
    "eq": lambda x, a: torch.eq(x[0], x[1]),
    "ne": lambda x, a: torch.ne(x[0], x[1]),
    "lt": lambda x, a: torch.lt(x[0], x[1]),
    "le": lambda x, a: torch.le(x[0], x[1]),
    "gt": lambda x, a: torch.gt(x[0], x[1]),
    "ge": lambda x, a: torch.ge(x[0], x[1]),
    "logical_and": lambda x, a: torch.logical_and(x[0], x[1]),
    "logical_or": lambda x, a: torch.logical_or(x[0], x[1]),
    "logical_xor": lambda x, a: torch.logical_xor(x[0], x[1]),
    "logical_not": lambda x, a: torch.logical_not(x[0]),
    "bitwise_and": lambda x, a: torch.bitwise_and(x[0], x[1]),
    "bitwise_or": lambda x, a: torch.bitwise_or(x[0], x[1]),
    "bitwise_xor": lambda x, a: torch.bitwise_xor(x[0], x[1]),
    "bitwise_not": lambda x, a: torch.bitwise_not(x[0]),
    "isnan": lambda x, a: torch.isnan(x[0]),
    "isinf": lambda x, a: torch.isinf(x[0]),
    "isfinite": lambda x, a: torch.isfinite(x[0]),
    # selection
    "where": lambda x, a: torch.where(x[0], x[1], x[2]),
    "where_scalar": lambda x, a: torch.where(x[0], x[1], a["other"]),
    "clamp": lambda x, a: torch.clamp(x[0], a.get("min"), a.get("max")),
    "clamp_tensor": lambda x, a: torch.clamp(x[0], x[1], x[2]),
    "masked_fill": lambda x, a: x[0].masked_fill(x[1], a["value"]),
    # unary math
    "abs": lambda x, a: torch.abs(x[0]),
    "neg": lambda x, a: torch.neg(x[0]),
    "sign": lambda x, a: torch.sign(x[0]),
    "exp": lambda x, a: torch.exp(x[0]),
    "expm1": lambda x, a: torch.expm1(x[0]),
    "log": lambda x, a: torch.log(x[0]),
    "log1p": lambda x, a: torch.log1p(x[0]),
    "log2": lambda x, a: torch.log2(x[0]),
    "sqrt": lambda x, a: torch.sqrt(x[0]),
    "rsqrt": lambda x, a: torch.rsqrt(x[0]),
    "sin": lambda x, a: torch.sin(x[0]),
    "cos": lambda x, a: torch.cos(x[0]),
    "tanh": lambda x, a: torch.tanh(x[0]),
    "sigmoid": lambda x, a: torch.sigmoid(x[0]),
    "erf": lambda x, a: torch.erf(x[0]),
    "reciprocal": lambda x, a: torch.reciprocal(x[0]),
    "square": lambda x, a: torch.square(x[0]),
    "floor": lambda x, a: torch.floor(x[0]),
    "ceil": lambda x, a: torch.ceil(x[0]),
    "round": lambda x, a: torch.round(x[0]),
    "trunc": lambda x, a: torch.trunc(x[0]),
    "relu": lambda x, a: torch.relu(x[0]),
    "gelu": lambda x, a: F.gelu(x[0], approximate=a.get("approximate", "none")),
    "silu": lambda x, a: F.silu(x[0]),
    "softplus": lambda x, a: F.softplus(x[0], beta=a.get("beta", 1), threshold=a.get("threshold", 20)),
    "lerp": lambda x, a: torch.lerp(x[0], x[1], a["weight"]),
    "lerp_tensor": lambda x, a: torch.lerp(x[0], x[1], x[2]),
    "addcmul": lambda x, a: torch.addcmul(x[0], x[1], x[2], value=a.get("value", 1)),
    "addcdiv": lambda x, a: torch.addcdiv(x[0], x[1], x[2], value=a.get("value", 1)),
    # complex
    "real": lambda x, a: torch.real(x[0]),
    "imag": lambda x, a: torch.imag(x[0]),
    "conj": lambda x, a: torch.conj(x[0]).resolve_conj(),
    "angle": lambda x, a: torch.angle(x[0]),
    "polar": lambda x, a: torch.polar(x[0], x[1]),
    "complex": lambda x, a: torch.complex(x[0], x[1]),
    "view_as_real": lambda x, a: torch.view_as_real(x[0]),
    # conversion
    "to": lambda x, a: x[0].to(DTYPES[a["dtype"]]),
    # reductions
    "sum": lambda x, a: _over_dims(torch.sum, x, a, dtype=_dt(a)),
    "mean": lambda x, a: _over_dims(torch.mean, x, a, dtype=_dt(a)),
    "prod": lambda x, a: _over_dims(torch.prod, x, a, dtype=_dt(a)),
    "amax": lambda x, a: torch.amax(x[0], a.get("dim") or [], keepdim=_kd(a)),
    "amin": lambda x, a: torch.amin(x[0], a.get("dim") or [], keepdim=_kd(a)),
    "max_all": lambda x, a: torch.max(x[0]),
    "min_all": lambda x, a: torch.min(x[0]),
    "max_dim": lambda x, a: tuple(torch.max(x[0], a["dim"], keepdim=_kd(a))),
    "min_dim": lambda x, a: tuple(torch.min(x[0], a["dim"], keepdim=_kd(a))),
    "argmax": lambda x, a: torch.argmax(x[0], a.get("dim"), keepdim=_kd(a)),
    "argmin": lambda x, a: torch.argmin(x[0], a.get("dim"), keepdim=_kd(a)),
    "var": lambda x, a: torch.var(x[0], a.get("dim"), correction=a.get("correction", 1),
                                  keepdim=_kd(a)),
    "std": lambda x, a: torch.std(x[0], a.get("dim"), correction=a.get("correction", 1),
                                  keepdim=_kd(a)),
    "norm": lambda x, a: torch.linalg.vector_norm(x[0], _p(a["p"]), a.get("dim"), keepdim=_kd(a)),
    "logsumexp": lambda x, a: torch.logsumexp(x[0], a["dim"], keepdim=_kd(a)),
    "softmax": lambda x, a: torch.softmax(x[0], a["dim"], dtype=_dt(a)),
    "log_softmax": lambda x, a: torch.log_softmax(x[0], a["dim"], dtype=_dt(a)),
    "cumsum": lambda x, a: torch.cumsum(x[0], a["dim"], dtype=_dt(a)),
    "cumprod": lambda x, a: torch.cumprod(x[0], a["dim"], dtype=_dt(a)),
    "all": lambda x, a: _over_dims(torch.all, x, a),
    "any": lambda x, a: _over_dims(torch.any, x, a),
    "count_nonzero": lambda x, a: torch.count_nonzero(x[0], a.get("dim")),
    "median_all": lambda x, a: torch.median(x[0]),
    "median_dim": lambda x, a: tuple(torch.median(x[0], a["dim"], keepdim=_kd(a))),
    # shape and indexing
    "cat": lambda x, a: torch.cat(x, a["dim"]),
    "stack": lambda x, a: torch.stack(x, a["dim"]),
    "split": lambda x, a: tuple(torch.split(x[0], a["split"], a["dim"])),
    "chunk": lambda x, a: tuple(torch.chunk(x[0], a["chunks"], a["dim"])),
    "index_select": lambda x, a: torch.index_select(x[0], a["dim"], x[1]),
    "gather": lambda x, a: torch.gather(x[0], a["dim"], x[1]),
    "scatter": lambda x, a: torch.scatter(x[0], a["dim"], x[1], x[2]),
    "scatter_value": lambda x, a: torch.scatter(x[0], a["dim"], x[1], a["value"]),
    "scatter_add": lambda x, a: torch.scatter_add(x[0], a["dim"], x[1], x[2]),
    "index_add": lambda x, a: torch.index_add(x[0], a["dim"], x[1], x[2], alpha=a.get("alpha", 1)),
    "index_put": _index_put,
    "masked_select": lambda x, a: torch.masked_select(x[0], x[1]),
    "nonzero": lambda x, a: torch.nonzero(x[0]),
    "topk": lambda x, a: tuple(torch.topk(x[0], a["k"], a["dim"], largest=a["largest"], sorted=True)),
    "sort": lambda x, a: tuple(torch.sort(x[0], dim=a["dim"], descending=a["descending"], stable=True)),
    "argsort": lambda x, a: torch.sort(x[0], dim=a["dim"], descending=a["descending"], stable=True)[1],
    "unique": _unique,
    "tril": lambda x, a: torch.tril(x[0], a["diagonal"]),
    "triu": lambda x, a: torch.triu(x[0], a["diagonal"]),
    "one_hot": lambda x, a: F.one_hot(x[0], a["num_classes"]),
    "embedding": lambda x, a: F.embedding(x[1], x[0]),
    # matrix
    "mm": lambda x, a: torch.mm(x[0], x[1]),
    "bmm": lambda x, a: torch.bmm(x[0], x[1]),
    "matmul": lambda x, a: torch.matmul(x[0], x[1]),
    "dot": lambda x, a: torch.dot(x[0], x[1]),
    "outer": lambda x, a: torch.outer(x[0], x[1]),
    "addmm": lambda x, a: torch.addmm(x[0], x[1], x[2], beta=a.get("beta", 1), alpha=a.get("alpha", 1)),
    "mv": lambda x, a: torch.mv(x[0], x[1]),
    "addmv": lambda x, a: torch.addmv(x[0], x[1], x[2], beta=a.get("beta", 1), alpha=a.get("alpha", 1)),
    "vdot": lambda x, a: torch.vdot(x[0], x[1]),
    # views and reductions the autograd family differentiates
    "index": lambda x, a: x[0][tuple(x[1:])],
    "unfold": lambda x, a: x[0].unfold(a["dim"], a["size"], a["step"]),
    "diagonal": lambda x, a: torch.diagonal(x[0], a["offset"], a["dim1"], a["dim2"]),
    "as_strided": lambda x, a: torch.as_strided(x[0], a["size"], a["stride"], a["offset"]),
    "view_as_complex": lambda x, a: torch.view_as_complex(x[0]),
    # var + 2 mean: one output that differentiates through both results of var_mean
    "var_mean_lin": lambda x, a: (lambda v, m: v + 2 * m)(
        *torch.var_mean(x[0], a.get("dim"), correction=a.get("correction", 1), keepdim=_kd(a))),
    # in-place ops on views of a tensor with history (CopySlices); see oracle_suites.autograd
    "setitem_mul": lambda x, a: _on_clone(x[0], lambda t: t[a["row"]].mul_(x[1])),
    "chain_add": lambda x, a: _on_clone(x[0], lambda t: t.narrow(0, 1, 2).select(1, 0).add_(x[1])),
    "siblings_mul": lambda x, a: _siblings_mul(x),
    "copy_into_zeros": lambda x, a: _copy_into_zeros(x),
    "transposed_twice": lambda x, a: _on_clone(
        x[0], lambda t: (t.t()[1].add_(x[1]), t.t().select(1, 2).mul_(x[1].sum()))),
}


def _on_clone(x, write):
    """x * 1 (a tensor with history) written in place through a view by `write`."""
    t = x * 1
    write(t)
    return t


def _siblings_mul(x):
    """Two overlapping views of one base; the second is written, the first is read after."""
    t = x[0] * 1
    first, second = t[0:3], t[1:4]
    second.mul_(x[1])
    return first * 1


def _copy_into_zeros(x):
    """A zero tensor without history takes it from what is copied into a view of it."""
    z = torch.zeros(x[0].shape[0] + 2, x[0].shape[1], dtype=x[0].dtype)
    z.narrow(0, 1, x[0].shape[0]).copy_(x[0].exp())
    return z


def _dt(a):
    return DTYPES[a["dtype"]] if a.get("dtype") else None


def _p(p):
    return {"inf": math.inf, "-inf": -math.inf}.get(p, p) if isinstance(p, str) else p


# ---- gradients: "grad_<op>" differentiates OPS[op]'s first output --------------------------
# Inputs are the op's inputs followed by the gradient of that output; the outputs are the
# gradients of the inputs listed in GRAD_OPS (zeros where the output does not depend on one).
# test_oracle.cpp builds the same entries from its own table.

GRAD_OPS = {
    **{op: [0] for op in [
        "exp", "expm1", "log", "log1p", "log2", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid",
        "erf", "reciprocal", "abs", "neg", "square", "relu", "gelu", "silu", "clamp", "sum",
        "mean", "amax", "amin", "max_dim", "var", "std", "norm", "logsumexp", "softmax",
        "log_softmax", "index_select", "gather", "embedding", "topk", "sort", "tril", "triu",
        "masked_fill", "mul_scalar", "pow_scalar", "prod", "cumsum", "cumprod", "median_all",
        "median_dim", "var_mean_lin", "masked_select", "scatter_value", "index", "softplus",
        "remainder_scalar", "unfold", "diagonal", "as_strided", "view_as_real", "view_as_complex",
        "copy_into_zeros"]},
    **{op: [0, 1] for op in ["add", "sub", "mul", "div", "pow", "maximum", "minimum", "mm", "bmm",
                             "matmul", "dot", "outer", "mv", "vdot", "lerp", "atan2", "remainder", "fmod",
                             "index_put", "setitem_mul", "chain_add", "siblings_mul",
                             "transposed_twice"]},
    **{op: [0, 2] for op in ["scatter", "scatter_add", "index_add"]},
    "where": [1, 2], "addmm": [0, 1, 2], "addmv": [0, 1, 2], "lerp_tensor": [0, 1, 2], "addcmul": [0, 1, 2],
    "addcdiv": [0, 1, 2], "cat": None, "stack": None,  # None: every input
}


def _grad(op):
    def f(x, a):
        diff = GRAD_OPS[op]
        ins = list(x[:-1])
        idx = range(len(ins)) if diff is None else diff
        for i in idx:
            ins[i] = ins[i].detach().requires_grad_(True)
        out = _as_list(OPS[op](ins, a))[0]
        gs = torch.autograd.grad(out, [ins[i] for i in idx], x[-1], allow_unused=True)
        return [g if g is not None else torch.zeros_like(ins[i]) for g, i in zip(gs, idx)]
    return f


OPS.update({"grad_" + op: _grad(op) for op in GRAD_OPS})


# Ops whose outputs are values picked from the inputs or computed exactly: compared bit-exact
# (NaN equals NaN; +0 equals -0).
EXACT_OPS = {
    "abs", "neg", "sign", "relu", "clamp", "clamp_tensor", "where", "where_scalar", "maximum",
    "minimum", "masked_fill", "floor", "ceil", "round", "trunc", "real", "imag", "conj",
    "view_as_real", "complex", "to", "amax", "amin", "max_all", "min_all", "max_dim", "min_dim",
    "argmax", "argmin", "median_all", "median_dim", "all", "any", "count_nonzero", "cat", "stack",
    "split", "chunk", "index_select", "gather", "scatter", "scatter_value", "index_put",
    "masked_select", "nonzero", "topk", "sort", "argsort", "unique", "tril", "triu", "one_hot",
    "embedding",
}
# Ops compared against a float64 reference; those in SCALED also get a sum-of-magnitudes scale.
REDUCE_OPS = {"sum", "mean", "prod", "var", "std", "norm", "logsumexp", "cumsum", "cumprod",
              "dot", "mm", "bmm", "matmul", "outer", "addmm", "mv", "addmv", "vdot"}
SCALED_OPS = {"sum", "mean", "cumsum", "dot", "mm", "bmm", "matmul", "outer", "addmm", "mv",
              "addmv", "vdot"}


# ---- case writer ---------------------------------------------------------------------------

def _np_matmul(x, a):
    """float64/complex128 products through NumPy: PyTorch 1.13's complex128 dot returns 0 in
    this build (torch.dot of random complex128 vectors gives 0j), so NumPy is the reference."""
    import numpy as np
    return torch.from_numpy(np.asarray(np.matmul(x[0].numpy(), x[1].numpy())))


def _np_addmm(x, a):
    import numpy as np
    r = a.get("beta", 1) * x[0].numpy() + a.get("alpha", 1) * np.matmul(x[1].numpy(), x[2].numpy())
    return torch.from_numpy(np.asarray(r))


NUMPY_REFS = {
    "mm": _np_matmul, "bmm": _np_matmul, "matmul": _np_matmul, "dot": _np_matmul,
    "outer": lambda x, a: torch.from_numpy(__import__("numpy").outer(x[0].numpy(), x[1].numpy())),
    "addmm": _np_addmm, "mv": _np_matmul, "addmv": _np_addmm,
    "vdot": lambda x, a: torch.from_numpy(__import__("numpy").asarray(
        __import__("numpy").vdot(x[0].numpy(), x[1].numpy()))),
}


def jsonable(v):
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return v
    if isinstance(v, complex):
        return {"re": jsonable(v.real), "im": jsonable(v.imag)}
    if isinstance(v, dict):
        return {k: jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    return v


def _not_implemented(e):
    return "not implemented for" in str(e)


def _upcast(views):
    low = next((v.dtype for v in views if v.dtype in (torch.float16, torch.bfloat16)), None)
    return low, [v.float() if v.dtype in (torch.float16, torch.bfloat16) else v for v in views]


def _as_list(r):
    return list(r) if isinstance(r, (tuple, list)) else [r]


def _differs(a, b):
    """Whether two results differ beyond the C++ side's tolerance for their dtype."""
    if a.shape != b.shape:
        return True
    if not (a.is_floating_point() or a.is_complex()):
        return not torch.equal(a, b)
    rtol = {torch.float16: 1e-3, torch.bfloat16: 1.6e-2}.get(a.dtype, 1.3e-6)
    return not torch.allclose(a.to(torch.complex128 if a.is_complex() else torch.float64),
                              b.to(torch.complex128 if b.is_complex() else torch.float64),
                              rtol=rtol, atol=1e-5, equal_nan=True)


def _hi(t):
    if t.is_complex():
        return t.to(torch.complex128)
    if t.is_floating_point():
        return t.to(torch.float64)
    return t


class Cases:
    def __init__(self, outdir, seed):
        self.blob = Blob(os.path.join(outdir, "cases.bin"))
        self.cases = []
        self.skipped = []
        self.gen = Gen(seed)
        self.ids = set()
        self.shared = {}  # large base tensors shared by several suites
        self.native_differs = {}  # op -> cases where PyTorch's own float16/bfloat16 result differs

    def compute(self, op, views, args):
        """(oracle, error, outputs) for op on views; oracle None means skip the case.

        Values are computed on contiguous copies of the inputs (PyTorch 1.13's median on an
        expanded input returns uninitialised memory), except for in-place ops, whose views
        decide whether the write is legal. float16/bfloat16 inputs are upcast to float32 and the
        results rounded once to PyTorch's result dtype: PyTorch 1.13 rounds intermediates to
        bfloat16 in some kernels (gelu(-2.5) gives -0.0146, exactly it is -0.0155), while Tessera
        promises float32 arithmetic with one final rounding.
        """
        fn = OPS[op]
        inplace = op.endswith("_")
        xs = views if inplace else [v.contiguous() for v in views]
        try:
            native = _as_list(fn(xs, args))
        except (RuntimeError, IndexError, ValueError, TypeError) as e:
            if not _not_implemented(e):
                msg = str(e).splitlines()[0] if str(e) else ""
                return "torch", f"{type(e).__name__}: {msg}", None
            native = None
        low, up = _upcast(xs)
        if low is None:
            if native is None:
                self.skipped.append((op, "PyTorch 1.13 has no kernel for these dtypes"))
                return None, None, None
            return "torch", None, native
        try:
            wide = _as_list(fn(up, args))
        except (RuntimeError, IndexError, ValueError, TypeError) as e:
            self.skipped.append((op, str(e).splitlines()[0]))
            return None, None, None
        if native is None:
            return "torch-f32", None, [o.to(low) if o.dtype == torch.float32 else o for o in wide]
        outs = [w.to(n.dtype) if (w.is_floating_point() or w.is_complex()) else w
                for w, n in zip(wide, native)]
        differs = [o.dtype == n.dtype and o.shape == n.shape and _differs(o, n)
                   for o, n in zip(outs, native)]
        if any(o.dtype == n.dtype and o.shape != n.shape for o, n in zip(outs, native)):
            self.native_differs[op] = self.native_differs.get(op, 0) + 1
        if any(differs):
            self.native_differs[op] = self.native_differs.get(op, 0) + 1
            # Both roundings are PyTorch's: its kernel's (operands cast to the result dtype,
            # per-step rounding in index_add/scatter_add) and float32-then-round-once.
            self.alternatives = [n if d else None for n, d in zip(native, differs)]
        return "torch-f32", None, outs

    def add(self, family, op, inputs, args=None, tag=""):
        args = dict(args or {})
        views = [i.view for i in inputs]
        self.alternatives = None
        oracle, error, outs = self.compute(op, views, args)
        if oracle is None:
            return
        shape_s = "x".join(str(s) for s in views[0].shape) if views else ""
        dts = ",".join(sorted({NAMES[v.dtype] for v in views}))
        cid = f"{op}/{dts}/{shape_s}/{tag or 'contig'}/{json.dumps(jsonable(args), sort_keys=True)}"
        k = 2
        base_id = cid
        while cid in self.ids:
            cid = f"{base_id}#{k}"
            k += 1
        self.ids.add(cid)
        size0 = self.blob.size
        case = {"id": cid, "family": family, "op": op, "args": jsonable(args), "oracle": oracle,
                "error": error, "inputs": [], "outputs": []}
        for i in inputs:
            case["inputs"].append({"dtype": NAMES[i.base.dtype], "base_shape": list(i.base.shape),
                                   "offset": self.blob.put(i.base), "recipe": i.recipe,
                                   "shape": list(i.view.shape)})
        if error is None and any(o.dtype not in NAMES for o in outs):
            self.skipped.append((op, f"result dtype {[str(o.dtype) for o in outs]} has no "
                                     f"Tessera counterpart ({cid})"))
            self.ids.discard(cid)
            return
        if error is None:
            ref = scale = None
            reduce = op in REDUCE_OPS and any(o.is_floating_point() or o.is_complex() for o in outs)
            if reduce:
                hi = [_hi(v.contiguous()) for v in views]
                a2 = dict(args)
                if a2.get("dtype"):
                    a2["dtype"] = "complex128" if "complex" in a2["dtype"] else "float64"
                ref_fn = NUMPY_REFS.get(op, OPS[op])
                ref = _as_list(ref_fn(hi, a2))
                if op in SCALED_OPS:
                    a3 = {k: (abs(v) if isinstance(v, (int, float)) and k in ("alpha", "beta") else v)
                          for k, v in a2.items()}
                    scale = _as_list(ref_fn([h if h.dtype == torch.bool else h.abs() for h in hi], a3))
            for j, o in enumerate(outs):
                entry = {"dtype": NAMES[o.dtype], "shape": list(o.shape)}
                if reduce and (o.is_floating_point() or o.is_complex()):
                    # The float64 reference is stored in float32 unless the result is float64:
                    # half an ulp of float32 is far below every float32 tolerance.
                    # float16/bfloat16 results: the reference rounded to that dtype (so that
                    # overflow to inf is expected), then stored as float32.
                    r = ref[j]
                    if o.dtype in (torch.float16, torch.bfloat16):
                        r = r.to(o.dtype)
                    if o.dtype not in (torch.float64, torch.complex128):
                        r = r.to(torch.complex64 if r.is_complex() else torch.float32)
                    entry.update(cmp="reduce", store=NAMES[r.dtype], offset=self.blob.put(r))
                    if scale is not None:
                        entry["scale_offset"] = self.blob.put(scale[j].abs().to(torch.float32))
                else:
                    exact = (op in EXACT_OPS and not (op == "abs" and views[0].is_complex())) or \
                        not (o.is_floating_point() or o.is_complex())
                    entry.update(cmp="exact" if exact else "close", store=NAMES[o.dtype],
                                 offset=self.blob.put(o))
                    if self.alternatives and self.alternatives[j] is not None:
                        entry["alt_offset"] = self.blob.put(self.alternatives[j])
                case["outputs"].append(entry)
        case["bytes"] = self.blob.size - size0
        self.cases.append(case)

    def finish(self, outdir, seed):
        self.blob.close()
        with open(os.path.join(outdir, "index.json"), "w") as f:
            json.dump({"version": 1, "seed": seed, "blob": "cases.bin",
                       "torch": torch.__version__, "numpy": np.__version__,
                       "skipped": [f"{op}: {why}" for op, why in self.skipped],
                       "native_low_precision_differs": self.native_differs,
                       "cases": self.cases}, f)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir")
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args()
    os.makedirs(args.outdir, exist_ok=True)
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")  # ComplexHalf and complex-to-real casts are intended
    import oracle_suites  # the case lists, one function per op family
    c = Cases(args.outdir, args.seed)
    oracle_suites.add_all(c)
    c.finish(args.outdir, args.seed)
    print(f"make_cases: {len(c.cases)} cases, {c.blob.size / 1e6:.1f} MB, "
          f"{len(c.skipped)} skipped; PyTorch's own float16/bfloat16 result differs from the "
          f"float32-then-round oracle in: {c.native_differs}", file=sys.stderr)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    main()
