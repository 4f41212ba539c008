"""Elementwise functions with NumPy names and semantics: broadcasting, and the dtypes NumPy's
own ufunc loops use (NEP 50 promotion with weak Python scalars: `f32 * 2.0 -> f32`,
`i32 + 2.5 -> f64`, `sin(i32) -> f64`, `sin(i8) -> f16`); operands NumPy has no loop for
(`bitwise_and` of floats) raise DTypeError naming the function."""

from __future__ import annotations

import numpy as np

from tracegrad import ops
from tracegrad.core import dtypes
from tracegrad.errors import DTypeError, InvalidArgumentError
from tracegrad.numpy._core import (
    broadcast,
    cast,
    dtype_of,
    loop_dtypes,
    loop_key,
    promote,
    read,
    ufunc_operands,
)
from tracegrad.numpy._eager import apply_ufunc, ufunc_function


def _full_like(x, value, dtype):
    from tracegrad.numpy._creation import full_like

    return full_like(x, value, dtype=dtype)


# -- arithmetic ------------------------------------------------------------------------------


add = ufunc_function(
    np.add, ops.add_p, "add",
    "Elementwise `x1 + x2` (NumPy broadcasting and promotion; logical or for bools).",
)

subtract = ufunc_function(
    np.subtract, ops.sub_p, "subtract",
    "Elementwise `x1 - x2`.",
)

multiply = ufunc_function(
    np.multiply, ops.mul_p, "multiply",
    "Elementwise `x1 * x2` (logical and for bools).",
)

true_divide = ufunc_function(
    np.true_divide, ops.div_p, "true_divide",
    "Elementwise `x1 / x2`; integer and bool operands give float64.",
)
divide = true_divide

floor_divide = ufunc_function(
    np.floor_divide, ops.floor_div_p, "floor_divide",
    "Elementwise `x1 // x2`, rounding toward minus infinity (`bool // bool` is int8, as "
    "NumPy's).",
)

mod = ufunc_function(
    np.remainder, ops.mod_p, "mod",
    "Elementwise remainder with the sign of the divisor (`np.mod`, `%`).",
)
remainder = mod


def power(x1, x2):
    """Elementwise `x1 ** x2`. A Python int exponent becomes an `integer_pow` op.

    >>> tnp.power(tg.constant([1.0, 2.0]), 3)   # integer_pow {y=3}
    """
    if type(x2) is int:
        x = read(x1)
        loop = loop_dtypes(np.power, (loop_key(x), int), "power")
        if x2 < 0 and not dtypes.is_inexact(loop[0]):
            raise InvalidArgumentError("power: integers to negative integer powers are not allowed")
        return ops.integer_pow(cast(x, loop[0], dtype_of(x)[1]), y=x2)
    return apply_ufunc(np.power, ops.pow_p, "power", x1, x2)


pow = power  # NumPy 2's array-API name

negative = ufunc_function(
    np.negative, ops.neg_p, "negative",
    "Elementwise `-x` (not for bools, as in NumPy).",
)


def positive(x):
    """Elementwise `+x` (the operand itself; not for bools)."""
    (x,), _ = ufunc_operands(np.positive, "positive", x)
    return x


def absolute(x):
    """Elementwise `|x|` (bools are returned unchanged)."""
    (x,), out = ufunc_operands(np.absolute, "absolute", x)
    return x if out == dtypes.bool_ else ops.abs_(x)


abs = absolute


sign = ufunc_function(
    np.sign, ops.sign_p, "sign",
    "Elementwise -1, 0 or 1 by the sign of `x` (NaN for NaN).",
)


def square(x):
    """Elementwise `x * x`."""
    (x,), _ = ufunc_operands(np.square, "square", x)
    return ops.mul(x, x)


def abs_squared(x):
    """`|x|^2` elementwise: `x * x`, and the real `re^2 + im^2` of a complex `x`."""
    x = read(x)
    if dtypes.is_complex(dtype_of(x)[0]):
        re, im = ops.real(x), ops.imag(x)
        return ops.add(ops.mul(re, re), ops.mul(im, im))
    return multiply(x, x)


def reciprocal(x):
    """Elementwise `1 / x`; for integers NumPy's truncating `1 // x` in C (0 unless |x| is 1,
    and 0 for x == 0, where NumPy's result is undefined)."""
    (x,), out = ufunc_operands(np.reciprocal, "reciprocal", x)
    if dtypes.is_inexact(out):
        return ops.div(_full_like(x, 1, out), x)
    one = ops.eq(ops.abs_(x), _full_like(x, 1, out))
    return ops.select(one, x, _full_like(x, 0, out))


def _float_unary(ufunc, prim, name):
    doc = f"Elementwise `np.{ufunc.__name__}`; integer input gives float64."
    return ufunc_function(ufunc, prim, name, doc)


exp = _float_unary(np.exp, ops.exp_p, "exp")
exp2 = _float_unary(np.exp2, ops.exp2_p, "exp2")
expm1 = _float_unary(np.expm1, ops.expm1_p, "expm1")
log = _float_unary(np.log, ops.log_p, "log")
log2 = _float_unary(np.log2, ops.log2_p, "log2")
log10 = _float_unary(np.log10, ops.log10_p, "log10")
log1p = _float_unary(np.log1p, ops.log1p_p, "log1p")
sqrt = _float_unary(np.sqrt, ops.sqrt_p, "sqrt")
sin = _float_unary(np.sin, ops.sin_p, "sin")
cos = _float_unary(np.cos, ops.cos_p, "cos")
tan = _float_unary(np.tan, ops.tan_p, "tan")
arcsin = _float_unary(np.arcsin, ops.asin_p, "arcsin")
arccos = _float_unary(np.arccos, ops.acos_p, "arccos")
arctan = _float_unary(np.arctan, ops.atan_p, "arctan")
sinh = _float_unary(np.sinh, ops.sinh_p, "sinh")
cosh = _float_unary(np.cosh, ops.cosh_p, "cosh")
tanh = _float_unary(np.tanh, ops.tanh_p, "tanh")
arcsinh = _float_unary(np.arcsinh, ops.asinh_p, "arcsinh")
arccosh = _float_unary(np.arccosh, ops.acosh_p, "arccosh")
arctanh = _float_unary(np.arctanh, ops.atanh_p, "arctanh")
_rint = _float_unary(np.rint, ops.round_p, "rint")


def _by_parts(fn, x, *args):
    """`fn` of a complex `x` applied to its real and imaginary parts, as NumPy's rounding
    of complex numbers."""
    x = read(x)
    if not dtypes.is_complex(dtype_of(x)[0]):
        return None
    return ops.complex_(fn(ops.real(x), *args), fn(ops.imag(x), *args))


def rint(x):
    """Elementwise rounding to the nearest integer, halves to even (complex numbers: each
    part)."""
    out = _by_parts(_rint, x)
    return _rint(x) if out is None else out

arctan2 = ufunc_function(
    np.arctan2, ops.atan2_p, "arctan2",
    "Elementwise angle of the point `(x2, x1)`, in `[-pi, pi]`.",
)

# NumPy 2's array-API names of the same ufuncs.
acos, asin, atan, atan2 = arccos, arcsin, arctan, arctan2
acosh, asinh, atanh = arccosh, arcsinh, arctanh


def _rounding(ufunc, prim, name):
    def fn(x):
        (x,), out = ufunc_operands(ufunc, name, x)
        return prim.bind(x) if dtypes.is_float(out) else x

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise `np.{name}`; integers and bools are returned unchanged."
    return fn


floor = _rounding(np.floor, ops.floor_p, "floor")
ceil = _rounding(np.ceil, ops.ceil_p, "ceil")


def round(a, decimals=0):
    """`a` rounded to `decimals` decimals, halves to even (NumPy's algorithm: scale by
    `10**decimals`, `rint`, unscale; complex numbers: each part). Integers round only for
    negative `decimals`."""
    out = _by_parts(round, a, decimals)
    if out is not None:
        return out
    a = read(a)
    dtype, weak = dtype_of(a)
    decimals = int(decimals)
    if dtype == dtypes.bool_:
        raise DTypeError("round: NumPy does not round bool arrays (its float16 result does "
                         "not cast back to bool); convert them first")
    if dtypes.is_int(dtype):
        if decimals >= 0:
            return a
        f = 10.0 ** -decimals
        x = cast(a, dtypes.float64)
        return cast(multiply(ops.round_(true_divide(x, f)), f), dtype, weak)
    if decimals == 0:
        return ops.round_(cast(a, dtype, weak))
    f = 10.0 ** (decimals if decimals > 0 else -decimals)
    if decimals > 0:
        return true_divide(ops.round_(multiply(a, f)), f)
    return multiply(ops.round_(true_divide(a, f)), f)


around = round


# -- extrema and clipping --------------------------------------------------------------------


maximum = ufunc_function(
    np.maximum, ops.max_p, "maximum",
    "Elementwise maximum; NaN if either is NaN.",
)

minimum = ufunc_function(
    np.minimum, ops.min_p, "minimum",
    "Elementwise minimum; NaN if either is NaN.",
)


def _nan_ignoring(ufunc, prim, name):
    def fn(x1, x2):
        (x, y), out = ufunc_operands(ufunc, name, x1, x2)
        m = prim.bind(x, y)
        if not dtypes.is_inexact(out):
            return m
        return ops.select(ops.is_nan(y), x, ops.select(ops.is_nan(x), y, m))

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise `np.{name}`: like `{prim.name}imum` but a NaN loses to a number."
    return fn


fmax = _nan_ignoring(np.fmax, ops.max_p, "fmax")
fmin = _nan_ignoring(np.fmin, ops.min_p, "fmin")


def _log_add(ufunc, name, exp, scale):
    def fn(x1, x2):
        (x, y), _ = ufunc_operands(ufunc, name, x1, x2)
        d = ops.sub(x, y)
        d = ops.select(ops.is_nan(d), ops.zeros_like(d), d)  # equal infinities (or a NaN)
        tail = ops.log1p(exp(ops.neg(ops.abs_(d))))
        if scale != 1.0:  # base 2: NumPy's log2(1 + y) = log2(e) * log1p(y), and 1 at a tie
            tail = ops.select(ops.eq(d, ops.zeros_like(d)), ops.full_like(tail, 1.0),
                              ops.mul(tail, ops.full_like(tail, scale)))
        return ops.add(ops.max_(x, y), tail)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"Elementwise `np.{name}`: the log of the sum of the exponentials, without "
                  "overflow (`max + log1p(exp(-|x1 - x2|))`).")
    return fn


logaddexp = _log_add(np.logaddexp, "logaddexp", ops.exp, 1.0)
logaddexp2 = _log_add(np.logaddexp2, "logaddexp2", ops.exp2, float(np.log2(np.e)))


def clip(a, a_min=None, a_max=None, *, min=None, max=None):
    """`minimum(maximum(a, a_min), a_max)` with NumPy's promotion over all three (either
    bound may be None; `min=` / `max=` are NumPy 2's other spelling)."""
    a_min = min if a_min is None else a_min
    a_max = max if a_max is None else a_max
    bounds = [b for b in (a_min, a_max) if b is not None]
    xs, _ = promote(a, *bounds)
    xs = broadcast(*xs, op="clip")
    out = xs[0]
    rest = iter(xs[1:])
    if a_min is not None:
        out = ops.max_(out, next(rest))
    if a_max is not None:
        out = ops.min_(out, next(rest))
    return out


def where(condition, x=None, y=None):
    """`x` where `condition` else `y` (NumPy promotion of x and y, broadcasting of all three);
    `tnp.where` (`_datadep.where`) adds the one-argument form."""
    if x is None or y is None:
        raise InvalidArgumentError("where: either both or neither of x and y should be given")
    (x, y), _ = promote(x, y)
    c = cast(read(condition), dtypes.bool_)
    c, x, y = broadcast(c, x, y, op="where")
    return ops.select(c, x, y)


# -- comparisons and logic -------------------------------------------------------------------


# A comparison's answer when its left operand is below (or above) every value of the right.
_WHEN_LESS = {np.less: True, np.less_equal: True, np.greater: False, np.greater_equal: False,
              np.equal: False, np.not_equal: True}
_WHEN_GREATER = {np.less: False, np.less_equal: False, np.greater: True,
                 np.greater_equal: True, np.equal: False, np.not_equal: True}


def _compare(ufunc, prim, name):
    fn = ufunc_function(ufunc, prim, name, "")

    def compare(x1, x2):
        if type(x2) is int or type(x1) is int:
            out = _past_range(ufunc, x1, x2)
            if out is not None:
                return out
        return fn(x1, x2)

    compare.__name__ = compare.__qualname__ = name
    compare.__doc__ = (f"Elementwise `np.{name}` (a bool result); a Python int outside the "
                       "range of the integer dtype it meets compares by its value, as NumPy 2.")
    return compare


def _past_range(ufunc, x1, x2):
    """NumPy 2's answer for a Python int beyond the range of the other operand's integer
    dtype (a constant), or None when the comparison is an ordinary one."""
    flipped = type(x1) is int
    v, x = (x1, read(x2)) if flipped else (x2, read(x1))
    if type(x) is int:
        return None
    dt = dtype_of(x)[0]
    if not dtypes.is_int(dt):
        return None
    info = np.iinfo(dt)
    if int(info.min) <= v <= int(info.max):
        return None
    left_less = (v > int(info.max)) != flipped
    return _full_like(x, (_WHEN_LESS if left_less else _WHEN_GREATER)[ufunc], dtypes.bool_)


less = _compare(np.less, ops.lt_p, "less")
less_equal = _compare(np.less_equal, ops.le_p, "less_equal")
greater = _compare(np.greater, ops.gt_p, "greater")
greater_equal = _compare(np.greater_equal, ops.ge_p, "greater_equal")
equal = _compare(np.equal, ops.eq_p, "equal")
not_equal = _compare(np.not_equal, ops.ne_p, "not_equal")


def _logical(ufunc, prim, name):
    def fn(x1, x2):
        xs = [cast(read(x), dtypes.bool_) for x in (x1, x2)]
        return prim.bind(*broadcast(*xs, op=name))

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise `np.{name}` of the operands' truth values (a bool result)."
    return fn


logical_and = _logical(np.logical_and, ops.and_p, "logical_and")
logical_or = _logical(np.logical_or, ops.or_p, "logical_or")
logical_xor = _logical(np.logical_xor, ops.xor_p, "logical_xor")


def logical_not(x):
    """Elementwise `not x` (a bool result)."""
    return ops.not_(cast(read(x), dtypes.bool_))


bitwise_and = _compare(np.bitwise_and, ops.and_p, "bitwise_and")
bitwise_or = _compare(np.bitwise_or, ops.or_p, "bitwise_or")
bitwise_xor = _compare(np.bitwise_xor, ops.xor_p, "bitwise_xor")
for _f, _doc in ((bitwise_and, "&"), (bitwise_or, "|"), (bitwise_xor, "^")):
    _f.__doc__ = f"Elementwise `x1 {_doc} x2` of integers or bools."


invert = ufunc_function(
    np.invert, ops.not_p, "invert",
    "Elementwise `~x`: bitwise not of integers, logical not of bools.",
)


bitwise_not = bitwise_invert = invert

left_shift = ufunc_function(
    np.left_shift, ops.shift_left_p, "left_shift",
    "Elementwise `x1 << x2` of integers: a count of at least the width of the dtype (or "
    "negative) gives 0, as NumPy.",
)

right_shift = ufunc_function(
    np.right_shift, ops.shift_right_p, "right_shift",
    "Elementwise `x1 >> x2` of integers (arithmetic for signed ones): a count of at least "
    "the width of the dtype (or negative) gives 0, or -1 for a negative `x1`, as NumPy.",
)

bitwise_left_shift = left_shift
bitwise_right_shift = right_shift

# Bit masks of the population count's steps (pairs, nibbles, bytes), by unsigned width.
_SWAR = (0x5555555555555555, 0x3333333333333333, 0x0F0F0F0F0F0F0F0F, 0x0101010101010101)
_UNSIGNED = {dt.itemsize: dt for dt in dtypes.UNSIGNED}


def bitwise_count(x):
    """The number of 1 bits in the absolute value of each integer (NumPy 2's popcount);
    a uint8 result.

    >>> tnp.bitwise_count(np.array([-1, 7, 256]))  # array([1, 3, 1], dtype=uint8)
    """
    x = read(x)
    src, out = loop_dtypes(np.bitwise_count, (loop_key(x),), "bitwise_count")
    x = cast(x, src, dtype_of(x)[1])
    if not dtypes.is_unsigned(src):
        x = ops.abs_(x)  # the bits of |x| (the most negative value keeps its one bit)
    u = _UNSIGNED[src.itemsize]
    v = cast(x, u)
    m1, m2, m4, ones = (u.type(m & int(np.iinfo(u).max)) for m in _SWAR)
    v = subtract(v, bitwise_and(right_shift(v, u.type(1)), m1))
    v = add(bitwise_and(v, m2), bitwise_and(right_shift(v, u.type(2)), m2))
    v = bitwise_and(add(v, right_shift(v, u.type(4))), m4)
    if u.itemsize > 1:  # the bytes' counts summed into the top byte
        v = right_shift(multiply(v, ones), u.type(8 * u.itemsize - 8))
    return cast(v, out)


def _float_test(ufunc, prim, name, other):
    def fn(x):
        x = read(x)
        loop_dtypes(ufunc, (loop_key(x),), name)
        if dtypes.is_inexact(dtype_of(x)[0]):
            return prim.bind(x)
        return _full_like(x, other, dtypes.bool_)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise `np.{name}` (a bool result; constant for integers and bools)."
    return fn


isnan = _float_test(np.isnan, ops.is_nan_p, "isnan", False)
isinf = _float_test(np.isinf, ops.is_inf_p, "isinf", False)
isfinite = _float_test(np.isfinite, ops.is_finite_p, "isfinite", True)


# The ufuncs of this module by NumPy ufunc (for `__array_ufunc__`).
UFUNCS = {
    np.add: add, np.subtract: subtract, np.multiply: multiply, np.true_divide: true_divide,
    np.floor_divide: floor_divide, np.remainder: mod, np.power: power,
    np.negative: negative, np.positive: positive, np.absolute: absolute, np.sign: sign,
    np.square: square, np.reciprocal: reciprocal, np.exp: exp, np.exp2: exp2,
    np.expm1: expm1, np.log: log, np.log2: log2, np.log10: log10, np.log1p: log1p,
    np.sqrt: sqrt, np.sin: sin, np.cos: cos, np.tan: tan, np.arcsin: arcsin,
    np.arccos: arccos, np.arctan: arctan, np.sinh: sinh, np.cosh: cosh, np.tanh: tanh,
    np.arcsinh: arcsinh, np.arccosh: arccosh, np.arctanh: arctanh, np.rint: rint,
    np.arctan2: arctan2, np.floor: floor, np.ceil: ceil, np.maximum: maximum,
    np.minimum: minimum, np.fmax: fmax, np.fmin: fmin,
    np.logaddexp: logaddexp, np.logaddexp2: logaddexp2, np.less: less,
    np.less_equal: less_equal, np.greater: greater, np.greater_equal: greater_equal,
    np.equal: equal, np.not_equal: not_equal, np.logical_and: logical_and,
    np.logical_or: logical_or, np.logical_xor: logical_xor, np.logical_not: logical_not,
    np.bitwise_and: bitwise_and, np.bitwise_or: bitwise_or, np.bitwise_xor: bitwise_xor,
    np.invert: invert, np.isnan: isnan, np.isinf: isinf, np.isfinite: isfinite,
    np.left_shift: left_shift, np.right_shift: right_shift, np.bitwise_count: bitwise_count,
}
