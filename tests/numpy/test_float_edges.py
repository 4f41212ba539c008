"""Functions of a float's exponent and sign at the edges of the range, bit for bit with
NumPy (signed zeros included, which the op table's equality does not tell apart): frexp,
ldexp, modf, nan_to_num, on both backends, and the gradients of frexp and ldexp."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp

SHIFTS = (0, 1, -1, 150, -150, 270, -270, 1074, -1074, 1100, -1100, 2000, -2000, 3000, -3000)


def _edges(dtype):
    fi = np.finfo(dtype)
    return np.array([fi.max, -fi.max, 0.9 * fi.max, fi.tiny, fi.tiny / 2, fi.smallest_subnormal,
                     -fi.smallest_subnormal, 0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, 0.75, -3.5,
                     -2.0, 123.456], dtype)


def _assert_bits(got, want):
    for g, w in zip(got if isinstance(got, tuple) else (got,),
                    want if isinstance(want, tuple) else (want,), strict=True):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype, (g.dtype, w.dtype)
        np.testing.assert_array_equal(g, w)
        np.testing.assert_array_equal(np.signbit(g), np.signbit(w))


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        yield


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_frexp_and_modf_at_the_edges(dtype, backend):
    x = _edges(dtype)
    _assert_bits(tg.function(tnp.frexp)(x), np.frexp(x))
    _assert_bits(tg.function(tnp.modf)(x), np.modf(x))
    _assert_bits(tnp.modf(x), np.modf(x))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_ldexp_never_overflows_on_the_way(dtype, backend):
    x = _edges(dtype)
    f = tg.function(tnp.ldexp)
    for n in SHIFTS:
        shifts = np.full(x.shape, n, np.int32)
        _assert_bits(f(x, shifts), np.ldexp(x, shifts))


def test_ldexp_and_frexp_of_random_magnitudes(backend):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(2000) * 10.0 ** rng.integers(-300, 300, 2000)
    n = rng.integers(-700, 700, 2000).astype(np.int32)
    _assert_bits(tg.function(tnp.ldexp)(x, n), np.ldexp(x, n))
    _assert_bits(tg.function(tnp.frexp)(x), np.frexp(x))


def test_nan_to_num_replaces_by_the_original_values():
    x = np.array([np.nan, np.inf, -np.inf, 1.0])
    _assert_bits(tnp.nan_to_num(x, nan=np.inf), np.nan_to_num(x, nan=np.inf))
    _assert_bits(tnp.nan_to_num(x, nan=-np.inf, posinf=np.nan),
                 np.nan_to_num(x, nan=-np.inf, posinf=np.nan))


def test_gradients_of_ldexp_and_frexp(backend):
    x = np.array([1.5, -6.0, 1e-310])
    g = tg.function(tg.grad(lambda v: tnp.sum(tnp.ldexp(v, np.array([3, -2, 40], np.int32)))))
    np.testing.assert_array_equal(g(x), [8.0, 0.25, 2.0 ** 40])
    g = tg.function(tg.grad(lambda v: tnp.sum(tnp.frexp(v)[0])))
    np.testing.assert_array_equal(g(x), 1.0 / np.ldexp(1.0, np.frexp(x)[1]))
