"""Contractions and linear algebra: dot_general, cholesky, triangular_solve, solve, det,
slogdet. Matrix primitives act on the last two dims and batch over the leading ones."""

from __future__ import annotations

import numpy as np
import scipy.linalg

from tracegrad.core.op import Primitive
from tracegrad.core.shapes import shape_str
from tracegrad.core.types import TensorType
from tracegrad.errors import ShapeError
from tracegrad.ops._families import check_kind, same_dtype

# -- dot_general -----------------------------------------------------------------------------

dot_general_p = Primitive("dot_general")
"""Contract `lhs` and `rhs` over paired dims, batching over paired dims:
`dimension_numbers=((lhs_contract, rhs_contract), (lhs_batch, rhs_batch))`. The result dims
are the batch dims, then lhs's free dims, then rhs's free dims (as `lax.dot_general`)."""


def _free_dims(ndim, contract, batch):
    return tuple(i for i in range(ndim) if i not in contract and i not in batch)


@dot_general_p.def_abstract_eval
def _dot_general_abstract_eval(lhs, rhs, *, dimension_numbers):
    (lc, rc), (lb, rb) = dimension_numbers
    dtype = same_dtype("dot_general", lhs, rhs)
    for dims, t in ((lc + lb, lhs), (rc + rb, rhs)):
        if len(set(dims)) != len(dims) or any(not 0 <= d < t.ndim for d in dims):
            raise ShapeError(f"dot_general: bad dimension_numbers {dimension_numbers}")
    if len(lc) != len(rc) or len(lb) != len(rb):
        raise ShapeError(f"dot_general: unpaired dimension_numbers {dimension_numbers}")
    for a, b in list(zip(lc, rc)) + list(zip(lb, rb)):
        da, db = lhs.shape[a], rhs.shape[b]
        if da is not None and db is not None and da != db:
            raise ShapeError(
                f"dot_general: shapes {shape_str(lhs.shape)} and {shape_str(rhs.shape)} are "
                f"not aligned: dim {a} ({da}) != dim {b} ({db})"
            )
    batch = tuple(lhs.shape[a] if lhs.shape[a] is not None else rhs.shape[b]
                  for a, b in zip(lb, rb))
    lf = tuple(lhs.shape[i] for i in _free_dims(lhs.ndim, lc, lb))
    rf = tuple(rhs.shape[i] for i in _free_dims(rhs.ndim, rc, rb))
    return TensorType(batch + lf + rf, dtype, lhs.weak and rhs.weak)


@dot_general_p.def_impl
def _dot_general_impl(lhs, rhs, *, dimension_numbers):
    (lc, rc), (lb, rb) = dimension_numbers
    lf = _free_dims(lhs.ndim, lc, lb)
    rf = _free_dims(rhs.ndim, rc, rb)
    batch = tuple(lhs.shape[i] for i in lb)
    lfs = tuple(lhs.shape[i] for i in lf)
    rfs = tuple(rhs.shape[i] for i in rf)
    k = int(np.prod([lhs.shape[i] for i in lc], dtype=np.int64))
    m = int(np.prod(lfs, dtype=np.int64))
    n = int(np.prod(rfs, dtype=np.int64))
    a = np.transpose(lhs, lb + lf + lc)
    b = np.transpose(rhs, rb + rc + rf)
    if not batch:
        # The BLAS call NumPy itself makes for dot / matmul of these ranks.
        a2 = a.reshape(m, k) if lf else a.reshape(k)
        b2 = b.reshape(k, n) if rf else b.reshape(k)
        return np.asarray(np.dot(a2, b2)).reshape(lfs + rfs)
    bsize = int(np.prod(batch, dtype=np.int64))
    out = np.matmul(a.reshape(bsize, m, k), b.reshape(bsize, k, n))
    return out.reshape(batch + lfs + rfs)


# -- matrix primitives -----------------------------------------------------------------------


def _check_square(op, a):
    check_kind(op, a, "float")
    if a.ndim < 2 or (
        a.shape[-1] is not None and a.shape[-2] is not None and a.shape[-1] != a.shape[-2]
    ):
        raise ShapeError(f"{op}: expected a (batch of) square matrices, got {shape_str(a.shape)}")


def _check_rhs(op, a, b, left_side=True):
    same_dtype(op, a, b)
    if b.ndim != a.ndim:
        raise ShapeError(
            f"{op}: right-hand side {shape_str(b.shape)} must have the rank of "
            f"{shape_str(a.shape)} (batch dims, then a matrix)"
        )
    n = a.shape[-1]
    k = b.shape[-2] if left_side else b.shape[-1]
    bad = n is not None and k is not None and n != k
    bad = bad or any(
        x is not None and y is not None and x != y for x, y in zip(a.shape[:-2], b.shape[:-2])
    )
    if bad:
        raise ShapeError(
            f"{op}: matrix {shape_str(a.shape)} and right-hand side {shape_str(b.shape)} "
            "do not fit"
        )


cholesky_p = Primitive("cholesky")
"""The lower-triangular `L` with `L @ L.T == a` for symmetric positive-definite `a`."""


@cholesky_p.def_abstract_eval
def _cholesky_abstract_eval(a):
    _check_square("cholesky", a)
    return a


cholesky_p.def_impl(np.linalg.cholesky)


triangular_solve_p = Primitive("triangular_solve")
"""`x` with `op(a) @ x == b` (`left_side`) or `x @ op(a) == b`, for triangular `a`
(`lower`), `op(a)` = `a.T` when `transpose_a`; `unit_diagonal` ignores a's diagonal."""


@triangular_solve_p.def_abstract_eval
def _triangular_solve_abstract_eval(a, b, *, left_side=True, lower=True, transpose_a=False,
                                    unit_diagonal=False):
    _check_square("triangular_solve", a)
    _check_rhs("triangular_solve", a, b, left_side)
    return b


@triangular_solve_p.def_impl
def _triangular_solve_impl(a, b, *, left_side=True, lower=True, transpose_a=False,
                           unit_diagonal=False):
    out = np.empty_like(b)
    for idx in np.ndindex(a.shape[:-2]):
        ai, bi = a[idx], b[idx]
        if left_side:
            out[idx] = scipy.linalg.solve_triangular(
                ai, bi, trans=1 if transpose_a else 0, lower=lower, unit_diagonal=unit_diagonal
            )
        else:
            # x @ op(a) = b  <=>  op(a).T @ x.T = b.T
            out[idx] = scipy.linalg.solve_triangular(
                ai, bi.T, trans=0 if transpose_a else 1, lower=lower,
                unit_diagonal=unit_diagonal,
            ).T
    return out


solve_p = Primitive("solve")
"""`x` with `a @ x == b` for square `a` (`b` is a (batch of) matrices)."""


@solve_p.def_abstract_eval
def _solve_abstract_eval(a, b):
    _check_square("solve", a)
    _check_rhs("solve", a, b)
    return b


solve_p.def_impl(np.linalg.solve)


det_p = Primitive("det")
"""The determinant of a (batch of) square matrices."""


@det_p.def_abstract_eval
def _det_abstract_eval(a):
    _check_square("det", a)
    return TensorType(a.shape[:-2], a.dtype)


det_p.def_impl(np.linalg.det)


slogdet_p = Primitive("slogdet", multiple_results=True)
"""`(sign, log|det|)` of a (batch of) square matrices."""


@slogdet_p.def_abstract_eval
def _slogdet_abstract_eval(a):
    _check_square("slogdet", a)
    t = TensorType(a.shape[:-2], a.dtype)
    return [t, t]


@slogdet_p.def_impl
def _slogdet_impl(a):
    sign, logdet = np.linalg.slogdet(a)
    return np.asarray(sign), np.asarray(logdet)


