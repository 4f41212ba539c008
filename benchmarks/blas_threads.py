"""The crossover of tracegrad's BLAS thread policy: SciPy's dgemm (the library numba kernels
call) on one thread and on the library's default count, for square and W5/W6-shaped
products.

    python benchmarks/blas_threads.py [--busy]

`--busy` runs a busy Python loop in another process meanwhile (another program holding a
core). Prints the median time per call of each product at 1 and N threads, their ratio (> 1:
N threads faster), the multiply-adds of the product, and the load average; then the CPU time
of OpenBLAS's worker threads while a tracegrad kernel computes W5's largest product.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import numpy as np
from scipy.linalg.blas import dgemm

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import median_time  # noqa: E402

from tracegrad.backends import blas_threads  # noqa: E402

# (m, k, n): o[m, n] = a[m, k] @ b[k, n]
SHAPES = [(64, 64, 64), (1024, 16, 32), (1024, 32, 16), (100, 200, 100), (128, 128, 128),
          (16384, 32, 16), (256, 256, 256), (512, 512, 512), (1024, 1024, 1024)]


def _cpu_ticks() -> dict:
    """CPU time (clock ticks) of each thread of this process (Linux's /proc)."""
    ticks = {}
    for tid in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{tid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        ticks[tid] = int(fields[11]) + int(fields[12])  # user + system
    return ticks


def kernel_product(calls=300):
    """A tracegrad kernel computing W5's largest product (16384x32 @ 32x16) `calls` times:
    the wall time and the CPU seconds of the calling thread and of all others (OpenBLAS's
    workers: 0 when its calls stay on one thread)."""
    import tracegrad as tg

    tg.config.background_compile = False
    f = tg.function(lambda a, b: a @ b, backend="numba")
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((16384, 32)), rng.standard_normal((32, 16))
    f(a, b)
    time.sleep(0.5)  # OpenBLAS's workers stop spinning
    before, t = _cpu_ticks(), time.perf_counter()
    for _ in range(calls):
        f(a, b)
    wall, after = time.perf_counter() - t, _cpu_ticks()
    hz, me = os.sysconf("SC_CLK_TCK"), str(os.getpid())
    others = sum(v - before.get(k, 0) for k, v in after.items() if k != me)
    print(f"kernel a @ b, 16384x32 @ 32x16, {calls} calls: wall {wall:.2f} s, calling thread "
          f"{(after[me] - before[me]) / hz:.2f} s CPU, other threads {others / hz:.2f} s CPU, "
          f"load {os.getloadavg()[0]:.2f}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--busy", action="store_true")
    args = parser.parse_args(argv)
    if blas_threads.library() is None:
        raise SystemExit("the kernels' BLAS library is not one whose threads can be set")
    _, get, set_ = blas_threads._library
    default = get()
    busy = subprocess.Popen([sys.executable, "-c", "while 1: pass"]) if args.busy else None
    try:
        time.sleep(0.5 if busy else 0)
        print(f"library: {blas_threads.library().filepath} ({default} threads by default)")
        print(f"{'product':>20s} {'mult-adds':>10s} {'1 thread':>10s} {default} threads"
              f"  ratio  load")
        rng = np.random.default_rng(0)
        for m, k, n in SHAPES:
            a = np.asfortranarray(rng.standard_normal((m, k)))
            b = np.asfortranarray(rng.standard_normal((k, n)))
            times = {}
            for count in (1, default):
                set_(count)
                times[count] = median_time(lambda a=a, b=b: dgemm(1.0, a, b))
            set_(default)
            load = os.getloadavg()[0]
            print(f"{f'{m}x{k} @ {k}x{n}':>20s} {m * k * n:10d} {times[1] * 1e6:8.1f}us "
                  f"{times[default] * 1e6:8.1f}us {times[1] / times[default]:6.2f} {load:5.2f}",
                  flush=True)
        kernel_product()
    finally:
        set_(default)
        if busy is not None:
            busy.kill()


if __name__ == "__main__":
    main()
