"""`tnp.linalg`: NumPy's linalg namespace (norm, inv, solve, det, slogdet, cholesky here;
the decompositions in `_decompositions.py`).

Matrix functions act on the last two dims and batch over the leading ones; integer input
is computed in float64.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from tracegrad import ops
from tracegrad.core.shapes import broadcast_shapes
from tracegrad.errors import InvalidArgumentError, ShapeError
from tracegrad.numpy._core import (
    axis_arg,
    broadcast_to_shape,
    cast,
    dtype_of,
    ndim_of,
    promote,
    shape_of,
)
from tracegrad.numpy._core import reshape as _reshape
from tracegrad.numpy._creation import diagonal_mask
from tracegrad.numpy._decompositions import (
    EighResult,
    QRResult,
    SVDResult,
    eigh,
    eigvalsh,
    floating,
    qr,
    square_matrices,
    svd,
    svdvals,
)
from tracegrad.numpy._products import dot
from tracegrad.numpy._reductions import max as _max
from tracegrad.numpy._reductions import min as _min
from tracegrad.numpy._reductions import sum as _sum
from tracegrad.numpy._shape import moveaxis, ravel, swapaxes
from tracegrad.numpy._ufuncs import absolute, multiply, not_equal, power, reciprocal, sqrt, square


class SlogdetResult(NamedTuple):
    sign: object
    logabsdet: object


def _scalar_power(a, e):
    """`a **= e` as NumPy evaluates it for a Python scalar exponent (2 squares, 0.5 takes the
    square root, -1 the reciprocal)."""
    if e == 1:
        return a
    if e == 2:
        return square(a)
    if e == 0.5:
        return sqrt(a)
    if e == -1:
        return reciprocal(a)
    return power(a, e)


def norm(x, ord=None, axis=None, keepdims=False):
    """Vector or matrix norm, as `np.linalg.norm`.

    Vectors (`axis` an int, or a 1-D `x`): `ord` in {None/2, inf, -inf, 0, 1, any p}.
    Matrices (`axis` a pair, or a 2-D `x` with `ord` given): `ord` in {None/"fro", "nuc",
    1, -1, 2, -2, inf, -inf}. With `ord=None, axis=None` the 2-norm of the flattened array.
    """
    x = floating(x)
    nd = ndim_of(x)
    if axis is None:
        if ord is None or (ord in ("f", "fro") and nd == 2) or (ord == 2 and nd == 1):
            flat = ravel(x)
            out = sqrt(dot(flat, flat))
            return _reshape(out, (1,) * nd, "norm") if keepdims else out
        axis = tuple(range(nd))
    elif not isinstance(axis, tuple):
        axis = (int(axis),)
    axis = tuple(axis_arg(a, nd, "norm") for a in axis)
    if len(axis) == 1:
        return _vector_norm(x, ord, axis, keepdims)
    if len(axis) == 2:
        return _matrix_norm(x, ord, axis, keepdims)
    raise ShapeError("norm: improper number of dimensions to norm")


def _vector_norm(x, ord, axis, keepdims):
    if ord == np.inf:
        return _max(absolute(x), axis, keepdims)
    if ord == -np.inf:
        return _min(absolute(x), axis, keepdims)
    if ord == 0:
        return _sum(cast(not_equal(x, 0), dtype_of(x)[0]), axis, keepdims=keepdims)
    if ord == 1:
        return _sum(absolute(x), axis, keepdims=keepdims)
    if ord is None or ord == 2:
        return sqrt(_sum(multiply(x, x), axis, keepdims=keepdims))
    if isinstance(ord, str):
        raise InvalidArgumentError(f"norm: invalid norm order {ord!r} for vectors")  # noqa: TRY004
    total = _sum(_scalar_power(absolute(x), ord), axis, keepdims=keepdims)
    inv = np.reciprocal(np.asarray(ord, dtype=dtype_of(x)[0]))
    return _scalar_power(total, inv.item() if inv in (1, 2, 0.5, -1) else inv)


def _matrix_norm(x, ord, axis, keepdims):
    row, col = axis
    if row == col:
        raise ShapeError("norm: duplicate axes given")
    if ord in (2, -2, "nuc"):
        s = svdvals(moveaxis(x, (row, col), (-2, -1)))
        out = _max(s, -1) if ord == 2 else _min(s, -1) if ord == -2 else _sum(s, -1)
    elif ord == 1 or ord == -1:
        reduce = _max if ord == 1 else _min
        out = reduce(_sum(absolute(x), row), col - 1 if col > row else col)
    elif ord == np.inf or ord == -np.inf:
        reduce = _max if ord == np.inf else _min
        out = reduce(_sum(absolute(x), col), row - 1 if row > col else row)
    elif ord in (None, "fro", "f"):
        out = sqrt(_sum(multiply(x, x), axis))
    else:
        raise InvalidArgumentError(f"norm: invalid norm order {ord!r} for matrices")
    if keepdims:
        shape = list(shape_of(x))
        shape[row] = shape[col] = 1
        out = _reshape(out, shape, "norm")
    return out


def inv(a):
    """The inverse of each square matrix in `a` (`solve(a, I)`)."""
    a = floating(a)
    square_matrices("inv", a)
    eye = cast(diagonal_mask(shape_of(a)[-2:], 0, ops.eq, (a,)), dtype_of(a)[0])
    return ops.solve(a, broadcast_to_shape(eye, shape_of(a), (a,)))


def solve(a, b):
    """`x` with `a @ x == b`: `b` is a vector when it is 1-D, otherwise a (batch of) matrices;
    batch dims broadcast."""
    (a, b), _ = promote(floating(a), floating(b))
    square_matrices("solve", a)
    batch = shape_of(a)[:-2]
    if ndim_of(b) == 1:
        col = _reshape(b, shape_of(b) + (1,), "solve")
        col = broadcast_to_shape(col, batch + shape_of(col), (a, col))
        return _reshape(ops.solve(a, col), batch + shape_of(b), "solve")
    if ndim_of(b) < 1:
        raise ShapeError("solve: b must be at least one-dimensional")
    batch = broadcast_shapes(batch, shape_of(b)[:-2], op="solve")
    a = broadcast_to_shape(a, batch + shape_of(a)[-2:], (a, b))
    b = broadcast_to_shape(b, batch + shape_of(b)[-2:], (a, b))
    return ops.solve(a, b)


def det(a):
    """The determinant of each square matrix in `a`."""
    a = floating(a)
    square_matrices("det", a)
    return ops.det(a)


def slogdet(a):
    """`(sign, logabsdet)` of each square matrix in `a` (a named tuple, as NumPy's)."""
    a = floating(a)
    square_matrices("slogdet", a)
    return SlogdetResult(*ops.slogdet(a))


def cholesky(a, upper=False):
    """The lower-triangular `L` with `L @ L.T == a` (its transpose if `upper`)."""
    a = floating(a)
    square_matrices("cholesky", a)
    out = ops.cholesky(a)
    return swapaxes(out, -1, -2) if upper else out


# The np.linalg functions defined in this namespace beyond norm inv solve det slogdet
# cholesky: `np.linalg.NAME(tensor)` dispatches to them.
NUMPY_NAMES = ("qr", "eigh", "eigvalsh", "svd", "svdvals")

__all__ = ["EighResult", "QRResult", "SVDResult", "SlogdetResult", "cholesky", "det", "eigh",
           "eigvalsh", "inv", "norm", "qr", "slogdet", "solve", "svd", "svdvals"]
