#!/usr/bin/python3
"""PyTorch 1.13 anchor for `tessera bench ops`: prints one JSON line per case and thread count
(with --serve, for the cases named on stdin; see anchor_common.serve).

Run by the `tessera` command in the same invocation (BENCHMARKS.md); the case strings match
src/cli/bench_ops.cpp. Threads: torch.set_num_threads for each count in --threads.
"""
import sys

from anchor_common import anchor_parser, import_torch, measure, run_cases


def cases(torch):
    F = torch.nn.functional
    g = torch.Generator().manual_seed(0)
    full = torch.randn(1 << 26, generator=g)
    square = torch.randn(8192, 8192, generator=g)
    rows = torch.randn(4096, 4096, generator=g)
    bias = torch.randn(4096, generator=g)
    out = [
        ("sum/float32/67108864", lambda: full.sum()),
        ("mean/float32/67108864", lambda: full.mean()),
        ("amax/float32/67108864", lambda: full.amax()),
        ("argmax/float32/67108864", lambda: full.argmax()),
        ("var/float32/67108864", lambda: full.var()),
        ("norm/float32/67108864", lambda: torch.linalg.vector_norm(full)),
    ]
    for d in (1, 0):
        s = f"float32/8192x8192/dim{d}"
        out += [
            (f"sum/{s}", lambda d=d: square.sum(d)),
            (f"amax/{s}", lambda d=d: square.amax(d)),
            (f"argmax/{s}", lambda d=d: square.argmax(d)),
            (f"var/{s}", lambda d=d: square.var(d)),
        ]
    out += [
        ("add/float32/4096x4096/broadcast4096", lambda: rows + bias),
        ("gelu/float32/67108864", lambda: F.gelu(full)),
        ("softmax/float32/4096x4096/dim1", lambda: torch.softmax(rows, 1)),
        ("randn/float32/67108864", lambda: torch.randn(1 << 26, generator=g)),
        ("rand/float32/67108864", lambda: torch.rand(1 << 26, generator=g)),
    ]
    return out


def out_cases(torch):
    """impl "torch-out": the same ops writing into a preallocated output. A fresh 64-256 MB
    result from PyTorch's allocator is new mmap'ed memory whose page faults can cost more than
    the kernel; these rows show the kernel alone."""
    g = torch.Generator().manual_seed(0)
    full = torch.randn(1 << 26, generator=g)
    rows = torch.randn(4096, 4096, generator=g)
    bias = torch.randn(4096, generator=g)
    full_out, rows_out = torch.empty_like(full), torch.empty_like(rows)
    return [
        ("add/float32/4096x4096/broadcast4096", lambda: torch.add(rows, bias, out=rows_out)),
        ("gelu/float32/67108864", lambda: torch._C._nn.gelu(full, out=full_out)),
        ("softmax/float32/4096x4096/dim1", lambda: torch._softmax(rows, 1, False, out=rows_out)),
        ("randn/float32/67108864", lambda: full_out.normal_(generator=g)),
        ("rand/float32/67108864", lambda: full_out.uniform_(generator=g)),
    ]


def main():
    ap = anchor_parser(lockstep=True)
    args = ap.parse_args()
    torch = import_torch()
    if torch is None:
        return 2
    table = [(n, f, "torch") for n, f in cases(torch)]
    table += [(n, f, "torch-out") for n, f in out_cases(torch)]

    def rows_for(case, t):
        # Only on a change: setting it, even to the same count, makes the next call rebuild
        # the thread team (twice the time of a 64M sum on 2 threads).
        if torch.get_num_threads() != t:
            torch.set_num_threads(t)
        for name, fn, impl in table:
            if name == case:
                row = {"suite": "ops", "case": name, "impl": impl, "threads": t}
                row.update(measure(fn, args.reps, args.min_time, args.max_reps))
                row.update(gflops=None, gbps=None)
                yield row

    run_cases(args, list(dict.fromkeys(name for name, _, _ in table)), rows_for)
    return 0


if __name__ == "__main__":
    sys.exit(main())
