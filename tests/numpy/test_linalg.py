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
