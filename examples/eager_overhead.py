"""Eager dispatch overhead: tracegrad ops on small eager tensors against NumPy on arrays.

Run: python examples/eager_overhead.py   (prints microseconds per call, best of 7 runs of
this thread's CPU time, which a loaded machine disturbs less than wall time)
"""

import time
import timeit

import numpy as np

import tracegrad as tg
import tracegrad.numpy as tnp  # noqa: F401  (used by the timed statements)

a = np.linspace(0.5, 2.0, 4)
b = np.linspace(-1.0, 1.0, 4)
x, y = tg.constant(a), tg.constant(b)
xf = tg.constant(a.astype(np.float32))
af = a.astype(np.float32)
m = np.linspace(0.0, 1.0, 12).reshape(3, 4)
xm = tg.constant(m)

PAIRS = [
    ("a + b", "x + y"),
    ("a + 2.0", "x + 2.0"),
    ("af * 2.0", "xf * 2.0"),
    ("np.sin(a)", "tnp.sin(x)"),
    ("np.sin(a)", "np.sin(x)"),
    ("a.sum()", "x.sum()"),
    ("a[1:]", "x[1:]"),
    ("a @ b", "x @ y"),
    ("np.maximum(a, 0.0)", "tnp.maximum(x, 0.0)"),
    ("m.sum(axis=0)", "xm.sum(axis=0)"),
    ("m @ m.T", "xm @ xm.T"),
]
TAPED = ["x + y", "x * 2.0", "tnp.sin(x)", "x.sum()", "x[1:]"]


def per_call(stmt, number=20000):
    times = timeit.repeat(stmt, globals=globals(), number=number, repeat=7,
                          timer=time.thread_time)
    return min(times) / number * 1e6


def main():
    print(f"{'NumPy':>18} {'us':>6}   {'tracegrad':>20} {'us':>6}  ratio")
    for np_stmt, tg_stmt in PAIRS:
        t_np, t_tg = per_call(np_stmt), per_call(tg_stmt)
        print(f"{np_stmt:>18} {t_np:6.2f}   {tg_stmt:>20} {t_tg:6.2f}  {t_tg / t_np:5.1f}x")
    for stmt in TAPED:
        with tg.GradientTape() as tape:
            tape.watch(x)
            recorded = per_call(stmt, number=2000)
        print(f"{stmt:>12} under a GradientTape: {recorded:.2f} us")


if __name__ == "__main__":
    main()
