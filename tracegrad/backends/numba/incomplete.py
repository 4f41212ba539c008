"""The scalar helpers of the primitives `igamma_grad_a`, `betainc_grad_a` and
`betainc_grad_b` for generated kernels: ops/_incomplete.py's series and continued
fractions (the numpy backend's array code), one element at a time, with SciPy's compiled
gammaln, psi and betaln (`_cs_*`, which the kernel imports first: the scalar builders in
scalars.py record them). `SOURCE` joins the helper module (helpers.py).
"""

from __future__ import annotations

from tracegrad.ops._incomplete import EPS, MAX_TERMS

SOURCE = f"""
_INC_EPS = {EPS!r}


@njit(cache=True, **_OPTS)
def _inc_moved(new, old, scale):
    return abs(new - old) > _INC_EPS * abs(scale)


@njit(cache=True, **_OPTS)
def _inc_terms(kind, n, p, q, y):
    # (a_n, b_n, da_n/dp, da_n/dq, db_n/dp, db_n/dq) of Q(p, y)'s fraction (kind 0) or of
    # I_y(p, q)'s (kind 1)
    if kind == 0:
        if n == 1:
            return 1.0, y + 1.0 - p, 0.0, 0.0, -1.0, 0.0
        return -(n - 1.0) * (n - 1.0 - p), y + (2.0 * n - 1.0) - p, n - 1.0, 0.0, -1.0, 0.0
    if n == 1:
        return 1.0, 1.0, 0.0, 0.0, 0.0, 0.0
    m = (n - 1) // 2
    if (n - 1) % 2 == 1:
        c1, c2, c3 = p + m, p + q + m, p + 2.0 * m
        d = -c1 * c2 * y / (c3 * (c3 + 1.0))
        return d, 1.0, d * (1.0 / c1 + 1.0 / c2 - 1.0 / c3 - 1.0 / (c3 + 1.0)), d / c2, 0.0, 0.0
    c3 = p + 2.0 * m
    e = m * y / ((c3 - 1.0) * c3)
    d = e * (q - m)
    return d, 1.0, -d * (1.0 / (c3 - 1.0) + 1.0 / c3), e, 0.0, 0.0


@njit(cache=True, **_OPTS)
def _inc_fraction(kind, p, q, y):
    a0, b0, a1, b1 = 1.0, 0.0, 0.0, 1.0
    ap0 = aq0 = bp0 = bq0 = ap1 = aq1 = bp1 = bq1 = 0.0
    k = kp = kq = 0.0
    for n in range(1, {MAX_TERMS}):
        an, bn, dap, daq, dbp, dbq = _inc_terms(kind, n, p, q, y)
        a2 = bn * a1 + an * a0
        b2 = bn * b1 + an * b0
        ap2 = dbp * a1 + bn * ap1 + dap * a0 + an * ap0
        aq2 = dbq * a1 + bn * aq1 + daq * a0 + an * aq0
        bp2 = dbp * b1 + bn * bp1 + dap * b0 + an * bp0
        bq2 = dbq * b1 + bn * bq1 + daq * b0 + an * bq0
        s = 1.0 / b2
        a0, b0, ap0, aq0, bp0, bq0 = a1 * s, b1 * s, ap1 * s, aq1 * s, bp1 * s, bq1 * s
        a1, b1, ap1, aq1, bp1, bq1 = a2 * s, 1.0, ap2 * s, aq2 * s, bp2 * s, bq2 * s
        k_old, kp_old, kq_old = k, kp, kq
        k, kp, kq = a1, ap1 - a1 * bp1, aq1 - a1 * bq1
        if n > 1 and not (_inc_moved(k, k_old, k)
                          or _inc_moved(kp, kp_old, abs(ap1) + abs(a1 * bp1))
                          or _inc_moved(kq, kq_old, abs(aq1) + abs(a1 * bq1))):
            break
    return k, kp, kq


@njit(cache=True, **_OPTS)
def _igamma_grad_a(a, x):
    if not (a > 0.0 and x >= 0.0):
        return np.nan
    if x == 0.0 or x == np.inf or a == np.inf:
        return 0.0
    log_x = np.log(x)
    if x <= a + 1.0:
        t, s, ds, h = 1.0, 1.0, 0.0, 0.0
        for n in range(1, {MAX_TERMS}):
            an = a + n
            t = t * x / an
            h = h + 1.0 / an
            s_old, ds_old = s, ds
            s, ds = s + t, ds - t * h
            if not (_inc_moved(s, s_old, s) or _inc_moved(ds, ds_old, ds)):
                break
        pref = np.exp(a * log_x - x - _cs_gammaln(a + 1.0, 0))
        return pref * ((log_x - _cs_psi(a + 1.0, 0)) * s + ds)
    k, dk, _ = _inc_fraction(0, a, 0.0, x)
    pref = np.exp(a * log_x - x - _cs_gammaln(a, 0))
    return -pref * ((log_x - _cs_psi(a, 0)) * k + dk)


@njit(cache=True, **_OPTS)
def _inc_beta(p, q, y, which):
    k, kp, kq = _inc_fraction(1, p, q, y)
    log_y, log_1y = np.log(y), np.log1p(-y)
    pref = np.exp(p * log_y + q * log_1y - np.log(p) - _cs_betaln(p, q, 0))
    psi_pq = _cs_psi(p + q, 0)
    if which == 0:
        return pref * ((log_y - 1.0 / p - _cs_psi(p, 0) + psi_pq) * k + kp)
    return pref * ((log_1y - _cs_psi(q, 0) + psi_pq) * k + kq)


@njit(cache=True, **_OPTS)
def _betainc_grad(a, b, x, which):
    if not (a > 0.0 and b > 0.0 and a < np.inf and b < np.inf) or x != x:
        return np.nan
    if not (x > 0.0 and x < 1.0):
        return 0.0
    if x < (a + 1.0) / (a + b + 2.0):
        return _inc_beta(a, b, x, which)
    return -_inc_beta(b, a, 1.0 - x, 1 - which)
"""
