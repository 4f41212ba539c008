"""Loops in compiled functions: tracegrad's `tg.fori_loop` / `tg.scan` against JAX
(`lax.fori_loop` / `lax.scan` under jit), NumPy by hand and PyTorch eager, in one run.

    python benchmarks/control_flow.py [--only w7,w7-grad,w8,w8-grad] [--json FILE]

- W7: 1000 explicit-Euler steps `x <- x + 0.01 * sin(x)` on 1000 elements (the value), and
  the gradient of `sum(x_final)` with respect to `x0` (NumPy: a hand-written adjoint that
  stores the trajectory and walks it back);
- W8: an RNN over 1000 time steps, `h <- tanh(W @ h + U @ x_t)`, hidden 32, input 8, with
  `scan` (the value: the final state and every state), and the gradient of the sum of
  every state with respect to `W` (NumPy: the forward only).

float64, CPU, one thread for every library (set before they load). Steady-state times are
the median of 9 batches of calls after a warm-up (`benchmarks/run.py`'s
`median_time`); the first call (trace + transform + compile, tracegrad with an empty kernel
cache; JAX's jit) is timed separately. Ratios are `library time / tracegrad time`: above 1
means tracegrad is faster. Not a test: nothing here asserts but that every library
computes the same values.
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

STEPS, N = 1000, 1000          # W7
T, HIDDEN, INPUT = 1000, 32, 8  # W8


def _problem(name, rng):
    if name.startswith("w7"):
        return [rng.standard_normal(N)]
    return [rng.standard_normal((HIDDEN, HIDDEN)) / np.sqrt(HIDDEN),
            rng.standard_normal((HIDDEN, INPUT)) / np.sqrt(INPUT),
            np.zeros(HIDDEN), rng.standard_normal((T, INPUT))]


# -- tracegrad ----------------------------------------------------------------------------------


def tg_euler(x0):
    return tg.fori_loop(0, STEPS, lambda i, x: x + 0.01 * tnp.sin(x), x0)


def tg_rnn(w, u, h0, xs):
    def step(h, x):
        h = tnp.tanh(w @ h + u @ x)
        return h, h
    return tg.scan(step, h0, xs)


def tracegrad_fn(name):
    if name == "w7":
        return tg.function(tg_euler)
    if name == "w7-grad":
        return tg.grad(lambda x0: tnp.sum(tg_euler(x0)))
    if name == "w8":
        return tg.function(tg_rnn)
    return tg.grad(lambda w, u, h0, xs: tnp.sum(tg_rnn(w, u, h0, xs)[1]))


# -- NumPy by hand ------------------------------------------------------------------------------


def np_euler(x0):
    x = x0
    for _ in range(STEPS):
        x = x + 0.01 * np.sin(x)
    return x


def np_euler_grad(x0):
    """The adjoint: d sum(x_T) / d x0 = prod_k (1 + 0.01 cos(x_k)), walked back from x_T."""
    xs = np.empty((STEPS, x0.size))
    x = x0
    for k in range(STEPS):
        xs[k] = x
        x = x + 0.01 * np.sin(x)
    g = np.ones_like(x0)
    for k in range(STEPS - 1, -1, -1):
        g = g * (1.0 + 0.01 * np.cos(xs[k]))
    return g


def np_rnn(w, u, h0, xs):
    h, hs = h0, np.empty((len(xs), h0.size))
    for t, x in enumerate(xs):
        h = np.tanh(w @ h + u @ x)
        hs[t] = h
    return h, hs


def numpy_fn(name):
    return {"w7": np_euler, "w7-grad": np_euler_grad, "w8": np_rnn}.get(name)


# -- JAX ----------------------------------------------------------------------------------------


def jax_fn(name):
    def euler(x0):
        return jax.lax.fori_loop(0, STEPS, lambda i, x: x + 0.01 * jnp.sin(x), x0)

    def rnn(w, u, h0, xs):
        def step(h, x):
            h = jnp.tanh(w @ h + u @ x)
            return h, h
        return jax.lax.scan(step, h0, xs)

    return jax.jit({"w7": euler, "w7-grad": jax.grad(lambda x0: jnp.sum(euler(x0))),
                    "w8": rnn,
                    "w8-grad": jax.grad(lambda w, u, h0, xs: jnp.sum(rnn(w, u, h0, xs)[1]))
                    }[name])


# -- PyTorch eager ------------------------------------------------------------------------------


def torch_fn(name):
    def euler(x0):
        x = x0
        for _ in range(STEPS):
            x = x + 0.01 * torch.sin(x)
        return x

    def rnn(w, u, h0, xs):
        h, hs = h0, []
        for x in xs:
            h = torch.tanh(w @ h + u @ x)
            hs.append(h)
        return h, torch.stack(hs)

    def euler_grad(x0):
        x0 = x0.clone().requires_grad_(True)
        (g,) = torch.autograd.grad(euler(x0).sum(), x0)
        return g

    def rnn_grad(w, u, h0, xs):
        w = w.clone().requires_grad_(True)
        (g,) = torch.autograd.grad(rnn(w, u, h0, xs)[1].sum(), w)
        return g

    return {"w7": euler, "w7-grad": euler_grad, "w8": rnn, "w8-grad": rnn_grad}[name]


# -- the runner ---------------------------------------------------------------------------------

LABELS = {"w7": "W7 Euler, 1000 steps x 1000 elements",
          "w7-grad": "W7 gradient of sum(x_T) w.r.t. x0",
          "w8": "W8 RNN scan, 1000 steps, h 32, x 8",
          "w8-grad": "W8 gradient of sum(h_t) w.r.t. W"}


def _arrays(value):
    """A result (an array or a tuple of them, any library's) as a list of NumPy arrays."""
    values = value if isinstance(value, (tuple, list)) else [value]
    return [v.detach().numpy() if hasattr(v, "detach") else np.asarray(v) for v in values]


def _same(got, want):
    for g, w in zip(_arrays(got), _arrays(want), strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)


def measure(name, rng):
    args = _problem(name, rng)
    ours = tracegrad_fn(name)
    compile_s = {"tracegrad": first_call(lambda: ours(*args))}
    want = ours(*args)
    times = {"tracegrad": median_time(lambda: ours(*args))}
    hand = numpy_fn(name)
    if hand is not None:
        _same(hand(*args), want)
        times["numpy (hand)"] = median_time(lambda: hand(*args))
    time_peers(args, times, compile_s, lambda got: _same(got, want),
               jax_fn=jax_fn(name) if jax is not None else None,
               torch_fn=torch_fn(name) if torch is not None else None,
               torch_label="torch (eager)")
    return times, compile_s


def main(argv=None):
    peer_report(argv, __doc__, "w7,w7-grad,w8,w8-grad", LABELS, measure)


if __name__ == "__main__":
    main()
