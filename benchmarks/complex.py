"""Complex arithmetic: the value and the gradient of `L(x, y) = sum(|exp(i x) y + 1|^2)` for
real `x` and complex `y` of 10^6 elements, tracegrad against NumPy (the value, and the
gradient written by hand), JAX and PyTorch in one run.

    python benchmarks/complex.py [--only value,grad] [--json FILE]

float64/complex128, CPU, one thread for every library (set before they load). Steady-state
times are the median of 9 batches of calls after a warm-up; the first call (trace +
transform + compile) is timed separately. Ratios are `library time / tracegrad time`: above
1 means tracegrad is faster. Gradients are compared in tracegrad's (TensorFlow's and
PyTorch's) convention, dL/dRe + i dL/dIm; JAX's complex gradient is its conjugate.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from one_thread import jax, jnp, peer_report, torch  # noqa: E402  (before NumPy: one thread each)

import numpy as np  # noqa: E402
from run import first_call, median_time  # noqa: E402

import tracegrad as tg  # noqa: E402
import tracegrad.numpy as tnp  # noqa: E402

tg.config.background_compile = False  # timed calls measure the kernel, not the interim

N = 1_000_000


def loss(np_):
    def f(x, y):
        return np_.sum(np_.abs(np_.exp(1j * x) * y + 1) ** 2)
    return f


def numpy_grad(x, y):
    e = np.exp(1j * x)
    u = e * y + 1
    return 2 * np.real(np.conj(u) * 1j * e * y), 2 * u * np.conj(e)


def torch_loss(x, y):
    return torch.sum(torch.abs(torch.exp(1j * x) * y + 1) ** 2)


def torch_grad(x, y):
    x, y = x.clone().requires_grad_(True), y.clone().requires_grad_(True)
    return torch.autograd.grad(torch_loss(x, y), (x, y))


LABELS = {"value": f"value of sum(|exp(ix) y + 1|^2) [{N}]",
          "grad": f"gradient in (x, y) [{N}]"}


def measure(name, rng):
    x = rng.standard_normal(N)
    y = rng.standard_normal(N) + 1j * rng.standard_normal(N)
    args = (x, y)
    if name == "value":
        ours = tg.function(loss(tnp), backend="numba")
        want = loss(np)(x, y)

        def same(got):
            np.testing.assert_allclose(np.asarray(got), want, rtol=1e-10)

        reference = loss(np)
        jax_fn = jax.jit(loss(jnp)) if jax is not None else None
        torch_fn = torch_loss
    else:
        ours = tg.function(tg.grad(loss(tnp), argnums=(0, 1)), backend="numba")
        want = numpy_grad(x, y)

        def same(got, conj=False):
            gx, gy = (np.asarray(g) for g in got)
            np.testing.assert_allclose(gx, want[0], rtol=1e-9, atol=1e-9)
            np.testing.assert_allclose(np.conj(gy) if conj else gy, want[1], rtol=1e-9,
                                       atol=1e-9)

        reference = numpy_grad
        jax_fn = jax.jit(jax.grad(loss(jnp), argnums=(0, 1))) if jax is not None else None
        torch_fn = torch_grad
    compile_s = {"tracegrad": first_call(lambda: ours(*args))}
    same(ours(*args))
    times = {"tracegrad": median_time(lambda: ours(*args))}
    times["numpy" if name == "value" else "numpy (hand)"] = median_time(
        lambda: reference(*args))
    if jax_fn is not None:
        ja = [jnp.asarray(a) for a in args]
        compile_s["jax"] = first_call(lambda: jax.block_until_ready(jax_fn(*ja)))
        got = jax_fn(*ja)
        same(got, conj=True) if name == "grad" else same(got)
        times["jax"] = median_time(lambda: jax.block_until_ready(jax_fn(*ja)))
    if torch is not None:
        ta = [torch.from_numpy(a) for a in args]
        got = torch_fn(*ta)
        same([g.detach().numpy() for g in got] if name == "grad" else got.detach().numpy())
        times["torch"] = median_time(lambda: torch_fn(*ta))
    return times, compile_s


def main(argv=None):
    peer_report(argv, __doc__, "value,grad", LABELS, measure)


if __name__ == "__main__":
    main()
