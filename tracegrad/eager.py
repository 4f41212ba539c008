"""Making tensors from values: `tg.constant` and `tg.convert_to_tensor`."""

from __future__ import annotations

import numpy as np

from tracegrad.core import dtypes
from tracegrad.core.ir import EagerTensor, GraphTensor, Literal, Tensor
from tracegrad.core.op import constant_p
from tracegrad.core.state import state
from tracegrad.core.variables import Variable
from tracegrad.errors import ShapeError
from tracegrad.numpy._core import cast

__all__ = ["constant", "convert_to_tensor"]


def constant(value, dtype=None, shape=None) -> Tensor:
    """An eager tensor holding a copy of `value` (Python floats become float64, ints
    int64); `dtype` casts it, `shape` reshapes it (a scalar is broadcast to `shape`).
    Inside a traced function it is a constant of the graph.

    >>> tg.constant([1.0, 2.0])
    <tg.Tensor: shape=(2,), dtype=float64, numpy=array([1., 2.])>
    >>> tg.constant(0, dtype="float32", shape=(2, 2))
    """
    target = None if dtype is None else dtypes.canonicalize(dtype, op="constant")
    if isinstance(value, (GraphTensor, Variable)) and state.graph is not None:
        t = state.graph.to_tensor(value)
        return cast(t, target) if target is not None else t
    if isinstance(value, (Tensor, Variable)):
        value = np.asarray(value)
    arr = np.array(value, dtype=target)
    if target is None:
        arr = arr.astype(dtypes.canonicalize(arr.dtype, op="constant"), copy=False)
    if shape is not None:
        shape = tuple(int(d) for d in shape)
        if arr.size == 1:
            arr = np.broadcast_to(arr.reshape(()), shape).copy()
        elif arr.size == int(np.prod(shape, dtype=np.int64)):
            arr = arr.reshape(shape)
        else:
            raise ShapeError(f"constant: a value of {arr.size} elements cannot have shape "
                             f"{shape}")
    if state.graph is not None:
        # A constant op of its own, never the shared one gradient rules also use: code may
        # differentiate with respect to it (`tg.gradients(y, [c])`).
        arr = np.array(arr, copy=True)
        arr.flags.writeable = False
        return constant_p.bind_in_graph(state.graph, (), {"value": Literal(arr)})
    return EagerTensor(arr)


def convert_to_tensor(value, dtype=None) -> Tensor:
    """`value` as a tensor: tensors pass through (cast to `dtype` if given), Variables are
    read, `IndexedSlices` are densified, anything else becomes a constant."""
    if isinstance(value, Variable):
        value = value.value()
    if isinstance(value, Tensor):
        if dtype is None:
            return value
        return cast(value, dtypes.canonicalize(dtype, op="convert_to_tensor"))
    densify = getattr(value, "__tg_dense__", None)
    if densify is not None:
        out = densify()
        return out if dtype is None else convert_to_tensor(out, dtype)
    return constant(value, dtype)
