"""Sums of zero-padded blocks (passes/pads.py, a simplify rule): blocks that do not overlap
are assembled by concatenation; the same bits as the graph as traced, and the near misses
(overlapping blocks, a pinwheel, interior padding, unknown shapes) left alone."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tracegrad import ops
from tracegrad.transforms.evaluate import evaluate

sys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))
from finite_diff import central_difference  # noqa: E402

RNG = np.random.default_rng(11)


def _count(graph, prim):
    return sum(op.primitive is prim for op in graph.operations)


def _optimized(f, *args):
    """`f`'s optimized graph, whose values are checked to be the traced graph's bits."""
    graph = tg.trace(f)(*args)
    optimized = tg.optimize(graph)
    for want, got in zip(evaluate(graph, *args), evaluate(optimized, *args), strict=True):
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    return optimized


def _padded(x, cfg):
    return ops.pad(x, np.zeros((), x.dtype), padding_config=cfg)


def test_the_gradient_of_a_weight_read_by_slices_is_one_tensor_of_its_blocks():
    # GradBench's LSTM reads weight[i, g] for each layer i and gate g
    w = RNG.normal(size=(4, 4, 6))

    def f(w):
        total = 0.0
        for i in range(4):
            for g in range(4):
                total = total + tnp.sum(tnp.sin(w[i, g]) * (i + 2 * g + 1))
        return total

    graph = _optimized(tg.grad(f), w)
    assert _count(graph, ops.pad_p) == 0 and _count(graph, ops.add_p) == 0
    assert _count(graph, ops.concatenate_p) == 5  # the rows of 4 blocks, then the rows
    np.testing.assert_allclose(tg.function(tg.grad(f))(w), central_difference(f, w),
                               rtol=1e-7, atol=1e-8)
    want = np.array([[np.cos(w[i, g]) * (i + 2 * g + 1) for g in range(4)] for i in range(4)])
    np.testing.assert_allclose(tg.function(tg.grad(f))(w), want, rtol=1e-14)


def test_blocks_with_gaps_between_them_are_placed_among_zeros():
    a, b, c = RNG.normal(size=(2, 3)), RNG.normal(size=(1, 2)), RNG.normal(size=(3, 1))

    def f(a, b, c):  # a at rows 0-1, cols 1-3; b at row 3, cols 0-1; c at rows 3-5, col 4
        return (_padded(a, ((0, 4, 0), (1, 1, 0))) + _padded(b, ((3, 2, 0), (0, 3, 0)))
                + _padded(c, ((3, 0, 0), (4, 0, 0))))

    graph = _optimized(f, a, b, c)
    assert _count(graph, ops.pad_p) == 0 and _count(graph, ops.add_p) == 0
    want = np.zeros((6, 5))
    want[0:2, 1:4], want[3:4, 0:2], want[3:6, 4:5] = a, b, c
    np.testing.assert_array_equal(evaluate(graph, a, b, c)[0], want)


def test_other_terms_summed_before_the_blocks_are_kept_and_the_blocks_added_to_them():
    x, y = RNG.normal(size=(4, 3)), RNG.normal(size=(4, 3))
    a, b = RNG.normal(size=(2, 3)), RNG.normal(size=(2, 3))
    pa, pb = ((0, 2, 0), (0, 0, 0)), ((2, 0, 0), (0, 0, 0))

    def before(x, y, a, b):
        return ((x + y) + _padded(a, pa)) + _padded(b, pb)

    graph = _optimized(before, x, y, a, b)
    assert _count(graph, ops.pad_p) == 0 and _count(graph, ops.add_p) == 2

    def after(x, y, a, b):  # y added after a block: the same rewrite would regroup sums
        return ((x + _padded(a, pa)) + y) + _padded(b, pb)

    graph = _optimized(after, x, y, a, b)
    assert _count(graph, ops.pad_p) == 2 and _count(graph, ops.concatenate_p) == 0


def test_blocks_of_one_region_are_summed_as_the_tree_sums_them():
    # a recurrent step's state gradient: two blocks per row, the rows interleaved
    a1, a2, b1, b2 = (RNG.normal(size=(1, 5)) for _ in range(4))
    ra, rb = ((0, 1, 0), (0, 0, 0)), ((1, 0, 0), (0, 0, 0))

    def f(a1, a2, b1, b2):
        return ((_padded(a1, ra) + _padded(b1, rb)) + _padded(a2, ra)) + _padded(b2, rb)

    graph = _optimized(f, a1, a2, b1, b2)
    assert _count(graph, ops.pad_p) == 0 and _count(graph, ops.add_p) == 2
    assert _count(graph, ops.concatenate_p) == 1

    x = RNG.normal(size=(2, 5))

    def after_a_term(x, a1, a2, b1):  # (x + a1) + a2 is not x + (a1 + a2)
        return ((x + _padded(a1, ra)) + _padded(b1, rb)) + _padded(a2, ra)

    graph = _optimized(after_a_term, x, a1, a2, b1)
    assert _count(graph, ops.pad_p) == 3


@pytest.mark.parametrize("stride", [2, 3])
def test_blocks_of_a_stride_at_every_offset_are_interleaved(stride):
    # the gradient of w[0::2] and w[1::2] (GradBench's LSTM reads its weights and biases
    # as the even and odd rows of one matrix)
    w = RNG.normal(size=(4 * stride, 5))

    def f(w):
        return sum(tnp.sum(tnp.sin(w[k::stride]) * (k + 1.0)) for k in range(stride))

    graph = _optimized(tg.grad(f), w)
    assert _count(graph, ops.pad_p) == 0 and _count(graph, ops.add_p) == 0
    want = np.cos(w) * (np.arange(4 * stride) % stride + 1.0)[:, None]
    np.testing.assert_allclose(tg.function(tg.grad(f))(w), want, rtol=1e-14)
    np.testing.assert_allclose(tg.function(tg.grad(f), backend="numpy")(w), want, rtol=1e-14)


def test_strided_blocks_missing_an_offset_are_left_alone():
    w = RNG.normal(size=(9, 5))

    def f(w):  # offsets 0 and 1 of stride 3: row 2, 5, 8 stay zero
        return tnp.sum(tnp.sin(w[0::3])) + tnp.sum(tnp.cos(w[1::3]))

    graph = _optimized(tg.grad(f), w)
    assert _count(graph, ops.pad_p) == 2 and _count(graph, ops.concatenate_p) == 0


@pytest.mark.parametrize("case", ["overlap", "pinwheel", "interior", "one block"])
def test_near_misses_are_left_alone(case):
    x = RNG.normal(size=(2, 2))
    one = RNG.normal(size=(1, 2))
    cfgs = {
        "overlap": [((0, 1, 0), (0, 1, 0)), ((1, 0, 0), (1, 0, 0)), ((0, 1, 0), (1, 0, 0))],
        # four 2x1 / 1x2 blocks around a 1x1 hole in a 3x3 square: no plane separates them
        "pinwheel": [((0, 1, 0), (0, 2, 0)), ((0, 2, 0), (1, 0, 0)), ((1, 0, 0), (2, 0, 0)),
                     ((2, 0, 0), (0, 1, 0))],
        "interior": [((0, 0, 1), (0, 0, 0)), ((0, 0, 1), (0, 0, 0))],
        "one block": [((0, 1, 0), (0, 0, 0))],
    }[case]
    shapes = {"pinwheel": [(2, 1), (1, 2), (2, 1), (1, 2)], "interior": [(1, 2), (2, 2)],
              "one block": [(1, 2)]}.get(case, [(2, 2)] * 3)
    blocks = [RNG.normal(size=s) for s in shapes]
    if case == "interior":
        blocks = [one, x[:1]]

    def f(*bs):
        total = _padded(bs[0], cfgs[0])
        for b, cfg in zip(bs[1:], cfgs[1:], strict=True):
            total = total + _padded(b, cfg)
        return total

    graph = _optimized(f, *blocks)
    assert _count(graph, ops.concatenate_p) == 0
    assert _count(graph, ops.pad_p) == len(blocks)


def test_unknown_shapes_are_left_alone():
    def f(a, b):
        return _padded(a, ((0, 2, 0),)) + _padded(b, ((2, 0, 0),))

    graph = tg.optimize(tg.trace(f)(tg.TensorSpec([None]), tg.TensorSpec([None])))
    assert _count(graph, ops.concatenate_p) == 0 and _count(graph, ops.pad_p) == 2


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_integer_and_bool_blocks_on_both_backends(backend):
    a, b = np.arange(6).reshape(2, 3), -np.arange(3).reshape(1, 3)
    p, q = np.array([[True, False, True]]), np.array([[False, True, True]])

    def f(a, b, p, q):
        ints = _padded(a, ((0, 1, 0), (0, 0, 0))) + _padded(b, ((2, 0, 0), (0, 0, 0)))
        bools = _padded(p, ((0, 1, 0), (0, 0, 0))) + _padded(q, ((1, 0, 0), (0, 0, 0)))
        return ints, bools

    ints, bools = tg.function(f, backend=backend)(a, b, p, q)
    np.testing.assert_array_equal(ints, np.concatenate([a, b]))
    np.testing.assert_array_equal(bools, np.concatenate([p, q]))
    graph = tg.optimize(tg.trace(f)(a, b, p, q))
    assert _count(graph, ops.pad_p) == 0
