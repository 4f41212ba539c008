"""`tracegrad.random.normal` of 10**7 numbers against JAX's `jax.random.normal` (jitted)
and NumPy's `Generator.standard_normal`, in one run, one thread each:

    python benchmarks/random_normal.py [--size N]

tracegrad runs its numba backend (the key a traced argument: one kernel, any key); JAX
runs with x64 (float64 as tracegrad's default) and XLA limited to one thread. Times are
the best and the median of 9 calls after a warm-up call; the first call (trace and
compile) is reported apart. Float64 and float32. Not a test: nothing here asserts.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

os.environ.setdefault("TRACEGRAD_CACHE_DIR", tempfile.mkdtemp(prefix="tg-bench-cache-"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from one_thread import jax  # noqa: E402  (before NumPy: one thread each)

import numpy as np  # noqa: E402
from machine import best_and_median, cpu  # noqa: E402
from run import first_call  # noqa: E402

import tracegrad as tg  # noqa: E402
from tracegrad import random as tr  # noqa: E402

tg.config.background_compile = False


def measure(n: int, dtype) -> list:
    """(library, (best, median), first call or None) of n normals of `dtype`."""
    f = tg.function(lambda k: tr.normal(k, (n,), dtype), backend="numba")
    first = first_call(lambda: f(tr.key(0)))
    rows = [("tracegrad", best_and_median(lambda: f(tr.key(1)), 9), first)]
    if jax is not None:
        j = jax.jit(lambda k: jax.random.normal(k, (n,), dtype))
        jk = jax.random.PRNGKey(1)
        first = first_call(lambda: j(jk).block_until_ready())
        rows.append(("jax", best_and_median(lambda: j(jk).block_until_ready(), 9), first))
    rng = np.random.default_rng(0)
    rows.append(("numpy", best_and_median(lambda: rng.standard_normal(n, dtype=dtype), 9), None))
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=10**7)
    n = parser.parse_args(argv).size
    print(f"normal of {n:,} numbers, one thread; CPU: {cpu()}")
    print(f"{'dtype':8} {'library':10} {'best ms':>8} {'median ms':>10} {'first call ms':>14}")
    for dtype in (np.float64, np.float32):
        for name, (best, median), first in measure(n, dtype):
            first_text = f"{first * 1e3:14.0f}" if first is not None else f"{'':>14}"
            print(f"{np.dtype(dtype).name:8} {name:10} {best * 1e3:8.1f} {median * 1e3:10.1f} "
                  f"{first_text}")

if __name__ == "__main__":
    main()
