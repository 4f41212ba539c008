"""Branch-free float64 log_ndtr, ndtr, erfc and lgamma for generated kernels (see
vecmath.py): the hot special functions of probit likelihoods and of gamma, beta and Poisson
densities. `TEMPLATES` continues vecmath.py's and vecmath_trig.py's.

All three normal/error-function helpers share erfcx(a) = e^(a^2) erfc(a) for a >= 3/4:
Q(t) / (1 + 2a) up to 6 (vecmath's erf polynomials), and 1 / (sqrt(pi) K(a)) beyond, K
the continued fraction a + (1/2)/(a + 1/(a + (3/2)/(a + ...))) at depth 16 (its convergent
by the forward recurrence; converged to an ulp for a >= 6).

log Phi(x) with a = |x|/sqrt(2) and z = x*x/2 (one rounding, so e^-z keeps its relative
accuracy far into the tail): erfc(a) is 1 - erf(a) below a = 3/4, e^-z erfcx(a) above.
Then log Phi(x) = log(erfc(a)/2) below 0, in logs (no underflow), and log1p(-erfc(a)/2)
above. Within 6 ulp of SciPy for x < 1; above, SciPy's own error (it rounds x/sqrt(2)
before erfc: up to 2 x^2 ulp) dominates the difference.

erfc(x) and Phi(x) = ndtr(x) round as SciPy (Cephes) does, so that they agree with it to a
few ulp even where both lose accuracy: erfc(a) = exp(-(a*a)) erfcx(a) with a*a rounded
(SciPy's erfc), and Phi(x) from a = x * M_SQRT1_2 rounded (sqrt(1/2) to nearest):
1/2 + erf(a)/2 for |a| < 1/sqrt(2), else erfc(|a|)/2, or 1 minus it above 0 (SciPy's
ndtr). Both errors grow as a^2 ulp in the tails (the rounding of a*a in the exponent), the
same ones in both; both are 0 where a*a > log(DBL_MAX) (SciPy's underflow).
"""

from __future__ import annotations

import math
from fractions import Fraction

from tracegrad.backends.numba.vecmath import _ERF_P, _ERFC_Q, PI, horner, nearest

_DEPTH = 16
# its convergents A_n / B_n by the forward recurrence (one division, not one per level), on
# a clamped below 1e8 (no overflow of A_n; beyond, K(a) = a to the last bit)
_CONTINUED = "\n".join(
    f"    a0, a1 = a1, ac * a1 + {n / 2!r} * a0\n    b0, b1 = b1, ac * b1 + {n / 2!r} * b0"
    for n in range(1, _DEPTH + 1))

TEMPLATES: dict[str, str] = {}
INLINED = (("_erfcx_v", "a"), ("_log_ndtr_v", "x"), ("_erfc_v", "x"), ("_ndtr_v", "x"),
           ("_lgamma_v", "x"))

TEMPLATES["erfcx_v"] = f"""
@njit(cache=True, forceinline=True, **_OPTS)
def _erfcx_v(a):
    t = (a - 2.5) / (a + 2.5)
{horner("t", _ERFC_Q, "q")}
    ac = a if a < 1e8 else 1e8
    a0, a1, b0, b1 = 1.0, ac, 0.0, 1.0
{_CONTINUED}
    f = a + (a1 / b1 - ac)
    return q / (1.0 + 2.0 * a) if a < 6.0 else {nearest(1 / math.sqrt(math.pi))} / f
"""

TEMPLATES["log_ndtr_v"] = f"""
@njit(cache=True, forceinline=True, **_OPTS)
def _log_ndtr_v(x):
    z = 0.5 * x * x
    a = np.abs(x) * {nearest(1 / math.sqrt(2))}
{horner("(a * a)", _ERF_P)}
    erfc_small = 1.0 - a * p
    r = _erfcx_v(a)
    e = _exp_v(-z)
    erfc = erfc_small if a < 0.75 else e * r
    below = _log_v(0.5 * erfc_small) if a < 0.75 else ({nearest(math.log(0.5))} - z) + _log_v(r)
    y = below if x < 0.0 else _log1p_v(-0.5 * erfc)
    return x if x != x else y
"""

_MAXLOG = "709.782712893384"  # SciPy's (Cephes') erfc is 0 where a*a exceeds log(DBL_MAX)

TEMPLATES["erfc_v"] = f"""
@njit(cache=True, forceinline=True, **_OPTS)
def _erfc_v(x):
    a = np.abs(x)
    y = _exp_v(-(a * a)) * _erfcx_v(a)
    y = 0.0 if a * a > {_MAXLOG} else y  # SciPy's underflow
    y = 2.0 - y if x < 0.0 else y
{horner("(x * x)", _ERF_P)}
    y = 1.0 - x * p if a < 0.75 else y
    return x if x != x else y
"""

TEMPLATES["ndtr_v"] = f"""
@njit(cache=True, forceinline=True, **_OPTS)
def _ndtr_v(x):
    a = x * {math.sqrt(0.5)!r}
    z = np.abs(a)
{horner("(a * a)", _ERF_P)}
    small = 0.5 + 0.5 * (a * p)
    tail = 0.5 * (_exp_v(-(z * z)) * _erfcx_v(z))
    tail = 0.0 if z * z > {_MAXLOG} else tail
    big = 1.0 - tail if a > 0.0 else tail
    y = small if z < {math.sqrt(0.5)!r} else big
    return x if x != x else y
"""

# lgamma(x) for x > 0: below 13, x moved into [2, 3) by the recurrence (at most 2 steps up,
# 10 down) with the product z of the factors, lgamma(x) = log z + t R(t), t = u - 2, where
# R(t) = lgamma(2 + t) / t is a degree-14 polynomial (fitted by least squares on Chebyshev
# nodes to SciPy's gammaln, then checked after rounding: 8 ulp of lgamma on [2, 3)); from 13,
# Stirling's series (x - 1/2) log x - x + log(2 pi)/2 + sum B_2k / (2k (2k - 1) x^(2k - 1))
# to k = 7. For x <= 0, the reflection
# lgamma(x) = log(pi / |sin(pi x)|) - lgamma(1 - x) (pi x reduced exactly: x - round(x)).
# One log serves both ranges (of z or of x). SciPy (Cephes' lgam) reduces the same way, so
# both lose relative accuracy by cancellation next to the zeros at 1 and 2; the difference
# is within 8 ulp of max(|lgamma(x)|, 1) for x > 0, and within 32 ulp of
# max(|lgamma(1 - x)|, 1) for x < 0 (tests/scipy/test_special.py).
_LGAMMA_R = ["0.42278433509846713", "0.32246703342409255", "-0.06735230105092614",
             "0.020580808350301395", "-0.007385549729357492", "0.002890497528969774",
             "-0.001192672392077707", "0.0005093140743939803", "-0.00022205365990294037",
             "9.697618128829465e-05", "-4.0797456057411185e-05", "1.53856551307178e-05",
             "-4.661054831985554e-06", "9.643369351991231e-07", "-9.874647954978996e-08"]
_BERNOULLI = [Fraction(1, 6), Fraction(-1, 30), Fraction(1, 42), Fraction(-1, 30),
              Fraction(5, 66), Fraction(-691, 2730), Fraction(7, 6)]
_STIRLING = [nearest(b / ((2 * k + 2) * (2 * k + 1))) for k, b in enumerate(_BERNOULLI)]
_HALF_LOG_2PI = "0.9189385332046728"  # log(2 pi) / 2 = 0.91893853320467274178...
_UP = "\n".join("    m = u < 2.0\n    z = z / u if m else z\n    u = u + 1.0 if m else u"
                 for _ in range(2))
_DOWN = "\n".join("    m = u >= 3.0\n    u = u - 1.0 if m else u\n    z = z * u if m else z"
                   for _ in range(10))

TEMPLATES["lgamma_v"] = f"""
@njit(cache=True, forceinline=True, **_OPTS)
def _lgamma_v(x):
    w = x if x > 0.0 else 1.0 - x
    u = w if w < 13.0 else 2.5
    z = 1.0
{_UP}
{_DOWN}
    t = u - 2.0
{horner("t", _LGAMMA_R)}
    big = w >= 13.0
    lg = _log_v(w if big else z)
    iw = 1.0 / w
    iw2 = iw * iw
{horner("iw2", _STIRLING, "s")}
    stirling = (w - 0.5) * lg - w + {_HALF_LOG_2PI} + s * iw
    y = stirling if big else lg + t * p
    y = np.inf if (w == np.inf or iw == np.inf) else y  # SciPy's inf below 1/DBL_MAX too
    r = x - np.rint(x)
    sinpi = np.abs(_sin_fast_v({nearest(PI)} * r))  # |pi r| <= pi/2
    refl = _log_v({nearest(PI)} / sinpi) - y
    y = refl if x <= 0.0 else y
    y = np.inf if (x <= 0.0 and r == 0.0) else y
    y = -np.inf if x == -np.inf else y  # SciPy's
    return x if x != x else y
"""
