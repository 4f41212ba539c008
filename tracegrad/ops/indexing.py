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
from tracegrad.errors import DTypeError, ShapeError
from tracegrad.ops._families import same_dtype


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
    return np.take(operand, indices, axis=axis)


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
