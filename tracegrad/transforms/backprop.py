"""The one reverse-accumulation routine, over graph operations and tape records alike.

`backprop(records, ys, xs, grad_ys)` walks `records` (operations in creation order, which
is topological: a graph's `operations` or a tape's entries) backwards from the targets
`ys` to the sources `xs`:

1. forward from the sources, it marks the float tensors that depend on some x (integer and
   bool tensors, outputs of non-differentiable primitives and `stop_gradients` carry no
   dependence), keeping the records on such paths;
2. backward from the targets, it keeps the records one of whose outputs some y depends on;
3. in reverse creation order (every consumer of a tensor before its producer, which is what
   pending counts ensure in TensorFlow's `_GradientsHelper`) it sums the gradients that
   arrived at each output of a record and calls the record's gradient rule once.

Rules build their results with tracegrad ops, so the gradient is itself traced (inside a
graph) or executed and recorded (eagerly), which is what makes higher derivatives work.
Nothing is emitted for a path that does not connect an x to a y, and a rule is told which
of its inputs need no gradient (`op.skip_input_indices`, as in TensorFlow).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence

import numpy as np

from tracegrad import ops
from tracegrad.core import dtypes
from tracegrad.core.ir import EagerTensor, Tensor
from tracegrad.core.shapes import shape_str, shapes_compatible
from tracegrad.core.state import state
from tracegrad.errors import (
    DTypeError, InvalidArgumentError, NotDifferentiableError, ShapeError, TracegradError,
)
from tracegrad.ops import NONDIFFERENTIABLE


class UnconnectedGradients(str, enum.Enum):
    """What the gradient of a source that the targets do not depend on is: `NONE` gives
    `None`, `ZERO` gives zeros of the source's shape. The strings "none" / "zero" work too."""

    NONE = "none"
    ZERO = "zero"


# name -> gradient function registered with `tg.RegisterGradient`
GRADIENT_REGISTRY: dict[str, Callable] = {}


def is_differentiable(t) -> bool:
    return dtypes.is_differentiable(t.dtype)


def unconnected_mode(value) -> str:
    """"none" or "zero" for an `UnconnectedGradients` member or its string."""
    if type(value) is str and (value == "none" or value == "zero"):
        return value
    mode = getattr(value, "value", value)
    if mode not in ("none", "zero"):
        raise InvalidArgumentError(
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
            return GRADIENT_REGISTRY[override]
        except KeyError:
            raise NotDifferentiableError(
                f"no gradient registered under {override!r} (gradient_override_map for op "
                f"{op.primitive.name}{_where(op)}); register one with @tg.RegisterGradient"
            ) from None
    return op.primitive.grad


class RuleView:
    """The record a rule is called with: the record's attributes, plus
    `skip_input_indices`, the inputs whose gradient nobody needs."""

    __slots__ = ("_op", "skip_input_indices")

    def __init__(self, op, skip_input_indices: tuple):
        self._op = op
        self.skip_input_indices = skip_input_indices

    def __getattr__(self, name):
        return getattr(self._op, name)

    def __repr__(self):
        return repr(self._op)


def _where(op) -> str:
    return f" (op created at {op.source})" if op.source else ""


def _sum(grads):
    total = grads[0]
    for g in grads[1:]:
        total = ops.add(total, g)
    return total


def _as_gradient(g, like):
    """A rule's or caller's gradient value as a tensor (NumPy and Python numbers converted)."""
    if isinstance(g, (np.ndarray, np.generic, float, int)):
        arr = np.asarray(g, dtype=like.dtype)
        return state.graph.constant(arr) if state.graph is not None else EagerTensor(arr)
    return g


def check_gradient(g, t, what: str, of: str = "the tensor it is the gradient of") -> None:
    """Raise ShapeError / DTypeError if `g` (described by `what`) cannot be the gradient of
    tensor `t` (described by `of`)."""
    if not isinstance(g, Tensor):
        return
    if not shapes_compatible(tuple(g.shape), tuple(t.shape)):
        raise ShapeError(
            f"{what} has shape {shape_str(g.shape)}, but {of} has shape {shape_str(t.shape)}"
        )
    if g.dtype != t.dtype:
        raise DTypeError(
            f"{what} has dtype {g.dtype.name}, but {of} has dtype {t.dtype.name}"
        )


def _call_rule(rule, rec, out_grads, skip):
    try:
        in_grads = rule(RuleView(rec, skip) if skip else rec, *out_grads)
    except TracegradError as e:
        where = _where(rec)
        if not where or rec.source in str(e):
            raise
        raise type(e)(f"{e}{where}") from None
    in_grads = list(in_grads) if isinstance(in_grads, (list, tuple)) else [in_grads]
    if len(in_grads) != len(rec.inputs):
        raise InvalidArgumentError(
            f"the gradient rule of {rec.primitive.name} returned {len(in_grads)} gradients "
            f"for {len(rec.inputs)} inputs{_where(rec)}"
        )
    return in_grads


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
    """Gradients of `sum(ys * grad_ys)` with respect to each of `xs`.

    - `records`: objects with `.primitive`, `.inputs`, `.outputs`, `.attrs`, `.source`,
      `.grad_override`, in creation order (a graph's operations, a tape's entries).
    - `grad_ys`: one cotangent per y, of its shape and dtype (None entries mean ones).
    - `stop_gradients`: tensors treated as constants: a source among them still receives
      the gradient that reaches it, but nothing flows on through it.
    - `unconnected_gradients`: "none" (None for a source the ys do not depend on) or "zero".
    - `aggregate(list_of_grads)`: how several gradients of one tensor are summed (default:
      `add` ops).
    - `key(tensor)`: the identity of a tensor (default `id`).

    Integer and bool sources get None. A record with no gradient rule on a path from a
    source to a target raises `NotDifferentiableError` naming its op and where it was made.
    """
    mode = unconnected_mode(unconnected_gradients)
    aggregate = aggregate or _sum
    x_keys = [key(x) for x in xs]
    x_set = set(x_keys)
    stop = {key(t) for t in stop_gradients}

    # Forward: the float tensors that depend on some x, and the records on such paths
    # (with the keys of their inputs and outputs, computed once).
    reachable = {k for k, x in zip(x_keys, xs, strict=True) if is_differentiable(x)}
    forward = []
    for rec in records:
        in_keys = [key(t) for t in rec.inputs]
        if reachable.isdisjoint(in_keys):
            continue
        if rec.primitive in NONDIFFERENTIABLE and rec.grad_override is None:
            continue
        out_keys = [key(t) for t in rec.outputs]
        forward.append((rec, in_keys, out_keys))
        for k, t in zip(out_keys, rec.outputs):
            if k not in stop and is_differentiable(t):
                reachable.add(k)

    # Backward: the records between the xs and the ys, in reverse creation order.
    if grad_ys is None:
        grad_ys = [None] * len(ys)
    if len(grad_ys) != len(ys):
        raise InvalidArgumentError(f"got {len(grad_ys)} grad_ys for {len(ys)} ys")
    y_keys = [key(y) for y in ys]
    needed = {k for k in y_keys if k in reachable and k not in stop}
    between = []
    for entry in reversed(forward):
        if not needed.isdisjoint(entry[2]):
            between.append(entry)
            needed.update(k for k in entry[1] if k in reachable and k not in stop)

    grads: dict = {}
    for i, (y, k, gy) in enumerate(zip(ys, y_keys, grad_ys, strict=True)):
        if gy is not None and is_differentiable(y):  # integer and bool ys are constants
            gy = _as_gradient(gy, y)
            check_gradient(gy, y, f"grad_ys[{i}]")
        if k in reachable:
            grads.setdefault(k, []).append(ops.ones_like(y) if gy is None else gy)

    for rec, in_keys, out_keys in between:
        if not any(k in grads for k in out_keys):
            continue  # no gradient reached its outputs (a rule returned None for them)
        out_grads = []
        for k, t in zip(out_keys, rec.outputs):
            gs = grads.get(k) if k in x_set else grads.pop(k, None)
            if gs and len(gs) > 1:
                gs = [aggregate(gs)]
                if k in x_set:
                    grads[k] = gs
            if gs:
                out_grads.append(gs[0])
            elif is_differentiable(t):
                out_grads.append(ops.zeros_like(t))
            else:
                out_grads.append(None)
        rule = gradient_rule(rec)
        if rule is None:
            raise NotDifferentiableError(
                f"{rec.primitive.name} has no gradient rule{_where(rec)}; wrap its inputs in "
                "tg.stop_gradient if no gradient should flow through it"
            )
        skip = tuple(i for i, k in enumerate(in_keys) if k not in reachable)
        in_grads = _call_rule(rule, rec, out_grads, skip)
        for i, (t, k, g) in enumerate(zip(rec.inputs, in_keys, in_grads, strict=True)):
            if g is None or k not in reachable:
                continue
            if not isinstance(g, Tensor):
                g = _as_gradient(g, t)
            if isinstance(g, Tensor) and (g.dtype != t.dtype or tuple(g.shape) != tuple(t.shape)):
                check_gradient(g, t, f"the gradient rule of {rec.primitive.name}{_where(rec)} "
                                     f"returned a gradient for input {i} that")
            grads.setdefault(k, []).append(g)

    results = []
    for x, k in zip(xs, x_keys, strict=True):
        gs = grads.get(k)
        if not is_differentiable(x):
            results.append(None)
        elif gs:
            results.append(aggregate(gs) if len(gs) > 1 else gs[0])
        elif mode == "zero":
            results.append(ops.zeros_like(x))
        else:
            results.append(None)
    return results
