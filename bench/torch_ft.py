#!/usr/bin/python3
"""PyTorch 1.13 anchor for `tessera bench ft`: recovery of a gloo job from the loss of a rank.

A trial starts `--ranks` processes (spawn) in one gloo group (TCP store on 127.0.0.1, one
thread each). Each runs training steps of one all_reduce of a float32 "gradient" of 1M elements
(4 MiB). At step 5 the last rank issues its all_reduce asynchronously, writes time.time_ns()
(the wall clock, shared by every process on this host) to shared memory and SIGKILLs itself,
so it dies in the middle of the collective. Each survivor notes when its all_reduce raised
(detection), calls destroy_process_group, joins a new gloo group of the survivors alone (ranks
kept, world size one less, a fresh store on a port agreed in advance) and runs the step again
(the next committed step), noting when it returns. Nothing else is restored: no model,
optimizer or data-loader state, only the group. A trial's recovery is the last survivor's
committed step minus the kill time; its detection, the last survivor's exception minus the
kill time. Process start-up and the first group's creation are not timed.

Prints one JSON row: suite "ft", case "recovery/kill1of<ranks>", impl "torch-gloo", threads =
ranks, median_s/min_s/max_s/reps of recovery over the trials, detect_s = median detection.
A trial that fails (a survivor errors out, hangs or dies) turns the row into a skipped one
saying why. Per-trial times and the survivors' error messages go to stderr.

    bench/torch_ft.py [--ranks 4] [--trials 10 | --quick] [--port P]

--port P uses ports P + 2t (first group) and P + 2t + 1 (survivors' group) in trial t instead
of free ones picked by the kernel; --quick runs 3 trials.
"""
import argparse
import datetime
import json
import multiprocessing as mp
import os
import queue
import signal
import socket
import statistics
import sys
import time

from anchor_common import import_torch

NUMEL = 1 << 20  # 4 MiB of float32 per step
KILL_STEP = 5
TIMEOUT_S = 30  # store, rendezvous and collective timeout of each group


def first_line(e):
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__


def worker(rank, n, port, new_port, kill_ns, results):
    try:
        torch = import_torch()
        import torch.distributed as dist
        torch.set_num_threads(1)
        timeout = datetime.timedelta(seconds=TIMEOUT_S)
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=n, timeout=timeout)
        grad = torch.zeros(NUMEL)
        noticed = None
        for step in range(KILL_STEP + 10):
            if rank == n - 1 and step == KILL_STEP:
                dist.all_reduce(grad, async_op=True)
                kill_ns.value = time.time_ns()
                os.kill(os.getpid(), signal.SIGKILL)
            try:
                dist.all_reduce(grad)
            except Exception as e:  # gloo raises RuntimeError once a peer's socket closes
                noticed, why = time.time_ns(), first_line(e)
                break
        if noticed is None:
            raise RuntimeError(f"no failure noticed by step {KILL_STEP + 10}")
        dist.destroy_process_group()
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{new_port}", rank=rank,
                                world_size=n - 1, timeout=timeout)
        dist.all_reduce(grad)  # the step again, among the survivors: committed
        done = time.time_ns()
        results.put((rank, noticed, done, why))
        dist.destroy_process_group()
    except Exception as e:
        results.put((rank, None, None, f"rank {rank}: {first_line(e)}"))


def free_ports(k):
    socks = [socket.socket() for _ in range(k)]  # all bound at once: k distinct ports
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def trial(ctx, n, port, new_port):
    """(detection, recovery) in seconds, and each survivor's times and error message."""
    kill_ns = ctx.RawValue("q", 0)
    results = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(r, n, port, new_port, kill_ns, results),
                         daemon=True) for r in range(n)]
    for p in procs:
        p.start()
    got = {}
    deadline = time.monotonic() + 3 * TIMEOUT_S + 60
    try:
        while len(got) < n - 1:
            try:
                r = results.get(timeout=0.5)
                got[r[0]] = r
                continue
            except queue.Empty:
                pass
            silent = [r for r in range(n - 1) if r not in got and procs[r].exitcode is not None]
            if silent:
                time.sleep(1)  # its last words may still be in the pipe
                while not results.empty():
                    r = results.get()
                    got[r[0]] = r
                silent = [r for r in silent if r not in got]
                if silent:
                    raise RuntimeError(f"rank {silent[0]} exited with status "
                                       f"{procs[silent[0]].exitcode} without reporting")
            if time.monotonic() > deadline:
                raise RuntimeError(f"timed out; ranks {sorted(got)} reported")
    finally:
        for p in procs:
            p.join(timeout=10)
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join()
    failed = [r for r in got.values() if r[1] is None]
    if failed:
        raise RuntimeError(failed[0][3])
    if procs[n - 1].exitcode != -signal.SIGKILL or kill_ns.value == 0:
        raise RuntimeError(f"rank {n - 1} was not killed (exit status {procs[n - 1].exitcode})")
    detect = (max(r[1] for r in got.values()) - kill_ns.value) * 1e-9
    recover = (max(r[2] for r in got.values()) - kill_ns.value) * 1e-9
    per_rank = "; ".join(f"rank {r}: noticed {(got[r][1] - kill_ns.value) * 1e-6:.1f} ms, "
                         f"committed {(got[r][2] - kill_ns.value) * 1e-6:.1f} ms ({got[r][3]})"
                         for r in sorted(got))
    return detect, recover, per_rank


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--quick", action="store_true", help="3 trials")
    ap.add_argument("--port", type=int, default=0, help="base port (default: free ones)")
    args = ap.parse_args()
    n, trials = args.ranks, 3 if args.quick else args.trials
    torch = import_torch()
    if torch is None:
        return 2
    import torch.distributed as dist
    row = {"suite": "ft", "case": f"recovery/kill1of{n}", "impl": "torch-gloo", "threads": n}
    ctx = mp.get_context("spawn")
    detects, recovers = [], []
    try:
        if n < 2:
            raise RuntimeError("--ranks must be at least 2")
        if not dist.is_available() or not dist.is_gloo_available():
            raise RuntimeError("this torch build has no gloo backend")
        for t in range(trials):
            ports = [args.port + 2 * t, args.port + 2 * t + 1] if args.port else free_ports(2)
            detect, recover, per_rank = trial(ctx, n, *ports)
            detects.append(detect)
            recovers.append(recover)
            print(f"trial {t}: detect {detect * 1e3:.1f} ms, recovery {recover * 1e3:.1f} ms; "
                  f"{per_rank}", file=sys.stderr, flush=True)
    except Exception as e:
        row["skipped"] = f"trial {len(recovers)}: {first_line(e)}"
        print(json.dumps(row), flush=True)
        return 0
    recovers.sort()
    row.update(median_s=statistics.median(recovers), min_s=recovers[0], max_s=recovers[-1],
               reps=trials, detect_s=statistics.median(detects), trials=trials,
               gflops=None, gbps=None)
    print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
