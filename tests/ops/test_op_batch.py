"""The op table's batch column: for every row with arguments, the row's function vectorized
over a batch of per-example variants of its arguments equals a Python loop over the
examples (each run traced on the numpy backend, results stacked):
- `tg.vmap` with the batch on axis 0, on the last axis, with each argument in turn
  invariant (`in_axes` None) while the others are batched, and traced with the batch size
  unknown (one graph for every size);
- the batch rules themselves with the batch on the last axis of every argument, and with
  one argument invariant (`tg.vmap` moves a mapped axis to 0 before any rule runs, so only
  this shows the rules batch dims other than 0, as they meet them inside larger programs);
- the numba backend against the numpy backend on vmapped graphs of sampled rows;
- every primitive has a batch rule, and a batched row exercises it.

Results agree within the row's tolerance plus a few ulps of their largest magnitude (a
batched sum or product may add in another order than the per-example one); integers and
bools exactly; dtypes and shapes exactly.

Per-example variants (`examples`) keep each argument valid for its op: example k rolls the
flattened values by k positions (same domain, same index ranges, other values in every
position). Where that makes the reference raise, changes its result shapes or its number
of non-finite values, or breaks the row's value check (a rolled SPD matrix is not SPD; a
rolled mask selects another number of elements; a rolled triangular matrix is singular),
the argument is scaled by a power of two per example instead, and where that fails too,
it is the same in every example.
"""

from __future__ import annotations

import numpy as np
import pytest

import tracegrad as tg
from tests.backends._util import assert_close_backends, check_rows_in_groups, parts
from tests.ops.optable import CASES, rand, sample_rows
from tracegrad import ops
from tracegrad.backends import numba as nb
from tracegrad.core import tree
from tracegrad.core.ir import FuncGraph
from tracegrad.core.op import REGISTRY
from tracegrad.core.types import TensorType
from tracegrad.errors import UnsupportedOpError
from tracegrad.ops._batching import bdim_at
from tracegrad.transforms.evaluate import Interpreter
from tracegrad.transforms.vectorize import Vectorizer

B = 3
SCALES = (1.0, 2.0, 0.5)  # powers of two: scaled values round alike
NUMBA_GROUP_SIZE = 24
ULPS = 8  # batched products and sums may add in another order than the per-example ones

BATCH_CASES = [c for c in CASES if c.args and not c.weak_args]
MULTI_ARG_CASES = [(c, i) for c in BATCH_CASES if len(c.args) > 1 for i in range(len(c.args))]


pytestmark = pytest.mark.usefixtures("numpy_backend")


def _leaves(out) -> list:
    return [np.asarray(x) for x in tree.flatten(out)[0]]


_TRACED: dict[int, tg.Function] = {}


def _traced(case):
    """case.fn as a tg.function on the numpy backend (one per row)."""
    if id(case) not in _TRACED:
        _TRACED[id(case)] = tg.function(case.fn, backend="numpy")
    return _TRACED[id(case)]


def _results(fn, args):
    """fn(*args)'s leaves, or None if it raises."""
    try:
        with np.errstate(all="ignore"):
            return _leaves(fn(*args))
    except Exception:  # noqa: BLE001 - any failure makes the variant invalid
        return None


def _agree(case, got, want) -> bool:
    """The row's value check (test_op_values) as a predicate."""
    for g, w in zip(got, want, strict=True):
        if g.shape != w.shape or g.dtype != w.dtype:
            return False
        if case.rtol == 0 and case.atol == 0:
            if not np.array_equal(g, w, equal_nan=g.dtype.kind in "fc"):
                return False
        elif not np.allclose(g, w, rtol=case.rtol, atol=case.atol, equal_nan=True):
            return False
    return True


def _valid(case, args, base) -> bool:
    """Whether `args` is as good a row as the row's own arguments (`base`: the reference's
    results on them): the reference runs, gives results of the same shapes, dtypes and
    number of non-finite values (a rolled NaN moves, a new one means the op is undefined
    there), and the row's function agrees with it as the value check demands."""
    want = _results(case.reference, args)
    if want is None or len(want) != len(base) or any(
            w.shape != b.shape or w.dtype != b.dtype
            or w.dtype.kind in "fc" and np.isfinite(w).sum() != np.isfinite(b).sum()
            for w, b in zip(want, base, strict=True)):
        return False
    got = _results(_traced(case), args)
    return got is not None and len(got) == len(want) and _agree(case, got, want)


def _rolled(a, k):
    a = np.asarray(a)
    return np.roll(a.ravel(), k).reshape(a.shape).astype(a.dtype) if a.size > 1 else None


def _scaled(a, k):
    a = np.asarray(a)
    return (a * SCALES[k]).astype(a.dtype) if a.dtype.kind in "fc" else None


_EXAMPLES: dict[int, list] = {}


def examples(case) -> list[tuple]:
    """B argument tuples for `case` (the module docstring says how they are chosen),
    example 0 being the row's own arguments."""
    if id(case) in _EXAMPLES:
        return _EXAMPLES[id(case)]
    base = _results(case.reference, case.args)
    chosen = [[a] * B for a in case.args]
    for i, a in enumerate(case.args):
        for variant in (_rolled, _scaled):
            column = [variant(a, k) for k in range(B)]
            if any(v is None for v in column):
                continue
            trial = chosen[:i] + [column] + chosen[i + 1:]
            if all(_valid(case, [c[k] for c in trial], base) for k in range(B)):
                chosen = trial
                break
    _EXAMPLES[id(case)] = [tuple(c[k] for c in chosen) for k in range(B)]
    return _EXAMPLES[id(case)]


def _loop(case, arg_sets, axis=0) -> list:
    """case.fn per example (traced, numpy backend), each result stacked on `axis`."""
    f = _traced(case)
    with np.errstate(all="ignore"):
        outs = [_leaves(f(*args)) for args in arg_sets]
    return [np.stack(column, axis) for column in zip(*outs, strict=True)]


def _assert_close(case, got, want, how):
    assert len(got) == len(want), f"{how}: {len(got)} results, the loop {len(want)}"
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        what = f"{case.name} {how}: result {k}"
        assert g.shape == w.shape, f"{what}: shape {g.shape}, the loop's {w.shape}"
        assert g.dtype == w.dtype, f"{what}: dtype {g.dtype}, the loop's {w.dtype}"
        if w.dtype.kind == "c":  # as pairs of reals
            g, w = parts(g), parts(w)
        if w.dtype.kind != "f":
            np.testing.assert_array_equal(g, w, err_msg=what)
            continue
        finite = np.abs(w[np.isfinite(w)])
        atol = case.atol + ULPS * float(np.finfo(w.dtype).eps) * float(
            finite.max() if finite.size else 0.0)
        np.testing.assert_allclose(g, w, rtol=case.rtol, atol=atol, equal_nan=True,
                                   err_msg=what)


def _stacked(arg_sets, in_axes) -> list:
    """Each argument's examples stacked on its axis in `in_axes` (None: example 0's)."""
    return [arg_sets[0][i] if a is None else np.stack([s[i] for s in arg_sets], a)
            for i, a in enumerate(in_axes)]


def _vmapped(case, arg_sets, in_axes, out_axes=0) -> list:
    """tg.vmap(case.fn) over the examples stacked on `in_axes`."""
    with np.errstate(all="ignore"):
        out = tg.vmap(case.fn, in_axes=tuple(in_axes), out_axes=out_axes)(
            *_stacked(arg_sets, in_axes))
    return _leaves(out)


def _vectorized(case, arg_sets, in_axes, out_axis, vectorizer=None) -> tuple[FuncGraph, list]:
    """The row's graph vectorized over its examples stacked on `in_axes` as the batch rules
    see them (tg.vmap moves every mapped axis to 0 before any rule runs), results batched
    on `out_axis`; and the stacked arguments (the graph's inputs)."""
    graph = tg.trace(case.fn)(*arg_sets[0])
    stacked = _stacked(arg_sets, in_axes)
    outer = FuncGraph("batched")
    with outer.as_default():
        inputs = [outer.add_input(TensorType(x.shape, x.dtype)) for x in stacked]
        dims = [None if a is None else a % x.ndim for a, x in zip(in_axes, stacked, strict=True)]
        outs, out_dims = (vectorizer or Vectorizer("vmap")).run(graph, inputs, dims)
        like = next(k for k, d in enumerate(dims) if d is not None)
        outer.outputs = [bdim_at(y, d, out_axis % (y.ndim + (d is None)), inputs[like],
                                 dims[like]) for y, d in zip(outs, out_dims, strict=True)]
    return outer, stacked


def _rules(case, arg_sets, in_axes, out_axis) -> list:
    """The results of `_vectorized`, run by the numpy interpreter."""
    graph, stacked = _vectorized(case, arg_sets, in_axes, out_axis)
    return [np.asarray(y) for y in Interpreter(graph)(stacked)]


def _with_invariant(case, invariant) -> list[tuple]:
    """The row's examples with argument `invariant` the row's own in every example."""
    return [tuple(case.args[i] if i == invariant else a for i, a in enumerate(s))
            for s in examples(case)]


@pytest.mark.parametrize("case", BATCH_CASES, ids=repr)
def test_vmap_axis_0_matches_loop(case):
    arg_sets = examples(case)
    got = _vmapped(case, arg_sets, [0] * len(case.args))
    _assert_close(case, got, _loop(case, arg_sets), "vmap on axis 0")


@pytest.mark.parametrize("case", BATCH_CASES, ids=repr)
def test_vmap_last_axis_matches_loop(case):
    arg_sets = examples(case)
    got = _vmapped(case, arg_sets, [-1] * len(case.args), out_axes=-1)
    _assert_close(case, got, _loop(case, arg_sets, axis=-1), "vmap on the last axis")


@pytest.mark.parametrize("case", BATCH_CASES, ids=repr)
def test_batch_rules_on_the_last_axis_match_loop(case):
    arg_sets = examples(case)
    got = _rules(case, arg_sets, [-1] * len(case.args), -1)
    _assert_close(case, got, _loop(case, arg_sets, axis=-1), "batch rules on the last axis")


@pytest.mark.parametrize("case", BATCH_CASES, ids=repr)
def test_vmap_of_an_unknown_batch_size_matches_loop(case):
    """Traced once with the batch dim unknown (None), the batched graph serves every batch
    size: the rules read the size at run time."""
    arg_sets = examples(case)
    signature = [tg.TensorSpec((None, *np.shape(a)), np.asarray(a).dtype) for a in case.args]
    f = tg.function(tg.vmap(case.fn), input_signature=signature, backend="numpy")
    for n in (B, 2):
        with np.errstate(all="ignore"):
            got = _leaves(f(*_stacked(arg_sets[:n], [0] * len(case.args))))
        _assert_close(case, got, _loop(case, arg_sets[:n]), f"vmap of {n} unknown when traced")


@pytest.mark.parametrize("case,invariant", MULTI_ARG_CASES,
                         ids=[f"{c.name}-arg{i}" for c, i in MULTI_ARG_CASES])
def test_vmap_with_an_invariant_argument_matches_loop(case, invariant):
    arg_sets = _with_invariant(case, invariant)
    in_axes = [None if i == invariant else 0 for i in range(len(case.args))]
    got = _vmapped(case, arg_sets, in_axes)
    _assert_close(case, got, _loop(case, arg_sets), f"vmap with argument {invariant} invariant")


@pytest.mark.parametrize("case,invariant", MULTI_ARG_CASES,
                         ids=[f"{c.name}-arg{i}" for c, i in MULTI_ARG_CASES])
def test_batch_rules_with_an_invariant_argument_on_the_last_axis_match_loop(case, invariant):
    arg_sets = _with_invariant(case, invariant)
    in_axes = [None if i == invariant else -1 for i in range(len(case.args))]
    got = _rules(case, arg_sets, in_axes, -1)
    _assert_close(case, got, _loop(case, arg_sets, axis=-1),
                  f"batch rules on the last axis with argument {invariant} invariant")


# -- the numba backend on batched graphs ----------------------------------------------------------

NUMBA_ROWS = [c for c in sample_rows(CASES) if c.args]
NUMBA_GROUPS = [NUMBA_ROWS[i:i + NUMBA_GROUP_SIZE]
                for i in range(0, len(NUMBA_ROWS), NUMBA_GROUP_SIZE)]


def _batched_group(cases):
    """One graph vmapping every row of `cases` over its examples, its input arrays, and the
    row each of its outputs comes from."""
    stacked = [np.stack(column) for c in cases for column in zip(*examples(c), strict=True)]
    rows = []

    def fn(*flat):
        outs, k = [], 0
        for c in cases:
            outs.append(tg.vmap(c.fn)(*flat[k:k + len(c.args)]))
            rows.extend([c] * len(tree.flatten(outs[-1])[0]))
            k += len(c.args)
        return outs

    return tg.trace(fn)(*stacked), stacked, rows


def _check_numba(cases):
    """The numba backend against the numpy backend on one graph of batched rows; a row that
    declares a value tolerance (LAPACK's results, sums in another order) gets the slack of
    ULPS of its largest value that the other batched checks give it."""
    graph, arrays, rows = _batched_group(cases)
    want = Interpreter(graph)(arrays)
    atols = []
    for c, w in zip(rows, want, strict=True):
        w = np.asarray(w)
        finite = np.abs(w[np.isfinite(w)]) if w.dtype.kind in "fc" else np.zeros(0)
        atols.append(ULPS * float(np.finfo(w.dtype).eps) * float(finite.max())
                     if c.rtol and finite.size else 0.0)
    assert_close_backends(nb.compile_graph(graph)(arrays), want, graph, atols)


@pytest.mark.parametrize("group", range(len(NUMBA_GROUPS)),
                         ids=[f"{g[0].name}..{g[-1].name}" for g in NUMBA_GROUPS])
def test_numba_matches_numpy_backend_on_batched_rows(group):
    check_rows_in_groups(NUMBA_GROUPS[group], _check_numba)


# -- completeness ---------------------------------------------------------------------------------

# Primitives with a batch rule that no batched row can exercise, and why.
NO_BATCHED_ROW = {
    "iota": "its only operands are the sizes of unknown dims (dim_size results), and "
            "dim_size's rule gives the same size in every iteration, so vmap copies an iota "
            "unchanged; a batched size would mean a different shape in each iteration, which "
            "no array holds, so the rule only raises (both checked below)",
}


def _ships_with_tracegrad(prim) -> bool:
    """Whether `prim` is one of tracegrad's (tests may register primitives of their own)."""
    return getattr(prim.abstract_eval, "__module__", "").startswith("tracegrad.")


class _Recording(Vectorizer):
    """A Vectorizer that notes the primitives whose batch rules it calls."""

    def __init__(self):
        super().__init__("vmap")
        self.batched = set()

    def _batch(self, op, args, dims):
        self.batched.add(op.primitive.name)
        return super()._batch(op, args, dims)


def test_every_primitive_has_a_batch_rule():
    missing = sorted(name for name, prim in REGISTRY.items()
                     if prim.batch is None and name != "constant" and _ships_with_tracegrad(prim))
    assert not missing, f"primitives without a batch rule: {missing}"


def test_every_batch_rule_is_exercised_by_a_batched_row():
    wanted = {name for name, prim in REGISTRY.items()
              if prim.batch is not None and _ships_with_tracegrad(prim)}
    recorder = _Recording()
    # a primitive's own rows first; every other row only if some rule is still unseen
    for case in sorted(BATCH_CASES, key=lambda c: c.primitive is None):
        if wanted - NO_BATCHED_ROW.keys() <= recorder.batched:
            break
        _vectorized(case, examples(case), [0] * len(case.args), 0, recorder)
    unexercised = sorted(wanted - recorder.batched - NO_BATCHED_ROW.keys())
    assert not unexercised, f"batch rules no batched row exercises: {unexercised}"
    listed = sorted(NO_BATCHED_ROW.keys() & recorder.batched)
    assert not listed, f"exercised after all, remove from NO_BATCHED_ROW: {listed}"


def test_iota_of_a_batched_dim_size_is_copied_unbatched():
    graph = FuncGraph("iota_of_dim_size")
    with graph.as_default():
        x = graph.add_input(TensorType((None,), np.dtype("float64")))
        n = ops.dim_size(x, axis=0)
        graph.outputs = [ops.add(x, ops.iota(n, dtype=np.dtype("float64"), shape=(None,),
                                             dimension=0))]
    xs = rand((3, 4))
    recorder = _Recording()
    outer = FuncGraph("batched")
    with outer.as_default():
        inputs = [outer.add_input(TensorType((3, None), np.dtype("float64")))]
        outs, dims = recorder.run(graph, inputs, [0])
        outer.outputs = outs
    assert dims == [0] and "iota" not in recorder.batched
    np.testing.assert_array_equal(Interpreter(outer)([xs])[0], xs + np.arange(4.0))


def test_iota_batch_rule_raises_for_a_batched_size():
    graph = FuncGraph("iota_of_a_size")
    with graph.as_default():
        n = graph.add_input(TensorType((), np.dtype("int64")))
        graph.outputs = [ops.iota(n, dtype=np.dtype("int64"), shape=(None,), dimension=0)]
    outer = FuncGraph("batched")
    with outer.as_default(), pytest.raises(UnsupportedOpError, match="iota"):
        Vectorizer("vmap").run(graph, [outer.add_input(TensorType((3,), np.dtype("int64")))],
                               [0])
