"""The one reverse-accumulation routine, over graph operations and tape records alike.

`backprop(records, ys, xs, grad_ys)` walks `records` (operations in creation order, which
is topological: a graph's `operations` or a tape's entries) backwards from the targets
`ys` to the sources `xs`. Only records on a path from some x to some y are visited;
gradients arriving at a tensor from several consumers are summed; each record's
gradient rule (`primitive.grad`, or a registered override) is called once with the
aggregated gradients of its outputs. Rules build their results with tracegrad ops, so
the gradient is itself traced (inside a graph) or executed and recorded (eagerly), which
is what makes higher derivatives work.
"""

from __future__ import annotations

from typing import Callable, Sequence

from tracegrad import ops
from tracegrad.core import dtypes
from tracegrad.core.shapes import shape_str, shapes_compatible
from tracegrad.errors import NotDifferentiableError, ShapeError

UNCONNECTED = ("none", "zero")

# name -> gradient function registered with `tg.RegisterGradient`
GRADIENT_REGISTRY: dict[str, Callable] = {}


def is_differentiable(t) -> bool:
    return dtypes.is_differentiable(t.dtype)


def unconnected_mode(value) -> str:
    mode = getattr(value, "value", value)
    if mode not in UNCONNECTED:
        raise ValueError(
            f"unconnected_gradients must be 'none' or 'zero' (tg.UnconnectedGradients), "
            f"got {value!r}"
        )
    return mode


def gradient_rule(op) -> Callable | None:
    """The rule that differentiates `op`: its override if one was in force, else its own.

    An override is a name registered with `tg.RegisterGradient`, or the rule itself (a
    callable `(op, *out_grads) -> in_grads`, as custom gradients attach to their records).
    """
    override = op.grad_override
    if callable(override):
        return override
    if override is not None:
        try:
            return GRADIENT_REGISTRY[op.grad_override]
        except KeyError:
            raise LookupError(
                f"no gradient registered under {op.grad_override!r} (gradient_override_map "
                f"for op {op.primitive.name} at {op.source})"
            ) from None
    return op.primitive.grad


def _where(op) -> str:
    return f" (op created at {op.source})" if op.source else ""


def _sum(grads):
    total = grads[0]
    for g in grads[1:]:
        total = ops.add(total, g)
    return total


def backprop(
    records: Sequence,
    ys: Sequence,
    xs: Sequence,
    grad_ys: Sequence | None = None,
    *,
    stop_gradients: Sequence = (),
    unconnected_gradients="none",
    aggregate: Callable | None = None,
    key: Callable = id,
) -> list:
    """Gradients of `sum(ys * grad_ys)` with respect to each of `xs` (None if unconnected).

    - `records`: objects with `.primitive`, `.inputs`, `.outputs`, `.attrs`, `.source`,
      `.grad_override`, in creation order.
    - `grad_ys`: one cotangent per y (None entries mean ones).
    - `stop_gradients`: tensors treated as constants (no gradient flows through them).
    - `aggregate(list_of_grads)`: how several gradients of one tensor are summed (default:
      `add` ops).
    - `key(tensor)`: the identity of a tensor (default `id`).
    """
    mode = unconnected_mode(unconnected_gradients)
    aggregate = aggregate or _sum
    x_keys = [key(x) for x in xs]
    stop = {key(t) for t in stop_gradients}

    # Forward: tensors that depend on some x (through records that do not stop them).
    reachable = set(x_keys)
    forward = []
    for rec in records:
        if any(key(t) in reachable for t in rec.inputs):
            forward.append(rec)
            for t in rec.outputs:
                k = key(t)
                if k not in stop:
                    reachable.add(k)

    # Backward: the records between xs and ys, in reverse creation order.
    needed = {key(y) for y in ys if key(y) in reachable}
    between = []
    for rec in reversed(forward):
        if any(key(t) in needed for t in rec.outputs):
            between.append(rec)
            for t in rec.inputs:
                k = key(t)
                if k in reachable and k not in stop:
                    needed.add(k)

    grads: dict = {}
    if grad_ys is None:
        grad_ys = [None] * len(ys)
    if len(grad_ys) != len(ys):
        raise ValueError(f"got {len(grad_ys)} grad_ys for {len(ys)} ys")
    for y, gy in zip(ys, grad_ys, strict=True):
        k = key(y)
        if k not in reachable or not is_differentiable(y):
            continue
        if gy is None:
            gy = ops.ones_like(y)
        grads.setdefault(k, []).append(gy)

    for rec in between:
        out_grads = []
        has_any = False
        for t in rec.outputs:
            gs = grads.pop(key(t), None) if key(t) not in x_keys else grads.get(key(t))
            if gs:
                g = aggregate(gs)
                if key(t) in x_keys:
                    grads[key(t)] = [g]
                has_any = True
            else:
                g = None
            out_grads.append(g)
        if not has_any:
            continue
        wants = [key(t) in reachable and key(t) not in stop and is_differentiable(t)
                 for t in rec.inputs]
        if not any(wants):
            continue
        rule = gradient_rule(rec)
        if rule is None:
            raise NotDifferentiableError(
                f"{rec.primitive.name} has no gradient rule{_where(rec)}; wrap its inputs in "
                "tg.stop_gradient if no gradient should flow through it"
            )
        out_grads = [
            g if g is not None or not is_differentiable(t) else ops.zeros_like(t)
            for g, t in zip(out_grads, rec.outputs, strict=True)
        ]
        in_grads = rule(rec, *out_grads)
        in_grads = list(in_grads) if isinstance(in_grads, (list, tuple)) else [in_grads]
        if len(in_grads) != len(rec.inputs):
            raise ValueError(
                f"the gradient rule of {rec.primitive.name} returned {len(in_grads)} gradients "
                f"for {len(rec.inputs)} inputs{_where(rec)}"
            )
        for t, g, want in zip(rec.inputs, in_grads, wants, strict=True):
            if g is None or not want:
                continue
            gshape = tuple(getattr(g, "shape", ()))
            if not shapes_compatible(gshape, tuple(t.shape)):
                raise ShapeError(
                    f"the gradient rule of {rec.primitive.name} returned a gradient of shape "
                    f"{shape_str(gshape)} for an input of shape {shape_str(t.shape)}"
                    f"{_where(rec)}"
                )
            grads.setdefault(key(t), []).append(g)

    results = []
    for x, k in zip(xs, x_keys, strict=True):
        gs = grads.get(k)
        if gs:
            results.append(aggregate(gs) if len(gs) > 1 else gs[0])
        elif mode == "zero":
            results.append(ops.zeros_like(x))
        else:
            results.append(None)
    return results
