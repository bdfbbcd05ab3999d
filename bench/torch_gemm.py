#!/usr/bin/python3
"""PyTorch 1.13 anchor for `tessera bench gemm`: one JSON line per case and thread count.

Run by the `tessera` command in the same invocation (BENCHMARKS.md). Cases are M x K x N
products (float32, or bfloat16 with --dtype), named as in src/cli/bench_gemm.cpp
(`mm/float32/MxKxN`; a case of four numbers is a batch, `bmm/float32/BxMxKxN` through
torch.bmm); each runs torch.mm into a preallocated output (as Tessera and OpenBLAS do), so allocation and page
faults of a fresh result are not timed. Threads: torch.set_num_threads per --threads entry;
Debian's PyTorch runs mm on OpenBLAS, whose thread count is OPENBLAS_NUM_THREADS at load time,
so the caller runs this script once per thread count with that variable set.
"""
import json
import sys

from anchor_common import anchor_parser, import_torch, measure, thread_counts


def main():
    ap = anchor_parser("comma-separated MxKxN")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    args = ap.parse_args()
    torch = import_torch()
    if torch is None:
        return 2
    shapes = [tuple(int(x) for x in c.split("x")) for c in args.cases.split(",")]
    for t in thread_counts(args):
        torch.set_num_threads(t)
        for shape in shapes:
            # BxMxKxN is a batched product (torch.bmm, `bmm/...`), MxKxN a plain one.
            batch, (m, k, n) = (shape[0], shape[1:]) if len(shape) == 4 else (None, shape)
            lead = () if batch is None else (batch,)
            g = torch.Generator().manual_seed(0)
            dt = getattr(torch, args.dtype)
            a = (torch.rand(*lead, m, k, generator=g) * 2 - 1).to(dt)
            b = (torch.rand(*lead, k, n, generator=g) * 2 - 1).to(dt)
            c = torch.empty(*lead, m, n, dtype=dt)
            name = "x".join(str(x) for x in shape)
            row = {"suite": "gemm", "case": f"{'mm' if batch is None else 'bmm'}/{args.dtype}/{name}",
                   "impl": "torch", "threads": t}
            op = torch.mm if batch is None else torch.bmm
            row.update(measure(lambda: op(a, b, out=c), args.reps, args.min_time, args.max_reps))
            row.update(gflops=2.0 * (batch or 1) * m * n * k / row["median_s"] / 1e9, gbps=None)
            print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
