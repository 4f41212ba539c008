"""The diagonal-product simplification (passes/diagonal.py): jacobians never multiply by an
identity, and every rewrite keeps the values."""

from __future__ import annotations

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tracegrad import ops
from tracegrad.transforms.evaluate import evaluate
from tracegrad.transforms.jacobian import identity_rows

RNG = np.random.default_rng(5)


def _dots(graph):
    return [op for op in graph.operations if op.primitive is ops.dot_general_p]


def _cost(op):
    """Multiply-adds of a dot_general: result size times contracted size."""
    lhs = op.inputs[0]
    (lc, _), _ = op.attrs["dimension_numbers"]
    return int(np.prod(op.outputs[0].shape)) * int(np.prod([lhs.shape[d] for d in lc]))


def _identities(graph):
    return [op for op in graph.operations if op.primitive is ops.iota_p]


@pytest.mark.parametrize("n", [4, 64])
def test_the_jacobian_of_a_layer_multiplies_by_no_identity(n):
    def f(w, x, b):
        return tnp.tanh(w @ x + b)

    specs = (tg.TensorSpec([n, n]), tg.TensorSpec([n]), tg.TensorSpec([n]))
    graph = tg.optimize(tg.trace(tg.jacobian(f, argnums=1))(*specs))
    assert not _identities(graph)  # the identity is gone, not only its product
    (dot,) = _dots(graph)  # the forward w @ x, nothing of n x n x n cost
    assert _cost(dot) == n * n
    assert all(int(np.prod(op.outputs[0].shape or (1,))) <= n * n for op in graph.operations)
    w, x, b = RNG.normal(size=(n, n)), RNG.normal(size=n), RNG.normal(size=n)
    (got,) = evaluate(graph, w, x, b)
    np.testing.assert_allclose(got, (1 - np.tanh(w @ x + b) ** 2)[:, None] * w, rtol=1e-13)


def test_hessians_and_per_example_jacobians_contract_no_identity():
    a = RNG.normal(size=(20, 6))
    hess = tg.optimize(tg.trace(tg.hessian(
        lambda x: tnp.sum(tnp.log1p(tnp.exp(a @ x))) + 0.5 * tnp.sum(x * x)))(np.ones(6)))
    assert max(_cost(op) for op in _dots(hess)) == 6 * 6 * 20  # A^T diag A, no 6x6x6 I @ A
    w1, w2 = RNG.normal(size=(8, 5)), RNG.normal(size=(5, 8))
    per_example = tg.optimize(tg.trace(tg.vmap(tg.jacobian(
        lambda x: tnp.tanh(w2 @ tnp.tanh(w1 @ x)))))(np.ones((30, 5))))
    batch = tg.optimize(tg.trace(tg.batch_jacobian(
        lambda x: tnp.tanh(tnp.tanh(x @ w1.T) @ w2.T)))(np.ones((30, 5))))
    for graph in (per_example, batch):
        assert not _identities(graph)
        # forward 30x5x8 and 30x8x5, backward one [30*5, 8] x [8, 5] product
        assert sorted(_cost(op) for op in _dots(graph)) == [1200, 1200, 6000]


def _diag_product(n, layout, factor_dims, lhs_side, batch):
    """A graph contracting `mul(identity rows, broadcast factors)` with a random operand,
    in one of several layouts; returns (graph, inputs)."""
    k = 3
    w = RNG.normal(size=(batch, n, k) if batch else (n, k))
    scales = [RNG.normal(size=n) for _ in factor_dims]

    def f(w, *scales):
        eye = identity_rows(n, (n,), np.dtype(np.float64))  # [n, n]: delta(i, j)
        if batch:
            eye = ops.broadcast_in_dim(eye, shape=(batch, n, n), broadcast_dimensions=(1, 2))
        if layout == "t":
            eye = ops.transpose(eye, permutation=tuple(range(eye.ndim - 2)) + (
                eye.ndim - 1, eye.ndim - 2))
        for s, d in zip(scales, factor_dims, strict=True):
            eye = eye * ops.broadcast_in_dim(s, shape=eye.shape,
                                             broadcast_dimensions=(d + (1 if batch else 0),))
        c = eye.ndim - 1  # contract the last dim of the diagonal with w's n dim
        wd = 1 if batch else 0
        bdims = ((0,), (0,)) if batch else ((), ())
        if lhs_side:
            numbers = (((c,), (wd,)), bdims)
            return ops.dot_general(eye, w, dimension_numbers=numbers)
        numbers = (((wd,), (c,)), (bdims[1], bdims[0]))
        return ops.dot_general(w, eye, dimension_numbers=numbers)

    return tg.trace(f)(w, *scales), (w, *scales)


@pytest.mark.parametrize("batch", [0, 2])
@pytest.mark.parametrize("lhs_side", [True, False])
@pytest.mark.parametrize("factor_dims", [(), (0,), (1,), (0, 1)])
@pytest.mark.parametrize("layout", ["n", "t"])
def test_rewrites_keep_the_values(layout, factor_dims, lhs_side, batch):
    graph, inputs = _diag_product(5, layout, factor_dims, lhs_side, batch)
    optimized = tg.optimize(graph)
    assert not _dots(optimized)
    (want,) = evaluate(graph, *inputs)
    (got,) = evaluate(optimized, *inputs)
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-15)
    assert got.shape == want.shape


def test_a_factor_varying_along_both_diagonal_dims_is_left_alone():
    def f(m, w):
        eye = identity_rows(4, (4,), np.dtype(np.float64))
        return ops.dot_general(eye * m, w, dimension_numbers=(((1,), (0,)), ((), ())))

    m, w = RNG.normal(size=(4, 4)), RNG.normal(size=(4, 2))
    optimized = tg.optimize(tg.trace(f)(m, w))
    assert len(_dots(optimized)) == 1
    np.testing.assert_allclose(evaluate(optimized, m, w)[0], np.diag(np.diag(m)) @ w,
                               rtol=1e-14)
