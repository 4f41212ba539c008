"""Linear algebra on complex matrices: values against NumPy/SciPy on both backends, and
gradients (dL/dx + i dL/dy) against central differences."""

import numpy as np
import pytest
import scipy.linalg

import tracegrad as tg
import tracegrad.numpy as tnp
import tracegrad.scipy.linalg as tsl
from tests.finite_diff import complex_gradient
from tracegrad.errors import DTypeError

RNG = np.random.default_rng(11)
A = RNG.normal(size=(3, 3)) + 1j * RNG.normal(size=(3, 3)) + 3 * np.eye(3)
B = RNG.normal(size=(3, 2)) + 1j * RNG.normal(size=(3, 2))
V = RNG.normal(size=3) + 1j * RNG.normal(size=3)


# (name, matrix function of (np, linalg module, a), real loss of its result)
CASES = [
    ("solve", lambda np, la, a: np.linalg.solve(a, V), lambda np, y: np.sum(np.abs(y) ** 2)),
    ("solve_matrix", lambda np, la, a: np.linalg.solve(a, B), lambda np, y: np.real(np.sum(y))),
    ("inv", lambda np, la, a: np.linalg.inv(a), lambda np, y: np.real(np.sum(y * V[0]))),
    ("det", lambda np, la, a: np.linalg.det(a), lambda np, y: np.abs(y)),
    ("slogdet_log", lambda np, la, a: np.linalg.slogdet(a)[1], lambda np, y: y),
    ("slogdet_sign", lambda np, la, a: np.linalg.slogdet(a)[0], lambda np, y: np.imag(y)),
    ("norm", lambda np, la, a: np.linalg.norm(a), lambda np, y: y),
    ("norm_rows", lambda np, la, a: np.linalg.norm(a, axis=1), lambda np, y: np.sum(y * y)),
    ("norm_1", lambda np, la, a: np.linalg.norm(a, 1), lambda np, y: y),
    ("cholesky", lambda np, la, a: np.linalg.cholesky(a @ a.conj().T),
     lambda np, y: np.real(np.sum(y * V[0]))),
    ("solve_triangular", lambda np, la, a: la.solve_triangular(a, B, lower=True),
     lambda np, y: np.sum(np.abs(y))),
    ("solve_triangular_T", lambda np, la, a: la.solve_triangular(a, B, trans="T"),
     lambda np, y: np.sum(np.abs(y))),
    ("matmul_adjoint", lambda np, la, a: a @ a.conj().T @ V, lambda np, y: np.sum(np.abs(y))),
]


def _check(name, fn, loss, got, grad):
    want = fn(np, scipy.linalg, A)
    assert np.asarray(got).dtype == np.asarray(want).dtype, name
    np.testing.assert_allclose(got, want, rtol=1e-12, err_msg=name)
    np.testing.assert_allclose(
        grad, complex_gradient(lambda a: loss(np, fn(np, scipy.linalg, a)), A),
        rtol=1e-6, atol=1e-7, err_msg=name)


@pytest.mark.parametrize("name,fn,loss", CASES, ids=[c[0] for c in CASES])
def test_values_and_gradients(name, fn, loss, numpy_backend):
    got = tg.function(lambda a: fn(tnp, tsl, a))(A)
    grad = tg.function(tg.grad(lambda a: loss(tnp, fn(tnp, tsl, a))))(A)
    _check(name, fn, loss, got, grad)


def test_values_and_gradients_in_one_numba_kernel():
    def all_cases(a):  # every value, then every gradient: one compile
        grads = [tg.grad(lambda a, fn=fn, loss=loss: loss(tnp, fn(tnp, tsl, a)))(a)
                 for _, fn, loss in CASES]
        return [fn(tnp, tsl, a) for _, fn, _ in CASES], grads

    values, grads = tg.function(all_cases, backend="numba")(A)
    for (name, fn, loss), got, grad in zip(CASES, values, grads, strict=True):
        _check(name, fn, loss, got, grad)


def test_complex64_values():
    a = A.astype(np.complex64)
    fns = (np.linalg.inv, np.linalg.det, lambda m: np.linalg.solve(m, V.astype(np.complex64)),
           lambda m: m @ m, np.linalg.norm)
    for backend in ("numpy", "numba"):
        results = tg.function(lambda m: [fn(m) for fn in fns], backend=backend)(tg.constant(a))
        for fn, got in zip(fns, results, strict=True):
            want = fn(a)
            assert np.asarray(got).dtype == np.asarray(want).dtype
            np.testing.assert_allclose(got, want, rtol=2e-5)


def test_decompositions_refuse_complex_for_now():
    for fn in (tnp.linalg.qr, tnp.linalg.eigh, tnp.linalg.svd):
        with pytest.raises(DTypeError, match=fn.__name__):
            tg.function(fn)(A)
