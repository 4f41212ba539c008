"""The machinery under every tracegrad.numpy function: conversion, NEP 50 promotion and
NumPy broadcasting made explicit as `convert_element_type` / `broadcast_in_dim` ops."""

from __future__ import annotations

import numpy as np

from tracegrad import ops
from tracegrad.core import dtypes
from tracegrad.core.ir import EagerTensor, GraphTensor, Tensor
from tracegrad.core.shapes import broadcast_shapes
from tracegrad.core.state import state
from tracegrad.core.variables import Variable

_PY_SCALARS = (bool, int, float)


def is_tensor(x) -> bool:
    return isinstance(x, (Tensor, Variable))


def is_python_scalar(x) -> bool:
    return type(x) in _PY_SCALARS


def read(x):
    """`x` with Variables read (a tensor) and lists turned into arrays; arrays unchanged."""
    if isinstance(x, (Tensor, np.ndarray)) or type(x) in _PY_SCALARS:
        return x
    if isinstance(x, Variable):
        return x.value()
    if isinstance(x, np.generic):
        return np.asarray(x)
    if isinstance(x, (list, tuple)) and any(is_tensor(e) for e in _flat(x)):
        from tracegrad.numpy._shape import stack

        return stack([read(e) for e in x])
    arr = np.asarray(x)
    if arr.dtype not in dtypes.SUPPORTED:
        arr = arr.astype(dtypes.canonicalize(arr.dtype))
    return arr


def _flat(x):
    for e in x:
        if isinstance(e, (list, tuple)):
            yield from _flat(e)
        else:
            yield e


def dtype_of(x) -> tuple[np.dtype, bool]:
    """`(dtype, weak)` of an operand (Python scalars are weak)."""
    if isinstance(x, GraphTensor):
        return x.type.dtype, x.type.weak
    if type(x) in _PY_SCALARS:
        return dtypes.python_scalar_dtype(x), True
    return x.dtype, False


def shape_of(x) -> tuple:
    if type(x) in _PY_SCALARS:
        return ()
    return tuple(x.shape)


def cast(x, dtype: np.dtype, weak: bool = False):
    """`x` as `dtype` (a convert_element_type op when it is a tensor of another dtype)."""
    if type(x) in _PY_SCALARS:
        if weak and state.graph is not None:
            return state.graph.constant(np.asarray(x, dtype=dtype), weak=True)
        return np.asarray(x, dtype=dtype)
    if isinstance(x, GraphTensor):
        if x.type.dtype == dtype:
            return x
        return ops.convert_element_type(x, new_dtype=dtype, weak=weak)
    if x.dtype == dtype:
        return x
    if isinstance(x, np.ndarray) and state.graph is None:
        return x.astype(dtype)
    return ops.convert_element_type(x, new_dtype=dtype)


def promote(*xs, min_kind: str | None = None):
    """The operands converted to their NEP 50 common dtype, and that dtype.

    `min_kind="float"` promotes integer and bool results to float64 (as `true_divide`).
    """
    xs = [read(x) for x in xs]
    dtype, weak = dtypes.result_type(*(dtype_of(x) for x in xs))
    if min_kind == "float" and not dtypes.is_float(dtype):
        dtype = dtypes.float64
    return [cast(x, dtype, weak) for x in xs], dtype


def dim_source(xs, shape, axis):
    """A scalar int64 tensor holding target dim `axis` of `shape`, read from an operand."""
    nd = len(shape)
    for x in xs:
        s = shape_of(x)
        i = axis - (nd - len(s))
        if i >= 0 and s[i] is None:
            return ops.dim_size(x, axis=i)
    raise ValueError(f"no operand provides unknown dim {axis}")


def broadcast_to_shape(x, shape, sources=()):
    """`x` broadcast to `shape` by NumPy rules; unknown dims are read from `sources`."""
    xs = shape_of(x)
    shape = tuple(shape)
    if xs == shape and None not in shape:
        return x
    if type(x) in _PY_SCALARS:
        x = np.asarray(x)
    nd = len(shape)
    dims = tuple(range(nd - len(xs), nd))
    if xs == shape and not any(
        d is None and i not in dims for i, d in enumerate(shape)
    ):
        return x
    dyn = [dim_source(list(sources) + [x], shape, i) for i, d in enumerate(shape) if d is None]
    return ops.broadcast_in_dim(x, *dyn, shape=shape, broadcast_dimensions=dims)


def broadcast(*xs):
    """The operands broadcast to their common shape."""
    shapes = [shape_of(x) for x in xs]
    target = broadcast_shapes(*shapes)
    if all(s == target for s in shapes):
        return list(xs)
    return [x if s == target else broadcast_to_shape(x, target, xs) for x, s in zip(xs, shapes)]


def elementwise(prim, *xs, min_kind: str | None = None):
    """Apply an elementwise primitive NumPy-style: promote, broadcast, bind."""
    xs, _ = promote(*xs, min_kind=min_kind)
    return prim.bind(*broadcast(*xs))


def unary_float(prim, x):
    """Apply a float-only unary primitive; integer and bool inputs become float64."""
    x = read(x)
    dtype, weak = dtype_of(x)
    if not dtypes.is_float(dtype):
        x = cast(x, dtypes.float64, weak)
    elif type(x) in _PY_SCALARS:
        x = np.asarray(x, dtype=dtype)
    return prim.bind(x)


def as_eager(x):
    """An eager tg.Tensor for NumPy input (used when a result must be a Tensor)."""
    return x if isinstance(x, Tensor) else EagerTensor(np.asarray(x))
