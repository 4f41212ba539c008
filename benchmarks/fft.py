"""The FFT: the value and the gradient of `L(x) = sum(|rfft(x)|^2)` for real `x` of 2^20
float64 points, tracegrad (rocket-fft's transforms in the numba kernel) against NumPy (the
value), JAX and PyTorch in one run.

    python benchmarks/fft.py [--only value,grad] [--json FILE]

float64/complex128, CPU, one thread for every library (set before they load). Steady-state
times are the median of 9 batches of calls after a warm-up; the first call (trace +
transform + compile) is timed separately. Ratios are `library time / tracegrad time`: above
1 means tracegrad is faster.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from one_thread import jax, jnp, peer_report, time_peers, torch  # noqa: E402, I001 (first: one thread each)

import numpy as np  # noqa: E402
from run import first_call, median_time  # noqa: E402

import tracegrad as tg  # noqa: E402
import tracegrad.numpy as tnp  # noqa: E402

tg.config.background_compile = False  # timed calls measure the kernel, not the interim

N = 2 ** 20


def loss(np_):
    def f(x):
        return np_.sum(np_.abs(np_.fft.rfft(x)) ** 2)
    return f


def torch_loss(x):
    return torch.sum(torch.abs(torch.fft.rfft(x)) ** 2)


def torch_grad(x):
    x = x.clone().requires_grad_(True)
    return torch.autograd.grad(torch_loss(x), (x,))[0]


def exact_grad(x):
    """The gradient of sum(|X|^2), X = rfft(x), by hand: N irfft(X) with bin 0 and bin N/2
    doubled (an interior bin of the half spectrum stands for two, counted by irfft)."""
    spectrum = np.fft.rfft(x)
    spectrum[0] *= 2
    if len(x) % 2 == 0:
        spectrum[-1] *= 2
    return np.fft.irfft(spectrum, len(x)) * len(x)


LABELS = {"value": "value of sum(|rfft(x)|^2) [2^20]", "grad": "gradient in x [2^20]"}


def measure(name, rng):
    x = rng.standard_normal(N)
    if name == "value":
        ours = tg.function(loss(tnp), backend="numba")
        want = loss(np)(x)

        def same(got):
            np.testing.assert_allclose(_array(got), want, rtol=1e-10)

        reference = loss(np)
        jax_fn = jax.jit(loss(jnp)) if jax is not None else None
        torch_fn = torch_loss
    else:
        ours = tg.function(tg.grad(loss(tnp)), backend="numba")
        want = exact_grad(x)

        def same(got):
            np.testing.assert_allclose(_array(got), want, rtol=1e-8, atol=1e-6)

        reference = exact_grad
        jax_fn = jax.jit(jax.grad(loss(jnp))) if jax is not None else None
        torch_fn = torch_grad
    compile_s = {"tracegrad": first_call(lambda: ours(x))}
    same(ours(x))
    times = {"tracegrad": median_time(lambda: ours(x))}
    times["numpy" if name == "value" else "numpy (hand)"] = median_time(lambda: reference(x))
    time_peers([x], times, compile_s, same, jax_fn=jax_fn, torch_fn=torch_fn)
    return times, compile_s


def _array(got):
    """Any library's result as a NumPy array."""
    return np.asarray(got.detach() if hasattr(got, "detach") else got)


def main(argv=None):
    peer_report(argv, __doc__, "value,grad", LABELS, measure)


if __name__ == "__main__":
    main()
