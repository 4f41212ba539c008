"""Op-table rows of the special-function primitives (`tracegrad.ops.special`) through
`tracegrad.scipy.special`, with SciPy as the oracle: float64 and float32 values, and float64
gradients in every operand that has one."""

from __future__ import annotations

import numpy as np
import scipy.special

import tracegrad.scipy.special as tsp
from tests.ops.optable import F32, F64, case, rand, shape_id

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
    "igamma": ("gammainc", (0.5, 5), (0.1, 6), (1,)),
    "igammac": ("gammaincc", (0.5, 5), (0.1, 6), (1,)),
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
             rand((3, 4), _dt, 0.02, 0.98, seed=5), grad_argnums=(2,) if _dt == F64 else (),
             primitive=_prim)
case("betainc[f64,edges]", tsp.betainc, scipy.special.betainc, np.array([1.0, 2.0, 0.5, 3.0]),
     np.array([1.0, 0.5, 2.0, 3.0]), np.array([0.0, 1.0, 1e-12, 0.5]), primitive="betainc")
