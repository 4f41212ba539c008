"""The op table's value columns: for every row, the traced graph on the numpy backend, eager
execution on `tg.constant` inputs (with and without a recording tape), the same function
on plain NumPy input, and NumPy itself agree (exactly, or within the row's tolerance and
its stated reason); every op's `abstract_eval` type equals what its `impl` produced; and
every registered primitive has a row."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

import tracegrad as tg
from tests.ops.optable import CASES, recording
from tracegrad.core import tree
from tracegrad.core.ir import EagerTensor, GraphTensor, Tensor
from tracegrad.core.op import REGISTRY
from tracegrad.numpy._core import is_python_scalar
from tracegrad.transforms import evaluate


def _leaves(out):
    return tree.flatten(out)[0]


def _assert_same(case, got, expected, how):
    got_leaves, expected_leaves = _leaves(got), _leaves(expected)
    assert len(got_leaves) == len(expected_leaves), f"{how}: {len(got_leaves)} results"
    for g, e in zip(got_leaves, expected_leaves, strict=True):
        g, e = np.asarray(g), np.asarray(e)
        assert g.shape == e.shape, f"{how}: shape {g.shape}, NumPy {e.shape}"
        assert g.dtype == e.dtype, f"{how}: dtype {g.dtype}, NumPy {e.dtype}"
        if case.rtol == 0 and case.atol == 0:
            equal = np.array_equal(g, e, equal_nan=g.dtype.kind in "fc")
            assert equal, f"{how}: not exactly NumPy's values\n got {g!r}\n expected {e!r}"
        else:
            np.testing.assert_allclose(g, e, rtol=case.rtol, atol=case.atol, equal_nan=True,
                                       err_msg=f"{how} ({case.why})")


def _expected(case):
    with np.errstate(all="ignore"):
        return case.reference(*case.args)


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_traced_numpy_backend_matches_numpy(case):
    got = tg.function(case.fn, backend="numpy")(*case.args)
    for leaf in _leaves(got):
        assert isinstance(leaf, (np.ndarray, np.generic)), f"traced result {type(leaf)}"
    _assert_same(case, got, _expected(case), "traced (numpy backend)")


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_numpy_backend_code_matches_its_walk(case, monkeypatch):
    """The numpy backend's generated code (a graph run often, evaluate.py) gives the op-by-op
    walk's values bit for bit."""
    walked = tg.function(case.fn, backend="numpy")(*case.args)
    monkeypatch.setattr(evaluate, "_WALKS_BEFORE_CODE", 0)
    coded = tg.function(case.fn, backend="numpy")(*case.args)
    walked, coded = _leaves(walked), _leaves(coded)
    assert len(walked) == len(coded)
    for w, c in zip(walked, coded, strict=True):
        w, c = np.asarray(w), np.asarray(c)
        assert (c.shape, c.dtype) == (w.shape, w.dtype)
        assert np.array_equal(c, w, equal_nan=w.dtype.kind in "fc"), f"{c!r} != {w!r}"


@pytest.mark.parametrize("taped", [False, True], ids=["plain", "taped"])
@pytest.mark.parametrize("case", CASES, ids=repr)
def test_eager_matches_numpy(case, taped):
    args = [a if type(a) in (int, float) else tg.constant(a) for a in case.args]
    with recording() if taped else contextlib.nullcontext(), np.errstate(all="ignore"):
        got = case.fn(*args)
    for leaf in _leaves(got):
        wanted = EagerTensor if len(args) > sum(map(is_python_scalar, args)) else (
            np.ndarray, np.generic)
        assert isinstance(leaf, wanted), f"eager result {type(leaf)}"
    _assert_same(case, [np.asarray(x) for x in _leaves(got)],
                 [np.asarray(x) for x in _leaves(_expected(case))], "eager")


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_numpy_input_gives_numpy(case):
    with np.errstate(all="ignore"):
        got = case.fn(*case.args)
    if case.numpy_in_numpy_out:
        for leaf, want in zip(_leaves(got), _leaves(_expected(case)), strict=True):
            assert not isinstance(leaf, Tensor), f"NumPy input gave {type(leaf)}"
            if isinstance(want, (np.ndarray, np.generic)):
                scalar = isinstance(want, np.generic)
                assert isinstance(leaf, np.generic) == scalar, (
                    f"NumPy input gave {type(leaf).__name__}, NumPy {type(want).__name__}")
    _assert_same(case, [np.asarray(x) for x in _leaves(got)],
                 [np.asarray(x) for x in _leaves(_expected(case))], "NumPy input")


def _fits(shape, known) -> bool:
    return len(shape) == len(known) and all(k is None or k == d for d, k in zip(shape, known))


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_abstract_eval_matches_impl(case):
    """Run the traced graph op by op: each result's shape and dtype is what abstract_eval
    said it would be."""
    graph = tg.trace(case.fn)(*case.args)
    env = {id(t): np.asarray(a) for t, a in zip(graph.inputs, case.args, strict=True)}
    for external, placeholder in graph.captures:
        env[id(placeholder)] = np.asarray(external)
    with np.errstate(all="ignore"):
        for op in graph.operations:
            values = [env[id(t)] for t in op.inputs]
            out = op.primitive.impl(*values, **op.attrs)
            outs = list(out) if op.primitive.multiple_results else [out]
            assert len(outs) == len(op.outputs), op
            for t, o in zip(op.outputs, outs, strict=True):
                o = np.asarray(o)
                assert isinstance(t, GraphTensor)
                assert _fits(o.shape, t.type.shape), f"{op}: impl shape {o.shape}, {t.type}"
                assert o.dtype == t.type.dtype, f"{op}: impl dtype {o.dtype}, {t.type}"
                env[id(t)] = o


def test_every_primitive_has_a_row():
    covered = {c.primitive for c in CASES if c.primitive}
    missing = sorted(set(REGISTRY) - covered)
    assert not missing, f"primitives without an op-table row: {missing}"


def test_every_row_of_a_primitive_uses_it():
    for case in CASES:
        if case.primitive:
            graph = tg.trace(case.fn)(*case.args)
            names = {op.primitive.name for op in graph.operations}
            assert case.primitive in names, f"{case.name} does not use {case.primitive}"


def test_rows_with_a_tolerance_say_why():
    for case in CASES:
        if case.rtol or case.atol:
            assert case.why, f"{case.name}: a tolerance needs a reason (`why=`)"
            assert case.rtol <= 1e-6, f"{case.name}: rtol {case.rtol} is more than a few ulps"


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_traced_graph_has_no_dead_ops(case):
    """tracegrad.numpy emits only ops whose results are used."""
    graph = tg.trace(case.fn)(*case.args)
    used = {id(t) for op in graph.operations for t in op.inputs}
    used |= {id(t) for t in graph.outputs}
    dead = [op for op in graph.operations if not any(id(t) in used for t in op.outputs)]
    assert not dead, f"unused ops: {dead}"
