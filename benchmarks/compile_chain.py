"""First-call (compile) time of long elementwise chains on the numba backend.

    TRACEGRAD_NUMBA_MAX_FUSED=128 python benchmarks/compile_chain.py 45 150 450
    python benchmarks/compile_chain.py --pair 62 125 250 500
    python benchmarks/compile_chain.py --mixed 45 150 450

Each argument is a number of steps; a step is one of `sin(x) * 0.9 + x * 0.1`,
`tanh(x) * 0.8 - x * 0.05`, `exp(-x * x) * 0.5 + x * 0.3` (about 6.7 ops per step after
optimization) on 1e5 elements, in turn or, with `--mixed`, in a random order (so that
no two loop nests have the same code); with `--pair`, issue 12's chain: the first two alternating
(4 ops per step) on 1000 elements. The kernel cache is a fresh directory, so every first
call compiles (the shared helper module is compiled before, by a small function); the
first call is reported as CPU time of this process (the compile is single-threaded, so on
a busy machine it is the better measure) and wall time; values are checked against the
numpy backend. Not a test: nothing here asserts.
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


def chain(steps, kinds=3, mixed=False):
    order = np.random.default_rng(0).integers(0, 3, steps) if mixed else np.arange(steps) % kinds

    def f(x):
        for k in range(steps):
            if order[k] == 0:
                x = tnp.sin(x) * 0.9 + x * 0.1
            elif order[k] == 1:
                x = tnp.tanh(x) * 0.8 - x * 0.05
            else:
                x = tnp.exp(-x * x) * 0.5 + x * 0.3
        return x
    return f


def main(argv):
    pair, mixed = "--pair" in argv, "--mixed" in argv
    argv = [a for a in argv if a not in ("--pair", "--mixed")]
    kinds = 2 if pair else 3
    x = np.linspace(-2.0, 2.0, 1000 if pair else 100_000)
    with open("/proc/cpuinfo") if os.path.exists("/proc/cpuinfo") else open(os.devnull) as f:
        cpu = next((line.split(":", 1)[1].strip() for line in f
                    if line.startswith("model name")), "unknown CPU")
    what = "pair" if pair else "mixed three-step" if mixed else "three-step"
    print(f"{cpu}; {what} chain on {x.size} elements", flush=True)
    # Numba and the helpers
    tg.function(lambda x: tnp.sin(x) * 2.0 + tnp.tanh(x) + tnp.exp(x), backend="numba")(x)
    for steps in [int(a) for a in argv] or [45, 150]:
        f = tg.function(chain(steps, kinds, mixed), backend="numba")
        c, t = time.process_time(), time.perf_counter()
        y = f(x)
        first = time.perf_counter() - t
        first_cpu = time.process_time() - c
        err = np.max(np.abs(y - tg.function(chain(steps, kinds, mixed), backend="numpy")(x)))
        run = float("inf")
        for _ in range(20):
            t = time.perf_counter()
            f(x)
            run = min(run, time.perf_counter() - t)
        ops = len(tg.optimize(f.get_concrete_function(x).graph).operations)
        print(f"{steps} steps ({ops} ops): first call {first_cpu:.2f} s CPU ({first:.2f} s "
              f"wall), run {run * 1e3:.3f} ms (best of 20), max |numba - numpy| {err:.1e}",
              flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
