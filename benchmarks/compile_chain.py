"""First-call (compile) time of long elementwise chains on the numba backend.

    TRACEGRAD_NUMBA_MAX_FUSED=128 python benchmarks/compile_chain.py 45 150 450

Each argument is a number of steps; a step is one of `sin(x) * 0.9 + x * 0.1`,
`tanh(x) * 0.8 - x * 0.05`, `exp(-x * x) * 0.5 + x * 0.3` (about 6.7 ops per step after
optimization). The kernel cache is a fresh directory, so every first call compiles;
values are checked against the numpy backend. Not a test: nothing here asserts.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

os.environ["TRACEGRAD_CACHE_DIR"] = tempfile.mkdtemp(prefix="tg-chain-")

import numpy as np

import tracegrad as tg
import tracegrad.numpy as tnp

tg.config.background_compile = False  # timed calls measure the kernel, not the interim


def chain(steps):
    def f(x):
        for k in range(steps):
            if k % 3 == 0:
                x = tnp.sin(x) * 0.9 + x * 0.1
            elif k % 3 == 1:
                x = tnp.tanh(x) * 0.8 - x * 0.05
            else:
                x = tnp.exp(-x * x) * 0.5 + x * 0.3
        return x
    return f


def main(argv):
    x = np.linspace(-2.0, 2.0, 100_000)
    tg.function(lambda x: tnp.sin(x) * 2.0, backend="numba")(x)  # Numba and the helpers
    for steps in [int(a) for a in argv] or [45, 150]:
        f = tg.function(chain(steps), backend="numba")
        t = time.perf_counter()
        y = f(x)
        first = time.perf_counter() - t
        err = np.max(np.abs(y - tg.function(chain(steps), backend="numpy")(x)))
        t = time.perf_counter()
        for _ in range(5):
            f(x)
        run = (time.perf_counter() - t) / 5
        ops = len(tg.optimize(f.get_concrete_function(x).graph).operations)
        print(f"{steps} steps ({ops} ops): first call {first:.2f} s, run {run * 1e3:.2f} ms, "
              f"max |numba - numpy| {err:.1e}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
