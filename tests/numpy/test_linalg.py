"""tnp.linalg beyond the op table: argument errors, gradients at repeated eigenvalues, and
NumPy's linalg functions on tensors reaching tracegrad."""

from __future__ import annotations

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tracegrad.errors import (
    InvalidArgumentError,
    NotDifferentiableError,
    ShapeError,
    UnsupportedOpError,
)


def test_decomposition_argument_errors():
    with pytest.raises(InvalidArgumentError, match="qr: unrecognized mode"):
        tnp.linalg.qr(np.eye(2), mode="economic")
    with pytest.raises(UnsupportedOpError, match="qr: mode='raw'"):
        tnp.linalg.qr(np.eye(2), mode="raw")
    with pytest.raises(InvalidArgumentError, match="eigh: UPLO"):
        tnp.linalg.eigh(np.eye(2), UPLO="X")
    with pytest.raises(ShapeError, match="eigvalsh: last 2 dimensions"):
        tnp.linalg.eigvalsh(np.ones((2, 3)))
    with pytest.raises(ShapeError, match="svd: 1-dimensional"):
        tnp.linalg.svd(np.ones(3))


def test_spectral_function_gradients_at_repeated_eigenvalues_are_exact():
    # sum(w**2) = |a|_F^2 on symmetric matrices: its gradient on the lower triangle is 2a
    # there and 4a below the diagonal, repeated eigenvalues or not
    a = np.diag([1.0, 2.0, 2.0, 3.0]) + np.tril(np.full((4, 4), 0.0), -1)
    g = tg.grad(lambda x: tnp.sum(tnp.linalg.eigvalsh(x) ** 2))(a)
    np.testing.assert_allclose(g, np.diag([2.0, 4.0, 4.0, 6.0]), atol=1e-12)
    g = tg.grad(lambda x: tnp.sum(tnp.linalg.eigh(x)[0] ** 3))(np.eye(3))
    np.testing.assert_allclose(g, 3 * np.eye(3), atol=1e-12)
    g = tg.grad(lambda x: tnp.sum(tnp.linalg.svdvals(x)))(np.eye(3))
    np.testing.assert_allclose(g, np.eye(3), atol=1e-12)


def test_gradient_of_a_non_square_qr_needs_static_dims():
    f = tg.function(tg.grad(lambda a: tnp.sum(tnp.linalg.qr(a)[1])),
                    input_signature=[tg.TensorSpec([None, None])], backend="numpy")
    with pytest.raises(NotDifferentiableError, match="qr: the gradient"):
        f(np.ones((3, 2)))


def test_numpy_linalg_functions_dispatch_on_tensors():
    a = np.array([[2.0, 1.0], [1.0, 3.0]])
    v = tg.Variable(a)
    with tg.GradientTape() as tape:
        w = np.linalg.eigvalsh(v)
        s = np.linalg.svdvals(v)
        total = tnp.sum(w) + tnp.sum(s) + tnp.sum(np.linalg.qr(v).R)
    np.testing.assert_allclose(w.numpy(), np.linalg.eigvalsh(a), rtol=1e-15)
    assert isinstance(np.linalg.svd(v), tnp.linalg.SVDResult)
    assert tape.gradient(total, v) is not None


def test_lstsq_residuals_follow_numpy_eagerly_and_are_computed_when_traced():
    a, b = np.ones((4, 2)), np.arange(4.0)
    x, residuals, rank, s = tnp.linalg.lstsq(a, b)  # rank 1 < n: NumPy's empty residuals
    want = np.linalg.lstsq(a, b)
    np.testing.assert_allclose(x, want[0], rtol=1e-14)
    assert residuals.shape == (0,) and rank == want[2] == 1 and type(rank) is np.int32
    eager = tnp.linalg.lstsq(tg.constant(a), tg.constant(b))
    assert eager[1].shape == (0,) and isinstance(eager[1], tg.Tensor)
    traced = tg.function(tnp.linalg.lstsq, backend="numpy")(a, b)
    np.testing.assert_allclose(traced[1], [np.sum((b - a @ want[0]) ** 2)], rtol=1e-12)
    assert traced[2] == 1


def test_composite_argument_errors():
    with pytest.raises(InvalidArgumentError, match="pinv: `rtol` and `rcond`"):
        tnp.linalg.pinv(np.eye(2), rcond=0.1, rtol=0.1)
    with pytest.raises(TypeError, match="matrix_power: exponent must be an integer"):
        tnp.linalg.matrix_power(np.eye(2), 1.5)
    with pytest.raises(ShapeError, match="matrix_power: last 2 dimensions"):
        tnp.linalg.matrix_power(np.ones((2, 3)), 2)
    with pytest.raises(InvalidArgumentError, match="multi_dot: expecting at least two"):
        tnp.linalg.multi_dot([np.eye(2)])
    with pytest.raises(ShapeError, match="multi_dot: the arrays must be two-dimensional"):
        tnp.linalg.multi_dot([np.eye(2), np.ones((2, 2, 2)), np.eye(2)])
    with pytest.raises(ShapeError, match="lstsq: incompatible dimensions"):
        tnp.linalg.lstsq(np.ones((3, 2)), np.ones(4))
    with pytest.raises(ShapeError, match="tensorsolve: input arrays must satisfy"):
        tnp.linalg.tensorsolve(np.ones((2, 3, 5)), np.ones((2, 3)))
    with pytest.raises(ShapeError, match="cross: both input arrays must be"):
        tnp.linalg.cross(np.ones(2), np.ones(2))
    with pytest.raises(ShapeError, match="outer: input arrays must be one-dimensional"):
        tnp.linalg.outer(np.ones((2, 2)), np.ones(2))


def test_multi_dot_with_unknown_dims_multiplies_left_to_right():
    ms = [np.random.default_rng(k).standard_normal(s)
          for k, s in enumerate([(2, 3), (3, 4), (4, 5), (5, 2)])]
    f = tg.function(lambda *a: tnp.linalg.multi_dot(a), backend="numpy",
                    input_signature=[tg.TensorSpec([None, None])] * 4)
    np.testing.assert_allclose(f(*ms), ((ms[0] @ ms[1]) @ ms[2]) @ ms[3], rtol=1e-14)


def test_scipy_linalg_argument_errors():
    import tracegrad.scipy.linalg as tsl

    with pytest.raises(InvalidArgumentError, match="solve_triangular: incorrect trans"):
        tsl.solve_triangular(np.eye(2), np.ones(2), trans=3)
    with pytest.raises(ShapeError, match="cho_factor: last 2 dimensions"):
        tsl.cho_factor(np.ones((2, 3)))
    with pytest.raises(ShapeError, match="block_diag: arguments must have dimension <= 2"):
        tsl.block_diag(np.ones((1, 1, 1)))


def test_default_tolerances_read_unknown_sizes_at_run_time():
    # s = (1, 5e-16): below max(m, n) * eps = 6.7e-16 for 3 x 2, above min(m, n) * eps
    a = np.diag([1.0, 5e-16, 0.0])[:, :2].copy()
    spec = [tg.TensorSpec([None, None])]
    rank = tg.function(tnp.linalg.matrix_rank, input_signature=spec, backend="numpy")
    pinv = tg.function(lambda x: tnp.linalg.pinv(x, rtol=None), input_signature=spec,
                       backend="numpy")
    lstsq = tg.function(lambda x: tnp.linalg.lstsq(x, np.ones(3))[2], input_signature=spec,
                        backend="numpy")
    assert rank(a) == np.linalg.matrix_rank(a) == 1
    assert lstsq(a) == np.linalg.lstsq(a, np.ones(3))[2] == 1
    for x in (a, np.eye(4)):
        np.testing.assert_allclose(pinv(x), np.linalg.pinv(x, rtol=None), atol=1e-15)
