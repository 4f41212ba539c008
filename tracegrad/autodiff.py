"""The functional reverse-mode transforms as users call them: `tg.grad`, `tg.value_and_grad`,
`tg.vjp`, `tg.hvp`.

Each returns (or, for `vjp`, builds) a function that, called inside traced code, emits its
ops inline (`tracegrad.transforms.autodiff`), so transforms nest (`grad(grad(f))`) and
compose with `tg.function` either way round. Called with arrays, it is a `tg.Function`
around that inline form: traced once per input signature, compiled with the backend of
`fn` (its own if `fn` is a `tg.Function`, else `tg.config.backend`), and returning NumPy
for NumPy input and `tg.Tensor`s for tensor input.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from tracegrad.core import dtypes, tree
from tracegrad.core.source import user_location
from tracegrad.core.state import state
from tracegrad.errors import DTypeError
from tracegrad.function import Function
from tracegrad.transforms import autodiff as ad


def _staged(inline: Callable, fn: Callable, what: str, same_args: bool = True) -> Function:
    """`inline` as a tg.Function named after `fn`, compiled with `fn`'s backend; when
    `inline` takes `fn`'s arguments (`same_args`), with its signature and static arguments."""
    if same_args:
        functools.update_wrapper(inline, fn)
    inline.__name__ = inline.__qualname__ = f"{what}_{getattr(fn, '__name__', 'fn')}"
    options = {}
    if isinstance(fn, Function):
        options["backend"] = fn._backend
        if same_args:
            options["static_argnums"] = fn._static_argnums
            options["static_argnames"] = fn._static_argnames
    return Function(inline, **options)


def _check_static(fn, argnums, what):
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    static = set(fn._static_argnums) if isinstance(fn, Function) else set()
    if any(i in static for i in nums):
        raise ValueError(f"{what}: argnums {argnums!r} names a static argument of {fn!r}")


def grad(fn: Callable, argnums=0, has_aux: bool = False) -> Function:
    """The gradient of scalar-valued `fn` with respect to the arguments at `argnums`.

    The gradient mirrors its argument (a structure of arrays gives the same structure); a
    tuple `argnums` gives a tuple of gradients; with `has_aux`, `fn` returns
    `(value, aux)` and the result is `(grads, aux)`. A non-scalar output raises
    `ShapeError`, an integer or bool argument `DTypeError`.

    >>> tg.grad(lambda x: tnp.sum(tnp.sin(x) * x))(np.array([0.0, 1.0]))
    array([0.        , 1.38177329])
    """
    _check_static(fn, argnums, "grad")

    def grad_fn(*args, **kwargs):
        return ad.grad_inline(fn, args, kwargs, argnums, has_aux)

    return _staged(grad_fn, fn, "grad")


def value_and_grad(fn: Callable, argnums=0, has_aux: bool = False) -> Function:
    """Like `grad`, returning `(value, grads)` (`((value, aux), grads)` with has_aux).

    >>> tg.value_and_grad(lambda x: x ** 2)(3.0)
    (np.float64(9.0), np.float64(6.0))
    """
    _check_static(fn, argnums, "value_and_grad")

    def value_and_grad_fn(*args, **kwargs):
        return ad.value_and_grad_inline(fn, args, kwargs, argnums, has_aux)

    return _staged(value_and_grad_fn, fn, "value_and_grad")


def _check_primals(what: str, primals) -> None:
    leaves, _ = tree.flatten(primals)
    for i, leaf in enumerate(leaves):
        if isinstance(leaf, (bool, int, float)):
            dtype = dtypes.python_scalar_dtype(leaf)
        else:
            dtype = getattr(leaf, "dtype", None)
        if dtype is not None and not dtypes.is_differentiable(dtypes.canonicalize(dtype)):
            raise DTypeError(
                f"{what}: primal leaf {i} has dtype {dtype}; only float arrays can be "
                f"differentiated (convert it with .astype(float)) (at {user_location()})"
            )


def vjp(fn: Callable, *primals, has_aux: bool = False):
    """`(out, vjp_fn)` for `out = fn(*primals)`; `vjp_fn(cotangent)` (cotangent structured
    like `out`) returns a tuple with the gradient of `sum(out * cotangent)` for each primal.
    With `has_aux`, `fn` returns `(out, aux)` and `vjp` returns `(out, vjp_fn, aux)`.

    >>> out, vjp_fn = tg.vjp(tnp.sin, np.array([0.0, 1.0]))
    >>> vjp_fn(np.ones(2))
    (array([1.        , 0.54030231]),)
    """
    if state.graph is not None:
        return ad.vjp_inline(fn, primals, has_aux)
    _check_primals("vjp", primals)

    def backward(args, cotangent):
        return ad.vjp_inline(fn, args, has_aux)[1](cotangent)

    forward = fn if isinstance(fn, Function) else Function(fn)
    results = forward(*primals)
    pullback = _staged(backward, fn, "vjp", same_args=False)
    out, aux = ad.split_aux("vjp", results) if has_aux else (results, None)

    def vjp_fn(cotangent):
        return pullback(primals, cotangent)

    return (out, vjp_fn, aux) if has_aux else (out, vjp_fn)


def hvp(fn: Callable, primals, tangents) -> tuple:
    """Hessian-vector products of scalar-valued `fn` at `primals` (a tuple of arguments)
    along `tangents` (structured like `primals`): a tuple with one product per primal,
    computed as the gradient of `<grad fn, tangents>` (reverse over reverse).

    >>> tg.hvp(lambda x: tnp.sum(x ** 3), (np.array([1.0, 2.0]),), (np.ones(2),))
    (array([ 6., 12.]),)
    """
    if state.graph is not None:
        return ad.hvp_inline(fn, primals, tangents)
    _check_primals("hvp", primals)

    def hvp_fn(primals, tangents):
        return ad.hvp_inline(fn, primals, tangents)

    return _staged(hvp_fn, fn, "hvp", same_args=False)(tuple(primals), tuple(tangents))
