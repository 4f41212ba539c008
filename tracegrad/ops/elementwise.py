"""Elementwise primitives: unary and binary math, comparisons, logic, select, casts.

Binary primitives take operands of equal shapes and dtypes: broadcasting and dtype
promotion are explicit ops inserted by `tracegrad.numpy`.
"""

from __future__ import annotations

import math

import numpy as np

from tracegrad.core import dtypes
from tracegrad.core.op import Primitive
from tracegrad.core.types import TensorType
from tracegrad.errors import DTypeError
from tracegrad.ops import shape_ops
from tracegrad.ops._batching import batch_elementwise
from tracegrad.ops._families import (
    binary,
    check_kind,
    compare,
    elementwise,
    needs,
    nondifferentiable,
    same_dtype,
    same_shape,
    unary,
)


def _logistic(x):
    # exp(-|x|) never overflows; both branches are exact to rounding.
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype, copy=False)


def _erf(x):
    import scipy.special  # not at import time: it alone costs a fifth of a second

    return scipy.special.erf(x).astype(x.dtype, copy=False)


# -- helpers of the gradient rules -----------------------------------------------------------


def _c(x, value):
    """The constant `value` with `x`'s shape and dtype."""
    return shape_ops.full_like(x, value)


def _sq(x):
    return mul_p.bind(x, x)


def conj(x):
    """The complex conjugate of a complex tensor; a real one as it is."""
    return conj_p.bind(x) if dtypes.is_complex(x.dtype) else x


# Complex gradients follow TensorFlow's convention: for a real loss L of z = x + iy the
# gradient is dL/dx + i dL/dy, so a holomorphic f with derivative f' sends the incoming
# gradient g to g * conj(f'(z)) (the transpose of z -> f'(z) z as a map of R^2).


def defderiv(prim: Primitive, deriv) -> None:
    """Give a unary primitive the gradient `g * conj(deriv(x, y))` (`y` is its result)."""
    prim.def_grad(lambda op, g: [mul_p.bind(g, conj(deriv(op.inputs[0], op.outputs[0])))])


def defrecip(prim: Primitive, denom) -> None:
    """Give a unary primitive the gradient `g / conj(denom(x, y))` (`y` is its result)."""
    prim.def_grad(lambda op, g: [div_p.bind(g, conj(denom(op.inputs[0], op.outputs[0])))])


# -- unary math ------------------------------------------------------------------------------

neg_p = unary("neg", np.negative, kind="numeric")
neg_p.def_grad(lambda op, g: [neg_p.bind(g)])

sign_p = unary("sign", np.sign, kind="numeric")  # z / |z| for complex z, as NumPy 2
abs_p = unary("abs", np.abs, kind="numeric", out_dtype=dtypes.real_dtype)


@abs_p.def_grad
def _abs_grad(op, g):
    (x,), (y,) = op.inputs, op.outputs
    if not dtypes.is_complex(x.dtype):
        return [mul_p.bind(g, sign_p.bind(x))]  # the subgradient 0 at x == 0
    # (g / |z|) z, and 0 at z == 0
    zero = eq_p.bind(y, _c(y, 0))
    scale = select_p.bind(zero, _c(y, 0), div_p.bind(g, select_p.bind(zero, _c(y, 1), y)))
    return [mul_p.bind(to_complex(scale, x.dtype), x)]

floor_p = unary("floor", np.floor)
ceil_p = unary("ceil", np.ceil)
round_p = unary("round", np.rint)  # half to even, as np.round
exp_p = unary("exp", np.exp, kind="inexact")
defderiv(exp_p, lambda x, y: y)

exp2_p = unary("exp2", np.exp2, kind="inexact")
defderiv(exp2_p, lambda x, y: mul_p.bind(y, _c(y, math.log(2.0))))

expm1_p = unary("expm1", np.expm1, kind="inexact")
defderiv(expm1_p, lambda x, y: add_p.bind(y, _c(y, 1)))

log_p = unary("log", np.log, kind="inexact")
defrecip(log_p, lambda x, y: x)

log2_p = unary("log2", np.log2, kind="inexact")
defrecip(log2_p, lambda x, y: mul_p.bind(x, _c(x, math.log(2.0))))

log10_p = unary("log10", np.log10, kind="inexact")
defrecip(log10_p, lambda x, y: mul_p.bind(x, _c(x, math.log(10.0))))

log1p_p = unary("log1p", np.log1p, kind="inexact")
defrecip(log1p_p, lambda x, y: add_p.bind(x, _c(x, 1)))

sqrt_p = unary("sqrt", np.sqrt, kind="inexact")
defrecip(sqrt_p, lambda x, y: add_p.bind(y, y))

sin_p = unary("sin", np.sin, kind="inexact")
defderiv(sin_p, lambda x, y: cos_p.bind(x))

cos_p = unary("cos", np.cos, kind="inexact")
defderiv(cos_p, lambda x, y: neg_p.bind(sin_p.bind(x)))

tan_p = unary("tan", np.tan, kind="inexact")
defderiv(tan_p, lambda x, y: add_p.bind(_c(y, 1), _sq(y)))

asin_p = unary("asin", np.arcsin, kind="inexact")
defrecip(asin_p, lambda x, y: sqrt_p.bind(sub_p.bind(_c(x, 1), _sq(x))))

acos_p = unary("acos", np.arccos, kind="inexact")
defrecip(acos_p, lambda x, y: neg_p.bind(sqrt_p.bind(sub_p.bind(_c(x, 1), _sq(x)))))

atan_p = unary("atan", np.arctan, kind="inexact")
defrecip(atan_p, lambda x, y: add_p.bind(_c(x, 1), _sq(x)))

sinh_p = unary("sinh", np.sinh, kind="inexact")
defderiv(sinh_p, lambda x, y: cosh_p.bind(x))

cosh_p = unary("cosh", np.cosh, kind="inexact")
defderiv(cosh_p, lambda x, y: sinh_p.bind(x))

tanh_p = unary("tanh", np.tanh, kind="inexact")
defderiv(tanh_p, lambda x, y: sub_p.bind(_c(y, 1), _sq(y)))

asinh_p = unary("asinh", np.arcsinh, kind="inexact")
defrecip(asinh_p, lambda x, y: sqrt_p.bind(add_p.bind(_sq(x), _c(x, 1))))

acosh_p = unary("acosh", np.arccosh, kind="inexact")
# sqrt(x - 1) sqrt(x + 1), not sqrt(x^2 - 1): the two differ in sign on the branch NumPy's
# complex arccosh takes for Re(z) < 0
defrecip(acosh_p, lambda x, y: mul_p.bind(sqrt_p.bind(sub_p.bind(x, _c(x, 1))),
                                          sqrt_p.bind(add_p.bind(x, _c(x, 1)))))

atanh_p = unary("atanh", np.arctanh, kind="inexact")
defrecip(atanh_p, lambda x, y: sub_p.bind(_c(x, 1), _sq(x)))

logistic_p = unary("logistic", _logistic)
defderiv(logistic_p, lambda x, y: mul_p.bind(y, sub_p.bind(_c(y, 1), y)))

erf_p = unary("erf", _erf)
defderiv(erf_p, lambda x, y: mul_p.bind(_c(x, 2 / math.sqrt(math.pi)),
                                        exp_p.bind(neg_p.bind(_sq(x)))))

is_finite_p = unary("is_finite", np.isfinite, kind="inexact", out_dtype=dtypes.bool_)
is_nan_p = unary("is_nan", np.isnan, kind="inexact", out_dtype=dtypes.bool_)
is_inf_p = unary("is_inf", np.isinf, kind="inexact", out_dtype=dtypes.bool_)
not_p = unary("not", np.invert, kind="intbool")  # logical for bool, bitwise for ints

nondifferentiable(sign_p, floor_p, ceil_p, round_p, is_finite_p, is_nan_p, is_inf_p, not_p)


integer_pow_p = Primitive("integer_pow")
"""`x ** y` for a static integer `y` (attribute); `y < 0` needs a float or complex `x`."""


@integer_pow_p.def_abstract_eval
def _integer_pow_abstract_eval(x, *, y):
    check_kind("integer_pow", x, "numeric")
    if y < 0 and not dtypes.is_inexact(x.dtype):
        raise DTypeError("integer_pow: negative exponent needs a float or complex operand")
    return x


@integer_pow_p.def_impl
def _integer_pow_impl(x, *, y):
    return np.power(x, x.dtype.type(y))


elementwise(integer_pow_p)
batch_elementwise(integer_pow_p)


@integer_pow_p.def_grad
def _integer_pow_grad(op, g):
    (x,), y = op.inputs, op.attrs["y"]
    if y == 0:
        return [shape_ops.zeros_like(x)]
    if y == 1:
        return [g]
    if y == 2:
        return [mul_p.bind(g, conj(add_p.bind(x, x)))]
    return [mul_p.bind(g, conj(mul_p.bind(_c(x, y), integer_pow_p.bind(x, y=y - 1))))]


# -- binary math -----------------------------------------------------------------------------

add_p = binary("add", np.add, kind="any", commutative=True)
add_p.def_grad(lambda op, g: [g, g])

sub_p = binary("sub", np.subtract)
sub_p.def_grad(lambda op, g: [g, neg_p.bind(g)])

mul_p = binary("mul", np.multiply, kind="any", commutative=True)


@mul_p.def_grad
def _mul_grad(op, g):
    x, y = op.inputs
    return [mul_p.bind(g, conj(y)) if needs(op, 0) else None,
            mul_p.bind(g, conj(x)) if needs(op, 1) else None]


div_p = binary("div", np.true_divide, kind="inexact")


@div_p.def_grad
def _div_grad(op, g):
    (_, y), (out,) = op.inputs, op.outputs
    y = conj(y)
    return [div_p.bind(g, y) if needs(op, 0) else None,
            neg_p.bind(div_p.bind(mul_p.bind(g, conj(out)), y)) if needs(op, 1) else None]


floor_div_p = binary("floor_div", np.floor_divide, kind="real")
mod_p = binary("mod", np.mod, kind="real")  # NumPy's: the sign of the divisor


@mod_p.def_grad
def _mod_grad(op, g):
    # x mod y = x - floor(x / y) * y, with floor(x / y) piecewise constant
    x, y = op.inputs
    return [g, neg_p.bind(mul_p.bind(g, floor_div_p.bind(x, y))) if needs(op, 1) else None]


pow_p = binary("pow", np.power)


@pow_p.def_grad
def _pow_grad(op, g):
    # d/dx = y x^(y-1), taken as 0 where y == 0; d/dy = x^y log(x), taken as 0 where
    # x <= 0 (0 is the limit at x = 0 for y > 0; for x < 0 x^y is real only at integer y).
    # A complex x takes the principal log, and 0 at x == 0.
    (x, y), (out,) = op.inputs, op.outputs
    gx = gy = None
    if needs(op, 0):
        zero = _c(x, 0)
        dx = mul_p.bind(y, pow_p.bind(x, sub_p.bind(y, _c(y, 1))))
        gx = mul_p.bind(g, conj(select_p.bind(eq_p.bind(y, zero), zero, dx)))
    if needs(op, 1):
        if dtypes.is_complex(x.dtype):
            positive = ne_p.bind(x, _c(x, 0))
        else:
            positive = gt_p.bind(x, _c(x, 0))
        log_x = log_p.bind(select_p.bind(positive, x, _c(x, 1)))
        gy = mul_p.bind(g, conj(mul_p.bind(out, select_p.bind(positive, log_x, _c(x, 0)))))
    return [gx, gy]


# NaN-propagating; complex numbers are ordered lexicographically (real part first), as NumPy
max_p = binary("max", np.maximum, kind="any", commutative=True)
min_p = binary("min", np.minimum, kind="any", commutative=True)


def _extremum_grad(op, g):
    # The gradient goes to the operand equal to the result; a tie splits it evenly.
    (x, y), (out,) = op.inputs, op.outputs
    share = select_p.bind(
        eq_p.bind(x, out), select_p.bind(eq_p.bind(y, out), _c(x, 0.5), _c(x, 1)), _c(x, 0)
    )
    gx = mul_p.bind(g, share)
    return [gx, sub_p.bind(g, gx) if needs(op, 1) else None]


max_p.def_grad(_extremum_grad)
min_p.def_grad(_extremum_grad)

atan2_p = binary("atan2", np.arctan2, kind="float")


@atan2_p.def_grad
def _atan2_grad(op, g):
    # atan2(x, y) = atan(x / y): d/dx = y / (x^2 + y^2), d/dy = -x / (x^2 + y^2)
    x, y = op.inputs
    r2 = add_p.bind(_sq(x), _sq(y))
    return [div_p.bind(mul_p.bind(g, y), r2) if needs(op, 0) else None,
            neg_p.bind(div_p.bind(mul_p.bind(g, x), r2)) if needs(op, 1) else None]


and_p = binary("and", np.bitwise_and, kind="intbool", commutative=True)
or_p = binary("or", np.bitwise_or, kind="intbool", commutative=True)
xor_p = binary("xor", np.bitwise_xor, kind="intbool", commutative=True)
# Shifts as NumPy's: a count of at least the width (or negative) shifts every bit out,
# leaving 0, or -1 for a right shift of a negative value.
shift_left_p = binary("shift_left", np.left_shift, kind="int")
shift_right_p = binary("shift_right", np.right_shift, kind="int")
nondifferentiable(floor_div_p, and_p, or_p, xor_p, shift_left_p, shift_right_p)

# A primitive, not a composition: Euclid's algorithm needs a loop whose length depends on
# the values (up to ~90 steps for int64), which a composition would have to unroll fully.
gcd_p = binary("gcd", np.gcd, kind="int", commutative=True)
nondifferentiable(gcd_p)

eq_p = compare("eq", np.equal)
ne_p = compare("ne", np.not_equal)
lt_p = compare("lt", np.less)  # complex: lexicographic, as NumPy
le_p = compare("le", np.less_equal)
gt_p = compare("gt", np.greater)
ge_p = compare("ge", np.greater_equal)


# -- select ----------------------------------------------------------------------------------

select_p = Primitive("select")
"""`select(pred, on_true, on_false)`: `on_true` where `pred`, else `on_false` (np.where)."""


@select_p.def_abstract_eval
def _select_abstract_eval(pred, on_true, on_false):
    check_kind("select", pred, "any")
    if pred.dtype != dtypes.bool_:
        raise DTypeError(f"select: predicate must be bool, got {pred.dtype.name}")
    shape = same_shape("select", pred, on_true, on_false)
    dtype = same_dtype("select", on_true, on_false)
    return TensorType(shape, dtype, on_true.weak and on_false.weak)


select_p.def_impl(np.where)
elementwise(select_p)
batch_elementwise(select_p)


@select_p.def_grad
def _select_grad(op, g):
    pred = op.inputs[0]
    zeros = shape_ops.zeros_like(g)
    return [None,
            select_p.bind(pred, g, zeros) if needs(op, 1) else None,
            select_p.bind(pred, zeros, g) if needs(op, 2) else None]


# -- casts -----------------------------------------------------------------------------------

convert_element_type_p = Primitive("convert_element_type")
"""The operand cast to `new_dtype` (float -> int truncates toward zero, complex -> real keeps
the real part, as NumPy)."""


@convert_element_type_p.def_abstract_eval
def _convert_abstract_eval(x, *, new_dtype, weak=False):
    dtypes.canonicalize(new_dtype, op="convert_element_type")
    return TensorType(x.shape, new_dtype, weak)


@convert_element_type_p.def_impl
def _convert_impl(x, *, new_dtype, weak=False):
    if x.dtype.kind == "c" and new_dtype.kind != "c" and new_dtype != dtypes.bool_:
        x = x.real  # NumPy's cast, without its ComplexWarning
    return x.astype(new_dtype)


elementwise(convert_element_type_p)
batch_elementwise(convert_element_type_p)


@convert_element_type_p.def_grad
def _convert_grad(op, g):
    (x,) = op.inputs
    if not dtypes.is_differentiable(x.dtype):
        return [None]
    return [convert_element_type_p.bind(g, new_dtype=x.dtype, weak=x.type.weak)]


def to_complex(x, dtype):
    """`x` (real) as the complex `dtype`."""
    return convert_element_type_p.bind(x, new_dtype=dtype)


# -- complex parts ---------------------------------------------------------------------------

real_p = unary("real", np.real, kind="complex", out_dtype=dtypes.real_dtype)
imag_p = unary("imag", np.imag, kind="complex", out_dtype=dtypes.real_dtype)
conj_p = unary("conj", np.conjugate, kind="complex")


def _complex(x, y):
    z = np.empty(np.shape(x), dtypes.complex_dtype(x.dtype))  # not x + 1j * y: 1j * inf is nan+infj
    z.real = x
    z.imag = y
    return z


complex_p = binary("complex", _complex, kind="float", out_dtype=dtypes.complex_dtype)
"""`complex(x, y)`: `x + iy` of two float32 (complex64) or float64 (complex128) operands."""

real_p.def_grad(lambda op, g: [to_complex(g, op.inputs[0].dtype)])
imag_p.def_grad(lambda op, g: [complex_p.bind(shape_ops.zeros_like(g), g)])
conj_p.def_grad(lambda op, g: [conj_p.bind(g)])


@complex_p.def_grad
def _complex_grad(op, g):
    return [real_p.bind(g) if needs(op, 0) else None,
            imag_p.bind(g) if needs(op, 1) else None]


# -- identity that stops gradients -----------------------------------------------------------

stop_gradient_p = Primitive("stop_gradient")
"""The operand unchanged; gradients do not flow through it."""

stop_gradient_p.def_abstract_eval(lambda x: x)
stop_gradient_p.def_impl(lambda x: x)
elementwise(stop_gradient_p)
batch_elementwise(stop_gradient_p)
stop_gradient_p.def_grad(lambda op, g: [None])
