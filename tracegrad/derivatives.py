"""Helpers built on the transforms: autograd's `elementwise_grad`, JAX's `linearize` and
`linear_transpose`, and `fixed_point` with implicit-function-theorem gradients
(docs/extending.md)."""

from __future__ import annotations

import functools
from collections.abc import Callable

from tracegrad import numpy as tnp
from tracegrad.autodiff import _check_primals, grad, jvp, vjp
from tracegrad.core import tree
from tracegrad.core.state import state
from tracegrad.errors import InvalidArgumentError
from tracegrad.function import Function
from tracegrad.transforms.control_flow import while_loop
from tracegrad.transforms.custom_rules import custom_vjp

__all__ = ["elementwise_grad", "linearize", "linear_transpose", "fixed_point"]


def elementwise_grad(fn: Callable, argnum: int = 0) -> Function:
    """autograd's `elementwise_grad`: the gradient of `sum(fn(...))` with respect to the
    argument at `argnum`, which for an elementwise `fn` is the derivative of each output
    element with respect to its own input element (same shape as the argument).

    >>> tg.elementwise_grad(tnp.tanh)(np.array([0.0, 1.0]))
    array([1.        , 0.41997434])
    """
    def summed(*args, **kwargs):
        return tnp.sum(fn(*args, **kwargs))

    functools.update_wrapper(summed, fn)
    return grad(summed, argnums=argnum)


def linearize(fn: Callable, *primals):
    """JAX's `linearize`: `(fn(*primals), f_jvp)`, where `f_jvp(*tangents)` is the
    Jacobian-vector product of `fn` at `primals` (compiled once, run for each tangent;
    the forward pass is part of each product, as `jvp`).

    >>> y, f_jvp = tg.linearize(tnp.sin, np.array([0.0, 1.0]))
    >>> f_jvp(np.ones(2))
    array([1.        , 0.54030231])
    """
    _check_primals("linearize", primals)
    out = fn(*primals) if state.graph is not None else Function(fn)(*primals)
    n = len(primals)

    def product(*args):
        return jvp(fn, args[:n], args[n:])[1]

    product.__name__ = f"linearize_{getattr(fn, '__name__', 'fn')}"
    staged = Function(product)
    staged._inline_in_trace = True

    def f_jvp(*tangents):
        if len(tangents) != n:
            raise InvalidArgumentError(
                f"linearize: f_jvp takes {n} tangents (one per primal), got {len(tangents)}")
        return staged(*primals, *tangents)

    return out, f_jvp


def linear_transpose(fn: Callable, *primals):
    """JAX's `linear_transpose`: for `fn` linear in its arguments (`primals` give their
    shapes and dtypes), the function `ct -> (fn^T ct, ...)`, one result per argument: the
    vector-Jacobian product, which for a linear `fn` does not depend on where it is taken.

    >>> f_t = tg.linear_transpose(lambda x: 2.0 * x[::-1], np.zeros(3))
    >>> f_t(np.array([1.0, 2.0, 3.0]))
    (array([6., 4., 2.]),)
    """
    _check_primals("linear_transpose", primals)

    def transposed(cotangent):
        return vjp(fn, *primals)[1](cotangent)

    return transposed


def fixed_point(f: Callable, a, x0, *, tol: float = 1e-12, max_iter: int = 10_000):
    """The fixed point `x* = f(a, x*)`, iterated from `x0` until successive iterates differ
    by at most `tol` (max-norm) or `max_iter` steps, with the gradient of the implicit
    function theorem: `dx*/da` solves `(I - df/dx) dx* = df/da` at `x*` (by the same
    iteration on the adjoint), not the derivative of every step. `a` and `x0` may be
    trees; `f` must be a contraction near `x*`.

    >>> tg.grad(lambda a: tg.fixed_point(lambda a, x: 0.5 * (x + a / x), a, a))(2.0)
    0.35355339059327...
    """
    return _fixed_point(f, tol, max_iter, a, x0)


def _iterate(f, tol, max_iter, a, x0):
    def gap(x, y):
        diffs = [tnp.max(tnp.abs(u - v)) for u, v in zip(tree.flatten(x)[0],
                                                           tree.flatten(y)[0], strict=True)]
        return functools.reduce(tnp.maximum, diffs)

    def going(i, x_prev, x):
        return (i < max_iter) & (gap(x_prev, x) > tol)

    def step(i, _, x):
        return i + 1, x, f(a, x)

    _, _, x_star = while_loop(going, step, (0, x0, f(a, x0)))
    return x_star


def _fixed_point_fwd(f, tol, max_iter, a, x0):
    x_star = _fixed_point(f, tol, max_iter, a, x0)
    return x_star, (a, x_star)


def _fixed_point_bwd(f, tol, max_iter, residuals, x_star_bar):
    a, x_star = residuals
    _, vjp_a = vjp(lambda a: f(a, x_star), a)

    def adjoint_step(packed, u):
        a, x_star, x_star_bar = packed
        _, vjp_x = vjp(lambda x: f(a, x), x_star)
        return tree.unflatten(tree.flatten(x_star_bar)[1], [
            b + g for b, g in zip(tree.flatten(x_star_bar)[0], tree.flatten(vjp_x(u)[0])[0],
                                  strict=True)])

    u = _fixed_point(adjoint_step, tol, max_iter, (a, x_star, x_star_bar), x_star_bar)
    (a_bar,) = vjp_a(u)
    return a_bar, None


def _make_fixed_point():
    rule = custom_vjp(_iterate, nondiff_argnums=(0, 1, 2))
    rule.defvjp(_fixed_point_fwd, _fixed_point_bwd)
    return rule


_fixed_point = _make_fixed_point()
