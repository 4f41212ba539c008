"""Integer-array indexing along one axis: `gather` and its transposes `scatter_add`, `scatter`.

`gather(operand, indices, axis=a)` is `np.take(operand, indices, axis=a)`: the result has
shape `operand.shape[:a] + indices.shape + operand.shape[a+1:]`. Indices may be negative
(counted from the end); an index outside `[-n, n)` raises IndexError when the op runs.
Multi-array and boolean indexing are composed from these by `tracegrad.numpy`.
"""

from __future__ import annotations

import numpy as np

from tracegrad.core import dtypes
from tracegrad.core.op import Primitive
from tracegrad.core.shapes import shape_str
from tracegrad.core.types import TensorType
from tracegrad.errors import DTypeError, NotDifferentiableError, ShapeError
from tracegrad.ops import elementwise as ew
from tracegrad.ops import shape_ops
from tracegrad.ops._batching import all_at, moveaxis
from tracegrad.ops._families import dims_same, needs, same_dtype


def _check_indices(op, operand, indices, axis):
    if not dtypes.is_int(indices.dtype):
        raise DTypeError(f"{op}: indices must be integers, got {indices.dtype.name}")
    if not 0 <= axis < operand.ndim:
        raise ShapeError(f"{op}: axis {axis} out of range for {operand}")


def gathered_shape(operand_shape, indices_shape, axis) -> tuple:
    return tuple(operand_shape[:axis]) + tuple(indices_shape) + tuple(operand_shape[axis + 1:])


def _index(axis, indices):
    return (slice(None),) * axis + (indices,)


def _check_bounds(op, n, indices):
    if indices.size and (indices.min() < -n or indices.max() >= n):
        bad = indices[(indices < -n) | (indices >= n)].flat[0]
        raise IndexError(f"{op}: index {bad} is out of bounds for an axis of size {n}")


gather_p = Primitive("gather")


@gather_p.def_abstract_eval
def _gather_abstract_eval(operand, indices, *, axis):
    _check_indices("gather", operand, indices, axis)
    if operand.shape[axis] == 0 and indices.shape and 0 not in indices.shape:
        raise ShapeError(f"gather: cannot take from an empty axis of {operand}")
    return TensorType(gathered_shape(operand.shape, indices.shape, axis), operand.dtype,
                      operand.weak)


def _gathered_dims(x, idx, ax, t):
    """`t` holds rows of `x` along axis `ax` picked by `idx` (a gather's result, a scatter's
    updates): `x`'s other dims, with `idx`'s dims in place of axis `ax`."""
    r = len(idx.shape)
    for i in range(ax):
        yield x, i, t, i
    for i in range(r):
        yield idx, i, t, ax + i
    for i in range(ax + 1, len(x.shape)):
        yield x, i, t, i - 1 + r


@gather_p.def_dims
def _gather_dims(op):
    (x, idx), (t,) = op.inputs, op.outputs
    return _gathered_dims(x, idx, op.attrs["axis"], t)


@gather_p.def_impl
def _gather_impl(operand, indices, *, axis):
    try:
        return np.asarray(operand).take(indices, axis=axis)
    except IndexError:
        _check_bounds("gather", operand.shape[axis], indices)  # the message the backends give
        raise


@gather_p.def_grad
def _gather_grad(op, g):
    operand, indices = op.inputs
    zeros = shape_ops.zeros_like(operand)
    return [scatter_add_p.bind(zeros, indices, g, axis=op.attrs["axis"]), None]


@gather_p.def_batch
def _gather_batch(ctx, args, dims, *, axis):
    (operand, indices), (d, e) = args, dims
    if e is None:  # one index set for every iteration: the batch is one more operand dim
        a = axis + (axis >= d)
        out = d if d < a else d - 1 + indices.ndim
        return gather_p.bind(operand, indices, axis=a), out
    indices = ctx.safe_indices(indices, e)
    if d is None:  # one operand: the batch is one more index dim
        return gather_p.bind(operand, indices, axis=axis), axis + e
    flat, restore = _flattened(ctx, operand, d, indices, e, axis)
    taken = gather_p.bind(flat, restore.indices, axis=0)  # [B, idx..., pre..., post...]
    return restore.gathered(taken), 0


class _Flat:
    """How an operand batched on axis 0 with its `axis` merged into the batch maps back."""

    def __init__(self, indices, nb, n_idx, n_pre, shape):
        self.indices, self.nb, self.n_idx, self.n_pre, self.shape = (
            indices, nb, n_idx, n_pre, shape)

    def gathered(self, x):
        """[B, idx..., pre..., post...] -> [B, pre..., idx..., post...]."""
        i, p = self.n_idx, self.n_pre
        perm = (0, *range(1 + i, 1 + i + p), *range(1, 1 + i), *range(1 + i + p, x.ndim))
        return shape_ops.transpose_p.bind(x, permutation=perm)

    def updates(self, x):
        """[B, pre..., idx..., post...] -> [B, idx..., pre..., post...]."""
        i, p = self.n_idx, self.n_pre
        perm = (0, *range(1 + p, 1 + p + i), *range(1, 1 + p), *range(1 + p + i, x.ndim))
        return shape_ops.transpose_p.bind(x, permutation=perm)

    def operand(self, flat):
        """[B*N, pre..., post...] -> [B, pre..., N, post...]."""
        x = shape_ops.reshape_p.bind(flat, new_sizes=self.shape)  # [B, N, pre..., post...]
        return moveaxis(x, 1, 1 + self.n_pre)


def _flattened(ctx, operand, d, indices, e, axis):
    """`operand` (batched on `d`) as [B*N, pre..., post...] with its `axis` (size N) merged
    into the batch, and `indices` (batched on `e`) offset into it: each iteration's indices
    point into its own rows; an out-of-bounds index stays out of bounds."""
    operand = moveaxis(moveaxis(operand, d, 0), axis + 1, 1)  # [B, N, pre..., post...]
    shape = tuple(-1 if n is None else n for n in operand.shape)
    if shape[2:].count(-1) or (shape[0] == -1 and shape[1] == -1):
        raise ctx.unsupported("gathering with per-iteration indices from an operand with "
                              "unknown dims")
    merged = -1 if -1 in shape[:2] else shape[0] * shape[1]
    flat = shape_ops.reshape_p.bind(operand, new_sizes=(merged, *shape[2:]))
    indices = moveaxis(indices, e, 0)
    if indices.dtype != dtypes.int64:
        indices = ew.convert_element_type_p.bind(indices, new_dtype=dtypes.int64)
    n = shape_ops.broadcast_like(shape_ops.dim_size_p.bind(operand, axis=1), indices, ())
    zero = shape_ops.zeros_like(indices)
    wrapped = ew.select_p.bind(ew.lt_p.bind(indices, zero), ew.add_p.bind(indices, n), indices)
    bad = ew.or_p.bind(ew.lt_p.bind(wrapped, zero), ew.ge_p.bind(wrapped, n))
    rows = shape_ops.iota_p.bind(*([shape_ops.dim_size_p.bind(indices, axis=0)]
                                   if indices.shape[0] is None else []),
                                 dtype=dtypes.int64, shape=indices.shape[:1], dimension=0)
    base = shape_ops.broadcast_like(ew.mul_p.bind(rows, shape_ops.broadcast_like(
        shape_ops.dim_size_p.bind(operand, axis=1), rows, ())), indices, (0,))
    beyond = shape_ops.broadcast_like(shape_ops.dim_size_p.bind(flat, axis=0), indices, ())
    flat_indices = ew.select_p.bind(bad, beyond, ew.add_p.bind(wrapped, base))
    return flat, _Flat(flat_indices, operand.shape[0], indices.ndim - 1, axis,
                       shape[:2] + shape[2:])


def _batch_scatter(prim):
    def rule(ctx, args, dims, *, axis):
        (operand, indices, updates), (d, e, u) = args, dims
        if e is None:  # one index set: the batch is one more operand dim, in front
            operand, updates = all_at([operand, updates], [d, u], 0)
            return prim.bind(operand, indices, updates, axis=axis + 1), 0
        operand, indices, updates = all_at(args, dims, 0)
        indices = ctx.safe_indices(indices, 0)
        flat, restore = _flattened(ctx, operand, 0, indices, 0, axis)
        out = prim.bind(flat, restore.indices, restore.updates(updates), axis=0)
        return restore.operand(out), 0

    prim.def_batch(rule)


def _scatter_abstract_eval(op, operand, indices, updates, axis):
    _check_indices(op, operand, indices, axis)
    same_dtype(op, operand, updates)
    expected = gathered_shape(operand.shape, indices.shape, axis)
    if len(updates.shape) != len(expected) or any(
        a is not None and b is not None and a != b for a, b in zip(updates.shape, expected)
    ):
        raise ShapeError(
            f"{op}: updates of shape {shape_str(updates.shape)} do not match the "
            f"{shape_str(expected)} selected by indices {shape_str(indices.shape)} "
            f"along axis {axis} of {shape_str(operand.shape)}"
        )
    return operand


scatter_add_p = Primitive("scatter_add")
"""`operand` with `updates` added at `indices` along `axis`; repeated indices accumulate
(`np.add.at`). The transpose of `gather`."""


@scatter_add_p.def_abstract_eval
def _scatter_add_abstract_eval(operand, indices, updates, *, axis):
    return _scatter_abstract_eval("scatter_add", operand, indices, updates, axis)


@scatter_add_p.def_impl
def _scatter_add_impl(operand, indices, updates, *, axis):
    _check_bounds("scatter_add", operand.shape[axis], indices)
    out = operand.copy()
    np.add.at(out, _index(axis, indices), updates)
    return out


_batch_scatter(scatter_add_p)


@scatter_add_p.def_dims
def _scatter_dims(op):
    """The result has the operand's shape; the updates are rows picked by the indices."""
    x, idx, upd = op.inputs
    yield from dims_same(op)
    yield from _gathered_dims(x, idx, op.attrs["axis"], upd)


@scatter_add_p.def_grad
def _scatter_add_grad(op, g):
    _, indices, _ = op.inputs
    g_updates = gather_p.bind(g, indices, axis=op.attrs["axis"]) if needs(op, 2) else None
    return [g, None, g_updates]


scatter_p = Primitive("scatter")
"""`operand` with the elements at `indices` along `axis` replaced by `updates`; with
repeated indices the last update wins."""


@scatter_p.def_abstract_eval
def _scatter_set_abstract_eval(operand, indices, updates, *, axis):
    return _scatter_abstract_eval("scatter", operand, indices, updates, axis)


@scatter_p.def_impl
def _scatter_set_impl(operand, indices, updates, *, axis):
    _check_bounds("scatter", operand.shape[axis], indices)
    out = operand.copy()
    out[_index(axis, indices)] = updates
    return out


_batch_scatter(scatter_p)
scatter_p.def_dims(_scatter_dims)


@scatter_p.def_grad
def _scatter_grad(op, g):
    # The overwritten elements of the operand get no gradient; of updates written to the
    # same place (repeated indices) only the one that was written last, and so is in the
    # result, gets the gradient.
    operand, indices, updates = op.inputs
    axis = op.attrs["axis"]
    g_operand = g_updates = None
    if needs(op, 0):
        g_operand = scatter_p.bind(g, indices, shape_ops.zeros_like(updates), axis=axis)
    if needs(op, 2):
        g_updates = gather_p.bind(g, indices, axis=axis)
        if indices.ndim:
            won = _written_last(operand, indices, axis)
            dims = tuple(range(axis, axis + indices.ndim))
            g_updates = ew.select_p.bind(shape_ops.broadcast_like(won, updates, dims),
                                         g_updates, shape_ops.zeros_like(g_updates))
    return [g_operand, None, g_updates]


def _written_last(operand, indices, axis):
    """Bool of `indices.shape`: whether each index position is the one whose update a
    scatter along `axis` of `operand` leaves in the result."""
    shape = tuple(indices.shape)
    if None in shape[1:]:
        raise NotDifferentiableError(
            f"scatter: the gradient for indices of shape {shape_str(shape)} with unknown "
            "dims past the first is not supported"
        )
    dyn = [shape_ops.dim_size_p.bind(indices, axis=0)] if shape[0] is None else []
    ids = shape_ops.row_major_index(shape, dyn)
    n = operand.shape[axis]
    slots = shape_ops.broadcast_in_dim_p.bind(
        shape_ops.scalar_like(ids, -1),
        *([shape_ops.dim_size_p.bind(operand, axis=axis)] if n is None else []),
        shape=(n,), broadcast_dimensions=())
    winners = scatter_p.bind(slots, indices, ids, axis=0)
    return ew.eq_p.bind(gather_p.bind(winners, indices, axis=0), ids)
