"""Products with NumPy's rank rules, all one `dot_general` each: dot, matmul, vdot, inner,
outer, tensordot."""

from __future__ import annotations

import operator

from tracegrad import ops
from tracegrad.core import dtypes
from tracegrad.core.shapes import broadcast_shapes, shape_str
from tracegrad.core.state import state
from tracegrad.errors import ShapeError
from tracegrad.numpy._core import (
    axis_arg,
    broadcast_to_shape,
    ndim_of,
    promote,
    shape_of,
)
from tracegrad.numpy._eager import matrix_product
from tracegrad.numpy._shape import ravel, transpose
from tracegrad.numpy._ufuncs import multiply


def _contract(a, b, ca, cb, ba=(), bb=()):
    return ops.dot_general(a, b, dimension_numbers=((tuple(ca), tuple(cb)), (tuple(ba),
                                                                              tuple(bb))))


def dot(a, b):
    """NumPy's `dot`: scalars multiply; otherwise contract the last dim of `a` with the only
    dim of a 1-D `b` or the second-to-last dim of `b`.

    >>> tnp.dot(np.ones((2, 3)), np.ones(3))   # shape (2,)
    """
    (a, b), _ = promote(a, b)
    na, nb = ndim_of(a), ndim_of(b)
    if na == 0 or nb == 0:
        return multiply(a, b)
    return _contract(a, b, (na - 1,), (0 if nb == 1 else nb - 2,))


def matmul(a, b):
    """NumPy's `matmul` (`@`): matrix products over the last two dims, broadcasting the
    leading (batch) dims; a 1-D operand is a row (left) or column (right) vector."""
    if state.graph is None:
        out = matrix_product(a, b)
        if out is not None:
            return out
    (a, b), _ = promote(a, b)
    na, nb = ndim_of(a), ndim_of(b)
    if na == 0 or nb == 0:
        raise ShapeError("matmul: operands must not be scalars (use multiply or *)")
    if nb == 1:
        return _contract(a, b, (na - 1,), (0,))
    if na == 1:
        return _contract(a, b, (0,), (nb - 2,))
    lead_a, lead_b = shape_of(a)[:-2], shape_of(b)[:-2]
    if not lead_b:
        return _contract(a, b, (na - 1,), (0,))
    if not lead_a:
        # (n, k) x (B..., k, m) -> (n, B..., m) -> (B..., n, m)
        out = _contract(a, b, (1,), (nb - 2,))
        nbatch = len(lead_b)
        return transpose(out, tuple(range(1, nbatch + 1)) + (0, nbatch + 1))
    batch = broadcast_shapes(lead_a, lead_b, op="matmul")
    a = broadcast_to_shape(a, batch + shape_of(a)[-2:], (a, b))
    b = broadcast_to_shape(b, batch + shape_of(b)[-2:], (a, b))
    nbatch = len(batch)
    dims = tuple(range(nbatch))
    return _contract(a, b, (nbatch + 1,), (nbatch,), dims, dims)


def vdot(a, b):
    """The dot product of `a` and `b` flattened (equal sizes), `a` conjugated when complex."""
    (a, b), dtype = promote(a, b)
    if dtypes.is_complex(dtype):
        a = ops.conj(a)
    return _contract(ravel(a), ravel(b), (0,), (0,))


def inner(a, b):
    """Sum product over the last dims of `a` and `b` (scalars multiply)."""
    (a, b), _ = promote(a, b)
    na, nb = ndim_of(a), ndim_of(b)
    if na == 0 or nb == 0:
        return multiply(a, b)
    return _contract(a, b, (na - 1,), (nb - 1,))


def outer(a, b):
    """`a.ravel()[:, None] * b.ravel()[None, :]`."""
    from tracegrad.numpy._core import expand_dims_at

    return multiply(expand_dims_at(ravel(a), (1,)), expand_dims_at(ravel(b), (0,)))


def tensordot(a, b, axes=2):
    """Sum products over `axes`: an int N (the last N dims of `a` with the first N of `b`) or
    a pair of axis sequences. The result has `a`'s remaining dims, then `b`'s."""
    (a, b), _ = promote(a, b)
    na, nb = ndim_of(a), ndim_of(b)
    if isinstance(axes, int) or hasattr(axes, "__index__"):
        n = operator.index(axes)
        if n < 0 or n > min(na, nb):
            raise ShapeError(f"tensordot: axes={n} does not fit ranks {na} and {nb}")
        axes_a, axes_b = tuple(range(na - n, na)), tuple(range(n))
    else:
        axes_a, axes_b = axes
        axes_a = (axes_a,) if isinstance(axes_a, int) else tuple(axes_a)
        axes_b = (axes_b,) if isinstance(axes_b, int) else tuple(axes_b)
        if len(axes_a) != len(axes_b):
            raise ShapeError("tensordot: shape-mismatch for sum (axes of unequal length)")
        axes_a = tuple(axis_arg(x, na, "tensordot") for x in axes_a)
        axes_b = tuple(axis_arg(x, nb, "tensordot") for x in axes_b)
    for i, j in zip(axes_a, axes_b, strict=True):
        da, db = shape_of(a)[i], shape_of(b)[j]
        if da is not None and db is not None and da != db:
            raise ShapeError(
                f"tensordot: shape-mismatch for sum: {shape_str(shape_of(a))} dim {i} and "
                f"{shape_str(shape_of(b))} dim {j}"
            )
    return _contract(a, b, axes_a, axes_b)
