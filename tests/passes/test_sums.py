"""Sums of products (passes/sums.py, a simplify rule): a sum over a product's free dims is taken before the
product; values within rounding of the graph as traced, and the near misses left alone."""

from __future__ import annotations

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tracegrad import ops
from tracegrad.passes import Rewriter
from tracegrad.passes.simplify import _make_rule as simplify_rule
from tracegrad.transforms.evaluate import evaluate

RNG = np.random.default_rng(7)


def _dots(graph):
    return [op for op in graph.operations if op.primitive is ops.dot_general_p]


def _terms(op):
    """Multiply-adds of a dot_general: result size times contracted size."""
    (lc, _), _ = op.attrs["dimension_numbers"]
    return int(np.prod(op.outputs[0].shape)) * int(np.prod([op.inputs[0].shape[d] for d in lc]))


def _optimized(f, *args):
    graph = tg.trace(f)(*args)
    optimized = tg.optimize(graph)
    for want, got in zip(evaluate(graph, *args), evaluate(optimized, *args), strict=True):
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    return optimized


def test_the_gradient_of_a_centred_product_sums_the_points_first():
    # d(x - mu) of GradBench's GMM: einsum("kij,nkj->nki") summed over the n points
    q, mu, x = RNG.normal(size=(5, 4, 4)), RNG.normal(size=(5, 4)), RNG.normal(size=(30, 4))

    def f(q, mu):
        y = tnp.einsum("kij,nkj->nki", q, x[:, None, :] - mu[None, :, :])
        return tnp.sum(tnp.exp(-0.5 * tnp.sum(y * y, axis=2)))

    graph = _optimized(tg.grad(f, argnums=(0, 1)), q, mu)
    # the forward product and dQ contract over 4 and 30 terms for 30 x 5 x 4 results; the
    # gradient of mu contracts the 4-term sums of 5 x 4 results, not 30 x 5 x 4
    assert sorted(_terms(op) for op in _dots(graph)) == [5 * 4 * 4, 30 * 5 * 4 * 4,
                                                        5 * 4 * 4 * 30]


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("side", ["lhs", "rhs", "both"])
def test_a_sum_over_free_dims_through_neg_and_transpose(side, keepdims):
    a, b = RNG.normal(size=(3, 6, 4)), RNG.normal(size=(3, 4, 5))
    # product [3, 6, 5]: batch 0, lhs free 1, rhs free 2; transposed to [6, 3, 5]
    axes = {"lhs": (0,), "rhs": (2,), "both": (0, 2)}[side]

    def f(a, b):
        p = ops.dot_general(a, b, dimension_numbers=(((2,), (1,)), ((0,), (0,))))
        return tnp.sum(-ops.transpose(p, permutation=(1, 0, 2)), axis=axes, keepdims=keepdims)

    (dot,) = _dots(_optimized(f, a, b))
    assert _terms(dot) == 4 * 3 * {"lhs": 5, "rhs": 6, "both": 1}[side]


def test_sums_over_batch_dims_and_integer_products_are_left_alone():
    a, b = RNG.normal(size=(3, 6, 4)), RNG.normal(size=(3, 4, 5))

    def batch_sum(a, b):
        p = ops.dot_general(a, b, dimension_numbers=(((2,), (1,)), ((0,), (0,))))
        return tnp.sum(p, axis=(0, 1))

    (dot,) = _dots(_optimized(batch_sum, a, b))
    assert _terms(dot) == 3 * 6 * 5 * 4
    ia, ib = RNG.integers(-9, 9, (6, 4)), RNG.integers(-9, 9, (4, 5))
    (dot,) = _dots(_optimized(lambda a, b: tnp.sum(a @ b, axis=0), ia, ib))
    assert _terms(dot) == 6 * 5 * 4


def _reductions_of(graph):
    return [op for op in graph.operations if op.primitive is ops.reduce_sum_p]


def test_a_product_read_elsewhere_is_not_summed_again():
    # p is a result too: summing the 60 x 40 operand would add work to a product made anyway
    a, b = RNG.normal(size=(60, 40)), RNG.normal(size=(40, 2))
    links = (lambda p: p, lambda p: -p, lambda p: ops.transpose(p, permutation=(1, 0)))
    for link, axis in zip(links, (0, 0, 1), strict=True):
        def f(a, b, link=link, axis=axis):
            q = link(a @ b)
            return tnp.sum(q, axis=axis), q

        graph = _optimized(f, a, b)
        (dot,) = _dots(graph)
        assert _terms(dot) == 60 * 2 * 40
        (total,) = _reductions_of(graph)
        assert total.inputs[0].shape in ((60, 2), (2, 60))


def test_a_sum_of_a_product_read_once_through_a_shared_link_is_left_alone():
    a, b = RNG.normal(size=(6, 4)), RNG.normal(size=(4, 5))

    def f(a, b):
        n = -(a @ b)
        return tnp.sum(n, axis=0), n * 2.0

    (dot,) = _dots(_optimized(f, a, b))
    assert _terms(dot) == 6 * 5 * 4


def test_a_sum_the_rule_refuses_emits_nothing():
    # an unknown dim without keepdims: refused before any op is emitted
    graph = tg.trace(lambda a, b: tnp.sum(a @ b, axis=1))(
        tg.TensorSpec([None, 4]), tg.TensorSpec([4, None]))
    rw = Rewriter(graph, simplify_rule)
    rw.run()
    assert [op.primitive for op in rw.target.operations] == \
        [op.primitive for op in graph.operations]


def _sums(graph):
    return [op for op in graph.operations if op.primitive is ops.reduce_sum_p]


def test_the_gradient_of_logsumexp_sums_the_exponentials_once():
    # GradBench's lse: the gradient through the max sums -exp(x - m) / s, which is -s / s
    x = RNG.normal(size=200)

    def lse(x):
        m = tnp.max(x)
        return m + tnp.log(tnp.sum(tnp.exp(x - m)))

    graph = _optimized(tg.value_and_grad(lse), x)
    # the sum of the exponentials and the count of maxima (the max's gradient), no third
    assert len(_sums(graph)) == 2
    value, grad = evaluate(graph, x)
    e = np.exp(x - x.max())
    np.testing.assert_allclose(value, x.max() + np.log(e.sum()), rtol=1e-15)
    np.testing.assert_allclose(grad, e / e.sum(), rtol=1e-14, atol=1e-17)


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("negs", [0, 1, 2])
def test_a_sum_of_a_product_by_a_scalar_is_the_scalar_times_the_sum(negs, keepdims):
    y = RNG.normal(size=(4, 5))

    def f(c, y):
        z = product = c * tnp.exp(y)
        for _ in range(negs):
            z = -z
        return tnp.sum(z, axis=1, keepdims=keepdims), product  # the product is read twice

    graph = _optimized(f, 1.5, y)
    (summed,) = [op for op in _sums(graph)]
    assert summed.inputs[0].op.primitive is ops.exp_p  # the sum reads exp(y), not c * exp(y)
    got = evaluate(graph, 1.5, y)[0]
    want = np.sum((-1.0) ** negs * 1.5 * np.exp(y), axis=1, keepdims=keepdims)
    np.testing.assert_allclose(got, want, rtol=1e-14)


def test_a_sum_of_a_product_by_a_broadcast_array_is_left_alone():
    y, w = RNG.normal(size=(4, 5)), RNG.normal(size=5)
    graph = _optimized(lambda y: tnp.sum(w * y, axis=1), y)
    (summed,) = _sums(graph)
    assert summed.inputs[0].op.primitive is ops.mul_p
