"""Row-split parallel kernels (docs/numba.md, "Parallel loops"): which graphs get one, the
same bits at every thread count, values against NumPy, and the GIL released."""

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
from tracegrad import ops
from tracegrad.backends import threads
from tracegrad.backends.numba import parallel, rows
from tracegrad.backends.numba.plan import Plan
from tracegrad.function import Config
from tracegrad.passes import optimize

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def w5(w1, w2, x):
    def net(v):
        return tnp.tanh(w2 @ tnp.tanh(w1 @ v))
    return tg.vmap(tg.jacobian(net))(x)


def _w5_numpy(w1, w2, x):
    h = np.tanh(x @ w1.T)
    y = np.tanh(h @ w2.T)
    return (1.0 - y * y)[:, :, None] * np.matmul(w2, (1.0 - h * h)[:, :, None] * w1)


def _row_class(fn, *args, signature=None):
    graph = optimize(tg.function(fn, input_signature=signature).get_concrete_function(
        *args).graph)
    return rows.row_class(Plan(graph))


def test_which_graphs_split_into_rows():
    rng = np.random.default_rng(0)
    w1, w2, x = rng.standard_normal((32, 16)), rng.standard_normal((16, 32)), \
        rng.standard_normal((64, 16))
    m = rng.standard_normal((64, 8))
    assert _row_class(w5, w1, w2, x) is not None
    assert _row_class(lambda m: tnp.sum(tnp.exp(m), axis=1), m) is not None
    assert _row_class(lambda m: tnp.exp(m).T @ m, m) is None  # contracts the rows
    assert _row_class(lambda m: tnp.sum(m, axis=0), m) is None  # sums over the rows
    assert _row_class(lambda m: m - tnp.mean(m), m) is None
    assert _row_class(lambda m: tnp.cumsum(m, axis=0), m) is None  # mixes the rows
    assert _row_class(lambda m: m[::-1] * 2.0, m) is None
    assert _row_class(lambda m: m.T * 2.0, m) is None  # the rows are not axis 0
    unknown = [tg.TensorSpec((None, None), "float64")]
    # the row count as a shape (each part's own) and as a value (the whole call's)
    assert _row_class(lambda m: m - tnp.max(m, axis=1, keepdims=True), m,
                      signature=unknown) is not None
    assert _row_class(lambda m: m * tnp.asarray(ops.dim_size(m, axis=0), "float64"), m,
                      signature=unknown) is None


# In a process whose Numba pool has 3 threads: W5 with 1000 examples (16 parts of 62-63
# rows), per-row softmaxes of 7 rows (one part each) and of None dims, at 1, 2, 3 and 1
# threads; compiled at 1 thread and at 3.
_SCRIPT = textwrap.dedent("""
    import numpy as np
    import tracegrad as tg
    import tracegrad.numpy as tnp
    from tracegrad.backends import threads
    from tracegrad.backends.numba import parallel, rows
    from test_parallel_rows import w5, _w5_numpy

    parallel.PARALLEL_MIN_ELEMENTS = 0
    tg.config.background_compile = False

    def softmax(m):
        e = tnp.exp(m - tnp.max(m, axis=1, keepdims=True))
        return e / tnp.sum(e, axis=1, keepdims=True)

    rng = np.random.default_rng(3)
    w1, w2 = rng.standard_normal((32, 16)) / 4, rng.standard_normal((16, 32)) / 6
    cases = [(w5, (w1, w2, rng.standard_normal((1000, 16))), None),
             (softmax, (rng.standard_normal((7, 3001)),), None),
             (softmax, (rng.standard_normal((50, 301)),),
              [tg.TensorSpec((None, None), "float64")])]

    def run(compile_at):
        threads.num_threads = compile_at
        fs = [tg.function(f, parallel=True, input_signature=sig) for f, _, sig in cases]
        got = []
        for k in (1, 2, 3, 1):
            threads.num_threads = k
            got.append([np.asarray(f(*args)) for f, (_, args, _) in zip(fs, cases)])
        for f, (_, args, _) in zip(fs, cases):  # a row-split kernel ran
            ex = f.get_concrete_function(*args).executor
            assert "rows_part(" in (ex._parallel_ex or ex).source
        return got

    results = run(1) + run(3)
    for got in results:
        for a, b in zip(results[0], got, strict=True):
            assert a.shape == b.shape and a.tobytes() == b.tobytes()
    want = [_w5_numpy(*cases[0][1])] + [np.exp(m - m.max(1, keepdims=True)) / np.exp(
        m - m.max(1, keepdims=True)).sum(1, keepdims=True) for m in (cases[1][1][0],
                                                                   cases[2][1][0])]
    for a, b in zip(results[0], want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)
    print("ok")
""")


def test_row_split_kernels_give_the_same_bits_for_every_thread_count():
    env = dict(os.environ, NUMBA_NUM_THREADS="3",
               PYTHONPATH=os.pathsep.join([ROOT, os.path.dirname(os.path.abspath(__file__))]))
    out = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True,
                         text=True, timeout=900)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-3000:]


def _ran_rows(f, *args) -> bool:
    ex = f.get_concrete_function(*args).executor
    f(*args)
    run = ex._parallel_ex
    return run is not None and "rows_part(" in run.source or "rows_part(" in ex.source


def test_row_split_kernels_are_the_default(monkeypatch):
    """`tg.config.parallel` None (the default): a graph that splits into rows runs its
    large calls (by elements, or by its products' multiply-adds) on the row-split kernel;
    other graphs and `parallel=False` never run a parallel kernel."""
    monkeypatch.setattr(tg.config, "background_compile", False)
    monkeypatch.setattr(threads, "num_threads", 2)
    monkeypatch.delenv("TRACEGRAD_PARALLEL", raising=False)
    assert Config().parallel is None
    monkeypatch.setattr(tg.config, "parallel", None)
    # the documented defaults (TRACEGRAD_PARALLEL_MIN and _MIN_MADDS may change them)
    monkeypatch.setattr(parallel, "PARALLEL_MIN_ELEMENTS", 300_000)
    monkeypatch.setattr(parallel, "PARALLEL_MIN_MADDS", 1 << 22)
    rng = np.random.default_rng(5)
    w1, w2 = rng.standard_normal((32, 16)) / 4, rng.standard_normal((16, 32)) / 6
    for batch, large in ((512, True), (256, False)):
        # 512 examples: 262144 elements (fewer than PARALLEL_MIN_ELEMENTS), 4.7 million
        # multiply-adds (more than PARALLEL_MIN_MADDS); 256: half of each
        x = rng.standard_normal((batch, 16))
        assert _ran_rows(tg.function(w5), w1, w2, x) == large
        assert not _ran_rows(tg.function(w5, parallel=False), w1, w2, x)
        np.testing.assert_allclose(np.asarray(tg.function(w5)(w1, w2, x)),
                                   _w5_numpy(w1, w2, x), rtol=1e-12, atol=1e-15)
    big = rng.standard_normal(parallel.PARALLEL_MIN_ELEMENTS)
    f = tg.function(lambda v: tnp.sum(tnp.sin(v)))
    assert not _ran_rows(f, big)
    ex = f.get_concrete_function(big).executor
    assert ex._parallel is None and "prange(" not in ex.source


def test_a_graph_whose_serial_kernel_can_raise_stays_serial_by_default(monkeypatch):
    """`parallel` None: a graph that splits into rows but whose serial kernel can raise (an
    integer power's negative exponent) has no row-split kernel, so it gets no parallel
    kernel at all (not the loop-nest one `parallel=True` asks for), and its error names the
    op."""
    from tracegrad.backends.numba import compile_graph

    monkeypatch.setattr(threads, "num_threads", 2)

    def fn(x, e):
        return x ** e + x

    x = np.arange(8192 * 64, dtype=np.int64).reshape(8192, 64) % 7
    e = np.int64(3)
    graph = tg.function(fn).get_concrete_function(x, e).graph
    assert rows.row_class(Plan(graph)) is not None
    ex = compile_graph(graph, parallel=None)
    assert ex._parallel is None and "prange(" not in ex.source and "_value_error(" in ex.source
    np.testing.assert_array_equal(ex([x, e])[0], x ** 3 + x)
    with pytest.raises(ValueError, match="power"):
        ex([x, np.int64(-1)])


def test_a_row_split_kernel_reads_0d_array_arguments(monkeypatch):
    """Black-Scholes' rates are 0-d arrays: Numba's parallel loop passes a 0-d array to the
    function it calls as a scalar, so the row-split kernel failed to type (each part now
    reads a one-element view)."""
    monkeypatch.setattr(tg.config, "background_compile", False)
    monkeypatch.setattr(threads, "num_threads", 2)
    monkeypatch.setattr(parallel, "PARALLEL_MIN_ELEMENTS", 1000)

    def f(x, y, r, v):
        return tnp.log(x / y) * r + v * tnp.sqrt(y), x * r - v

    rng = np.random.default_rng(11)
    x, y = rng.random(5000) + 1.0, rng.random(5000) + 1.0
    r, v = np.float64(0.03), np.float64(0.25)
    fn = tg.function(f)
    assert _ran_rows(fn, x, y, r, v)
    got = fn(x, y, r, v)
    np.testing.assert_allclose(got[0], np.log(x / y) * r + v * np.sqrt(y), rtol=1e-14)
    np.testing.assert_allclose(got[1], x * r - v, rtol=1e-15)
