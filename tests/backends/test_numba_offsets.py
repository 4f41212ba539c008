"""A kernel reads slices of its operands at run-time offsets (a weight's rows, a loop's
carried rows) with unsigned indices: Numba wraps a signed index around, a compare and a
select per index of every read, which LLVM cannot remove for an offset it does not know
(the LSTM l=4 gradient's steps: 23.1 -> 20.4 ms a call without them)."""

from __future__ import annotations

import numpy as np

import tracegrad as tg
from tests.backends._codegen_probe import facts, kernel_module


def rows(w, x):
    return (w[1, 3:203] * x[2, 0:200] + w[3, 1:201]) * w[0, 2:202]


def test_reads_at_offsets_are_not_wrapped_around(tmp_path, monkeypatch):
    from tracegrad.backends import numba as nb

    rng = np.random.default_rng(2)
    w, x = rng.normal(size=(4, 210)), rng.normal(size=(3, 200))
    monkeypatch.setenv("TRACEGRAD_CACHE_DIR", str(tmp_path))  # compiled here: LLVM to read
    nb.clear_memory_cache()
    graph = tg.optimize(tg.trace(rows)(w, x))
    src = nb.generate_source(graph)
    nb.compile_graph(graph)
    kernel = kernel_module(src).kernel
    llvm = "\n".join(kernel.inspect_llvm().values())
    # wrapped around, the 4 reads at offsets took 28 selects (two per index)
    assert llvm.count(" = select ") < 4
    assert facts(kernel)["vector_loop"]
    np.testing.assert_array_equal(tg.function(rows, backend="numba")(w, x),
                                  tg.function(rows, backend="numpy")(w, x))
