"""Contractions and linear algebra: dot_general, cholesky, triangular_solve, solve, det,
slogdet. Matrix primitives act on the last two dims and batch over the leading ones."""

from __future__ import annotations

import math

import numpy as np

from tracegrad.core import dtypes
from tracegrad.core.op import Primitive
from tracegrad.core.shapes import shape_str
from tracegrad.core.types import TensorType
from tracegrad.errors import ShapeError
from tracegrad.ops import elementwise as ew
from tracegrad.ops import shape_ops
from tracegrad.ops._batching import batch_axes, moveaxis
from tracegrad.ops._families import ALIGNED, check_kind, dims_same, needs, same_dtype

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


@dot_general_p.def_dims
def _dot_general_dims(op):
    (lc, rc), (lb, rb) = op.attrs["dimension_numbers"]
    (lhs, rhs), (t,) = op.inputs, op.outputs
    for i, j in zip(lc, rc):
        yield lhs, i, rhs, j
    for k, (i, j) in enumerate(zip(lb, rb)):
        yield lhs, i, rhs, j
        yield lhs, i, t, k
    k = len(lb)
    for i in range(len(lhs.shape)):
        if i not in lc and i not in lb:
            yield lhs, i, t, k
            k += 1
    for i in range(len(rhs.shape)):
        if i not in rc and i not in rb:
            yield rhs, i, t, k
            k += 1


ALIGNED.add(dot_general_p)  # its contracted dims are summed over: no row of them is kept

@dot_general_p.def_impl
def _dot_general_impl(lhs, rhs, *, dimension_numbers):
    (lc, rc), (lb, rb) = dimension_numbers
    if not lb and len(lc) == 1 and lc[0] == lhs.ndim - 1 and rc[0] == (rhs.ndim > 1) * (
        rhs.ndim - 2
    ) and rhs.ndim <= 2:
        return np.dot(lhs, rhs)  # NumPy's own dot: matrix/vector products as np.dot does
    lf = _free_dims(lhs.ndim, lc, lb)
    rf = _free_dims(rhs.ndim, rc, rb)
    batch = tuple(lhs.shape[i] for i in lb)
    lfs = tuple(lhs.shape[i] for i in lf)
    rfs = tuple(rhs.shape[i] for i in rf)
    k = math.prod(lhs.shape[i] for i in lc)
    m = math.prod(lfs)
    n = math.prod(rfs)
    a = np.transpose(lhs, lb + lf + lc)
    b = np.transpose(rhs, rb + rc + rf)
    if not batch:
        # The BLAS call NumPy itself makes for dot / matmul of these ranks.
        a2 = a.reshape(m, k) if lf else a.reshape(k)
        b2 = b.reshape(k, n) if rf else b.reshape(k)
        return np.asarray(np.dot(a2, b2)).reshape(lfs + rfs)
    bsize = math.prod(batch)
    out = np.matmul(a.reshape(bsize, m, k), b.reshape(bsize, k, n))
    return out.reshape(batch + lfs + rfs)


@dot_general_p.def_grad
def _dot_general_grad(op, g):
    lhs, rhs = op.inputs
    (lc, rc), (lb, rb) = op.attrs["dimension_numbers"]
    return [
        _dot_operand_grad(g, ew.conj(rhs), lhs.ndim, lc, lb, rc, rb, lhs_side=True)
        if needs(op, 0) else None,
        _dot_operand_grad(g, ew.conj(lhs), rhs.ndim, rc, rb, lc, lb, lhs_side=False)
        if needs(op, 1) else None,
    ]


@dot_general_p.def_batch
def _dot_general_batch(ctx, args, dims, *, dimension_numbers):
    # Both batched: the batch becomes a new leading batch dim of the product. One batched:
    # its batch axis is one more free dim of that operand, and of the product.
    (lhs, rhs), (ld, rd) = args, dims
    (lc, rc), (lb, rb) = dimension_numbers
    if ld is None and not _free_dims(rhs.ndim - 1, rc, rb) and lhs.ndim - len(lc) - len(lb):
        # the batch is rhs's only free dim: with the operands swapped it comes right after
        # the dot's batch dims, ahead of lhs's free dims (batch-major results, no transpose)
        rc = tuple(c + (c >= rd) for c in rc)
        rb = tuple(b + (b >= rd) for b in rb)
        out = dot_general_p.bind(rhs, lhs, dimension_numbers=((rc, lc), (rb, lb)))
        return out, len(lb)
    if ld is not None and rd is not None:
        lhs, rhs = moveaxis(lhs, ld, 0), moveaxis(rhs, rd, 0)
        ld = rd = 0

    def shift(axes, d):
        return tuple(a + (a >= d) for a in axes) if d is not None else axes

    lc, lb, rc, rb = shift(lc, ld), shift(lb, ld), shift(rc, rd), shift(rb, rd)
    if ld is not None and rd is not None:
        numbers, out = ((lc, rc), ((0, *lb), (0, *rb))), 0
    elif ld is not None:
        numbers = ((lc, rc), (lb, rb))
        out = len(lb) + sum(1 for a in _free_dims(lhs.ndim, lc, lb) if a < ld)
    else:
        numbers = ((lc, rc), (lb, rb))
        out = (len(lb) + len(_free_dims(lhs.ndim, lc, lb))
               + sum(1 for a in _free_dims(rhs.ndim, rc, rb) if a < rd))
    return dot_general_p.bind(lhs, rhs, dimension_numbers=numbers), out


def _dot_operand_grad(g, other, ndim, contract, batch, other_contract, other_batch, lhs_side):
    """The gradient of the dot_general operand of rank `ndim` contracting `contract` and
    batching `batch` with `other`: g contracted with `other` over other's free dims, in
    the operand order that needs no transpose when one does (as for matmul)."""
    nb = len(batch)
    free = _free_dims(ndim, contract, batch)
    other_free = _free_dims(other.ndim, other_contract, other_batch)
    start = nb + len(free) if lhs_side else nb
    g_other = tuple(range(start, start + len(other_free)))
    g_batch = tuple(range(nb))
    # The product's dims: batch dims, then the first operand's remaining dims, then the
    # second's. Other's remaining dims are its contracting dims in increasing order, each
    # standing for the contracting dim of this operand paired with it.
    paired = [c for _, c in sorted(zip(other_contract, contract))]
    g_first = list(batch) + list(free) + paired
    other_first = list(batch) + paired + list(free)
    if other_first == sorted(other_first) and g_first != sorted(g_first):
        r = dot_general_p.bind(
            other, g, dimension_numbers=((other_free, g_other), (other_batch, g_batch)))
        layout = other_first
    else:
        r = dot_general_p.bind(
            g, other, dimension_numbers=((g_other, other_free), (g_batch, other_batch)))
        layout = g_first
    perm = tuple(np.argsort(layout).tolist())
    return r if perm == tuple(range(ndim)) else shape_ops.transpose_p.bind(r, permutation=perm)


# -- matrix primitives -----------------------------------------------------------------------


def _check_square(op, a):
    check_kind(op, a, "inexact")
    if a.ndim < 2 or (
        a.shape[-1] is not None and a.shape[-2] is not None and a.shape[-1] != a.shape[-2]
    ):
        raise ShapeError(f"{op}: expected a (batch of) square matrices, got {shape_str(a.shape)}")


def _mT(a):
    """The matrices of `a` transposed (its last two dims swapped)."""
    nd = a.ndim
    return shape_ops.transpose_p.bind(a, permutation=tuple(range(nd - 2)) + (nd - 1, nd - 2))


def _mH(a):
    """The matrices of `a` conjugate-transposed (transposed when real): the gradients of
    complex matrix functions are those of real ones with every transpose an adjoint."""
    return ew.conj(_mT(a))


def _matmul(a, b):
    """`a @ b` for (batches of) matrices of equal rank."""
    nd = a.ndim
    batch = tuple(range(nd - 2))
    return dot_general_p.bind(a, b, dimension_numbers=(((nd - 1,), (nd - 2,)), (batch, batch)))


def _rows_cols(a):
    """int64 tensors of `a`'s shape holding each element's row and column index."""
    dyn = [shape_ops.dim_size_p.bind(a, axis=i) for i, d in enumerate(a.shape) if d is None]
    shape, nd = tuple(a.shape), a.ndim
    return (shape_ops.iota_p.bind(*dyn, dtype=dtypes.int64, shape=shape, dimension=nd - 2),
            shape_ops.iota_p.bind(*dyn, dtype=dtypes.int64, shape=shape, dimension=nd - 1))


def _triangle(a, lower, strict=False):
    """`a` with the elements outside its lower (or upper) triangle zeroed; `strict`
    zeroes the diagonal too."""
    rows, cols = _rows_cols(a)
    compare = (ew.gt_p if strict else ew.ge_p) if lower else (ew.lt_p if strict else ew.le_p)
    return ew.select_p.bind(compare.bind(rows, cols), a, shape_ops.zeros_like(a))


def _inverse_adjoint(a):
    """`inv(a).T` of (batches of) square matrices (`inv(a)^H` when complex), by a solve
    against the identity."""
    rows, cols = _rows_cols(a)
    eye = ew.convert_element_type_p.bind(ew.eq_p.bind(rows, cols), new_dtype=a.dtype)
    return solve_p.bind(_mH(a), eye)


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
batch_axes(cholesky_p, front=True)


@cholesky_p.def_dims
def _cholesky_dims(op):
    """A batch of square matrices, and a result of their shape."""
    x = op.inputs[0]
    r = len(x.shape)
    yield from dims_same(op)
    yield x, r - 1, x, r - 2


@cholesky_p.def_grad
def _cholesky_grad(op, g):
    # With P = tril(L.T @ g) with its diagonal halved and S = L^-T P L^-1, the gradient for
    # symmetric perturbations is sym(S). Only a's lower triangle is read, so the gradient
    # is that triangle of 2 sym(S) with sym(S)'s diagonal: tril(S + S.T, -1) + diag(S).
    # Complex (Hermitian) a: transposes become adjoints, and the diagonal, of which only the
    # real part is read, takes the real part.
    (L,) = op.outputs
    nd, batch = L.ndim, tuple(range(L.ndim - 2))
    p = dot_general_p.bind(ew.conj(L), g,
                           dimension_numbers=(((nd - 2,), (nd - 2,)), (batch, batch)))
    rows, cols = _rows_cols(p)
    diagonal = ew.eq_p.bind(rows, cols)
    half_diag = p
    if dtypes.is_complex(p.dtype):
        half_diag = ew.to_complex(ew.real_p.bind(p), p.dtype)
    p = ew.select_p.bind(diagonal, ew.mul_p.bind(half_diag, shape_ops.full_like(p, 0.5)),
                         _triangle(p, lower=True, strict=True))
    x = triangular_solve_p.bind(L, p, left_side=False, lower=True)
    s = triangular_solve_p.bind(ew.conj(L), x, left_side=True, lower=True, transpose_a=True)
    if dtypes.is_complex(s.dtype):
        s_diag = ew.to_complex(ew.real_p.bind(s), s.dtype)
    else:
        s_diag = s
    return [ew.select_p.bind(diagonal, s_diag, _triangle(ew.add_p.bind(s, _mH(s)), lower=True,
                                                         strict=True))]


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
    import scipy.linalg  # not at import time

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


batch_axes(triangular_solve_p, front=True)


@triangular_solve_p.def_dims
def _solve_dims(op):
    """triangular_solve and solve: a square matrix, and a right-hand side (left or right)
    of the result's shape."""
    m, b = op.inputs
    r = len(m.shape)
    yield m, r - 1, m, r - 2
    for i in range(r - 2):
        yield m, i, b, i
    left = op.attrs.get("left_side", True)
    yield m, r - 1, b, r - 2 if left else r - 1
    t = op.outputs[0]
    for i in range(len(t.shape)):
        yield t, i, b, i


@triangular_solve_p.def_grad
def _triangular_solve_grad(op, g):
    # With M = op(a): left, x = M^-1 b, so g_b = M^-T g and g_M = -g_b x^T; right,
    # x = b M^-1, so g_b = g M^-T and g_M = -x^T g_b. a's gradient is g_M (transposed back
    # when transpose_a) on the triangle the solve reads.
    # (Complex: M^-H for M^-T, x^H for x^T, and g_M conjugated back when transpose_a.)
    (a, _), (x,) = op.inputs, op.outputs
    left, lower = op.attrs.get("left_side", True), op.attrs.get("lower", True)
    transpose_a = op.attrs.get("transpose_a", False)
    unit = op.attrs.get("unit_diagonal", False)
    g_b = triangular_solve_p.bind(ew.conj(a), g, left_side=left, lower=lower,
                                  transpose_a=not transpose_a, unit_diagonal=unit)
    g_a = None
    if needs(op, 0):
        g_m = _matmul(g_b, _mH(x)) if left else _matmul(_mH(x), g_b)
        g_a = ew.neg_p.bind(_triangle(_mT(g_m) if transpose_a else g_m, lower, strict=unit))
    return [g_a, g_b]


solve_p = Primitive("solve")
"""`x` with `a @ x == b` for square `a` (`b` is a (batch of) matrices)."""


@solve_p.def_abstract_eval
def _solve_abstract_eval(a, b):
    _check_square("solve", a)
    _check_rhs("solve", a, b)
    return b


solve_p.def_impl(np.linalg.solve)
batch_axes(solve_p, front=True)
solve_p.def_dims(_solve_dims)


@solve_p.def_grad
def _solve_grad(op, g):
    # x = a^-1 b: g_b = a^-T g, g_a = -g_b x^T (adjoints for complex a)
    (a, _), (x,) = op.inputs, op.outputs
    g_b = solve_p.bind(_mH(a), g)
    return [ew.neg_p.bind(_matmul(g_b, _mH(x))) if needs(op, 0) else None, g_b]


det_p = Primitive("det")
"""The determinant of a (batch of) square matrices."""


@det_p.def_abstract_eval
def _det_abstract_eval(a):
    _check_square("det", a)
    return TensorType(a.shape[:-2], a.dtype)


det_p.def_impl(np.linalg.det)
batch_axes(det_p, front=True)


@det_p.def_dims
def _det_dims(op):
    """det and slogdet: a batch of square matrices, a result per matrix."""
    m = op.inputs[0]
    r = len(m.shape)
    yield m, r - 1, m, r - 2
    for t in op.outputs:
        for i in range(r - 2):
            yield m, i, t, i


@det_p.def_grad
def _det_grad(op, g):
    # d det(a) = det(a) tr(a^-1 da): g_a = g conj(det(a)) a^-H (a must be invertible)
    (a,), (d,) = op.inputs, op.outputs
    scale = shape_ops.broadcast_like(ew.mul_p.bind(g, ew.conj(d)), a, range(a.ndim - 2))
    return [ew.mul_p.bind(scale, _inverse_adjoint(a))]


slogdet_p = Primitive("slogdet", multiple_results=True)
"""`(sign, log|det|)` of a (batch of) square matrices (a complex matrix has a complex sign
of modulus 1 and a real log|det|)."""


@slogdet_p.def_abstract_eval
def _slogdet_abstract_eval(a):
    _check_square("slogdet", a)
    return [TensorType(a.shape[:-2], a.dtype),
            TensorType(a.shape[:-2], dtypes.real_dtype(a.dtype))]


@slogdet_p.def_impl
def _slogdet_impl(a):
    sign, logdet = np.linalg.slogdet(a)
    return np.asarray(sign), np.asarray(logdet)


batch_axes(slogdet_p, front=True)
slogdet_p.def_dims(_det_dims)


@slogdet_p.def_grad
def _slogdet_grad(op, g_sign, g_logdet):
    # d log|det(a)| = Re tr(a^-1 da): g_a = g a^-H. A real sign is piecewise constant; a
    # complex one moves, d sign = i Im(tr(a^-1 da)) sign, which adds -i Im(conj(g_s) sign)
    # to the scale of a^-H.
    (a,), (sign, logdet) = op.inputs, op.outputs
    scale = shape_ops.zeros_like(logdet) if g_logdet is None else g_logdet
    if dtypes.is_complex(a.dtype) and g_sign is not None:
        turn = ew.imag_p.bind(ew.mul_p.bind(ew.conj(g_sign), sign))
        scale = ew.complex_p.bind(scale, ew.neg_p.bind(turn))
    scale = shape_ops.broadcast_like(ew.to_complex(scale, a.dtype) if scale.dtype != a.dtype
                                     else scale, a, range(a.ndim - 2))
    return [ew.mul_p.bind(scale, _inverse_adjoint(a))]


