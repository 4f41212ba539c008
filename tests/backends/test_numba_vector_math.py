"""The branch-free exp/log/tanh/sin/cos of generated kernels against libm, over every range.

The kernels call these instead of libm so that their loops vectorize; they must stay within
a few ulp of NumPy everywhere (huge arguments, subnormals, signed zeros, inf, NaN) and
keep the loops free of calls.
"""

import math
import re

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp

MAX_ULP = 4


def _ulp_error(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    both_nan = np.isnan(got) & np.isnan(want)
    same = (got == want) | both_nan
    with np.errstate(invalid="ignore"):
        err = np.abs(got - want) / np.spacing(np.abs(want))
    return np.where(same, 0.0, err)


def _compiled(name):
    op = getattr(tnp, name)
    return tg.function(lambda x: op(x), backend="numba")


def _wide_inputs(rng, n=40_000):
    """Finite doubles of every exponent and sign."""
    mant = rng.uniform(1.0, 2.0, n)
    expo = rng.integers(-1074, 1023, n)
    return np.ldexp(mant, expo) * rng.choice([-1.0, 1.0], n)


@pytest.mark.parametrize("name", ["sin", "cos"])
@pytest.mark.parametrize("scale", [1e-9, 1.0, 10.0, 1e3, 8e5, 1e7, 1e15, 1e300])
def test_sin_cos_within_a_few_ulp(name, scale):
    x = np.random.default_rng(7).uniform(-scale, scale, 50_000)
    got = np.asarray(_compiled(name)(x))
    assert _ulp_error(got, getattr(np, name)(x)).max() <= MAX_ULP


@pytest.mark.parametrize("name", ["sin", "cos"])
def test_sin_cos_every_exponent(name):
    x = _wide_inputs(np.random.default_rng(3))
    got = np.asarray(_compiled(name)(x))
    assert _ulp_error(got, getattr(np, name)(x)).max() <= MAX_ULP


@pytest.mark.parametrize("name", ["sin", "cos"])
def test_sin_cos_near_multiples_of_half_pi(name):
    # the results are tiny: the reduction must carry pi/2 far beyond double precision
    k = np.random.default_rng(5).integers(1, 10**12, 20_000).astype(np.float64)
    x = np.concatenate([k[:10_000] % 1000 * (np.pi / 2), k[10_000:] * (np.pi / 2)])
    want = np.array([getattr(math, name)(v) for v in x])
    got = np.asarray(_compiled(name)(x))
    assert _ulp_error(got, want).max() <= MAX_ULP


@pytest.mark.parametrize("name", ["sin", "cos", "exp", "log", "tanh"])
def test_special_values(name):
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -5e-324, 1e-300,
                  np.pi, -np.pi / 2, 823548.9, 823549.1, 1e300, -1e300, 1.7976931348623157e308,
                  709.78, 709.79, -745.1, -746.0, 20.0, -20.0])
    with np.errstate(all="ignore"):
        want = getattr(np, name)(x)
        got = np.asarray(_compiled(name)(x))
    assert _ulp_error(got, want).max() <= MAX_ULP
    np.testing.assert_array_equal(np.signbit(got[:2]), np.signbit(want[:2]))


@pytest.mark.parametrize("name", ["exp", "log", "tanh"])
def test_exp_log_tanh_every_exponent(name):
    x = _wide_inputs(np.random.default_rng(11))
    if name == "log":
        x = np.abs(x)
    if name == "exp":
        x = x[np.abs(x) < 745]
    with np.errstate(all="ignore"):
        got = np.asarray(_compiled(name)(x))
        want = getattr(np, name)(x)
    assert _ulp_error(got, want).max() <= MAX_ULP


def test_float32_sin_cos_round_from_float64():
    x = np.random.default_rng(2).uniform(-100, 100, 10_000).astype(np.float32)
    f = tg.function(lambda v: tnp.sin(v) * tnp.cos(v), backend="numba")
    want = (np.sin(x.astype(np.float64)).astype(np.float32)
            * np.cos(x.astype(np.float64)).astype(np.float32))
    got = np.asarray(f(x))
    assert got.dtype == np.float32
    np.testing.assert_array_max_ulp(got, want, maxulp=1)


def test_sin_cos_loop_has_no_calls():
    from tracegrad.backends.numba import helpers

    f = tg.function(lambda v: tnp.sin(v) * tnp.cos(v), backend="numba")
    graph = f.get_concrete_function(tg.TensorSpec([None], tnp.float64)).graph
    source = tg.compiled_source(graph)
    assert "_sin_v(" in source and "_cos_v(" in source
    assert "np.sin(" not in source and "np.cos(" not in source
    assert "_sincos_v" in helpers.SOURCE
    calls = re.findall(r"\bnp\.(sin|cos)\(", helpers.SOURCE)
    assert calls == []
