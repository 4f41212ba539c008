"""`tracegrad.scipy.special`: SciPy's special functions with SciPy's signatures, dtypes and
values, differentiable, batchable and compiled into fused loops.

The functions SciPy computes with one algorithm of its own (gammaln, digamma, erfc, ndtri,
gammainc ...) are primitives (`tracegrad.ops.special`) whose values are SciPy's; the others
are compositions over them (logsumexp, softmax, polygamma, multigammaln, xlogy, entr).
`zeta` is differentiable in `q` only (the gradient in `x` is not defined: None, as a
constant's); `gammainc`, `gammaincc`, `betainc` and `betaincc` in every operand.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.special as _sc

from tracegrad import nn, ops
from tracegrad import numpy as tnp
from tracegrad.errors import InvalidArgumentError
from tracegrad.numpy._core import ufunc_operands
from tracegrad.numpy._eager import ufunc_function

__all__ = [
    "beta", "betainc", "betaincc", "betaln", "digamma", "entr", "erf", "erfc", "erfcinv",
    "erfinv", "expit",
    "gamma", "gammainc", "gammaincc", "gammaln", "i0", "i0e", "i1", "i1e", "log_ndtr",
    "log_softmax", "logit", "logsumexp", "multigammaln", "ndtr", "ndtri", "polygamma", "psi",
    "sinc", "softmax", "xlog1py", "xlogy", "zeta",
]


def _ufunc(name: str, prim, doc: str):
    return ufunc_function(getattr(_sc, name), prim, name, doc)


erf = _ufunc("erf", ops.erf_p, "The error function `2/sqrt(pi) int_0^x exp(-t^2) dt`.")
erfc = _ufunc("erfc", ops.erfc_p, "`1 - erf(x)`, accurate where erf(x) is near 1.")
erfinv = _ufunc("erfinv", ops.erfinv_p, "The inverse of `erf` on (-1, 1).")
erfcinv = _ufunc("erfcinv", ops.erfcinv_p, "The inverse of `erfc` on (0, 2).")
gammaln = _ufunc("gammaln", ops.lgamma_p, "`log|Gamma(x)|`.")
gamma = _ufunc("gamma", ops.gamma_p, "The gamma function.")
digamma = _ufunc("psi", ops.digamma_p, "The digamma function `d/dx log Gamma(x)`.")
psi = digamma
betaln = _ufunc("betaln", ops.betaln_p, "`log|B(a, b)|`.")
beta = _ufunc("beta", ops.beta_p, "The beta function `Gamma(a) Gamma(b) / Gamma(a + b)`.")
expit = _ufunc("expit", ops.logistic_p, "The logistic function `1 / (1 + exp(-x))`.")
logit = _ufunc("logit", ops.logit_p, "`log(p / (1 - p))`, the inverse of `expit`.")
ndtr = _ufunc("ndtr", ops.ndtr_p, "The standard normal CDF.")
ndtri = _ufunc("ndtri", ops.ndtri_p, "The inverse of `ndtr` on (0, 1).")
log_ndtr = _ufunc("log_ndtr", ops.log_ndtr_p,
                  "The log of the standard normal CDF, accurate far into the lower tail.")
i0 = _ufunc("i0", ops.i0_p, "The modified Bessel function of the first kind, order 0.")
i0e = _ufunc("i0e", ops.i0e_p, "`exp(-|x|) i0(x)`.")
i1 = _ufunc("i1", ops.i1_p, "The modified Bessel function of the first kind, order 1.")
i1e = _ufunc("i1e", ops.i1e_p, "`exp(-|x|) i1(x)`.")
gammainc = _ufunc("gammainc", ops.igamma_p,
                  "The regularized lower incomplete gamma function `P(a, x)`.")
gammaincc = _ufunc("gammaincc", ops.igammac_p,
                   "The regularized upper incomplete gamma function `Q(a, x) = 1 - P(a, x)`.")
sinc = tnp.sinc


def zeta(x, q=None):
    """The Hurwitz zeta function `sum_k (k + q)^-x` (Riemann's for `q=None`); differentiable
    in `q`."""
    (x, q), _ = ufunc_operands(_sc._ufuncs._zeta, "zeta", x, 1.0 if q is None else q)
    return ops.zeta(x, q)


def betainc(a, b, x):
    """The regularized incomplete beta function `I_x(a, b)`."""
    return ops.betainc(*ufunc_operands(_sc.betainc, "betainc", a, b, x)[0])


def betaincc(a, b, x):
    """`1 - I_x(a, b)`, accurate where `I_x(a, b)` is near 1."""
    return ops.betaincc(*ufunc_operands(_sc.betaincc, "betaincc", a, b, x)[0])


def polygamma(n, x):
    """The `n`-th derivative of the digamma function (`n` a non-negative integer array)."""
    n = tnp.asarray(n)
    (n, x), _ = ufunc_operands(_sc.betaln, "polygamma", n, x)
    n1 = tnp.add(n, 1.0)
    sign = tnp.where(tnp.equal(tnp.remainder(n, 2.0), 0.0), -1.0, 1.0)
    fac = tnp.multiply(tnp.multiply(tnp.astype(sign, x.dtype), ops.gamma(n1)), ops.zeta(n1, x))
    return tnp.where(tnp.equal(n, 0.0), ops.digamma(x), fac)


def multigammaln(a, d: int):
    """The log of the multivariate gamma function of dimension `d` (a static int):
    `d(d-1)/4 log(pi) + sum_j gammaln(a - j/2)`, j = 0 .. d-1."""
    if not isinstance(d, (int, np.integer)) or d < 1:
        raise InvalidArgumentError(f"multigammaln: d must be a positive integer, got {d!r}")
    (a,), _ = ufunc_operands(_sc.gammaln, "multigammaln", a)
    total = tnp.full_like(a, d * (d - 1) / 4 * math.log(math.pi))
    for j in range(d):
        total = tnp.add(total, ops.lgamma(tnp.subtract(a, j / 2)))
    return total


def _x_times(x, y, log_y):
    """`x * log_y`, 0 where `x == 0` and `log_y` is not finite (unless y is NaN); the
    gradient in x is `log_y` wherever that is finite."""
    zero = tnp.logical_and(tnp.equal(x, 0), tnp.logical_not(tnp.isnan(y)))
    finite = tnp.logical_or(tnp.logical_not(zero), tnp.isfinite(log_y))
    return tnp.multiply(x, tnp.where(finite, log_y, tnp.zeros_like(log_y)))


def xlogy(x, y):
    """`x * log(y)`, 0 where `x == 0` (unless y is NaN)."""
    (x, y), _ = ufunc_operands(_sc.xlogy, "xlogy", x, y)
    return _x_times(x, y, ops.log(y))


def xlog1py(x, y):
    """`x * log1p(y)`, 0 where `x == 0` (unless y is NaN)."""
    (x, y), _ = ufunc_operands(_sc.xlog1py, "xlog1py", x, y)
    return _x_times(x, y, ops.log1p(y))


def entr(x):
    """`-x log(x)` for x > 0, 0 at 0, -inf below 0."""
    (x,), _ = ufunc_operands(_sc.entr, "entr", x)
    positive = tnp.greater(x, 0)
    safe = tnp.where(positive, x, tnp.ones_like(x))
    inside = tnp.negative(tnp.multiply(safe, ops.log(safe)))
    edge = tnp.where(tnp.equal(x, 0), tnp.zeros_like(x), tnp.where(
        tnp.isnan(x), x, tnp.full_like(x, -np.inf)))
    return tnp.where(positive, inside, edge)


def _axes(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    return tuple(a % ndim for a in (axis if isinstance(axis, tuple) else (axis,)))


def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False):
    """`log(sum(b * exp(a), axis))` computed on `a - max(a)`; with `return_sign`, the pair
    `(log|s|, sign(s))`, else NaN where the sum `s` is negative. Terms with `b == 0` are
    left out (their `a` may be inf)."""
    if b is None:
        (a,), _ = ufunc_operands(np.exp, "logsumexp", a)
    else:
        (a, b), _ = ufunc_operands(np.multiply, "logsumexp", *ufunc_operands(
            np.exp, "logsumexp", a)[0], b)
        a = tnp.where(tnp.equal(b, 0), tnp.full_like(a, -np.inf), a)
    axes = _axes(axis, tnp.ndim(a))
    shifted, m = nn._shifted(a, axes)
    e = ops.exp(shifted)
    s = tnp.sum(e if b is None else tnp.multiply(b, e), axis=axes, keepdims=True)
    if return_sign:
        sign = tnp.sign(s)
        s = tnp.abs(s)
    out = tnp.add(ops.log(s), m)
    if not keepdims:
        out = tnp.squeeze(out, axis=axes)
        if return_sign:
            sign = tnp.squeeze(sign, axis=axes)
    return (out, sign) if return_sign else out


def softmax(x, axis=None):
    """`exp(x) / sum(exp(x), axis)` (over every element for `axis=None`, as SciPy)."""
    (x,), _ = ufunc_operands(np.exp, "softmax", x)
    return nn.softmax(x, axis=_axes(axis, tnp.ndim(x)))


def log_softmax(x, axis=None):
    """`x - logsumexp(x, axis)` (over every element for `axis=None`, as SciPy)."""
    (x,), _ = ufunc_operands(np.exp, "log_softmax", x)
    return nn.log_softmax(x, axis=_axes(axis, tnp.ndim(x)))
