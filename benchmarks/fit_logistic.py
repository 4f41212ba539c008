"""Fitting a 1,000-parameter logistic regression to convergence, wall time, same run:

- tracegrad: `tracegrad.scipy.optimize.minimize(method="L-BFGS-B")`, the loss written with
  tracegrad.numpy, value and gradient compiled by tracegrad (compile time included, and
  the steady-state fit after it);
- SciPy with a hand-written NumPy gradient (`jac=`), L-BFGS-B;
- JAX, when installed: `jax.scipy.optimize.minimize(method="BFGS")` (the only method it
  has) under `jax.jit`, and SciPy's L-BFGS-B driven by `jax.jit(jax.value_and_grad)`.

    python benchmarks/fit_logistic.py [--rows N] [--repeats R]

Float64 throughout. Times are the best of `repeats` fits (the first fit of each compiled
library is reported separately as "first"). Not a test: nothing here asserts.
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time

import numpy as np
import scipy.optimize

os.environ.setdefault("TRACEGRAD_CACHE_DIR", tempfile.mkdtemp(prefix="tg-bench-cache-"))

import tracegrad as tg  # noqa: E402
import tracegrad.numpy as tnp  # noqa: E402
from tracegrad.scipy.optimize import minimize  # noqa: E402

FEATURES = 1000
L2 = 1.0  # a ridge penalty


def data(rows: int):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(rows, FEATURES))
    w = rng.normal(size=FEATURES) * 3 / np.sqrt(FEATURES)
    y = (rng.uniform(size=rows) < 1 / (1 + np.exp(-x @ w))).astype(np.float64)
    return x, y


def loss_tg(w, x, y):
    z = x @ w
    return tnp.sum(tnp.logaddexp(0.0, z) - y * z) + 0.5 * L2 * tnp.sum(w * w)


def loss_and_grad_numpy(w, x, y):
    z = x @ w
    p = 1 / (1 + np.exp(-z))
    value = np.sum(np.logaddexp(0.0, z) - y * z) + 0.5 * L2 * w @ w
    return value, x.T @ (p - y) + L2 * w


def best(fn, repeats):
    first = time.perf_counter()
    result = fn()
    first = time.perf_counter() - first
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return result, first, min(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    x, y = data(args.rows)
    w0 = np.zeros(FEATURES)
    rows = []

    res, first, t = best(lambda: minimize(loss_tg, w0, args=(x, y), method="L-BFGS-B"),
                         args.repeats)
    tg.wait_for_compiles()
    reference = res.x
    rows.append(("tracegrad minimize L-BFGS-B", t, first, res.nfev, res.fun))

    res, first, t = best(lambda: scipy.optimize.minimize(
        loss_and_grad_numpy, w0, args=(x, y), jac=True, method="L-BFGS-B"), args.repeats)
    rows.append(("SciPy L-BFGS-B, NumPy gradient by hand", t, first, res.nfev, res.fun))

    try:
        import jax
    except ImportError:
        jax = None
    if jax is not None:
        jax.config.update("jax_enable_x64", True)
        import jax.numpy as jnp
        import jax.scipy.optimize

        def loss_jax(w, x, y):
            z = x @ w
            return jnp.sum(jnp.logaddexp(0.0, z) - y * z) + 0.5 * L2 * jnp.sum(w * w)

        xj, yj = jnp.asarray(x), jnp.asarray(y)
        fit = jax.jit(lambda w: jax.scipy.optimize.minimize(
            loss_jax, w, args=(xj, yj), method="BFGS"))

        def run_bfgs():
            out = fit(jnp.asarray(w0))
            out.x.block_until_ready()
            return out

        res, first, t = best(run_bfgs, args.repeats)
        rows.append(("JAX jax.scipy.optimize.minimize BFGS (jit)", t, first, int(res.nfev),
                     float(res.fun)))
        vg = jax.jit(jax.value_and_grad(loss_jax))

        def jax_fun(w):
            value, g = vg(jnp.asarray(w), xj, yj)
            return float(value), np.asarray(g)

        res, first, t = best(lambda: scipy.optimize.minimize(
            jax_fun, w0, jac=True, method="L-BFGS-B"), args.repeats)
        rows.append(("SciPy L-BFGS-B, jax.jit(value_and_grad)", t, first, res.nfev, res.fun))
        versions = f", jax {jax.__version__}"
    else:
        versions = ", jax not installed"

    print(f"logistic regression, {FEATURES} parameters, {args.rows} rows; "
          f"{platform.processor() or platform.machine()}; numpy {np.__version__}, "
          f"scipy {scipy.__version__}{versions}")
    print(f"{'fit':48s} {'best s':>8s} {'first s':>8s} {'evals':>6s} {'loss':>12s} "
          f"{'vs tracegrad':>12s}")
    ours = rows[0][1]
    for name, t, first, nfev, fun in rows:
        print(f"{name:48s} {t:8.3f} {first:8.3f} {nfev:6d} {fun:12.8f} {t / ours:11.2f}x")
    by_hand = scipy.optimize.minimize(loss_and_grad_numpy, w0, args=(x, y), jac=True,
                                      method="L-BFGS-B").x
    print(f"max |w - w_tracegrad| of the hand-written fit: "
          f"{np.abs(by_hand - reference).max():.1e}")


if __name__ == "__main__":
    main()
