"""`tracegrad.scipy.stats`: the densities, distribution functions and quantiles of SciPy's
distributions, with SciPy's (JAX's) signatures, as compositions over
`tracegrad.scipy.special`: differentiable in every float parameter.

Each distribution is a namespace of functions (`norm.logpdf(x, loc=0, scale=1)`); values
outside the support are those of SciPy (`-inf` log densities, 0 or 1 probabilities).
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np

from tracegrad import nn
from tracegrad import numpy as tnp
from tracegrad.numpy._decompositions import floating
from tracegrad.scipy import linalg as _linalg
from tracegrad.scipy import special as sp

__all__ = [
    "bernoulli", "beta", "binom", "cauchy", "dirichlet", "expon", "gamma", "geom", "laplace",
    "logistic", "multivariate_normal", "nbinom", "norm", "poisson", "t", "truncnorm",
    "uniform",
]

_LOG_2PI = math.log(2 * math.pi)


def _f(*xs):
    """The arguments as float tensors (integers as float64)."""
    return [floating(x) for x in xs]


def _standard(x, loc, scale):
    x, loc, scale = _f(x, loc, scale)
    return tnp.true_divide(tnp.subtract(x, loc), scale), scale


def _outside(cond, value, fill):
    """`value`, with `fill` where `cond`."""
    return tnp.where(cond, tnp.full_like(value, fill), value)


def _exp_of(logf):
    return lambda *args, **kw: tnp.exp(logf(*args, **kw))


def _log_of(f):
    return lambda *args, **kw: tnp.log(f(*args, **kw))


def _namespace(name, **fns):
    for fn_name, fn in fns.items():
        fn.__name__ = fn_name
        fn.__qualname__ = f"{name}.{fn_name}"
    return SimpleNamespace(**fns)


# -- continuous ---------------------------------------------------------------------------


def _norm_logpdf(x, loc=0, scale=1):
    y, scale = _standard(x, loc, scale)
    return tnp.subtract(tnp.multiply(-0.5, tnp.multiply(y, y)),
                        tnp.add(tnp.log(scale), 0.5 * _LOG_2PI))


def _norm_cdf(x, loc=0, scale=1):
    return sp.ndtr(_standard(x, loc, scale)[0])


def _norm_logcdf(x, loc=0, scale=1):
    return sp.log_ndtr(_standard(x, loc, scale)[0])


def _norm_sf(x, loc=0, scale=1):
    return sp.ndtr(tnp.negative(_standard(x, loc, scale)[0]))


def _norm_logsf(x, loc=0, scale=1):
    return sp.log_ndtr(tnp.negative(_standard(x, loc, scale)[0]))


def _symmetric_quantiles(standard_ppf):
    """`(ppf, isf)` of the location-scale family of a distribution symmetric about 0 with
    quantile function `standard_ppf`: `loc + scale ppf(q)` and `loc - scale ppf(q)`."""
    def ppf(q, loc=0, scale=1):
        q, loc, scale = _f(q, loc, scale)
        return tnp.add(loc, tnp.multiply(scale, standard_ppf(q)))

    def isf(q, loc=0, scale=1):
        q, loc, scale = _f(q, loc, scale)
        return tnp.subtract(loc, tnp.multiply(scale, standard_ppf(q)))

    return ppf, isf


_norm_ppf, _norm_isf = _symmetric_quantiles(sp.ndtri)


norm = _namespace("norm", logpdf=_norm_logpdf, pdf=_exp_of(_norm_logpdf), cdf=_norm_cdf,
                  logcdf=_norm_logcdf, sf=_norm_sf, logsf=_norm_logsf, ppf=_norm_ppf,
                  isf=_norm_isf)


def _mvn_logpdf(x, mean, cov, allow_singular=None):
    x, mean, cov = _f(x, mean, cov)
    d = tnp.shape(cov)[-1]
    diff = tnp.subtract(x, mean)
    batch = tnp.shape(diff)[:-1]
    chol = tnp.linalg.cholesky(cov)
    z = _linalg.solve_triangular(chol, tnp.transpose(tnp.reshape(diff, (-1, d))), lower=True)
    maha = tnp.reshape(tnp.sum(tnp.multiply(z, z), axis=0), batch)
    half_logdet = tnp.sum(tnp.log(tnp.diagonal(chol)))
    return tnp.subtract(tnp.multiply(-0.5, maha), tnp.add(half_logdet, 0.5 * d * _LOG_2PI))


multivariate_normal = _namespace("multivariate_normal", logpdf=_mvn_logpdf,
                                 pdf=_exp_of(_mvn_logpdf))


def _t_logpdf(x, df, loc=0, scale=1):
    y, scale = _standard(x, loc, scale)
    (df,) = _f(df)
    half = tnp.multiply(0.5, tnp.add(df, 1.0))
    norm_c = tnp.subtract(sp.gammaln(half), sp.gammaln(tnp.multiply(0.5, df)))
    norm_c = tnp.subtract(norm_c, tnp.multiply(0.5, tnp.log(tnp.multiply(math.pi, df))))
    body = tnp.multiply(half, tnp.log1p(tnp.true_divide(tnp.multiply(y, y), df)))
    return tnp.subtract(tnp.subtract(norm_c, body), tnp.log(scale))


t = _namespace("t", logpdf=_t_logpdf, pdf=_exp_of(_t_logpdf))


def _gamma_logpdf(x, a, loc=0, scale=1):
    y, scale = _standard(x, loc, scale)
    (a,) = _f(a)
    out = tnp.subtract(tnp.subtract(sp.xlogy(tnp.subtract(a, 1.0), y), y),
                       tnp.add(sp.gammaln(a), tnp.log(scale)))
    return _outside(tnp.less(y, 0), out, -np.inf)


def _gamma_cdf(x, a, loc=0, scale=1):
    y, _ = _standard(x, loc, scale)
    return sp.gammainc(a, tnp.maximum(y, 0.0))


def _gamma_sf(x, a, loc=0, scale=1):
    y, _ = _standard(x, loc, scale)
    return sp.gammaincc(a, tnp.maximum(y, 0.0))


def _log_of_complement(f, complement):
    """`log f`, as `log1p(-complement)` where `complement = 1 - f` is below 1/2."""
    def log_f(*args, **kw):
        c = complement(*args, **kw)
        return tnp.where(tnp.less(c, 0.5), tnp.log1p(tnp.negative(c)),
                         tnp.log(f(*args, **kw)))
    return log_f


gamma = _namespace("gamma", logpdf=_gamma_logpdf, pdf=_exp_of(_gamma_logpdf), cdf=_gamma_cdf,
                   logcdf=_log_of_complement(_gamma_cdf, _gamma_sf), sf=_gamma_sf,
                   logsf=_log_of_complement(_gamma_sf, _gamma_cdf))


def _beta_logpdf(x, a, b, loc=0, scale=1):
    y, scale = _standard(x, loc, scale)
    a, b = _f(a, b)
    out = tnp.add(sp.xlogy(tnp.subtract(a, 1.0), y),
                  sp.xlog1py(tnp.subtract(b, 1.0), tnp.negative(y)))
    out = tnp.subtract(out, tnp.add(sp.betaln(a, b), tnp.log(scale)))
    return _outside(tnp.logical_or(tnp.less(y, 0), tnp.greater(y, 1)), out, -np.inf)


def _beta_cdf(x, a, b, loc=0, scale=1):
    y, _ = _standard(x, loc, scale)
    return sp.betainc(a, b, tnp.clip(y, 0.0, 1.0))


def _beta_sf(x, a, b, loc=0, scale=1):
    y, _ = _standard(x, loc, scale)
    return sp.betaincc(a, b, tnp.clip(y, 0.0, 1.0))


beta = _namespace("beta", logpdf=_beta_logpdf, pdf=_exp_of(_beta_logpdf), cdf=_beta_cdf,
                  logcdf=_log_of_complement(_beta_cdf, _beta_sf), sf=_beta_sf,
                  logsf=_log_of_complement(_beta_sf, _beta_cdf))


def _dirichlet_logpdf(x, alpha):
    """`x` of shape (K,) or (K, N) (SciPy's layout), `alpha` of shape (K,)."""
    x, alpha = _f(x, alpha)
    k = tnp.shape(alpha)[0]
    a = tnp.reshape(alpha, (k,) + (1,) * (tnp.ndim(x) - 1))
    norm_c = tnp.subtract(tnp.sum(sp.gammaln(alpha)), sp.gammaln(tnp.sum(alpha)))
    return tnp.subtract(tnp.sum(sp.xlogy(tnp.subtract(a, 1.0), x), axis=0), norm_c)


dirichlet = _namespace("dirichlet", logpdf=_dirichlet_logpdf, pdf=_exp_of(_dirichlet_logpdf))


def _expon_logpdf(x, loc=0, scale=1):
    y, scale = _standard(x, loc, scale)
    return _outside(tnp.less(y, 0), tnp.subtract(tnp.negative(y), tnp.log(scale)), -np.inf)


def _expon_cdf(x, loc=0, scale=1):
    y, _ = _standard(x, loc, scale)
    return tnp.negative(tnp.expm1(tnp.negative(tnp.maximum(y, 0.0))))


def _expon_logsf(x, loc=0, scale=1):
    y, _ = _standard(x, loc, scale)
    return tnp.negative(tnp.maximum(y, 0.0))


def _expon_ppf(q, loc=0, scale=1):
    q, loc, scale = _f(q, loc, scale)
    return tnp.add(loc, tnp.multiply(scale, tnp.negative(tnp.log1p(tnp.negative(q)))))


expon = _namespace("expon", logpdf=_expon_logpdf, pdf=_exp_of(_expon_logpdf), cdf=_expon_cdf,
                   logcdf=_log_of(_expon_cdf), sf=_exp_of(_expon_logsf), logsf=_expon_logsf,
                   ppf=_expon_ppf)


def _laplace_logpdf(x, loc=0, scale=1):
    y, scale = _standard(x, loc, scale)
    return tnp.subtract(tnp.negative(tnp.abs(y)), tnp.log(tnp.multiply(2.0, scale)))


def _laplace_cdf(x, loc=0, scale=1):
    y, _ = _standard(x, loc, scale)
    below = tnp.multiply(0.5, tnp.exp(tnp.minimum(y, 0.0)))
    above = tnp.subtract(1.0, tnp.multiply(0.5, tnp.exp(tnp.negative(tnp.maximum(y, 0.0)))))
    return tnp.where(tnp.less(y, 0), below, above)


laplace = _namespace("laplace", logpdf=_laplace_logpdf, pdf=_exp_of(_laplace_logpdf),
                     cdf=_laplace_cdf)


def _logistic_logpdf(x, loc=0, scale=1):
    y, scale = _standard(x, loc, scale)
    return tnp.subtract(tnp.add(nn.log_sigmoid(y), nn.log_sigmoid(tnp.negative(y))),
                        tnp.log(scale))


def _logistic_cdf(x, loc=0, scale=1):
    return sp.expit(_standard(x, loc, scale)[0])


def _logistic_sf(x, loc=0, scale=1):
    return sp.expit(tnp.negative(_standard(x, loc, scale)[0]))


_logistic_ppf, _logistic_isf = _symmetric_quantiles(sp.logit)


logistic = _namespace("logistic", logpdf=_logistic_logpdf, pdf=_exp_of(_logistic_logpdf),
                      cdf=_logistic_cdf, sf=_logistic_sf, ppf=_logistic_ppf,
                      isf=_logistic_isf)


def _cauchy_logpdf(x, loc=0, scale=1):
    y, scale = _standard(x, loc, scale)
    return tnp.negative(tnp.add(tnp.add(math.log(math.pi), tnp.log(scale)),
                                tnp.log1p(tnp.multiply(y, y))))


def _cauchy_cdf(x, loc=0, scale=1):
    y, _ = _standard(x, loc, scale)
    return tnp.add(0.5, tnp.true_divide(tnp.arctan(y), math.pi))


def _cauchy_sf(x, loc=0, scale=1):
    y, _ = _standard(x, loc, scale)
    return tnp.subtract(0.5, tnp.true_divide(tnp.arctan(y), math.pi))


_cauchy_ppf, _cauchy_isf = _symmetric_quantiles(
    lambda q: tnp.tan(tnp.multiply(math.pi, tnp.subtract(q, 0.5))))


cauchy = _namespace("cauchy", logpdf=_cauchy_logpdf, pdf=_exp_of(_cauchy_logpdf),
                    cdf=_cauchy_cdf, logcdf=_log_of(_cauchy_cdf), sf=_cauchy_sf,
                    logsf=_log_of(_cauchy_sf), ppf=_cauchy_ppf, isf=_cauchy_isf)


def _uniform_logpdf(x, loc=0, scale=1):
    y, scale = _standard(x, loc, scale)
    out = tnp.subtract(tnp.zeros_like(y), tnp.log(scale))
    return _outside(tnp.logical_or(tnp.less(y, 0), tnp.greater(y, 1)), out, -np.inf)


def _uniform_cdf(x, loc=0, scale=1):
    return tnp.clip(_standard(x, loc, scale)[0], 0.0, 1.0)


def _uniform_ppf(q, loc=0, scale=1):
    q, loc, scale = _f(q, loc, scale)
    out = tnp.add(loc, tnp.multiply(q, scale))
    return _outside(tnp.logical_or(tnp.less(q, 0), tnp.greater(q, 1)), out, np.nan)


uniform = _namespace("uniform", logpdf=_uniform_logpdf, pdf=_exp_of(_uniform_logpdf),
                     cdf=_uniform_cdf, ppf=_uniform_ppf)


def _truncnorm_logdelta(a, b):
    """`log(Phi(b) - Phi(a))`, from the upper tail where a > 0."""
    upper = tnp.greater(a, 0)
    lo = tnp.where(upper, tnp.negative(b), a)
    hi = tnp.where(upper, tnp.negative(a), b)
    return tnp.log(tnp.subtract(sp.ndtr(hi), sp.ndtr(lo)))


def _truncnorm_logpdf(x, a, b, loc=0, scale=1):
    y, scale = _standard(x, loc, scale)
    a, b = _f(a, b)
    out = tnp.subtract(tnp.multiply(-0.5, tnp.multiply(y, y)),
                       tnp.add(tnp.add(tnp.log(scale), 0.5 * _LOG_2PI),
                               _truncnorm_logdelta(a, b)))
    return _outside(tnp.logical_or(tnp.less(y, a), tnp.greater(y, b)), out, -np.inf)


def _truncnorm_cdf(x, a, b, loc=0, scale=1):
    y, _ = _standard(x, loc, scale)
    a, b = _f(a, b)
    below, above = tnp.less_equal(y, a), tnp.greater_equal(y, b)
    inside = tnp.where(tnp.logical_or(below, above), b, y)  # a finite log where masked
    out = tnp.exp(tnp.subtract(_truncnorm_logdelta(a, inside), _truncnorm_logdelta(a, b)))
    return tnp.where(below, tnp.zeros_like(out), tnp.where(above, tnp.ones_like(out), out))


def _truncnorm_sf(x, a, b, loc=0, scale=1):
    y, _ = _standard(x, loc, scale)
    a, b = _f(a, b)
    below, above = tnp.less_equal(y, a), tnp.greater_equal(y, b)
    inside = tnp.where(tnp.logical_or(below, above), a, y)
    out = tnp.exp(tnp.subtract(_truncnorm_logdelta(inside, b), _truncnorm_logdelta(a, b)))
    return tnp.where(below, tnp.ones_like(out), tnp.where(above, tnp.zeros_like(out), out))


truncnorm = _namespace("truncnorm", logpdf=_truncnorm_logpdf, pdf=_exp_of(_truncnorm_logpdf),
                       cdf=_truncnorm_cdf, logcdf=_log_of(_truncnorm_cdf), sf=_truncnorm_sf,
                       logsf=_log_of(_truncnorm_sf))


# -- discrete -----------------------------------------------------------------------------


def _count(k, loc):
    """`k - loc` as a float, and where it is not a non-negative integer."""
    k, loc = _f(k, loc)
    k = tnp.subtract(k, loc)
    return k, tnp.logical_or(tnp.less(k, 0), tnp.not_equal(k, tnp.floor(k)))


def _poisson_logpmf(k, mu, loc=0):
    k, off = _count(k, loc)
    (mu,) = _f(mu)
    out = tnp.subtract(tnp.subtract(sp.xlogy(k, mu), sp.gammaln(tnp.add(k, 1.0))), mu)
    return _outside(off, out, -np.inf)


def _poisson_cdf(k, mu, loc=0):
    k, _ = _count(k, loc)
    (mu,) = _f(mu)
    out = sp.gammaincc(tnp.add(tnp.floor(tnp.maximum(k, 0.0)), 1.0), mu)
    return _outside(tnp.less(k, 0), out, 0.0)


poisson = _namespace("poisson", logpmf=_poisson_logpmf, pmf=_exp_of(_poisson_logpmf),
                     cdf=_poisson_cdf)


def _bernoulli_logpmf(k, p, loc=0):
    k, _ = _count(k, loc)
    (p,) = _f(p)
    out = tnp.add(sp.xlogy(k, p), sp.xlog1py(tnp.subtract(1.0, k), tnp.negative(p)))
    return _outside(tnp.logical_and(tnp.not_equal(k, 0), tnp.not_equal(k, 1)), out, -np.inf)


def _bernoulli_cdf(k, p, loc=0):
    k, _ = _count(k, loc)
    (p,) = _f(p)
    out = tnp.where(tnp.less(k, 1), tnp.subtract(1.0, p), tnp.ones_like(p))
    return _outside(tnp.less(k, 0), out, 0.0)


def _bernoulli_ppf(q, p):
    q, p = _f(q, p)
    return tnp.where(tnp.greater(q, tnp.subtract(1.0, p)), 1.0, 0.0)


bernoulli = _namespace("bernoulli", logpmf=_bernoulli_logpmf, pmf=_exp_of(_bernoulli_logpmf),
                       cdf=_bernoulli_cdf, ppf=_bernoulli_ppf)


def _binom_logpmf(k, n, p, loc=0):
    k, off = _count(k, loc)
    n, p = _f(n, p)
    m = tnp.subtract(n, k)
    comb = tnp.subtract(sp.gammaln(tnp.add(n, 1.0)), tnp.add(sp.gammaln(tnp.add(k, 1.0)),
                                                             sp.gammaln(tnp.add(m, 1.0))))
    out = tnp.add(comb, tnp.add(sp.xlogy(k, p), sp.xlog1py(m, tnp.negative(p))))
    return _outside(tnp.logical_or(off, tnp.greater(k, n)), out, -np.inf)


binom = _namespace("binom", logpmf=_binom_logpmf, pmf=_exp_of(_binom_logpmf))


def _nbinom_logpmf(k, n, p, loc=0):
    k, off = _count(k, loc)
    n, p = _f(n, p)
    comb = tnp.subtract(sp.gammaln(tnp.add(k, n)),
                        tnp.add(sp.gammaln(n), sp.gammaln(tnp.add(k, 1.0))))
    out = tnp.add(comb, tnp.add(sp.xlogy(n, p), sp.xlog1py(k, tnp.negative(p))))
    return _outside(off, out, -np.inf)


nbinom = _namespace("nbinom", logpmf=_nbinom_logpmf, pmf=_exp_of(_nbinom_logpmf))


def _geom_logpmf(k, p, loc=0):
    k, off = _count(k, loc)
    (p,) = _f(p)
    out = tnp.add(sp.xlog1py(tnp.subtract(k, 1.0), tnp.negative(p)), tnp.log(p))
    return _outside(tnp.logical_or(off, tnp.less(k, 1)), out, -np.inf)


geom = _namespace("geom", logpmf=_geom_logpmf, pmf=_exp_of(_geom_logpmf))
