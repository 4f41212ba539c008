"""The three NumPy programs written by others (examples/chebyshev_clenshaw.py,
black_scholes.py, logistic_descent.py), each the installed function with only `np`
rebound (examples/with_numpy.py): tracegrad against plain NumPy and JAX, in one run.

    python benchmarks/programs.py [--only cheb2d,cheb2d_grad,cheb,cheb_grad,bs,bs_grad,lr,lr_grad]
                                  [--json FILE]

- cheb2d: NumPy's `chebval2d` (Clenshaw), 16x12 coefficients at 100,000 points (JAX cannot
  run it unchanged: jax.numpy has no `asanyarray`, which its helper `_valnd` calls);
- cheb: NumPy's `chebval`, 32 coefficients at 1,000,000 points;
- bs: Numba's `blackscholes_arrayexpr`, 1,000,000 options (call and put);
- lr: Numba's `lr_impl`, 50 gradient-descent steps on 2,000x16 data;
- *_grad: the gradient of the sum of the program's outputs with respect to every array
  argument (chebval2d: x, y and the coefficients; Black-Scholes: the five inputs, the
  Greeks; lr_impl: X and the start weights, through the 50 steps).

tracegrad: `tg.function` of the rebound program (numba backend, compiled before timing);
NumPy: the original function (values only: none of them has a hand-written gradient);
JAX: the same code with `np` rebound to `jax.numpy`, under `jax.jit` (`jax.grad` for the
gradients). float64, CPU, one thread for every library (set before they load). Times are
the median of 9 batches after a warm-up; the first call is timed separately. Ratios are
`library time / tracegrad time`: above 1 means tracegrad is faster. Not a test: nothing
here asserts but that every library computes the same values.
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples"))
from one_thread import jax, jnp  # noqa: E402  (before NumPy: one thread each)

import numpy as np  # noqa: E402
import numpy.polynomial.chebyshev as chebyshev  # noqa: E402
from numba.tests.test_blackscholes import blackscholes_arrayexpr  # noqa: E402
from numba.tests.test_parfors import lr_impl  # noqa: E402
from run import first_call, median_report, median_time  # noqa: E402
from with_numpy import with_numpy  # noqa: E402

import tracegrad as tg  # noqa: E402
import tracegrad.numpy as tnp  # noqa: E402

tg.config.background_compile = False  # timed calls measure the kernel, not the interim

ITERATIONS = 50


def _problem(name, rng):
    if name.startswith("cheb2d"):
        n = 100_000
        return [rng.uniform(-1, 1, n), rng.uniform(-1, 1, n), rng.standard_normal((16, 12))]
    if name.startswith("cheb"):
        return [rng.uniform(-1, 1, 1_000_000), rng.standard_normal(32)]
    if name.startswith("bs"):
        n = 1_000_000
        return [rng.uniform(5.0, 30.0, n), rng.uniform(1.0, 100.0, n),
                rng.uniform(0.25, 10.0, n), np.float64(0.02), np.float64(0.30)]
    x = rng.standard_normal((2000, 16)) / np.sqrt(2000)
    y = np.where(x @ rng.standard_normal(16) > 0, 1.0, -1.0)
    return [y, x, np.zeros(16)]


def _program(name, np_):
    """The program of `name` with `np` rebound to `np_`, taking array arguments only."""
    if name.startswith("cheb2d"):
        return with_numpy(chebyshev.chebval2d, np_)
    if name.startswith("cheb"):
        return with_numpy(chebyshev.chebval, np_)
    if name.startswith("bs"):
        return with_numpy(blackscholes_arrayexpr, np_)
    train = with_numpy(lr_impl, np_)
    return lambda y, x, w: train(y, x, w * 1.0, ITERATIONS)  # NumPy's `w -=` is in place


def _argnums(name):
    argnums = {"cheb2d": (0, 1, 2), "cheb": (0, 1), "bs": (0, 1, 2, 3, 4), "lr": (1, 2)}
    return argnums[name.split("_")[0]]


def _summed(program, np_):
    def total(*args):
        out = program(*args)
        return sum(np_.sum(o) for o in out) if isinstance(out, tuple) else np_.sum(out)
    return total


def _same(got, want):
    got = got if isinstance(got, (tuple, list)) else (got,)
    want = want if isinstance(want, (tuple, list)) else (want,)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-9, atol=1e-9)


LABELS = {"cheb2d": "chebval2d, 16x12 coefficients, 1e5 points",
          "cheb2d_grad": "  its gradient (x, y, coefficients)",
          "cheb": "chebval, 32 coefficients, 1e6 points",
          "cheb_grad": "  its gradient (x, coefficients)",
          "bs": "Black-Scholes, 1e6 options",
          "bs_grad": "  its gradient (the Greeks)",
          "lr": f"lr_impl, {ITERATIONS} steps, 2000x16",
          "lr_grad": "  its gradient (X, w0) through the steps"}


def measure(name, rng):
    args = _problem(name, rng)
    grad = name.endswith("_grad")
    ours = _program(name, tnp)
    if grad:
        ours = tg.grad(_summed(ours, tnp), argnums=_argnums(name))
    ours = tg.function(ours, backend="numba")
    compile_s = {"tracegrad": first_call(lambda: ours(*args))}
    tg.wait_for_compiles()
    want = ours(*args)
    times = {"tracegrad": median_time(lambda: ours(*args))}
    if not grad:
        reference = _program(name, np)
        _same(reference(*args), want)
        times["numpy"] = median_time(lambda: reference(*args))
    if jax is not None and not name.startswith("cheb2d"):
        theirs = _program(name, jnp)
        if grad:
            theirs = jax.grad(_summed(theirs, jnp), argnums=_argnums(name))
        theirs = jax.jit(theirs)
        ja = [jnp.asarray(a) for a in args]
        compile_s["jax"] = first_call(lambda: jax.block_until_ready(theirs(*ja)))
        _same(theirs(*ja), want)
        times["jax"] = median_time(lambda: jax.block_until_ready(theirs(*ja)))
    return times, compile_s


def main(argv=None):
    from one_pass import cpu

    print("cpu:", cpu())
    median_report(argv, description=__doc__.splitlines()[0],
                  default="cheb2d,cheb2d_grad,cheb,cheb_grad,bs,bs_grad,lr,lr_grad", labels=LABELS,
                  measure=measure, libraries=(jax,))


if __name__ == "__main__":
    main()
