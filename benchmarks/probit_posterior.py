"""Value and gradient of a Bayesian probit regression's log posterior, same run:

    log p(w | X, y) = sum norm.logpdf(w, 0, 2)
                      + sum_i [y_i log_ndtr(x_i w) + (1 - y_i) log_ndtr(-x_i w)]

on `--rows` rows (10^6 by default) of `--features` features (10), float64, one thread:

- tracegrad: `tg.function(tg.value_and_grad(f))` with `tracegrad.scipy.stats.norm.logpdf`
  and `tracegrad.scipy.special.log_ndtr`, numba backend;
- NumPy/SciPy: the same formula with `scipy.special.log_ndtr` and a hand-written gradient
  (the inverse Mills ratio `exp(-z^2/2 - log_ndtr(z)) / sqrt(2 pi)`);
- JAX, when importable: `jax.jit(jax.value_and_grad(f))` with `jax.scipy`'s functions.

    python benchmarks/probit_posterior.py [--rows N] [--features D]

Times are medians (benchmarks/run.py's `median_time`); the first call of each compiled
library (trace and compile) is reported separately. Not a test: nothing here asserts
except that every library gives tracegrad's value and gradient.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

os.environ.setdefault("TRACEGRAD_CACHE_DIR", tempfile.mkdtemp(prefix="tg-bench-cache-"))
sys.path.insert(0, os.path.dirname(__file__))

from one_thread import jax, jnp  # noqa: E402, I001  (before NumPy: one thread each)
from one_pass import cpu  # noqa: E402

import numpy as np  # noqa: E402
import scipy.special  # noqa: E402
from run import first_call, median_time  # noqa: E402

import tracegrad as tg  # noqa: E402
import tracegrad.numpy as tnp  # noqa: E402
from tracegrad.scipy import special as tsp  # noqa: E402
from tracegrad.scipy import stats as tstats  # noqa: E402

PRIOR_SCALE = 2.0


def data(rows: int, features: int):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(rows, features))
    w_true = rng.normal(size=features)
    y = (rng.uniform(size=rows) < scipy.special.ndtr(x @ w_true)).astype(np.float64)
    return x, y, rng.normal(size=features) * 0.5


def log_posterior_tg(w, x, y):
    z = x @ w
    prior = tnp.sum(tstats.norm.logpdf(w, 0.0, PRIOR_SCALE))
    return prior + tnp.sum(y * tsp.log_ndtr(z) + (1.0 - y) * tsp.log_ndtr(-z))


def value_and_grad_numpy(w, x, y):
    z = x @ w
    lp, lm = scipy.special.log_ndtr(z), scipy.special.log_ndtr(-z)
    c = 1 / np.sqrt(2 * np.pi)
    mills_p = c * np.exp(-0.5 * z * z - lp)
    mills_m = c * np.exp(-0.5 * z * z - lm)
    value = (np.sum(-0.5 * (w / PRIOR_SCALE) ** 2 - np.log(PRIOR_SCALE) - 0.5 * np.log(2 * np.pi))
             + np.sum(y * lp + (1 - y) * lm))
    dz = y * mills_p - (1 - y) * mills_m
    return value, x.T @ dz - w / PRIOR_SCALE ** 2


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--features", type=int, default=10)
    args = parser.parse_args()
    x, y, w = data(args.rows, args.features)
    print(f"cpu: {cpu()}")
    print(f"rows {args.rows}, features {args.features}, float64, one thread")

    f = tg.function(tg.value_and_grad(log_posterior_tg))
    first = {"tracegrad": first_call(lambda: (f(w, x, y), tg.wait_for_compiles()))}
    value, grad = f(w, x, y)
    times = {"tracegrad": median_time(lambda: f(w, x, y))}

    def same(result):
        v, g = result
        np.testing.assert_allclose(float(v), float(value), rtol=1e-10)
        np.testing.assert_allclose(np.asarray(g), grad, rtol=1e-8, atol=1e-8)

    same(value_and_grad_numpy(w, x, y))
    times["numpy/scipy"] = median_time(lambda: value_and_grad_numpy(w, x, y))
    if jax is not None:
        from jax.scipy import special as jsp
        from jax.scipy import stats as jstats

        def log_posterior_jax(w, x, y):
            z = x @ w
            prior = jnp.sum(jstats.norm.logpdf(w, 0.0, PRIOR_SCALE))
            return prior + jnp.sum(y * jsp.log_ndtr(z) + (1.0 - y) * jsp.log_ndtr(-z))

        jf = jax.jit(jax.value_and_grad(log_posterior_jax))
        ja = [jnp.asarray(a) for a in (w, x, y)]
        first["jax"] = first_call(lambda: jax.block_until_ready(jf(*ja)))
        same(jf(*ja))
        times["jax"] = median_time(lambda: jax.block_until_ready(jf(*ja)))
    for name, t in times.items():
        extra = f"   (first call {first[name]:.2f} s)" if name in first else ""
        print(f"{name:12s} {t * 1e3:8.2f} ms   {t / times['tracegrad']:5.2f}x{extra}")


if __name__ == "__main__":
    main()
