"""The cost of calling a compiled function, beyond the work its graph does.

For a trivial graph (`x + 1`) and a tiny-input function (a few ops on 3 elements), prints
the time per call (µs) of a bare Python call of the NumPy equivalent, then for each way of
calling (NumPy arrays, eager `tg.Tensor`s, a Python scalar, a keyword argument):
  - `f(...)` through `tg.function` (flatten, signature key, lookup, convert, call, unflatten);
  - the same trace's executor called directly with a list of arrays (what the graph costs);
  - the difference: the call path's overhead.

    python benchmarks/call_overhead.py [--backend numpy|numba] [--repeat N]
"""

from __future__ import annotations

import argparse
import functools
import timeit

import numpy as np

import tracegrad as tg
import tracegrad.numpy as tnp

tg.config.background_compile = False  # timed calls measure the kernel, not the interim


def per_call_us(fn, number: int, repeat: int) -> float:
    """Best-of-`repeat` mean time of `fn()` in microseconds."""
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e6


def trivial(x, y):
    return x + 1


def tiny(x, y):
    return tnp.sum(tnp.sin(x) * y + x * x)


def tiny_numpy(x, y):
    return np.sum(np.sin(x) * y + x * x)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="numpy", choices=["numpy", "numba"])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--number", type=int, default=20000)
    args = parser.parse_args()

    x, y = np.linspace(0.0, 1.0, 3), np.arange(3.0)
    tx, ty = tg.constant(x), tg.constant(y)
    variants = [
        ("NumPy arrays", (x, y), {}),
        ("eager tg.Tensors", (tx, ty), {}),
        ("a Python scalar", (x, 2.0), {}),
        ("a keyword argument (bound, then as above)", (x,), {"y": y}),
    ]
    cases = [("trivial graph (x + 1)", trivial, lambda x, y: x + 1),
             ("tiny function (sum(sin(x)*y + x*x), 3 elements)", tiny, tiny_numpy)]
    print(f"backend={args.backend}; µs per call, best of {args.repeat} x {args.number}")
    for title, fn, reference in cases:
        f = tg.function(fn, backend=args.backend)
        bare = per_call_us(functools.partial(reference, x, y), args.number, args.repeat)
        print(f"\n{title}")
        print(f"  {'bare Python call of the NumPy equivalent':<42} {bare:8.2f}")
        print(f"  {'f(...) with':<42} {'f(...)':>8} {'executor':>9} {'overhead':>9}")
        for label, call_args, call_kwargs in variants:
            f(*call_args, **call_kwargs)
            concrete = f.get_concrete_function(*call_args, **call_kwargs)
            executor = concrete.executor
            arrays = [np.asarray(a, dtype=d) for a, d in zip(
                (*call_args, *call_kwargs.values()), concrete._in_dtypes, strict=True)]
            direct = per_call_us(functools.partial(executor, arrays), args.number, args.repeat)
            full = per_call_us(functools.partial(f, *call_args, **call_kwargs), args.number,
                               args.repeat)
            print(f"  {label:<42} {full:8.2f} {direct:9.2f} {full - direct:9.2f}")
        assert f.tracing_count == 2  # arrays, tensors and the keyword call share a trace

if __name__ == "__main__":
    main()
