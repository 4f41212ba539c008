"""Trees of data movement that read one tensor (passes/moves.py, a simplify rule): one
gather of rows at constant indices, a slice or a reshape; the same bits as the graph as
traced on both backends, and the near misses (two tensors read, computed pieces, unknown
shapes, large results) left alone."""

from __future__ import annotations

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tracegrad import ops
from tracegrad.passes import moves, simplify
from tracegrad.transforms.evaluate import evaluate

RNG = np.random.default_rng(5)
_MOVES = (ops.slice_p, ops.reshape_p, ops.concatenate_p, ops.transpose_p, ops.rev_p)


def _count(graph, *prims):
    return sum(op.primitive in prims for op in graph.operations)


def _optimized(f, *args):
    """`f`'s optimized graph, checked to give the traced graph's bits on both backends."""
    graph = tg.trace(f)(*args)
    optimized = tg.optimize(graph)
    want = evaluate(graph, *args)
    for got in (evaluate(optimized, *args), tg.function(f, backend="numba")(*args)):
        got = got if isinstance(got, (list, tuple)) else [got]
        for w, g in zip(want, got, strict=True):
            g = np.asarray(g)
            assert g.shape == w.shape and g.dtype == w.dtype
            np.testing.assert_array_equal(g, w)
    return optimized


def _constants(graph):
    return [op.attrs["value"].value for op in graph.operations if op.primitive is ops.constant_p
            and op.attrs["value"].value.ndim == 1]


def test_rows_reassembled_in_another_order_are_one_gather_of_rows():
    x = RNG.normal(size=(6, 5))

    def f(x):
        return tnp.concatenate([x[3:4], x[1:2], x[5:6], x[0:1]], axis=0)

    graph = _optimized(f, x)
    assert _count(graph, ops.concatenate_p, ops.slice_p) == 0
    assert _count(graph, ops.gather_p) == 1
    (rows,) = _constants(graph)
    np.testing.assert_array_equal(rows, [3, 1, 5, 0])  # whole rows of 5, not 20 elements


def test_adjacent_slices_in_order_are_one_slice():
    x = RNG.normal(size=(8, 3))

    def f(x):
        return tnp.concatenate([x[2:4], x[4:5], x[5:7]], axis=0)

    graph = _optimized(f, x)
    assert _count(graph, ops.concatenate_p, ops.gather_p) == 0
    assert _count(graph, ops.slice_p) == 1


def test_a_tensor_cut_and_put_back_in_order_is_itself():
    x = RNG.normal(size=(4, 3))

    def f(x):
        return tnp.concatenate([x[:, 0:1], x[:, 1:3]], axis=1)

    graph = _optimized(f, x)
    assert _count(graph, *_MOVES, ops.gather_p) == 0
    assert graph.outputs[0] is graph.inputs[0]


def test_the_gradient_of_a_loops_stacked_rows_is_one_gather():
    # the shape of GradBench's LSTM gradient after its backward loop: rows of a stacked
    # carry, reshaped and concatenated in two levels, then reshaped into the weight's shape
    s = RNG.normal(size=(8, 1, 1, 3))

    def f(s):
        rows = [tnp.reshape(s[k], (1, 1, 3)) for k in range(8)]
        halves = [tnp.concatenate(rows[k:k + 4][::-1], axis=1) for k in (0, 4)]
        both = tnp.concatenate(halves, axis=0)  # (2, 4, 3)
        return tnp.reshape(tnp.transpose(both, (1, 0, 2)), (4, 6))

    graph = _optimized(f, s)
    assert _count(graph, ops.concatenate_p, ops.slice_p, ops.transpose_p) == 0
    assert _count(graph, ops.gather_p) == 1
    (rows,) = _constants(graph)
    np.testing.assert_array_equal(rows, [3, 7, 2, 6, 1, 5, 0, 4])


def test_reversals_and_transposes_move_single_elements():
    x = RNG.normal(size=(3, 4))

    def f(x):
        return tnp.concatenate([tnp.transpose(x[:, :2]), x[::-1, 2:].T], axis=0)

    graph = _optimized(f, x)
    assert _count(graph, ops.gather_p) == 1 and _count(graph, ops.concatenate_p) == 0
    (index,) = _constants(graph)
    assert index.size == 12  # no run of consecutive elements: one index each


@pytest.mark.parametrize("case", ["two tensors", "computed piece", "unknown size", "large"])
def test_near_misses_are_left_alone(case):
    x, y = RNG.normal(size=(4, 3)), RNG.normal(size=(4, 3))
    if case == "two tensors":
        graph = _optimized(lambda x, y: tnp.concatenate([x[1:2], y[0:1], x[0:1]]), x, y)
    elif case == "computed piece":
        graph = _optimized(lambda x: tnp.concatenate([x[1:2], tnp.sin(x[0:1])]), x)
    elif case == "unknown size":
        graph = tg.optimize(tg.trace(lambda x: tnp.concatenate([x[1:], x[:1]]))(
            tg.TensorSpec([None, 3])))
    else:
        big = np.zeros((moves.MAX_ELEMENTS // 2 + 1, 2))
        graph = _optimized(lambda x: tnp.concatenate([x[1:], x[:1]]), big)
    assert _count(graph, ops.concatenate_p) == 1 and _count(graph, ops.gather_p) == 0


def test_the_rule_does_not_rewrite_what_it_made():
    x = RNG.normal(size=(6, 5))
    graph = tg.optimize(tg.trace(
        lambda x: tnp.reshape(tnp.concatenate([x[3:4], x[1:2], x[5:6]]), (15,)))(x))
    again = simplify(graph)
    assert [op.primitive for op in again.operations] == \
        [op.primitive for op in graph.operations]


def test_gradients_through_reassembled_rows_on_both_backends():
    w = RNG.normal(size=(4, 2, 3))

    def f(w):
        rows = [w[i, j] for i in range(4) for j in range(2)]
        return tnp.sum(tnp.concatenate(rows[::-1]) ** 3)

    want = 3 * w ** 2
    for backend in ("numpy", "numba"):
        np.testing.assert_allclose(tg.function(tg.grad(f), backend=backend)(w), want,
                                   rtol=1e-14)
