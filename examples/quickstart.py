"""Quickstart: trace a NumPy-style function, look at its IR, run it."""

import numpy as np

import tracegrad as tg
import tracegrad.numpy as tnp


@tg.function
def loss(x, y):
    return tnp.sum(tnp.sin(x) * y)


x = np.linspace(0.0, 1.0, 5)
y = np.arange(5.0)

print("loss(x, y) =", loss(x, y))
print("NumPy says  ", np.sum(np.sin(x) * y))
print()
print(loss.get_concrete_function(x, y).graph)
print()
print("traced", loss.tracing_count, "time(s) for 3 calls:",
      [float(loss(x * k, y)) for k in range(3)])
