"""How a kernel reads a slice of an operand.

- A start that is a non-negative constant is written into the code: no int slot loaded at
  entry, an index LLVM folds (the LSTM l=4 gradient: 274 slot loads fewer, its synchronous
  first compile about a sixth shorter).
- A start counted from the end (negative or None) is the run-time size's, from an int slot:
  one kernel serves every size.
- A read at an offset indexes unsigned: Numba wraps a signed index around, a compare and a
  select per index of every read, which LLVM cannot remove for an offset it does not know
  (the LSTM l=4 gradient's steps: 23.1 -> 20.4 ms a call without them)."""

from __future__ import annotations

import re

import numpy as np

import tracegrad as tg
from tests.backends._codegen_probe import facts, kernel_module

START_SLOT = re.compile(r"\bst\d+ = I\[")  # a slice's start loaded from its int slot


def rows(w, x):
    return (w[1, 3:203] * x[2, 0:200] + w[3, 1:201]) * w[0, 2:202]


def rows_from_end(w, x):
    return (w[1, -207:-7] * x[2, -200:] + w[3, -209:-9]) * w[0, -208:-8]


def test_reads_at_offsets_are_not_wrapped_around(tmp_path, monkeypatch):
    from tracegrad.backends import numba as nb

    rng = np.random.default_rng(2)
    w, x = rng.normal(size=(4, 210)), rng.normal(size=(3, 200))
    monkeypatch.setenv("TRACEGRAD_CACHE_DIR", str(tmp_path))  # compiled here: LLVM to read
    nb.clear_memory_cache()
    spec = [tg.TensorSpec([4, None]), tg.TensorSpec([3, None])]  # starts from the end
    graph = tg.optimize(tg.trace(rows_from_end)(*spec))
    src = nb.generate_source(graph)
    assert len(START_SLOT.findall(src)) == 4  # the run-time size's
    nb.compile_graph(graph)
    kernel = kernel_module(src).kernel
    llvm = "\n".join(kernel.inspect_llvm().values())
    # wrapped around, the 4 reads at offsets took 28 selects (two per index)
    assert llvm.count(" = select ") < 4
    assert facts(kernel)["vector_loop"]
    np.testing.assert_array_equal(
        tg.function(rows_from_end, input_signature=spec, backend="numba")(w, x),
        tg.function(rows_from_end, input_signature=spec, backend="numpy")(w, x))


def test_constant_starts_are_written_into_the_code():
    from tracegrad.backends import numba as nb

    rng = np.random.default_rng(3)
    w, x = rng.normal(size=(4, 210)), rng.normal(size=(3, 200))
    src = nb.generate_source(tg.optimize(tg.trace(rows)(w, x)))
    assert not START_SLOT.findall(src)  # every start a constant
    for read in ("w[1, ", "(3 + ", "(2 + ", "(1 + "):
        assert read.split("[")[-1] in src
    expect = (w[1, 3:203] * x[2, 0:200] + w[3, 1:201]) * w[0, 2:202]
    np.testing.assert_array_equal(tg.function(rows, backend="numba")(w, x), expect)
    np.testing.assert_array_equal(tg.function(rows, backend="numpy")(w, x), expect)


def edges(x):
    return x[2:] * 2.0, x[-3:] + 1.0, x[1::2] * 3.0


def test_starts_of_unknown_dims_follow_the_run_time_size():
    from tracegrad.backends.numba import cache

    spec = [tg.TensorSpec([None])]
    compiled = tg.function(edges, input_signature=spec, backend="numba")
    compiled(np.arange(7.0))
    before = cache.STATS["compiled"] + cache.STATS["disk_hits"]
    for n in (0, 1, 2, 3, 4, 9, 50):  # x[2:] empty or not, x[-3:] shorter than 3
        x = np.arange(float(n)) * 0.5 - 3.0
        got = compiled(x)
        want = (x[2:] * 2.0, x[-3:] + 1.0, x[1::2] * 3.0)
        for g, e in zip(got, want, strict=True):
            np.testing.assert_array_equal(g, e)
    assert cache.STATS["compiled"] + cache.STATS["disk_hits"] == before  # one kernel


def halves(x):
    n = x.shape[0]
    return x[n // 2:] * 2.0 - x[: n - n // 2]  # a start that is a size


def differences(x):
    return x[1:] - x[:-1]  # starts that are constants


def _compiles(fn, sizes):
    from tracegrad.backends.numba import cache

    compiled = tg.function(fn, backend="numba")
    counts = []
    for n in sizes:
        x = np.linspace(-1.0, 2.0, n) ** 2
        before = cache.STATS["compiled"]
        np.testing.assert_array_equal(compiled(x), fn(x))
        counts.append(cache.STATS["compiled"] - before)
    return counts


def test_a_function_meeting_other_starts_compiles_the_generic_kernel(tmp_path, monkeypatch):
    from tracegrad.backends import numba as nb

    monkeypatch.setenv("TRACEGRAD_CACHE_DIR", str(tmp_path))
    nb.clear_memory_cache()
    # the first size specializes (start 4); the second (start 6) compiles the generic
    # kernel, which serves every later size
    assert _compiles(halves, [8, 12, 16, 9, 8]) == [1, 1, 0, 0, 0]
    # the same starts at every size: the specialized kernel serves them all
    assert _compiles(differences, [5, 9, 30]) == [1, 0, 0]
    # a new process (memory cleared): the generic kernel, cached on disk, for any size
    nb.clear_memory_cache()
    assert _compiles(halves, [20, 8]) == [0, 0]
