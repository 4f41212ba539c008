"""The ELBO step of benchmarks/vae_elbo.py, tracegrad and JAX timed interleaved in one
process: 400 batches of 5 calls, the two libraries alternating (which goes first alternates
too), then the best batch, the 10th percentile and the median of each. On a shared, loaded
machine the fastest batches compare the code, the medians mostly the scheduler:
    python benchmarks/vae_elbo_interleaved.py
Not a test: nothing here asserts.
"""

from __future__ import annotations

import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from one_thread import jax, jnp  # noqa: E402, I001  (before NumPy: one thread each)
import numpy as np  # noqa: E402

import tracegrad as tg  # noqa: E402
from tracegrad import random as tr  # noqa: E402
from vae_elbo import BATCH, forward, vae  # noqa: E402

tg.config.background_compile = False
BATCHES, CALLS = 400, 5


def main():
    if jax is None:
        sys.exit("vae_elbo_interleaved: needs jax")
    rng = np.random.default_rng(0)
    x = vae.make_data(rng, BATCH)
    params = vae.init(rng)
    key = tr.key(0)
    ours = tg.function(tg.value_and_grad(vae.neg_elbo), backend="numba")

    def jax_loss(p, x, key):
        eps = jax.random.normal(key, (x.shape[0], vae.LATENT), dtype=jnp.float64)
        return forward(jnp, p, x, eps)[0]

    step = jax.jit(jax.value_and_grad(jax_loss))
    jp, jx = (jax.tree_util.tree_map(jnp.asarray, a) for a in (params, x))
    jkey = jax.random.wrap_key_data(jnp.asarray(key), impl="threefry2x32")
    calls = {"tracegrad": lambda: ours(params, x, key),
             "jax": lambda: jax.block_until_ready(step(jp, jx, jkey))}
    times = {name: [] for name in calls}
    for f in calls.values():
        f()
    names = list(calls)
    for r in range(BATCHES):
        for name in names if r % 2 else names[::-1]:
            t = time.perf_counter()
            for _ in range(CALLS):
                calls[name]()
            times[name].append((time.perf_counter() - t) / CALLS * 1e3)
    for name, t in times.items():
        print(f"{name:10s} best {min(t):.3f} ms  10th percentile {np.percentile(t, 10):.3f} ms"
              f"  median {np.median(t):.3f} ms")
    a, b = (np.percentile(times[n], 10) for n in names)
    print(f"JAX / tracegrad at the 10th percentile: {b / a:.3f}")


if __name__ == "__main__":
    main()
