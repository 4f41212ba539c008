"""Making tensors from values: `tg.constant` and `tg.convert_to_tensor`."""

from __future__ import annotations

import numpy as np

from tracegrad.core import dtypes
from tracegrad.core.ir import EagerTensor, Tensor
from tracegrad.core.state import state
from tracegrad.core.variables import Variable
from tracegrad.numpy._core import cast


def constant(value, dtype=None) -> Tensor:
    """An eager tensor holding a copy of `value` (Python floats become float64).

    >>> tg.constant([1.0, 2.0])
    <tg.Tensor: shape=(2,), dtype=float64, numpy=array([1., 2.])>
    """
    if isinstance(value, (Tensor, Variable)):
        value = np.asarray(value)
    target = None if dtype is None else dtypes.canonicalize(dtype, op="constant")
    arr = np.array(value, dtype=target)
    if target is None:
        arr = arr.astype(dtypes.canonicalize(arr.dtype, op="constant"), copy=False)
    if state.graph is not None:
        return state.graph.constant(arr)
    return EagerTensor(arr)


def convert_to_tensor(value, dtype=None) -> Tensor:
    """`value` as a tensor: tensors pass through (cast to `dtype` if given), Variables are
    read, anything else becomes a constant."""
    if isinstance(value, Variable):
        value = value.value()
    if isinstance(value, Tensor):
        if dtype is None:
            return value
        return cast(value, dtypes.canonicalize(dtype, op="convert_to_tensor"))
    densify = getattr(value, "__tg_dense__", None)
    if densify is not None:
        return densify()
    return constant(value, dtype)
