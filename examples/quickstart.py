"""Quickstart: trace, differentiate and compile a NumPy-style function.

Run: python examples/quickstart.py
"""

import time

import numpy as np

import tracegrad as tg
import tracegrad.numpy as tnp


@tg.function  # traced once per input signature, compiled to a fused Numba kernel
def loss(x, y):
    return tnp.sum(tnp.sin(x) * y)


x = np.linspace(0.0, 1.0, 5)
y = np.arange(5.0)

print("loss(x, y)      =", loss(x, y))
print("NumPy says        ", np.sum(np.sin(x) * y))

# The traced IR, one primitive a line.
print()
print(loss.get_concrete_function(x, y).graph)

# Exact gradients: d/dx sum(sin(x) * y) = cos(x) * y.
grad_loss = tg.grad(loss, argnums=(0, 1))
gx, gy = grad_loss(x, y)
print()
print("d loss / dx     =", gx)
print("cos(x) * y      =", np.cos(x) * y)
print("d loss / dy     =", gy)

# One trace (and one compiled kernel) serves every size with an unknown dim.
flexible = tg.function(lambda v: tnp.sum(v ** 2), input_signature=[tg.TensorSpec([None])])
print()
print("sizes 3, 1000, 10**6:", [float(flexible(np.ones(n))) for n in (3, 1000, 10**6)],
      "traced", flexible.tracing_count, "time")

# Compiled speed: a fused elementwise chain against NumPy.
big = np.random.default_rng(0).standard_normal(10**6)
chain = tg.function(lambda v: tnp.sum(tnp.exp(-v * v) * tnp.tanh(v) + v / (1.0 + v * v)))
chain(big)  # first call: traces; runs on the numpy reference while the kernel compiles
tg.wait_for_compiles()  # timing follows: wait for the kernel (or its load from the disk cache)


def best(f, *args, number=20):
    t = time.perf_counter()
    for _ in range(number):
        f(*args)
    return (time.perf_counter() - t) / number


numpy_chain = lambda v: np.sum(np.exp(-v * v) * np.tanh(v) + v / (1.0 + v * v))  # noqa: E731
print()
print(f"fused kernel {best(chain, big) * 1e3:.2f} ms, NumPy {best(numpy_chain, big) * 1e3:.2f} ms"
      f" (values {chain(big):.6f} and {numpy_chain(big):.6f})")
