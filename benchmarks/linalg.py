"""Linear algebra with gradients (issue 26): tracegrad against NumPy/SciPy hand formulas, JAX
and PyTorch, in one run.

    python benchmarks/linalg.py [--only gp,eigh] [--json FILE]
    python benchmarks/linalg.py --cpu [--only gp,eigh] [--rounds 15]

`--cpu`: the libraries' calls interleaved in rounds of about 20 ms each, medians of the
process CPU time per call (and of the wall time), for a shared machine whose load makes
wall times incomparable between runs.

- gp: the value and gradient of a Gaussian process's negative log marginal likelihood,
  n = 500 points, squared-exponential kernel plus noise, with respect to its three log
  hyper-parameters (cholesky, cho_solve, the log-determinant from the factor's diagonal);
- eigh: the sum of the eigenvalues of 100 batched symmetric 32x32 matrices and its gradient
  (through `eigh`, vectors included, as a loss on eigenvalues differentiates).

float64, CPU, one thread for every library (set before they load). Steady-state times are
the median of 9 batches of calls after a warm-up; the first call (trace + transform +
compile, tracegrad with an empty kernel cache) is timed separately. Ratios are `library
time / tracegrad time`: above 1 means tracegrad is faster. Not a test: nothing here asserts
but that every library computes the same values.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from one_thread import jax, jnp, peer_report, time_peers, torch  # noqa: E402, I001 (first: one thread each)

import numpy as np  # noqa: E402
import scipy.linalg  # noqa: E402
from machine import cpu, interleaved  # noqa: E402
from run import first_call, median_time  # noqa: E402

import tracegrad as tg  # noqa: E402
import tracegrad.numpy as tnp  # noqa: E402
import tracegrad.scipy.linalg as tsl  # noqa: E402

tg.config.background_compile = False  # timed calls measure the kernel, not the interim

GP_POINTS = 500
BATCH, SIZE = 100, 32


def _problem(name, rng):
    if name == "gp":
        x = np.sort(rng.uniform(-4.0, 4.0, GP_POINTS))
        y = np.sin(2.0 * x) + 0.1 * rng.standard_normal(GP_POINTS)
        return [np.array([np.log(0.7), np.log(1.2), np.log(0.2)]), x, y]
    a = rng.standard_normal((BATCH, SIZE, SIZE))
    return [(a + np.swapaxes(a, -1, -2)) / 2]


# -- the functions, once per library ------------------------------------------------------------


def _covariance(np_, theta, x):
    d2 = (x[:, None] - x[None, :]) ** 2
    k = np_.exp(2 * theta[1] - 0.5 * d2 * np_.exp(-2 * theta[0]))
    return k + np_.exp(2 * theta[2]) * np_.eye(x.shape[0])


def gp_tracegrad(theta, x, y):
    c = tnp.linalg.cholesky(_covariance(tnp, theta, x))
    alpha = tsl.cho_solve((c, True), y)
    return (0.5 * y @ alpha + tnp.sum(tnp.log(tnp.diagonal(c)))
            + 0.5 * x.shape[0] * np.log(2 * np.pi))


def gp_jax(theta, x, y):
    c = jnp.linalg.cholesky(_covariance(jnp, theta, x))
    alpha = jax.scipy.linalg.cho_solve((c, True), y)
    return (0.5 * y @ alpha + jnp.sum(jnp.log(jnp.diagonal(c)))
            + 0.5 * x.shape[0] * np.log(2 * np.pi))


def gp_torch(theta, x, y):
    c = torch.linalg.cholesky(_covariance(torch, theta, x))
    alpha = torch.cholesky_solve(y[:, None], c)[:, 0]
    return (0.5 * y @ alpha + torch.sum(torch.log(torch.diagonal(c)))
            + 0.5 * x.shape[0] * np.log(2 * np.pi))


def gp_numpy(theta, x, y):
    """Value and gradient by hand: d NLL = tr((K^-1 - alpha alpha^T) dK) / 2."""
    d2 = (x[:, None] - x[None, :]) ** 2
    se = np.exp(2 * theta[1] - 0.5 * d2 * np.exp(-2 * theta[0]))
    k = se + np.exp(2 * theta[2]) * np.eye(x.size)
    c = scipy.linalg.cho_factor(k, lower=True)
    alpha = scipy.linalg.cho_solve(c, y)
    value = 0.5 * y @ alpha + np.sum(np.log(np.diag(c[0]))) + 0.5 * x.size * np.log(2 * np.pi)
    w = scipy.linalg.cho_solve(c, np.eye(x.size)) - np.outer(alpha, alpha)
    grad = 0.5 * np.array([np.sum(w * se * d2) * np.exp(-2 * theta[0]), 2 * np.sum(w * se),
                           2 * np.exp(2 * theta[2]) * np.trace(w)])
    return value, grad


def eigh_loss(np_):
    def loss(a):
        return np_.sum(np_.linalg.eigh(a)[0])
    return loss


def eigh_numpy(a):
    """Value and gradient by hand: V diag(1) V^T on the lower triangle eigh reads."""
    w, v = np.linalg.eigh(a)
    g = v @ np.swapaxes(v, -1, -2)
    return np.sum(w), np.tril(g + np.swapaxes(g, -1, -2), -1) + g * np.eye(a.shape[-1])


def tracegrad_fn(name):
    f = gp_tracegrad if name == "gp" else eigh_loss(tnp)
    return tg.function(tg.value_and_grad(f), backend="numba")


def jax_fn(name):
    return jax.jit(jax.value_and_grad(gp_jax if name == "gp" else eigh_loss(jnp)))


def torch_fn(name):
    f = gp_torch if name == "gp" else eigh_loss(torch)

    def value_and_grad(first, *rest):
        first = first.clone().requires_grad_(True)
        value = f(first, *rest)
        return value.detach(), torch.autograd.grad(value, first)[0]
    return value_and_grad


LABELS = {"gp": f"GP NLL value+grad, n={GP_POINTS}",
          "eigh": f"sum(eigh) value+grad, {BATCH}x{SIZE}x{SIZE}"}


def _same(want, name):
    def check(got):
        value, grad = (np.asarray(g) for g in got)
        # the GP's covariance has a condition number near 1e5: libraries that round its
        # entries differently (PyTorch's exp) agree with NumPy's value to about 1e-8
        np.testing.assert_allclose(value, want[0], rtol=1e-7)
        if name == "gp":
            np.testing.assert_allclose(grad, want[1], rtol=1e-6, atol=1e-9)
        else:  # libraries differ in which triangle carries the gradient: compare its
            # symmetric part, which every one gives alike
            sym = grad + np.swapaxes(grad, -1, -2)
            want_sym = want[1] + np.swapaxes(want[1], -1, -2)
            np.testing.assert_allclose(sym, want_sym, atol=1e-9)
    return check


def measure(name, rng):
    args = _problem(name, rng)
    numpy_fn = gp_numpy if name == "gp" else eigh_numpy
    want = numpy_fn(*args)
    ours = tracegrad_fn(name)
    compile_s = {"tracegrad": first_call(lambda: ours(*args))}
    _same(want, name)(ours(*args))
    times = {"tracegrad": median_time(lambda: ours(*args))}
    times["numpy (hand)"] = median_time(lambda: numpy_fn(*args))
    time_peers(args, times, compile_s, _same(want, name),
               jax_fn=jax_fn(name) if jax is not None else None,
               torch_fn=torch_fn(name) if torch is not None else None)
    return times, compile_s


def interleaved_report(argv) -> None:
    """`--cpu`: every library's call of each row interleaved (machine.interleaved), after
    each one's values are checked against the hand-written NumPy gradient."""
    parser = argparse.ArgumentParser(description="--cpu: " + __doc__.splitlines()[0])
    parser.add_argument("--only", default="gp,eigh")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args(argv)
    print("cpu:", cpu())
    rng = np.random.default_rng(0)
    for name in [w for w in args.only.split(",") if w]:
        problem = _problem(name, rng)
        numpy_fn = gp_numpy if name == "gp" else eigh_numpy
        same = _same(numpy_fn(*problem), name)
        ours = tracegrad_fn(name)
        calls = {"tracegrad": lambda: ours(*problem),
                 "numpy (hand)": lambda: numpy_fn(*problem)}
        if jax is not None:
            fj, ja = jax_fn(name), [jnp.asarray(a) for a in problem]
            calls["jax"] = lambda: jax.block_until_ready(fj(*ja))
        if torch is not None:
            ft, ta = torch_fn(name), [torch.from_numpy(a) for a in problem]
            calls["torch"] = lambda: ft(*ta)
        for fn in calls.values():
            same(fn())
        times = interleaved(calls, args.rounds)
        base = times["tracegrad"][0]
        print(f"{LABELS[name]}, CPU (wall) ms per call, {args.rounds} rounds, load average "
              f"{os.getloadavg()[0]:.1f}: " + ", ".join(
                  f"{k} {c * 1e3:.3f} ({w * 1e3:.3f}; {c / base:.2f}x)"
                  for k, (c, w) in times.items()), flush=True)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--cpu" in argv:
        argv.remove("--cpu")
        interleaved_report(argv)
    else:
        peer_report(argv, __doc__, "gp,eigh", LABELS, measure)


if __name__ == "__main__":
    main()
