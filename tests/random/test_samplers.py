"""The samplers of tracegrad.random: moments within 5 standard errors at n = 10**5 (the
standard errors estimated from the sample), traced and eager and vmapped samples equal,
reparameterized and implicit gradients."""

import math

import numpy as np
import pytest
import scipy.special as sc
import scipy.stats as st

import tracegrad as tg
import tracegrad.numpy as tnp
from tests.finite_diff import central_difference
from tracegrad import random as tr
from tracegrad.scipy import special as tsp

# Functions run on the numpy backend unless a test names the numba backend.
pytestmark = pytest.mark.usefixtures("numpy_backend")

N = 10**5
K = tr.key(20261126)


def assert_moments(x, mean, var=None):
    """The sample mean (and variance) of `x` (along axis 0) within 5 standard errors."""
    x = np.asarray(x, np.float64)
    n = x.shape[0]
    m = x.mean(0)
    assert np.all(np.abs(m - mean) <= 5 * x.std(0) / math.sqrt(n)), (m, mean)
    if var is not None:
        d2 = (x - m) ** 2
        assert np.all(np.abs(d2.mean(0) - var) <= 5 * d2.std(0) / math.sqrt(n)), (d2.mean(0), var)


@pytest.mark.parametrize("dtype", [np.uint32, np.uint64, np.uint8])
def test_bits_moments(dtype):
    b = tr.bits(K, (N,), dtype)
    assert b.dtype == dtype
    top = float(np.iinfo(dtype).max) + 1.0
    assert_moments(b.astype(np.float64) / top, 0.5 - 0.5 / top, (1 - 1 / top**2) / 12)
    width = np.iinfo(dtype).bits
    each = (b[:, None] >> np.arange(width, dtype=dtype)) & dtype(1)  # every bit is fair
    assert_moments(each, np.full(width, 0.5), np.full(width, 0.25))


def test_uniform_moments_and_range():
    x = tr.uniform(K, (N,), minval=-1.0, maxval=3.0)
    assert x.dtype == np.float64 and x.min() >= -1.0 and x.max() < 3.0
    assert_moments(x, 1.0, 16 / 12)
    assert tr.uniform(K, (N,), np.float32).dtype == np.float32


def test_normal_moments_and_tails():
    x = tr.normal(K, (N,))
    assert_moments(x, 0.0, 1.0)
    assert_moments(x**3, 0.0)  # skewness
    assert_moments(x**4, 3.0)  # kurtosis
    for q in (0.001, 0.02, 0.5, 0.9):  # the CDF at a few quantiles
        p = np.mean(x <= st.norm.ppf(q))
        assert abs(p - q) <= 5 * math.sqrt(q * (1 - q) / N)
    assert tr.normal(K, (3, 4), np.float32).dtype == np.float32


def test_the_normal_quantile_is_scipys():
    u = np.concatenate([np.geomspace(2.0**-53, 0.5, 500), 1 - np.geomspace(2.0**-53, 0.5, 500)])
    np.testing.assert_allclose(tr._ndtri(u), sc.ndtri(u), rtol=2e-15, atol=1e-15)


def test_bernoulli_and_exponential():
    b = tr.bernoulli(K, 0.3, (N,))
    assert b.dtype == np.bool_
    assert_moments(b, 0.3, 0.21)
    assert tr.bernoulli(K, np.array([0.0, 1.0])).tolist() == [False, True]
    e = tr.exponential(K, (N,))
    assert e.min() >= 0
    assert_moments(e, 1.0, 1.0)


def test_categorical_frequencies():
    p = np.array([0.2, 0.3, 0.5])
    c = tr.categorical(K, np.log(p), shape=(N,))
    assert c.dtype == np.int64 and set(np.unique(c)) == {0, 1, 2}
    assert_moments(np.eye(3)[c], p, p * (1 - p))
    logits = np.log(np.array([[0.9, 0.1], [0.1, 0.9]]))  # a batch, along axis 0
    c = tr.categorical(K, logits, axis=0, shape=(N, 2))
    assert_moments(c, [0.1, 0.9])


def test_randint_range_and_moments():
    r = tr.randint(K, (N,), -3, 7)
    assert r.dtype == np.int64 and r.min() == -3 and r.max() == 6
    assert_moments(r, 1.5, (10**2 - 1) / 12)
    assert tr.randint(K, (5,), 2, 2).tolist() == [2] * 5
    assert tr.randint(K, (4,), 0, 300, np.uint8).dtype == np.uint8
    assert tr.randint(K, (N,), 0, 300, np.uint8).max() == 255  # maxval clipped to the dtype


def test_permutation_and_choice():
    perms = tg.vmap(lambda k: tr.permutation(k, 5))(tr.split(K, N))
    assert (np.sort(perms, axis=1) == np.arange(5)).all()
    assert_moments(np.eye(5)[perms[:, 0]], np.full(5, 0.2), np.full(5, 0.16))
    x = np.arange(12.0).reshape(3, 4)
    assert (np.sort(tr.permutation(K, x, axis=1), axis=1) == x).all()
    y = tr.permutation(K, x, axis=1, independent=True)
    assert (np.sort(y, axis=1) == x).all()
    p = np.array([0.1, 0.2, 0.3, 0.4])
    c = tr.choice(K, np.arange(4.0) * 10, (N,), p=p)
    assert_moments(np.eye(4)[(c / 10).astype(int)], p, p * (1 - p))
    c = tr.choice(K, 7, (N,))
    assert_moments(c, 3.0, 4.0)
    without = tg.vmap(lambda k: tr.choice(k, 4, (2,), replace=False, p=p))(tr.split(K, N))
    assert (without[:, 0] != without[:, 1]).all()
    assert_moments(np.eye(4)[without[:, 0]], p, p * (1 - p))  # the first draw: p
    assert len(set(tr.choice(K, 10, (10,), replace=False).tolist())) == 10


def test_truncated_normal_moments():
    for lo, hi in ((-1.0, 2.0), (3.0, 4.0), (-np.inf, -2.0)):
        x = tr.truncated_normal(K, lo, hi, (N,))
        assert x.min() >= lo and x.max() <= hi
        d = st.truncnorm(lo, hi)
        assert_moments(x, d.mean(), d.var())


def test_multivariate_normal_moments():
    mean = np.array([1.0, -1.0, 0.5])
    a = np.array([[2.0, 0.3, 0.0], [0.3, 1.0, -0.4], [0.0, -0.4, 0.7]])
    for method in ("cholesky", "eigh", "svd"):
        x = tr.multivariate_normal(K, mean, a, (N,), method=method)
        assert x.shape == (N, 3)
        assert_moments(x, mean, np.diag(a))
        c = (x - mean)[:, :, None] * (x - mean)[:, None, :]
        assert_moments(c.reshape(N, 9), a.ravel())


@pytest.mark.parametrize("a", [0.3, 1.0, 4.5])
def test_gamma_moments(a):
    x = tr.gamma(K, a, (N,))
    assert x.min() > 0
    assert_moments(x, a, a)


def test_beta_and_dirichlet_moments():
    x = tr.beta(K, 2.0, 3.0, (N,))
    assert_moments(x, 0.4, 0.04)
    alpha = np.array([0.5, 2.0, 3.5])
    d = tr.dirichlet(K, alpha, (N,))
    assert d.shape == (N, 3)
    np.testing.assert_allclose(d.sum(1), 1.0, rtol=1e-15)
    m = alpha / alpha.sum()
    assert_moments(d, m, m * (1 - m) / (alpha.sum() + 1))


# -- traced, eager, vmapped -------------------------------------------------------------------

SAMPLERS = {
    "bits": lambda k: tr.bits(k, (3, 4)),
    "uniform": lambda k: tr.uniform(k, (5,), minval=-2.0, maxval=1.0),
    "normal": lambda k: tr.normal(k, (2, 3)),
    "normal_f32": lambda k: tr.normal(k, (7,), np.float32),
    "bernoulli": lambda k: tr.bernoulli(k, 0.4, (6,)),
    "exponential": lambda k: tr.exponential(k, (4,)),
    "categorical": lambda k: tr.categorical(k, np.array([0.1, 2.0, -1.0]), shape=(8,)),
    "randint": lambda k: tr.randint(k, (9,), -5, 100),
    "permutation": lambda k: tr.permutation(k, np.arange(6.0)),
    "choice": lambda k: tr.choice(k, 9, (4,), replace=False),
    "choice_p": lambda k: tr.choice(k, 3, (5,), p=np.array([0.5, 0.25, 0.25])),
    "truncated_normal": lambda k: tr.truncated_normal(k, -0.5, 1.5, (5,)),
    "multivariate_normal": lambda k: tr.multivariate_normal(
        k, np.zeros(2), np.array([[1.0, 0.5], [0.5, 2.0]]), (3,)),
    "gamma": lambda k: tr.gamma(k, np.array([0.4, 1.0, 7.0])),
    "beta": lambda k: tr.beta(k, 2.0, np.array([0.5, 3.0])),
    "dirichlet": lambda k: tr.dirichlet(k, np.array([1.0, 2.0, 0.3]), (2,)),
    "split": lambda k: tr.split(k, 3),
    "fold_in": lambda k: tr.fold_in(k, 12345),
}


@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_traced_equals_eager_and_vmap_equals_a_loop(name):
    fn = SAMPLERS[name]
    eager = fn(K)
    np.testing.assert_array_equal(tg.function(fn, backend="numpy")(K), eager)
    on_tensor = fn(tg.constant(K))
    assert isinstance(on_tensor, tg.Tensor)
    np.testing.assert_array_equal(on_tensor, eager)
    keys = tr.split(tr.key(5), 3)
    batched = tg.function(tg.vmap(fn), backend="numpy")(keys)
    np.testing.assert_array_equal(batched, np.stack([fn(k) for k in keys]))


@pytest.mark.parametrize("name", ["bits", "uniform", "categorical", "randint", "split"])
def test_numba_gives_the_numpy_backends_bits(name):
    fn = SAMPLERS[name]
    np.testing.assert_array_equal(tg.function(fn, backend="numba")(K), fn(K))


def test_a_sample_is_drawn_in_a_flat_loop_of_its_own():
    # in its consumers' nest, a row sum over a dim of 2, it would not vectorize: the
    # sampler's counter is the index of one loop (the ELBO benchmark, docs/performance.md)
    f = tg.function(lambda k, x: tnp.sum(x * tr.normal(k, (256, 2)), axis=1), backend="numba")
    src = tg.compiled_source(f.get_concrete_function(K, np.ones((256, 2))).graph)
    (call,) = [line for line in src.splitlines() if "_threefry2x32(" in line]
    assert call.startswith(" " * 8 + "v") and call.rstrip().endswith("np.uint32(i1))"), call
    x = np.linspace(0.0, 1.0, 512).reshape(256, 2)
    np.testing.assert_allclose(f(K, x), np.sum(x * np.asarray(tr.normal(K, (256, 2))), axis=1),
                               rtol=1e-14)


# why: the numba backend's vector-math log/exp/sqrt are within a few ulp of NumPy's
# (docs/numba.md), so samplers computed through them agree to rounding, not bit for bit;
# gamma's exp of a log-space sum (log d + log v + log(u) / a) scales an ulp of the sum by
# |log x| (up to ~8 for these samples): 16 ulp.
FLOAT_RTOL = {"normal": 4 * np.finfo(np.float64).eps, "gamma": 16 * np.finfo(np.float64).eps}


@pytest.mark.parametrize("name", ["normal", "gamma"])
def test_numba_float_samplers_agree_with_the_numpy_backend(name):
    fn = tg.vmap(SAMPLERS[name])
    keys = tr.split(K, 200)
    np.testing.assert_allclose(tg.function(fn, backend="numba")(keys), fn(keys),
                               rtol=FLOAT_RTOL[name], atol=1e-300)


# -- gradients -----------------------------------------------------------------------------------


def test_reparameterized_normal_gradients_are_central_differences():
    def f(theta):
        return tnp.sum(tnp.sin(theta[0] + theta[1] * tr.normal(K, (50,))))

    theta = np.array([0.3, 1.7])
    np.testing.assert_allclose(tg.grad(f)(theta), central_difference(f, theta), rtol=1e-7)


def test_gamma_gradient_is_the_implicit_one():
    """d x / d a at a fixed CDF value: the derivative of scipy's gammaincinv(a, P(a, x))."""
    a = np.array([0.05, 0.3, 1.0, 1.0, 2.5, 8.0, 40.0, 300.0])
    a = np.repeat(a, 4)
    x = tr.gamma(K, a)
    grad = tg.grad(lambda a: tnp.sum(tr.gamma(K, a)))(a)
    p = sc.gammainc(a, x)
    h = 1e-5 * a
    want = (sc.gammaincinv(a + h, p) - sc.gammaincinv(a - h, p)) / (2 * h)
    np.testing.assert_allclose(grad, want, rtol=2e-5)


@pytest.mark.parametrize("a,x", [(0.3, 1e-3), (0.3, 3.0), (2.0, 0.5), (2.0, 9.0),
                                 (30.0, 26.0), (30.0, 48.0), (1000.0, 1100.0)])
def test_gamma_dx_da_in_each_region(a, x):
    got = x * float(tr._gamma_dlogx_da(np.array([a]), np.log(np.array([x])))[0])
    p, h = sc.gammainc(a, x), 1e-5 * a
    want = (sc.gammaincinv(a + h, p) - sc.gammaincinv(a - h, p)) / (2 * h)
    assert got == pytest.approx(want, rel=1e-5)
    # the same implicit derivative as gammainc's gradient in a: -(dP/da) / p(x; a)
    dp_da = tg.grad(lambda a: tsp.gammainc(a, x))(a)
    assert got == pytest.approx(-dp_da / st.gamma.pdf(x, a), rel=1e-10)


def test_beta_and_dirichlet_gradients_are_unbiased():
    """The mean of per-sample gradients is the gradient of the mean, within 5 standard errors."""
    n = 20000
    per_sample = tg.grad(lambda a: tnp.sum(tr.beta(K, a, 3.0)))(np.full(n, 2.0))
    assert abs(per_sample.mean() - 3 / 25) <= 5 * per_sample.std() / math.sqrt(n)
    alpha = np.array([1.0, 2.0, 3.0])
    per_sample = tg.jacobian(lambda al: tr.dirichlet(K, al, (n,))[:, 0])(alpha)
    want = np.array([5 / 36, -1 / 36, -1 / 36])
    assert np.all(np.abs(per_sample.mean(0) - want) <= 5 * per_sample.std(0) / math.sqrt(n))


def test_gamma_gradient_compiles_and_vmaps():
    f = tg.grad(lambda a, k: tnp.sum(tr.gamma(k, a, (6,))))
    want = f(2.5, K)
    np.testing.assert_allclose(tg.function(f, backend="numba")(2.5, K), want, rtol=1e-13)
    keys = tr.split(K, 3)
    np.testing.assert_allclose(tg.vmap(f, in_axes=(None, 0))(2.5, keys),
                               [f(2.5, k) for k in keys], rtol=1e-13)


def test_truncated_and_multivariate_normal_gradients_are_central_differences():
    def tn(b):
        return tnp.sum(tr.truncated_normal(K, b[0], b[1], (20,)) ** 2)

    b = np.array([-0.7, 1.2])
    np.testing.assert_allclose(tg.grad(tn)(b), central_difference(tn, b), rtol=1e-6)

    def mvn(m):
        cov = m[:4].reshape(2, 2) @ m[:4].reshape(2, 2).T + np.eye(2)
        return tnp.sum(tnp.sin(tr.multivariate_normal(K, m[4:], cov, (10,))))

    m = np.array([1.0, 0.2, -0.3, 0.8, 0.5, -1.0])
    np.testing.assert_allclose(tg.grad(mvn)(m), central_difference(mvn, m), rtol=1e-6)


def test_gamma_gradients_stay_finite_where_samples_underflow():
    """For a tiny `a` many samples underflow to 0; their log is finite, and so are the
    gradients (the log-space tangent's limit, times 0)."""
    a = np.full(64, 0.002)
    x = tr.gamma(K, a)
    assert (x == 0).any()
    assert np.isfinite(tg.grad(lambda a: tnp.sum(tr.gamma(K, a)))(a)).all()
    assert np.isfinite(tg.grad(lambda a: tnp.sum(tr.beta(K, a, 0.002)))(a)).all()
    assert np.isfinite(tg.grad(lambda al: tnp.sum(tr.dirichlet(K, al)[0]))(a[:3])).all()
