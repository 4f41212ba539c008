"""Elementwise functions composed of other tracegrad.numpy functions: hypot, cbrt, trunc,
copysign, signbit, heaviside, fmod, modf, frexp, ldexp, sinc, angle conversions,
nan_to_num, isclose and friends.

Each takes the dtypes NumPy's own ufunc loop would use (`ufunc_operands`: NEP 50 with weak
Python scalars; integers to float64 where NumPy's loop is float-only) and is differentiable
through its composition. Where a function has a removable singularity (cbrt and sinc at 0)
the unused branch is evaluated at a safe point, so no NaN reaches the gradient.
"""

from __future__ import annotations

import numpy as np

from tracegrad import ops
from tracegrad.core import dtypes
from tracegrad.core.shapes import broadcast_shapes
from tracegrad.errors import DTypeError, ShapeError
from tracegrad.numpy._core import (
    dtype_of,
    has_float_dtype,
    is_tensor,
    read,
    shape_of,
    ufunc_operands,
)
from tracegrad.numpy._creation import astype, full_like, zeros_like
from tracegrad.numpy._reductions import all as _all
from tracegrad.numpy._reductions import any as _any
from tracegrad.numpy._shape import ravel
from tracegrad.numpy._ufuncs import (
    abs,
    ceil,
    exp2,
    floor,
    floor_divide,
    isinf,
    isnan,
    less,
    less_equal,
    log2,
    logical_and,
    logical_or,
    maximum,
    minimum,
    mod,
    multiply,
    negative,
    power,
    sign,
    sin,
    sqrt,
    true_divide,
    where,
)
from tracegrad.numpy._ufuncs import equal as _equal


def trunc(x):
    """Elementwise `x` rounded toward zero (integers and bools unchanged, as NumPy 2)."""
    (x,), out = ufunc_operands(np.trunc, "trunc", x)
    return where(less(x, 0), ceil(x), floor(x)) if dtypes.is_float(out) else x


def signbit(x):
    """Elementwise whether the sign bit of `x` is set: `x < 0`, and true for `-0.0`.
    (A NaN's sign bit is not read: `signbit` of any NaN is False.)"""
    (x,), _ = ufunc_operands(np.signbit, "signbit", x)
    if not has_float_dtype(x):
        return less(x, 0)
    zero = _equal(x, 0)
    negative_zero = logical_and(zero, less(true_divide(1.0, where(zero, x, 1.0)), 0))
    return logical_or(less(x, 0), negative_zero)


def copysign(x1, x2):
    """Elementwise `|x1|` with the sign of `x2` (float; see `signbit` for NaN signs)."""
    (x, y), _ = ufunc_operands(np.copysign, "copysign", x1, x2)
    return where(signbit(y), negative(abs(x)), abs(x))


def heaviside(x1, x2):
    """Elementwise step function: 0 where `x1 < 0`, `x2` where `x1 == 0`, 1 where `x1 > 0`
    (NaN for NaN). Its gradient is 0 in `x1` and the indicator of `x1 == 0` in `x2`."""
    (x, h), _ = ufunc_operands(np.heaviside, "heaviside", x1, x2)
    step = where(less(x, 0), 0.0, where(less(0, x), 1.0, h))
    return where(isnan(x), x, step)


def fabs(x):
    """Elementwise `|x|` as a float (integers give float64)."""
    (x,), _ = ufunc_operands(np.fabs, "fabs", x)
    return abs(x)


def hypot(x1, x2):
    """Elementwise `sqrt(x1**2 + x2**2)` without overflow or underflow: `a * sqrt(1 +
    (b / a)**2)` with `a = max(|x1|, |x2|)`, `b` the other; infinite if either is."""
    (x, y), _ = ufunc_operands(np.hypot, "hypot", x1, x2)
    ax, ay = abs(x), abs(y)
    a, b = maximum(ax, ay), minimum(ax, ay)
    zero = _equal(a, 0)
    t = true_divide(b, where(zero, 1.0, a))
    r = where(zero, a, multiply(a, sqrt(multiply(t, t) + 1.0)))
    return where(logical_or(isinf(x), isinf(y)), np.inf, r)


def cbrt(x):
    """Elementwise real cube root: `exp2(log2|x| / 3)` with the sign of `x`, refined by one
    Newton step (within an ulp or two of NumPy's libm `cbrt`). 0 and infinities are exact."""
    (x,), _ = ufunc_operands(np.cbrt, "cbrt", x)
    regular = logical_and(less(0, abs(x)), less(abs(x), np.inf))
    safe = where(regular, x, 1.0)
    r = multiply(sign(safe), exp2(true_divide(log2(abs(safe)), 3.0)))
    r2 = multiply(r, r)
    r = r - true_divide(r - true_divide(safe, r2), 3.0)
    return where(regular, r, x)


def fmod(x1, x2):
    """Elementwise C remainder: the sign of the dividend `x1` (`np.mod` takes the divisor's),
    computed as `sign(x1) * mod(|x1|, |x2|)`. Integer division by 0 gives 0, as NumPy."""
    (x, y), _ = ufunc_operands(np.fmod, "fmod", x1, x2)
    m = mod(abs(x), abs(y))
    return where(signbit(x), negative(m), m)


def divmod(x1, x2):
    """`(floor_divide(x1, x2), mod(x1, x2))`."""
    return floor_divide(x1, x2), mod(x1, x2)


def modf(x):
    """`(fractional part, integral part)` of `x`, both with the sign of `x` (float; for
    infinities the fractional part is 0)."""
    (x,), _ = ufunc_operands(np.modf, "modf", x)
    whole = trunc(x)
    return copysign(where(isinf(x), zeros_like(x), x - whole), x), whole


def _pow2(k, dtype):
    """`2.0 ** k` for an integer-valued float tensor `k`, exactly, in `dtype` (float64's exp2
    of an integer is exact on both backends; float32's need not be)."""
    return astype(exp2(astype(k, dtypes.float64)), dtype)


def _finite_nonzero(x):
    return logical_and(less(0, abs(x)), less(abs(x), np.inf))


def ldexp(x1, x2):
    """Elementwise `x1 * 2**x2` for an integer `x2`, correctly rounded: `x1`'s mantissa
    (`frexp`) times one power of two for a subnormal result, two for a normal one (each
    exact), so no intermediate overflows or rounds. 0, infinities and NaN are returned."""
    (x, n), out = ufunc_operands(np.ldexp, "ldexp", x1, x2)
    m, e = frexp(x)
    info = np.finfo(out)
    # beyond this every finite non-zero x over- or underflows: the clip keeps k an exact float
    limit = int(info.maxexp - info.minexp + info.nmant + 2)
    k = astype(e, dtypes.float64) + astype(n, dtypes.float64)
    k = maximum(minimum(k, float(limit)), float(-limit))
    normal = less(0.0, k)
    scaled = where(normal, multiply(multiply(m, _pow2(where(normal, k - 1.0, 0.0), out)), 2.0),
                   multiply(m, _pow2(where(normal, 0.0, k), out)))
    return where(_finite_nonzero(x), scaled, x)


def frexp(x):
    """`(mantissa, exponent)` with `x = mantissa * 2**exponent` and `0.5 <= |mantissa| < 1`
    (0, infinities and NaN have exponent 0 and mantissa `x`); the exponent is int32. The
    mantissa is `x` divided by two exact powers of two (halves of the exponent, so neither
    overflows nor underflows)."""
    (x,), _ = ufunc_operands(np.frexp, "frexp", x)
    out = dtype_of(x)[0]  # (the loop's last dtype is the exponent's)
    regular = _finite_nonzero(x)
    safe = where(regular, x, 1.0)
    e = floor(log2(abs(safe))) + 1.0
    half = floor(true_divide(e - 1.0, 2.0))
    m = multiply(true_divide(true_divide(safe, _pow2(half, out)), _pow2(e - 1.0 - half, out)),
                 0.5)
    # log2 may round across a power of two: put the mantissa back into [0.5, 1).
    big = less_equal(1.0, abs(m))
    small = less(abs(m), 0.5)
    m = where(big, multiply(m, 0.5), where(small, multiply(m, 2.0), m))
    e = where(big, e + 1.0, where(small, e - 1.0, e))
    return where(regular, m, x), astype(where(regular, e, 0.0), dtypes.int32)


def _scale(ufunc, name, numerator, denominator):
    def fn(x):
        (x,), out = ufunc_operands(ufunc, name, x)
        if out == dtypes.float16:  # NumPy's float16 loop computes in float32
            return astype(fn(astype(x, dtypes.float32)), out)
        return multiply(x, np.asarray(out.type(numerator) / out.type(denominator)))

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"Elementwise `np.{name}`: `x * ({numerator:.6g} / {denominator:g})`, the "
                  "factor rounded in the result's dtype as NumPy's loop does (integers give "
                  "float64).")
    return fn


deg2rad = _scale(np.deg2rad, "deg2rad", np.pi, 180.0)
radians = deg2rad  # NumPy's two names of one computation
rad2deg = _scale(np.rad2deg, "rad2deg", 180.0, np.pi)
degrees = rad2deg


def float_power(x1, x2):
    """Elementwise `x1 ** x2` computed in float64 (whatever the operands' dtypes)."""
    (x, y), _ = ufunc_operands(np.float_power, "float_power", x1, x2)
    return power(x, y)


def sinc(x):
    """`sin(pi x) / (pi x)`: NumPy's `sin(y) / y` of `y = pi x`, with `y` replaced by the
    dtype's epsilon at 0 (so 1 there, with gradient 0). Integers give float64."""
    y = multiply(read(x), np.pi)
    eps = float(np.finfo(dtype_of(y)[0]).eps)
    y = where(_equal(y, 0), eps, y)
    return true_divide(sin(y), y)


def _is_infinity(x, value):
    x = read(x)
    if dtypes.is_complex(dtype_of(x)[0]):
        raise DTypeError(f"{'isposinf' if value > 0 else 'isneginf'}: not defined for complex "
                         "input (ambiguous, as in NumPy): test the real and imaginary parts")
    return _equal(x, value) if has_float_dtype(x) else full_like(x, False, dtype=dtypes.bool_)


def isposinf(x):
    """Elementwise `x == +inf` (a bool result)."""
    return _is_infinity(x, np.inf)


def isneginf(x):
    """Elementwise `x == -inf` (a bool result)."""
    return _is_infinity(x, -np.inf)


def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    """`x` with NaN replaced by `nan`, infinities by `posinf` / `neginf` (default: the
    largest finite numbers of the dtype). Integers and bools are returned unchanged;
    complex numbers have each part replaced."""
    x = read(x)
    dt = dtype_of(x)[0]
    if dtypes.is_complex(dt):
        parts = [nan_to_num(p, copy, nan, posinf, neginf) for p in (ops.real(x), ops.imag(x))]
        return ops.complex_(*parts)
    if not dtypes.is_float(dt):
        return x
    info = np.finfo(dt)
    hi = float(info.max) if posinf is None else posinf
    lo = float(info.min) if neginf is None else neginf
    is_nan, is_pos, is_neg = isnan(x), _equal(x, np.inf), _equal(x, -np.inf)  # before replacing
    return where(is_nan, nan, where(is_pos, hi, where(is_neg, lo, x)))


def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Elementwise `|a - b| <= atol + rtol * |b|` for a finite `b`, or `a == b` (so
    infinities are close only to themselves; NaNs to NaNs with `equal_nan=True`), `b` in
    float as NumPy computes it."""
    x, y = read(a), read(b)
    if type(y) in (bool, int):
        y = float(y)
    elif not has_float_dtype(y):
        y = astype(y, dtypes.float64)
    close = logical_and(less_equal(abs(x - y), atol + multiply(rtol, abs(y))),
                        less(abs(y), np.inf))
    close = logical_or(close, _equal(x, y))
    if equal_nan:
        close = logical_or(close, logical_and(isnan(x), isnan(y)))
    return close


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Whether `isclose(a, b, ...)` holds everywhere: a bool scalar (NumPy returns a Python
    bool; on a traced tensor the answer is a traced bool)."""
    return _all(isclose(a, b, rtol, atol, equal_nan))


def _false(a1, a2):
    """A False bool scalar: a tensor when either operand is one (an `any` of no element)."""
    return _any(ravel(a1 if is_tensor(a1) else a2)[:0])


def array_equal(a1, a2, equal_nan=False):
    """Whether `a1` and `a2` have the same shape and elements (a bool scalar; False when
    the shapes differ)."""
    a1, a2 = read(a1), read(a2)
    if shape_of(a1) != shape_of(a2):
        return _false(a1, a2)
    same = _equal(a1, a2)
    if equal_nan:
        same = logical_or(same, logical_and(isnan(a1), isnan(a2)))
    return _all(same)


def array_equiv(a1, a2):
    """Whether `a1` and `a2` broadcast together and are elementwise equal (a bool scalar)."""
    a1, a2 = read(a1), read(a2)
    try:
        broadcast_shapes(shape_of(a1), shape_of(a2), op="array_equiv")
    except ShapeError:
        return _false(a1, a2)
    return _all(_equal(a1, a2))
