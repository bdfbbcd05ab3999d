#!/usr/bin/python3
"""PyTorch 1.13 anchor for `tessera bench comm`: torch.distributed with the gloo backend.

Timed exactly as src/cli/bench_comm.cpp times Tessera: one process per rank on this machine,
float32 zeros, one warm-up call, then `--trials` trials of `iterations(size)` back-to-back
calls after a barrier; a trial's time per call is the slowest rank's, and rank 0 prints the
median, min and max over the trials as JSON rows (impl "torch-gloo", "threads" = ranks).
Sizes follow nccl-tests (the op's largest buffer). all_gather runs in its list form (views of
one output), as gloo in 1.13 has no all_gather_into_tensor. An op this torch build cannot run
with gloo (reduce_scatter in 1.13) prints a skipped row saying why.
"""
import argparse
import json
import socket
import sys
import time

from anchor_common import import_torch


def size_label(b):
    if b >= 1 << 20:
        return f"{b >> 20}MiB"
    if b >= 1024:
        return f"{b >> 10}KiB"
    return f"{b}B"


def iterations(b):
    return max(2, min(500, (32 << 20) // max(b, 4096)))


def worker(rank, n, port, ops, sizes, trials):
    torch = import_torch()
    import torch.distributed as dist
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=n)
    for op in ops:
        for b in sizes:
            case = f"{op}/float32/{size_label(b)}"
            big = max(n, b // 4 // n * n)
            full_buf, part = torch.zeros(big), torch.zeros(big // n)
            a2a_out = torch.zeros(big)
            if op == "all_reduce":
                run = lambda: dist.all_reduce(full_buf)
            elif op == "all_gather":  # gloo in 1.13 has no all_gather_into_tensor: list form
                chunks = list(full_buf.chunk(n))
                run = lambda: dist.all_gather(chunks, part)
            elif op == "reduce_scatter":
                run = lambda: dist.reduce_scatter_tensor(part, full_buf)
            else:
                run = lambda: dist.all_to_all_single(a2a_out, full_buf)
            try:
                run()
            except (RuntimeError, AttributeError) as e:
                # Every rank fails the same way, before any transfer: the group stays usable.
                if rank == 0:
                    why = str(e).splitlines()[0] if str(e) else type(e).__name__
                    print(json.dumps({"suite": "comm", "case": case, "impl": "torch-gloo",
                                      "threads": n, "skipped": why}), flush=True)
                continue
            iters = iterations(b)
            times = []
            for _ in range(trials):
                dist.barrier()
                t0 = time.perf_counter()
                for _ in range(iters):
                    run()
                slowest = torch.tensor([(time.perf_counter() - t0) / iters], dtype=torch.float64)
                dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
                times.append(slowest.item())
            times.sort()
            if rank == 0:
                print(json.dumps({"suite": "comm", "case": case, "impl": "torch-gloo",
                                  "threads": n, "median_s": times[len(times) // 2],
                                  "min_s": times[0], "max_s": times[-1], "reps": len(times),
                                  "gflops": None, "gbps": None}), flush=True)
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", default="2")
    ap.add_argument("--ops", required=True)
    ap.add_argument("--sizes", required=True)
    ap.add_argument("--trials", type=int, default=5)
    args = ap.parse_args()
    torch = import_torch()
    if torch is None:
        return 2
    import torch.multiprocessing as mp
    ops = args.ops.split(",")
    sizes = [int(x) for x in args.sizes.split(",")]
    for n in (int(x) for x in args.ranks.split(",")):
        mp.spawn(worker, args=(n, free_port(), ops, sizes, args.trials), nprocs=n, join=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
