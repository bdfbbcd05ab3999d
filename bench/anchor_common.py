"""Shared by the anchor scripts in bench/ (imported from the script's own folder).

measure() times fn the same way Tessera's bench does (src/cli/bench_util.cpp): one warm-up
call, then at least `reps` calls and at least `min_time` seconds, at most `max_reps` calls;
it returns the fields of a JSON bench row, the raw times included ("times_s").

serve() is the lockstep mode (--serve) of the scripts whose cases the tessera command
interleaves with its own (bench ops): on a shared machine the bandwidth a neighbour leaves
drifts within seconds, so Tessera and its anchors take turns on each case.
"""
import argparse
import ctypes
import json
import math
import os
import sys
import time


def import_torch():
    """torch, or None after saying why on stderr (the caller exits with status 2)."""
    try:
        import torch
        return torch
    except ImportError as e:
        print(f"torch is not installed: {e}", file=sys.stderr)
        return None


def anchor_parser(cases_help=None, lockstep=False):
    """The options every anchor takes: --threads (comma-separated counts), the timing budget
    and, when the script times a list of cases, --cases; with `lockstep`, --filter and
    --serve (see run_cases). Scripts add their own to it."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", default="1", help="comma-separated thread counts")
    if cases_help:
        ap.add_argument("--cases", required=True, help=cases_help)
    if lockstep:
        ap.add_argument("--filter", default="", help="only cases whose name contains this")
        ap.add_argument("--serve", action="store_true",
                        help="lockstep mode: time the cases named on stdin (see serve)")
    add_timing_args(ap)
    return ap


def thread_counts(args):
    return [int(x) for x in args.threads.split(",")]


def add_timing_args(ap):
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--min-time", type=float, default=1.0)
    ap.add_argument("--max-reps", type=int, default=100)


# key -> the time of its fastest timed call so far (lockstep mode measures a case many times,
# in turns)
_fastest = {}


def measure(fn, reps, min_time, max_reps, key=None):
    """key names what fn times across calls (default: fn itself). A script that makes a new fn
    for every turn passes a key such as (case, threads): keyed by fn, each turn would warm up
    again, and _fastest would keep every fn, and the tensors it holds, alive."""
    # A warm-up call first: page faults, caches, threads woken. A function that has never run
    # in under 50 ms needs none (a thread wakes in well under a millisecond), which halves the
    # time of the slow anchors' turns. Its fastest call decides, not its last: on a VM, the
    # first touch of large memory after a large free in the same process can cost ~5 us a page
    # (PyTorch's functional gelu frees 256 MB, and the torch-out gelu that follows it read
    # 0.5 s instead of 47 ms), and one such call must not switch the warm-up off for good.
    key = fn if key is None else key
    if _fastest.get(key, 0.0) < 0.05:
        fn()
    times = []
    start = time.perf_counter()
    while len(times) < max_reps and (len(times) < reps or time.perf_counter() - start < min_time):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    _fastest[key] = min(times + [_fastest.get(key, math.inf)])
    times.sort()
    n = len(times)
    median = times[n // 2] if n % 2 else 0.5 * (times[n // 2 - 1] + times[n // 2])
    return {"median_s": median, "min_s": times[0], "max_s": times[-1], "reps": n,
            "times_s": times}


def _openblas_shutdown():
    """OpenBLAS's blas_thread_shutdown_ in this process (NumPy's and PyTorch's BLAS is Debian's
    libopenblas.so.0), or None where it is not loaded or lacks the function."""
    try:
        return ctypes.CDLL("libopenblas.so.0", mode=os.RTLD_NOLOAD).blas_thread_shutdown_
    except (OSError, AttributeError):
        return None


def serve(rows_for):
    """Says {"ready": true} (the script has imported its libraries and built what it built
    before serving: the tessera command times nothing beside that start-up), then reads
    "<case> <threads>" lines from stdin until it closes; for each, prints the rows
    rows_for(case, threads) returns (a case it does not know: no rows), then {"done": true}.
    After a multi-threaded case OpenBLAS's worker threads are ended (the next call starts them
    again): they would spin for 0.1 s or more and take a core from the tessera command's turn
    (src/cli/bench_anchors.h)."""
    shutdown = _openblas_shutdown()  # the script has loaded its libraries by now
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        parts = line.split()
        if len(parts) != 2:
            continue
        threads = int(parts[1])
        for row in rows_for(parts[0], threads):
            print(json.dumps(row))
        if threads > 1 and shutdown:
            shutdown()
        print(json.dumps({"done": True}), flush=True)


def emit_timed(suite, case, threads, fn, args):
    """Times fn with the command line's budget and prints the torch row (no GFLOP/s)."""
    row = {"suite": suite, "case": case, "impl": "torch", "threads": threads}
    row.update(measure(fn, args.reps, args.min_time, args.max_reps))
    row.update(gflops=None, gbps=None)
    print(json.dumps(row), flush=True)


def run_cases(args, names, rows_for):
    """With --serve, serve(rows_for); otherwise prints rows_for's rows for every case in names
    that matches --filter, at each of --threads."""
    if args.serve:
        serve(rows_for)
        return
    for t in thread_counts(args):
        for name in names:
            if args.filter in name:
                for row in rows_for(name, t):
                    print(json.dumps(row), flush=True)
