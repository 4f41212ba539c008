"""tracegrad.scipy.special's compositions against SciPy (the primitives are op-table rows,
tests/ops/optable_special.py): values on both backends, gradients vs central differences."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import scipy.special

import tracegrad as tg
import tracegrad.scipy.special as tsp
from tests.finite_diff import central_difference
from tracegrad.errors import InvalidArgumentError

R = np.random.default_rng(0)
X = R.uniform(0.3, 4.0, (3, 4))
Y = R.uniform(-2.0, 2.0, (3, 4))
B = R.uniform(-1.0, 2.0, (3, 4))

# name: (function of the arrays, SciPy's, arrays, differentiated argument)
CASES = {
    "logsumexp": (lambda a: tsp.logsumexp(a, axis=1), lambda a: scipy.special.logsumexp(a, 1),
                  (Y,), 0),
    "logsumexp_b": (lambda a, b: tsp.logsumexp(a, axis=(0, 1), b=b, keepdims=True),
                    lambda a, b: scipy.special.logsumexp(a, (0, 1), b=b, keepdims=True),
                    (Y, np.abs(B)), 0),
    "logsumexp_sign": (lambda a, b: tsp.logsumexp(a, axis=0, b=b, return_sign=True),
                       lambda a, b: scipy.special.logsumexp(a, 0, b=b, return_sign=True),
                       (Y, B), 0),
    "softmax": (tsp.softmax, scipy.special.softmax, (Y,), 0),
    "log_softmax": (lambda a: tsp.log_softmax(a, axis=0),
                    lambda a: scipy.special.log_softmax(a, axis=0), (Y,), 0),
    "polygamma": (tsp.polygamma, scipy.special.polygamma,
                  (np.array([[0], [1], [3]]), X), 1),
    "multigammaln": (lambda a: tsp.multigammaln(a, 3),
                     lambda a: scipy.special.multigammaln(a, 3), (X + 1.5,), 0),
    "xlogy": (tsp.xlogy, scipy.special.xlogy, (np.where(Y > 1, 0.0, Y), X), 1),
    "xlog1py": (tsp.xlog1py, scipy.special.xlog1py, (np.where(Y > 1, 0.0, Y), X - 0.2), 0),
    "xlogy_zeros": (tsp.xlogy, scipy.special.xlogy, (np.array([0.0, 0.0, 1.0, 0.0]),
                                                    np.array([0.0, np.inf, 0.0, 2.0])), None),
    "entr": (tsp.entr, scipy.special.entr, (X,), 0),
    "riemann_zeta": (tsp.zeta, scipy.special.zeta, (X + 1.2,), None),
}


def _reference(fn):
    """`fn` on the numpy backend (the derivative checks need no kernel compiles)."""
    return tg.function(fn, backend="numpy")


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("name", CASES)
def test_values_match_scipy(name, backend):
    fn, ref, args, _ = CASES[name]
    got = tg.function(fn, backend=backend)(*args)
    np.testing.assert_allclose(got, ref(*args), rtol=4e-15, atol=0,
                               err_msg="SciPy sums and normalises in another order")


@pytest.mark.parametrize("name", [n for n, c in CASES.items() if c[3] is not None])
def test_gradients_match_finite_differences(name):
    fn, _, args, i = CASES[name]

    def f(x):
        out = fn(*args[:i], x, *args[i + 1:])
        return out[0] if isinstance(out, tuple) else out

    got = tg.grad(_reference(lambda x: tg.numpy.sum(f(x))))(args[i])
    np.testing.assert_allclose(got, central_difference(f, args[i]), rtol=1e-6, atol=1e-8)


def test_eager_values_are_scipy():
    np.testing.assert_array_equal(tsp.gammaln(tg.constant(X)).numpy(), scipy.special.gammaln(X))
    assert tsp.gammaln(X).dtype == scipy.special.gammaln(X).dtype
    assert tsp.ndtri(np.float32(0.3)).dtype == np.float32
    assert tsp.gammaln(np.arange(1, 4)).dtype == np.float64


def test_gradient_of_i1e_at_zero_is_one_half():
    assert tg.grad(_reference(tsp.i1e))(0.0) == 0.5
    assert tg.grad(_reference(tsp.i1))(0.0) == 0.5


def test_vmap_of_logsumexp_matches_a_loop():
    got = tg.vmap(_reference(lambda a: tsp.logsumexp(a, b=np.abs(B[0]))))(Y)
    np.testing.assert_allclose(got, [scipy.special.logsumexp(y, b=np.abs(B[0])) for y in Y],
                               rtol=4e-16)


def test_jvp_of_log_ndtr_is_the_normal_density_over_its_cdf():
    x = np.linspace(-20, 4, 7)
    _, tangent = tg.jvp(_reference(tsp.log_ndtr), (x,), (np.ones_like(x),))
    density = np.exp(-x * x / 2) / np.sqrt(2 * np.pi)
    np.testing.assert_allclose(tangent, density / scipy.special.ndtr(x), rtol=1e-13)


def test_multigammaln_rejects_a_non_integer_dimension():
    with pytest.raises(InvalidArgumentError, match="multigammaln"):
        tsp.multigammaln(X, 1.5)


def test_log_ndtr_vector_helper_is_within_its_documented_ulps_of_scipy():
    # numba's branch-free helper (vecmath_special.py): 6 ulp below x = 1; above, SciPy rounds
    # x/sqrt(2) before erfc, an error of up to 2 x^2 ulp that the helper does not make
    x = np.concatenate([np.linspace(-40, 12, 20001), -np.logspace(-3, 8, 200),
                        [0.0, -0.0, np.inf, -np.inf, np.nan, 1e300, -1e300]])
    f = tg.function(tsp.log_ndtr, backend="numba")
    f(x)
    tg.wait_for_compiles()
    got, want = f(x), scipy.special.log_ndtr(x)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got[np.isinf(want)], want[np.isinf(want)])
    finite = np.isfinite(want) & (want != 0)
    ulp = np.abs(got - want)[finite] / np.spacing(np.abs(want[finite]))
    bound = np.where(x[finite] < 1, 6, 8 + 2 * x[finite] ** 2)
    assert np.all(ulp <= bound), f"{ulp.max()} ulp at x = {x[finite][np.argmax(ulp - bound)]}"


@pytest.mark.parametrize("name", ["ndtr", "erfc"])
def test_ndtr_and_erfc_vector_helpers_are_within_their_documented_ulps_of_scipy(name):
    # numba's branch-free helpers (vecmath_special.py) round as SciPy does: 16 ulp, and 4
    # steps of the smallest subnormal where the value is subnormal
    x = np.concatenate([np.linspace(-40, 40, 40001), np.logspace(-320, 8, 400),
                        -np.logspace(-320, 8, 400), [0.0, -0.0, np.inf, -np.inf, np.nan]])
    f = tg.function(getattr(tsp, name), backend="numba")
    f(x)
    tg.wait_for_compiles()
    got, want = f(x), getattr(scipy.special, name)(x)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    exact = np.isinf(x) | (want == 0)
    np.testing.assert_array_equal(got[exact], want[exact])
    ulp = np.abs(got - want) / np.maximum(np.spacing(np.abs(want)), 4 * np.spacing(0.0))
    assert np.nanmax(ulp) <= 16, f"{np.nanmax(ulp)} ulp at x = {x[np.nanargmax(ulp)]}"


def test_gammaln_vector_helper_is_within_its_documented_ulps_of_scipy():
    # numba's helper (vecmath_special.py) and SciPy reduce alike, so both lose relative
    # accuracy next to the zeros at 1 and 2: ulps of max(|gammaln(x)|, 1) for x > 0, and of
    # max(|gammaln(1 - x)|, 1) below (the reflection)
    r = np.random.default_rng(1)
    x = np.concatenate([np.linspace(1e-6, 30, 30001), np.logspace(-310, 306, 500),
                        -np.logspace(-300, 300, 500), r.uniform(-50, 0, 5000),
                        [0.0, -0.0, -1.0, -2.0, 1.0, 2.0, np.inf, -np.inf, np.nan, 13.0]])
    f = tg.function(tsp.gammaln, backend="numba")
    got, want = f(x), scipy.special.gammaln(x)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got[np.isinf(want)], want[np.isinf(want)])
    finite = np.isfinite(want)
    with np.errstate(all="ignore"):
        scale = np.where(x > 0, np.maximum(np.abs(want), 1),
                         np.maximum(np.abs(scipy.special.gammaln(1 - x)), 1))
    ulp = np.abs(got - want)[finite] / np.spacing(scale[finite])
    positive = x[finite] > 0
    assert ulp[positive].max() <= 8 and ulp[~positive].max() <= 32


def test_a_kernel_calling_scipy_compiled_functions_loads_from_the_disk_cache(tmp_path):
    # the external functions are bound (llvmlite's add_symbol) before the kernel is loaded
    script = (
        "import numpy as np, scipy.special as ss, tracegrad as tg\n"
        "from tracegrad.scipy import special as sp\n"
        "from tracegrad.backends.numba import cache\n"
        "f = tg.function(lambda a, x: sp.gammainc(a, x) + sp.digamma(x), backend='numba')\n"
        "a, x = np.array([1.5, 2.0]), np.array([0.5, 3.0])\n"
        "assert np.array_equal(f(a, x), ss.gammainc(a, x) + ss.psi(x))\n"
        "print(cache.STATS['compiled'], cache.STATS['disk_hits'])\n")
    env = dict(os.environ, TRACEGRAD_CACHE_DIR=str(tmp_path), TRACEGRAD_BACKGROUND_COMPILE="0")
    runs = [subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                           text=True, check=True).stdout.split() for _ in range(2)]
    assert runs == [["1", "0"], ["0", "1"]]
