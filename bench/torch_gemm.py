#!/usr/bin/python3
"""PyTorch 1.13 anchor for `tessera bench gemm`: one JSON line per case and thread count.

Run by the `tessera` command in the same invocation (BENCHMARKS.md). Cases are M x K x N
products (float32, or bfloat16 with --dtype), named as in src/cli/bench_gemm.cpp
(`mm/float32/MxKxN`; a case of four numbers is a batch, `bmm/float32/BxMxKxN` through
torch.bmm); each runs torch.mm into a preallocated output (as Tessera and OpenBLAS do), so
allocation and page faults of a fresh result are not timed. Threads: torch.set_num_threads per
--threads entry; Debian's PyTorch runs mm on OpenBLAS, whose thread count is
OPENBLAS_NUM_THREADS at load time, so the caller runs this script once per thread count with
that variable set. With --serve it times the cases named on stdin, in turns with the tessera
command's own (anchor_common.serve).
"""
import sys

from anchor_common import anchor_parser, import_torch, measure, run_cases


def main():
    ap = anchor_parser("comma-separated MxKxN (or BxMxKxN)", lockstep=True)
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    args = ap.parse_args()
    torch = import_torch()
    if torch is None:
        return 2
    dt = getattr(torch, args.dtype)
    state = {"threads": None, "case": None, "operands": None}

    def operands(shape):
        # BxMxKxN is a batched product (torch.bmm), MxKxN a plain one. The last case's operands
        # are kept: in lockstep mode a case comes back once per turn.
        if state["case"] != shape:
            batch, (m, k, n) = (shape[0], shape[1:]) if len(shape) == 4 else (None, shape)
            lead = () if batch is None else (batch,)
            g = torch.Generator().manual_seed(0)
            a = (torch.rand(*lead, m, k, generator=g) * 2 - 1).to(dt)
            b = (torch.rand(*lead, k, n, generator=g) * 2 - 1).to(dt)
            c = torch.empty(*lead, m, n, dtype=dt)
            state["case"], state["operands"] = shape, (a, b, c)
        return state["operands"]

    def rows_for(name, t):
        kind, dtype, dims = (name.split("/") + ["", "", ""])[:3]
        if kind not in ("mm", "bmm") or dtype != args.dtype:
            return []
        shape = tuple(int(x) for x in dims.split("x"))
        if len(shape) != (3 if kind == "mm" else 4):
            return []
        if state["threads"] != t:  # setting it again, even to the same count, costs a call
            torch.set_num_threads(t)
            state["threads"] = t
        a, b, c = operands(shape)
        op = torch.mm if kind == "mm" else torch.bmm
        row = {"suite": "gemm", "case": name, "impl": "torch", "threads": t}
        row.update(measure(lambda: op(a, b, out=c), args.reps, args.min_time, args.max_reps,
                           key=(name, t)))
        flops = 2.0 * (shape[0] if kind == "bmm" else 1) * shape[-3] * shape[-2] * shape[-1]
        row.update(gflops=flops / row["median_s"] / 1e9, gbps=None)
        return [row]

    names = []
    for c in args.cases.split(","):
        kind = "bmm" if c.count("x") == 3 else "mm"
        names.append(f"{kind}/{args.dtype}/{c}")
    run_cases(args, names, rows_for)
    return 0


if __name__ == "__main__":
    sys.exit(main())
