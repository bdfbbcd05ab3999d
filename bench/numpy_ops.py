#!/usr/bin/python3
"""NumPy anchor for `tessera bench ops`: prints one JSON line per case (with --serve, for the
cases named on stdin; see anchor_common.serve).

Run by the `tessera` command once per thread count, with OMP_NUM_THREADS and
OPENBLAS_NUM_THREADS set in the environment (NumPy reads them at import; its reductions are
single-threaded anyway). --threads only labels the rows. Cases NumPy has no routine for
(gelu: no vectorised erf) are printed as skipped, never approximated.
"""
import sys

from anchor_common import anchor_parser, measure, run_cases


def softmax_rows(np, x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def cases(np):
    rng = np.random.default_rng(0)
    full = rng.standard_normal(1 << 26, dtype=np.float32)
    square = rng.standard_normal((8192, 8192), dtype=np.float32)
    rows = rng.standard_normal((4096, 4096), dtype=np.float32)
    bias = rng.standard_normal(4096, dtype=np.float32)
    out = [
        ("sum/float32/67108864", lambda: full.sum()),
        ("mean/float32/67108864", lambda: full.mean()),
        ("amax/float32/67108864", lambda: full.max()),
        ("argmax/float32/67108864", lambda: full.argmax()),
        ("var/float32/67108864", lambda: full.var(ddof=1)),
        ("norm/float32/67108864", lambda: np.linalg.norm(full)),
    ]
    for d in (1, 0):
        s = f"float32/8192x8192/dim{d}"
        out += [
            (f"sum/{s}", lambda d=d: square.sum(axis=d)),
            (f"amax/{s}", lambda d=d: square.max(axis=d)),
            (f"argmax/{s}", lambda d=d: square.argmax(axis=d)),
            (f"var/{s}", lambda d=d: square.var(axis=d, ddof=1)),
        ]
    out += [
        ("add/float32/4096x4096/broadcast4096", lambda: rows + bias),
        ("gelu/float32/67108864", "NumPy has no vectorised erf (exact gelu)"),
        ("softmax/float32/4096x4096/dim1", lambda: softmax_rows(np, rows)),
        ("randn/float32/67108864", lambda: rng.standard_normal(1 << 26, dtype=np.float32)),
        ("rand/float32/67108864", lambda: rng.random(1 << 26, dtype=np.float32)),
    ]
    return out


def main():
    ap = anchor_parser(lockstep=True)
    args = ap.parse_args()
    try:
        import numpy as np
    except ImportError as e:
        print(f"numpy is not installed: {e}", file=sys.stderr)
        return 2
    table = cases(np)

    def rows_for(case, t):
        for name, fn in table:
            if name != case:
                continue
            row = {"suite": "ops", "case": name, "impl": "numpy", "threads": t}
            if isinstance(fn, str):
                row.update(median_s=None, min_s=None, max_s=None, reps=0, skipped=fn)
            else:
                row.update(measure(fn, args.reps, args.min_time, args.max_reps))
            row.update(gflops=None, gbps=None)
            yield row

    run_cases(args, [name for name, _ in table], rows_for)
    return 0


if __name__ == "__main__":
    sys.exit(main())
