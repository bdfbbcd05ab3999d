#!/usr/bin/python3
"""PyTorch 1.13 anchor for `tessera bench linalg`, eigh and svd (src/cli/bench_linalg_spectral.cpp).

Cases `<op>/<dtype>/<batch>x<n>x<n>`: torch.linalg.eigh on B + B^T and torch.linalg.svd
(full_matrices=True) on Gaussian matrices, one batched call per timing.
"""
import sys

from anchor_common import anchor_parser, emit_timed, import_torch, thread_counts


def main():
    ap = anchor_parser("comma-separated op:dtype:batch:n")
    args = ap.parse_args()
    torch = import_torch()
    if torch is None:
        return 2
    cases = [c.split(":") for c in args.cases.split(",")]
    for t in thread_counts(args):
        torch.set_num_threads(t)
        for op, dtype, batch, n in cases:
            batch, n = int(batch), int(n)
            g = torch.Generator().manual_seed(0)
            a = torch.randn(batch, n, n, generator=g, dtype=getattr(torch, dtype))
            if op == "eigh":
                a = a + a.transpose(1, 2)
                fn = lambda: torch.linalg.eigh(a)  # noqa: E731
            else:
                fn = lambda: torch.linalg.svd(a)  # noqa: E731
            emit_timed("linalg", f"{op}/{dtype}/{batch}x{n}x{n}", t, fn, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
