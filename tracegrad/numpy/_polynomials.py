"""Polynomials from their roots and polynomial division: poly, polydiv.

`poly` multiplies the factors `(x - r)` one root at a time, as NumPy's convolutions do;
`polydiv` is NumPy's long division, step by step. Both need static lengths.
"""

from __future__ import annotations

import numpy as np

from tracegrad.core import dtypes
from tracegrad.core.ir import GraphTensor
from tracegrad.errors import ShapeError, UnsupportedOpError
from tracegrad.numpy._core import dtype_of, ndim_of, read, shape_of, static_dim, static_shape
from tracegrad.numpy._creation import astype
from tracegrad.numpy._shape import atleast_1d, concatenate, stack
from tracegrad.numpy._ufuncs import multiply, subtract, true_divide, where


def poly(seq_of_zeros):
    """The coefficients (highest power first) of the monic polynomial with the given roots
    (1-D; float64 unless float32); 1.0 for no roots. A square matrix (its characteristic
    polynomial) needs eigenvalues, which tracegrad does not have yet."""
    z = atleast_1d(read(seq_of_zeros))
    shape = shape_of(z)
    if len(shape) == 2 and shape[0] == shape[1] and shape[0] != 0:
        raise UnsupportedOpError("poly: the characteristic polynomial of a matrix needs its "
                                 "eigenvalues, which tracegrad does not compute yet; pass "
                                 "the roots (1-D)")
    if len(shape) != 1:
        raise ShapeError("poly: input must be 1d or non-empty square 2d array")
    n = static_dim(z, 0, "poly")
    if n == 0:
        return 1.0
    dtype = dtypes.float32 if dtype_of(z)[0] == dtypes.float32 else dtypes.float64
    z = astype(z, dtype)
    a = np.ones(1, dtype)
    for k in range(n):
        zero = np.zeros(1, dtype)
        a = subtract(concatenate([a, zero]), multiply(z[k], concatenate([zero, a])))
    return a


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


