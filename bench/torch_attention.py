#!/usr/bin/python3
"""PyTorch 1.13 anchor for `tessera bench attention`: causal attention forward, math path.

PyTorch 1.13 has no fused attention: q @ k^T * scale, the causal mask, softmax, @ v, as its
users wrote it. Cases `attention/<dtype>/BxHxSxD` as in src/cli/bench_attention.cpp; with
--decode, `decode/<dtype>/BxHxSxD`: one query token against S keys, no mask.
"""
import math
import sys

from anchor_common import anchor_parser, emit_timed, import_torch, thread_counts


def main():
    ap = anchor_parser("comma-separated BxHxSxD")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    ap.add_argument("--decode", action="store_true", help="one query token, no mask")
    args = ap.parse_args()
    torch = import_torch()
    if torch is None:
        return 2
    dt = getattr(torch, args.dtype)
    cases = [tuple(int(x) for x in c.split("x")) for c in args.cases.split(",")]
    for t in thread_counts(args):
        torch.set_num_threads(t)
        for B, H, S, D in cases:
            g = torch.Generator().manual_seed(0)
            L = 1 if args.decode else S
            q = torch.randn(B, H, L, D, generator=g).to(dt)
            k, v = (torch.randn(B, H, S, D, generator=g).to(dt) for _ in range(2))
            mask = torch.ones(L, S, dtype=torch.bool).triu(1)

            def step():
                s = q @ k.transpose(-2, -1) / math.sqrt(D)
                if not args.decode:
                    s = s.masked_fill(mask, float("-inf"))
                s.softmax(-1) @ v

            kind = "decode" if args.decode else "attention"
            emit_timed("attention", f"{kind}/{args.dtype}/{B}x{H}x{S}x{D}", t, step, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
