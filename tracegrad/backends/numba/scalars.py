"""Scalar code for the elementwise primitives: one expression builder per primitive, and
the small helper functions some of them call (emitted into the generated module only
when used, so every module is self-contained).

Each builder returns a Python expression whose Numba type is exactly the result dtype
(int32 and float32 results are wrapped in a cast: Numba widens int32 arithmetic and
Python literals would widen float32). Semantics follow the NumPy reference: NaN-propagating
max/min, NumPy's signs for floor division and remainder, integer division by zero gives
0, round half to even, float -> int casts truncate toward zero.
"""

from __future__ import annotations

from tracegrad.core import dtypes

NB_TYPE = {
    dtypes.float64: "np.float64",
    dtypes.float32: "np.float32",
    dtypes.int64: "np.int64",
    dtypes.int32: "np.int32",
    dtypes.bool_: "np.bool_",
}
SUFFIX = {dtypes.float64: "f64", dtypes.float32: "f32", dtypes.int64: "i64",
          dtypes.int32: "i32", dtypes.bool_: "b"}


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


# -- helper functions (templates: {T} is the Numba type, {S} the dtype suffix) ------------------

_HELPERS = {
    "max_f": """
@njit(**_OPTS)
def _max_{S}(a, b):
    return a if (a > b or a != a) else b
""",
    "min_f": """
@njit(**_OPTS)
def _min_{S}(a, b):
    return a if (a < b or a != a) else b
""",
    "sign_f": """
@njit(**_OPTS)
def _sign_{S}(a):
    if a > 0:
        return {T}(1.0)
    if a < 0:
        return {T}(-1.0)
    if a == 0:
        return {T}(0.0)
    return a
""",
    "logistic": """
@njit(**_OPTS)
def _logistic_{S}(x):
    e = {T}(_exp_v(-np.abs(np.float64(x))))
    one = {T}(1.0)
    if x >= 0:
        return one / (one + e)
    return e / (one + e)
""",
    # NumPy's npy_divmod: the floor quotient and the remainder with the divisor's sign.
    "floordiv_f": """
@njit(**_OPTS)
def _floordiv_{S}(a, b):
    if b == 0:
        return a / b
    mod = np.fmod(a, b)
    div = (a - mod) / b
    if mod:
        if (b < 0) != (mod < 0):
            div -= {T}(1.0)
    if div:
        floordiv = np.floor(div)
        if div - floordiv > {T}(0.5):
            floordiv += {T}(1.0)
        return floordiv
    return {T}(0.0) * (a / b)  # a zero with the sign of the quotient
""",
    "mod_f": """
@njit(**_OPTS)
def _mod_{S}(a, b):
    mod = np.fmod(a, b)
    if b == 0:
        return mod
    if mod:
        if (b < 0) != (mod < 0):
            mod += b
    else:
        mod = {T}(-0.0) if b < 0 else {T}(0.0)
    return mod
""",
    # Integers: division by zero gives 0 (as NumPy); MIN // -1 wraps instead of trapping.
    "floordiv_i": """
@njit(**_OPTS)
def _floordiv_{S}(a, b):
    if b == 0:
        return a - a
    if b == -1:
        return -a
    return a // b
""",
    "mod_i": """
@njit(**_OPTS)
def _mod_{S}(a, b):
    if b == 0 or b == -1:
        return a - a
    return a % b
""",
    # NumPy's pairwise summation (same blocks, same order: bit-identical sums). Its
    # recursion is unrolled with explicit stacks (cached recursive functions crash Numba).
    "pairwise": """
@njit(**_OPTS)
def _pwleaf_{S}(a, lo, n):
    if n < 8:
        res = {T}(0.0)
        for i in range(lo, lo + n):
            res += a[i]
        return res
    r0, r1, r2, r3 = a[lo], a[lo + 1], a[lo + 2], a[lo + 3]
    r4, r5, r6, r7 = a[lo + 4], a[lo + 5], a[lo + 6], a[lo + 7]
    m = n - n % 8
    for i in range(lo + 8, lo + m, 8):
        r0 += a[i]
        r1 += a[i + 1]
        r2 += a[i + 2]
        r3 += a[i + 3]
        r4 += a[i + 4]
        r5 += a[i + 5]
        r6 += a[i + 6]
        r7 += a[i + 7]
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    for i in range(lo + m, lo + n):
        res += a[i]
    return res


@njit(**_OPTS)
def _pairwise_{S}(a, lo, n):
    if n <= 128:
        return _pwleaf_{S}(a, lo, n)
    los = np.empty(128, dtype=np.int64)
    ns = np.empty(128, dtype=np.int64)
    done = np.zeros(128, dtype=np.bool_)
    vals = np.empty(128, dtype={T})
    sp, vp = 1, 0
    los[0], ns[0] = lo, n
    while sp > 0:
        sp -= 1
        l, m = los[sp], ns[sp]
        if m <= 128:
            vals[vp] = _pwleaf_{S}(a, l, m)
            vp += 1
        elif done[sp]:
            vals[vp - 2] = vals[vp - 2] + vals[vp - 1]
            vp -= 1
        else:
            n2 = m // 2
            n2 -= n2 % 8
            done[sp] = True
            los[sp + 1], ns[sp + 1], done[sp + 1] = l + n2, m - n2, False
            los[sp + 2], ns[sp + 2], done[sp + 2] = l, n2, False
            sp += 3
    return vals[0]
""",
    # Bit casts between float64 and int64 (one instruction; loops stay vectorizable).
    "bits": """
from numba.core import types as _nbtypes
from numba.core.extending import intrinsic as _intrinsic


@_intrinsic
def _f64_from_bits(typingctx, x):
    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], context.get_value_type(_nbtypes.float64))
    return _nbtypes.float64(_nbtypes.int64), codegen


@_intrinsic
def _bits_of_f64(typingctx, x):
    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], context.get_value_type(_nbtypes.int64))
    return _nbtypes.int64(_nbtypes.float64), codegen
""",
    # exp, log and tanh without libm calls or branches, so that loops over them vectorize
    # (libm is 5-15x slower than NumPy's SIMD ufuncs). Accurate to ~2 ulp.
    "exp_v": """
@njit(inline="always", **_OPTS)
def _exp_v(x):
    # Cody-Waite reduction x = k ln2 + r, |r| <= ln2/2; Taylor to r**13; 2**k in two steps
    xc = x if x > -746.0 else -746.0
    xc = xc if xc < 710.0 else 710.0
    k = np.rint(xc * 1.4426950408889634)
    r = (xc - k * 0.6931471803691238) - k * 1.9082149292705877e-10
    p = 1.6059043836821613e-10
    p = p * r + 2.08767569878681e-09
    p = p * r + 2.505210838544172e-08
    p = p * r + 2.755731922398589e-07
    p = p * r + 2.7557319223985893e-06
    p = p * r + 2.48015873015873e-05
    p = p * r + 0.0001984126984126984
    p = p * r + 0.001388888888888889
    p = p * r + 0.008333333333333333
    p = p * r + 0.041666666666666664
    p = p * r + 0.16666666666666666
    p = p * r + 0.5
    p = p * r + 1.0
    p = p * r + 1.0
    ki = np.int64(k)
    k1 = ki >> 1
    y = p * _f64_from_bits((k1 + 1023) << 52) * _f64_from_bits((ki - k1 + 1023) << 52)
    y = np.inf if x > 709.782712893384 else y
    return x if x != x else y
""",
    "log_v": """
@njit(inline="always", **_OPTS)
def _log_v(x):
    # x = m 2**e with m in [sqrt(1/2), sqrt(2)); log m = 2 atanh(s), s = (m-1)/(m+1)
    tiny = x < 2.2250738585072014e-308
    xs = x * 18014398509481984.0 if tiny else x
    b = _bits_of_f64(xs)
    e = (b >> 52) - (1077 if tiny else 1023)
    m = _f64_from_bits((b & 4503599627370495) | 4607182418800017408)
    big = m > 1.4142135623730951
    m = m * 0.5 if big else m
    e = e + 1 if big else e
    s = (m - 1.0) / (m + 1.0)
    z = s * s
    p = 0.047619047619047616
    p = p * z + 0.05263157894736842
    p = p * z + 0.058823529411764705
    p = p * z + 0.06666666666666667
    p = p * z + 0.07692307692307693
    p = p * z + 0.09090909090909091
    p = p * z + 0.1111111111111111
    p = p * z + 0.14285714285714285
    p = p * z + 0.2
    p = p * z + 0.3333333333333333
    fe = np.float64(e)
    y = fe * 0.6931471803691238 + (2.0 * s + 2.0 * s * z * p + fe * 1.9082149292705877e-10)
    y = -np.inf if x == 0.0 else y
    y = np.nan if x < 0.0 else y
    y = x if x == np.inf else y
    return x if x != x else y
""",
    "tanh_v": """
@njit(inline="always", **_OPTS)
def _tanh_v(x):
    a = np.abs(x)
    e = _exp_v(-2.0 * a)
    big = (1.0 - e) / (1.0 + e)
    z = x * x
    p = -0.0014558343870513183
    p = p * z + 0.0035921280365724811
    p = p * z - 0.0088632355299021973
    p = p * z + 0.021869488536155203
    p = p * z - 0.053968253968253971
    p = p * z + 0.13333333333333333
    p = p * z - 0.33333333333333331
    small = a + a * z * p
    y = small if a < 0.1 else big
    y = -y if x < 0 else y
    return x if x == 0 or x != x else y
""",
    # Exponentiation by squaring with wrap-around, as NumPy's integer power.
    "ipow": """
@njit(**_OPTS)
def _ipow_{S}(a, b):
    out = a - a + 1
    while b > 0:
        if b & 1:
            out *= a
        a *= a
        b >>= 1
    return out
""",
}


def helper(helpers: dict, kind: str, dtype) -> str:
    """The name of helper `kind` for `dtype`, adding its source to `helpers`."""
    s = SUFFIX[dtype]
    name = {"logistic": f"_logistic_{s}"}.get(kind)
    if name is None:
        name = "_" + kind.rsplit("_", 1)[0] + "_" + s if kind.endswith(("_f", "_i")) \
            else f"_{kind}_{s}"
    if name not in helpers:
        helpers[name] = _HELPERS[kind].format(T=NB_TYPE[dtype], S=s)
    return name


def _vector_math(name: str, helpers: dict) -> str:
    """The branch-free float64 helper for `name` (exp, log, tanh), added with what it uses."""
    helpers.setdefault("_bits", _HELPERS["bits"])
    if name in ("tanh",):
        helpers.setdefault("_exp_v", _HELPERS["exp_v"])
    helpers.setdefault(f"_{name}_v", _HELPERS[f"{name}_v"])
    return f"_{name}_v"


# -- expression builders ------------------------------------------------------------------------

_UFUNC = {
    "exp": "np.exp", "exp2": "np.exp2", "expm1": "np.expm1", "log": "np.log",
    "log2": "np.log2", "log10": "np.log10", "log1p": "np.log1p", "sqrt": "np.sqrt",
    "sin": "np.sin", "cos": "np.cos", "tan": "np.tan", "asin": "np.arcsin",
    "acos": "np.arccos", "atan": "np.arctan", "sinh": "np.sinh", "cosh": "np.cosh",
    "tanh": "np.tanh", "asinh": "np.arcsinh", "acosh": "np.arccosh", "atanh": "np.arctanh",
    "floor": "np.floor", "ceil": "np.ceil", "round": "np.rint", "is_finite": "np.isfinite",
    "is_nan": "np.isnan", "is_inf": "np.isinf",
}
_INFIX = {"sub": "-", "div": "/", "and": "&", "or": "|", "xor": "^", "eq": "==",
          "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


def scalar_expr(name: str, args: list, in_dtypes: list, out_dtype, attrs: dict,
                helpers: dict) -> str:
    """The scalar expression of elementwise primitive `name` applied to `args`."""
    x = in_dtypes[0] if in_dtypes else out_dtype
    fl = dtypes.is_float(x)
    if name in ("exp", "log", "tanh"):
        fn = _vector_math(name, helpers)
        if x == dtypes.float32:
            return f"np.float32({fn}(np.float64({args[0]})))"
        return f"{fn}({args[0]})"
    if name in ("exp2", "log2") and x == dtypes.float32:
        # Numba declares llvm.exp2 / llvm.log2 untyped, once per module: a float32 call
        # next to a float64 one breaks the module, so every call is float64
        return f"np.float32({_UFUNC[name]}(np.float64({args[0]})))"
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
        _vector_math("exp", helpers)
        return f"{helper(helpers, 'logistic', x)}({a})"
    if name == "erf":
        if x == dtypes.float64:
            return f"math.erf({a})"
        return f"np.float32(math.erf(np.float64({a})))"
    if name == "integer_pow":
        y = attrs["y"]
        if fl and 1 <= abs(y) <= 4:  # a product: exact to an ulp, and no libm pow call
            prod = {1: "{a}", 2: "({a} * {a})", 3: "({a} * {a} * {a})",
                    4: "(({a} * {a}) * ({a} * {a}))"}[abs(y)].format(a=a)
            return typed(prod if y > 0 else f"({literal(1, x)} / {prod})", x)
        if fl:
            return typed(f"({a} ** {literal(y, x)})", x)
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
    if name == "pow":
        if fl:
            return typed(f"({a} ** {b})", x)
        return typed(f"{helper(helpers, 'ipow', dtypes.int64)}(np.int64({a}), np.int64({b}))",
                     x)
    if name == "atan2":
        return typed(f"np.arctan2({a}, {b})", x)
    raise KeyError(name)


# Elementwise primitives whose Numba code is `scalar_expr` (the completeness test reads this).
SCALAR_PRIMITIVES = (
    set(_UFUNC) | set(_INFIX)
    | {"stop_gradient", "neg", "abs", "sign", "not", "logistic", "erf", "integer_pow",
       "convert_element_type", "select", "add", "mul", "max", "min", "floor_div", "mod",
       "pow", "atan2"}
)
