#!/usr/bin/python3
"""PyTorch 1.13 anchor for `tessera bench linalg`: torch.linalg.cholesky, lu_factor, qr, eigh,
svd, solve (n right-hand sides for one matrix, one per matrix in a batch), inv, lstsq (its
default driver, gelsy, one right-hand side) and torch.geqrf; factor + solve (cholesky + torch.cholesky_solve, lu_factor + lu_solve)
with one right-hand side per matrix.

Cases `<op>/<dtype>/<batch>x<n>x<n>` as in src/cli/bench_linalg.cpp and bench_linalg_spectral.cpp:
cholesky on B B^T / n + I, eigh on B + B^T, the others (svd with full_matrices=True) on
Gaussian matrices, one batched call per timing.
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
            dt = getattr(torch, dtype)
            a = torch.randn(batch, n, n, generator=g, dtype=dt)
            rhs = torch.randn(batch, n, 1, generator=g, dtype=dt)
            if op.startswith("cholesky"):
                a = a @ a.transpose(1, 2) / n + torch.eye(n, dtype=dt)
            if op == "cholesky":
                fn = lambda: torch.linalg.cholesky(a)  # noqa: E731
            elif op == "cholesky-solve":
                fn = lambda: torch.cholesky_solve(rhs, torch.linalg.cholesky(a))  # noqa: E731
            elif op == "lu-solve":
                fn = lambda: torch.linalg.lu_solve(*torch.linalg.lu_factor(a), rhs)  # noqa: E731
            elif op == "geqrf":
                fn = lambda: torch.geqrf(a)  # noqa: E731
            elif op == "qr":
                fn = lambda: torch.linalg.qr(a)  # noqa: E731
            elif op == "eigh":
                a = a + a.transpose(1, 2)
                fn = lambda: torch.linalg.eigh(a)  # noqa: E731
            elif op == "solve":  # n right-hand sides for one matrix, one per matrix in a batch
                b = torch.randn(batch, n, n, generator=g, dtype=dt) if batch == 1 else rhs
                fn = lambda: torch.linalg.solve(a, b)  # noqa: E731
            elif op == "inv":
                fn = lambda: torch.linalg.inv(a)  # noqa: E731
            elif op == "lstsq":  # the CPU default driver, gelsy
                fn = lambda: torch.linalg.lstsq(a, rhs)  # noqa: E731
            elif op == "svd":
                fn = lambda: torch.linalg.svd(a)  # noqa: E731
            else:
                fn = lambda: torch.linalg.lu_factor(a)  # noqa: E731
            emit_timed("linalg", f"{op}/{dtype}/{batch}x{n}x{n}", t, fn, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
