"""Special-function primitives (SciPy's `scipy.special` ufuncs): lgamma, gamma, digamma,
erfc, erfinv, erfcinv, ndtr, ndtri, log_ndtr, logit, i0, i0e, i1, i1e, the two-operand
igamma, igammac, zeta, beta and betaln, and the three-operand betainc and betaincc; the
derivatives of igamma in `a` (igamma_grad_a) and of betainc in `a` and `b` (betainc_grad_a,
betainc_grad_b), which no composition gives either (ops/_incomplete.py).

Each is a primitive because a composition of the elementary primitives would lose SciPy's
accuracy (series, continued fractions and asymptotic expansions chosen per range). The
value is SciPy's ufunc; the numba backend calls SciPy's compiled `cython_special` function
of the same name from the fused loop, except for the hot log_ndtr, ndtr, erfc and lgamma
(vector-math helpers) and zeta (which `cython_special` does not export): docs/scipy.md.
"""

from __future__ import annotations

import math

import numpy as np

from tracegrad.core.op import Primitive
from tracegrad.core.types import TensorType
from tracegrad.ops import _incomplete
from tracegrad.ops._batching import batch_elementwise
from tracegrad.ops._families import (
    binary,
    check_kind,
    elementwise,
    needs,
    same_dtype,
    same_shape,
    unary,
)
from tracegrad.ops.elementwise import (
    _c,
    _sq,
    abs_p,
    add_p,
    and_p,
    defderiv,
    defrecip,
    div_p,
    eq_p,
    exp_p,
    gt_p,
    log1p_p,
    log_p,
    lt_p,
    mul_p,
    neg_p,
    select_p,
    sign_p,
    sub_p,
)


def _scipy(name: str):
    """SciPy's ufunc `name` with the operands' dtype kept (float16 computed in float32)."""
    def impl(*xs):
        import scipy.special  # not at import time: it alone costs a fifth of a second

        out = getattr(scipy.special, name)(*xs)
        return np.asarray(out).astype(xs[0].dtype, copy=False)
    impl.__name__ = name
    return impl


_SQRT_2PI = math.sqrt(2 * math.pi)

lgamma_p = unary("lgamma", _scipy("gammaln"))
"""`log|Gamma(x)|` (scipy.special.gammaln)."""
defderiv(lgamma_p, lambda x, y: digamma_p.bind(x))

gamma_p = unary("gamma", _scipy("gamma"))
"""`Gamma(x)`."""
defderiv(gamma_p, lambda x, y: mul_p.bind(y, digamma_p.bind(x)))

digamma_p = unary("digamma", _scipy("psi"))
"""`d/dx log Gamma(x)` (scipy.special.psi)."""
defderiv(digamma_p, lambda x, y: zeta_p.bind(_c(x, 2), x))  # polygamma(1, x) = zeta(2, x)

erfc_p = unary("erfc", _scipy("erfc"))
"""`1 - erf(x)`, accurate where erf(x) is near 1."""
defderiv(erfc_p, lambda x, y: mul_p.bind(_c(x, -2 / math.sqrt(math.pi)),
                                         exp_p.bind(neg_p.bind(_sq(x)))))

erfinv_p = unary("erfinv", _scipy("erfinv"))
"""The inverse of erf on (-1, 1)."""
defderiv(erfinv_p, lambda x, y: mul_p.bind(_c(y, math.sqrt(math.pi) / 2), exp_p.bind(_sq(y))))

erfcinv_p = unary("erfcinv", _scipy("erfcinv"))
"""The inverse of erfc on (0, 2)."""
defderiv(erfcinv_p, lambda x, y: mul_p.bind(_c(y, -math.sqrt(math.pi) / 2),
                                            exp_p.bind(_sq(y))))

ndtr_p = unary("ndtr", _scipy("ndtr"))
"""The standard normal CDF."""
defderiv(ndtr_p, lambda x, y: mul_p.bind(_c(x, 1 / _SQRT_2PI),
                                         exp_p.bind(mul_p.bind(_c(x, -0.5), _sq(x)))))

ndtri_p = unary("ndtri", _scipy("ndtri"))
"""The inverse of the standard normal CDF on (0, 1)."""
defderiv(ndtri_p, lambda x, y: mul_p.bind(
    _c(y, _SQRT_2PI), exp_p.bind(mul_p.bind(_c(y, 0.5), _sq(y)))))

log_ndtr_p = unary("log_ndtr", _scipy("log_ndtr"))
"""The log of the standard normal CDF, accurate far into the lower tail."""
# d/dx log Phi(x) = phi(x) / Phi(x) = exp(-x^2/2 - log Phi(x)) / sqrt(2 pi)
defderiv(log_ndtr_p, lambda x, y: mul_p.bind(_c(x, 1 / _SQRT_2PI), exp_p.bind(
    sub_p.bind(mul_p.bind(_c(x, -0.5), _sq(x)), y))))

logit_p = unary("logit", _scipy("logit"))
"""`log(x / (1 - x))`."""
defrecip(logit_p, lambda x, y: mul_p.bind(x, sub_p.bind(_c(x, 1), x)))

i0_p = unary("i0", _scipy("i0"))
"""The modified Bessel function of order 0 (scipy.special.i0)."""
defderiv(i0_p, lambda x, y: i1_p.bind(x))

i1_p = unary("i1", _scipy("i1"))
"""The modified Bessel function of order 1 (scipy.special.i1)."""


def _over_x(x, num):
    """`num / x`, with 1/2 where x == 0 (the limit of I1(x)/x)."""
    zero = eq_p.bind(x, _c(x, 0))
    return select_p.bind(zero, _c(x, 0.5), div_p.bind(num, select_p.bind(zero, _c(x, 1), x)))


defderiv(i1_p, lambda x, y: sub_p.bind(i0_p.bind(x), _over_x(x, y)))  # I1' = I0 - I1 / x

i0e_p = unary("i0e", _scipy("i0e"))
"""`exp(-|x|) I0(x)`, the exponentially scaled modified Bessel function of order 0."""
defderiv(i0e_p, lambda x, y: sub_p.bind(i1e_p.bind(x), mul_p.bind(sign_p.bind(x), y)))

i1e_p = unary("i1e", _scipy("i1e"))
"""`exp(-|x|) I1(x)`, the exponentially scaled modified Bessel function of order 1."""


# I1' = I0 - I1 / x, so i1e' = i0e - i1e / x - sign(x) i1e
defderiv(i1e_p, lambda x, y: sub_p.bind(sub_p.bind(i0e_p.bind(x), _over_x(x, y)),
                                        mul_p.bind(sign_p.bind(x), y)))

igamma_p = binary("igamma", _scipy("gammainc"), kind="float")
"""`igamma(a, x)`: the regularized lower incomplete gamma function P(a, x) (gammainc)."""
igammac_p = binary("igammac", _scipy("gammaincc"), kind="float")
"""`igammac(a, x)`: the regularized upper incomplete gamma function Q(a, x) (gammaincc)."""


def _igamma_density(a, x):
    """`x^(a-1) e^-x / Gamma(a)`, the derivative of P(a, x) in x (0 where x <= 0)."""
    positive = select_p.bind(eq_p.bind(abs_p.bind(x), x), x, _c(x, 0))
    logx = log_p.bind(select_p.bind(eq_p.bind(positive, _c(x, 0)), _c(x, 1), positive))
    logd = sub_p.bind(sub_p.bind(mul_p.bind(sub_p.bind(a, _c(a, 1)), logx), x),
                      lgamma_p.bind(a))
    return select_p.bind(eq_p.bind(positive, _c(x, 0)), _c(x, 0), exp_p.bind(logd))


def _no_grad(op, g):
    return [None] * len(op.inputs)


igamma_grad_a_p = binary("igamma_grad_a", _incomplete.igamma_grad_a, kind="float")
"""`igamma_grad_a(a, x)`: dP(a, x)/da, the derivative of `igamma` in its first operand (its
own gradient is not defined: None)."""
igamma_grad_a_p.def_grad(_no_grad)


def _igamma_grads(op, g, sign):
    a, x = op.inputs
    return [mul_p.bind(g, sign(igamma_grad_a_p.bind(a, x))) if needs(op, 0) else None,
            mul_p.bind(g, sign(_igamma_density(a, x))) if needs(op, 1) else None]


# Q = 1 - P: the same derivatives negated
igamma_p.def_grad(lambda op, g: _igamma_grads(op, g, lambda v: v))
igammac_p.def_grad(lambda op, g: _igamma_grads(op, g, neg_p.bind))

zeta_p = binary("zeta", _scipy("zeta"), kind="float")
"""`zeta(s, q)`: the Hurwitz zeta function `sum_k (q + k)^-s` (scipy.special.zeta)."""
# d/dq zeta(s, q) = -s zeta(s + 1, q); the gradient in s is not defined (None).
zeta_p.def_grad(lambda op, g: [None, neg_p.bind(mul_p.bind(g, mul_p.bind(
    op.inputs[0], zeta_p.bind(add_p.bind(op.inputs[0], _c(op.inputs[0], 1)),
                              op.inputs[1])))) if needs(op, 1) else None])

betaln_p = binary("betaln", _scipy("betaln"), kind="float", commutative=True)
"""`log|B(a, b)|` (scipy.special.betaln)."""
beta_p = binary("beta", _scipy("beta"), kind="float", commutative=True)
"""`B(a, b) = Gamma(a) Gamma(b) / Gamma(a + b)`."""


def _beta_grads(op, g, scale):
    # d/da log B(a, b) = digamma(a) - digamma(a + b)
    (a, b), (y,) = op.inputs, op.outputs
    g = g if scale is None else mul_p.bind(g, y)
    psi_ab = digamma_p.bind(add_p.bind(a, b))
    return [mul_p.bind(g, sub_p.bind(digamma_p.bind(v), psi_ab)) if needs(op, i) else None
            for i, v in enumerate((a, b))]


betaln_p.def_grad(lambda op, g: _beta_grads(op, g, None))
beta_p.def_grad(lambda op, g: _beta_grads(op, g, True))


def _ternary(name: str, impl) -> Primitive:
    """An elementwise special function of three float operands of equal shapes and dtypes
    (`impl`: SciPy's ufunc of that name, or the implementation)."""
    prim = Primitive(name)

    @prim.def_abstract_eval
    def abstract_eval(a, b, x):
        check_kind(name, a, "float")
        return TensorType(same_shape(name, a, b, x), same_dtype(name, a, b, x))

    prim.def_impl(_scipy(impl) if isinstance(impl, str) else impl)
    elementwise(prim)
    batch_elementwise(prim)
    return prim


betainc_p = _ternary("betainc", "betainc")
"""`betainc(a, b, x)`: the regularized incomplete beta function I_x(a, b)."""
betaincc_p = _ternary("betaincc", "betaincc")
"""`betaincc(a, b, x) = 1 - I_x(a, b)`, accurate where I_x(a, b) is near 1."""


def _beta_density(a, b, x):
    """`x^(a-1) (1-x)^(b-1) / B(a, b)`, the derivative of I_x(a, b) in x (0 outside (0, 1))."""
    inside = and_p.bind(gt_p.bind(x, _c(x, 0)), lt_p.bind(x, _c(x, 1)))
    safe = select_p.bind(inside, x, _c(x, 0.5))
    logd = sub_p.bind(add_p.bind(mul_p.bind(sub_p.bind(a, _c(a, 1)), log_p.bind(safe)),
                                 mul_p.bind(sub_p.bind(b, _c(b, 1)),
                                            log1p_p.bind(neg_p.bind(safe)))),
                      betaln_p.bind(a, b))
    return select_p.bind(inside, exp_p.bind(logd), _c(x, 0))


betainc_grad_a_p = _ternary("betainc_grad_a", lambda a, b, x: _incomplete.betainc_grad(
    a, b, x, 0))
"""`betainc_grad_a(a, b, x)`: dI_x(a, b)/da (its own gradient is not defined: None)."""
betainc_grad_b_p = _ternary("betainc_grad_b", lambda a, b, x: _incomplete.betainc_grad(
    a, b, x, 1))
"""`betainc_grad_b(a, b, x)`: dI_x(a, b)/db (its own gradient is not defined: None)."""
betainc_grad_a_p.def_grad(_no_grad)
betainc_grad_b_p.def_grad(_no_grad)


def _betainc_grads(op, g, sign):
    args = op.inputs
    rules = (betainc_grad_a_p.bind, betainc_grad_b_p.bind, _beta_density)
    return [mul_p.bind(g, sign(rule(*args))) if needs(op, i) else None
            for i, rule in enumerate(rules)]


betainc_p.def_grad(lambda op, g: _betainc_grads(op, g, lambda v: v))
betaincc_p.def_grad(lambda op, g: _betainc_grads(op, g, neg_p.bind))
