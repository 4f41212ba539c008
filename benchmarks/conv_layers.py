"""The gradient of autograd's convnet's two convolution layers (batch 256, 1 -> 6 -> 16
channels, 5x5 kernels, 28x28 images, a tanh and a 2x2 subsample between), one thread:
tracegrad's `conv` on the numba and numpy backends, JAX (`lax.conv_general_dilated` under
`jit`) and PyTorch (`conv2d`), by process CPU time, interleaved, medians over rounds.

    python benchmarks/conv_layers.py [--rounds 9]
    TRACEGRAD_BENCH_ISA=avx2 python benchmarks/conv_layers.py
"""

from __future__ import annotations

import argparse
import functools
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from one_thread import jax, jnp, torch  # noqa: E402  (limits every library to one thread)
from machine import cpu, interleaved  # noqa: E402

import numpy as np  # noqa: E402

import tracegrad as tg  # noqa: E402
import tracegrad.numpy as tnp  # noqa: E402
from tracegrad import ops  # noqa: E402

VALID = ((0, 0), (0, 0))


def _tracegrad_loss(x, w1, w2):
    h = tnp.tanh(ops.conv(x, w1, padding=VALID))[:, :, ::2, ::2]
    return tnp.sum(tnp.tanh(ops.conv(h, w2, padding=VALID)))


def _jax_loss(x, w1, w2):
    def conv(a, b):
        return jax.lax.conv_general_dilated(a, b, (1, 1), VALID)

    h = jnp.tanh(conv(x, w1))[:, :, ::2, ::2]
    return jnp.sum(jnp.tanh(conv(h, w2)))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    tg.config.background_compile = False
    rng = np.random.default_rng(0)
    x = rng.normal(size=(256, 1, 28, 28))
    w1, w2 = rng.normal(size=(6, 1, 5, 5)) * 0.1, rng.normal(size=(16, 6, 5, 5)) * 0.1
    grad = tg.grad(_tracegrad_loss, argnums=(1, 2))
    fns = {"tracegrad numba": tg.function(grad, backend="numba"),
           "tracegrad numpy": tg.function(grad, backend="numpy")}
    if jax is not None:
        jgrad = jax.jit(jax.grad(_jax_loss, argnums=(1, 2)))
        fns["jax jit"] = lambda *a: jax.block_until_ready(jgrad(*a))
    if torch is not None:
        tx = torch.from_numpy(x)

        def torch_grad(x, w1, w2):
            a, b = torch.from_numpy(w1).requires_grad_(), torch.from_numpy(w2).requires_grad_()
            h = torch.tanh(torch.nn.functional.conv2d(tx, a))[:, :, ::2, ::2]
            torch.tanh(torch.nn.functional.conv2d(h, b)).sum().backward()
            return a.grad, b.grad

        fns["torch"] = torch_grad
    want = [np.asarray(g) for g in fns["tracegrad numpy"](x, w1, w2)]
    for name, fn in fns.items():
        got = [np.asarray(g) for g in fn(x, w1, w2)]
        for g, e in zip(got, want, strict=True):
            np.testing.assert_allclose(g, e, rtol=1e-9, atol=1e-9, err_msg=name)
    times = interleaved({name: functools.partial(fn, x, w1, w2) for name, fn in fns.items()},
                        args.rounds)
    print(f"cpu: {cpu()}; load average {os.getloadavg()[0]:.1f}; TRACEGRAD_BENCH_ISA="
          f"{os.environ.get('TRACEGRAD_BENCH_ISA', '')!r}")
    for name, (c, w) in times.items():
        print(f"{name:16s} {1e3 * c:8.1f} ms CPU, {1e3 * w:8.1f} ms wall "
              f"(medians of {args.rounds} rounds)")

if __name__ == "__main__":
    main()
