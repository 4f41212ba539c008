"""Jacobians, per-example Jacobians and Hessians: tracegrad against NumPy hand formulas,
JAX and PyTorch (torch.func), in one run.

    python benchmarks/jacobians.py [--only w4,w5,w6] [--json FILE]

- W4: the 256x256 Jacobian of `tanh(W @ x + b)`;
- W5: per-example Jacobians of `tanh(W2 @ tanh(W1 @ x_i))`, x [1024, 16], hidden 32;
- W6: the 100x100 Hessian of `sum(log1p(exp(A @ x))) + 0.5 |x|^2`, A 200x100.

float64, CPU, one thread for every library (set before they load). Steady-state times are
the median of 9 batches of calls after a warm-up; the first call (trace + transform + compile,
tracegrad with an empty kernel cache) is timed separately. Ratios are `library time /
tracegrad time`: above 1 means tracegrad is faster. Not a test: nothing here asserts but
that every library computes the same values.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from one_thread import jax, jnp, peer_report, time_peers, torch  # noqa: E402  (before NumPy: one thread each)

import numpy as np  # noqa: E402
from run import first_call, median_time  # noqa: E402

import tracegrad as tg  # noqa: E402
import tracegrad.numpy as tnp  # noqa: E402

tg.config.background_compile = False  # timed calls measure the kernel, not the interim


def _problem(name, rng):
    if name == "w4":
        n = 256
        return [rng.standard_normal((n, n)) / np.sqrt(n), rng.standard_normal(n),
                rng.standard_normal(n) * 0.1]
    if name == "w5":
        return [rng.standard_normal((32, 16)) / 4, rng.standard_normal((16, 32)) / 6,
                rng.standard_normal((1024, 16))]
    return [rng.standard_normal((200, 100)) / 10, rng.standard_normal(100)]


# -- the functions, once per library ------------------------------------------------------------


def w4(np_):
    def layer(w, x, b):
        return np_.tanh(w @ x + b)
    return layer


def w5(np_):
    def net(w1, w2, x):
        return np_.tanh(w2 @ np_.tanh(w1 @ x))
    return net


def w6(np_):
    def loss(a, x):
        return np_.sum(np_.log1p(np_.exp(a @ x))) + 0.5 * np_.sum(x * x)
    return loss


def numpy_hand(name):
    if name == "w4":
        def jac(w, x, b):
            return (1.0 - np.tanh(w @ x + b) ** 2)[:, None] * w
        return jac
    if name == "w5":
        def per_example(w1, w2, x):
            h = np.tanh(x @ w1.T)                        # [b, 32]
            y = np.tanh(h @ w2.T)                        # [b, 16]
            inner = (1.0 - h * h)[:, :, None] * w1       # [b, 32, 16]
            return (1.0 - y * y)[:, :, None] * np.matmul(w2, inner)
        return per_example

    def hess(a, x):
        s = 1.0 / (1.0 + np.exp(-(a @ x)))
        return (a.T * (s * (1.0 - s))) @ a + np.eye(x.size)
    return hess


def tracegrad_fn(name):
    if name == "w4":
        return tg.jacobian(w4(tnp), argnums=1)
    if name == "w5":
        return tg.function(lambda w1, w2, x: tg.vmap(tg.jacobian(
            lambda v: w5(tnp)(w1, w2, v)))(x))
    return tg.hessian(w6(tnp), argnums=1)


def jax_fn(name):
    if name == "w4":
        return jax.jit(jax.jacrev(w4(jnp), argnums=1))
    if name == "w5":
        return jax.jit(lambda w1, w2, x: jax.vmap(jax.jacrev(
            lambda v: w5(jnp)(w1, w2, v)))(x))
    return jax.jit(jax.hessian(w6(jnp), argnums=1))


def torch_fn(name):
    from torch.func import hessian, jacrev, vmap

    if name == "w4":
        return jacrev(w4(torch), argnums=1)
    if name == "w5":
        return lambda w1, w2, x: vmap(jacrev(lambda v: w5(torch)(w1, w2, v)))(x)
    return hessian(w6(torch), argnums=1)


LABELS = {"w4": "W4 jacobian 256x256 of tanh(W x + b)",
          "w5": "W5 per-example jacobians [1024,16,16]",
          "w6": "W6 hessian 100x100 (log1p-exp + ridge)"}


def measure(name, rng):
    args = _problem(name, rng)
    want = numpy_hand(name)(*args)
    ours = tracegrad_fn(name)
    compile_s = {"tracegrad": first_call(lambda: ours(*args))}
    np.testing.assert_allclose(ours(*args), want, rtol=1e-10, atol=1e-12)
    times = {"tracegrad": median_time(lambda: ours(*args))}
    times["numpy (hand)"] = median_time(lambda: numpy_hand(name)(*args))
    time_peers(args, times, compile_s, lambda got: np.testing.assert_allclose(
        np.asarray(got), want, rtol=1e-10, atol=1e-12),
        jax_fn=jax_fn(name) if jax is not None else None,
        torch_fn=torch_fn(name) if torch is not None else None, torch_label="torch.func")
    return times, compile_s


def main(argv=None):
    peer_report(argv, __doc__, "w4,w5,w6", LABELS, measure)


if __name__ == "__main__":
    main()
