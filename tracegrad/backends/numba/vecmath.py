"""Branch-free float64 libm for generated kernels: the vector-math part of the helper module.

A loop that calls libm does not vectorize (and libm is 5-30x slower than a SIMD loop), so
kernels call these instead: range reduction with exactly representable constant pieces,
polynomials, double-double arithmetic where one double is not enough (fma, two-sum), tables
read by index (gathers: few, they are slow), and selects instead of branches; special values
(signed zeros, inf, NaN, subnormals, overflow) are selects too. Every function is within 4
ulp of NumPy over all doubles (tests/backends/test_numba_vector_math.py); sin, cos, tan and
the inverse trigonometric functions are in vecmath_trig.py.

`TEMPLATES` holds the module text (in dependency order) that `helpers.py` appends to its
module source. Constants are derived here from exact values (Taylor coefficients as
rationals, ln 2 / ln 10 by `decimal`, pi by Machin's formula in integers) and formatted into
the text as the nearest doubles. The literal ones: minimax coefficients (atan, asin, erf)
fitted by least squares on Chebyshev nodes at 60 digits with mpmath, then checked after
rounding to doubles; fdlibm's sin/cos kernels and ln2 split. The tables (2/pi's bits, pow's
logs and powers of two) are computed when the helper module is imported, by the functions
whose source is embedded below.
"""

from __future__ import annotations

import inspect
from decimal import Decimal, localcontext
from fractions import Fraction
from math import factorial, frexp

import numpy as np

# -- exact constants and code generation --------------------------------------------------------


def pi_fixed(bits):
    # pi * 2**bits, exactly rounded down, by Machin's formula in integers
    def atan_inv(k):
        one = 1 << (bits + 16)
        total, term, n, sign = 0, one // k, 1, 1
        while term:
            total += sign * (term // n)
            term //= k * k
            n += 2
            sign = -sign
        return total
    return (16 * atan_inv(5) - 4 * atan_inv(239)) >> 16


PI = Fraction(pi_fixed(200), 1 << 200)
with localcontext() as _ctx:
    _ctx.prec = 60
    _LN2 = Fraction(Decimal(2).ln())
    _LN10 = Fraction(Decimal(10).ln())


def nearest(q) -> str:
    """The nearest double of exact `q`, as Python source."""
    return repr(float(q))


def _split(q, bits: int) -> tuple[str, str]:
    """`q` as hi + lo, hi with `bits` significant bits (so that n * hi is exact for small n)."""
    scale = Fraction(2) ** (bits - frexp(float(q))[1])
    hi = Fraction(round(q * scale)) / scale
    return nearest(hi), nearest(q - hi)


def horner(var: str, coefs, acc: str = "p") -> str:
    """Lines evaluating sum(coefs[i] * var**i) into `acc` (coefficients as source text)."""
    lines = [f"    {acc} = {coefs[-1]}"]
    lines += [f"    {acc} = _fma({acc}, {var}, {c})" for c in reversed(coefs[:-1])]
    return "\n".join(lines)


def estrin(var: str, coefs, acc: str = "p") -> str:
    """Lines evaluating sum(coefs[i] * var**i) into `acc` by Estrin's scheme: pairs of
    terms summed, then pairs of those with `var**2`, `var**4`, ...: a chain of about
    log2(n) + 2 dependent operations instead of Horner's n (a loop of exp on AVX2, one
    vector of 4 a step, waited on Horner's 11 fused multiply-adds)."""
    lines, level, k = [], list(coefs), 0
    power = var
    while len(level) > 1:
        if k:
            lines.append(f"    {acc}_x{k} = {power} * {power}")
            power = f"{acc}_x{k}"
        nxt = []
        for i in range(0, len(level), 2):
            name = f"{acc}_{k}_{i // 2}"
            value = level[i] if i + 1 == len(level) else \
                f"_fma({level[i + 1]}, {power}, {level[i]})"
            lines.append(f"    {name} = {value}")
            nxt.append(name)
        level, k = nxt, k + 1
    lines.append(f"    {acc} = {level[0]}")
    return "\n".join(lines)


_LN2_HI, _LN2_LO = "0.6931471803691238", "1.9082149292705877e-10"  # fdlibm's: k * hi is exact
_INV_LN2 = nearest(1 / _LN2)
_INV_LN10 = nearest(1 / _LN10)
_LG2_HI, _LG2_LO = _split(_LN2 / _LN10, 32)  # log10(2)
# (exp(r) - 1 - r) / r**2 on |r| <= ln2/2 by a polynomial of degree 9: the Chebyshev
# approximation (near minimax) that mpmath.chebyfit finds at 60 digits, its error 1.05e-16,
# 1.3e-17 once multiplied by r**2 (Taylor's series needed degree 11: two more multiply-adds)
_EXPM1_P = ["0.5000000000000001", "0.16666666666666669", "0.041666666666624164",
            "0.008333333333330065", "0.0013888888917196719", "0.00019841269863040545",
            "2.4801521322368692e-05", "2.7557268480310024e-06", "2.7620075879983367e-07",
            "2.5100375832561234e-08"]
# 2**r = sum (r ln2)**n / n!, |r| <= 1/2, to r**13
_EXP2_P = [nearest(_LN2 ** n / factorial(n)) for n in range(14)]
# (log((1+s)/(1-s)) - 2s) / (2s z) = sum z**n / (2n + 3), z = s*s, to z**9
_LOG_P = [nearest(Fraction(1, 2 * n + 3)) for n in range(10)]
# (sinh(x) - x) / x**3 = sum z**n / (2n + 3)!, z = x*x <= 1, to x**19
_SINH_P = [nearest(Fraction(1, factorial(2 * n + 3))) for n in range(9)]
# erf(x) / x in z = x*x <= 9/16: minimax, relative error 1.4e-17
_ERF_P = ["1.1283791670955126", "-0.37612638903183715", "0.11283791670952614",
          "-0.026866170644432634", "0.005223977615468456", "-0.0008548326191937064",
          "0.00012055289695813212", "-1.49241995108526e-05", "1.6430732584664375e-06",
          "-1.594047158458334e-07", "1.1473938021612258e-08"]
# erfc(a) exp(a*a) (1 + 2a) in t = (a - 5/2) / (a + 5/2), a in [3/4, 6]: minimax, 2.3e-17
_ERFC_Q = ["1.2648381843668615", "-0.12235676308240431", "-0.09902453957359761",
           "0.15762991902322346", "-0.10296705603905591", "0.03276089326792039",
           "0.000931892838459438", "-0.004382078300892844", "0.0004918653675044792",
           "0.0006321233496334554", "-8.847432484074593e-05", "-0.00011350916860181965",
           "6.238795166027078e-06", "2.260404606193898e-05", "2.6605938902753294e-06",
           "-3.862194339659415e-06", "-1.4563922692261273e-06"]


def python_source(*funcs) -> str:
    """The source of plain Python functions, for the module to run when it is imported."""
    return "\n\n".join(inspect.getsource(f) for f in funcs)


TEMPLATES: dict[str, str] = {}
# the forced-inline `_<f>_v` functions of TEMPLATES and their arguments, in their order
# (each gets a called twin in the helper module: helpers.CALLED)
INLINED = (("_exp_v", "x"), ("_expm1_v", "x"), ("_exp2_v", "x"), ("_log_v", "x"),
           ("_log2_v", "x"), ("_log10_v", "x"), ("_log1p_v", "x"), ("_tanh_v", "x"),
           ("_sinh_v", "x"), ("_cosh_v", "x"), ("_asinh_v", "x"), ("_acosh_v", "x"),
           ("_atanh_v", "x"), ("_erf_v", "x"), ("_pow_v", "x, y"))

# Bit casts between float64 and int64, and fused multiply-add (one instruction each; loops
# stay vectorizable).
TEMPLATES["bits"] = """
from numba.core import types as _nbtypes
from numba.core.extending import intrinsic as _intrinsic

_F64 = _nbtypes.float64


@_intrinsic
def _f64_from_bits(typingctx, x):
    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], context.get_value_type(_F64))
    return _F64(_nbtypes.int64), codegen


@_intrinsic
def _bits_of_f64(typingctx, x):
    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], context.get_value_type(_nbtypes.int64))
    return _nbtypes.int64(_F64), codegen


def _prefer_vector_width(bits):
    # an intrinsic that gives the function calling it LLVM's "prefer-vector-width" attribute:
    # the width its loops are vectorized for (LLVM's default on most AVX-512 CPUs is 256)
    @_intrinsic
    def width(typingctx):
        def codegen(context, builder, sig, args):
            set.add(builder.function.attributes, f'"prefer-vector-width"="{bits}"')
            return context.get_dummy_value()
        return _nbtypes.none(), codegen
    return width


_vector_width_256 = _prefer_vector_width(256)
_vector_width_512 = _prefer_vector_width(512)


@_intrinsic
def _fma(typingctx, a, b, c):
    # a * b + c with one rounding (llvm.fma: one instruction where the CPU has FMA)
    def codegen(context, builder, sig, args):
        return builder.fma(*args)
    return _F64(_F64, _F64, _F64), codegen


@njit(cache=True, forceinline=True, **_OPTS)
def _copysign(a, b):
    return _f64_from_bits((_bits_of_f64(a) & 9223372036854775807)
                          | (_bits_of_f64(b) & -9223372036854775808))


@njit(cache=True, forceinline=True, **_OPTS)
def _two_sum(a, b):
    # a + b = s + err exactly
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


@njit(cache=True, forceinline=True, **_OPTS)
def _int_of(k):
    # integral float k, |k| < 2**51, as an int64, from the bits of k + 1.5 * 2**52: no
    # float-to-int64 conversion, which AVX2 does not have for vectors (LLVM would convert
    # lane by lane, scalar)
    return _bits_of_f64(k + 6755399441055744.0) - 4843621399236968448


@njit(cache=True, forceinline=True, **_OPTS)
def _float_of(i):
    # int64 i, |i| < 2**51, as a float64: _int_of the other way
    return _f64_from_bits(i + 4843621399236968448) - 6755399441055744.0


@njit(cache=True, forceinline=True, **_OPTS)
def _scale2(p, k):
    # p * 2**k for integral float k in [-2044, 2046], in two exact steps (no overflow on the way)
    ki = _int_of(k)
    k1 = ki >> 1
    return p * _f64_from_bits((k1 + 1023) << 52) * _f64_from_bits((ki - k1 + 1023) << 52)
"""

# exp, expm1, exp2: x = k ln2 + r with |r| <= ln2/2 (k ln2hi is exact), then a polynomial.
TEMPLATES["exp_v"] = f"""
@njit(cache=True, forceinline=True, **_OPTS)
def _exp_reduce(xc):
    k = np.rint(xc * {_INV_LN2})
    return k, _fma(-k, {_LN2_LO}, _fma(-k, {_LN2_HI}, xc))


@njit(cache=True, forceinline=True, **_OPTS)
def _expm1_poly(r):
    # exp(r) - 1 for |r| <= ln2/2: r + r**2 p(r), p of degree 9 (_EXPM1_P)
{estrin("r", _EXPM1_P)}
    return _fma(r * r, p, r)


@njit(cache=True, forceinline=True, **_OPTS)
def _exp_v(x):
    # the clamps keep a NaN (it compares false, so each select returns x: one maxpd/minpd
    # on x86), which then passes through every step to the result
    xc = -746.0 if x < -746.0 else x
    xc = 710.0 if xc > 710.0 else xc
    k, r = _exp_reduce(xc)
    y = _scale2(1.0 + _expm1_poly(r), k)
    return np.inf if x > 709.782712893384 else y


@njit(cache=True, forceinline=True, **_OPTS)
def _expm1_v(x):
    # 2**k (q + 1) - 1 = 2**k q + (2**k - 1), exact but for one rounding while |k| <= 53
    xc = x if x > -60.0 else -60.0
    xc = xc if xc < 710.0 else 710.0
    k, r = _exp_reduce(xc)
    q = _expm1_poly(r)
    s = _f64_from_bits(_int_of(k if k < 56.0 else 56.0) + 1023 << 52)
    y = s * q + (s - 1.0)
    y = _scale2(q + 1.0, k) if k > 55.0 else y
    y = np.inf if x > 709.782712893384 else y
    return x if x != x or x == 0.0 else y


@njit(cache=True, forceinline=True, **_OPTS)
def _exp2_v(x):
    xc = -1080.0 if x < -1080.0 else x  # (a NaN passes, as in _exp_v)
    xc = 1030.0 if xc > 1030.0 else xc
    k = np.rint(xc)
    r = xc - k
{estrin("r", _EXP2_P)}
    return _scale2(p, k)
"""

# log, log1p, log2, log10: x = m 2**e with m in [sqrt(1/2), sqrt(2)); log m = 2 atanh(s),
# s = (m-1)/(m+1) (fdlibm's form).
TEMPLATES["log_v"] = f"""
@njit(cache=True, forceinline=True, **_OPTS)
def _log_parts(x):
    # (e, L) with log(x) = e ln2 + L, |L| <= ln2/2, for finite x > 0
    tiny = x < 2.2250738585072014e-308
    xs = x * 18014398509481984.0 if tiny else x
    b = _bits_of_f64(xs)
    e = (b >> 52) - (1077 if tiny else 1023)
    m = _f64_from_bits((b & 4503599627370495) | 4607182418800017408)
    big = m > 1.4142135623730951
    m = m * 0.5 if big else m
    e = e + 1 if big else e
    f = m - 1.0
    s = f / (2.0 + f)
    z = s * s
{estrin("z", _LOG_P)}
    # log(1+f) = 2s + 2s z p, written around the exact f: f - (f*f/2 - s (f*f/2 + 2 z p))
    hfsq = 0.5 * f * f
    return _float_of(e), f - (hfsq - s * (hfsq + 2.0 * z * p))


@njit(cache=True, forceinline=True, **_OPTS)
def _log_join(fe, lm, d):
    # fe ln2 + lm + d, d a small correction
    return fe * {_LN2_HI} + ((lm + fe * {_LN2_LO}) + d)


@njit(cache=True, forceinline=True, **_OPTS)
def _log_special(x, y):
    # y, or log's value at x = 0, x < 0, inf and NaN
    y = -np.inf if x == 0.0 else y
    y = np.nan if x < 0.0 else y
    y = x if x == np.inf else y
    return x if x != x else y


@njit(cache=True, forceinline=True, **_OPTS)
def _log_v(x):
    fe, lm = _log_parts(x)
    return _log_special(x, _log_join(fe, lm, 0.0))


@njit(cache=True, forceinline=True, **_OPTS)
def _log2_v(x):
    fe, lm = _log_parts(x)
    return _log_special(x, fe + lm * {_INV_LN2})


@njit(cache=True, forceinline=True, **_OPTS)
def _log10_v(x):
    fe, lm = _log_parts(x)
    return _log_special(x, fe * {_LG2_HI} + (lm * {_INV_LN10} + fe * {_LG2_LO}))


@njit(cache=True, forceinline=True, **_OPTS)
def _log1p_of(w):
    # log(1 + w) for finite w > -1: u = 1 + w rounded, plus the rounding error over u
    u = 1.0 + w
    fe, lm = _log_parts(u)
    return _log_join(fe, lm, (w - (u - 1.0)) / u)


@njit(cache=True, forceinline=True, **_OPTS)
def _log1p_v(x):
    u = 1.0 + x
    y = _log_special(u, _log1p_of(x))
    return x if x == 0.0 or x != x else y
"""

# tanh(a) = (1 - e) / (1 + e), e = exp(-2a) = s (1 + q) with s = 2**k exact and q = expm1(r):
# 1 - s and 1 + s are exact, the sums and the quotient are carried to twice the precision.
TEMPLATES["tanh_v"] = """
@njit(cache=True, forceinline=True, **_OPTS)
def _tanh_v(x):
    a = np.abs(x)
    k, r = _exp_reduce(-2.0 * a if a < 30.0 else -60.0)
    q = _expm1_poly(r)
    s = _f64_from_bits(_int_of(k) + 1023 << 52)
    nh, nl = _two_sum(1.0 - s, -s * q)
    dh, dl = _two_sum(1.0 + s, s * q)
    y = nh / dh
    y = y + (_fma(-y, dh, nh) + (nl - y * dl)) / dh
    return x if x != x else _copysign(y, x)
"""

# sinh and cosh from e**|x| / 2 (scaled by 2**(k-1), so finite up to 710.47); sinh by its
# Taylor series below 1, where e/2 - 1/(2e) cancels.
TEMPLATES["sinh_v"] = f"""
@njit(cache=True, forceinline=True, **_OPTS)
def _half_exp(a):
    # e**a / 2 for a >= 0 (inf above 711)
    ac = a if a < 711.0 else 711.0
    k, r = _exp_reduce(ac)
    return _scale2(1.0 + _expm1_poly(r), k - 1.0)


@njit(cache=True, forceinline=True, **_OPTS)
def _sinh_v(x):
    a = np.abs(x)
    h = _half_exp(a)
    z = x * x
{horner("z", _SINH_P)}
    big = _copysign(h - 0.25 / h, x)
    small = x + x * z * p
    y = big if a >= 1.0 else small
    return x if x != x else y


@njit(cache=True, forceinline=True, **_OPTS)
def _cosh_v(x):
    h = _half_exp(np.abs(x))
    y = h + 0.25 / h
    return x if x != x else y
"""


# asinh, acosh, atanh: one log1p(w) (or log w) each, w chosen per range so that nothing
# cancels; above 2**28, log(2a) = log(a) + ln2 by adding 1 to the exponent.
TEMPLATES["ahyp_v"] = """
@njit(cache=True, forceinline=True, **_OPTS)
def _log_of_sum(v, w, huge):
    # log(v) + log1p(w) where one of them is 0, with 2**28 <= v adding ln2 when huge
    u = 1.0 + w if v == 1.0 else v
    fe, lm = _log_parts(u)
    d = (w - (u - 1.0)) / u if v == 1.0 else 0.0
    return _log_join(fe + 1.0 if huge else fe, lm, d)


@njit(cache=True, forceinline=True, **_OPTS)
def _asinh_v(x):
    a = np.abs(x)
    z = a * a
    q = np.sqrt(z + 1.0)
    huge = a > 268435456.0
    big = a > 2.0
    v = a if huge else (a + a + 1.0 / (q + a) if big else 1.0)
    y = _log_of_sum(v, a + z / (1.0 + q), huge)
    y = _copysign(y, x)
    return x if x != x or a == np.inf else y


@njit(cache=True, forceinline=True, **_OPTS)
def _acosh_v(x):
    t = x - 1.0
    huge = x > 268435456.0
    big = x > 2.0
    v = x if huge else (x + x - 1.0 / (x + np.sqrt(x * x - 1.0)) if big else 1.0)
    y = _log_of_sum(v, t + np.sqrt(t + t + t * t), huge)
    y = np.nan if x < 1.0 else y
    return x if x != x or x == np.inf else y


@njit(cache=True, forceinline=True, **_OPTS)
def _atanh_v(x):
    a = np.abs(x)
    w = (a + a) / (1.0 - a)
    w = a + a + (a + a) * a / (1.0 - a) if a < 0.5 else w
    y = _copysign(0.5 * _log1p_of(w), x)
    y = _copysign(np.inf, x) if a == 1.0 else y
    y = np.nan if a > 1.0 else y
    return x if x != x else y
"""


# erf: below 3/4 x P(x*x); above, 1 - erfc(|x|) with erfc(a) = exp(-a*a) Q(t) / (1 + 2a),
# t = (a - 5/2) / (a + 5/2) (Shepherd and Laframboise's variable; Q is slowly varying), up to 6
# where erf rounds to 1. No table: gathers cost more than the polynomials.
TEMPLATES["erf_v"] = f"""
@njit(cache=True, forceinline=True, **_OPTS)
def _erf_v(x):
    a = np.abs(x)
    z = x * x
{horner("z", _ERF_P)}
    small = x * p
    t = (a - 2.5) / (a + 2.5)
{horner("t", _ERFC_Q, "q")}
    k, r = _exp_reduce(-z if a < 6.0 else -36.0)
    e = _scale2(1.0 + _expm1_poly(r), k)
    big = _copysign(1.0 - e * q / (1.0 + 2.0 * a), x)
    y = small if a < 0.75 else big
    y = _copysign(1.0, x) if a >= 6.0 else y
    return x if x != x else y
"""

# pow(x, y) = exp(y log|x|) in double-double: log|x| = k ln2 + log(c) + log1p(z/c - 1), c from
# a 128-row table around z = |x| / 2**k in [0.705, 1.41) (1 in the middle of a row, with c = 1);
# exp(t) = 2**(j/128 + e) exp(r) with |r| <= ln2/256. Error < 2**-62 of t before the last
# roundings, so |t| up to 745 still gives < 1 ulp.
_POW_OFF = 0x3FE6900000000000
_LN2_HI42, _LN2_LO42 = _split(_LN2, 42)
_LN2N_HI, _LN2N_LO = _split(_LN2 / 128, 35)
# log1p(r) = r - r**2/2 + r**3 P(r), to r**10 (|r| < 2**-7)
_LOG1P_P = [nearest(Fraction((-1) ** n, n + 3)) for n in range(8)]


def _pow_tables():
    # log rows (1/c, log(c) hi, lo), c the middle of the row's z range; exp rows 2**(j/128)
    with localcontext() as ctx:
        ctx.prec = 50
        log_rows, exp_rows = [], []
        for i in range(128):
            ends = np.array([_POW_OFF + (i << 45), _POW_OFF + ((i + 1) << 45)], np.int64)
            lo, hi = ends.view(np.float64)
            invc = 1.0 if lo <= 1.0 < hi else float(2 / (Decimal(lo) + Decimal(hi)))
            logc = -Decimal(invc).ln()
            log_rows.append([invc, float(logc), float(logc - Decimal(float(logc)))])
            s = (Decimal(2).ln() * i / 128).exp()
            exp_rows.append([float(s), float(s - Decimal(float(s)))])
    return np.array(log_rows), np.array(exp_rows)


TEMPLATES["pow_v"] = (
    f"from decimal import Decimal, localcontext\n\n_POW_OFF = {_POW_OFF}\n\n\n"
    + python_source(_pow_tables) + f"""

_POW_LOG, _POW_EXP = _pow_tables()


@njit(cache=True, forceinline=True, **_OPTS)
def _log_dd(x):
    # log(x) as hi + lo, for finite x > 0
    tiny = x < 2.2250738585072014e-308
    ix = _bits_of_f64(x * 18014398509481984.0 if tiny else x)
    tmp = ix - _POW_OFF
    i = (tmp >> 45) & 127
    fk = _float_of((tmp >> 52) - (54 if tiny else 0))
    z = _f64_from_bits(ix - (tmp & -4503599627370496))
    invc, lch, lcl = _POW_LOG[i, 0], _POW_LOG[i, 1], _POW_LOG[i, 2]
    ph = z * invc
    pl = _fma(z, invc, -ph)
    r = ph - 1.0
    a1 = fk * {_LN2_HI42} + lch
    e1 = (fk * {_LN2_HI42} - a1) + lch
    a2 = a1 + r
    bb = a2 - a1
    e2 = (a1 - (a2 - bb)) + (r - bb)
    hr = -0.5 * r
    sq = hr * r
    sql = _fma(hr, r, -sq)
    a3 = a2 + sq
    e3 = (a2 - a3) + sq
{horner("r", _LOG1P_P)}
    lo = (e1 + e2 + e3 + sql) + (fk * {_LN2_LO42} + lcl) + (pl - pl * r + r * r * r * p)
    hi = a3 + lo
    return hi, (a3 - hi) + lo


@njit(cache=True, forceinline=True, **_OPTS)
def _exp_dd(th, tl):
    # exp(th + tl), |tl| <= ulp(th)
    tc = th if th > -760.0 else -760.0
    tc = tc if tc < 720.0 else 720.0
    kf = np.rint(tc * {nearest(128 / _LN2)})
    ki = _int_of(kf)
    r = (tc - kf * {_LN2N_HI}) + (tl - kf * {_LN2N_LO})
    q = r + r * r * (0.5 + r * ({nearest(Fraction(1, 6))} + r * ({nearest(Fraction(1, 24))}
                                                         + r * {nearest(Fraction(1, 120))})))
    sh, sl = _POW_EXP[ki & 127, 0], _POW_EXP[ki & 127, 1]
    y = _scale2(sh + (sl + sh * q), _float_of(ki >> 7))
    y = np.inf if th > 720.0 else y
    return 0.0 if th < -760.0 else y


@njit(cache=True, forceinline=True, **_OPTS)
def _pow_v(x, y):
    ax = np.abs(x)
    lh, ll = _log_dd(ax if ax > 0.0 and ax < np.inf else 1.0)
    th = y * lh
    r = _exp_dd(th, _fma(y, lh, -th) + y * ll)
    yint = np.rint(y) == y
    flip = _bits_of_f64(x) < 0 and yint and np.rint(0.5 * y) != 0.5 * y
    r = np.nan if x < 0.0 and not yint else r
    r = (np.inf if (ax == np.inf) == (y > 0.0) else 0.0) if ax == 0.0 or ax == np.inf else r
    r = -r if flip else r
    r = (np.inf if (ax > 1.0) == (y > 0.0) else 0.0) if np.abs(y) == np.inf else r
    r = 1.0 if ax == 1.0 and np.abs(y) == np.inf else r
    r = x + y if x != x or y != y else r
    return 1.0 if y == 0.0 or x == 1.0 else r
""")
