"""The derivatives of the regularized incomplete gamma and beta functions in their shape
parameters, as NumPy array code (the reference values of the primitives `igamma_grad_a`,
`betainc_grad_a` and `betainc_grad_b`; the numba backend's scalar twins are in
backends/numba/incomplete.py).

dP(a, x)/da: for x <= a + 1 the series P = x^a e^-x / Gamma(a + 1) sum_n t_n,
t_n = x^n / ((a + 1) ... (a + n)), differentiated term by term (dt_n/da = -t_n h_n,
h_n = sum_{k<=n} 1 / (a + k)); above, -dQ/da of the continued fraction
Q = x^a e^-x / Gamma(a) K, K = 1/(x + 1 - a + a_2/(x + 3 - a + ...)), a_n = -(n-1)(n-1-a),
its convergents and their derivatives by the forward recurrence (rescaled every step).
dI_x(a, b)/da and /db: the continued fraction I_x = x^a (1-x)^b / (a B(a, b)) K,
K = 1/(1 + d_1/(1 + d_2/(1 + ...))), differentiated the same way, for x < (a+1)/(a+b+2),
and I_x(a, b) = 1 - I_{1-x}(b, a) above. Each stops when the value and the derivatives
change by less than a few ulp, after at most `MAX_TERMS` terms (enough for a, b up to ~1e5).
"""

from __future__ import annotations

import numpy as np

EPS = 2.0**-50  # the last few bits of a convergent are rounding noise
MAX_TERMS = 20000


def _special():
    import scipy.special  # not at import time: it alone costs a fifth of a second

    return scipy.special


def _done(*pairs) -> bool:
    """Whether every (new, old[, scale]) agrees to a few ulp of `scale` (default: `new`'s
    magnitude; NaN counts as converged)."""
    return all(not np.any(np.abs(p[0] - p[1]) > EPS * np.abs(p[-1])) for p in pairs)


def _gamma_series(a, x):
    """dP/da by the series (x <= a + 1)."""
    sc = _special()
    t, s, ds, h = np.ones_like(a), np.ones_like(a), np.zeros_like(a), np.zeros_like(a)
    for n in range(1, MAX_TERMS):
        an = a + n
        t = t * x / an
        h = h + 1.0 / an
        s_old, ds_old = s, ds
        s, ds = s + t, ds - t * h
        if _done((s, s_old), (ds, ds_old)):
            break
    log_x = np.log(x)
    pref = np.exp(a * log_x - x - sc.gammaln(a + 1.0))
    return pref * ((log_x - sc.psi(a + 1.0)) * s + ds)


def _recurrence(terms, shape):
    """The value K and the derivatives dK of the continued fraction
    a_1/(b_1 + a_2/(b_2 + ...)) whose n-th partial numerator and denominator, and their
    derivatives in each parameter, `terms(n)` gives as (a_n, b_n, [da_n], [db_n])."""
    a0, b0 = np.ones(shape), np.zeros(shape)  # A_{n-2}, B_{n-2} (A_-1 = 1, B_-1 = 0)
    a1, b1 = np.zeros(shape), np.ones(shape)  # A_{n-1}, B_{n-1} (A_0 = 0, B_0 = 1)
    da0 = db0 = da1 = db1 = None
    k = dk = None
    for n in range(1, MAX_TERMS):
        an, bn, dans, dbns = terms(n)
        if da0 is None:
            zeros = [np.zeros(shape) for _ in dans]
            da0, db0, da1, db1 = zeros, zeros, zeros, zeros
        a2 = bn * a1 + an * a0
        b2 = bn * b1 + an * b0
        da2 = [dbn * a1 + bn * d1 + dan * a0 + an * d0
               for dan, dbn, d1, d0 in zip(dans, dbns, da1, da0, strict=True)]
        db2 = [dbn * b1 + bn * d1 + dan * b0 + an * d0
               for dan, dbn, d1, d0 in zip(dans, dbns, db1, db0, strict=True)]
        scale = 1.0 / b2  # rescaled so that B_n = 1: K_n = A_n
        a0, b0, da0, db0 = a1 * scale, b1 * scale, [d * scale for d in da1], [
            d * scale for d in db1]
        a1, b1 = a2 * scale, np.ones(shape)
        da1, db1 = [d * scale for d in da2], [d * scale for d in db2]
        k_old, dk_old = k, dk
        k, dk = a1, [d - a1 * e for d, e in zip(da1, db1, strict=True)]
        # dk is a difference: converged when it stops moving on the scale of its terms
        scales = [np.abs(d) + np.abs(a1 * e) for d, e in zip(da1, db1, strict=True)]
        if k_old is not None and _done((k, k_old), *zip(dk, dk_old, scales, strict=True)):
            break
    return k, dk


def _gamma_fraction(a, x):
    """dP/da = -dQ/da by the continued fraction (x > a + 1)."""
    sc = _special()

    def terms(n):
        if n == 1:
            return np.ones_like(a), x + 1.0 - a, [np.zeros_like(a)], [-np.ones_like(a)]
        return (-(n - 1.0) * (n - 1.0 - a), x + (2.0 * n - 1.0) - a,
                [np.full_like(a, n - 1.0)], [-np.ones_like(a)])

    k, (dk,) = _recurrence(terms, a.shape)
    log_x = np.log(x)
    pref = np.exp(a * log_x - x - sc.gammaln(a))
    return -pref * ((log_x - sc.psi(a)) * k + dk)


def igamma_grad_a(a, x):
    """dP(a, x)/da of the regularized lower incomplete gamma function: 0 at x = 0 and
    x = inf, NaN for a <= 0, x < 0 or NaN operands."""
    dtype = np.result_type(a, x)
    a, x = (np.asarray(v, np.float64) for v in np.broadcast_arrays(a, x))
    out = np.where((a > 0) & (x >= 0), 0.0, np.nan)
    inside = (a > 0) & (x > 0) & np.isfinite(a) & np.isfinite(x)
    series = inside & (x <= a + 1.0)
    fraction = inside & ~series
    if series.any():
        out[series] = _gamma_series(a[series], x[series])
    if fraction.any():
        out[fraction] = _gamma_fraction(a[fraction], x[fraction])
    return out.astype(dtype, copy=False)


def _beta_fraction(p, q, y):
    """(dI_y(p, q)/dp, dI_y(p, q)/dq) by the continued fraction (y < (p+1)/(p+q+2))."""
    sc = _special()
    one, zero = np.ones_like(p), np.zeros_like(p)

    def terms(n):
        if n == 1:
            return one, one, [zero, zero], [zero, zero]
        m, odd = divmod(n - 1, 2)  # a_n = d_{n-1}
        if odd:  # d_{2m+1}
            c1, c2, c3 = p + m, p + q + m, p + 2.0 * m
            d = -c1 * c2 * y / (c3 * (c3 + 1.0))
            return d, one, [d * (1.0 / c1 + 1.0 / c2 - 1.0 / c3 - 1.0 / (c3 + 1.0)),
                            d / c2], [zero, zero]
        c3 = p + 2.0 * m
        e = m * y / ((c3 - 1.0) * c3)  # d_2m = e (q - m)
        d = e * (q - m)
        return d, one, [-d * (1.0 / (c3 - 1.0) + 1.0 / c3), e], [zero, zero]

    k, (dkp, dkq) = _recurrence(terms, p.shape)
    log_y, log_1y = np.log(y), np.log1p(-y)
    pref = np.exp(p * log_y + q * log_1y - np.log(p) - sc.betaln(p, q))
    psi_pq = sc.psi(p + q)
    return (pref * ((log_y - 1.0 / p - sc.psi(p) + psi_pq) * k + dkp),
            pref * ((log_1y - sc.psi(q) + psi_pq) * k + dkq))


def betainc_grad(a, b, x, which: int):
    """dI_x(a, b)/da (`which` 0) or /db (1) of the regularized incomplete beta function: 0
    for x <= 0 and x >= 1, NaN for a <= 0, b <= 0 or NaN operands."""
    dtype = np.result_type(a, b, x)
    a, b, x = (np.asarray(v, np.float64) for v in np.broadcast_arrays(a, b, x))
    ok = (a > 0) & (b > 0) & np.isfinite(a) & np.isfinite(b) & ~np.isnan(x)
    out = np.where(ok, 0.0, np.nan)
    inside = ok & (x > 0) & (x < 1)
    direct = inside & (x < (a + 1.0) / (a + b + 2.0))
    flipped = inside & ~direct
    if direct.any():
        out[direct] = _beta_fraction(a[direct], b[direct], x[direct])[which]
    if flipped.any():  # I_x(a, b) = 1 - I_{1-x}(b, a)
        out[flipped] = -_beta_fraction(b[flipped], a[flipped], 1.0 - x[flipped])[1 - which]
    return out.astype(dtype, copy=False)
