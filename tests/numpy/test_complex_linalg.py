"""Linear algebra on complex matrices: values against NumPy/SciPy on both backends, and
gradients (dL/dx + i dL/dy) against central differences."""

import numpy as np
import pytest
import scipy.linalg

import tracegrad as tg
import tracegrad.numpy as tnp
import tracegrad.scipy.linalg as tsl
from tests.finite_diff import complex_gradient

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

# decompositions: values and phase-invariant functions of the vectors (gradients on the numpy
# backend: the numba backend's are the same graph, and its complex kernels are checked above)
DECOMPOSITIONS = [
    ("eigvalsh", lambda np, la, a: np.linalg.eigvalsh(a), lambda np, y: np.sum(y ** 3)),
    ("eigh_U_vectors", lambda np, la, a: np.abs(np.linalg.eigh(a, "U")[1]) ** 2,
     lambda np, y: np.sum(y * np.arange(9.0).reshape(3, 3))),
    ("svd_projector", lambda np, la, a: (lambda r: r[0][:, :2] @ r[2][:2])(np.linalg.svd(a)),
     lambda np, y: np.real(np.sum(y * V))),
    ("svd_values", lambda np, la, a: np.linalg.svd(a[:, :2], compute_uv=False),
     lambda np, y: np.sum(y ** 3)),
    ("qr", lambda np, la, a: np.linalg.qr(a[:, :2]).Q,
     lambda np, y: np.imag(np.sum(y * V[:, None]))),
    ("qr_r", lambda np, la, a: np.linalg.qr(a[:2]).R, lambda np, y: np.real(np.sum(y * V[0]))),
    ("lu_factor", lambda np, la, a: la.lu_factor(a)[0], lambda np, y: np.real(np.sum(y * V))),
    ("expm", lambda np, la, a: la.expm(a / 4), lambda np, y: np.real(np.sum(y * V))),
    ("eigvals", lambda np, la, a: np.linalg.eigvals(a),
     lambda np, y: np.sum(np.abs(y) ** 2 * V.real)),
    ("pinv", lambda np, la, a: np.linalg.pinv(a[:, :2]), lambda np, y: np.sum(np.abs(y))),
    ("lstsq", lambda np, la, a: np.linalg.lstsq(a[:, :2], V)[0], lambda np, y: np.sum(np.abs(y))),
]

def _values(name, fn, got):
    want = fn(np, scipy.linalg, A)
    assert np.asarray(got).dtype == np.asarray(want).dtype, name
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14, err_msg=name)


def _gradients(name, fn, loss, grad):
    want = complex_gradient(lambda a: loss(np, fn(np, scipy.linalg, a)), A)
    np.testing.assert_allclose(grad, want, rtol=1e-6, atol=1e-7, err_msg=name)


def _grad_of(fn, loss):
    return tg.grad(lambda a: loss(tnp, fn(tnp, tsl, a)))


@pytest.mark.parametrize("name,fn,loss", CASES + DECOMPOSITIONS,
                         ids=[c[0] for c in CASES + DECOMPOSITIONS])
def test_values_and_gradients(name, fn, loss, numpy_backend):
    _values(name, fn, tg.function(lambda a: fn(tnp, tsl, a))(A))
    _gradients(name, fn, loss, tg.function(_grad_of(fn, loss))(A))


def test_values_and_gradients_in_one_numba_kernel():
    # every value and the gradients of CASES, one compile (the decompositions' gradients
    # are the same graphs as on the numpy backend, whose complex kernels are checked here)
    def all_cases(a):
        return ([fn(tnp, tsl, a) for _, fn, _ in CASES + DECOMPOSITIONS],
                [_grad_of(fn, loss)(a) for _, fn, loss in CASES])

    values, grads = tg.function(all_cases, backend="numba")(A)
    for (name, fn, _), got in zip(CASES + DECOMPOSITIONS, values, strict=True):
        _values(name, fn, got)
    for (name, fn, loss), grad in zip(CASES, grads, strict=True):
        _gradients(name, fn, loss, grad)


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


def test_complex64_decompositions_are_complex64():
    a = A.astype(np.complex64)
    h = a + a.conj().T
    for fn, m in ((np.linalg.eigh, h), (np.linalg.svd, a), (np.linalg.qr, a), (np.linalg.eig, a)):
        want = fn(m)
        got = tg.function(lambda m, fn=fn: tuple(fn(m)), backend="numba")(tg.constant(m))
        for g, w in zip(got, want, strict=True):
            assert np.asarray(g).dtype == w.dtype
