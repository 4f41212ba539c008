"""Diagonals and triangles: diagonal, diag, trace, triu, tril.

Diagonals are strided slices of the flattened matrix dims (`reshape` + `slice`), so they
need the two matrix dims to be known while tracing.
"""

from __future__ import annotations

import numpy as np

from tracegrad import ops
from tracegrad.core.shapes import shape_str
from tracegrad.errors import ShapeError
from tracegrad.numpy._core import axis_arg, dtype_of, ndim_of, read, shape_of, static_dim
from tracegrad.numpy._core import reshape as _reshape
from tracegrad.numpy._creation import diagonal_mask
from tracegrad.numpy._reductions import sum as _sum
from tracegrad.numpy._shape import moveaxis
from tracegrad.numpy._ufuncs import where

_HINT = "diagonals need static matrix dims (an input_signature with known sizes there)"


def diagonal(a, offset=0, axis1=0, axis2=1):
    """The diagonal `offset` of the matrices in dims (`axis1`, `axis2`), as the last dim.

    >>> tnp.diagonal(np.arange(9.0).reshape(3, 3))   # [0. 4. 8.]
    """
    a = read(a)
    nd = ndim_of(a)
    if nd < 2:
        raise ShapeError("diagonal: the array must have at least two dims")
    i, j = axis_arg(axis1, nd, "diagonal"), axis_arg(axis2, nd, "diagonal")
    if i == j:
        raise ShapeError("diagonal: axis1 and axis2 cannot be the same")
    a = moveaxis(a, (i, j), (-2, -1))
    n = static_dim(a, nd - 2, "diagonal", _HINT)
    m = static_dim(a, nd - 1, "diagonal", _HINT)
    lead = shape_of(a)[:-2]
    if offset >= 0:
        k, start = max(0, min(n, m - offset)), offset
    else:
        k, start = max(0, min(n + offset, m)), -offset * m
    flat = _reshape(a, lead + (n * m,), "diagonal")
    if k == 0:
        start, limit, stride = 0, 0, 1
    else:
        limit, stride = start + (k - 1) * (m + 1) + 1, m + 1
    if (start, limit, stride) == (0, n * m, 1):
        return flat
    begin = tuple(None if d is None else 0 for d in lead)
    return ops.slice(flat, start_indices=begin + (start,), limit_indices=lead + (limit,),
                     strides=(1,) * len(lead) + (stride,))


def diag(v, k=0):
    """For a 1-D `v`: the square matrix with `v` on diagonal `k`; for a 2-D `v`: its diagonal
    `k`."""
    v = read(v)
    nd = ndim_of(v)
    if nd == 2:
        return diagonal(v, k)
    if nd != 1:
        raise ShapeError(f"diag: input must be 1- or 2-d, got {shape_str(shape_of(v))}")
    length = static_dim(v, 0, "diag", "diag needs a static length")
    n = length + abs(k)
    # v's elements land n + 1 apart in the flattened n x n result: interior padding n.
    lo = max(-k, 0) * n + max(k, 0) if length else n * n
    body = length + max(length - 1, 0) * n
    zero = np.zeros((), dtype_of(v)[0])
    flat = ops.pad(v, _const(zero), padding_config=((lo, n * n - lo - body, n),))
    return ops.reshape(flat, new_sizes=(n, n))


def _const(x):
    from tracegrad.core.state import state

    return state.graph.constant(x) if state.graph is not None else x


def trace(a, offset=0, axis1=0, axis2=1, dtype=None):
    """Sum along diagonal `offset` (NumPy's sum dtypes, as `sum`)."""
    return _sum(diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)


def _triangle(name, compare, doc):
    def fn(m, k=0):
        m = read(m)
        shape = shape_of(m)
        if not shape:
            raise ShapeError(f"{name}: input must have at least one dim")
        rc = shape[-2:] if len(shape) >= 2 else (shape[0], shape[0])
        if len(shape) == 1:
            static_dim(m, 0, name)
        mask = diagonal_mask(rc, int(k), compare, (m,))
        return where(mask, m, np.zeros((), dtype_of(m)[0]))

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


tril = _triangle("tril", ops.le, "`m` with the elements above diagonal `k` zeroed (lower "
                 "triangle); acts on the last two dims.")
triu = _triangle("triu", ops.ge, "`m` with the elements below diagonal `k` zeroed (upper "
                 "triangle); acts on the last two dims.")
