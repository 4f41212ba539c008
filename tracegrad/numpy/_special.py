"""Integer and bit-level elementwise functions and a Bessel function: gcd, lcm, nextafter,
spacing, i0 and the kaiser window that uses it.

`gcd` is the one primitive here (Euclid's loop runs a value-dependent number of steps);
`lcm` is `|a // gcd(a, b) * b|`. `nextafter` and `spacing` step by one unit in the last
place, computed from `frexp`'s exponent as an exact power of two, so they give NumPy's bits
(zeros, infinities, NaN and subnormals included). `i0` is NumPy's Chebyshev expansion, run
in the input's float dtype as NumPy runs it; its gradient is `sign(x) i1(|x|)`, with `i1`
its power series up to 8 and the derivative of i0's expansion beyond (a few ulps).
"""

from __future__ import annotations

import math

import numpy as np

from tracegrad import ops
from tracegrad.core import dtypes
from tracegrad.errors import DTypeError, InvalidArgumentError
from tracegrad.numpy._core import dtype_of, is_tensor, read, tracing, ufunc_operands
from tracegrad.numpy._creation import astype
from tracegrad.numpy._eager import ufunc_function
from tracegrad.numpy._elementwise import _pow2, frexp
from tracegrad.numpy._ufuncs import (
    abs,
    add,
    equal,
    exp,
    floor_divide,
    greater,
    isnan,
    less,
    less_equal,
    logical_and,
    logical_or,
    maximum,
    multiply,
    negative,
    not_equal,
    sign,
    sqrt,
    subtract,
    true_divide,
    where,
)

gcd = ufunc_function(
    np.gcd, ops.gcd_p, "gcd",
    "Elementwise greatest common divisor of `|x1|` and `|x2|` (integers; 0 for two zeros).",
)


def lcm(x1, x2):
    """Elementwise least common multiple of `|x1|` and `|x2|` (integers; 0 if either is 0)."""
    (a, b), out = ufunc_operands(np.lcm, "lcm", x1, x2)
    g = ops.gcd(a, b)
    safe = where(equal(g, 0), np.asarray(1, out), g)  # g == 0 only where a == b == 0
    return abs(multiply(floor_divide(a, safe), b))


# -- one unit in the last place ---------------------------------------------------------------


def _step(ax, shrink, dtype):
    """The distance from `|x|` = `ax` (finite) to the next float away from zero, or towards
    it where `shrink`: a power of two from frexp's exponent (subnormals: the smallest)."""
    info = np.finfo(dtype)
    m, e = frexp(ax)
    k = astype(e, dtypes.float64) - float(info.nmant + 1)
    k = where(logical_and(shrink, equal(m, 0.5)), subtract(k, 1.0), k)
    smallest = float(info.minexp - info.nmant)
    return _pow2(where(equal(m, 0), smallest, maximum(k, smallest)), dtype)


def nextafter(x1, x2):
    """Elementwise the next float after `x1` in the direction of `x2` (`x2` where they are
    equal; float64 for integers)."""
    (x, y), out = ufunc_operands(np.nextafter, "nextafter", x1, x2)
    up = less(x, y)
    finite = less(abs(x), np.inf)
    ax = where(finite, abs(x), 1.0)
    shrink = not_equal(up, greater(x, 0))  # towards zero (at 0 the step is the smallest)
    step = _step(ax, shrink, out)
    moved = add(x, where(up, step, negative(step)))
    moved = where(equal(moved, 0), multiply(x, 0.0), moved)  # -0.0 from below
    biggest = np.asarray(np.finfo(out).max, out)
    moved = where(finite, moved, where(less(x, 0), -biggest, biggest))
    nan = logical_or(isnan(x), isnan(y))
    return where(equal(x, y), y, where(nan, np.asarray(np.nan, out), moved))


def spacing(x):
    """Elementwise the distance from `x` to the next float away from zero, with `x`'s sign
    (the smallest subnormal for either zero, NaN for infinities; float64 for integers); for
    float16, as NumPy's, the distance to the next float towards zero below zero, unsigned."""
    (x,), out = ufunc_operands(np.spacing, "spacing", x)
    ax = abs(x)
    finite = less(ax, np.inf)
    safe = where(finite, ax, 1.0)
    up = subtract(add(safe, _step(safe, False, out)), safe)  # inf beyond the largest float
    nan = np.asarray(np.nan, out)
    if out == np.float16:  # NumPy's half spacing is a magnitude, towards zero below zero
        return where(finite, where(less(x, 0), _step(safe, True, out), up), nan)
    return where(finite, where(less(x, 0), negative(up), up), nan)


# -- the modified Bessel function of order 0 --------------------------------------------------

# Chebyshev coefficients of exp(-x) i0(x) on [0, 8] and of exp(-x) sqrt(x) i0(x) on (8, inf)
# (Cephes, as NumPy's i0 uses them).
_I0_SMALL = (
    -4.4153416464793395e-18, 3.3307945188222384e-17, -2.431279846547955e-16,
    1.715391285555133e-15, -1.1685332877993451e-14, 7.676185498604936e-14,
    -4.856446783111929e-13, 2.95505266312964e-12, -1.726826291441556e-11,
    9.675809035373237e-11, -5.189795601635263e-10, 2.6598237246823866e-09,
    -1.300025009986248e-08, 6.046995022541919e-08, -2.670793853940612e-07,
    1.1173875391201037e-06, -4.4167383584587505e-06, 1.6448448070728896e-05,
    -5.754195010082104e-05, 0.00018850288509584165, -0.0005763755745385824,
    0.0016394756169413357, -0.004324309995050576, 0.010546460394594998, -0.02373741480589947,
    0.04930528423967071, -0.09490109704804764, 0.17162090152220877, -0.3046826723431984,
    0.6767952744094761,
)
_I0_LARGE = (
    -7.233180487874754e-18, -4.830504485944182e-18, 4.46562142029676e-17,
    3.461222867697461e-17, -2.8276239805165836e-16, -3.425485619677219e-16,
    1.7725601330565263e-15, 3.8116806693526224e-15, -9.554846698828307e-15,
    -4.150569347287222e-14, 1.54008621752141e-14, 3.8527783827421426e-13,
    7.180124451383666e-13, -1.7941785315068062e-12, -1.3215811840447713e-11,
    -3.1499165279632416e-11, 1.1889147107846439e-11, 4.94060238822497e-10,
    3.3962320257083865e-09, 2.266668990498178e-08, 2.0489185894690638e-07,
    2.8913705208347567e-06, 6.889758346916825e-05, 0.0033691164782556943, 0.8044904110141088,
)


def _chebyshev(t, coefficients):
    """The Chebyshev series at `t` by Clenshaw's recurrence, in NumPy's order of operations."""
    b0, b1, b2 = coefficients[0], 0.0, 0.0
    for c in coefficients[1:]:
        b2, b1 = b1, b0
        b0 = add(subtract(multiply(t, b1), b2), c)
    return multiply(0.5, subtract(b0, b2))


def _i0_derivative_coefficients(coefficients):
    """Clenshaw coefficients of the derivative (in `t`) of the series `coefficients`."""
    a = list(coefficients[::-1])  # NumPy's Chebyshev basis in t / 2, halved first term
    a[0] /= 2
    da = list(np.polynomial.chebyshev.chebder(a) / 2)
    da[0] *= 2
    return tuple(float(c) for c in da[::-1])


_I0_LARGE_DERIVATIVE = _i0_derivative_coefficients(_I0_LARGE)
# I1(x) = x/2 sum_k (x^2/4)^k / (k! (k+1)!): positive terms, 23 of them reach 1e-17 at x = 8
_I1_SERIES = tuple(1.0 / (math.factorial(k) * math.factorial(k + 1)) for k in range(22, -1, -1))


def _i0_value(x):
    """i0 of `x` >= 0 (NumPy's expansion, each branch fed only its own range)."""
    small = less_equal(x, 8.0)
    xs = where(small, x, 0.0)
    xl = where(small, 9.0, x)   # (no 32 / 0)
    near = multiply(exp(xs), _chebyshev(subtract(true_divide(xs, 2.0), 2), _I0_SMALL))
    far = true_divide(multiply(exp(xl), _chebyshev(subtract(true_divide(32.0, xl), 2.0),
                                                      _I0_LARGE)), sqrt(xl))
    return where(small, near, far)


def _i1(x):
    """The modified Bessel function of order 1 at `x` >= 0 (i0's derivative): its power
    series up to 8, the derivative of i0's expansion beyond."""
    small = less_equal(x, 8.0)
    xs = where(small, x, 0.0)
    xl = where(small, 9.0, x)
    s = multiply(multiply(xs, xs), 0.25)
    series = _I1_SERIES[0]
    for c in _I1_SERIES[1:]:
        series = add(multiply(series, s), c)
    near = multiply(multiply(xs, 0.5), series)
    t = subtract(true_divide(32.0, xl), 2.0)
    slope = subtract(multiply(_chebyshev(t, _I0_LARGE), subtract(1.0, true_divide(0.5, xl))),
                     multiply(_chebyshev(t, _I0_LARGE_DERIVATIVE), true_divide(32.0,
                                                                               multiply(xl, xl))))
    far = multiply(true_divide(exp(xl), sqrt(xl)), slope)
    return where(small, near, far)


def _i0_with_i1_gradient(x):
    from tracegrad.transforms.custom import custom_gradient

    @custom_gradient
    def i0_of(x):
        return _i0_value(abs(x)), lambda dy: multiply(dy, multiply(sign(x), _i1(abs(x))))

    return i0_of(x)


def i0(x):
    """The modified Bessel function of the first kind of order 0, elementwise (NumPy's
    Chebyshev expansion, in the input's float dtype; float64 for integers and bools). Its
    gradient is `sign(x) i1(|x|)`."""
    x = read(x)
    dtype = dtype_of(x)[0]
    if dtypes.is_complex(dtype):
        raise DTypeError("i0: not defined for complex input (as NumPy's)")
    if not dtypes.is_float(dtype):
        x = astype(x, dtypes.float64)
    if is_tensor(x) or tracing():
        return _i0_with_i1_gradient(x)
    return _i0_value(abs(x))


def kaiser(M, beta):
    """The Kaiser window of `M` points (static) with shape parameter `beta` (a number or a
    differentiable scalar tensor); float64."""
    if not isinstance(M, (int, np.integer)) or isinstance(M, bool):
        raise InvalidArgumentError(f"kaiser: M must be a Python int, got {M!r}")
    beta = read(beta)
    if not is_tensor(beta):
        return np.kaiser(M, beta)
    beta = astype(beta, dtypes.float64)
    if M == 1:
        return where(np.ones(1, bool), 1.0, beta)
    n = np.arange(0, float(M))
    alpha = (M - 1) / 2.0
    return true_divide(i0(multiply(beta, np.sqrt(1 - ((n - alpha) / alpha) ** 2.0))), i0(beta))
