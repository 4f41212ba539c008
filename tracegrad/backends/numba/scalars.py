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

from tracegrad.backends.numba.helpers import FAST, NB_TYPE, helper, vector_math
from tracegrad.backends.numba.lowering import (
    CHEAP,
    COSTLY,
    ELEMENTWISE,
    Lowering,
    lowering,
    register,
)
from tracegrad.backends.numba.records import slot
from tracegrad.core import dtypes
from tracegrad.errors import InvalidArgumentError
from tracegrad.ops import elementwise as ew
from tracegrad.ops import special as sp
from tracegrad.ops.random_bits import threefry2x32_p

_WIDE = frozenset((dtypes.float64, dtypes.int64, dtypes.bool_, dtypes.complex128))


def typed(expr: str, dtype) -> str:
    """`expr` cast to `dtype` where Numba could give a wider type (a float16 result is
    rounded to float16 and held as a float32: helpers.STORAGE)."""
    if dtype == dtypes.float16:
        return f"_f16({expr})"
    if dtype not in _WIDE:
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


# -- expression builders: one per elementwise primitive, registered with its lowering ---------


def _vector_call(fn: str, args: list, dtype) -> str:
    fn = slot(fn)  # renamed for a re-run with the full reduction (records.full_reduction)
    if dtype in (dtypes.float32, dtypes.float16):
        return typed(f"{fn}({', '.join(f'np.float64({a})' for a in args)})", dtype)
    return f"{fn}({', '.join(args)})"


def scalar_expr(prim, args: list, in_dtypes: list, out_dtype, attrs: dict,
                helpers: dict, fast: bool = False) -> str:
    """The scalar expression of elementwise primitive `prim` applied to `args` (`fast`: a
    sin, cos or tan with the fast range reduction, `FAST`)."""
    rec = lowering(prim)
    x = in_dtypes[0] if in_dtypes else out_dtype
    if rec.complex is not None and dtypes.is_complex(x):
        return rec.complex(args, x, out_dtype, attrs, helpers)
    if rec.vector_math is not None and dtypes.is_float(x):
        fn = vector_math(rec.vector_math, helpers)
        if fast:
            fn = FAST[fn]
            helpers[fn] = None
        return _vector_call(fn, args, x)
    return rec.scalar(args, x, out_dtype, attrs, helpers)


def _elementwise(prim, scalar=None, *, cost=CHEAP, **fields):
    register(prim, Lowering(ELEMENTWISE, cost=cost, scalar=scalar, **fields))


def _wide_complex(arg: str, dtype) -> str:
    """A complex operand as complex128: complex64 math is computed in complex128 and rounded,
    as float32 math in float64."""
    return arg if dtype == dtypes.complex128 else f"np.complex128({arg})"


def _complex_ufunc(fn: str):
    """Complex scalars through Numba's `fn` (its ports of NumPy's npymath functions)."""
    return lambda args, x, out, attrs, helpers: typed(f"{fn}({_wide_complex(args[0], x)})", out)


def _complex_helper(kind: str):
    """Complex scalars through the helper `kind` of helpers.py, in complex128."""
    def scalar(args, x, out, attrs, helpers):
        fn = helper(helpers, kind, dtypes.complex128)
        return typed(f"{fn}({', '.join(_wide_complex(a, x) for a in args)})", out)
    return scalar


# Float primitives computed by vecmath.py's branch-free `_<name>_v` (float32 in float64,
# rounded); sin, cos and tan have a fast range reduction, and sin and cos a shared one.
# Complex operands go through Numba's complex functions, or a helper where those lose
# accuracy or speed (exp in vector math, expm1 near 0, tanh past the overflow of sinh).
for _prim, _f, _c in ((ew.exp_p, "exp", None), (ew.exp2_p, "exp2", "np.exp2"),
                      (ew.expm1_p, "expm1", None), (ew.log_p, "log", "np.log"),
                      (ew.log2_p, "log2", "np.log2"), (ew.log10_p, "log10", "np.log10"),
                      (ew.log1p_p, "log1p", "np.log1p"), (ew.asin_p, "asin", "np.arcsin"),
                      (ew.acos_p, "acos", "np.arccos"), (ew.atan_p, "atan", "np.arctan"),
                      (ew.sinh_p, "sinh", "np.sinh"), (ew.cosh_p, "cosh", "np.cosh"),
                      (ew.tanh_p, "tanh", None), (ew.asinh_p, "asinh", "np.arcsinh"),
                      (ew.acosh_p, "acosh", "np.arccosh"), (ew.atanh_p, "atanh", "np.arctanh")):
    _elementwise(_prim, cost=COSTLY, vector_math=_f,
                 complex=_complex_ufunc(_c) if _c else _complex_helper(_f + "_c"))
_elementwise(ew.erf_p, cost=COSTLY, vector_math="erf")
_elementwise(ew.sin_p, cost=COSTLY, vector_math="sin", fast_trig=True, sin_cos=0,
             complex=_complex_ufunc("np.sin"))
_elementwise(ew.cos_p, cost=COSTLY, vector_math="cos", fast_trig=True, sin_cos=1,
             complex=_complex_ufunc("np.cos"))
_elementwise(ew.tan_p, cost=COSTLY, vector_math="tan", fast_trig=True,
             complex=_complex_ufunc("np.tan"))


def _ufunc(fn: str):
    return lambda args, x, out, attrs, helpers: typed(f"{fn}({args[0]})", out)


_elementwise(ew.sqrt_p, _ufunc("np.sqrt"), cost=COSTLY, complex=_complex_helper("sqrt_c"))
_elementwise(ew.floor_p, _ufunc("np.floor"))
_elementwise(ew.ceil_p, _ufunc("np.ceil"))
_elementwise(ew.round_p, _ufunc("np.rint"))
_elementwise(ew.is_finite_p, _ufunc("np.isfinite"))
_elementwise(ew.is_nan_p, _ufunc("np.isnan"))
_elementwise(ew.is_inf_p, _ufunc("np.isinf"))


def _infix(sym: str):
    return lambda args, x, out, attrs, helpers: typed(f"({args[0]} {sym} {args[1]})", out)


for _prim, _sym in ((ew.sub_p, "-"), (ew.and_p, "&"), (ew.or_p, "|"), (ew.xor_p, "^"),
                    (ew.eq_p, "=="), (ew.ne_p, "!=")):
    _elementwise(_prim, _infix(_sym))


def _complex_binary(kind: str):
    """Two complex operands through the helper `kind` of helpers.py, in their dtype."""
    def scalar(args, x, out, attrs, helpers):
        return f"{helper(helpers, kind, x)}({args[0]}, {args[1]})"
    return scalar


for _prim, _sym, _k in ((ew.lt_p, "<", "lt_c"), (ew.le_p, "<=", "le_c"),
                        (ew.gt_p, ">", "gt_c"), (ew.ge_p, ">=", "ge_c")):
    _elementwise(_prim, _infix(_sym), complex=_complex_binary(_k))
_elementwise(ew.div_p, _infix("/"), cost=COSTLY, complex=_complex_binary("div_c"))

_elementwise(ew.stop_gradient_p, lambda args, x, out, attrs, helpers: args[0])
_elementwise(ew.neg_p, lambda args, x, out, attrs, helpers: typed(f"(-{args[0]})", out))
_elementwise(ew.abs_p, lambda args, x, out, attrs, helpers: typed(
    f"np.abs({args[0]})" if dtypes.is_float(x) else f"abs({args[0]})", out),
    complex=_complex_helper("abs_c"))
_elementwise(ew.sign_p, lambda args, x, out, attrs, helpers: (
    f"{helper(helpers, 'sign_f', x)}({args[0]})" if dtypes.is_float(x)
    else typed(f"({args[0]} != 0)", x) if dtypes.is_unsigned(x)
    else typed(f"np.sign({args[0]})", x)), complex=_complex_helper("sign_c"))
_elementwise(ew.not_p, lambda args, x, out, attrs, helpers: (
    f"(not {args[0]})" if x == dtypes.bool_ else typed(f"(~{args[0]})", x)))


def _logistic(args, x, out, attrs, helpers):
    vector_math("exp", helpers)
    return f"{helper(helpers, 'logistic', x)}({args[0]})"


_elementwise(ew.logistic_p, _logistic, cost=COSTLY)


def _integer_pow(args, x, out, attrs, helpers):
    a, y, fl = args[0], attrs["y"], dtypes.is_float(x)
    if dtypes.is_complex(x):  # NumPy's repeated squaring
        fn = helper(helpers, "ipow_c", dtypes.complex128)
        return typed(f"{fn}({_wide_complex(a, x)}, {int(y)})", x)
    if fl and 1 <= abs(y) <= 4:  # a product: exact to an ulp, and no libm pow call
        prod = {1: "{a}", 2: "({a} * {a})", 3: "({a} * {a} * {a})",
                4: "(({a} * {a}) * ({a} * {a}))"}[abs(y)].format(a=a)
        return typed(prod if y > 0 else f"({literal(1, x)} / {prod})", x)
    if fl:
        return _vector_call(vector_math("pow", helpers), [a, repr(float(y))], x)
    return typed(f"{helper(helpers, 'ipow', dtypes.int64)}(np.int64({a}), {int(y)})", x)


_elementwise(ew.integer_pow_p, _integer_pow)


def _convert(args, x, out, attrs, helpers):
    a, new = args[0], attrs["new_dtype"]
    if new == dtypes.bool_:
        return a if x == dtypes.bool_ else f"({a} != 0)"
    if x == new:
        return a
    if dtypes.is_complex(x) and not dtypes.is_complex(new):
        a = f"{a}.real"  # NumPy's cast keeps the real part
    elif dtypes.is_complex(new) and x == dtypes.bool_:
        a = f"np.float64({a})"
    if new == dtypes.float16:
        return typed(f"np.float64({a})", new)  # one rounding, as NumPy's casts
    return f"{NB_TYPE[new]}({a})"


_elementwise(ew.convert_element_type_p, _convert)
_elementwise(ew.select_p, lambda args, x, out, attrs, helpers:
             f"({args[1]} if {args[0]} else {args[2]})")
_elementwise(ew.add_p, lambda args, x, out, attrs, helpers: (
    f"({args[0]} | {args[1]})" if x == dtypes.bool_
    else typed(f"({args[0]} + {args[1]})", x)))
_elementwise(ew.mul_p, lambda args, x, out, attrs, helpers: (
    f"({args[0]} & {args[1]})" if x == dtypes.bool_
    else typed(f"({args[0]} * {args[1]})", x)))


def _extremum(kind: str, bool_op: str):
    """NaN-propagating max or min (`kind`); `bool_op` for bools."""
    def scalar(args, x, out, attrs, helpers):
        a, b = args
        if x == dtypes.bool_:
            return f"({a} {bool_op} {b})"
        if dtypes.is_complex(x):
            return f"{helper(helpers, kind + '_c', x)}({a}, {b})"
        if dtypes.is_float(x):
            return f"{helper(helpers, kind + '_f', x)}({a}, {b})"
        return typed(f"{kind}({a}, {b})", x)
    return scalar


_elementwise(ew.max_p, _extremum("max", "|"))
_elementwise(ew.min_p, _extremum("min", "&"))


def _numpy_division(kind: str):
    """NumPy's floor division or remainder (`kind`: the helper's name)."""
    def scalar(args, x, out, attrs, helpers):
        fn = helper(helpers, kind + ("_f" if dtypes.is_float(x) else "_i"), x)
        return typed(f"{fn}({args[0]}, {args[1]})", x)
    return scalar


_elementwise(ew.floor_div_p, _numpy_division("floordiv"), cost=COSTLY)
_elementwise(ew.mod_p, _numpy_division("mod"), cost=COSTLY)
_elementwise(ew.gcd_p, lambda args, x, out, attrs, helpers: typed(
    f"{helper(helpers, 'gcd_i', x)}({args[0]}, {args[1]})", x), cost=COSTLY)


def _shift(sym: str):
    """`x << y` or `x >> y` (`sym`) with NumPy's result for counts past the width (or
    negative), where LLVM's shift is undefined: 0, or `x >> (width - 1)` (-1 or 0) for a
    right shift of a signed integer."""
    def scalar(args, x, out, attrs, helpers):
        a, b = args
        width = dtypes.bits(x)
        past = (f"({a} >> {width - 1})" if sym == ">>" and not dtypes.is_unsigned(x)
                else literal(0, x))
        return typed(f"(({a} {sym} {b}) if np.uint64({b}) < {width} else {past})", x)
    return scalar


_elementwise(ew.shift_left_p, _shift("<<"))
_elementwise(ew.shift_right_p, _shift(">>"))


def _int_pow(args, x, out, attrs, helpers):  # floats are vector math
    return typed(f"{helper(helpers, 'ipow', dtypes.int64)}(np.int64({args[0]}), "
                 f"np.int64({args[1]}))", x)


def _pow_error(args, where):
    return InvalidArgumentError(
        f"pow: integers to negative integer powers are not allowed {where}")


_elementwise(ew.pow_p, _int_pow, cost=COSTLY, vector_math="pow",
             guard=lambda args, x: None if dtypes.is_inexact(x) else f"{args[1]} < 0",
             error=_pow_error, complex=_complex_helper("pow_c"))
_elementwise(ew.atan2_p, cost=COSTLY, vector_math="atan2")


# -- special functions: SciPy's compiled cython_special functions (helpers._CYTHON_SPECIAL) --


def _cython_special(name: str):
    """The scalar builder calling SciPy's `cython_special.<name>` (float64; float32 and
    float16 computed in float64 and rounded, as SciPy's float32 loops)."""
    def scalar(args, x, out, attrs, helpers):
        fn = f"_cs_{name}"
        helpers[fn] = None
        return typed(f"{fn}({', '.join(f'np.float64({a})' for a in args)}, 0)", out)
    return scalar


for _prim, _name in ((sp.digamma_p, "psi"),
                     (sp.erfinv_p, "erfinv"), (sp.ndtri_p, "ndtri"),
                     (sp.i0e_p, "i0e"), (sp.i1e_p, "i1e"),
                     (sp.igamma_p, "gammainc"), (sp.igammac_p, "gammaincc"),
                     (sp.gamma_p, "gamma"), (sp.erfcinv_p, "erfcinv"),
                     (sp.logit_p, "logit"), (sp.i0_p, "i0"), (sp.i1_p, "i1"),
                     (sp.betaln_p, "betaln"), (sp.beta_p, "beta"),
                     (sp.betainc_p, "betainc"), (sp.betaincc_p, "betaincc")):
    _elementwise(_prim, _cython_special(_name), cost=COSTLY)


# vecmath_special.py
_elementwise(sp.log_ndtr_p, cost=COSTLY, vector_math="log_ndtr")
_elementwise(sp.ndtr_p, cost=COSTLY, vector_math="ndtr")
_elementwise(sp.erfc_p, cost=COSTLY, vector_math="erfc")
_elementwise(sp.lgamma_p, cost=COSTLY, vector_math="lgamma")


def _zeta(args, x, out, attrs, helpers):
    helpers["_zeta"] = None
    return typed(f"_zeta(np.float64({args[0]}), np.float64({args[1]}))", out)


_elementwise(sp.zeta_p, _zeta, cost=COSTLY)


def _incomplete(name: str, *extra: str):
    """The scalar builder calling helper `name` of backends/numba/incomplete.py (float64),
    with the SciPy functions it calls imported first."""
    def scalar(args, x, out, attrs, helpers):
        helpers.update(dict.fromkeys((name, "_cs_gammaln", "_cs_psi", "_cs_betaln")))
        return typed(f"{name}({', '.join([f'np.float64({a})' for a in args] + list(extra))})",
                     out)
    return scalar


_elementwise(sp.igamma_grad_a_p, _incomplete("_igamma_grad_a"), cost=COSTLY)
_elementwise(sp.betainc_grad_a_p, _incomplete("_betainc_grad", "0"), cost=COSTLY)
_elementwise(sp.betainc_grad_b_p, _incomplete("_betainc_grad", "1"), cost=COSTLY)

def _threefry(args, x, out, attrs, helpers):
    helpers["_threefry2x32"] = None
    return f"_threefry2x32({', '.join(args)})"


_elementwise(threefry2x32_p, _threefry, cost=COSTLY)

# -- complex parts ---------------------------------------------------------------------------

_elementwise(ew.real_p, lambda args, x, out, attrs, helpers: f"{args[0]}.real")
_elementwise(ew.imag_p, lambda args, x, out, attrs, helpers: f"{args[0]}.imag")
_elementwise(ew.conj_p, lambda args, x, out, attrs, helpers: f"{args[0]}.conjugate()")
_elementwise(ew.complex_p, lambda args, x, out, attrs, helpers: typed(
    f"complex({args[0]}, {args[1]})", out))
