"""tg.jacobian, tg.batch_jacobian, tg.hessian and tg.jvp against float64 central finite
differences and analytic values, across modes, sequential rows and chunking."""

from __future__ import annotations

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tests.finite_diff import central_jacobian
from tracegrad.errors import DTypeError

RNG = np.random.default_rng(3)
W = RNG.normal(size=(4, 3))
B = RNG.normal(size=4)


def layer(x):
    return tnp.tanh(W @ x + B)


def analytic_layer(x):
    return (1 - np.tanh(W @ x + B) ** 2)[:, None] * W


OPTIONS = [{}, {"mode": "rev"}, {"mode": "fwd"}, {"use_pfor": False},
           {"parallel_iterations": 3}, {"mode": "fwd", "parallel_iterations": 2},
           {"mode": "fwd", "use_pfor": False}]


@pytest.mark.parametrize("options", OPTIONS, ids=repr)
def test_jacobian_matches_analytic_and_finite_differences(options, backend):
    x = RNG.normal(size=3)
    J = tg.jacobian(layer, **options)(x)
    np.testing.assert_allclose(J, analytic_layer(x), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(J, central_jacobian(lambda v: np.tanh(W @ v + B), x), rtol=1e-7,
                               atol=1e-9)


def test_chunked_and_sequential_results_are_identical():
    x = RNG.normal(size=(2, 3))
    f = lambda m: tnp.sin(m) @ W.T  # noqa: E731
    whole = tg.jacobian(f)(x)
    for options in ({"parallel_iterations": 1}, {"parallel_iterations": 5},
                    {"use_pfor": False}):
        np.testing.assert_array_equal(tg.jacobian(f, **options)(x), whole)


def test_jacobian_shapes_structures_and_argnums(backend):
    x, y = RNG.normal(size=(2, 3)), RNG.normal(size=4)

    def f(x, y):
        return {"a": tnp.sum(x, axis=0) * y[:3], "b": tnp.dot(y, y)}

    J = tg.jacobian(f, argnums=(0, 1))(x, y)
    assert J["a"][0].shape == (3, 2, 3) and J["a"][1].shape == (3, 4)
    assert J["b"][0].shape == (2, 3) and J["b"][1].shape == (4,)
    np.testing.assert_allclose(J["b"][1], 2 * y, rtol=1e-14)
    np.testing.assert_allclose(J["b"][0], np.zeros((2, 3)))
    want = central_jacobian(lambda v: np.sum(v, axis=0) * y[:3], x)
    np.testing.assert_allclose(J["a"][0], want, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(J["a"][1], central_jacobian(lambda v: x.sum(0) * v[:3], y),
                               rtol=1e-7, atol=1e-9)


def test_jacobian_graph_holds_no_per_row_loop():
    def f(x):
        return tnp.tanh(W @ x + B)

    small = tg.trace(tg.jacobian(f))(np.ones(3))
    big_w = RNG.normal(size=(40, 3))
    big = tg.trace(tg.jacobian(lambda x: tnp.tanh(big_w @ x)))(np.ones(3))
    assert len(big.operations) <= len(small.operations) + 2
    seq = tg.trace(tg.jacobian(lambda x: tnp.tanh(big_w @ x), use_pfor=False))(np.ones(3))
    assert len(seq.operations) > 40  # the sequential form is one pass per row


def test_hessian_matches_analytic_and_finite_differences(backend):
    A = RNG.normal(size=(6, 3))

    def f(x):
        return tnp.sum(tnp.log1p(tnp.exp(A @ x))) + 0.5 * tnp.sum(x * x)

    x = RNG.normal(size=3)
    H = tg.hessian(f)(x)
    s = 1 / (1 + np.exp(-(A @ x)))
    np.testing.assert_allclose(H, A.T @ np.diag(s * (1 - s)) @ A + np.eye(3), rtol=1e-12)
    grad = lambda v: A.T @ (1 / (1 + np.exp(-(A @ v)))) + v  # noqa: E731
    np.testing.assert_allclose(H, central_jacobian(grad, x), rtol=1e-7, atol=1e-9)


def test_hessian_of_two_arguments_is_nested():
    H = tg.hessian(lambda a, b: tnp.sum(a * a * b), argnums=(0, 1))(np.array([1.0, 2.0]),
                                                                    np.array([3.0, 4.0]))
    np.testing.assert_allclose(H[0][0], np.diag([6.0, 8.0]))
    np.testing.assert_allclose(H[0][1], np.diag([2.0, 4.0]))
    np.testing.assert_allclose(H[1][1], np.zeros((2, 2)))


def test_batch_jacobian_matches_per_example_jacobians(backend):
    x = RNG.normal(size=(5, 3))
    got = tg.batch_jacobian(lambda x: tnp.tanh(x @ W.T + B))(x)
    np.testing.assert_allclose(got, np.stack([analytic_layer(v) for v in x]), rtol=1e-12,
                               atol=1e-14)
    seq = tg.batch_jacobian(lambda x: tnp.tanh(x @ W.T + B), use_pfor=False)(x)
    np.testing.assert_allclose(seq, got, rtol=1e-15)


def test_batch_jacobian_of_higher_rank_rows(backend):
    x = RNG.normal(size=(3, 2, 2))
    got = tg.batch_jacobian(lambda x: tnp.sin(x)[:, :, None, :] * x[:, None, :, :])(x)
    assert got.shape == (3, 2, 2, 2, 2, 2)
    for i in range(3):
        want = central_jacobian(lambda v: np.sin(v)[:, None, :] * v[None, :, :], x[i])
        np.testing.assert_allclose(got[i], want, rtol=1e-7, atol=1e-9)


def test_batch_jacobian_checks_in_the_seeds_order():
    with pytest.raises(ValueError, match="at least rank 2"):
        tg.batch_jacobian(lambda x: x)(np.ones(3))
    with pytest.raises(ValueError, match="at least rank 2"):  # target rank comes first
        tg.batch_jacobian(lambda x: tnp.sum(x, axis=1))(np.ones((3, 2)))
    with pytest.raises(ValueError, match="Need first dimension of target shape"):
        tg.batch_jacobian(lambda x: tnp.ones((4, 2)) * tnp.sum(x))(np.ones((3, 2)))


def test_jvp_matches_the_jacobian_and_the_vjp(backend):
    x, t, c = RNG.normal(size=3), RNG.normal(size=3), RNG.normal(size=4)
    out, jt = tg.jvp(layer, (x,), (t,))
    np.testing.assert_allclose(out, np.tanh(W @ x + B), rtol=1e-15)
    np.testing.assert_allclose(jt, analytic_layer(x) @ t, rtol=1e-12, atol=1e-15)
    (ct,) = tg.vjp(layer, x)[1](c)
    np.testing.assert_allclose(np.dot(jt, c), np.dot(t, ct), rtol=1e-12)


def test_errors():
    with pytest.raises(DTypeError):
        tg.jacobian(lambda x: x)(np.arange(3))
    with pytest.raises(DTypeError, match="int64 output"):
        tg.jacobian(lambda x: tnp.argmax(x))(np.ones(3))
    with pytest.raises(ValueError, match="mode"):
        tg.jacobian(layer, mode="sideways")(np.ones(3))
    with pytest.raises(ValueError, match="parallel_iterations"):
        tg.jacobian(layer, parallel_iterations=0)(np.ones(3))
