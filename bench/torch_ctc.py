#!/usr/bin/python3
"""PyTorch 1.13 anchor for `tessera bench ctc`: ctc_loss forward + backward.

Cases `ctc/float32/TxBxCxS` as in src/cli/bench_ctc.cpp: log_probs [T, B, C] from a seeded
log_softmax, padded targets of length S (labels 1..C-1, blank 0), full input and target
lengths, reduction "mean"; the timed call is the loss and its backward.
"""
import sys

from anchor_common import anchor_parser, emit_timed, import_torch, thread_counts


def main():
    ap = anchor_parser("comma-separated TxBxCxS")
    args = ap.parse_args()
    torch = import_torch()
    if torch is None:
        return 2
    import torch.nn.functional as F
    cases = [tuple(int(x) for x in c.split("x")) for c in args.cases.split(",")]
    for t in thread_counts(args):
        torch.set_num_threads(t)
        for T, B, C, S in cases:
            g = torch.Generator().manual_seed(0)
            lp = torch.randn(T, B, C, generator=g).log_softmax(2).requires_grad_(True)
            tg = torch.randint(1, C, (B, S), generator=g)
            il = torch.full((B,), T, dtype=torch.long)
            tl = torch.full((B,), S, dtype=torch.long)

            def step():
                lp.grad = None
                F.ctc_loss(lp, tg, il, tl).backward()

            emit_timed("ctc", f"ctc/float32/{T}x{B}x{C}x{S}", t, step, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
