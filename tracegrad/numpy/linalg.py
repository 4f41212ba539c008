"""`tnp.linalg`: NumPy's linalg namespace (norm, inv, solve, det, slogdet, cholesky, the
compositions over the decompositions and NumPy 2's array-API names here; the
decompositions in `_decompositions.py`).

Matrix functions act on the last two dims and batch over the leading ones; integer input
is computed in float64.
"""

from __future__ import annotations

import math
import operator
from typing import NamedTuple

import numpy as np

from tracegrad import ops
from tracegrad.core import dtypes
from tracegrad.core.ir import GraphTensor
from tracegrad.core.shapes import broadcast_shapes, shape_str
from tracegrad.errors import (
    ArgumentTypeError,
    InvalidArgumentError,
    ShapeError,
    UnsupportedOpError,
)
from tracegrad.numpy._arrange import matrix_transpose
from tracegrad.numpy._complex import conjugate
from tracegrad.numpy._construct import cross as _cross
from tracegrad.numpy._construct import vecdot as _vecdot
from tracegrad.numpy._core import (
    axis_arg,
    broadcast_to_shape,
    cast,
    dtype_of,
    ndim_of,
    promote,
    read,
    shape_of,
)
from tracegrad.numpy._core import reshape as _reshape
from tracegrad.numpy._creation import asarray, diagonal_mask, zeros_like
from tracegrad.numpy._decompositions import (
    EighResult,
    EigResult,
    QRResult,
    SVDResult,
    eig,
    eigh,
    eigvals,
    eigvalsh,
    floating,
    matrices,
    qr,
    square_matrices,
    svd,
    svdvals,
)
from tracegrad.numpy._matrix import diagonal as _diagonal
from tracegrad.numpy._matrix import trace as _trace
from tracegrad.numpy._products import dot
from tracegrad.numpy._products import matmul as _matmul
from tracegrad.numpy._products import outer as _outer
from tracegrad.numpy._products import tensordot as _tensordot
from tracegrad.numpy._reductions import any as _any
from tracegrad.numpy._reductions import max as _max
from tracegrad.numpy._reductions import min as _min
from tracegrad.numpy._reductions import sum as _sum
from tracegrad.numpy._shape import expand_dims, moveaxis, ravel, swapaxes, transpose
from tracegrad.numpy._ufuncs import (
    abs_squared,
    absolute,
    add,
    divide,
    greater,
    isnan,
    logical_and,
    logical_not,
    multiply,
    not_equal,
    power,
    reciprocal,
    sqrt,
    square,
    subtract,
    where,
)


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
            if dtypes.is_complex(dtype_of(flat)[0]):
                re, im = ops.real(flat), ops.imag(flat)
                out = sqrt(add(dot(re, re), dot(im, im)))
            else:
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
    real = dtypes.real_dtype(dtype_of(x)[0])
    if ord == 0:
        return _sum(cast(not_equal(x, 0), real), axis, keepdims=keepdims)
    if ord == 1:
        return _sum(absolute(x), axis, keepdims=keepdims)
    if ord is None or ord == 2:
        return sqrt(_sum(abs_squared(x), axis, keepdims=keepdims))
    if isinstance(ord, str):
        raise InvalidArgumentError(f"norm: invalid norm order {ord!r} for vectors")  # noqa: TRY004
    total = _sum(_scalar_power(absolute(x), ord), axis, keepdims=keepdims)
    inv = np.reciprocal(np.asarray(ord, dtype=real))
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
        out = sqrt(_sum(abs_squared(x), axis))
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
    """The lower-triangular `L` with `L @ L.H == a` (`L.H` if `upper`)."""
    a = floating(a)
    square_matrices("cholesky", a)
    out = ops.cholesky(a)
    return conjugate(swapaxes(out, -1, -2)) if upper else out


# -- composites over the decompositions ---------------------------------------------------------

_NO_VALUE = object()


def _inverted(s, keep):
    """`1 / s` where `keep`, 0 elsewhere (no infinity on either side of the where)."""
    safe = where(keep, s, 1)
    return where(keep, divide(1, safe), 0)


def _mH(x):
    """The matrices of `x` conjugate-transposed (transposed when real)."""
    return conjugate(swapaxes(x, -1, -2))


def _eps_times_size(a, dtype):
    """`max(m, n) * eps(dtype)` for `a`'s matrices (m x n): a float64 scalar tensor read at
    run time when a dim is unknown when traced."""
    eps = float(np.finfo(dtype).eps)
    m, n = shape_of(a)[-2:]
    if m is not None and n is not None:
        return max(m, n) * eps
    nd = ndim_of(a)
    size = ops.max_(ops.dim_size(a, axis=nd - 2), ops.dim_size(a, axis=nd - 1))
    return multiply(cast(size, dtypes.float64), eps)


def _solve_by_svd(a, col, rcond):
    """`(x, u, s, u^H col, kept singular values)` of the least-squares solution of
    `a @ x = col` (`col` a matrix)."""
    u, s, vh = ops.svd(a, full_matrices=False)
    rcond = _eps_times_size(a, np.float64) if rcond is None or rcond < 0 else rcond
    keep = greater(s, multiply(_max(s, -1, keepdims=True), rcond))
    utb = matmul(_mH(u), col)
    x = matmul(_mH(vh), multiply(_inverted(s, keep)[..., None], utb))
    return x, u, s, utb, keep


def lstsq_solution(a, b, rcond=None):
    """The `x` of `lstsq(a, b, rcond)` alone (without the residuals, rank and singular
    values, which cost more ops)."""
    (a, b), _ = promote(floating(a), floating(b))
    vector = ndim_of(b) == 1
    col = _reshape(b, shape_of(b) + (1,), "lstsq") if vector else b
    x = _solve_by_svd(a, col, rcond)[0]
    return x[:, 0] if vector else x


def lstsq(a, b, rcond=None):
    """`(x, residuals, rank, s)`: the least-squares solution of `a @ x = b` (m x n `a`, `b` a
    vector or an m x k matrix) by the singular value decomposition, singular values up to
    `rcond * max(s)` counted as zero (rcond=None: machine epsilon times max(m, n)).
    `residuals` are the squared 2-norms of the columns of `b - a @ x` when `rank == n` and
    `m > n`, and empty otherwise (inside a trace, where the rank is not known, they are
    computed unless `m <= n` is known)."""
    (a, b), _ = promote(floating(a), floating(b))
    if ndim_of(a) != 2 or ndim_of(b) not in (1, 2):
        raise ShapeError(f"lstsq: {ndim_of(a) if ndim_of(a) != 2 else ndim_of(b)}-dimensional "
                         "array given; a must be two-dimensional, b one- or two-dimensional")
    (m, n), vector = shape_of(a), ndim_of(b) == 1
    if None not in (m, shape_of(b)[0]) and m != shape_of(b)[0]:
        raise ShapeError(f"lstsq: incompatible dimensions {shape_str(shape_of(a))} and "
                         f"{shape_str(shape_of(b))}")
    col = _reshape(b, shape_of(b) + (1,), "lstsq") if vector else b
    x, u, s, utb, keep = _solve_by_svd(a, col, rcond)
    rank = cast(_sum(keep, -1), dtypes.int32)
    if m is not None and n is not None and m <= n:
        residuals = s[:0]
    else:
        p = subtract(col, matmul(u, where(keep[..., None], utb, 0)))  # the kept directions
        residuals = _sum(abs_squared(p), 0)
        if not isinstance(rank, GraphTensor) and int(np.asarray(rank)) != n:
            residuals = residuals[:0]
    return (x[:, 0] if vector else x), residuals, rank, s


def pinv(a, rcond=None, hermitian=False, *, rtol=_NO_VALUE):
    """The Moore-Penrose pseudo-inverse of each matrix in `a` (n x m for m x n), by the
    singular value decomposition: singular values up to `rcond * max(s)` count as zero
    (rcond default 1e-15; with `rtol=None` max(m, n) times the dtype's epsilon, with
    `rtol` given that). `hermitian` takes `a` symmetric."""
    a = floating(a)
    matrices("pinv", a)
    if rcond is None:
        if rtol is _NO_VALUE:
            rcond = 1e-15
        elif rtol is None:
            rcond = _eps_times_size(a, dtype_of(a)[0])
        else:
            rcond = rtol
    elif rtol is not _NO_VALUE:
        raise InvalidArgumentError("pinv: `rtol` and `rcond` can't be both set.")
    u, s, vh = svd(a, full_matrices=False, hermitian=hermitian)
    cutoff = multiply(expand_dims(asarray(rcond), -1), _max(s, -1, keepdims=True))
    inv_s = _inverted(s, greater(s, cutoff))
    return matmul(_mH(vh), multiply(inv_s[..., None], _mH(u)))


def matrix_rank(A, tol=None, hermitian=False, *, rtol=None):
    """The number of singular values of each matrix in `A` above `tol` (default
    `max(s) * rtol`, rtol default max(m, n) times the dtype's epsilon); for fewer than 2
    dims, 1 unless every element is zero."""
    A = read(A)
    if ndim_of(A) < 2:
        return cast(_any(not_equal(A, 0)), dtypes.int64)
    s = svd(A, compute_uv=False, hermitian=hermitian)
    if tol is None:
        if rtol is None:
            rtol = _eps_times_size(A, dtype_of(s)[0])
        else:
            rtol = expand_dims(asarray(rtol), -1)
        tol = multiply(_max(s, -1, keepdims=True), rtol)
    else:
        tol = expand_dims(asarray(tol), -1)
    return _sum(greater(s, tol), -1)


def cond(x, p=None):
    """The condition number of each matrix in `x` in norm `p` (None or 2: the ratio of the
    largest to the smallest singular value, -2 its inverse; "fro", "nuc", 1, -1, inf, -inf:
    `norm(x, p) * norm(inv(x), p)`). NaN results become inf unless `x` holds a NaN."""
    x = floating(x)
    matrices("cond", x)
    if p is None or p == 2 or p == -2:
        s = svdvals(x)
        first, last = s[..., 0], s[..., -1]
        r = divide(last, first) if p == -2 else divide(first, last)
    else:
        square_matrices("cond", x)
        r = multiply(norm(x, p, axis=(-2, -1)), norm(inv(x), p, axis=(-2, -1)))
    undefined = logical_and(isnan(r), logical_not(_any(isnan(x), axis=(-2, -1))))
    return where(undefined, np.inf, r)


def matrix_power(a, n):
    """`a @ a @ ... @ a` (`n` factors) for each square matrix in `a`, by repeated squaring
    as NumPy multiplies; `n = 0` gives the identity (in `a`'s dtype), negative `n` powers
    of `inv(a)`."""
    a = read(a)
    square_matrices("matrix_power", a)
    try:
        n = operator.index(n)
    except TypeError:
        raise ArgumentTypeError("matrix_power: exponent must be an integer") from None
    if n == 0:
        eye = diagonal_mask(shape_of(a)[-2:], 0, ops.eq, (a,))
        return add(zeros_like(a), cast(eye, dtype_of(a)[0]))  # a tensor for a tensor
    if n < 0:
        a, n = inv(a), -n
    if n <= 3:
        result = a
        for _ in range(n - 1):
            result = matmul(result, a)
        return result
    z = result = None
    while n > 0:
        z = a if z is None else matmul(z, z)
        n, bit = divmod(n, 2)
        if bit:
            result = z if result is None else matmul(result, z)
    return result


def _chain_order(shapes):
    """split[i][j]: where the cheapest product of matrices i..j splits (the matrix-chain
    dynamic program over multiply-add counts, as NumPy's multi_dot orders its dots)."""
    n = len(shapes)
    dims = [r for r, _ in shapes] + [shapes[-1][1]]
    cost = [[0.0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = math.inf
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k
    return split


def multi_dot(arrays, *, out=None):
    """`arrays[0] @ arrays[1] @ ...` in the order of fewest multiply-adds (NumPy's rule);
    the first may be a 1-D row, the last a 1-D column."""
    if out is not None:
        raise UnsupportedOpError("multi_dot: out= is not supported (tensors are immutable)")
    arrays = [read(x) for x in arrays]
    if len(arrays) < 2:
        raise InvalidArgumentError("multi_dot: expecting at least two arrays")
    if len(arrays) == 2:
        return dot(arrays[0], arrays[1])
    first, last = ndim_of(arrays[0]), ndim_of(arrays[-1])
    if first == 1:
        arrays[0] = expand_dims(arrays[0], 0)
    if last == 1:
        arrays[-1] = expand_dims(arrays[-1], 1)
    if any(ndim_of(x) != 2 for x in arrays):
        raise ShapeError("multi_dot: the arrays must be two-dimensional (the first and last "
                         "may be one-dimensional)")
    shapes = [shape_of(x) for x in arrays]
    if any(None in sh for sh in shapes):
        split = [[j - 1 for j in range(len(arrays))] for _ in arrays]  # left to right
    else:
        split = _chain_order(shapes)

    def product(i, j):
        if i == j:
            return arrays[i]
        k = split[i][j]
        return dot(product(i, k), product(k + 1, j))

    result = product(0, len(arrays) - 1)
    if first == 1 and last == 1:
        return result[0, 0]
    return ravel(result) if first == 1 or last == 1 else result


def tensorsolve(a, b, axes=None):
    """`x` with `tensordot(a, x, x.ndim) == b`: `a`'s leading dims are `b`'s shape, its
    trailing ones `x`'s (after moving `axes` to the end), their products equal."""
    a, b = read(a), read(b)
    na = ndim_of(a)
    if axes is not None:
        order = [k for k in range(na) if k not in [axis_arg(x, na, "tensorsolve")
                                                   for x in axes]]
        order += [axis_arg(x, na, "tensorsolve") for x in axes]
        a = transpose(a, order)
    shape = shape_of(a)[na - (na - ndim_of(b)):] if na > ndim_of(b) else ()
    size = math.prod(shape)
    if math.prod(shape_of(a)) != size * size:
        raise ShapeError(f"tensorsolve: input arrays must satisfy the requirement "
                         f"prod(a.shape[b.ndim:]) == prod(a.shape[:b.ndim]), got "
                         f"{shape_str(shape_of(a))} and {shape_str(shape_of(b))}")
    x = solve(_reshape(a, (size, size), "tensorsolve"), ravel(b))
    return _reshape(x, shape, "tensorsolve")


def tensorinv(a, ind=2):
    """The inverse of `a` for `tensordot(..., ind)`: shape `a.shape[ind:] + a.shape[:ind]`."""
    a = read(a)
    if ind <= 0:
        raise InvalidArgumentError("tensorinv: invalid ind argument (must be positive)")
    shape = shape_of(a)
    size = math.prod(shape[ind:])
    out = inv(_reshape(a, (size, -1), "tensorinv"))
    return _reshape(out, shape[ind:] + shape[:ind], "tensorinv")


# -- NumPy 2's array-API linalg functions ---------------------------------------------------------


def cross(x1, x2, /, *, axis=-1):
    """The cross products of the 3-element vectors along `axis` (broadcast)."""
    x1, x2 = read(x1), read(x2)
    n1 = shape_of(x1)[axis_arg(axis, ndim_of(x1), "cross")]
    n2 = shape_of(x2)[axis_arg(axis, ndim_of(x2), "cross")]
    if n1 != 3 or n2 != 3:
        raise ShapeError(f"cross: both input arrays must be (arrays of) 3-dimensional "
                         f"vectors, but they are {n1} and {n2} dimensional instead")
    return _cross(x1, x2, axis=axis)


def outer(x1, x2, /):
    """The outer product of two 1-D arrays."""
    x1, x2 = read(x1), read(x2)
    if ndim_of(x1) != 1 or ndim_of(x2) != 1:
        raise ShapeError(f"outer: input arrays must be one-dimensional, but they are "
                         f"{ndim_of(x1)} and {ndim_of(x2)} dimensional")
    return _outer(x1, x2)


def matmul(x1, x2, /):
    """`x1 @ x2` (NumPy's `matmul`)."""
    return _matmul(x1, x2)


def vecdot(x1, x2, /, *, axis=-1):
    """The dot products of the vectors along `axis` (broadcast)."""
    return _vecdot(x1, x2, axis=axis)


def tensordot(x1, x2, /, *, axes=2):
    """NumPy's `tensordot` with `axes` keyword-only."""
    return _tensordot(x1, x2, axes)


def trace(x, /, *, offset=0, dtype=None):
    """The sums of the diagonals of the matrices in `x` (its last two dims)."""
    return _trace(x, offset, -2, -1, dtype)


def diagonal(x, /, *, offset=0):
    """The diagonals of the matrices in `x` (its last two dims), as a last dim."""
    return _diagonal(x, offset, -2, -1)


def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):
    """The vector `ord`-norm over `axis` (None: all elements; a tuple: those dims as one
    vector)."""
    x = floating(x)
    nd = ndim_of(x)
    shape = list(shape_of(x))
    if axis is None:
        flat, along = ravel(x), 0
    elif isinstance(axis, tuple):
        axes = tuple(axis_arg(k, nd, "vector_norm") for k in axis)
        rest = tuple(k for k in range(nd) if k not in axes)
        flat = _reshape(transpose(x, axes + rest),
                        (math.prod(shape[k] for k in axes), *[shape[k] for k in rest]),
                        "vector_norm")
        along = 0
    else:
        flat, along = x, axis
    out = norm(flat, ord=ord, axis=along)
    if keepdims:
        for k in range(nd) if axis is None else (
                axis if isinstance(axis, tuple) else (axis,)):
            shape[axis_arg(k, nd, "vector_norm")] = 1
        out = _reshape(out, tuple(shape), "vector_norm")
    return out


def matrix_norm(x, /, *, keepdims=False, ord="fro"):
    """The matrix `ord`-norm of each matrix in `x` (its last two dims)."""
    return norm(x, ord=ord, axis=(-2, -1), keepdims=keepdims)


# The np.linalg functions defined in this namespace beyond norm inv solve det slogdet
# cholesky: `np.linalg.NAME(tensor)` dispatches to them.
NUMPY_NAMES = ("qr", "eig", "eigh", "eigvals", "eigvalsh", "svd", "svdvals", "lstsq", "pinv",
               "matrix_rank", "cond", "matrix_power", "multi_dot", "tensorsolve", "tensorinv",
               "cross", "outer", "matmul", "vecdot", "tensordot", "matrix_transpose", "trace",
               "diagonal", "vector_norm", "matrix_norm")

__all__ = ["EigResult", "EighResult", "QRResult", "SVDResult", "SlogdetResult", "cholesky",
           "cond", "cross", "det", "diagonal", "eig", "eigh", "eigvals", "eigvalsh", "inv",
           "lstsq", "matmul", "matrix_norm", "matrix_power", "matrix_rank", "matrix_transpose",
           "multi_dot", "norm", "outer", "pinv", "qr", "slogdet", "solve", "svd", "svdvals",
           "tensordot", "tensorinv", "tensorsolve", "trace", "vecdot", "vector_norm"]
