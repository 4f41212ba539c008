"""tg.hessian of any output shape: the Jacobian of the Jacobian, `out.shape + in.shape +
in.shape` as JAX's, against analytic values and float64 central differences of the
Jacobian, on both backends."""

from __future__ import annotations

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tests.finite_diff import central_jacobian

RNG = np.random.default_rng(22)
BACKENDS = ["numpy", "numba"]


def compiled_hessian(f, backend, argnums=0):
    return tg.function(tg.hessian(f, argnums=argnums), backend=backend)


def sin_times_reversed(x):
    return tnp.sin(x) * x[::-1]


def sin_times_reversed_hessian(x):
    """f_i = sin(x_i) x_r(i), r(i) = n - 1 - i (the middle one is sin(x_i) x_i)."""
    n = len(x)
    H = np.zeros((n, n, n))
    for i in range(n):
        r = n - 1 - i
        H[i, i, i] += -np.sin(x[i]) * x[r]
        H[i, i, r] += np.cos(x[i])
        H[i, r, i] += np.cos(x[i])
    return H


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("n", [4, 5])
def test_hessian_of_a_vector_output(backend, n):
    x = RNG.normal(size=n)
    H = compiled_hessian(sin_times_reversed, backend)(x)
    assert H.shape == (n, n, n)
    np.testing.assert_allclose(H, sin_times_reversed_hessian(x), rtol=1e-14, atol=1e-15)
    jac = tg.jacobian(sin_times_reversed)
    np.testing.assert_allclose(H, central_jacobian(jac, x), rtol=1e-7, atol=1e-8)


def test_hessian_of_a_vector_output_uncompiled_and_on_tensors(backend):
    x = RNG.normal(size=3)
    np.testing.assert_allclose(tg.hessian(sin_times_reversed)(x),
                               sin_times_reversed_hessian(x), rtol=1e-14, atol=1e-15)
    H = tg.hessian(sin_times_reversed)(tg.constant(x))
    assert isinstance(H, tg.Tensor) and H.shape == (3, 3, 3)
    np.testing.assert_allclose(H.numpy(), sin_times_reversed_hessian(x), rtol=1e-14,
                               atol=1e-15)


@pytest.mark.parametrize("backend", BACKENDS)
def test_hessian_of_a_matrix_product_is_its_constant_second_derivative(backend):
    X = RNG.normal(size=(3, 3))
    H = compiled_hessian(lambda X: X @ X, backend)(X)
    assert H.shape == (3,) * 6
    # d2 (X @ X)[a, b] / dX[p, q] dX[r, s] = [a=p][q=r][s=b] + [a=r][s=p][q=b]
    d = np.eye(3)
    want = (np.einsum("ap,qr,sb->abpqrs", d, d, d) + np.einsum("ar,sp,qb->abpqrs", d, d, d))
    np.testing.assert_array_equal(H, want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_hessian_of_a_matrix_output_matches_differences_of_the_jacobian(backend):
    def f(A):
        return tnp.exp(A) @ A.T

    A = RNG.normal(size=(2, 3))
    H = compiled_hessian(f, backend)(A)
    assert H.shape == (2, 2, 2, 3, 2, 3)
    np.testing.assert_allclose(H, central_jacobian(tg.jacobian(f), A), rtol=1e-7, atol=1e-8)
    # symmetric in the two input positions
    np.testing.assert_allclose(H, H.transpose(0, 1, 4, 5, 2, 3), rtol=1e-14)


def outer_sin_square(x, y):
    return tnp.sin(x)[:, None] * (y ** 2)[None, :]


@pytest.mark.parametrize("backend", BACKENDS)
def test_hessian_with_argnums_tuple_is_nested_blocks(backend):
    x, y = RNG.normal(size=3), RNG.normal(size=2)
    H = compiled_hessian(outer_sin_square, backend, argnums=(0, 1))(x, y)
    assert [[h.shape for h in row] for row in H] == [
        [(3, 2, 3, 3), (3, 2, 3, 2)], [(3, 2, 2, 3), (3, 2, 2, 2)]]
    ex, ey = np.eye(3), np.eye(2)
    xx = np.einsum("a,b,ap,aq->abpq", -np.sin(x), y ** 2, ex, ex)
    xy = np.einsum("a,b,ap,bq->abpq", np.cos(x), 2 * y, ex, ey)
    yy = np.einsum("a,bp,bq->abpq", 2 * np.sin(x), ey, ey)
    want = [[xx, xy], [xy.transpose(0, 1, 3, 2), yy]]
    for got_row, want_row in zip(H, want, strict=True):
        for got, block in zip(got_row, want_row, strict=True):
            np.testing.assert_allclose(got, block, rtol=1e-14, atol=1e-15)
    # each block is the difference of the Jacobian block of its row in its column argument
    jac = tg.jacobian(outer_sin_square, argnums=(0, 1))
    np.testing.assert_allclose(H[0][1], central_jacobian(lambda v: jac(x, v)[0], y), rtol=1e-7,
                               atol=1e-8)
    np.testing.assert_allclose(H[1][0], central_jacobian(lambda v: jac(v, y)[1], x), rtol=1e-7,
                               atol=1e-8)


def test_hessian_of_structured_outputs_mirrors_them():
    x = RNG.normal(size=3)
    H = tg.hessian(lambda x: {"s": tnp.sum(x ** 3), "v": x ** 2})(x)
    np.testing.assert_allclose(H["s"], np.diag(6 * x), rtol=1e-14)
    np.testing.assert_array_equal(H["v"], 2 * np.einsum("ip,iq->ipq", np.eye(3), np.eye(3)))


def test_hessian_of_a_scalar_keeps_its_shape_and_graph():
    x = RNG.normal(size=3)
    H = tg.hessian(lambda x: tnp.sum(tnp.sin(x) * x))(x)
    np.testing.assert_allclose(H, np.diag(2 * np.cos(x) - x * np.sin(x)), rtol=1e-14)
    graph = tg.trace(tg.hessian(lambda x: tnp.sum(tnp.sin(x) * x)))(x)
    # the gradient is one pullback, not a pullback vectorized over a 1-row identity
    assert sum(op.primitive.name == "iota" for op in graph.operations) == 2
