"""autograd's elementwise_grad, JAX's linearize and linear_transpose, and tg.fixed_point's
implicit gradients, against analytic values and central differences."""

from __future__ import annotations

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tests.finite_diff import central_difference, central_jacobian
from tracegrad.errors import InvalidArgumentError

X = np.array([-1.5, 0.0, 0.3, 2.0])


def test_elementwise_grad_is_the_derivative_of_each_element():
    np.testing.assert_allclose(tg.elementwise_grad(tnp.tanh)(X), 1 - np.tanh(X) ** 2,
                               rtol=1e-14)
    g = tg.elementwise_grad(lambda x, y: x * tnp.sin(y), 1)(X, X[::-1])
    np.testing.assert_allclose(g, X * np.cos(X[::-1]), rtol=1e-15)


def test_linearize_gives_jvps_at_the_point():
    fn = lambda x: tnp.sin(x) * tnp.exp(x[::-1])  # noqa: E731
    y, f_jvp = tg.linearize(fn, X)
    np.testing.assert_allclose(y, np.sin(X) * np.exp(X[::-1]))
    jac = central_jacobian(lambda x: np.sin(x) * np.exp(x[::-1]), X)
    for t in (np.ones(4), np.array([0.0, 1.0, -2.0, 0.5])):
        np.testing.assert_allclose(f_jvp(t), jac @ t, rtol=1e-7, atol=1e-9)
    with pytest.raises(InvalidArgumentError, match="f_jvp takes 1 tangents"):
        f_jvp(X, X)


def test_linear_transpose_of_a_matrix_product():
    a = np.arange(12.0).reshape(3, 4)
    f_t = tg.linear_transpose(lambda x: a @ x, np.zeros(4))
    ct = np.array([1.0, -2.0, 0.5])
    (out,) = f_t(ct)
    np.testing.assert_allclose(out, a.T @ ct)


def _iterate_numpy(m, b, x):
    for _ in range(500):
        x = m @ np.tanh(x) + b
    return x


def test_fixed_point_of_a_tree_with_implicit_gradients():
    rng = np.random.default_rng(0)
    m = 0.3 * rng.normal(size=(3, 3))  # a contraction: |m| < 1, |tanh'| <= 1
    b = rng.normal(size=3)

    def solve(params):
        return tg.fixed_point(lambda p, x: p["m"] @ tnp.tanh(x) + p["b"], params,
                              np.zeros(3))

    x_star = tg.function(solve)({"m": m, "b": b})
    np.testing.assert_allclose(x_star, _iterate_numpy(m, b, np.zeros(3)), atol=1e-12)

    weights = np.array([1.0, -2.0, 0.5])
    g = tg.grad(lambda p: tnp.sum(solve(p) * weights))({"m": m, "b": b})
    fd_b = central_difference(lambda v: _iterate_numpy(m, v, np.zeros(3)) @ weights, b)
    fd_m = central_difference(lambda v: _iterate_numpy(v, b, np.zeros(3)) @ weights, m)
    np.testing.assert_allclose(g["b"], fd_b, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(g["m"], fd_m, rtol=1e-7, atol=1e-9)


def test_fixed_point_second_derivative_and_vmap():
    def sqrt(a):
        return tg.fixed_point(lambda a, x: 0.5 * (x + a / x), a, a)

    a = np.array([2.0, 4.0, 9.0])
    np.testing.assert_allclose(tg.vmap(tg.grad(sqrt))(a), 0.5 / np.sqrt(a), rtol=1e-12)
    assert tg.grad(tg.grad(sqrt))(2.0) == pytest.approx(-0.25 * 2.0 ** -1.5, rel=1e-9)
