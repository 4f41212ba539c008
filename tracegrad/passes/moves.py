"""Trees of data movement that read one tensor: one gather at constant indices (a rule of
`simplify` for `concatenate`, `reshape`, `transpose`, `slice` and `rev`).

A loop's gradient leaves its accumulated blocks stacked in one carry (passes/loops.py),
and the gradient of the slices that cut a weight tensor into rows assembles them back by
`concatenate`s (passes/pads.py): GradBench's LSTM (l=4) rebuilds its 8x56 weight gradient
from 32 rows of one 32x14 carry with 32 slices, 32 reshapes, 10 concatenations and 4
reshapes, each a loop and an allocation of its own in a kernel. Every element of such a
tree's result is an element of the one tensor it reads, at a place known from the shapes
alone: evaluated on the tensor's flat indices, the tree gives that map, and the tree
becomes a reshape, a slice of rows or a gather of rows at constant indices, the rows
as long as the map's runs of consecutive elements allow.

Only trees with a concatenation (or a gather this rule made) are rewritten; every shape in
them is known, and the result has at most `MAX_ELEMENTS` elements (the indices are a
constant of the graph). Values are unchanged: elements are only moved.
"""

from __future__ import annotations

import numpy as np

from tracegrad.core.op import constant_p
from tracegrad.core.shapes import size
from tracegrad.ops import indexing, shape_ops

MAX_ELEMENTS = 1 << 16  # the most elements of a rewritten tree's result
MAX_OPS = 4096  # the most ops a tree is walked through

_MOVES = (shape_ops.slice_p, shape_ops.reshape_p, shape_ops.transpose_p, shape_ops.rev_p,
          shape_ops.concatenate_p)


def collapsed(rw, op, ins):
    """The movement tree rooted at `op` (target-graph operands `ins`) as one gather,
    slice or reshape of the tensor it reads, or None."""
    out = op.outputs[0].type
    if None in out.shape or not 0 < size(out.shape) <= MAX_ELEMENTS:
        return None
    if op.primitive is not shape_ops.concatenate_p and not _reaches_merge(ins[0]):
        return None
    walk = _Walk()
    if not walk.visit_inputs(op, ins) or walk.source is None or not walk.merges:
        return None
    src = walk.source
    shape = tuple(src.type.shape)
    if None in shape:
        return None
    flat = np.arange(size(shape), dtype=np.int64).reshape(shape)
    try:
        index = np.asarray(_evaluate(op, ins, src, flat, {}))
    except (IndexError, ValueError):
        return None
    plan = _plan(shape, index.reshape(-1), out.shape)
    if plan[0] >= walk.ops:
        return None  # no fewer ops (a tree this rule made is left as it is)
    return _emit(rw, op, src, out.shape, plan)


class _Walk:
    """The tensor a movement tree reads (`source`), whether it merges pieces (a
    concatenation or a gather), and how many ops it has."""

    __slots__ = ("source", "merges", "ops")

    def __init__(self):
        self.source, self.merges, self.ops = None, False, 0

    def visit_inputs(self, op, ins) -> bool:
        self.ops += 1
        if op.primitive is shape_ops.concatenate_p:
            self.merges = True
        return all(self.visit(x) for x in ins)

    def visit(self, t) -> bool:
        if self.ops > MAX_OPS:
            return False
        inner = t.op
        if inner is not None and _is_move(inner):
            if inner.primitive is indexing.gather_p:
                self.merges = True
                self.ops += 1
                return self.visit(inner.inputs[0])
            return self.visit_inputs(inner, inner.inputs)
        if self.source is None:
            self.source = t
        return self.source is t


def _reaches_merge(t, depth: int = 8) -> bool:
    """Whether a chain of moves of one operand leads from `t` to a concatenation or a
    gather at constant indices."""
    for _ in range(depth):
        inner = t.op
        if inner is None or not _is_move(inner):
            return False
        if inner.primitive in (shape_ops.concatenate_p, indexing.gather_p):
            return True
        t = inner.inputs[0]
    return False


def _is_move(op) -> bool:
    if op.primitive in _MOVES:
        return None not in op.outputs[0].type.shape
    if op.primitive is indexing.gather_p:
        idx = op.inputs[1].op
        return idx is not None and idx.primitive is constant_p and \
            None not in op.outputs[0].type.shape
    return False


def _evaluate(op, ins, src, flat, memo):
    """`op`'s result computed on `flat` in place of `src`'s values."""
    if op.primitive is indexing.gather_p:
        args = [_value(ins[0], src, flat, memo), op.inputs[1].op.attrs["value"].value]
    else:
        args = [_value(x, src, flat, memo) for x in ins]
    return op.primitive.impl(*args, **op.attrs)


def _value(t, src, flat, memo):
    if t is src:
        return flat
    key = id(t)
    if key not in memo:
        memo[key] = np.asarray(_evaluate(t.op, t.op.inputs, src, flat, memo))
    return memo[key]


def _plan(shape, index, out_shape):
    """How `index` (flat) moves a tensor of `shape` to `out_shape`: `(ops, table, rows)`,
    the ops it takes, the tensor seen as a table of the rows moved whole (its shape) and
    the rows picked, in order (None: all of them, unmoved)."""
    n = size(shape)
    if index.size == n and np.array_equal(index, np.arange(n)):
        return (int(tuple(shape) != tuple(out_shape)), None, None)
    width = _row_width(shape, index)
    rows = index[::width] // width
    table = (n // width, width) if width > 1 else (n,)
    picked = (rows.size, *table[1:])
    return (1 + (table != tuple(shape)) + (picked != tuple(out_shape)), table, rows)


def _emit(rw, op, src, out_shape, plan):
    _, table_shape, rows = plan
    if rows is None:
        return [_reshaped(rw, op, src, out_shape)]
    table = _reshaped(rw, op, src, table_shape)
    lo, m = int(rows[0]), rows.size
    if np.array_equal(rows, np.arange(lo, lo + m)):
        picked = rw.emit(shape_ops.slice_p, [table],
                         {"start_indices": (lo, 0)[:len(table_shape)],
                          "limit_indices": (lo + m, *table_shape[1:]),
                          "strides": (1,) * len(table_shape)}, op.source)[0]
    else:
        at = rw.constant(rows.astype(np.int64), source=op.source)
        picked = rw.emit(indexing.gather_p, [table, at], {"axis": 0}, op.source)[0]
    return [_reshaped(rw, op, picked, out_shape)]


def _row_width(shape, index) -> int:
    """The longest trailing block of `shape` (a product of its last dims) that `index`
    moves whole: runs of that many consecutive indices, each starting at a multiple of it."""
    for k in range(1, len(shape) + 1):
        width = size(shape[k:])
        if width == 1:
            return 1
        if index.size % width:
            continue
        runs = index.reshape(-1, width)
        if (runs[:, 0] % width == 0).all() and \
                (runs == runs[:, :1] + np.arange(width)).all():
            return width
    return 1


def _reshaped(rw, op, x, shape):
    shape = tuple(shape)
    if tuple(x.type.shape) == shape:
        return x
    return rw.emit(shape_ops.reshape_p, [x], {"new_sizes": shape}, op.source)[0]
