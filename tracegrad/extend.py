"""New primitives from Python, as autograd's `extend` module: a function of NumPy arrays
becomes a tracegrad primitive with the gradient you give it.

    @tg.extend.primitive
    def logsumexp(x):                       # NumPy code, run on NumPy arrays
        m = np.max(x)
        return m + np.log(np.sum(np.exp(x - m)))

    tg.extend.defvjp(logsumexp, lambda ans, x: lambda g: g * tnp.exp(x - ans))

Called on tensors (traced, eagerly, on a tape) it is one `python_call` op: the numpy
backend calls the function, the Numba backend calls it between its compiled kernels (a
Python call, as autograd's primitives are); called on NumPy arrays with nothing recording
it is the function itself. Gradients come from `defvjp` (vjp makers, autograd's
signature) or `defjvp` (tangent functions, transposed for reverse mode); both are written
with `tracegrad.numpy`, so they are differentiable and batched like any code. `vmap` runs
the function once per example unless `defbatch` gives a batch rule. See docs/extending.md.
"""

from __future__ import annotations

import functools

from tracegrad.core import tree
from tracegrad.core.ir import Tensor
from tracegrad.core.state import state
from tracegrad.core.variables import Variable
from tracegrad.errors import InvalidArgumentError
from tracegrad.ops.python_call import PythonFunction, python_call_p
from tracegrad.transforms.custom_rules import transpose_linear

__all__ = ["primitive", "defvjp", "defjvp", "defbatch", "Primitive"]


class Primitive:
    """A Python function of NumPy arrays as a tracegrad primitive (from `primitive`)."""

    def __init__(self, fun, result=None, name=None):
        functools.update_wrapper(self, fun)
        self.function = PythonFunction(fun, name or getattr(fun, "__name__", "fn"), result)

    def __repr__(self):
        return f"<tracegrad.extend.Primitive {self.function.name}>"

    def __call__(self, *args, **kwargs):
        if state.graph is None and not state.tapes and not any(
                isinstance(a, (Tensor, Variable)) for a in args):
            return self.function.impl(*args, **kwargs)
        try:
            static = tuple(sorted(kwargs.items()))
            hash(static)
        except TypeError:
            raise InvalidArgumentError(
                f"python primitive {self.function.name}: keyword arguments are static options "
                "and must be hashable; pass arrays positionally") from None
        outs = python_call_p.bind(*args, function=self.function, kwargs=static)
        return outs[0] if self.function.single else tuple(outs)

    def defvjp(self, *makers, argnums=None) -> None:
        """See `tracegrad.extend.defvjp`."""
        defvjp(self, *makers, argnums=argnums)

    def defjvp(self, *tangents, argnums=None) -> None:
        """See `tracegrad.extend.defjvp`."""
        defjvp(self, *tangents, argnums=argnums)


def primitive(fun=None, *, result=None, name=None):
    """`fun`, a function of NumPy arrays, as a tracegrad primitive. Its result types are
    found by running it once on zeros of its operands' shapes, or given by `result(*types,
    **kwargs)`: it gets one object with `.shape` and `.dtype` per operand and returns one
    such object (a `tg.TensorSpec`, an array) per result (a tuple for several).
    Positional arguments are its operands; keyword arguments are static options."""
    if fun is None:
        return functools.partial(primitive, result=result, name=name)
    return Primitive(fun, result, name)


def _check(fun, what: str) -> PythonFunction:
    if not isinstance(fun, Primitive):
        raise InvalidArgumentError(
            f"tracegrad.extend.{what}: expects a function made by tracegrad.extend.primitive, "
            f"got {type(fun).__name__}")
    return fun.function


def defvjp(fun: Primitive, *makers, argnums=None) -> None:
    """Gradients of `fun` with respect to its operands, autograd's way: `makers[k](ans,
    *args, **kwargs)` returns the function `g -> gradient of operand argnums[k]` (argnums
    defaults to 0, 1, ...); `None` for an operand with no gradient."""
    function = _check(fun, "defvjp")
    nums = range(len(makers)) if argnums is None else argnums
    for i, maker in zip(nums, makers, strict=True):
        if maker is not None:
            function.vjps[i] = maker


def defjvp(fun: Primitive, *tangents, argnums=None) -> None:
    """Forward-mode rules of `fun`, autograd's way: `tangents[k](t, ans, *args, **kwargs)`
    is the output tangent for a tangent `t` of operand argnums[k]. Reverse mode uses their
    transposes (each must be linear in `t`; not checked)."""
    nums = range(len(tangents)) if argnums is None else argnums
    defvjp(fun, *[None if fn is None else _transposed(fn, i)
                  for i, fn in zip(nums, tangents, strict=True)],
           argnums=list(nums))


def _transposed(tangent_fn, i):
    def maker(ans, *args, **kwargs):
        def vjp(g):
            def output_tangents(zeros):
                return tree.flatten(tangent_fn(zeros[0], ans, *args, **kwargs),
                                    is_leaf=lambda x: x is None)[0]

            cotangents = tree.flatten(g, is_leaf=lambda x: x is None)[0]
            return transpose_linear(output_tangents, [args[i]], cotangents)[0]

        return vjp

    return maker


def defbatch(fun: Primitive, rule) -> None:
    """A batch rule for `fun` under `vmap`: `rule(args, dims, **kwargs)` gets the operands
    (tensors) and each one's batch axis (None when not batched) and returns `(results,
    result batch axes)`. Without one, `vmap` calls `fun` once per example."""
    _check(fun, "defbatch").batch_rule = rule
