"""tracegrad.scipy.stats against scipy.stats: every method's values on the numpy backend
(the numba backend on a sample), and gradients in every float parameter vs central
differences."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats

import tracegrad as tg
import tracegrad.scipy.stats as ts
from tests.finite_diff import central_difference

R = np.random.default_rng(0)
X = R.uniform(-2.0, 3.0, (6,))
POS = R.uniform(0.1, 4.0, (6,))
UNIT = R.uniform(0.05, 0.95, (6,))
Q = R.uniform(0.05, 0.95, (6,))
K = np.array([0.0, 1.0, 2.0, 3.0, 5.0, -1.0, 2.5])

# distribution: [(arguments, methods, indices of the float parameters to differentiate)]:
# every float parameter (the counts k of the discrete ones are not)
ROWS = {
    "norm": [((X, 0.3, 1.5), "logpdf pdf cdf logcdf sf logsf", (0, 1, 2)),
             ((Q, 0.3, 1.5), "ppf isf", (0, 1, 2))],
    "t": [((X, 3.5, 0.3, 1.5), "logpdf pdf", (0, 1, 2, 3))],
    "gamma": [((POS, 2.5, 0.05, 1.5), "logpdf pdf", (0, 1, 2, 3)),
              ((POS, 2.5, 0.05, 1.5), "cdf logcdf sf logsf", (0, 1, 2, 3))],
    "beta": [((UNIT, 2.5, 1.5), "logpdf pdf", (0, 1, 2)),
             ((UNIT * 3 - 0.5, 2.5, 1.5, -0.5, 3.0), "logpdf", (0, 1, 2, 3, 4)),
             ((UNIT * 3 - 0.5, 2.5, 1.5, -0.4, 3.0), "cdf logcdf sf logsf", (0, 1, 2, 3, 4)),
             ((UNIT, 3.0, 3.0), "cdf sf", (1, 2))],  # both sides of x = (a+1)/(a+b+2)
    "expon": [((POS, 0.05, 1.5), "logpdf pdf cdf logcdf sf logsf", (0, 1, 2)),
              ((Q, 0.1, 1.5), "ppf", (0, 1, 2))],
    "laplace": [((X, 0.1, 1.5), "logpdf pdf cdf", (0, 1, 2))],
    "logistic": [((X, 0.1, 1.5), "logpdf pdf cdf sf", (0, 1, 2)),
                 ((Q, 0.1, 1.5), "ppf isf", (0, 1, 2))],
    "cauchy": [((X, 0.1, 1.5), "logpdf pdf cdf logcdf sf logsf", (0, 1, 2)),
               ((Q, 0.1, 1.5), "ppf isf", (0, 1, 2))],
    "uniform": [((X, -1.0, 2.5), "logpdf pdf cdf", (0, 1, 2)),
                ((Q, -1.0, 2.5), "ppf", (0, 1, 2))],
    "truncnorm": [((X, -1.0, 2.0, 0.3, 1.2), "logpdf pdf cdf logcdf sf logsf", (0, 1, 2, 3, 4)),
                  ((X, 0.5, 3.0, 0.3, 1.2), "logpdf cdf sf", (0, 1, 2, 3, 4))],
    "poisson": [((K, 2.5), "logpmf pmf cdf", (1,))],
    "bernoulli": [((K, 0.3), "logpmf pmf cdf", (1,)), ((Q, 0.3), "ppf", (0, 1))],
    "binom": [((K, 5.0, 0.3), "logpmf pmf", (2,)), ((K, 7.0, 0.3), "logpmf pmf", (1, 2))],
    "nbinom": [((K, 5.0, 0.3), "logpmf pmf", (1, 2))],
    "geom": [((K, 0.3), "logpmf pmf", (1,))],
}
CASES = [(d, m, args, diff) for d, rows in ROWS.items() for args, ms, diff in rows
         for m in ms.split()]
IDS = [f"{d}.{m}[{i}]" for i, (d, m, _, _) in enumerate(CASES)]


def _reference(fn):
    """`fn` on the numpy backend (the derivative checks need no kernel compiles)."""
    return tg.function(fn, backend="numpy")


def _methods(d, m):
    return getattr(getattr(ts, d), m), getattr(getattr(scipy.stats, d), m)


@pytest.mark.parametrize(("d", "m", "args", "diff"), CASES, ids=IDS)
def test_values_match_scipy(d, m, args, diff):
    fn, ref = _methods(d, m)
    np.testing.assert_allclose(tg.function(fn, backend="numpy")(*args), ref(*args),
                               rtol=2e-14, atol=1e-300, equal_nan=True,
                               err_msg="SciPy composes its formulas in another order")


# a sample (each row compiles a kernel): SciPy's compiled log_ndtr, gammainc, gammaln
@pytest.mark.parametrize(("d", "m"), [("norm", "logcdf"), ("gamma", "cdf"), ("binom", "logpmf")])
def test_numba_backend_matches_numpy_backend(d, m):
    args = ROWS[d][0][0]
    fn, _ = _methods(d, m)
    np.testing.assert_allclose(tg.function(fn, backend="numba")(*args),
                               tg.function(fn, backend="numpy")(*args), rtol=1e-15, atol=0)


def _grad_cases():
    for d, m, args, diff in CASES:
        for i in diff:
            yield pytest.param(d, m, args, i, id=f"{d}.{m}[d{i}]")


@pytest.mark.parametrize(("d", "m", "args", "i"), list(_grad_cases()))
def test_gradients_match_finite_differences(d, m, args, i):
    fn, _ = _methods(d, m)
    x0 = np.asarray(args[i], dtype=np.float64)

    def f(x):
        return fn(*args[:i], x, *args[i + 1:])

    got = tg.grad(_reference(lambda x: tg.numpy.sum(f(x))))(x0)
    finite = np.isfinite(np.asarray(f(x0)))
    want = central_difference(lambda x: np.where(finite, f(x), 0.0), x0)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)


def test_multivariate_normal_matches_scipy_and_differentiates_in_mean_and_cov():
    cov = np.array([[2.0, 0.3, 0.1], [0.3, 1.0, -0.2], [0.1, -0.2, 1.5]])
    mean = np.array([0.1, -0.2, 0.4])
    x = R.normal(size=(2, 4, 3))
    for args in ((x, mean, cov), (x[0, 0], mean, cov)):
        for m in ("logpdf", "pdf"):
            fn, ref = _methods("multivariate_normal", m)
            np.testing.assert_allclose(_reference(fn)(*args), ref(*args), rtol=1e-13)
    logpdf = ts.multivariate_normal.logpdf
    got = tg.grad(_reference(lambda m: tg.numpy.sum(logpdf(x, m, cov))))(mean)
    want = central_difference(lambda m: scipy.stats.multivariate_normal.logpdf(x, m, cov), mean)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    got = tg.grad(_reference(lambda c: tg.numpy.sum(logpdf(x, mean, (c + c.T) / 2))))(cov)
    want = central_difference(
        lambda c: scipy.stats.multivariate_normal.logpdf(x, mean, (c + c.T) / 2), cov)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_dirichlet_matches_scipy_and_differentiates_in_alpha():
    alpha = np.array([1.5, 2.0, 0.7])
    x = np.array([[0.2, 0.5, 0.3], [0.1, 0.1, 0.8]]).T
    for m in ("logpdf", "pdf"):
        fn, ref = _methods("dirichlet", m)
        np.testing.assert_allclose(_reference(fn)(x, alpha), ref(x, alpha), rtol=1e-14)
    got = tg.grad(_reference(lambda a: tg.numpy.sum(ts.dirichlet.logpdf(x, a))))(alpha)
    want = central_difference(lambda a: scipy.stats.dirichlet.logpdf(x, a), alpha)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_vmap_of_a_log_density_over_its_scale_matches_a_loop():
    scales = np.array([0.5, 1.0, 2.0])
    got = tg.vmap(_reference(lambda s: ts.t.logpdf(X, 3.0, 0.0, s)))(scales)
    np.testing.assert_allclose(got, [scipy.stats.t.logpdf(X, 3.0, 0.0, s) for s in scales],
                               rtol=1e-14)
