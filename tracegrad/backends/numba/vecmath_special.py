"""Branch-free float64 log_ndtr for generated kernels (see vecmath.py): the hot special
function of probit likelihoods. `TEMPLATES` continues vecmath.py's.

log Phi(x) with a = |x|/sqrt(2) and z = x*x/2 (one rounding, so e^-z keeps its relative
accuracy far into the tail): erfc(a) is 1 - erf(a) below a = 3/4, e^-z Q(t) / (1 + 2a) up
to 6 (vecmath's erf polynomials), and e^-z / (sqrt(pi) K(a)) beyond, K the continued
fraction a + (1/2)/(a + 1/(a + (3/2)/(a + ...))) at depth 16 (its convergent by the
forward recurrence) (converged to an ulp for
a >= 6). Then log Phi(x) = log(erfc(a)/2) below 0, in logs (no underflow), and
log1p(-erfc(a)/2) above. Within 6 ulp of SciPy for x < 1; above, SciPy's own error (it
rounds x/sqrt(2) before erfc: up to 2 x^2 ulp) dominates the difference.
"""

from __future__ import annotations

import math

from tracegrad.backends.numba.vecmath import _ERF_P, _ERFC_Q, horner, nearest

_DEPTH = 16
# its convergents A_n / B_n by the forward recurrence (one division, not one per level), on
# a clamped below 1e8 (no overflow of A_n; beyond, K(a) = a to the last bit)
_CONTINUED = "\n".join(
    f"    a0, a1 = a1, ac * a1 + {n / 2!r} * a0\n    b0, b1 = b1, ac * b1 + {n / 2!r} * b0"
    for n in range(1, _DEPTH + 1))

TEMPLATES: dict[str, str] = {}
INLINED = (("_log_ndtr_v", "x"),)

TEMPLATES["log_ndtr_v"] = f"""
@njit(cache=True, forceinline=True, **_OPTS)
def _log_ndtr_v(x):
    z = 0.5 * x * x
    a = np.abs(x) * {nearest(1 / math.sqrt(2))}
{horner("(a * a)", _ERF_P)}
    erfc_small = 1.0 - a * p
    t = (a - 2.5) / (a + 2.5)
{horner("t", _ERFC_Q, "q")}
    ac = a if a < 1e8 else 1e8
    a0, a1, b0, b1 = 1.0, ac, 0.0, 1.0
{_CONTINUED}
    f = a + (a1 / b1 - ac)
    r = q / (1.0 + 2.0 * a) if a < 6.0 else {nearest(1 / math.sqrt(math.pi))} / f
    e = _exp_v(-z)
    erfc = erfc_small if a < 0.75 else e * r
    below = _log_v(0.5 * erfc_small) if a < 0.75 else ({nearest(math.log(0.5))} - z) + _log_v(r)
    y = below if x < 0.0 else _log1p_v(-0.5 * erfc)
    return x if x != x else y
"""
