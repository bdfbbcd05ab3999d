"""PyTorch 1.13 reference results for tests/linalg (the outside oracle of tessera::linalg).

Usage: linalg_reference.py IN.json OUT.json

IN  = {"tensors": {name: TENSOR}, "calls": [{"id", "op", "inputs": [name, ...], "kwargs": {}}]}
OUT = {id: {"outputs": [TENSOR, ...]} | {"error": "ExceptionType: message"}}
TENSOR = {"shape", "dtype", "data" (float64 values), "imag" (complex only)}, as written by
tests/torch_reference.h. Each call runs in the inputs' own dtype (float32 calls compute in
float32, as Tessera does); outputs go back as float64/complex128 values.
"""

import json
import sys

import torch

DTYPES = {"float32": torch.float32, "float64": torch.float64,
          "complex64": torch.complex64, "complex128": torch.complex128,
          "int32": torch.int32, "int64": torch.int64}

OPS = {
    "cholesky": torch.linalg.cholesky,
    "cholesky_ex": torch.linalg.cholesky_ex,
    "cholesky_solve": torch.cholesky_solve,
    "cholesky_inverse": torch.cholesky_inverse,
    "solve_triangular": torch.linalg.solve_triangular,
    "lu_factor": torch.linalg.lu_factor,
    "lu_factor_ex": torch.linalg.lu_factor_ex,
    "lu_solve": torch.linalg.lu_solve,
    "lu": torch.linalg.lu,
    "lu_unpack": torch.lu_unpack,
    "solve": torch.linalg.solve,
    "inv": torch.linalg.inv,
    "det": torch.linalg.det,
    "slogdet": torch.linalg.slogdet,
    # QR and least squares (qr.cpp, lstsq.cpp)
    "qr": torch.linalg.qr,
    "geqrf": torch.geqrf,
    "householder_product": torch.linalg.householder_product,
    "lstsq": torch.linalg.lstsq,
}


# ---- eigh / svd and what is built on them (tests/linalg/test_torch_spectral.cpp) -------------
# JSON has no infinity: ord / p arrive as the strings "inf" and "-inf".


def _num(x):
    return float(x) if x in ("inf", "-inf") else x


SPECTRAL_OPS = {
    "eigh": torch.linalg.eigh,
    "eigvalsh": torch.linalg.eigvalsh,
    "svd": torch.linalg.svd,
    "svdvals": torch.linalg.svdvals,
    "pinv": torch.linalg.pinv,
    "matrix_rank": torch.linalg.matrix_rank,
    "matrix_norm": lambda A, ord="fro", **kw: torch.linalg.matrix_norm(A, _num(ord), **kw),
    "cond": lambda A, p=None: torch.linalg.cond(A, _num(p)),
}
OPS.update(SPECTRAL_OPS)


def _values(xs):
    # JSON has no NaN: a NaN input (the bad-input cases) arrives as null.
    return torch.tensor([float("nan") if x is None else x for x in xs], dtype=torch.float64)


def load(t):
    data = _values(t["data"])
    if "imag" in t:
        data = torch.complex(data, _values(t["imag"]))
    return data.reshape(t["shape"]).to(DTYPES[t["dtype"]])


def dump(t):
    t = t.detach().contiguous()
    out = {"shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", "")}
    if t.is_complex():
        out["data"] = t.real.to(torch.float64).reshape(-1).tolist()
        out["imag"] = t.imag.to(torch.float64).reshape(-1).tolist()
    else:
        out["data"] = t.to(torch.float64).reshape(-1).tolist()
    return out


def main():
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    tensors = {k: load(v) for k, v in spec["tensors"].items()}
    results = {}
    for call in spec["calls"]:
        args = [tensors[name] for name in call["inputs"]]
        try:
            r = OPS[call["op"]](*args, **call.get("kwargs", {}))
            r = list(r) if isinstance(r, tuple) else [r]
            if any(x.is_floating_point() or x.is_complex() for x in r) and not all(
                    torch.isfinite(x).all() for x in r if x.is_floating_point() or x.is_complex()):
                # JSON cannot carry NaN/Inf; the test treats this like an error (Tessera raises
                # on non-finite input where PyTorch 1.13 returns NaNs for some dtypes).
                results[call["id"]] = {"nonfinite": True}
                continue
            results[call["id"]] = {"outputs": [dump(x) for x in r]}
        except Exception as e:  # the test checks that Tessera raises too
            results[call["id"]] = {"error": f"{type(e).__name__}: {e}"}
    with open(sys.argv[2], "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main()
