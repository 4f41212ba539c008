"""tracegrad.scipy.optimize: SciPy's minimizers with compiled derivatives reach SciPy's
own answers, in fewer evaluations than SciPy's finite differences, over trees of
parameters."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.optimize as so

import tracegrad.numpy as tnp
from tracegrad.errors import InvalidArgumentError
from tracegrad.scipy.optimize import least_squares, minimize

X0 = np.array([1.3, 0.7, 0.8, 1.9, 1.2, 0.5, 1.1, 0.9, 1.4, 0.6])


def rosen(x):
    return tnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


# method -> the derivatives SciPy's own run is given: the exact ones of scipy.optimize
EXACT = {"hessp": so.rosen_hess_prod, "hess": so.rosen_hess}
METHODS = {"BFGS": (), "L-BFGS-B": (), "CG": (), "trust-constr": ("hessp",),
           "Newton-CG": ("hessp",), "trust-ncg": ("hessp",), "trust-krylov": ("hessp",),
           "trust-exact": ("hess",)}


@pytest.mark.parametrize("method", sorted(METHODS))
def test_rosenbrock_in_10_dimensions_matches_scipy(method):
    result = minimize(rosen, X0, method=method)
    extra = {k: EXACT[k] for k in METHODS[method]}
    exact = so.minimize(so.rosen, X0, method=method, jac=so.rosen_der, **extra)
    assert result.success and exact.success
    np.testing.assert_allclose(result.x, exact.x, atol=1e-5)
    np.testing.assert_allclose(result.x, np.ones(10), atol=2e-4)
    # the same path as SciPy's with exact derivatives: ours are exact too
    assert abs(result.nfev - exact.nfev) <= 2
    if method in ("BFGS", "L-BFGS-B", "CG", "trust-constr"):
        finite = so.minimize(so.rosen, X0, method=method)  # finite-difference gradients
        assert result.nfev < finite.nfev / 5


def test_parameters_may_be_a_tree_of_mixed_dtypes():
    def loss(p):
        return rosen(tnp.concatenate([p["a"], tnp.astype(p["b"], np.float64)]))

    x0 = {"a": X0[:4], "b": X0[4:].astype(np.float32)}
    result = minimize(loss, x0, method="L-BFGS-B")
    assert set(result.x) == {"a", "b"} and result.x["b"].dtype == np.float32
    np.testing.assert_allclose(result.x["a"], np.ones(4), atol=1e-3)
    np.testing.assert_allclose(result.x["b"], np.ones(6), atol=1e-3)
    assert result.jac["a"].shape == (4,) and result.jac["b"].shape == (6,)


def test_args_bounds_and_constraints_pass_through():
    def shifted(x, shift, scale):
        return scale * rosen(x - shift)

    result = minimize(shifted, X0, args=(0.5, 2.0), method="BFGS")
    np.testing.assert_allclose(result.x, np.full(10, 1.5), atol=1e-5)

    bounded = minimize(rosen, X0, bounds=[(0.0, 0.9)] * 10)
    expected = so.minimize(so.rosen, X0, jac=so.rosen_der, bounds=[(0.0, 0.9)] * 10)
    assert bounded.success
    np.testing.assert_allclose(bounded.x, expected.x, atol=1e-5)

    total = {"type": "eq", "fun": lambda x: tnp.sum(x) - 9.0}
    constrained = minimize(rosen, X0, method="SLSQP", constraints=total)
    expected = so.minimize(so.rosen, X0, jac=so.rosen_der, method="SLSQP",
                           constraints={"type": "eq", "fun": lambda x: np.sum(x) - 9.0,
                                        "jac": lambda x: np.ones_like(x)})
    assert constrained.success
    assert constrained.x.sum() == pytest.approx(9.0)
    np.testing.assert_allclose(constrained.x, expected.x, atol=1e-4)


def test_methods_without_derivatives_get_the_value_only():
    result = minimize(lambda x: tnp.sum((x - 2.0) ** 2), np.zeros(3), method="Nelder-Mead")
    np.testing.assert_allclose(result.x, np.full(3, 2.0), atol=1e-3)


def test_derivative_arguments_are_refused():
    with pytest.raises(InvalidArgumentError, match="jac= is computed by tracegrad"):
        minimize(rosen, X0, jac=so.rosen_der)
    with pytest.raises(InvalidArgumentError, match="hessp= is computed"):
        minimize(rosen, X0, method="trust-ncg", hessp=so.rosen_hess_prod)


def test_least_squares_with_a_compiled_jacobian():
    t = np.linspace(0.0, 2.0, 30)
    y = 2.0 * np.exp(-1.5 * t) + 0.5

    def residuals(p, t, y):
        return p["amplitude"] * tnp.exp(-p["rate"] * t) + p["offset"] - y

    x0 = {"amplitude": 1.0, "rate": 0.5, "offset": 0.0}
    result = least_squares(residuals, x0, args=(t, y))
    assert result.success
    assert result.x["amplitude"] == pytest.approx(2.0, abs=1e-8)
    assert result.x["rate"] == pytest.approx(1.5, abs=1e-8)
    assert result.x["offset"] == pytest.approx(0.5, abs=1e-8)

    def numpy_residuals(v):
        return v[0] * np.exp(-v[2] * t) + v[1] - y  # ravel order: amplitude, offset, rate

    finite = so.least_squares(numpy_residuals, np.array([1.0, 0.0, 0.5]))
    np.testing.assert_allclose(finite.x, [2.0, 0.5, 1.5], atol=1e-6)
    assert result.nfev <= finite.nfev
    analytic = np.stack([np.exp(-1.5 * t), np.ones_like(t), -2.0 * t * np.exp(-1.5 * t)], 1)
    np.testing.assert_allclose(result.jac, analytic, atol=1e-6)


def test_integer_x0_is_optimized_as_floats_and_globals_are_read_per_fit():
    result = minimize(lambda x: tnp.sum((x - 1.5) ** 2), np.array([0, 0]))
    np.testing.assert_allclose(result.x, [1.5, 1.5], atol=1e-6)
    assert result.x.dtype == np.float64

    target = {"value": np.array([1.0, 2.0])}

    def loss(x):
        return tnp.sum((x - target["value"]) ** 2)

    np.testing.assert_allclose(minimize(loss, np.zeros(2)).x, [1.0, 2.0], atol=1e-6)
    target["value"] = np.array([5.0, 6.0])
    np.testing.assert_allclose(minimize(loss, np.zeros(2)).x, [5.0, 6.0], atol=1e-6)
