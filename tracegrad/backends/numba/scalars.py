"""Scalar code for the elementwise primitives: one expression builder per primitive, and
the small helper functions some of them call (emitted into the generated module only
when used, so every module is self-contained).

Helpers (NumPy's floor division and remainder, NaN-propagating max/min, and the vectorizable
float64 libm of vecmath.py: exp, log, sin, pow, erf ...) live in the shared module of
`helpers.py`. Each builder returns a Python expression whose Numba type is exactly the
result dtype (int32 and float32 results are wrapped in a cast: Numba widens int32
arithmetic and Python literals would widen float32). Semantics follow the NumPy reference:
NaN-propagating max/min, NumPy's signs for floor division and remainder, integer division
by zero gives 0, round half to even, float -> int casts truncate toward zero.
"""

from __future__ import annotations

from tracegrad.backends.numba.helpers import NB_TYPE, helper, vector_math
from tracegrad.core import dtypes


def typed(expr: str, dtype) -> str:
    """`expr` cast to `dtype` where Numba could give a wider type."""
    if dtype in (dtypes.float32, dtypes.int32):
        return f"{NB_TYPE[dtype]}({expr})"
    return expr


def literal(value, dtype) -> str:
    """A literal of `dtype` (only used for identities and fixed numbers, never for sizes)."""
    if dtype == dtypes.bool_:
        return "True" if value else "False"
    if dtypes.is_float(dtype):
        text = repr(float(value))
        if text in ("inf", "-inf"):
            text = f"np.{text}" if text == "inf" else "-np.inf"
        return f"{NB_TYPE[dtype]}({text})"
    return f"{NB_TYPE[dtype]}({int(value)})"


# -- expression builders ------------------------------------------------------------------------

# Float primitives computed by vecmath.py's branch-free `_<name>_v` (float32 in float64, rounded)
_VECTOR_MATH = {
    "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan", "asin",
    "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf",
}
_UFUNC = {
    "sqrt": "np.sqrt", "floor": "np.floor", "ceil": "np.ceil", "round": "np.rint",
    "is_finite": "np.isfinite", "is_nan": "np.isnan", "is_inf": "np.isinf",
}
_INFIX = {"sub": "-", "div": "/", "and": "&", "or": "|", "xor": "^", "eq": "==",
          "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


def _vector_call(fn: str, args: list, dtype) -> str:
    if dtype == dtypes.float32:
        return f"np.float32({fn}({', '.join(f'np.float64({a})' for a in args)}))"
    return f"{fn}({', '.join(args)})"


def scalar_expr(name: str, args: list, in_dtypes: list, out_dtype, attrs: dict,
                helpers: dict) -> str:
    """The scalar expression of elementwise primitive `name` applied to `args`."""
    x = in_dtypes[0] if in_dtypes else out_dtype
    fl = dtypes.is_float(x)
    if name in _VECTOR_MATH or (name in ("pow", "atan2") and fl):
        return _vector_call(vector_math(name, helpers), args, x)
    if name in _UFUNC:
        return typed(f"{_UFUNC[name]}({args[0]})", out_dtype)
    if name in _INFIX:
        return typed(f"({args[0]} {_INFIX[name]} {args[1]})", out_dtype)
    a = args[0]
    if name in ("stop_gradient",):
        return a
    if name == "neg":
        return typed(f"(-{a})", out_dtype)
    if name == "abs":
        return typed(f"np.abs({a})" if fl else f"abs({a})", out_dtype)
    if name == "sign":
        return f"{helper(helpers, 'sign_f', x)}({a})" if fl else typed(f"np.sign({a})", x)
    if name == "not":
        return f"(not {a})" if x == dtypes.bool_ else typed(f"(~{a})", x)
    if name == "logistic":
        vector_math("exp", helpers)
        return f"{helper(helpers, 'logistic', x)}({a})"
    if name == "integer_pow":
        y = attrs["y"]
        if fl and 1 <= abs(y) <= 4:  # a product: exact to an ulp, and no libm pow call
            prod = {1: "{a}", 2: "({a} * {a})", 3: "({a} * {a} * {a})",
                    4: "(({a} * {a}) * ({a} * {a}))"}[abs(y)].format(a=a)
            return typed(prod if y > 0 else f"({literal(1, x)} / {prod})", x)
        if fl:
            return _vector_call(vector_math("pow", helpers), [a, repr(float(y))], x)
        return typed(f"{helper(helpers, 'ipow', dtypes.int64)}(np.int64({a}), {int(y)})", x)
    if name == "convert_element_type":
        new = attrs["new_dtype"]
        if new == dtypes.bool_:
            return a if x == dtypes.bool_ else f"({a} != 0)"
        if x == new:
            return a
        return f"{NB_TYPE[new]}({a})"
    if name == "select":
        return f"({args[1]} if {a} else {args[2]})"
    b = args[1]
    if name == "add":
        return f"({a} | {b})" if x == dtypes.bool_ else typed(f"({a} + {b})", x)
    if name == "mul":
        return f"({a} & {b})" if x == dtypes.bool_ else typed(f"({a} * {b})", x)
    if name in ("max", "min"):
        if x == dtypes.bool_:
            return f"({a} | {b})" if name == "max" else f"({a} & {b})"
        if fl:
            return f"{helper(helpers, name + '_f', x)}({a}, {b})"
        return typed(f"{name}({a}, {b})", x)
    if name in ("floor_div", "mod"):
        kind = ("floordiv" if name == "floor_div" else "mod") + ("_f" if fl else "_i")
        return typed(f"{helper(helpers, kind, x)}({a}, {b})", x)
    if name == "pow":  # integers (floats are vector math)
        return typed(f"{helper(helpers, 'ipow', dtypes.int64)}(np.int64({a}), np.int64({b}))",
                     x)
    raise KeyError(name)


# Elementwise primitives whose Numba code is `scalar_expr` (the completeness test reads this).
SCALAR_PRIMITIVES = (
    _VECTOR_MATH | set(_UFUNC) | set(_INFIX)
    | {"stop_gradient", "neg", "abs", "sign", "not", "logistic", "erf", "integer_pow",
       "convert_element_type", "select", "add", "mul", "max", "min", "floor_div", "mod",
       "pow", "atan2"}
)
