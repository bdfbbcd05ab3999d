#!/usr/bin/python3
"""PyTorch 1.13 anchor for `tessera bench linalg`: torch.linalg.cholesky, lu_factor, qr, eigh,
svd, solve (n right-hand sides for one matrix, one per matrix in a batch), inv, lstsq (its
default driver, gelsy, one right-hand side) and torch.geqrf; factor + solve (cholesky +
torch.cholesky_solve, lu_factor + lu_solve) with one right-hand side per matrix.

Cases `<op>/<dtype>/<batch>x<n>x<n>` as in src/cli/bench_linalg.cpp and bench_linalg_spectral.cpp:
cholesky on B B^T / n + I, eigh on B + B^T, the others (svd with full_matrices=True) on
Gaussian matrices, one batched call per timing. Threads: torch.set_num_threads per count;
Debian's PyTorch factors on OpenBLAS's LAPACK, whose thread count is OPENBLAS_NUM_THREADS at
load time, so the caller runs this script once per thread count with that variable set. With
--serve it times the cases named on stdin, in turns with the tessera command's own
(anchor_common.serve): on a shared machine the bandwidth a neighbour leaves drifts within
seconds, and the large factorizations are bound by it.
"""
import sys

from anchor_common import anchor_parser, import_torch, measure, run_cases

OPS = ("cholesky", "lu_factor", "cholesky-solve", "lu-solve", "geqrf", "qr", "solve", "inv",
       "lstsq", "eigh", "svd")


def parse(name):
    """(op, dtype, batch, n) of a case name, or None when it is not one of ours."""
    parts = name.split("/")
    if len(parts) != 3 or parts[0] not in OPS or parts[1] not in ("float32", "float64"):
        return None
    dims = parts[2].split("x")
    if len(dims) != 3 or not all(d.isdigit() for d in dims) or dims[1] != dims[2]:
        return None
    return parts[0], parts[1], int(dims[0]), int(dims[1])


def call(torch, op, batch, n, dt):
    """The timed call of a case, on inputs made from seed 0."""
    g = torch.Generator().manual_seed(0)
    a = torch.randn(batch, n, n, generator=g, dtype=dt)
    rhs = torch.randn(batch, n, 1, generator=g, dtype=dt)
    if op.startswith("cholesky"):
        a = a @ a.transpose(1, 2) / n + torch.eye(n, dtype=dt)
    if op == "eigh":
        a = a + a.transpose(1, 2)
    if op == "solve" and batch == 1:  # n right-hand sides for one matrix
        rhs = torch.randn(batch, n, n, generator=g, dtype=dt)
    linalg = torch.linalg
    return {
        "cholesky": lambda: linalg.cholesky(a),
        "lu_factor": lambda: linalg.lu_factor(a),
        "cholesky-solve": lambda: torch.cholesky_solve(rhs, linalg.cholesky(a)),
        "lu-solve": lambda: linalg.lu_solve(*linalg.lu_factor(a), rhs),
        "geqrf": lambda: torch.geqrf(a),
        "qr": lambda: linalg.qr(a),
        "solve": lambda: linalg.solve(a, rhs),
        "inv": lambda: linalg.inv(a),
        "lstsq": lambda: linalg.lstsq(a, rhs),  # the CPU default driver, gelsy
        "eigh": lambda: linalg.eigh(a),
        "svd": lambda: linalg.svd(a),
    }[op]


def main():
    ap = anchor_parser(lockstep=True)
    ap.add_argument("--cases", default="",
                    help="comma-separated case names (<op>/<dtype>/<batch>x<n>x<n>) to time "
                         "without --serve")
    args = ap.parse_args()
    torch = import_torch()
    if torch is None:
        return 2
    state = {"threads": None, "case": None, "fn": None}

    def rows_for(name, t):
        case = parse(name)
        if case is None:
            return []
        op, dtype, batch, n = case
        if state["threads"] != t:  # setting it again, even to the same count, costs a call
            torch.set_num_threads(t)
            state["threads"] = t
        if state["case"] != name:  # the last case's inputs are kept: it comes back each turn
            state["fn"] = None
            state["case"], state["fn"] = name, call(torch, op, batch, n, getattr(torch, dtype))
        row = {"suite": "linalg", "case": name, "impl": "torch", "threads": t}
        row.update(measure(state["fn"], args.reps, args.min_time, args.max_reps, key=(name, t)))
        row.update(gflops=None, gbps=None)
        return [row]

    run_cases(args, [c for c in args.cases.split(",") if c], rows_for)
    return 0


if __name__ == "__main__":
    sys.exit(main())
