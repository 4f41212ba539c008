"""tracegrad.nn: values at the extremes (no overflow, no NaN for |x| ~ 1000), gradients there,
and the documented edge cases."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.special

import tracegrad as tg
import tracegrad.numpy as tnp
from tracegrad import nn

EXTREME = np.array([-1000.0, -745.0, -50.0, 0.0, 50.0, 745.0, 1000.0])


@pytest.mark.parametrize("name", ["sigmoid", "log_sigmoid", "softplus", "elu", "gelu", "relu",
                                  "softmax", "log_softmax", "logsumexp"])
def test_no_overflow_warning_nan_or_inf_at_extremes(name):
    fn = getattr(nn, name)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        eager = fn(tg.constant(EXTREME))
        traced = tg.function(fn, backend="numpy")(EXTREME)
        grad = tg.grad(lambda x: tnp.sum(fn(x)))(EXTREME)
    out = np.asarray(eager)
    np.testing.assert_array_equal(np.asarray(traced), out)
    assert not np.any(np.isnan(out))
    assert np.all(np.isfinite(grad)), grad
    if name not in ("softplus", "relu", "elu", "gelu"):
        assert np.all(np.isfinite(out)) or name in ("log_sigmoid", "log_softmax")


def test_tails_are_exact():
    assert nn.sigmoid(-1000.0) == 0.0 and nn.sigmoid(1000.0) == 1.0
    assert nn.sigmoid(-700.0) == scipy.special.expit(-700.0)
    assert nn.log_sigmoid(-1000.0) == -1000.0
    assert nn.softplus(1000.0) == 1000.0
    assert nn.softplus(-40.0) == np.log1p(np.exp(-40.0))
    assert nn.logsumexp(np.array([1000.0, 1000.0])) == 1000.0 + np.log(2.0)


def test_gradients_at_the_tails():
    np.testing.assert_allclose(tg.grad(lambda x: nn.softplus(x))(1000.0), 1.0)
    np.testing.assert_allclose(tg.grad(lambda x: nn.softplus(x))(-1000.0), 0.0)
    np.testing.assert_allclose(tg.grad(lambda x: nn.log_sigmoid(x))(-1000.0), 1.0)
    g = tg.grad(lambda x: nn.logsumexp(x))(np.array([1000.0, 0.0, 1000.0]))
    np.testing.assert_allclose(g, [0.5, 0.0, 0.5])


def test_logsumexp_of_infinities():
    x = np.array([[-np.inf, -np.inf], [np.inf, 0.0], [np.nan, 0.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = np.asarray(nn.logsumexp(tg.constant(x), axis=1))
        want = scipy.special.logsumexp(x, axis=1)
    np.testing.assert_array_equal(got, want)


def test_softmax_rows_sum_to_one_and_mask_with_minus_inf():
    x = np.array([[1.0, -np.inf, 3.0], [1000.0, 999.0, -1000.0]])
    p = nn.softmax(tg.constant(x)).numpy()
    np.testing.assert_allclose(p.sum(axis=-1), 1.0)
    assert p[0, 1] == 0.0


def test_gelu_matches_its_definitions():
    x = np.linspace(-5, 5, 11)
    # x * (1 + erf(x / sqrt 2)) / 2 is exact to rounding in absolute terms; in the far left
    # tail the relative error grows as 1 + erf cancels (the value is below 1e-5 there).
    np.testing.assert_allclose(nn.gelu(x), x * scipy.special.ndtr(x), rtol=1e-15, atol=1e-16)
    approx = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
    np.testing.assert_allclose(nn.gelu(x, approximate=True), approx, rtol=1e-15)


def test_one_hot():
    out = nn.one_hot(tg.constant([0, 2, -1, 3]), 3)
    assert out.dtype == np.float64 and out.shape == (4, 3)
    np.testing.assert_array_equal(out.numpy(), [[1, 0, 0], [0, 0, 1], [0, 0, 0], [0, 0, 0]])
    with pytest.raises(TypeError, match="integers"):
        nn.one_hot(np.array([0.5]), 2)
    traced = tg.function(lambda l: nn.one_hot(l, 4, dtype="float32"), backend="numpy")
    assert traced(np.array([[1], [3]])).dtype == np.float32


def test_integer_input_computes_in_float64():
    for name in ("sigmoid", "softplus", "gelu", "softmax", "logsumexp"):
        assert np.asarray(getattr(nn, name)(np.array([1, 2]))).dtype == np.float64
    assert nn.relu(np.array([-1, 2], np.int32)).dtype == np.int32


def test_relu_derivative_is_zero_at_zero_and_nan_propagates():
    x = np.array([-1.0, 0.0, 2.0, np.nan, -np.inf])
    np.testing.assert_array_equal(nn.relu(x), [0.0, 0.0, 2.0, np.nan, 0.0])
    g = tg.grad(lambda v: tnp.sum(nn.relu(v)))(np.array([-1.0, 0.0, 2.0]))
    np.testing.assert_array_equal(g, [0.0, 0.0, 1.0])


def test_softplus_and_log_sigmoid_have_exact_higher_derivatives_at_zero_and_far_out():
    import tracegrad as tg
    import tracegrad.numpy as tnp
    from tracegrad import nn

    x = np.array([0.0, -0.0, 1e-300, 30.0, -30.0, 800.0, -800.0])
    np.testing.assert_allclose(nn.softplus(x), np.logaddexp(x, 0.0), rtol=1e-15)
    from scipy.special import expit

    s = expit(x)
    np.testing.assert_allclose(tg.grad(lambda v: tnp.sum(nn.softplus(v)))(x), s, rtol=1e-15)
    hessian = tg.hessian(lambda v: tnp.sum(nn.softplus(v)))(x)
    np.testing.assert_allclose(np.diag(hessian), s * expit(-x), rtol=1e-13, atol=1e-300)
    assert np.all(np.isfinite(hessian))
    h0 = tg.hessian(lambda v: tnp.sum(nn.log_sigmoid(v)))(np.zeros(2))
    np.testing.assert_allclose(h0, -0.25 * np.eye(2))
