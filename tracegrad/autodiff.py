"""The functional transforms as users call them: `tg.grad`, `tg.value_and_grad`, `tg.vjp`,
`tg.hvp`, `tg.jvp`, `tg.jacobian`, `tg.batch_jacobian`, `tg.hessian`, `tg.vmap`, `tg.pfor`,
`tg.for_loop`.

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
from tracegrad.core.state import state
from tracegrad.errors import DTypeError, InvalidArgumentError
from tracegrad.function import Function
from tracegrad.transforms import autodiff as ad
from tracegrad.transforms import forward as fwd
from tracegrad.transforms import jacobian as jac
from tracegrad.transforms import vectorize as vec


def _staged(inline: Callable, fn: Callable, what: str, recipe: tuple | None = None,
            same_args: bool = True) -> Function:
    """`inline` as a tg.Function named after `fn`, compiled with `fn`'s backend; when
    `inline` takes `fn`'s arguments (`same_args`), with its signature and static arguments.
    With a `recipe`, `(transform, fn, options)`, it pickles as `transform(fn, **options)`."""
    if same_args:
        functools.update_wrapper(inline, fn)
    inline.__name__ = inline.__qualname__ = f"{what}_{getattr(fn, '__name__', 'fn')}"
    options = {}
    if isinstance(fn, Function):
        options["backend"] = fn._backend
        if same_args:
            options["static_argnums"] = fn._static_argnums
            options["static_argnames"] = fn._static_argnames
    staged = Function(inline, **options)
    staged._inline_in_trace = True  # inside a trace, a transform emits its ops inline
    staged._recipe = recipe
    return staged


def _check_static(fn, argnums, what):
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    static = set(fn._static_argnums) if isinstance(fn, Function) else set()
    if any(i in static for i in nums):
        raise InvalidArgumentError(f"{what}: argnums {argnums!r} names a static argument of {fn!r}")


def grad(fn: Callable, argnums=0, has_aux: bool = False, holomorphic: bool = False) -> Function:
    """The gradient of scalar-valued `fn` with respect to the arguments at `argnums`.

    The gradient mirrors its argument (a structure of arrays gives the same structure); a
    tuple `argnums` gives a tuple of gradients; with `has_aux`, `fn` returns
    `(value, aux)` and the result is `(grads, aux)`. A non-scalar output raises
    `ShapeError`, an integer or bool argument `DTypeError`.

    Complex arguments get TensorFlow's gradient `dL/dx + i dL/dy` of a real output
    (docs/autodiff.md); a complex output needs `holomorphic=True`, which gives the complex
    derivative `df/dz` of a holomorphic `fn` (complex arguments).

    >>> tg.grad(lambda x: tnp.sum(tnp.sin(x) * x))(np.array([0.0, 1.0]))
    array([0.        , 1.38177329])
    >>> tg.grad(lambda z: tnp.abs(z) ** 2)(3 + 4j)
    np.complex128(6+8j)
    """
    _check_static(fn, argnums, "grad")

    def grad_fn(*args, **kwargs):
        return ad.grad_inline(fn, args, kwargs, argnums, has_aux, holomorphic)

    return _staged(grad_fn, fn, "grad", (grad, fn, {"argnums": argnums, "has_aux": has_aux,
                                                   "holomorphic": holomorphic}))


def value_and_grad(fn: Callable, argnums=0, has_aux: bool = False,
                   holomorphic: bool = False) -> Function:
    """Like `grad`, returning `(value, grads)` (`((value, aux), grads)` with has_aux).

    >>> tg.value_and_grad(lambda x: x ** 2)(3.0)
    (np.float64(9.0), np.float64(6.0))
    """
    _check_static(fn, argnums, "value_and_grad")

    def value_and_grad_fn(*args, **kwargs):
        return ad.value_and_grad_inline(fn, args, kwargs, argnums, has_aux,
                                        holomorphic=holomorphic)

    return _staged(value_and_grad_fn, fn, "value_and_grad",
                   (value_and_grad, fn, {"argnums": argnums, "has_aux": has_aux,
                                         "holomorphic": holomorphic}))


def _check_primals(what: str, primals) -> None:
    leaves, _ = tree.flatten([p for p in primals if not ad.is_static_value(p)])
    for i, leaf in enumerate(leaves):
        if isinstance(leaf, (bool, int, float, complex)):
            dtype = dtypes.python_scalar_dtype(leaf)
        else:
            dtype = getattr(leaf, "dtype", None)
        if dtype is not None and not dtypes.is_differentiable(dtypes.canonicalize(dtype)):
            raise DTypeError(
                f"{what}: primal leaf {i} has dtype {dtype}; only float and complex arrays "
                f"can be differentiated (convert it with .astype(float))"
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

    forward = fn if isinstance(fn, Function) else Function(fn)
    results = forward(*primals)
    out, aux = ad.split_aux("vjp", results) if has_aux else (results, None)
    vjp_fn = functools.partial(_pullback(fn, has_aux=has_aux), primals)  # picklable
    return (out, vjp_fn, aux) if has_aux else (out, vjp_fn)


def _pullback(fn: Callable, has_aux: bool) -> Function:
    """`pullback(primals, cotangent)`: the gradients `vjp(fn, *primals)[1](cotangent)`."""

    def backward(args, cotangent):
        return ad.vjp_inline(fn, args, has_aux)[1](cotangent)

    return _staged(backward, fn, "vjp", (_pullback, fn, {"has_aux": has_aux}),
                   same_args=False)


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


def jvp(fn: Callable, primals, tangents) -> tuple:
    """`(out, tangent_out)`: `fn(*primals)` and its directional derivative along `tangents`
    (structured like `primals`), the Jacobian-vector product `J t` (forward mode).

    >>> tg.jvp(tnp.sin, (np.array([0.0, 1.0]),), (np.ones(2),))
    (array([0.        , 0.84147098]), array([1.        , 0.54030231]))
    """
    if state.graph is not None:
        return fwd.jvp_inline(fn, primals, tangents)
    _check_primals("jvp", primals)

    def jvp_fn(primals, tangents):
        return fwd.jvp_inline(fn, primals, tangents)

    return _staged(jvp_fn, fn, "jvp", same_args=False)(tuple(primals), tuple(tangents))


def jacobian(fn: Callable, argnums=0, *, use_pfor: bool = True, parallel_iterations=None,
             mode=None, holomorphic: bool = False) -> Function:
    """The Jacobian of `fn` w.r.t. the arguments at `argnums`: for an output `y` and an
    argument `x`, a `y.shape + x.shape` array (structures mirror the outputs, then the
    arguments; a tuple `argnums` gives tuples).

    Computed by vectorization: in reverse mode (`mode="rev"`) the pullback runs once on a
    batch of one-hot cotangents (one batched backward pass); in forward mode (`"fwd"`)
    the Jacobian-vector product runs on a batch of one-hot tangents. `mode=None` picks
    forward when the arguments have fewer elements than the outputs, else reverse.
    `use_pfor=False` computes the rows one after the other (same results);
    `parallel_iterations=k` vectorizes k rows at a time to bound memory.

    Complex values (docs/autodiff.md): `holomorphic=True` gives the complex derivative
    dy/dz of a holomorphic function; otherwise complex outputs need real arguments (forward
    mode) and complex arguments real outputs (reverse mode: rows are gradients).

    >>> tg.jacobian(lambda x: x ** 2)(np.array([1.0, 2.0]))
    array([[2., 0.],
           [0., 4.]])
    """
    _check_static(fn, argnums, "jacobian")

    def jacobian_fn(*args, **kwargs):
        return jac.jacobian_inline(fn, args, kwargs, argnums, use_pfor=use_pfor,
                                   parallel_iterations=parallel_iterations, mode=mode,
                                   holomorphic=holomorphic)

    options = {"argnums": argnums, "use_pfor": use_pfor,
               "parallel_iterations": parallel_iterations, "mode": mode,
               "holomorphic": holomorphic}
    return _staged(jacobian_fn, fn, "jacobian", (jacobian, fn, options))


def batch_jacobian(fn: Callable, argnum: int = 0, *, use_pfor: bool = True,
                   parallel_iterations=None) -> Function:
    """Per-example Jacobians of `fn`, which maps `x` `[b, x...]` to `[b, y...]` with row i
    depending only on row i of `x`: a `[b, y..., x...]` array, row i the Jacobian of row i
    (the seed's algorithm: the batched gradient of each output column, vectorized over the
    columns). Both shapes need rank >= 2 and equal first dims (`ValueError`).

    >>> tg.batch_jacobian(lambda x: x * x)(np.array([[1., 2.], [3., 4.]]))[1]
    array([[6., 0.],
           [0., 8.]])
    """
    _check_static(fn, argnum, "batch_jacobian")

    def batch_jacobian_fn(*args, **kwargs):
        return jac.batch_jacobian_inline(fn, args, kwargs, argnum, use_pfor=use_pfor,
                                         parallel_iterations=parallel_iterations)

    options = {"argnum": argnum, "use_pfor": use_pfor,
               "parallel_iterations": parallel_iterations}
    return _staged(batch_jacobian_fn, fn, "batch_jacobian", (batch_jacobian, fn, options))


def hessian(fn: Callable, argnums=0) -> Function:
    """The Hessian of `fn` w.r.t. the arguments at `argnums`, the Jacobian of its Jacobian
    (of its gradient for a scalar output), as JAX's: `out.shape + x.shape + x.shape` for
    each output (`x.shape + x.shape` for a scalar); a tuple `argnums` gives nested tuples
    `H[i][j]` of shape `out.shape + x_i.shape + x_j.shape`, and a structured output mirrors
    its structure.

    >>> tg.hessian(lambda x: tnp.sum(x ** 3))(np.array([1.0, 2.0]))
    array([[ 6.,  0.],
           [ 0., 12.]])
    >>> tg.hessian(lambda x: x ** 3)(np.array([1.0, 2.0]))[1]
    array([[ 0.,  0.],
           [ 0., 12.]])
    """
    _check_static(fn, argnums, "hessian")

    def hessian_fn(*args, **kwargs):
        return jac.hessian_inline(fn, args, kwargs, argnums)

    return _staged(hessian_fn, fn, "hessian", (hessian, fn, {"argnums": argnums}))


def vmap(fn: Callable, in_axes=0, out_axes=0) -> Function:
    """`fn` mapped over an axis of its arguments, vectorized: `vmap(f)(xs)` equals stacking
    `f(x)` for each `x` in `xs`, computed by one batched graph (each op through its batch
    rule), not a loop.

    `in_axes` (an int, None, or a structure matching the arguments' top levels) gives each
    argument's mapped axis, None for one shared by every example; `out_axes` places the
    batch in the results (None for a result that does not depend on it). Nests and
    composes: `vmap(grad(f))` gives per-example gradients.

    >>> tg.vmap(lambda x, w: tnp.dot(w, x), in_axes=(0, None))(np.ones((2, 3)), 2 * np.eye(3))
    array([[2., 2., 2.],
           [2., 2., 2.]])
    """

    def vmap_fn(*args, **kwargs):
        return vec.vmap_inline(fn, args, kwargs, in_axes, out_axes)

    return _staged(vmap_fn, fn, "vmap", (vmap, fn, {"in_axes": in_axes, "out_axes": out_axes}))


def _staged_loop(inline: Callable, loop_fn: Callable, iters, what: str):
    if state.graph is not None:
        return inline(loop_fn, iters)

    def run():
        return inline(loop_fn, iters)

    run.__name__ = f"{what}_{getattr(loop_fn, '__name__', 'fn')}"
    return Function(run)()


def pfor(loop_fn: Callable, iters: int):
    """`loop_fn(i)` for every `i` in `range(iters)`, vectorized into one graph: `loop_fn`
    gets a rank-0 int64 tensor and its results are stacked on a new axis 0. An op that
    cannot be vectorized raises `UnsupportedOpError` (use `tg.for_loop` instead).

    >>> x = np.array([1.0, 2.0, 3.0])
    >>> tg.pfor(lambda i: tnp.take(x, i) * i, 3)
    array([0., 2., 6.])
    """
    return _staged_loop(vec.pfor_inline, loop_fn, iters, "pfor")


def for_loop(loop_fn: Callable, iters: int):
    """The results of `tg.pfor(loop_fn, iters)`, computed one iteration after the other
    (each iteration traced into the graph, until `tg.fori_loop` gives a real loop).

    >>> tg.for_loop(lambda i: tnp.take(np.array([1.0, 2.0, 3.0]), i) * i, 3)
    array([0., 2., 6.])
    """
    return _staged_loop(vec.for_loop_inline, loop_fn, iters, "for_loop")

