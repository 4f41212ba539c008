"""Polynomials from their roots, their roots, polynomial division and fits: poly, roots,
polydiv, polyfit.

`poly` multiplies the factors `(x - r)` one root at a time, as NumPy's convolutions do;
`roots` takes the eigenvalues of the companion matrix, as NumPy's; `polydiv` is NumPy's long
division, step by step. All need static lengths.
"""

from __future__ import annotations

import operator
import warnings

import numpy as np

from tracegrad.core import dtypes
from tracegrad.core.ir import EagerTensor, GraphTensor
from tracegrad.core.source import user_frame
from tracegrad.errors import InvalidArgumentError, ShapeError
from tracegrad.numpy._complex import real
from tracegrad.numpy._core import dtype_of, ndim_of, read, shape_of, static_dim, static_shape
from tracegrad.numpy._creation import astype, eye, zeros
from tracegrad.numpy._decompositions import eigvals, floating
from tracegrad.numpy._shape import atleast_1d, concatenate, stack
from tracegrad.numpy._ufuncs import multiply, negative, subtract, true_divide, where


def poly(seq_of_zeros):
    """The coefficients (highest power first) of the monic polynomial with the given roots
    (1-D; float64 unless float32 or complex: complex roots give complex coefficients);
    1.0 for no roots. For a square matrix, its characteristic polynomial (the roots its
    eigenvalues): real for a real matrix."""
    z = atleast_1d(read(seq_of_zeros))
    shape = shape_of(z)
    if len(shape) == 2 and shape[0] == shape[1] and shape[0] != 0:
        a = floating(z)
        coefficients = poly(eigvals(a))
        return coefficients if dtypes.is_complex(dtype_of(a)[0]) else real(coefficients)
    if len(shape) != 1:
        raise ShapeError("poly: input must be 1d or non-empty square 2d array")
    n = static_dim(z, 0, "poly")
    if n == 0:
        return 1.0
    dtype = dtype_of(z)[0] if dtype_of(z)[0] in (dtypes.float32, *dtypes.COMPLEX) else \
        dtypes.float64
    z = astype(z, dtype)
    a = np.ones(1, dtype)
    for k in range(n):
        zero = np.zeros(1, dtype)
        a = subtract(concatenate([a, zero]), multiply(z[k], concatenate([zero, a])))
    return a


def roots(p, *, strip_zeros=True):
    """The roots of the polynomial with coefficients `p` (1-D, highest power first): the
    eigenvalues of its companion matrix, complex always (complex64 for float32), with
    one 0 per trailing zero coefficient at the end, as NumPy's. Leading and trailing zeros
    are stripped as NumPy does (`strip_zeros`), which needs `p`'s values; in traced code
    pass `strip_zeros=False` (as jax.numpy): every coefficient is kept, a trailing zero
    gives a root 0 among the others and a leading zero non-finite roots."""
    p = atleast_1d(read(p))
    if ndim_of(p) != 1:
        raise ShapeError("roots: input must be a rank-1 array")
    n = static_dim(p, 0, "roots")
    p = floating(p)
    dtype = dtypes.complex_dtype(dtype_of(p)[0])
    trailing = 0
    if strip_zeros:
        if isinstance(p, GraphTensor):
            raise InvalidArgumentError(
                "roots: stripping the zero coefficients needs their values, which a traced "
                "tensor does not have; pass strip_zeros=False")
        value = p.numpy() if isinstance(p, EagerTensor) else np.asarray(p)
        nonzero = np.flatnonzero(value)
        if not len(nonzero):
            return astype(p[:0], dtype)
        trailing = n - 1 - int(nonzero[-1])
        p = p[int(nonzero[0]):int(nonzero[-1]) + 1]
        n = int(nonzero[-1]) + 1 - int(nonzero[0])
    if n > 1:
        first = negative(true_divide(p[1:], p[0]))
        companion = concatenate([first[None, :], eye(n - 2, n - 1, dtype=dtype_of(p)[0])])
        found = eigvals(companion)
    else:
        found = astype(p[:0], dtype)
    return concatenate([found, zeros(trailing, dtype)]) if trailing else found


def _allclose_to_zero(x) -> bool:
    return bool(np.allclose(np.asarray(x), 0, rtol=1e-14))


def polydiv(u, v):
    """`(q, r)`: the quotient and remainder of dividing the polynomial `u` by `v`
    (coefficients highest power first; float). The remainder's leading near-zeros are
    removed as NumPy does where its values are known; traced, only the ones the division
    makes (the first `len(u) - len(v) + 1`), so it has `len(v) - 1` entries (at least 1)."""
    u, v = (astype(x, dtypes.float64) if not dtypes.is_float(dtype_of(x)[0]) else x
            for x in (atleast_1d(read(u)), atleast_1d(read(v))))
    for x in (u, v):
        if ndim_of(x) != 1:
            raise ShapeError(f"polydiv: the coefficients must be 1-D, got {ndim_of(x)} dims")
    static_shape(u, "polydiv"), static_shape(v, "polydiv")
    w = dtypes.result_type(dtype_of(u), dtype_of(v))[0]
    m, n = shape_of(u)[0] - 1, shape_of(v)[0] - 1
    traced = isinstance(u, GraphTensor) or isinstance(v, GraphTensor)
    # traced, the entries the division zeroes (up to rounding) are dropped, not computed
    first = min(max(m - n + 1, 0), m) if traced else 0
    r = [astype(u[k], w) for k in range(m + 1)]
    q = []
    for k in range(m - n + 1):
        if k == 0:
            scale = true_divide(1.0, v[0])
        d = multiply(scale, r[k])
        q.append(astype(d, w))
        for j in range(0 if k >= first else 1, n + 1):
            r[k + j] = astype(subtract(r[k + j], multiply(d, v[j])), w)
    quotient = stack(q) if q else astype(where(np.zeros(1, bool), u[:1], 0.0), w)
    start = first
    while not traced and start < m and _allclose_to_zero(r[start]):
        start += 1
    return quotient, stack(r[start:])




def polyfit(x, y, deg, rcond=None, full=False, w=None, cov=False):
    """The coefficients (highest power first) of the degree-`deg` polynomial fitting `y`
    (a vector, or one column per fit) at `x` in the least-squares sense, as NumPy's: the
    Vandermonde matrix's columns scaled to unit norm, solved by `linalg.lstsq`, weights `w`
    multiplying the residuals. `full=True` returns `(coefficients, residuals, rank,
    singular values, rcond)`; `cov=True` (or `"unscaled"`) also the coefficients'
    covariance. Differentiable in `x`, `y` and `w`."""
    from tracegrad.numpy import linalg
    from tracegrad.numpy._reductions import sum as _sum
    from tracegrad.numpy._sequences import vander
    from tracegrad.numpy._ufuncs import sqrt

    deg = operator.index(deg)
    if deg < 0:
        raise InvalidArgumentError("polyfit: expected deg >= 0")
    x, y = read(x), read(y)
    if ndim_of(x) != 1:
        raise ShapeError("polyfit: expected a 1-D x")
    if ndim_of(y) not in (1, 2):
        raise ShapeError("polyfit: expected a 1-D or 2-D y")
    n = static_dim(x, 0, "polyfit")
    if shape_of(y)[0] is not None and shape_of(y)[0] != n:
        raise ShapeError("polyfit: x and y must have the same length")
    order = deg + 1
    x = astype(x, np.result_type(dtype_of(x)[0], np.float64)) if not dtypes.is_float(
        dtype_of(x)[0]) else x
    if rcond is None:
        rcond = n * np.finfo(dtype_of(x)[0]).eps
    lhs, rhs = vander(x, order), y
    if w is not None:
        w = read(w)
        if ndim_of(w) != 1 or shape_of(w)[0] not in (None, n):
            raise ShapeError("polyfit: expected a 1-D w of the length of x")
        lhs = multiply(lhs, w[:, None])
        rhs = multiply(rhs, w if ndim_of(rhs) == 1 else w[:, None])
    scale = sqrt(_sum(multiply(lhs, lhs), axis=0))
    lhs = true_divide(lhs, scale)
    unscale = scale if ndim_of(rhs) == 1 else scale[:, None]
    if full:
        c, residuals, rank, s = linalg.lstsq(lhs, rhs, rcond)
        return true_divide(c, unscale), residuals, rank, s, rcond
    scaled = linalg.lstsq_solution(lhs, rhs, rcond)
    c = true_divide(scaled, unscale)
    _warn_if_rank_deficient(lhs, rcond, order)
    if not cov:
        return c
    base = true_divide(linalg.inv(linalg.matmul(lhs.T, lhs)), multiply(scale[:, None], scale))
    if cov == "unscaled":
        factor = 1.0
    else:
        if n <= order:
            raise InvalidArgumentError("polyfit: the number of data points must exceed "
                                       "order to scale the covariance matrix")
        misfit = subtract(linalg.matmul(lhs, scaled), rhs)
        factor = true_divide(_sum(multiply(misfit, misfit), axis=0), n - order)
    if ndim_of(y) == 1:
        return c, multiply(base, factor)
    return c, multiply(base[:, :, None], factor)


def _warn_if_rank_deficient(lhs, rcond, order: int) -> None:
    """NumPy's `RankWarning` when the scaled Vandermonde matrix has fewer than `order`
    singular values above `rcond` times the largest, where its values are known (traced,
    the rank is a value of each run: no warning)."""
    if isinstance(lhs, GraphTensor):
        return
    a = np.asarray(lhs)
    if not np.all(np.isfinite(a)):
        return
    s = np.linalg.svd(a, compute_uv=False)
    if s.size == 0 or int(np.sum(s > rcond * s[0])) != order:
        frame = user_frame()
        if frame is None:
            warnings.warn("Polyfit may be poorly conditioned", np.exceptions.RankWarning,
                          stacklevel=3)
            return
        warnings.warn_explicit(
            "Polyfit may be poorly conditioned", np.exceptions.RankWarning,
            frame.f_code.co_filename, frame.f_lineno, frame.f_globals.get("__name__"),
            frame.f_globals.setdefault("__warningregistry__", {}))
