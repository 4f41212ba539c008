"""Eager dispatch overhead: tracegrad ops on small eager tensors against NumPy on arrays.

Run: python examples/eager_overhead.py   (prints microseconds per call, best of 7 runs)
"""

import timeit

import numpy as np

import tracegrad as tg
import tracegrad.numpy as tnp  # noqa: F401  (used by the timed statements)

a = np.linspace(0.5, 2.0, 4)
b = np.linspace(-1.0, 1.0, 4)
x, y = tg.constant(a), tg.constant(b)
xf = tg.constant(a.astype(np.float32))
af = a.astype(np.float32)

PAIRS = [
    ("a + b", "x + y"),
    ("a + 2.0", "x + 2.0"),
    ("af * 2.0", "xf * 2.0"),
    ("np.sin(a)", "tnp.sin(x)"),
    ("np.sin(a)", "np.sin(x)"),
    ("a.sum()", "x.sum()"),
    ("a[1:]", "x[1:]"),
    ("a @ b", "x @ y"),
]


def per_call(stmt, number=20000):
    times = timeit.repeat(stmt, globals=globals(), number=number, repeat=7)
    return min(times) / number * 1e6


def main():
    print(f"{'NumPy':>12} {'us':>6}   {'tracegrad':>12} {'us':>6}  ratio")
    for np_stmt, tg_stmt in PAIRS:
        t_np, t_tg = per_call(np_stmt), per_call(tg_stmt)
        print(f"{np_stmt:>12} {t_np:6.2f}   {tg_stmt:>12} {t_tg:6.2f}  {t_tg / t_np:5.1f}x")
    with tg.GradientTape() as tape:
        tape.watch(x)
        recorded = per_call("x + y", number=5000)
    print(f"x + y under a GradientTape: {recorded:.2f} us")


if __name__ == "__main__":
    main()
