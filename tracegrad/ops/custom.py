"""Boundary primitives whose gradient is supplied from outside: `custom_gradient` and `call`.

- `custom_gradient(*results, *inputs, num_results=n)` returns copies of its first `n`
  operands. `tg.custom_gradient` puts one after the user's forward computation, with the
  function's inputs and the variables it read as the remaining operands, and attaches
  the user's gradient function as the op's `grad_override`, so gradients reach the
  inputs only through that function. Without an override it is an identity on the
  results (used to give a tensor a fresh identity on a tape).
- `call(*operands, callee=c)` is one call of a compiled `tg.function`, recorded as a
  single op on the GradientTapes active when it ran eagerly. Its gradient is the
  callee's own compiled gradient function.
"""

from __future__ import annotations

from tracegrad.core.op import Primitive, no_dims
from tracegrad.ops._batching import all_at
from tracegrad.core.shapes import shape_str, shapes_compatible
from tracegrad.errors import NotDifferentiableError, ShapeError

# -- custom_gradient -------------------------------------------------------------------------

# The registered gradient of the identity custom_gradient op `tg.custom_vjp` puts on the
# cotangent its `bwd` receives: forward mode (which would differentiate `bwd` in it) raises.
REVERSE_ONLY = "custom_vjp.cotangent"

custom_gradient_p = Primitive("custom_gradient", multiple_results=True)
"""`custom_gradient(y1..yn, x1..xk, r1..rm, num_results=n, grad_graph=G,
gradient_mask=mask) -> (y1..yn)`: copies of the first n operands (f64[3] in, f64[3] out).

The `x` operands are the inputs (and variable reads) the gradient reaches; they carry no
value into the results. Traced, `grad_graph` holds the user's gradient function as a
graph (inputs: one gradient per floating-point result, then the residuals `r`; outputs:
the gradients of the `x` whose `mask` entry is True) and `tg.custom_gradient` sets the op's
`grad_override` to the registered rule that inlines it ("custom_gradient.grad_graph", kept
in the JSON form). Eagerly the tape record carries the user's rule itself.
Without `grad_graph` and override the op is an identity on the results (used to give a
tensor a fresh identity on a tape).

>>> custom_gradient_p.bind(y, x, num_results=1)   # y, with x as a gradient-only input
"""


@custom_gradient_p.def_abstract_eval
def _custom_gradient_abstract_eval(*types, num_results, grad_graph=None, gradient_mask=()):
    if not 1 <= num_results <= len(types) - len(gradient_mask):
        raise ShapeError(
            f"custom_gradient: num_results={num_results} and {len(gradient_mask)} gradient "
            f"operands do not fit {len(types)} operands"
        )
    return list(types[:num_results])


@custom_gradient_p.def_dims
def _custom_gradient_dims(op):
    """Result k is a copy of operand k."""
    for x, t in zip(op.inputs, op.outputs):
        for i in range(len(t.shape)):
            yield t, i, x, i


@custom_gradient_p.def_impl
def _custom_gradient_impl(*arrays, num_results, grad_graph=None, gradient_mask=()):
    return tuple(arrays[:num_results])


@custom_gradient_p.def_grad
def _custom_gradient_grad(op, *out_grads):
    if op.attrs.get("grad_graph") is not None:
        raise NotDifferentiableError(
            f"custom_gradient op created at {op.source} has no gradient_override naming the "
            "rule that inlines its grad_graph (\"custom_gradient.grad_graph\"); graphs read "
            "back from text lose overrides: differentiate the function that traced it"
        )
    return list(out_grads) + [None] * (len(op.inputs) - len(out_grads))


@custom_gradient_p.def_batch
def _custom_gradient_batch(ctx, args, dims, *, num_results, grad_graph=None,
                           gradient_mask=()):
    # Every operand batched on axis 0; the gradient graph batched likewise, so the
    # gradients it gives are per example (an operand that was invariant gets the sum over
    # the batch through the gradient of its broadcast). A rule registered by name reads
    # no value of one iteration, so it serves the batched op as it is.
    override = ctx.op.grad_override
    if hasattr(override, "batched"):  # a gradient function traced when asked for
        override = override.batched(ctx.what)
    elif grad_graph is None and override is not None and not isinstance(override, str):
        raise ctx.unsupported("its gradient is a Python function of one iteration's values")
    operands = all_at(args, dims, 0)
    attrs = {"num_results": num_results}
    if grad_graph is not None:
        size = operands[0].shape[0]
        attrs["grad_graph"] = ctx.vectorize_graph(grad_graph, [0] * len(grad_graph.inputs),
                                                  size)
        attrs["gradient_mask"] = gradient_mask
    outs = custom_gradient_p.bind(*operands, **attrs)
    outs[0].op.grad_override = override
    return list(outs), [0] * len(outs)


# -- call ------------------------------------------------------------------------------------

call_p = Primitive("call", multiple_results=True)
"""`call(*operands, callee=c) -> outputs of c.graph`: runs a compiled function.

`c` has `.graph` (a FuncGraph; the operands feed `graph.all_inputs`: its inputs, then
its captures), `c(list_of_arrays) -> list_of_arrays` (the compiled executor) and
`c.vjp(op, *out_grads) -> in_grads` (its gradient, itself a `call` of the compiled
gradient graph, so derivatives of any order stay compiled).
"""


@call_p.def_abstract_eval
def _call_abstract_eval(*types, callee):
    params = callee.graph.all_inputs
    if len(types) != len(params):
        raise ShapeError(
            f"call of {callee.graph.name}: {len(types)} operands for {len(params)} inputs"
        )
    for t, p in zip(types, params, strict=True):
        if t.dtype != p.type.dtype or not shapes_compatible(tuple(t.shape), p.type.shape):
            raise ShapeError(
                f"call of {callee.graph.name}: operand {t.dtype.name}{shape_str(t.shape)} "
                f"does not fit input {p.type}"
            )
    return [t.type for t in callee.graph.outputs]


call_p.def_dims(no_dims)  # (the callee relates them; backends and passes inline it)


@call_p.def_impl
def _call_impl(*arrays, callee):
    return tuple(callee(list(arrays)))


@call_p.def_grad
def _call_grad(op, *out_grads):
    return op.attrs["callee"].vjp(op, *out_grads)


@call_p.def_batch
def _call_batch(ctx, args, dims, *, callee):
    return ctx.run(callee.graph, args, dims)
