"""The helper functions generated kernels call, in one shared module of their own.

The module's text is fixed by this file (its templates instantiated for every dtype they
serve); it is written to the kernel cache directory as `tg_helpers_<digest>.py` and each
kernel module imports what it uses from it by that name, so the digest is part of every
kernel's source (and cache key) and the helpers are compiled once per process, and
cached on disk, instead of once per kernel. Scalar helpers are compiled once and inlined
into each kernel by LLVM (`forceinline=True`: loops over them still vectorize), not at Numba
IR level (`inline="always"` re-typed and re-lowered the helper's body at every call site,
which doubled the compile time of kernels that call exp, log or tanh a few times).
"""

from __future__ import annotations

import hashlib

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

# -- templates: {T} is the Numba type, {S} the dtype suffix --------------------------------------

_HELPERS = {
    "max_f": """
@njit(cache=True, forceinline=True, **_OPTS)
def _max_{S}(a, b):
    return a if (a > b or a != a) else b
""",
    "min_f": """
@njit(cache=True, forceinline=True, **_OPTS)
def _min_{S}(a, b):
    return a if (a < b or a != a) else b
""",
    "sign_f": """
@njit(cache=True, forceinline=True, **_OPTS)
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
@njit(cache=True, forceinline=True, **_OPTS)
def _logistic_{S}(x):
    e = {T}(_exp_v(-np.abs(np.float64(x))))
    one = {T}(1.0)
    if x >= 0:
        return one / (one + e)
    return e / (one + e)
""",
    # NumPy's npy_divmod: the floor quotient and the remainder with the divisor's sign.
    "floordiv_f": """
@njit(cache=True, forceinline=True, **_OPTS)
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
@njit(cache=True, forceinline=True, **_OPTS)
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
@njit(cache=True, forceinline=True, **_OPTS)
def _floordiv_{S}(a, b):
    if b == 0:
        return a - a
    if b == -1:
        return -a
    return a // b
""",
    "mod_i": """
@njit(cache=True, forceinline=True, **_OPTS)
def _mod_{S}(a, b):
    if b == 0 or b == -1:
        return a - a
    return a % b
""",
    # NumPy's pairwise summation (same blocks, same order: bit-identical sums). Its
    # recursion is unrolled with explicit stacks (cached recursive functions crash Numba).
    "pairwise": """
@njit(cache=True, **_OPTS)
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


@njit(cache=True, **_OPTS)
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
@njit(cache=True, forceinline=True, **_OPTS)
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
@njit(cache=True, forceinline=True, **_OPTS)
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
@njit(cache=True, forceinline=True, **_OPTS)
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
    # sin and cos without libm calls or branches (~3 ulp for every finite x), so that loops
    # over them vectorize: x = n pi/2 + r with |r| <= pi/4, then fdlibm's minimax kernels.
    "sincos_v": """
def _pi_fixed(bits):
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


def _two_over_pi_table():
    # row i: (2**(i - 33) * 2/pi) mod 4 in seven 26-bit pieces, bits 2**1 down to 2**-180
    p = 1400
    two_over_pi = (2 << (2 * p)) // _pi_fixed(p)
    rows = []
    for e in range(-33, 972):
        v = (two_over_pi << e) if e >= 0 else (two_over_pi >> -e)
        v = (v % (4 << p)) >> (p - 180)
        rows.append([((v >> (156 - 26 * k)) & 67108863) * 2.0 ** (-24 - 26 * k)
                     for k in range(7)])
    return np.array(rows)


_TWO_OVER_PI = _two_over_pi_table()


@njit(cache=True, forceinline=True, **_OPTS)
def _mod4(t):
    return t - 4.0 * np.floor(t * 0.25)


@njit(cache=True, forceinline=True, **_OPTS)
def _sincos_v(x, want_cos):
    ax = np.abs(x)
    # |x| < 2**19 pi/2: Cody-Waite, pi/2 in pieces of 33 bits (n * piece is exact)
    n = np.rint(x * 0.6366197723675814)
    r = x - n * 1.5707963267341256
    r = r - n * 6.077100506303966e-11
    r = r - n * 2.0222662487111665e-21
    r = r - n * 8.4784276603689e-32
    q = np.int64(n) if ax < 823549.0 else 0
    # larger: Payne-Hanek. |x| = m 2**e; x 2/pi mod 4 = mh T[e + 26] + ml T[e] (mod 4) with
    # m = mh 2**26 + ml; T[e + 26] is T[e]'s pieces shifted by one, so every product is exact
    b = _bits_of_f64(ax)
    i = min(max((b >> 52) - 1075, -33), 971) + 33
    m = (b & 4503599627370495) | 4503599627370496
    mh = np.float64(m >> 26) * 67108864.0
    ml = np.float64(m & 67108863)
    tab = _TWO_OVER_PI
    t0, t1, t2, t3, t4, t5, t6 = tab[i, 0], tab[i, 1], tab[i, 2], tab[i, 3], tab[i, 4], \
        tab[i, 5], tab[i, 6]
    s = _mod4(_mod4(mh * t1) + _mod4(ml * t0))
    s = _mod4(s + _mod4(_mod4(mh * t2) + _mod4(ml * t1)))
    nb = np.rint(s)
    c = (mh * t4 + ml * t3) + ((mh * t5 + ml * t4) + (mh * t6 + ml * t5))
    rb = ((((s - nb) + mh * t3) + ml * t2) + c) * 1.5707963267948966
    qb = np.int64(nb)
    big = ax >= 823549.0
    r = (-rb if x < 0 else rb) if big else r
    q = (-qb if x < 0 else qb) if big else q
    z = r * r
    ps = 1.58969099521155010221e-10
    ps = ps * z - 2.50507602534068634195e-08
    ps = ps * z + 2.75573137070700676789e-06
    ps = ps * z - 1.98412698298579493134e-04
    ps = ps * z + 8.33333333332248946124e-03
    ps = ps * z - 1.66666666666666324348e-01
    sn = r + r * z * ps
    pc = -1.13596475577881948265e-11
    pc = pc * z + 2.08757232129817482790e-09
    pc = pc * z - 2.75573143513906633035e-07
    pc = pc * z + 2.48015872894767294178e-05
    pc = pc * z - 1.38888888888741095749e-03
    pc = pc * z + 4.16666666666666019037e-02
    hz = 0.5 * z
    w = 1.0 - hz
    cs = w + (((1.0 - w) - hz) + z * z * pc)
    q = q + want_cos
    y = cs if q & 1 else sn
    y = -y if q & 2 else y
    y = x if ax < 1.4901161193847656e-08 and want_cos == 0 else y
    return y if ax <= 1.7976931348623157e308 else x - x


@njit(cache=True, forceinline=True, **_OPTS)
def _sin_v(x):
    return _sincos_v(x, 0)


@njit(cache=True, forceinline=True, **_OPTS)
def _cos_v(x):
    return _sincos_v(x, 1)
""",
    # Exponentiation by squaring with wrap-around, as NumPy's integer power.
    "ipow": """
@njit(cache=True, forceinline=True, **_OPTS)
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

# NaN-propagating max / min of a row with 8 independent lanes (so it vectorizes).
_ROW_EXTREME = """
@njit(cache=True, **_OPTS)
def _row{K}_{S}(a, lo, n):
    m = n - n % 8
    r0 = r1 = r2 = r3 = r4 = r5 = r6 = r7 = {T}({INIT})
    for i in range(lo, lo + m, 8):
        r0 = _{K}_{S}(r0, a[i])
        r1 = _{K}_{S}(r1, a[i + 1])
        r2 = _{K}_{S}(r2, a[i + 2])
        r3 = _{K}_{S}(r3, a[i + 3])
        r4 = _{K}_{S}(r4, a[i + 4])
        r5 = _{K}_{S}(r5, a[i + 5])
        r6 = _{K}_{S}(r6, a[i + 6])
        r7 = _{K}_{S}(r7, a[i + 7])
    res = _{K}_{S}(_{K}_{S}(_{K}_{S}(r0, r1), _{K}_{S}(r2, r3)),
                   _{K}_{S}(_{K}_{S}(r4, r5), _{K}_{S}(r6, r7)))
    for i in range(lo + m, lo + n):
        res = _{K}_{S}(res, a[i])
    return res
"""
_HELPERS["rowmax"] = _ROW_EXTREME.replace("{K}", "max").replace("{INIT}", "-np.inf")
_HELPERS["rowmin"] = _ROW_EXTREME.replace("{K}", "min").replace("{INIT}", "np.inf")

_TRISOLVE = """
@njit(cache=True, **_OPTS)
def _trisolve(a, b, out, lower, trans, unit, tag):
    # solves M @ out = b, M = a.T if trans else a (lower-triangular when lower != trans)
    n = a.shape[0]
    low = lower != trans
    for c in range(b.shape[1]):
        for step in range(n):
            i = step if low else n - 1 - step
            s = b[i, c]
            lo, hi = (0, i) if low else (i + 1, n)
            for j in range(lo, hi):
                m = a[j, i] if trans else a[i, j]
                s -= m * out[j, c]
            if not unit:
                if a[i, i] == 0:
                    raise ValueError(tag, i)
                s = s / a[i, i]
            out[i, c] = s
"""

# template -> the dtypes it is instantiated for (None: once, no dtype)
_FLOATS = (dtypes.float64, dtypes.float32)
_INSTANCES = {
    "max_f": _FLOATS, "min_f": _FLOATS, "sign_f": _FLOATS, "logistic": _FLOATS,
    "floordiv_f": _FLOATS, "mod_f": _FLOATS, "pairwise": _FLOATS, "rowmax": _FLOATS,
    "rowmin": _FLOATS,
    "floordiv_i": (dtypes.int64, dtypes.int32), "mod_i": (dtypes.int64, dtypes.int32),
    "ipow": (dtypes.int64,), "bits": None, "exp_v": None, "log_v": None, "tanh_v": None,
    "sincos_v": None,
}


def _module_source() -> str:
    parts = [
        "# tracegrad: helper functions of generated Numba kernels (written once, never edited)",
        "import numpy as np",
        "from numba import njit",
        "",
        '_OPTS = dict(error_model="numpy", nogil=True)',
    ]
    for kind, dts in _INSTANCES.items():
        if dts is None:
            parts.append(_HELPERS[kind])
        else:
            parts += [_HELPERS[kind].format(T=NB_TYPE[dt], S=SUFFIX[dt]) for dt in dts]
    parts.append(_TRISOLVE)
    return "\n".join(parts)


SOURCE = _module_source()
MODULE = "tg_helpers_" + hashlib.sha256(SOURCE.encode()).hexdigest()[:16]


def helper(helpers: dict, kind: str, dtype) -> str:
    """The name of helper `kind` for `dtype`, recorded in `helpers` (names to import)."""
    s = SUFFIX[dtype]
    if kind.endswith(("_f", "_i")):
        name = "_" + kind.rsplit("_", 1)[0] + "_" + s
    else:
        name = f"_{kind}_{s}"
    helpers[name] = None
    return name


def vector_math(name: str, helpers: dict) -> str:
    """The branch-free float64 helper for `name` (exp, log, tanh, sin or cos), recorded in `helpers`."""
    helpers[f"_{name}_v"] = None
    return f"_{name}_v"
