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
from tracegrad.ops._families import needs, same_dtype


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


@gather_p.def_impl
def _gather_impl(operand, indices, *, axis):
    try:
        return np.take(operand, indices, axis=axis)
    except IndexError:
        _check_bounds("gather", operand.shape[axis], indices)  # the message the backends give
        raise


@gather_p.def_grad
def _gather_grad(op, g):
    operand, indices = op.inputs
    zeros = shape_ops.zeros_like(operand)
    return [scatter_add_p.bind(zeros, indices, g, axis=op.attrs["axis"]), None]


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
