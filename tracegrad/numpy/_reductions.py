"""Reductions with NumPy names: axis=None|int|tuple, keepdims, NumPy's result dtypes."""

from __future__ import annotations

from tracegrad import ops
from tracegrad.core import dtypes
from tracegrad.core.shapes import normalize_axes
from tracegrad.numpy._core import cast, dtype_of, read, shape_of


def sum(a, axis=None, dtype=None, keepdims=False):
    """Sum of elements over `axis`; bool and int32 sum as int64 (as NumPy)."""
    a = read(a)
    axes = normalize_axes(axis, len(shape_of(a)), "sum")
    src, weak = dtype_of(a)
    if dtype is not None:
        a = cast(a, dtypes.canonicalize(dtype, op="sum"))
    elif src == dtypes.bool_ or src == dtypes.int32:
        a = cast(a, dtypes.int64)
    return ops.reduce_sum(a, axes=axes, keepdims=bool(keepdims))
