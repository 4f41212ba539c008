"""`tg.IndexedSlices`: a gradient that touches only some rows of a tensor, and its algebra.

A GradientTape returns one for the gradient of `take`/gather along axis 0 with respect to
the gathered tensor (an embedding lookup touches few rows of a large table). Several of
them arriving at one tensor are aggregated by concatenation; any dense gradient among
them makes the sum dense. `tg.convert_to_tensor`, tracegrad ops and arithmetic with
tensors densify it. Graph-mode gradients (`tg.gradients`, `tg.grad`) stay dense.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from tracegrad import ops
from tracegrad.core.ir import EagerTensor
from tracegrad.core.state import state
from tracegrad.errors import InvalidArgumentError
from tracegrad.ops.indexing import gather_p


class IndexedSlices:
    """Rows of a dense tensor of shape `dense_shape`: row `indices[i]` holds `values[i]`.

    `values` has shape `[k, *dense_shape[1:]]`, `indices` is an integer tensor of shape
    `[k]`; rows listed twice add up. The dense value is
    `np.add.at(np.zeros(dense_shape), indices, values)`.

    >>> s = tg.IndexedSlices(tg.constant([[1., 2.]]), tg.constant([2]), (3, 2))
    >>> tg.convert_to_tensor(s).numpy()
    array([[0., 0.], [0., 0.], [1., 2.]])
    """

    __array_priority__ = 1001  # NumPy defers `ndarray + slices` to us

    def __init__(self, values, indices, dense_shape):
        self.values = values
        self.indices = indices
        self.dense_shape = None if dense_shape is None else tuple(
            int(d) for d in np.asarray(dense_shape).reshape(-1)
        )

    @property
    def shape(self) -> tuple:
        return self.dense_shape

    @property
    def dtype(self) -> np.dtype:
        return self.values.dtype

    @property
    def ndim(self) -> int:
        return len(self.dense_shape)

    def __tg_dense__(self):
        """The dense tensor, built with tracegrad ops (so tapes record it)."""
        if self.dense_shape is None:
            raise InvalidArgumentError("IndexedSlices without a dense_shape cannot be made dense")
        zeros = np.zeros(self.dense_shape, self.values.dtype)
        zeros = state.graph.constant(zeros) if state.graph is not None else EagerTensor(zeros)
        return ops.scatter_add(zeros, self.indices, self.values, axis=0)

    def __array__(self, dtype=None, copy=None):
        dense = np.zeros(self.dense_shape, np.asarray(self.values).dtype)
        np.add.at(dense, np.asarray(self.indices), np.asarray(self.values))
        return dense if dtype is None else dense.astype(dtype)

    def numpy(self) -> np.ndarray:
        return self.__array__()

    def __repr__(self):
        return (
            f"<tg.IndexedSlices dense_shape={self.dense_shape}, indices={self.indices!r}, "
            f"values={self.values!r}>"
        )

    # Arithmetic densifies (the result is a dense tensor).
    def __add__(self, other):
        return self.__tg_dense__() + other

    def __radd__(self, other):
        return other + self.__tg_dense__()

    def __sub__(self, other):
        return self.__tg_dense__() - other

    def __rsub__(self, other):
        return other - self.__tg_dense__()

    def __mul__(self, other):
        return self.__tg_dense__() * other

    def __rmul__(self, other):
        return other * self.__tg_dense__()

    def __truediv__(self, other):
        return self.__tg_dense__() / other

    def __rtruediv__(self, other):
        return other / self.__tg_dense__()

    def __neg__(self):
        return -self.__tg_dense__()


def aggregate_gradients(grads: list):
    """The sum of the gradients arriving at one tensor: IndexedSlices are concatenated
    (values and indices) unless a dense gradient is among them, which makes the sum dense."""
    if len(grads) == 1:
        return grads[0]
    sparse = [g for g in grads if isinstance(g, IndexedSlices)]
    if not sparse:
        return functools.reduce(ops.add, grads)
    if len(sparse) < len(grads):
        dense = [g.__tg_dense__() if isinstance(g, IndexedSlices) else g for g in grads]
        return functools.reduce(ops.add, dense)
    indices = [ops.convert_element_type(g.indices, new_dtype=np.dtype("int64"))
               if g.indices.dtype != np.int64 else g.indices for g in sparse]
    return IndexedSlices(
        ops.concatenate(*[g.values for g in sparse], dimension=0),
        ops.concatenate(*indices, dimension=0),
        sparse[0].dense_shape,
    )


def gather_rows_gradient(op, g):
    """A tape's gradient rule for `gather(params, indices, axis=0)`: IndexedSlices for
    `params` (the rows that were gathered), none for `indices`."""
    params, indices = op.inputs
    if isinstance(g, IndexedSlices):  # `g` holds rows of this gather's output
        indices = ops.gather(indices, g.indices, axis=0)
        g = g.values
    n = math.prod(indices.shape)
    if indices.ndim != 1:
        indices = ops.reshape(indices, new_sizes=(n,))
    row = tuple(params.shape[1:])
    if tuple(g.shape) != (n, *row):
        g = ops.reshape(g, new_sizes=(n, *row))
    return [IndexedSlices(g, indices, params.shape), None]


def wants_rows_gradient(op) -> bool:
    """Whether a tape record is a gather along axis 0 whose gradient may be sparse."""
    return op.primitive is gather_p and op.attrs["axis"] == 0 and op.grad_override is None
