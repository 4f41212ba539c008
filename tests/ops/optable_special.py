"""Op-table rows of the special-function primitives (`tracegrad.ops.special`) through
`tracegrad.scipy.special`, with SciPy as the oracle: float64 and float32 values, and float64
gradients in every operand that has one."""

from __future__ import annotations

import numpy as np
import scipy.special
import scipy.stats

import tracegrad.scipy.special as tsp
import tracegrad.scipy.stats as tstats
from tests.ops.optable import F32, F64, case, rand, shape_id
from tracegrad import ops

# primitive: (tracegrad.scipy.special name, low, high): SciPy's function of the same name
UNARY = {
    "lgamma": ("gammaln", 0.1, 6),
    "gamma": ("gamma", 0.2, 5),
    "digamma": ("psi", 0.2, 6),
    "erfc": ("erfc", -3, 5),
    "erfinv": ("erfinv", -0.95, 0.95),
    "erfcinv": ("erfcinv", 0.05, 1.95),
    "ndtr": ("ndtr", -4, 4),
    "ndtri": ("ndtri", 0.02, 0.98),
    "log_ndtr": ("log_ndtr", -30, 5),
    "logit": ("logit", 0.02, 0.98),
    "i0": ("i0", -4, 4),
    "i0e": ("i0e", -4, 4),
    "i1": ("i1", -4, 4),
    "i1e": ("i1e", -4, 4),
}

for _prim, (_name, _lo, _hi) in UNARY.items():
    for _shape in ((3, 4), ()):
        for _dt in (F64, F32):
            case(f"{_prim}[{_dt},{shape_id(_shape)}]", getattr(tsp, _name),
                 getattr(scipy.special, _name), rand(_shape, _dt, _lo, _hi),
                 grad_argnums=(0,) if _dt == F64 and _shape else (), primitive=_prim)

case("i1e[f64,zero]", tsp.i1e, scipy.special.i1e, np.array([0.0, -1.5, 2.0]), primitive="i1e")
case("log_ndtr[f64,tails]", tsp.log_ndtr, scipy.special.log_ndtr,
     np.array([-1e5, -40.0, -10.0, 0.0, 10.0, 40.0, np.inf, -np.inf, np.nan]),
     primitive="log_ndtr")

# primitive: (name, (low, high) of each operand, which operands have a gradient)
BINARY = {
    "igamma": ("gammainc", (0.5, 5), (0.1, 6), (0, 1)),
    "igammac": ("gammaincc", (0.5, 5), (0.1, 6), (0, 1)),
    "zeta": ("zeta", (1.5, 6), (0.2, 5), (1,)),
    "betaln": ("betaln", (0.2, 6), (0.2, 6), (0, 1)),
    "beta": ("beta", (0.5, 4), (0.5, 4), (0, 1)),
}

for _prim, (_name, (_alo, _ahi), (_blo, _bhi), _grads) in BINARY.items():
    for _dt in (F64, F32):
        case(f"{_prim}[{_dt},3x4]", getattr(tsp, _name), getattr(scipy.special, _name),
             rand((3, 4), _dt, _alo, _ahi, seed=1), rand((3, 4), _dt, _blo, _bhi, seed=2),
             grad_argnums=_grads if _dt == F64 else (), primitive=_prim)

case("zeta[f64,poles]", tsp.zeta, scipy.special.zeta, np.array([2.0, 2.0, 1.0, 0.5, 3.0, 2.0]),
     np.array([-0.5, -1.0, 2.0, 1.0, 1e10, 0.0]), primitive="zeta")
case("igamma[f64,edges]", tsp.gammainc, scipy.special.gammainc,
     np.array([1.0, 2.0, 0.5, 30.0]), np.array([0.0, np.inf, 1e-8, 31.0]), primitive="igamma")

for _prim in ("betainc", "betaincc"):
    for _dt in (F64, F32):
        case(f"{_prim}[{_dt},3x4]", getattr(tsp, _prim), getattr(scipy.special, _prim),
             rand((3, 4), _dt, 0.3, 5, seed=3), rand((3, 4), _dt, 0.3, 5, seed=4),
             rand((3, 4), _dt, 0.02, 0.98, seed=5), grad_argnums=(0, 1, 2) if _dt == F64 else (),
             primitive=_prim)
case("betainc[f64,edges]", tsp.betainc, scipy.special.betainc, np.array([1.0, 2.0, 0.5, 3.0]),
     np.array([1.0, 0.5, 2.0, 3.0]), np.array([0.0, 1.0, 1e-12, 0.5]), primitive="betainc")


def _richardson(f, i):
    """d f / d (operand i) by central differences with one Richardson step (error about
    1e-10 relative): the reference of the derivatives SciPy does not compute."""
    def derivative(*args):
        dtype = np.asarray(args[i]).dtype
        args = [np.asarray(a, np.float64) for a in args]

        def at(h):
            up, down = list(args), list(args)
            up[i], down[i] = args[i] + h, args[i] - h
            return (f(*up) - f(*down)) / (2 * h)
        h = 1e-3 * args[i]
        return ((4 * at(h / 2) - at(h)) / 3).astype(dtype)
    return derivative


_WHY_FD = "the reference is a central difference of SciPy's function (about 1e-9 relative)"
for _dt in (F64, F32):
    _a, _b = rand((3, 4), _dt, 0.3, 30, seed=9), rand((3, 4), _dt, 0.3, 30, seed=10)
    _tol = 1e-7 if _dt == F64 else 1e-6
    # x on both sides of a + 1 (series and continued fraction)
    case(f"igamma_grad_a[{_dt},3x4]", ops.igamma_grad_a,
         _richardson(scipy.special.gammainc, 0), _a, (_b * 1.5).astype(_dt), rtol=_tol,
         atol=1e-12, primitive="igamma_grad_a", why=_WHY_FD)
    _x = rand((3, 4), _dt, 0.01, 0.99, seed=11)
    for _i, _prim in enumerate(("betainc_grad_a", "betainc_grad_b")):
        case(f"{_prim}[{_dt},3x4]", getattr(ops, _prim),
             _richardson(scipy.special.betainc, _i), _a, _b, _x, rtol=_tol, atol=1e-12,
             primitive=_prim, why=_WHY_FD)
case("igamma_grad_a[f64,edges]", ops.igamma_grad_a, lambda a, x: np.where(
    (a > 0) & (x >= 0), 0.0, np.nan), np.array([1.0, 2.0, -1.0, np.nan, 1.0, np.inf]),
    np.array([0.0, np.inf, 1.0, 1.0, -1.0, 2.0]), primitive="igamma_grad_a")
case("betainc_grad_a[f64,edges]", ops.betainc_grad_a, lambda a, b, x: np.where(
    (a > 0) & (b > 0) & ~np.isnan(x), 0.0, np.nan), np.array([1.0, 2.0, -1.0, 1.0, 2.0]),
    np.array([1.0, 0.5, 1.0, 1.0, np.nan]), np.array([0.0, 1.0, 0.5, np.nan, 0.5]),
    primitive="betainc_grad_a")

# -- compositions: tracegrad.scipy.special and tracegrad.scipy.stats ---------------------------

_X = rand((3, 4), F64, -2, 2, seed=6)
_P = rand((3, 4), F64, 0.3, 4, seed=7)
_ORDER = "SciPy composes the same formula in another order"
case("scipy.special.logsumexp[b,axis=1]", lambda a, b: tsp.logsumexp(a, axis=1, b=b),
     lambda a, b: scipy.special.logsumexp(a, axis=1, b=b), _X, _P, grad_argnums=(0, 1),
     rtol=4e-16, why=_ORDER)
case("scipy.special.softmax[axis=None]", tsp.softmax, scipy.special.softmax, _X,
     grad_argnums=(0,), rtol=4e-16, why=_ORDER)
case("scipy.special.xlogy", tsp.xlogy, scipy.special.xlogy, np.where(_X > 1, 0.0, _X), _P,
     grad_argnums=(0, 1))
case("scipy.special.polygamma", tsp.polygamma, scipy.special.polygamma,
     np.array([[0], [1], [2]]), _P, grad_argnums=(1,))
case("scipy.special.multigammaln[d=3]", lambda a: tsp.multigammaln(a, 3),
     lambda a: scipy.special.multigammaln(a, 3), _P + 1.5, grad_argnums=(0,), rtol=4e-16,
     why=_ORDER)
for _name, _fn, _args in (
        ("norm.logpdf", "norm.logpdf", (_X, 0.3, _P)),
        ("gamma.logpdf", "gamma.logpdf", (_P, 2.5, 0.1, 1.5)),
        ("t.logpdf", "t.logpdf", (_X, _P, 0.2, 1.3)),
        ("truncnorm.cdf", "truncnorm.cdf", (_X, -1.0, 1.5, 0.1, 1.2)),
        ("binom.logpmf", "binom.logpmf", (np.array([0.0, 1, 3, 4]), 4.0, rand((4,), F64, 0.1,
                                                                               0.9, seed=8)))):
    _d, _m = _fn.split(".")
    case(f"scipy.stats.{_name}", getattr(getattr(tstats, _d), _m),
         getattr(getattr(scipy.stats, _d), _m), *_args,
         grad_argnums=tuple(i for i, a in enumerate(_args) if isinstance(a, np.ndarray)
                            and (_d != "binom" or i == 2)),
         rtol=2e-14, why=_ORDER)
