"""Memory over long runs (issue 13, point 4): calls of a compiled function, tape recordings
and traces of functions that go out of scope leave nothing behind, measured by the RSS
(/proc/self/statm) and by `tracemalloc` (the Python heap) between a warm-up and the end.

CI runs each at a count that takes seconds and still fails on a leak of one object per call
(the tracemalloc bound is below what one leaked object per call adds) and on a trace, a
function or an instance that outlives its last reference (weak references). The full counts
(10^6 calls, 10^5 tapes, 10^4 traces; 24 minutes on 2 cores) are opt-in:

    TRACEGRAD_MEMORY_TESTS=1 python -m pytest -q -s tests/reliability/test_memory.py

(`-s` prints the figures docs/reliability.md quotes.)
"""

from __future__ import annotations

import gc
import os
import sys
import time
import tracemalloc
import weakref

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp

FULL = os.environ.get("TRACEGRAD_MEMORY_TESTS", "") not in ("", "0")
CALLS = 10**6 if FULL else 8_000  # over 4 ways of calling
TAPES = 10**5 if FULL else 1_000
TRACES = 10**4 if FULL else 40  # each: a function, a gradient and a method traced

# Python-heap growth allowed. Bounded caches of the interpreter and of NumPy (CPython's
# attribute cache holds up to 4096 names, NumPy keeps a few flag objects) stay below it;
# one leaked 56-byte object per call exceeds it at either count (112 KB in CI, 14 MB in
# full), a leaked tape or trace (kilobytes each) too.
HEAP_BOUND = (512 if FULL else 64) * 1024
RSS_BOUND = 16 * 2**20

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="reads the RSS from /proc/self/statm")

X = np.linspace(0.0, 1.0, 3)


def rss() -> int:
    """Resident set size of this process, in bytes."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def measure(label: str, step, n: int, warm: int) -> dict:
    """Run `step(i)` `warm` times, then `n` times; the RSS and the Python heap
    (tracemalloc) before and after the `n` (after a collection), printed."""
    for i in range(warm):
        step(i)
    gc.collect()
    rss0 = rss()
    tracemalloc.start()
    heap0 = tracemalloc.get_traced_memory()[0]
    start = time.perf_counter()
    for i in range(warm, warm + n):
        step(i)
    seconds = time.perf_counter() - start
    gc.collect()
    heap1, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss1 = rss()
    m = {"n": n, "rss0": rss0, "rss1": rss1, "heap": heap1 - heap0, "peak": peak - heap0,
         "seconds": seconds}
    print(f"\n{label}: {n} in {seconds:.1f} s (traced); RSS {rss0 / 2**20:.1f} -> "
          f"{rss1 / 2**20:.1f} MB; Python heap {m['heap'] / 1024:+.1f} KB, peak "
          f"{m['peak'] / 1024:.1f} KB above the start")
    return m


def assert_no_growth(m: dict) -> None:
    assert m["heap"] < HEAP_BOUND, m
    assert m["rss1"] - m["rss0"] < RSS_BOUND, m


def _tiny(a, b):
    return tnp.sin(a) * b + 1.0


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_calls_of_a_compiled_function_do_not_grow_memory(backend):
    f = tg.function(_tiny, backend=backend)
    g = tg.grad(lambda a: tnp.sum(tnp.sin(a) * a))
    t = tg.constant(X)
    saved = tg.config.backend
    tg.config.backend = backend  # what g compiles with
    try:
        expected = np.sin(X) * 2.0 + 1.0
        np.testing.assert_allclose(f(X, 2.0), expected, rtol=1e-15)
        # the short path (arrays), tensors and a scalar (the general path), a gradient
        steps = [lambda i: f(X, X), lambda i: f(t, t), lambda i: f(X, 2.0), lambda i: g(X)]
        for k, step in enumerate(steps):
            assert_no_growth(measure(f"{backend} calls, variant {k}", step, CALLS // 4,
                                     warm=200))
        np.testing.assert_allclose(f(X, 2.0), expected, rtol=1e-15)
        np.testing.assert_allclose(g(X), np.cos(X) * X + np.sin(X), rtol=1e-15)
        assert f.tracing_count == 2  # arrays and tensors share a trace; the scalar has one
    finally:
        tg.config.backend = saved


def test_tape_recordings_do_not_grow_memory():
    x = tg.constant(X)
    v = tg.Variable(np.full(3, 0.5))
    grads = []

    def step(i):
        with tg.GradientTape() as tape:
            tape.watch(x)
            y = tnp.sum(tnp.sin(x) * x * v)
        grads[:] = tape.gradient(y, [x, v])

    assert_no_growth(measure("tape recordings", step, TAPES, warm=100))
    np.testing.assert_allclose(grads[0], (np.cos(X) * X + np.sin(X)) * 0.5, rtol=1e-15)
    np.testing.assert_allclose(grads[1], np.sin(X) * X, rtol=1e-15)


class Model:
    def __init__(self, scale):
        self.scale = scale

    @tg.function
    def __call__(self, a):
        return tnp.cos(a) * self.scale


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_traces_of_functions_that_go_out_of_scope_are_freed(backend):
    saved = tg.config.backend
    tg.config.backend = backend  # what tg.grad and the method compile with
    last = {}

    def step(i):
        c = float(i % 97)

        def fn(a):  # a new function, traced and compiled, then dropped
            return tnp.sin(a) * c + a

        f = tg.function(fn, backend=backend)
        out = f(X)
        np.testing.assert_allclose(out, np.sin(X) * c + X, rtol=1e-15)
        grad = tg.grad(lambda a: tnp.sum(tnp.cos(a) * a * c))(X)
        np.testing.assert_allclose(grad, (np.cos(X) - np.sin(X) * X) * c, rtol=1e-14)
        m = Model(c)  # a method's per-instance function goes with its instance
        np.testing.assert_allclose(m(X), np.cos(X) * c, rtol=1e-15)
        concrete = f.get_concrete_function(X)
        last.update(function=weakref.ref(f), concrete=weakref.ref(concrete),
                    graph=weakref.ref(concrete.graph), model=weakref.ref(m))

    try:
        assert_no_growth(measure(f"{backend} traces", step, TRACES, warm=10))
    finally:
        tg.config.backend = saved
    gc.collect()
    assert all(ref() is None for ref in last.values()), last
    assert len(Model.__call__._bound) == 0  # the per-instance table forgets dead instances
