"""Complex numbers through the composite functions: the conjugates NumPy and SciPy take
(`vecdot`, `cov`, `correlate`, Cholesky factors, adjoint solves), imaginary parts kept
(`linspace`, `median`, `interp`, `nanvar`), NumPy's errors, rounding, optimizers, and the
numba backend at NumPy's special values."""

import warnings

import numpy as np
import pytest
import scipy.linalg

import tracegrad as tg
import tracegrad.numpy as tnp
import tracegrad.scipy.linalg as tsl
from tracegrad import nn
from tracegrad import optimizers as opt
from tracegrad.errors import DTypeError

RNG = np.random.default_rng(5)
A = RNG.normal(size=(3, 3)) + 1j * RNG.normal(size=(3, 3)) + 3 * np.eye(3)
H = A @ A.conj().T
B = RNG.normal(size=(3, 2)) + 1j * RNG.normal(size=(3, 2))
Z = np.array([1 + 2j, 3 - 1j, 2 + 0.5j, 0.5 - 1j])

CASES = {
    "cholesky_upper": lambda np, la: np.linalg.cholesky(H, upper=True),
    "vecdot": lambda np, la: np.vecdot(A, A[::-1]),
    "linalg_vecdot": lambda np, la: np.linalg.vecdot(A, A[::-1]),
    "vecmat": lambda np, la: np.vecmat(A[0], A),
    "cov": lambda np, la: np.cov(A),
    "corrcoef": lambda np, la: np.corrcoef(A),
    "correlate": lambda np, la: np.correlate(A[0], A[1], "full"),
    "correlate_swapped": lambda np, la: np.correlate(A[0, :2], A[1], "full"),
    "scipy_cholesky": lambda np, la: la.cholesky(H),
    "cho_solve_lower": lambda np, la: la.cho_solve(la.cho_factor(H, lower=True), B),
    "cho_solve_upper": lambda np, la: la.cho_solve(la.cho_factor(H), B),
    "solve_pos": lambda np, la: la.solve(H, B, assume_a="pos"),
    "solve_her": lambda np, la: la.solve(H, B, assume_a="her", lower=True),
    "solve_sym": lambda np, la: la.solve(A + A.T, B, assume_a="sym"),
    "solve_triangular_C": lambda np, la: la.solve_triangular(A, B, trans="C", lower=True),
    "scipy_det": lambda np, la: la.det(A),
    "linspace": lambda np, la: np.linspace(1 + 2j, 3 - 1j, 5),
    "median": lambda np, la: np.median(Z),
    "interp": lambda np, la: np.interp(np.array([-1.0, 0.5, 1.5, 5.0]), np.array([0.0, 1, 2]),
                                       Z[:3], left=1j, right=2.0),
    "norm_0_3": lambda np, la: (np.linalg.norm(Z, 0), np.linalg.norm(Z, 3)),
    "nanvar": lambda np, la: np.nanvar(np.append(Z, np.nan)),
    "nanstd": lambda np, la: np.nanstd(np.append(Z, np.nan), ddof=1),
    "full_like": lambda np, la: np.full_like(np.ones(2, np.float32), 2 + 1j),
    "round": lambda np, la: np.round(np.array([1.55 + 2.45j, complex(np.nan, 1.5)]), 1),
    "rint": lambda np, la: np.rint(np.array([0.5 - 1.5j, 2.5 + 0.5j])),
    "sort_complex": lambda np, la: np.sort_complex(np.array([complex(0, np.nan), 1 + 1j, 2 + 0j,
                                                              complex(np.nan, 0)])),
}


def _check(name, got, want):
    for g, w in zip(got if isinstance(want, tuple) else [got],
                    want if isinstance(want, tuple) else [want], strict=True):
        assert np.asarray(g).dtype == np.asarray(w).dtype, name
        np.testing.assert_allclose(g, w, rtol=1e-12, equal_nan=True, err_msg=name)


@pytest.mark.parametrize("backend", ["eager", "numpy"])
@pytest.mark.parametrize("name", list(CASES))
def test_values_equal_numpy_and_scipy(name, backend):
    fn = CASES[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = fn(np, scipy.linalg)
        got = fn(tnp, tsl) if backend == "eager" else tg.function(
            lambda: fn(tnp, tsl), backend=backend)()
    _check(name, got, want)


def test_values_equal_numpy_and_scipy_in_one_numba_kernel():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        wants = [fn(np, scipy.linalg) for fn in CASES.values()]
        got = tg.function(lambda: [fn(tnp, tsl) for fn in CASES.values()], backend="numba")()
    for name, g, w in zip(CASES, got, wants, strict=True):
        _check(name, g, w)


def test_numpys_refusals_and_real_only_primitives_on_complex():
    for fn in (lambda: tnp.percentile(Z, 50), lambda: tnp.quantile(Z, 0.5),
               lambda: tnp.i0(Z), lambda: tnp.bincount(np.array([0, 1]), Z[:2])):
        with pytest.raises(DTypeError):
            fn()
    # NumPy computes these for complex, tracegrad's primitives are real only: never a
    # silently wrong number, eagerly as traced
    with pytest.raises(DTypeError, match="logistic"):
        nn.sigmoid(tg.constant(Z))
    # (pinv, through svd, takes complex matrices since svd does)
    np.testing.assert_allclose(tnp.linalg.pinv(tg.constant(A)), np.linalg.pinv(A), rtol=1e-12)


@pytest.mark.parametrize("name", ["sgd", "adam", "adamw", "rmsprop", "adagrad"])
def test_optimizers_step_complex_parameters_by_magnitude(name):
    target = np.array([0.5 - 0.5j, -1 + 2j])
    optimizer = getattr(opt, name)(0.5 if name == "adagrad" else 0.05)
    grad = tg.grad(lambda q: tnp.sum(tnp.abs(q - target) ** 2))
    p = np.zeros(2, complex)
    state = optimizer.init(p)
    for _ in range(1500):
        p, state = optimizer.update(grad(p), state, p)
    np.testing.assert_allclose(p, target, atol=2e-3)


def test_numba_keeps_nan_and_inf_through_multiplication_by_zero():
    z = np.array([complex(np.nan, 1), complex(np.inf, 0), 1 + 1j])
    for backend in ("numpy", "numba"):
        with np.errstate(all="ignore"):
            got = tg.function(lambda v: v * 0, backend=backend)(z)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(z * 0))


def test_numba_complex64_sums_are_accurate():
    z = (RNG.normal(size=200_000) + 1j * RNG.normal(size=200_000) + 3 + 1j).astype(np.complex64)
    exact = np.sum(z.astype(np.complex128))
    for fn in (tnp.sum, tnp.mean):
        got = tg.function(fn, backend="numba")(z)
        assert got.dtype == np.complex64
        want = exact if fn is tnp.sum else exact / z.size
        assert abs(got - want) <= 2e-7 * abs(want)


def test_numba_sqrt_and_sign_at_numpys_special_values():
    vals = [0.0, -0.0, 1.5, -1.5, np.inf, -np.inf, np.nan, 1e308, -1e308, 1e-300, 1e-320,
            -1e-320, 3e-160, 1e160]
    z = np.array([complex(a, b) for a in vals for b in vals])
    fns = (np.sqrt, np.sign, np.abs, np.exp)
    with np.errstate(all="ignore"):
        results = tg.function(lambda v: [getattr(tnp, fn.__name__)(v) for fn in fns],
                              backend="numba")(z)
    for fn, got in zip(fns, results, strict=True):
        with np.errstate(all="ignore"):
            want = fn(z)
        for g, w in ((got.real, want.real), (got.imag, want.imag)) if want.dtype.kind == "c" \
                else ((got, want),):
            np.testing.assert_allclose(g, w, rtol=4e-16, atol=0, equal_nan=True,
                                       err_msg=fn.__name__)


def test_cond_takes_a_complex_predicate():
    f = tg.function(lambda z: tg.cond(z, lambda: 1.0, lambda: 2.0))
    assert f(np.complex128(1j)) == 1.0 and f(np.complex128(0)) == 2.0
