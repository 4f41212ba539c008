"""One pass over a large array: `value_and_grad` of an elementwise sum (issue W2) in
tracegrad against JAX, PyTorch (eager and `torch.compile`), NumPy by hand and autograd.

    python benchmarks/one_pass.py [--only w2,sin,sin1,sin_all] [--json FILE]

- W2: `value_and_grad(lambda x: sum(tanh(x) * sin(x) + x ** 2))` on x of 10**7 float64: a
  reduction and an elementwise gradient over the same array. tracegrad's kernel is one loop
  that reads `x` once, evaluates `tanh` once and `sin` and `cos` from one shared range
  reduction (`_sin_cos_fast_v`) per element and sums in blocks (docs/numba.md).
- sin, sin1, sin_all: `sin(x)` with every |x| small, with one huge argument (only its block
  of 1024 elements takes the full range reduction again), and with one in every block
  (every block does).

float64, CPU, one thread for every library (set before they load). Steady-state times are
the median of 9 batches of calls after a warm-up (`benchmarks/run.py`'s `median_time`); the
first call (trace + transform + compile, tracegrad with an empty kernel cache) is timed
separately. Ratios are `library time / tracegrad time`: above 1 means tracegrad is faster.
The CPU model and its vector-unit flags are printed first. `TRACEGRAD_BENCH_ISA=avx2` makes
every library generate AVX2 code only (benchmarks/one_thread.py). Not a test: nothing here
asserts but that every library computes the same values.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from one_thread import jax, jnp, time_peers, torch  # noqa: E402  (before NumPy: one thread each)

import numpy as np  # noqa: E402
from run import _optional, first_call, median_report, median_time  # noqa: E402

import tracegrad as tg  # noqa: E402
import tracegrad.numpy as tnp  # noqa: E402
from machine import cpu  # noqa: E402, F401  (re-exported: scripts import it from here)

tg.config.background_compile = False  # timed calls measure the kernel, not the interim

autograd = _optional("autograd")
N = 10**7
LABELS = {"w2": f"W2 value_and_grad sum(tanh(x)*sin(x)+x**2) [{N}]",
          "sin": f"sin(x), |x| < 10 [{N}]",
          "sin1": f"sin(x), one |x| = 1e9 [{N}]",
          "sin_all": f"sin(x), |x| = 1e9 every 1000 [{N}]"}


def w2_value(np_):
    def f(x):
        return np_.sum(np_.tanh(x) * np_.sin(x) + x ** 2)
    return f


def numpy_w2(x):
    """NumPy by hand: the value and its gradient, each transcendental computed once."""
    t, s = np.tanh(x), np.sin(x)
    return np.sum(t * s + x ** 2), (1 - t * t) * s + t * np.cos(x) + 2 * x


def torch_w2(x):
    x = x.detach().requires_grad_(True)
    v = torch.sum(torch.tanh(x) * torch.sin(x) + x ** 2)
    (g,) = torch.autograd.grad(v, x)
    return v.detach(), g


def _same(got, want):
    v, g = (np.asarray(a) for a in got)
    np.testing.assert_allclose(v, want[0], rtol=1e-12)
    np.testing.assert_allclose(g, want[1], rtol=1e-12, atol=1e-12)


def measure_sin(name, rng):
    x = rng.uniform(-10.0, 10.0, N)
    if name == "sin1":
        x[N // 2] = 1e9
    elif name == "sin_all":
        x[::1000] = 1e9
    ours = tg.function(tnp.sin, backend="numba")
    compile_s = {"tracegrad": first_call(lambda: ours(x))}
    want = np.asarray(ours(x))
    np.testing.assert_allclose(want, np.sin(x), rtol=1e-14, atol=1e-15)
    times = {"tracegrad": median_time(lambda: ours(x)), "numpy": median_time(lambda: np.sin(x))}
    time_peers([x], times, compile_s,
               lambda got: np.testing.assert_allclose(np.asarray(got), want, rtol=1e-14,
                                                      atol=1e-15),
               jax_fn=jax.jit(jnp.sin) if jax is not None else None,
               torch_fn=torch.sin if torch is not None else None, torch_label="torch")
    return times, compile_s


def measure(name, rng):
    if name.startswith("sin"):
        return measure_sin(name, rng)
    x = rng.standard_normal(N)
    ours = tg.function(tg.value_and_grad(w2_value(tnp)), backend="numba")
    compile_s = {"tracegrad": first_call(lambda: ours(x))}
    want = [np.asarray(a) for a in ours(x)]
    times = {"tracegrad": median_time(lambda: ours(x))}
    _same(numpy_w2(x), want)
    times["numpy (hand)"] = median_time(lambda: numpy_w2(x))
    time_peers([x], times, compile_s, lambda got: _same(got, want),
               jax_fn=jax.jit(jax.value_and_grad(w2_value(jnp))) if jax is not None else None,
               torch_fn=torch_w2 if torch is not None else None, torch_label="torch (eager)")
    if torch is not None:
        compiled = torch.compile(torch_w2)
        xt = torch.from_numpy(x)
        compile_s["torch.compile"] = first_call(lambda: compiled(xt))
        _same(compiled(xt), want)
        times["torch.compile"] = median_time(lambda: compiled(xt))
    if autograd is not None:
        ag = autograd.value_and_grad(w2_value(__import__("autograd.numpy").numpy))
        _same(ag(x), want)
        times["autograd"] = median_time(lambda: ag(x))
    return times, compile_s


def main(argv=None):
    print("cpu:", cpu())
    median_report(argv, description=__doc__.splitlines()[0], default="w2", labels=LABELS,
                  measure=measure, libraries=(jax, torch, autograd))


if __name__ == "__main__":
    main()
