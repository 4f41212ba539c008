"""`tracegrad.scipy.linalg`: solve_triangular, cho_factor, cho_solve and block_diag with
SciPy's signatures and values, over the triangular_solve and cholesky primitives."""

from __future__ import annotations

from tracegrad import ops
from tracegrad.core.shapes import broadcast_shapes
from tracegrad.errors import InvalidArgumentError, ShapeError
from tracegrad.numpy._core import broadcast_to_shape, ndim_of, promote, read, shape_of
from tracegrad.numpy._core import reshape as _reshape
from tracegrad.numpy._decompositions import floating, square_matrices
from tracegrad.numpy._matrix import tril, triu
from tracegrad.numpy._pad import pad
from tracegrad.numpy._shape import concatenate, swapaxes
from tracegrad.numpy._ufuncs import add

_TRANS = {0: False, "N": False, 1: True, "T": True, 2: True, "C": True}


def _with_rhs(op, a, b):
    """`(a, b as a batch of matrices, b was a vector)`, float and batch dims broadcast."""
    (a, b), _ = promote(floating(a), floating(b))
    square_matrices(op, a)
    vector = ndim_of(b) == ndim_of(a) - 1
    if vector:
        b = _reshape(b, shape_of(b) + (1,), op)
    if ndim_of(b) < 2:
        raise ShapeError(f"{op}: b must be at least one-dimensional")
    batch = broadcast_shapes(shape_of(a)[:-2], shape_of(b)[:-2], op=op)
    a = broadcast_to_shape(a, batch + shape_of(a)[-2:], (a, b))
    b = broadcast_to_shape(b, batch + shape_of(b)[-2:], (a, b))
    return a, b, vector


def _unvector(x, vector, op):
    return _reshape(x, shape_of(x)[:-1], op) if vector else x


def solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False,
                     check_finite=True):
    """`x` with `op(a) @ x == b` for triangular `a` (its `lower` or upper triangle is read;
    `op(a)` is `a.T` for `trans` 1/"T"/2/"C"); `unit_diagonal` takes a's diagonal as ones.
    `b` is a vector (`a`'s rank minus one) or a (batch of) matrices."""
    if trans not in _TRANS:
        raise InvalidArgumentError(f"solve_triangular: incorrect trans {trans!r}")
    a, b, vector = _with_rhs("solve_triangular", a, b)
    x = ops.triangular_solve(a, b, left_side=True, lower=bool(lower),
                             transpose_a=_TRANS[trans], unit_diagonal=bool(unit_diagonal))
    return _unvector(x, vector, "solve_triangular")


def cho_factor(a, lower=False, overwrite_a=False, check_finite=True):
    """`(c, lower)`: `c` holds the Cholesky factor of symmetric positive-definite `a` in
    its lower (`lower`) or upper triangle, read from that triangle of `a`; its other
    triangle is `a`'s, as SciPy leaves it."""
    a = floating(a)
    square_matrices("cho_factor", a)
    if lower:
        return add(ops.cholesky(a), triu(a, 1)), lower
    factor = swapaxes(ops.cholesky(swapaxes(a, -1, -2)), -1, -2)
    return add(factor, tril(a, -1)), lower


def cho_solve(c_and_lower, b, overwrite_b=False, check_finite=True):
    """`x` with `A @ x == b`, `A` given by `cho_factor`'s `(c, lower)`."""
    c, lower = c_and_lower
    c, b, vector = _with_rhs("cho_solve", c, b)
    lower = bool(lower)
    y = ops.triangular_solve(c, b, lower=lower, transpose_a=not lower)
    x = ops.triangular_solve(c, y, lower=lower, transpose_a=lower)
    return _unvector(x, vector, "cho_solve")


def block_diag(*arrs):
    """The block-diagonal matrix of the arrays (scalars are 1 x 1 blocks, vectors rows)."""
    if not arrs:
        arrs = ([],)
    blocks = []
    for x in arrs:
        x = read(x)
        nd = ndim_of(x)
        if nd > 2:
            raise ShapeError(f"block_diag: arguments must have dimension <= 2, got {nd}")
        blocks.append(_reshape(x, (1,) * (2 - nd) + shape_of(x), "block_diag"))
    widths = [shape_of(x)[1] for x in blocks]
    if None in widths:
        raise ShapeError("block_diag: the blocks' widths must be known when traced")
    blocks = promote(*blocks)[0]
    total, rows, left = sum(widths), [], 0
    for x, w in zip(blocks, widths, strict=True):
        rows.append(pad(x, ((0, 0), (left, total - left - w))))
        left += w
    return concatenate(rows, axis=0)
