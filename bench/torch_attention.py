#!/usr/bin/python3
"""PyTorch 1.13 anchor for `tessera bench attention`: causal attention forward, math path.

PyTorch 1.13 has no fused attention: q @ k^T * scale, the causal mask, softmax, @ v, as its
users wrote it. Cases `attention/<dtype>/BxHxSxD` as in src/cli/bench_attention.cpp.
"""
import argparse
import math
import sys

from anchor_common import add_timing_args, emit_timed, import_torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", default="1")
    ap.add_argument("--cases", required=True, help="comma-separated BxHxSxD")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    add_timing_args(ap)
    args = ap.parse_args()
    torch = import_torch()
    if torch is None:
        return 2
    dt = getattr(torch, args.dtype)
    cases = [tuple(int(x) for x in c.split("x")) for c in args.cases.split(",")]
    for t in [int(x) for x in args.threads.split(",")]:
        torch.set_num_threads(t)
        for B, H, S, D in cases:
            g = torch.Generator().manual_seed(0)
            q, k, v = (torch.randn(B, H, S, D, generator=g).to(dt) for _ in range(3))
            mask = torch.ones(S, S, dtype=torch.bool).triu(1)

            def step():
                s = q @ k.transpose(-2, -1) / math.sqrt(D)
                (s.masked_fill(mask, float("-inf")).softmax(-1) @ v)

            emit_timed("attention", f"attention/{args.dtype}/{B}x{H}x{S}x{D}", t, step, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
