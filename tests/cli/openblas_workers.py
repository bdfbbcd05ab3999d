"""bench/anchor_common.py ends OpenBLAS's worker threads after a multi-threaded case, so that
they do not spin beside the tessera command's next turn; OpenBLAS's next threaded call must
start them again and compute as before. Argument: the bench/ folder. Run with
OPENBLAS_NUM_THREADS=2; exits 77 (skipped) on a machine with one CPU."""
import os
import sys

sys.path.insert(0, sys.argv[1])
import numpy as np  # noqa: E402  (after the path: anchor_common sits beside the scripts)

import anchor_common  # noqa: E402

if len(os.sched_getaffinity(0)) < 2:
    print("one CPU: OpenBLAS starts no workers")
    sys.exit(77)


def threads():
    return len(os.listdir("/proc/self/task"))


a = np.ones((512, 512), dtype=np.float32)
assert (a @ a == 512.0).all()  # sgemm, threaded
running = threads()
stop = anchor_common._openblas_shutdown()
assert stop is not None, "this OpenBLAS has no blas_thread_shutdown_"
stop()
stopped = threads()
assert stopped < running, (running, stopped)
assert (a @ a == 512.0).all()
assert threads() == running, (running, threads())
print(f"threads {running} -> {stopped} -> {threads()}: workers ok")
