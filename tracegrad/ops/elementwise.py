"""Elementwise primitives: unary and binary math, comparisons, logic, select, casts.

Binary primitives take operands of equal shapes and dtypes: broadcasting and dtype
promotion are explicit ops inserted by `tracegrad.numpy`.
"""

from __future__ import annotations

import numpy as np
import scipy.special

from tracegrad.core import dtypes
from tracegrad.core.op import Primitive
from tracegrad.core.types import TensorType
from tracegrad.errors import DTypeError
from tracegrad.ops._families import (
    ELEMENTWISE,
    NONDIFFERENTIABLE,
    binary,
    check_kind,
    compare,
    same_dtype,
    same_shape,
    unary,
)


def _logistic(x):
    # exp(-|x|) never overflows; both branches are exact to rounding.
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype, copy=False)


def _erf(x):
    return scipy.special.erf(x).astype(x.dtype, copy=False)


# -- unary math ------------------------------------------------------------------------------

neg_p = unary("neg", np.negative, kind="numeric")
neg_p.def_grad(lambda op, g: [neg_p.bind(g)])

sign_p = unary("sign", np.sign, kind="numeric")
abs_p = unary("abs", np.abs, kind="numeric")
floor_p = unary("floor", np.floor)
ceil_p = unary("ceil", np.ceil)
round_p = unary("round", np.rint)  # half to even, as np.round
exp_p = unary("exp", np.exp)
exp_p.def_grad(lambda op, g: [mul_p.bind(g, op.outputs[0])])

exp2_p = unary("exp2", np.exp2)
expm1_p = unary("expm1", np.expm1)
log_p = unary("log", np.log)
log_p.def_grad(lambda op, g: [div_p.bind(g, op.inputs[0])])

log2_p = unary("log2", np.log2)
log10_p = unary("log10", np.log10)
log1p_p = unary("log1p", np.log1p)
sqrt_p = unary("sqrt", np.sqrt)
sin_p = unary("sin", np.sin)
sin_p.def_grad(lambda op, g: [mul_p.bind(g, cos_p.bind(op.inputs[0]))])

cos_p = unary("cos", np.cos)
cos_p.def_grad(lambda op, g: [neg_p.bind(mul_p.bind(g, sin_p.bind(op.inputs[0])))])

tan_p = unary("tan", np.tan)
asin_p = unary("asin", np.arcsin)
acos_p = unary("acos", np.arccos)
atan_p = unary("atan", np.arctan)
sinh_p = unary("sinh", np.sinh)
cosh_p = unary("cosh", np.cosh)
tanh_p = unary("tanh", np.tanh)
asinh_p = unary("asinh", np.arcsinh)
acosh_p = unary("acosh", np.arccosh)
atanh_p = unary("atanh", np.arctanh)
logistic_p = unary("logistic", _logistic)
erf_p = unary("erf", _erf)

is_finite_p = unary("is_finite", np.isfinite, out_dtype=dtypes.bool_)
is_nan_p = unary("is_nan", np.isnan, out_dtype=dtypes.bool_)
is_inf_p = unary("is_inf", np.isinf, out_dtype=dtypes.bool_)
not_p = unary("not", np.invert, kind="intbool")  # logical for bool, bitwise for ints

NONDIFFERENTIABLE.update({sign_p, floor_p, ceil_p, round_p, is_finite_p, is_nan_p, is_inf_p,
                          not_p})


integer_pow_p = Primitive("integer_pow")
"""`x ** y` for a static integer `y` (attribute); `y < 0` needs a float `x`."""


@integer_pow_p.def_abstract_eval
def _integer_pow_abstract_eval(x, *, y):
    check_kind("integer_pow", x, "numeric")
    if y < 0 and not dtypes.is_float(x.dtype):
        raise DTypeError("integer_pow: negative exponent needs a float operand")
    return x


@integer_pow_p.def_impl
def _integer_pow_impl(x, *, y):
    return np.power(x, x.dtype.type(y))


ELEMENTWISE.add(integer_pow_p)


# -- binary math -----------------------------------------------------------------------------

add_p = binary("add", np.add, kind="any", commutative=True)
add_p.def_grad(lambda op, g: [g, g])

sub_p = binary("sub", np.subtract)
sub_p.def_grad(lambda op, g: [g, neg_p.bind(g)])

mul_p = binary("mul", np.multiply, kind="any", commutative=True)


@mul_p.def_grad
def _mul_grad(op, g):
    x, y = op.inputs
    return [mul_p.bind(g, y), mul_p.bind(g, x)]

div_p = binary("div", np.true_divide, kind="float")
floor_div_p = binary("floor_div", np.floor_divide)
mod_p = binary("mod", np.mod)  # NumPy's: the sign of the divisor
pow_p = binary("pow", np.power)
max_p = binary("max", np.maximum, kind="any", commutative=True)  # NaN-propagating
min_p = binary("min", np.minimum, kind="any", commutative=True)
atan2_p = binary("atan2", np.arctan2, kind="float")
and_p = binary("and", np.bitwise_and, kind="intbool", commutative=True)
or_p = binary("or", np.bitwise_or, kind="intbool", commutative=True)
xor_p = binary("xor", np.bitwise_xor, kind="intbool", commutative=True)
NONDIFFERENTIABLE.update({floor_div_p, and_p, or_p, xor_p})

eq_p = compare("eq", np.equal)
ne_p = compare("ne", np.not_equal)
lt_p = compare("lt", np.less)
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
ELEMENTWISE.add(select_p)


# -- casts -----------------------------------------------------------------------------------

convert_element_type_p = Primitive("convert_element_type")
"""The operand cast to `new_dtype` (float -> int truncates toward zero, as NumPy)."""


@convert_element_type_p.def_abstract_eval
def _convert_abstract_eval(x, *, new_dtype, weak=False):
    dtypes.canonicalize(new_dtype, op="convert_element_type")
    return TensorType(x.shape, new_dtype, weak)


@convert_element_type_p.def_impl
def _convert_impl(x, *, new_dtype, weak=False):
    return x.astype(new_dtype)


ELEMENTWISE.add(convert_element_type_p)


@convert_element_type_p.def_grad
def _convert_grad(op, g):
    (x,) = op.inputs
    if not dtypes.is_float(x.dtype):
        return [None]
    return [convert_element_type_p.bind(g, new_dtype=x.dtype, weak=x.type.weak)]


# -- identity that stops gradients -----------------------------------------------------------

stop_gradient_p = Primitive("stop_gradient")
"""The operand unchanged; gradients do not flow through it."""

stop_gradient_p.def_abstract_eval(lambda x: x)
stop_gradient_p.def_impl(lambda x: x)
ELEMENTWISE.add(stop_gradient_p)
stop_gradient_p.def_grad(lambda op, g: [None])
