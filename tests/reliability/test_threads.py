"""Threads: 8 threads calling one `tg.function` from its very first call (traced and
compiled once, every thread gets its own right result), gradient tapes recorded in several
threads at once (each thread's tapes see only its own ops), and Variables read while
another thread assigns them (every read is one whole value, never a mix of two).

Every test runs under `faulthandler` with a time limit: a deadlock prints every thread's
stack and fails. `TRACEGRAD_SLOW=1` multiplies the calls per thread by 25.
"""

from __future__ import annotations

import faulthandler
import importlib
import os
import sys
import threading

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp

tg_function = importlib.import_module("tracegrad.function")  # tg.function is the decorator

THREADS = 8
SLOW = os.environ.get("TRACEGRAD_SLOW", "") not in ("", "0")
CALLS = 400 * (25 if SLOW else 1)  # calls per thread
DEADLINE = 600 if SLOW else 120  # seconds before a hang is reported as one


def run_threads(work, n: int = THREADS) -> list:
    """`work(i)` in `n` threads released at once by a barrier; their results in order. A
    thread's exception is re-raised here; a hang dumps every stack and fails."""
    barrier = threading.Barrier(n)
    results, errors = [None] * n, []

    def target(i):
        try:
            barrier.wait()
            results[i] = work(i)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append((i, e))

    threads = [threading.Thread(target=target, args=(i,), daemon=True) for i in range(n)]
    faulthandler.dump_traceback_later(DEADLINE, exit=False, file=sys.stderr)
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(DEADLINE)
    finally:
        faulthandler.cancel_dump_traceback_later()
    hung = [t.name for t in threads if t.is_alive()]
    assert not hung, f"threads still running after {DEADLINE} s (deadlock?): {hung}"
    if errors:
        i, e = errors[0]
        raise AssertionError(f"thread {i} of {n} raised {type(e).__name__}: {e}") from e
    return results


@pytest.fixture
def fresh_kernels(tmp_path, monkeypatch):
    """An empty kernel cache, on disk and in memory, so the first call compiles."""
    nb = pytest.importorskip("tracegrad.backends.numba")
    monkeypatch.setenv("TRACEGRAD_CACHE_DIR", str(tmp_path / "cache"))
    nb.clear_memory_cache()
    yield nb
    nb.clear_memory_cache()


@pytest.fixture
def count_compiles(monkeypatch):
    """The number of executors compiled through `tg.function` (a list of one int)."""
    count = [0]
    real = tg_function.compile_graph

    def counting(*args, **kwargs):
        count[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(tg_function, "compile_graph", counting)
    return count


def _model(x, w):
    return tnp.sum(tnp.tanh(x @ w) * tnp.exp(-x[:, :1]), axis=1)


def _model_np(x, w):
    return np.sum(np.tanh(x @ w) * np.exp(-x[:, :1]), axis=1)


@pytest.mark.parametrize("backend_name", ["numpy", "numba"])
def test_eight_threads_share_the_first_call_and_trace_once(backend_name, tmp_path, monkeypatch):
    if backend_name == "numba":
        nb = pytest.importorskip("tracegrad.backends.numba")
        monkeypatch.setenv("TRACEGRAD_CACHE_DIR", str(tmp_path / "cache"))
        nb.clear_memory_cache()
        before = nb.cache_info()
    f = tg.function(_model, backend=backend_name)
    rng = np.random.default_rng(0)
    xs = rng.normal(size=(THREADS, 5, 3))
    w = rng.normal(size=(3, 4))

    def work(i):
        wrong = 0
        for k in range(CALLS):
            x = xs[(i + k) % THREADS]
            if not np.allclose(f(x, w), _model_np(x, w), rtol=1e-12, atol=0):
                wrong += 1
        return wrong

    assert run_threads(work) == [0] * THREADS
    assert f.tracing_count == 1
    if backend_name == "numba":  # one Numba compile, whatever the executors
        assert nb.cache_info()["compiled"] - before["compiled"] == 1
        nb.clear_memory_cache()


def test_eight_threads_first_call_compiles_one_executor(count_compiles):
    f = tg.function(_model, backend="numpy")
    x, w = np.ones((5, 3)), np.ones((3, 4))
    run_threads(lambda i: f(x, w))
    assert count_compiles[0] == 1, f"compiled {count_compiles[0]} executors for one trace"


def test_threads_tracing_different_shapes_at_once_each_get_their_trace(count_compiles):
    f = tg.function(_model, backend="numpy")
    w = np.linspace(-1, 1, 12).reshape(3, 4)

    def work(i):
        x = np.linspace(-1, 1, 3 * (i % 4 + 1)).reshape(i % 4 + 1, 3)
        for _ in range(CALLS // 4):
            np.testing.assert_allclose(f(x, w), _model_np(x, w), rtol=1e-12)
        return x.shape

    shapes = run_threads(work)
    assert f.tracing_count == len(set(shapes)) == 4
    assert count_compiles[0] == 4


def test_gradient_tapes_in_threads_record_only_their_own_ops(backend):
    shared = tg.Variable(np.linspace(0.5, 1.5, 6))  # read by every thread's tape
    scale = tg.function(lambda x, k: x * k)

    def work(i):
        k = float(i + 1)
        x0 = np.linspace(-1, 1, 6) + i
        for _ in range(CALLS // 8):
            x = tg.constant(x0)
            with tg.GradientTape(persistent=True) as tape:
                tape.watch(x)
                y = tnp.sum(tnp.sin(scale(x, k)) * shared)
            gx, gv = tape.gradient(y, [x, shared])
            np.testing.assert_allclose(gx.numpy(), k * np.cos(k * x0) * shared.numpy(),
                                       rtol=1e-12)
            np.testing.assert_allclose(gv.numpy(), np.sin(k * x0), rtol=1e-12)
            # sin(x k), * shared, sum; the compiled call is one op: nothing from other threads
            assert len(tape._tape.records) == 4, [
                op.primitive.name for op in tape._tape.records]
        return True

    assert all(run_threads(work))


def test_variable_reads_while_another_thread_assigns_are_whole_values(backend):
    n = 1000
    v = tg.Variable(np.zeros(n))
    read_sum = tg.function(lambda x: tnp.sum(x * v))
    done = threading.Event()
    rounds = CALLS * 2
    ones = np.ones(n)

    def work(i):
        if i == 0:  # the writer: v = k everywhere, k = 1, 2, ...
            try:
                for k in range(1, rounds + 1):
                    v.assign(np.full(n, float(k)))
            finally:
                done.set()
            return rounds
        seen = []
        while not done.is_set() or len(seen) < 10:
            snap = v.numpy()
            assert snap.min() == snap.max(), "a torn read of v.numpy()"
            eager = v.value().numpy()
            assert eager.min() == eager.max(), "a torn read of v.value()"
            k = read_sum(ones) / n
            assert k == int(k) and 0 <= k <= rounds, f"the compiled read gave {k}"
            seen.append(k)
        assert seen == sorted(seen), "a compiled read went back in time"
        return read_sum(ones) / n  # after the last assignment

    results = run_threads(work)
    assert results[0] == rounds and all(r == rounds for r in results[1:])
    np.testing.assert_array_equal(v.numpy(), np.full(n, float(rounds)))
