#!/usr/bin/python3
"""PyTorch 1.13 anchor for `tessera bench gemv`: F.linear on a [1, 1, K] input.

Run by the `tessera` command in the same invocation (BENCHMARKS.md), once per thread count
with OPENBLAS_NUM_THREADS set (Debian's PyTorch runs float32 linear on OpenBLAS, which
ignores torch.set_num_threads). Cases are N x K weights named as in src/cli/bench_gemv.cpp
(`gemv/<dtype>/NxK`); the weight is [N, K] (out, in) as nn.Linear stores it. `gbps` counts
weight bytes, the traffic that bounds a decode step. Cases `mv/<dtype>/NxK` and `vm/<dtype>/NxK`
(float64, complex64, complex128) time matmul(A, x) and matmul(x, A) on a row-major A [N, K]
(x^T A takes x of N values); their gbps counts A's bytes. With --serve it times the cases
named on stdin, in turns with the tessera command's own (anchor_common.serve).
"""
import sys

from anchor_common import anchor_parser, import_torch, measure, run_cases

DENSE = ("float64", "complex64", "complex128")


def main():
    ap = anchor_parser("comma-separated NxK", lockstep=True)
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--dense", default="", help="comma-separated NxK for the mv/vm cases")
    args = ap.parse_args()
    torch = import_torch()
    if torch is None:
        return 2
    import torch.nn.functional as F
    dtypes = args.dtypes.split(",")
    state = {"threads": None, "case": None, "operands": None}

    def dense_rows(case, t, form, dtype, n, k):
        if state["case"] != case:
            state["operands"] = None
            g = torch.Generator().manual_seed(0)
            a = torch.randn(n, k, generator=g, dtype=dtype)
            x = torch.randn(n if form == "vm" else k, generator=g, dtype=dtype)
            state["case"], state["operands"] = case, (a, x)
        a, x = state["operands"]
        fn = (lambda: torch.matmul(a, x)) if form == "mv" else (lambda: torch.matmul(x, a))
        row = {"suite": "gemv", "case": case, "impl": "torch", "threads": t}
        with torch.no_grad():
            row.update(measure(fn, args.reps, args.min_time, args.max_reps, key=(case, t)))
        flops = (8.0 if dtype.is_complex else 2.0) * n * k
        row.update(gflops=flops / row["median_s"] / 1e9,
                   gbps=n * k * a.element_size() / row["median_s"] / 1e9)
        return [row]

    def rows_for(case, t):
        parts = case.split("/")
        if len(parts) == 3 and parts[0] in ("mv", "vm") and parts[1] in DENSE:
            if state["threads"] != t:
                torch.set_num_threads(t)
                state["threads"] = t
            n, k = (int(v) for v in parts[2].split("x"))
            return dense_rows(case, t, parts[0], getattr(torch, parts[1]), n, k)
        if len(parts) != 3 or parts[0] != "gemv" or parts[1] not in dtypes:
            return []
        n, k = (int(v) for v in parts[2].split("x"))
        if state["threads"] != t:  # setting it again, even to the same count, costs a call
            torch.set_num_threads(t)
            state["threads"] = t
        if state["case"] != case:  # the last case's weight is kept: it comes back each turn
            state["operands"] = None
            dtype = getattr(torch, parts[1])
            g = torch.Generator().manual_seed(0)
            w = (torch.rand(n, k, generator=g) * 2 - 1).to(dtype)
            x = (torch.rand(1, 1, k, generator=g) * 2 - 1).to(dtype)
            state["case"], state["operands"] = case, (w, x)
        w, x = state["operands"]
        row = {"suite": "gemv", "case": case, "impl": "torch", "threads": t}
        with torch.no_grad():
            row.update(measure(lambda: F.linear(x, w), args.reps, args.min_time, args.max_reps,
                               key=(case, t)))
        row.update(gflops=2.0 * n * k / row["median_s"] / 1e9,
                   gbps=n * k * w.element_size() / row["median_s"] / 1e9)
        return [row]

    names = [f"gemv/{d}/{c}" for d in dtypes for c in args.cases.split(",") if c]
    names += [f"{form}/{d}/{c}" for form in ("mv", "vm") for d in DENSE
              for c in args.dense.split(",") if c]
    run_cases(args, names, rows_for)
    return 0


if __name__ == "__main__":
    sys.exit(main())
