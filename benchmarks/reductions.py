"""The reductions under GradBench's lse, alone: a float64 vector's sum, max, exp and the sum
of its exp, tracegrad's kernel beside JAX's, in one process, interleaved (process CPU time,
one thread each; docs/performance.md, GradBench section).

    python benchmarks/reductions.py [N]      # N elements, default 1280000 (lse's size)

tracegrad sums in NumPy's pairwise order (docs/numba.md, "Float sums"); XLA does not.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from one_thread import jax, jnp  # noqa: E402, I001  (before NumPy: one thread each)

import numpy as np  # noqa: E402

import tracegrad as tg  # noqa: E402
import tracegrad.numpy as tnp  # noqa: E402
from machine import cpu, interleaved  # noqa: E402

ROWS = {
    "sum": lambda xp: lambda x: xp.sum(x),
    "max": lambda xp: lambda x: xp.max(x),
    "exp": lambda xp: lambda x: xp.exp(x),
    "sum of exp": lambda xp: lambda x: xp.sum(xp.exp(x)),
}


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1280000
    tg.config.background_compile = False
    x = np.random.default_rng(0).random(n)
    xj = jnp.asarray(x)
    print(f"{cpu()}\nfloat64[{n}], process CPU time per call (median of 15 rounds)")
    for name, make in ROWS.items():
        f, fj = tg.function(make(tnp)), jax.jit(make(jnp))
        np.testing.assert_allclose(f(x), np.asarray(fj(xj)), rtol=1e-12)
        times = interleaved({"tracegrad": lambda: f(x),
                             "jax": lambda: fj(xj).block_until_ready()}, rounds=15)
        t, j = times["tracegrad"][0], times["jax"][0]
        print(f"  {name:11s} tracegrad {t * 1e3:.3f} ms, JAX {j * 1e3:.3f} ms ({t / j:.2f}x)")


if __name__ == "__main__":
    main()
