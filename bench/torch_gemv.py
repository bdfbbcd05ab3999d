#!/usr/bin/python3
"""PyTorch 1.13 anchor for `tessera bench gemv`: F.linear on a [1, 1, K] input.

Run by the `tessera` command in the same invocation (BENCHMARKS.md), once per thread count
with OPENBLAS_NUM_THREADS set (Debian's PyTorch runs float32 linear on OpenBLAS, which
ignores torch.set_num_threads). Cases are N x K weights named as in src/cli/bench_gemv.cpp
(`gemv/<dtype>/NxK`); the weight is [N, K] (out, in) as nn.Linear stores it. `gbps` counts
weight bytes, the traffic that bounds a decode step.
"""
import json
import sys

from anchor_common import anchor_parser, import_torch, measure, thread_counts


def main():
    ap = anchor_parser("comma-separated NxK")
    ap.add_argument("--dtypes", default="float32,bfloat16")
    args = ap.parse_args()
    torch = import_torch()
    if torch is None:
        return 2
    import torch.nn.functional as F
    shapes = [tuple(int(x) for x in c.split("x")) for c in args.cases.split(",")]
    for t in thread_counts(args):
        torch.set_num_threads(t)
        for name in args.dtypes.split(","):
            dtype = getattr(torch, name)
            for n, k in shapes:
                g = torch.Generator().manual_seed(0)
                w = (torch.rand(n, k, generator=g) * 2 - 1).to(dtype)
                x = (torch.rand(1, 1, k, generator=g) * 2 - 1).to(dtype)
                row = {"suite": "gemv", "case": f"gemv/{name}/{n}x{k}", "impl": "torch",
                       "threads": t}
                with torch.no_grad():
                    row.update(measure(lambda: F.linear(x, w), args.reps, args.min_time,
                                       args.max_reps))
                row.update(gflops=2.0 * n * k / row["median_s"] / 1e9,
                           gbps=n * k * w.element_size() / row["median_s"] / 1e9)
                print(json.dumps(row), flush=True)
                del w
    return 0


if __name__ == "__main__":
    sys.exit(main())
