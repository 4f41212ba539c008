"""Branch-free float64 sin, cos, tan and their inverses for generated kernels (see vecmath.py).

sin, cos and tan reduce x = n pi/2 + r (Cody-Waite below 2**19 pi/2, a table Payne-Hanek
above) and carry r to twice the precision; atan, asin and acos reduce to small arguments of
minimax polynomials. `TEMPLATES` continues vecmath.py's.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from tracegrad.backends.numba.vecmath import PI, horner, nearest, pi_fixed, python_source

_PI_HI, _PI_LO = nearest(PI), nearest(PI - Fraction(float(PI)))
_PI2_HI, _PI2_LO = nearest(PI / 2), nearest(PI / 2 - Fraction(float(PI / 2)))
_PI4_HI, _PI4_LO = nearest(PI / 4), nearest(PI / 4 - Fraction(float(PI / 4)))
# fdlibm's kernel_sin: (sin(r) - r) / r**3 and kernel_cos: (cos(r) - 1 + z/2) / z**2 in z = r*r
_SIN_P = ["-1.66666666666666324348e-01", "8.33333333332248946124e-03", "-1.98412698298579493134e-04",
          "2.75573137070700676789e-06", "-2.50507602534068634195e-08", "1.58969099521155010221e-10"]
_COS_P = ["4.16666666666666019037e-02", "-1.38888888888741095749e-03", "2.48015872894767294178e-05",
          "-2.75573143513906633035e-07", "2.08757232129817482790e-09", "-1.13596475577881948265e-11"]
# (atan(t) - t) / t**3 in z = t*t <= tan(pi/8)**2: minimax, relative error 7e-18 on atan
_ATAN_P = ["-0.3333333333333333", "0.19999999999995652", "-0.1428571428469138",
           "0.11111111017100327", "-0.0909090464769568", "0.07692184699371778",
           "-0.06664531369805009", "0.05858311810501153", "-0.05086254885823143",
           "0.039253696320618564", "-0.01920252926841228"]
# (asin(s) - s) / s**3 in z = s*s <= 1/4: minimax, relative error 5e-18 on asin
_ASIN_P = ["0.16666666666666669", "0.0749999999999834", "0.04464285714653523",
           "0.03038194412500875", "0.022372173467043486", "0.017352380709839098",
           "0.01397138708310213", "0.011477517005507167", "0.01033337215296726",
           "0.005413184483715509", "0.01751883397953867", "-0.015032162599250314",
           "0.028878362746452394"]

TEMPLATES: dict[str, str] = {}
# the forced-inline `_<f>_v` functions of TEMPLATES and their arguments, in their order
# (each gets a called twin in the helper module: helpers.CALLED)
INLINED = (("_sincos_v", "x, want_cos"), ("_sin_v", "x"), ("_cos_v", "x"),
           ("_sin_fast_v", "x"), ("_cos_fast_v", "x"), ("_sin_cos_v", "x"),
           ("_sin_cos_fast_v", "x"), ("_tan_v", "x"), ("_tan_fast_v", "x"), ("_atan_v", "x"),
           ("_atan2_v", "y, x"), ("_asin_v", "x"), ("_acos_v", "x"))
# the helpers with the fast (Cody-Waite) range reduction, by their full-reduction twin
FAST = {"_sin_v": "_sin_fast_v", "_cos_v": "_cos_fast_v", "_sin_cos_v": "_sin_cos_fast_v",
        "_tan_v": "_tan_fast_v"}

# Below this |x| the Cody-Waite reduction of `_trig_reduce_small` is exact (the `_fast_v`
# variants are right); at or above it (and for inf) only `_trig_reduce` is.
TRIG_FAST_LIMIT = 823549.0


def _two_over_pi_table():
    # row i: (2**(i - 33) * 2/pi) mod 4 in seven 26-bit pieces, bits 2**1 down to 2**-180
    p = 1400
    two_over_pi = (2 << (2 * p)) // pi_fixed(p)
    rows = []
    for e in range(-33, 972):
        v = (two_over_pi << e) if e >= 0 else (two_over_pi >> -e)
        v = (v % (4 << p)) >> (p - 180)
        rows.append([((v >> (156 - 26 * k)) & 67108863) * 2.0 ** (-24 - 26 * k)
                     for k in range(7)])
    return np.array(rows)


# sin, cos and tan (~1 ulp for every finite x): x = n pi/2 + r with |r| <= pi/4, then
# fdlibm's minimax kernels.
TEMPLATES["sincos_v"] = python_source(pi_fixed, _two_over_pi_table) + f"""

_TWO_OVER_PI = _two_over_pi_table()


@njit(cache=True, forceinline=True, **_OPTS)
def _mod4(t):
    return t - 4.0 * np.floor(t * 0.25)


@njit(cache=True, forceinline=True, **_OPTS)
def _fast_two_sum(a, b):
    # _two_sum in 3 operations, exact (so the same values) for the Cody-Waite steps below
    # 2**19 pi/2: either |a| has b's exponent or more (Dekker), or |a| < |b| and a + b is
    # exact (a is x - n * pi/2's first piece, a multiple of x's ulp >= 2**-53, then of 2**-65;
    # b = -n * piece, a multiple of 2**-65 (2**-96), |b| < 2**-14.9 (2**-49.7), so
    # |a + b| < 2|b| has at most 53 bits)
    s = a + b
    return s, b - (s - a)


@njit(cache=True, forceinline=True, **_OPTS)
def _trig_reduce(x):
    # (r, lo, q): x = (q + 4j) pi/2 + r + lo, |r| <= pi/4, lo below r's last bit
    ax = np.abs(x)
    # |x| < 2**19 pi/2: Cody-Waite, pi/2 in pieces of 33 bits (n * piece is exact)
    t = x * 0.6366197723675814 + 6755399441055744.0
    n = t - 6755399441055744.0
    r, e2 = _fast_two_sum(_fma(-n, 1.5707963267341256, x), -n * 6.077100506303966e-11)
    r, e3 = _fast_two_sum(r, -n * 2.0222662487111665e-21)
    lo = (e2 + e3) - n * 8.4784276603689e-32
    q = _bits_of_f64(t) & 3
    # larger: Payne-Hanek. |x| = m 2**e; x 2/pi mod 4 = mh T[e + 26] + ml T[e] (mod 4) with
    # m = mh 2**26 + ml; T[e + 26] is T[e]'s pieces shifted by one, so every product is exact
    b = _bits_of_f64(ax)
    i = min(max((b >> 52) - 1075, -33), 971) + 33
    m = (b & 4503599627370495) | 4503599627370496
    mh = _float_of(m >> 26) * 67108864.0
    ml = _float_of(m & 67108863)
    tab = _TWO_OVER_PI
    t0, t1, t2, t3, t4, t5, t6 = tab[i, 0], tab[i, 1], tab[i, 2], tab[i, 3], tab[i, 4], \\
        tab[i, 5], tab[i, 6]
    s = _mod4(_mod4(mh * t1) + _mod4(ml * t0))
    s = _mod4(s + _mod4(_mod4(mh * t2) + _mod4(ml * t1)))
    nb = np.rint(s)
    c = (mh * t4 + ml * t3) + ((mh * t5 + ml * t4) + (mh * t6 + ml * t5))
    f, e1 = _two_sum(s - nb, mh * t3)
    f, e2 = _two_sum(f, ml * t2)
    fl = (e1 + e2) + c
    fh = f + fl
    fl = (f - fh) + fl
    rb = fh * {_PI2_HI}
    rbl = _fma(fh, {_PI2_HI}, -rb) + (fl * {_PI2_HI} + fh * {_PI2_LO})
    qb = _int_of(nb)
    big = ax >= 823549.0
    neg = x < 0
    r = (-rb if neg else rb) if big else r
    lo = (-rbl if neg else rbl) if big else lo
    q = (-qb if neg else qb) if big else q
    return r, lo, q


@njit(cache=True, forceinline=True, **_OPTS)
def _trig_reduce_small(x):
    # _trig_reduce's Cody-Waite part alone: right for |x| < 2**19 pi/2 (TRIG_FAST_LIMIT);
    # a loop using it counts larger arguments and runs again with _trig_reduce if any
    # n = rint(x 2/pi) by adding and subtracting 1.5 * 2**52 (the same n, but +0 for -0);
    # q: n mod 4 in the low bits (all a quadrant needs), from t's bits: n's plus a multiple
    # of 4, garbage for |x| above the limit (whose results are not used)
    t = x * 0.6366197723675814 + 6755399441055744.0
    n = t - 6755399441055744.0
    r, e2 = _fast_two_sum(_fma(-n, 1.5707963267341256, x), -n * 6.077100506303966e-11)
    r, e3 = _fast_two_sum(r, -n * 2.0222662487111665e-21)
    lo = (e2 + e3) - n * 8.4784276603689e-32
    q = _bits_of_f64(t)
    return r, lo, q


@njit(cache=True, forceinline=True, **_OPTS)
def _sin_kernel(r, lo, z):
    # sin(r + lo), z = r * r
{horner("z", _SIN_P, "ps")}
    return r + (r * z * ps + lo * (1.0 - 0.5 * z))


@njit(cache=True, forceinline=True, **_OPTS)
def _cos_kernel(r, lo, z):
    # cos(r + lo), z = r * r
{horner("z", _COS_P, "pc")}
    hz = 0.5 * z
    w = 1.0 - hz
    return w + (((1.0 - w) - hz) + (z * z * pc - r * lo))


@njit(cache=True, forceinline=True, **_OPTS)
def _sincos_v(x, want_cos):
    return _sincos_from(x, want_cos, _trig_reduce(x))


@njit(cache=True, forceinline=True, **_OPTS)
def _trig_kernels(reduced):
    # (q, sin(r + lo), cos(r + lo)) of a reduced argument
    r, lo, q = reduced
    z = r * r
    return q, _sin_kernel(r, lo, z), _cos_kernel(r, lo, z)


@njit(cache=True, forceinline=True, **_OPTS)
def _quadrant(q, sn, cs):
    # sin(q pi/2 + r) from sn = sin r and cs = cos r
    y = cs if q & 1 else sn
    return _f64_from_bits(_bits_of_f64(y) ^ ((q & 2) << 62))


@njit(cache=True, forceinline=True, **_OPTS)
def _odd_fixup(x, y):
    # sin and tan: y, or x itself for tiny x (-0 kept) and NaN for inf and NaN. d = x - x
    # is 0 for finite x and NaN otherwise, so x - d is x or x - x's NaN: one select for both
    d = x - x
    return x - d if (np.abs(x) < 1.4901161193847656e-08) | (d != d) else y


@njit(cache=True, forceinline=True, **_OPTS)
def _even_fixup(x, y):
    # cos: y, or NaN (x - x's) for inf and NaN
    d = x - x
    return y if d == d else d


@njit(cache=True, forceinline=True, **_OPTS)
def _sincos_from(x, want_cos, reduced):
    q, sn, cs = _trig_kernels(reduced)
    y = _quadrant(q + want_cos, sn, cs)
    return _odd_fixup(x, y) if want_cos == 0 else _even_fixup(x, y)


@njit(cache=True, forceinline=True, **_OPTS)
def _sin_v(x):
    return _sincos_v(x, 0)


@njit(cache=True, forceinline=True, **_OPTS)
def _cos_v(x):
    return _sincos_v(x, 1)


@njit(cache=True, forceinline=True, **_OPTS)
def _sin_fast_v(x):
    return _sincos_from(x, 0, _trig_reduce_small(x))


@njit(cache=True, forceinline=True, **_OPTS)
def _cos_fast_v(x):
    return _sincos_from(x, 1, _trig_reduce_small(x))


@njit(cache=True, forceinline=True, **_OPTS)
def _sin_cos_from(x, reduced):
    # (sin x, cos x) from one reduction and one evaluation of each kernel: the same
    # operations as _sincos_from(x, 0, reduced) and _sincos_from(x, 1, reduced), so the
    # same bits
    q, sn, cs = _trig_kernels(reduced)
    return _odd_fixup(x, _quadrant(q, sn, cs)), _even_fixup(x, _quadrant(q + 1, sn, cs))


@njit(cache=True, forceinline=True, **_OPTS)
def _sin_cos_v(x):
    return _sin_cos_from(x, _trig_reduce(x))


@njit(cache=True, forceinline=True, **_OPTS)
def _sin_cos_fast_v(x):
    return _sin_cos_from(x, _trig_reduce_small(x))


@njit(cache=True, forceinline=True, **_OPTS)
def _tan_v(x):
    return _tan_from(x, _trig_reduce(x))


@njit(cache=True, forceinline=True, **_OPTS)
def _tan_fast_v(x):
    return _tan_from(x, _trig_reduce_small(x))


@njit(cache=True, forceinline=True, **_OPTS)
def _tan_from(x, reduced):
    q, sn, cs = _trig_kernels(reduced)
    odd = (q & 1) == 1
    num = -cs if odd else sn
    den = sn if odd else cs
    y = num / den
    return _odd_fixup(x, y + _fma(-y, den, num) / den)
"""

# atan: |x| reduced to |t| <= tan(pi/8) by atan a = pi/4 + atan((a-1)/(a+1)) and
# atan a = pi/2 + atan(-1/a); asin and acos by asin(s), s <= 1/2, with
# asin a = pi/2 - 2 asin(sqrt((1-a)/2)) above 1/2 (the sqrt's rounding error carried along).
TEMPLATES["trig_huge"] = f"""
@njit(cache=True, forceinline=True, **_OPTS)
def _trig_huge(x):
    # 1 where the fast (Cody-Waite) reduction is not right for x: a loop adds these up
    return np.int64(np.abs(x) >= {TRIG_FAST_LIMIT!r})
"""

TEMPLATES["atan_v"] = f"""
@njit(cache=True, forceinline=True, **_OPTS)
def _atan_pos(a):
    # atan(a) for a >= 0 or NaN
    big = a > 2.414213562373095
    mid = a > 0.41421356237309503
    num = -1.0 if big else (a - 1.0 if mid else a)
    den = a if big else (a + 1.0 if mid else 1.0)
    t = num / den
    hi = {_PI2_HI} if big else ({_PI4_HI} if mid else 0.0)
    lo = {_PI2_LO} if big else ({_PI4_LO} if mid else 0.0)
    z = t * t
{horner("z", _ATAN_P)}
    return hi + (t + (t * z * p + lo))


@njit(cache=True, forceinline=True, **_OPTS)
def _atan_v(x):
    return _copysign(_atan_pos(np.abs(x)), x)


@njit(cache=True, forceinline=True, **_OPTS)
def _atan2_v(y, x):
    ax = np.abs(x)
    ay = np.abs(y)
    swap = ay > ax
    t = (ax if swap else ay) / (ay if swap else ax)
    t = 0.0 if ax == 0.0 and ay == 0.0 else t
    t = 1.0 if ax == np.inf and ay == np.inf else t
    r = _atan_pos(t)
    r = ({_PI2_HI} - r) + {_PI2_LO} if swap else r
    r = ({_PI_HI} - r) + {_PI_LO} if _bits_of_f64(x) < 0 else r
    r = _copysign(r, y)
    return x + y if x != x or y != y else r


@njit(cache=True, forceinline=True, **_OPTS)
def _asin_parts(x):
    # (s, c, q, big): asin|x| = s + q for |x| < 1/2, else pi/2 - 2 (s + c + q)
    a = np.abs(x)
    big = a >= 0.5
    z = 0.5 - 0.5 * a if big else x * x
    s = np.sqrt(z) if big else a
    c = _fma(-s, s, z) / (s + s)
    c = c if big and s > 0.0 else 0.0
{horner("z", _ASIN_P)}
    return s, c, s * z * p, big


@njit(cache=True, forceinline=True, **_OPTS)
def _asin_v(x):
    s, c, q, big = _asin_parts(x)
    y = ({_PI2_HI} - 2.0 * s) - ((2.0 * c + 2.0 * q) - {_PI2_LO}) if big else s + q
    return _copysign(y, x)


@njit(cache=True, forceinline=True, **_OPTS)
def _acos_v(x):
    s, c, q, big = _asin_parts(x)
    neg = x < 0.0
    hi = {_PI_HI} if neg else 0.0
    lo = {_PI_LO} if neg else 0.0
    sg = -1.0 if neg else 1.0
    y = (hi + sg * 2.0 * s) + (sg * (2.0 * c + 2.0 * q) + lo)
    small = {_PI2_HI} - (x + (_copysign(q, x) - {_PI2_LO}))
    return y if big else small
"""
