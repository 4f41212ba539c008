"""SciPy's minimizers driven by compiled derivatives: `minimize` and `least_squares` with
SciPy's signatures and results, over parameters of any tree structure.

tracegrad compiles the derivatives each method wants — the value and gradient in one call,
Hessian-vector products for the methods that take `hessp`, the Hessian for those that need
`hess`, the Jacobian of the residuals for `least_squares` — once per problem, and hands
SciPy a float64 vector interface; SciPy's own algorithms do the optimizing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tracegrad import tree as _tree
from tracegrad.autodiff import hessian, hvp, jacobian, value_and_grad
from tracegrad.errors import InvalidArgumentError
from tracegrad.function import function

__all__ = ["minimize", "least_squares"]

# methods whose minimize takes a gradient; of those, the ones that take hessp or need hess
_GRADIENT = frozenset({"cg", "bfgs", "newton-cg", "l-bfgs-b", "tnc", "slsqp", "dogleg",
                       "trust-ncg", "trust-krylov", "trust-exact", "trust-constr"})
_HESSP = frozenset({"newton-cg", "trust-ncg", "trust-krylov", "trust-constr"})
_HESS = frozenset({"dogleg", "trust-exact"})


class _Flat:
    """`x0` raveled to a float64 vector for SciPy, and `fun` of the tree as `call`, a
    function of such a vector."""

    def __init__(self, fun: Callable, x0):
        # integer and bool parameters are floats to SciPy (np.asarray(x0, float))
        x0 = _tree.map(lambda a: np.asarray(a, np.float64) if np.asarray(a).dtype.kind in
                       "biu" else a, x0)
        vector, self.unravel = _tree.ravel(x0)
        self.x0 = np.asarray(vector, dtype=np.float64)
        self._compiled: dict = {}
        unravel = self.unravel

        def call(v, *args):
            return fun(unravel(v), *args)

        call.__name__ = call.__qualname__ = getattr(fun, "__name__", "fun")
        self.call = call

    def compiled(self, what: str, make: Callable[[Callable], Callable]) -> Callable:
        """`make(self.call)`, made once in this fit (each fit traces `fun` anew, so it
        sees the values its globals have now, as SciPy would)."""
        found = self._compiled.get(what)
        if found is None:
            found = self._compiled[what] = make(self.call)
        return found


def _no_derivative(what: str, name: str, value) -> None:
    if value is not None and value is not False:
        raise InvalidArgumentError(
            f"{what}: {name}= is computed by tracegrad (compiled from fun); leave it out, or "
            "call scipy.optimize directly to use your own")


def minimize(fun: Callable, x0, args: tuple = (), method: str | None = None, jac=None,
             hess=None, hessp=None, bounds=None, constraints=(), tol=None, callback=None,
             options=None):
    """`scipy.optimize.minimize` of the scalar `fun(x, *args)` written with
    `tracegrad.numpy`, its derivatives compiled by tracegrad. `x0` may be any tree of
    arrays; the result's `x` (and `jac`) have its structure. `bounds` and the vector
    arguments of `callback` and of constraints are in the order of `tracegrad.tree.ravel`.
    The method defaults as SciPy's (BFGS, or L-BFGS-B with bounds, SLSQP with
    constraints)."""
    import scipy.optimize

    _no_derivative("minimize", "jac", jac)
    _no_derivative("minimize", "hess", hess)
    _no_derivative("minimize", "hessp", hessp)
    flat = _Flat(fun, x0)
    args = tuple(args) if isinstance(args, (tuple, list)) else (args,)
    name = (method or ("slsqp" if constraints else "l-bfgs-b" if bounds is not None
                       else "bfgs")).lower() if not callable(method) else None
    kwargs: dict[str, Any] = {}
    if name is None or name in _GRADIENT:
        value_and_gradient = flat.compiled("value_and_grad", value_and_grad)

        def fun_and_jac(v, *a):
            value, g = value_and_gradient(v, *a)
            return float(value), np.asarray(g, dtype=np.float64)

        objective, kwargs["jac"] = fun_and_jac, True
    else:
        compiled = flat.compiled("value", function)

        def objective(v, *a):
            return float(compiled(v, *a))
    if name in _HESSP:
        products = flat.compiled("hvp", lambda call: function(
            lambda v, t, *a: hvp(lambda y: call(y, *a), (v,), (t,))[0]))
        kwargs["hessp"] = lambda v, t, *a: np.asarray(
            products(v, np.asarray(t, dtype=np.float64), *a), dtype=np.float64)
    elif name in _HESS:
        matrix = flat.compiled("hessian", hessian)
        kwargs["hess"] = lambda v, *a: np.asarray(matrix(v, *a), dtype=np.float64)
    result = scipy.optimize.minimize(
        objective, flat.x0, args=args, method=method, bounds=bounds,
        constraints=_constraints(constraints, flat), tol=tol, callback=callback,
        options=options, **kwargs)
    return _treed(result, flat)


def _constraints(constraints, flat: _Flat):
    """Dict constraints whose `fun` takes the tree, given a compiled `jac` if they have
    none; other constraint objects as they are."""
    if isinstance(constraints, dict):
        return _constraint(constraints, flat)
    if not isinstance(constraints, (list, tuple)):
        return constraints
    return [_constraint(c, flat) if isinstance(c, dict) else c for c in constraints]


def _constraint(c: dict, flat: _Flat) -> dict:
    user = c.get("fun")
    if user is None:
        raise InvalidArgumentError("minimize: a constraint dict needs 'fun'")
    c_args = tuple(c.get("args", ()))
    value = function(lambda v, *a: user(flat.unravel(v), *a))
    out = dict(c, fun=lambda v, *a: np.asarray(value(v, *a), dtype=np.float64))
    if "jac" not in c:
        jac = jacobian(lambda v, *a: user(flat.unravel(v), *a))
        out["jac"] = lambda v, *a: np.asarray(jac(v, *a), dtype=np.float64)
    out["args"] = c_args
    return out


def _treed(result, flat: _Flat):
    result.x = flat.unravel(result.x)
    if isinstance(getattr(result, "jac", None), np.ndarray) and result.jac.shape == flat.x0.shape:
        result.jac = flat.unravel(result.jac)
    return result


def least_squares(fun: Callable, x0, jac=None, bounds=(-np.inf, np.inf), method="trf",
                  args: tuple = (), kwargs=None, **options):
    """`scipy.optimize.least_squares` of the residuals `fun(x, *args, **kwargs)` (a 1-D
    array written with `tracegrad.numpy`), with their Jacobian compiled by tracegrad
    (`jac=` must be left out). `x0` may be any tree of arrays; the result's `x` has its
    structure, its `jac` is the Jacobian with respect to the raveled `x`. `bounds` are
    scalars or in `tracegrad.tree.ravel` order."""
    import scipy.optimize

    _no_derivative("least_squares", "jac", jac)
    kwargs = dict(kwargs or {})
    flat = _Flat(lambda x, *a: fun(x, *a, **kwargs), x0)
    residuals = function(flat.call)
    jacobian_of = jacobian(flat.call)
    result = scipy.optimize.least_squares(
        lambda v, *a: np.asarray(residuals(v, *a), dtype=np.float64), flat.x0,
        jac=lambda v, *a: np.asarray(jacobian_of(v, *a), dtype=np.float64),
        bounds=bounds, method=method, args=tuple(args), **options)
    result.x = flat.unravel(result.x)
    return result

