"""Parallel kernels (docs/numba.md, "Parallel loops"): the same bits for every thread count,
and kernels that let other Python threads run."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tracegrad.backends import threads
from tracegrad.backends.numba import parallel

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Runs in a process whose Numba pool has 3 threads (NUMBA_NUM_THREADS is read when Numba
# starts): one kernel of sums, a mean, a dot-like sum, max/min, a sin/cos whose huge argument
# redoes one block, row sums and elementwise outputs, at 1 thread (the serial kernel), then
# the parallel kernel at 2, 3 and 1 threads.
_SCRIPT = textwrap.dedent("""
    import gc, sys
    import numpy as np
    import tracegrad as tg
    import tracegrad.numpy as tnp
    from tracegrad.backends import threads
    from tracegrad.backends.numba import parallel

    parallel.PARALLEL_MIN_ELEMENTS = 0
    tg.config.background_compile = False

    def many(x, y, m, z):
        e = tnp.tanh(x) * tnp.sin(x) + x ** 2
        return [tnp.sum(e), tnp.mean(x * y), tnp.sum(x * y), tnp.max(e), tnp.min(x * y),
                e * 2.0, tnp.sum(tnp.cos(z) - y), tnp.sin(z) * y,
                tnp.sum(tnp.exp(m * 0.5), axis=1), tnp.sum(m * m, axis=0),
                tnp.sqrt(tnp.abs(m)) + 1.0, tnp.sum(y), tnp.mean(m)]

    rng = np.random.default_rng(7)
    n = 100 * 1024 + 77  # ragged last block
    x, y = rng.standard_normal(n), rng.standard_normal(n)
    z = x.copy()
    z[50000] = 1e22  # the fast sin/cos reduction is wrong for it: its block is redone
    m = rng.standard_normal((37, 3000))

    def functions():
        return (tg.function(many, parallel=True), tg.function(tg.value_and_grad(
            lambda x: tnp.sum(tnp.tanh(x) * tnp.sin(x) + x ** 2)), parallel=True))

    def run(f, g):
        return [np.asarray(r) for r in f(x, y, m, z)] + [np.asarray(r) for r in g(x)]

    threads.num_threads = 1
    fs = functions()  # compiled at one thread: the serial kernels, parallel ones on demand
    serial = run(*fs)
    assert not [r for r in gc.get_objects() if isinstance(r, parallel.ParallelRun)]
    results = []
    for k in (2, 3):
        threads.num_threads = k
        results.append(run(*fs))
    runs = [r for r in gc.get_objects() if isinstance(r, parallel.ParallelRun)]
    assert len(runs) == 2 and all(r._run is not None for r in runs), runs
    alone = functions()  # compiled at 3 threads: the parallel kernels alone
    results.append(run(*alone))
    threads.num_threads = 1  # ... on one thread
    results.append(run(*alone))
    assert len([r for r in gc.get_objects() if isinstance(r, parallel.ParallelRun)]) == 2
    for got in results:
        for a, b in zip(serial, got, strict=True):
            assert a.dtype == b.dtype and a.shape == b.shape
            assert a.tobytes() == b.tobytes(), (a, b)
    want = [np.sum(np.tanh(x) * np.sin(x) + x ** 2), np.mean(x * y), np.dot(x, y)]
    np.testing.assert_allclose([float(v) for v in serial[:3]], want, rtol=1e-12)
    np.testing.assert_allclose(serial[6], np.sum(np.cos(z) - y), rtol=1e-12)
    print("ok")
""")


def test_parallel_kernels_give_the_same_bits_for_every_thread_count():
    env = dict(os.environ, NUMBA_NUM_THREADS="3", PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True,
                         text=True, timeout=900)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-3000:]


@pytest.fixture
def two_threads(monkeypatch):
    monkeypatch.setattr(parallel, "PARALLEL_MIN_ELEMENTS", 0)
    monkeypatch.setattr(threads, "num_threads", 2)
    monkeypatch.setattr(tg.config, "background_compile", False)


def test_kernels_release_the_gil(two_threads):
    """While a kernel runs (serial, parallel or row-split), another Python thread makes
    progress."""
    def chain(x):
        for _ in range(6):
            x = tnp.sin(x) * tnp.cos(x) + tnp.exp(-x * x)
        return x

    x = np.random.default_rng(0).standard_normal(600_000)
    m = x.reshape(600, 1000)
    for par, fn, arg in ((False, lambda x: tnp.sum(chain(x)), x),
                         (True, lambda x: tnp.sum(chain(x)), x),
                         (True, lambda m: tnp.sum(chain(m), axis=1), m)):
        f = tg.function(fn, parallel=par)
        f(arg)  # compiled
        ex = f.get_concrete_function(arg).executor
        assert ("rows_part(" in (ex._parallel_ex or ex).source) == (arg is m)
        spans, ticks = [], []

        def call(f=f, spans=spans, arg=arg):
            for _ in range(3):
                start = time.perf_counter()
                f(arg)
                spans.append((start, time.perf_counter()))

        worker = threading.Thread(target=call)
        worker.start()
        while worker.is_alive():
            ticks.append(time.perf_counter())
            time.sleep(0)
        worker.join()
        inside = [t for t in ticks if any(a < t < b for a, b in spans)]
        # a kernel holding the GIL would leave no tick inside its call
        assert len(inside) > 10, (par, spans, len(ticks))


def test_parallel_kernel_with_unknown_dims(two_threads):
    """None dims clamp broadcast indices with `min(i, n - 1)`: in a parallel loop of an
    int64 index (Numba's `prange` index is unsigned)."""
    f = tg.function(lambda x: tnp.exp(x - tnp.max(x, axis=1, keepdims=True)),
                    input_signature=[tg.TensorSpec((None, None), "float64")], parallel=True)
    for shape in [(5, 8), (9, 1)]:
        x = np.random.default_rng(2).standard_normal(shape)
        want = np.exp(x - np.max(x, axis=1, keepdims=True))
        np.testing.assert_allclose(np.asarray(f(x)), want, rtol=1e-15)
