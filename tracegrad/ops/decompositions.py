"""Matrix decompositions and functions: qr, eigh (symmetric eigenproblem), eig (general
eigenproblem), svd, lu (with lu_pivots_to_permutation), expm. Each acts on the last two dims
and batches over the leading ones; results are LAPACK's (NumPy's, SciPy's), sign conventions
included."""

from __future__ import annotations

import numpy as np

from tracegrad.core import dtypes
from tracegrad.core.op import Primitive
from tracegrad.core.shapes import shape_str
from tracegrad.core.types import TensorType
from tracegrad.errors import NotDifferentiableError, ShapeError
from tracegrad.ops import elementwise as ew
from tracegrad.ops import shape_ops
from tracegrad.ops._batching import batch_axes
from tracegrad.ops._families import check_kind, nondifferentiable
from tracegrad.ops.linalg import (
    _check_square,
    _matmul,
    _mH,
    _rows_cols,
    _triangle,
    solve_p,
    triangular_solve_p,
)


def _check_matrix(op, a):
    check_kind(op, a, "inexact")
    if a.ndim < 2:
        raise ShapeError(f"{op}: expected a (batch of) matrices, got {shape_str(a.shape)}")


def _small(m, n):
    """min(m, n) of two dims, None when either is unknown."""
    return None if m is None or n is None else min(m, n)


def _dims(op, pairs):
    """A decomposition's dims rule: every result's batch dims are the operand's, and
    `pairs` of (tensor, axis) with axes counted from the end (tensor 0 the operand, 1.. the
    results) are equal."""
    a = op.inputs[0]
    ts = (a, *op.outputs)
    for t in op.outputs:
        for i in range(a.ndim - 2):
            yield a, i, t, i
    for (x, i), (y, j) in pairs:
        yield ts[x], ts[x].ndim + i, ts[y], ts[y].ndim + j


def _cols(v, like):
    """Vector batch `v` (..., k) broadcast along the rows of `like` (..., r, k): `v[j]` in
    column j."""
    nd = like.ndim
    return shape_ops.broadcast_like(v, like, tuple(range(nd - 2)) + (nd - 1,))


def _rows(v, like):
    """Vector batch `v` (..., k) broadcast along the columns of `like` (..., k, c)."""
    nd = like.ndim
    return shape_ops.broadcast_like(v, like, tuple(range(nd - 1)))


def _gaps(v, like):
    """F with `F[i, j] = 1 / (v[j] - v[i])`, 0 where `v[j] == v[i]` (the diagonal, and
    exactly repeated values), of `like`'s (..., k, k) shape."""
    diff = ew.sub_p.bind(_cols(v, like), _rows(v, like))
    same = ew.eq_p.bind(diff, shape_ops.zeros_like(diff))
    safe = ew.select_p.bind(same, shape_ops.ones_like(diff), diff)
    return ew.select_p.bind(same, shape_ops.zeros_like(diff),
                            ew.div_p.bind(shape_ops.ones_like(diff), safe))


def _like(x, t):
    """`x` (a real tensor) in `t`'s dtype (complex when `t` is)."""
    return x if x.dtype == t.dtype else ew.convert_element_type_p.bind(x, new_dtype=t.dtype)


def _static(op, a, what):
    m, n = a.shape[-2:]
    if m is None or n is None:
        raise NotDifferentiableError(
            f"{op}: the gradient of {what} needs the matrix dims when traced; give them "
            f"statically (got {shape_str(a.shape)})")
    return m, n


def _split_last(x, k, axis):
    """`(x[..., :k], x[..., k:])` along `axis` (-1 or -2) of static size."""
    ax = x.ndim + axis
    n = x.shape[ax]
    return shape_ops.slice_along(x, ax, 0, k), shape_ops.slice_along(x, ax, k, n)


def _complement_cotangent(q, g, k):
    """The cotangent of the first `k` columns of orthogonal `q` from `g`, the cotangent of
    all of `q`: the last columns span the complement of the first, and their derivative is
    taken as the rotation of least norm, `-Q_k dQ_k^T Q_perp`, which makes the gradients
    of functions invariant to the complement's basis exact."""
    q_k, q_perp = _split_last(q, k, -1)
    g_k, g_perp = _split_last(g, k, -1)
    return ew.sub_p.bind(g_k, _matmul(q_perp, _matmul(_mH(g_perp), q_k)))


# -- qr --------------------------------------------------------------------------------------

qr_p = Primitive("qr", multiple_results=True)
"""`(q, r)` with `a == q @ r`, `q` with orthonormal columns and `r` upper triangular: `q`
is (..., m, k), `r` (..., k, n) with k = min(m, n), or k = m when `full_matrices`."""


@qr_p.def_abstract_eval
def _qr_abstract_eval(a, *, full_matrices=False):
    _check_matrix("qr", a)
    m, n = a.shape[-2:]
    k = m if full_matrices else _small(m, n)
    batch = a.shape[:-2]
    return [TensorType(batch + (m, k), a.dtype), TensorType(batch + (k, n), a.dtype)]


qr_p.def_impl(lambda a, *, full_matrices=False: tuple(
    np.linalg.qr(a, mode="complete" if full_matrices else "reduced")))
batch_axes(qr_p, front=True)
qr_p.def_dims(lambda op: _dims(op, [((0, -2), (1, -2)), ((0, -1), (2, -1)), ((1, -1), (2, -2))]
                               + [((0, -2), (1, -1))] * op.attrs.get("full_matrices", False)))


def _qr_tall_grad(q, r, g_q, g_r):
    # m >= n, reduced: with M = g_r r^T - q^T g_q and N its upper triangle copied to the
    # lower, the gradient is (g_q + q N) r^-T. Complex: adjoints, and N's diagonal the real
    # part of M's (LAPACK's r has a real diagonal; q^H dq is skew-Hermitian).
    m = ew.sub_p.bind(_matmul(g_r, _mH(r)), _matmul(_mH(q), g_q))
    rows, cols = _rows_cols(m)
    n = ew.select_p.bind(ew.le_p.bind(rows, cols), m, _mH(m))
    if dtypes.is_complex(m.dtype):
        n = ew.select_p.bind(ew.eq_p.bind(rows, cols), _like(ew.real_p.bind(m), m), n)
    b = ew.add_p.bind(g_q, _matmul(q, n))
    return triangular_solve_p.bind(ew.conj(r), b, left_side=False, lower=False,
                                   transpose_a=True)


@qr_p.def_grad
def _qr_grad(op, g_q, g_r):
    (a,), (q, r) = op.inputs, op.outputs
    m, n = a.shape[-2:]
    full = op.attrs.get("full_matrices", False)
    if m is not None and n is not None and m == n:
        return [_qr_tall_grad(q, r, g_q, g_r)]
    m, n = _static("qr", a, "a non-square factorization")
    if m > n:
        if full:  # r's last m - n rows are zeros; q's last columns the complement
            g_q = _complement_cotangent(q, g_q, n)
            q = _split_last(q, n, -1)[0]
            r, g_r = _split_last(r, n, -2)[0], _split_last(g_r, n, -2)[0]
        return [_qr_tall_grad(q, r, g_q, g_r)]
    # m < n: a = [x | y], q r_x = x, r = [r_x | q^T y]
    y = _split_last(a, m, -1)[1]
    r_x = _split_last(r, m, -1)[0]
    g_rx, g_v = _split_last(g_r, m, -1)
    g_x = _qr_tall_grad(q, r_x, ew.add_p.bind(g_q, _matmul(y, _mH(g_v))), g_rx)
    g_y = _matmul(q, g_v)
    return [shape_ops.concatenate_p.bind(g_x, g_y, dimension=a.ndim - 1)]


# -- eigh ------------------------------------------------------------------------------------

eigh_p = Primitive("eigh", multiple_results=True)
"""`(w, v)`: the eigenvalues (ascending) and eigenvectors (columns) of symmetric `a`, read
from its lower triangle (`lower`) or its upper one."""


@eigh_p.def_abstract_eval
def _eigh_abstract_eval(a, *, lower=True):
    _check_square("eigh", a)
    n = a.shape[-1] if a.shape[-1] is not None else a.shape[-2]
    return [TensorType(a.shape[:-2] + (n,), dtypes.real_dtype(a.dtype)), a]


eigh_p.def_impl(lambda a, *, lower=True: tuple(np.linalg.eigh(a, UPLO="L" if lower else "U")))
batch_axes(eigh_p, front=True)
eigh_p.def_dims(lambda op: _dims(op, [((0, -1), (0, -2)), ((0, -1), (1, -1)),
                                      ((0, -2), (2, -2)), ((0, -1), (2, -1))]))


@eigh_p.def_grad
def _eigh_grad(op, g_w, g_v):
    # dw_i = v_i^T da v_i, dV = V (F o V^T da V), F[i, j] = 1 / (w_j - w_i): the gradient for
    # symmetric da is G = V (diag(g_w) + F o V^T g_v) V^T, and on the triangle eigh reads,
    # tril(G + G^T, -1) + diag(G) (its upper counterpart for the upper triangle).
    # Hermitian a: adjoints for transposes, and the diagonal's real part (eigh ignores its
    # imaginary part).
    # (A zero g_v, the eigenvalues' gradient alone, drops its term: G = V diag(g_w) V^H is
    # Hermitian, so G + G^H is 2G, without reading G transposed.)
    (w, v) = op.outputs
    lower = op.attrs.get("lower", True)
    left = ew.mul_p.bind(v, _cols(_like(g_w, v), v))
    values_only = shape_ops.is_zeros(g_v)
    if not values_only:
        inner = ew.mul_p.bind(_gaps(_like(w, v), v), _matmul(_mH(v), g_v))
        left = ew.add_p.bind(_matmul(v, inner), left)
    g = _matmul(left, _mH(v))
    rows, cols = _rows_cols(g)
    diag = _like(ew.real_p.bind(g), g) if dtypes.is_complex(g.dtype) else g
    both = ew.add_p.bind(g, g if values_only else _mH(g))
    return [ew.select_p.bind(ew.eq_p.bind(rows, cols), diag,
                             _triangle(both, lower, strict=True))]


# -- eig -------------------------------------------------------------------------------------

eig_p = Primitive("eig", multiple_results=True)
"""`(w, v)`: the eigenvalues and right eigenvectors (columns, unit 2-norm, LAPACK's geev
phases) of each square matrix, complex for real operands too (complex64 for float32)."""


@eig_p.def_abstract_eval
def _eig_abstract_eval(a):
    _check_square("eig", a)
    n = a.shape[-1] if a.shape[-1] is not None else a.shape[-2]
    c = dtypes.complex_dtype(a.dtype)
    return [TensorType(a.shape[:-2] + (n,), c), TensorType(a.shape[:-2] + (n, n), c)]


def _eig_impl(a):
    c = dtypes.complex_dtype(a.dtype)
    if a.size and not np.isfinite(a).all():
        raise np.linalg.LinAlgError("eig: array must not contain infs or NaNs")
    w, v = np.linalg.eig(a.astype(np.float32) if a.dtype == np.float16 else a)
    return w.astype(c, copy=False), v.astype(c, copy=False)


eig_p.def_impl(_eig_impl)
batch_axes(eig_p, front=True)
eig_p.def_dims(lambda op: _dims(op, [((0, -1), (0, -2)), ((0, -1), (1, -1)),
                                     ((0, -2), (2, -2)), ((0, -1), (2, -1))]))


@eig_p.def_grad
def _eig_grad(op, g_w, g_v):
    # With X = V^-1 da V: dw = diag(X), dV = V (F o X) - V diag(Re diag(V^H V (F o X))), F[i,
    # j] = 1 / (w_j - w_i) off the diagonal (the last term keeps the columns' unit norm; their
    # phase is free, so only gradients of phase-invariant functions of V are defined). The
    # adjoint: G = V^-H (diag(g_w) + conj(F) o (V^H g_v - V^H V diag(Re diag(V^H g_v)))) V^H.
    # (A zero g_v, eigvals' gradient, drops its term.)
    (a,), (w, v) = op.inputs, op.outputs
    vh = _mH(v)
    rows, cols = _rows_cols(v)
    diag = ew.eq_p.bind(rows, cols)
    inner = ew.mul_p.bind(_like(diag, v), _cols(g_w, v))
    if not shape_ops.is_zeros(g_v):
        vhg = _matmul(vh, g_v)
        norm = ew.select_p.bind(diag, _like(ew.real_p.bind(vhg), vhg),
                                shape_ops.zeros_like(vhg))
        inner = ew.add_p.bind(inner, ew.mul_p.bind(
            _gaps(ew.conj_p.bind(w), vhg), ew.sub_p.bind(vhg, _matmul(_matmul(vh, v), norm))))
    g = solve_p.bind(vh, _matmul(inner, vh))
    if not dtypes.is_complex(a.dtype):
        g = ew.convert_element_type_p.bind(ew.real_p.bind(g), new_dtype=a.dtype)
    return [g]


# -- svd -------------------------------------------------------------------------------------

svd_p = Primitive("svd", multiple_results=True)
"""`(u, s, vh)` with `a == u @ diag(s) @ vh`, `s` descending: `u` (..., m, k), `s`
(..., k), `vh` (..., k, n) with k = min(m, n); with `full_matrices`, `u` (..., m, m) and
`vh` (..., n, n)."""


@svd_p.def_abstract_eval
def _svd_abstract_eval(a, *, full_matrices=False):
    _check_matrix("svd", a)
    m, n = a.shape[-2:]
    k = _small(m, n)
    batch = a.shape[:-2]
    cu, rv = (m, n) if full_matrices else (k, k)
    return [TensorType(batch + (m, cu), a.dtype),
            TensorType(batch + (k,), dtypes.real_dtype(a.dtype)),
            TensorType(batch + (rv, n), a.dtype)]


svd_p.def_impl(lambda a, *, full_matrices=False: tuple(
    np.linalg.svd(a, full_matrices=full_matrices)))
batch_axes(svd_p, front=True)
svd_p.def_dims(lambda op: _dims(op, [((0, -2), (1, -2)), ((0, -1), (3, -1))] + (
    [((0, -2), (1, -1)), ((0, -1), (3, -2))] if op.attrs.get("full_matrices", False)
    else [((1, -1), (2, -1)), ((3, -2), (2, -1))])))


@svd_p.def_grad
def _svd_grad(op, g_u, g_s, g_vh):
    # Townsend's rule for a = U S V^T (k = min(m, n) singular values), F[i, j] =
    # 1 / (s_j^2 - s_i^2):  G = U (J S + diag(g_s) + S K) V^T + (I - U U^T) g_u S^-1 V^T
    # + U S^-1 g_v^T (I - V V^T), J = F o (U^T g_u - g_u^T U), K = F o (V^T g_v - g_v^T V).
    (a,), (u, s, vh) = op.inputs, op.outputs
    m, n = a.shape[-2:]
    full = op.attrs.get("full_matrices", False) and not (m is not None and m == n)
    if not full and shape_ops.is_zeros(g_u) and shape_ops.is_zeros(g_vh):
        return [_matmul(ew.mul_p.bind(u, _cols(_like(g_s, u), u)), vh)]  # U diag(g_s) V^H
    if full:
        m, n = _static("svd", a, "full_matrices=True for a non-square matrix")
        k = min(m, n)
        if m > k:
            g_u, u = _complement_cotangent(u, g_u, k), _split_last(u, k, -1)[0]
        if n > k:
            g_vh = _mH(_complement_cotangent(_mH(vh), _mH(g_vh), k))
            vh = _split_last(vh, k, -2)[0]
    s, g_s = _like(s, u), _like(g_s, u)
    utgu = _matmul(_mH(u), g_u)
    vtgv = _matmul(vh, _mH(g_vh))
    like = utgu
    f = _gaps(ew.mul_p.bind(s, s), like)
    j = ew.mul_p.bind(f, ew.sub_p.bind(utgu, _mH(utgu)))
    kk = ew.mul_p.bind(f, ew.sub_p.bind(vtgv, _mH(vtgv)))
    inner = ew.add_p.bind(ew.mul_p.bind(j, _cols(s, like)), ew.mul_p.bind(_rows(s, like), kk))
    inv_s = ew.div_p.bind(shape_ops.ones_like(s), s)
    if dtypes.is_complex(u.dtype):
        # the phase shared by u_i and v_i: i Im(u_i^H g_u_i) / (2 s_i) on the diagonal
        rows, cols = _rows_cols(utgu)
        im = ew.sub_p.bind(utgu, _mH(utgu))
        im = ew.select_p.bind(ew.eq_p.bind(rows, cols), im, shape_ops.zeros_like(im))
        inner = ew.add_p.bind(inner, ew.mul_p.bind(im, _cols(ew.mul_p.bind(inv_s, _like(
            shape_ops.full_like(s, 0.5), s)), like)))
    left = ew.add_p.bind(_matmul(u, inner), ew.mul_p.bind(u, _cols(g_s, u)))
    g = _matmul(left, vh)
    if m is None or n is None or m > n:  # U does not span all of R^m
        p_u = ew.sub_p.bind(g_u, _matmul(u, utgu))
        g = ew.add_p.bind(g, _matmul(ew.mul_p.bind(p_u, _cols(inv_s, p_u)), vh))
    if m is None or n is None or m < n:  # V does not span all of R^n
        p_v = ew.sub_p.bind(g_vh, _matmul(_mH(vtgv), vh))
        g = ew.add_p.bind(g, _matmul(ew.mul_p.bind(u, _cols(inv_s, u)), p_v))
    return [g]


# -- lu --------------------------------------------------------------------------------------

lu_p = Primitive("lu", multiple_results=True)
"""`(lu, pivots, permutation)`: the LU factorization with partial pivoting of each (..., m, n)
matrix (LAPACK's getrf). `lu` holds the unit lower-trapezoidal `L` (m, k) below its diagonal
and the upper-trapezoidal `U` (k, n) on and above it, k = min(m, n); `pivots` (int32, k)
are getrf's row interchanges (0-based: row i was swapped with row pivots[i]);
`permutation` (int32, m) is the rows of `a` in the order `a[permutation] == L @ U`."""


@lu_p.def_abstract_eval
def _lu_abstract_eval(a):
    _check_matrix("lu", a)
    m, n = a.shape[-2:]
    batch = a.shape[:-2]
    return [a, TensorType(batch + (_small(m, n),), dtypes.int32),
            TensorType(batch + (m,), dtypes.int32)]


def _lu_impl(a):
    import scipy.linalg  # not at import time

    m, n = a.shape[-2:]
    lu = np.empty_like(a)
    pivots = np.empty(a.shape[:-2] + (min(m, n),), dtype=np.int32)
    perm = np.empty(a.shape[:-2] + (m,), dtype=np.int32)
    for idx in np.ndindex(a.shape[:-2]):
        with np.errstate(all="ignore"):
            lu[idx], pivots[idx] = scipy.linalg.lu_factor(a[idx], check_finite=False)
        perm[idx] = pivots_to_permutation(pivots[idx], m)
    return lu, pivots, perm


lu_p.def_impl(_lu_impl)


def pivots_to_permutation(pivots, m):
    """The permutation (int32, m) that getrf's row interchanges `pivots` (a 1-D array)
    apply to the rows of an m-row matrix."""
    perm = np.arange(m, dtype=np.int32)
    for i, p in enumerate(pivots):
        perm[i], perm[p] = perm[p], perm[i]
    return perm


batch_axes(lu_p, front=True)
lu_p.def_dims(lambda op: _dims(op, [((0, -2), (1, -2)), ((0, -1), (1, -1)), ((0, -2), (3, -1))]
                               + [((0, -1), (2, -1))] * (op.inputs[0].shape[-1] is not None
                                                         and op.inputs[0].shape[-1]
                                                         == op.inputs[0].shape[-2])))


def _permutation_matrix(perm, dtype):
    """P (..., m, m) with `P[i, j] = 1` where `perm[i] == j` (so `P @ a == a[perm]`)."""
    shape = tuple(perm.shape) + (perm.shape[-1],)
    nd = len(shape)
    dyn = [shape_ops.dim_size_p.bind(perm, axis=min(i, nd - 2))
           for i, d in enumerate(shape) if d is None]
    rows = shape_ops.broadcast_in_dim_p.bind(perm, *dyn, shape=shape,
                                             broadcast_dimensions=tuple(range(nd - 1)))
    cols = shape_ops.iota_p.bind(*dyn, dtype=dtypes.int32, shape=shape, dimension=nd - 1)
    return ew.convert_element_type_p.bind(ew.eq_p.bind(rows, cols), new_dtype=dtype)


@lu_p.def_grad
def _lu_grad(op, g, g_pivots=None, g_perm=None):
    # With a[perm] = L U and X = L1^-1 d(a[perm])_1 U1^-1 (L1, U1 the leading k x k blocks):
    # dL1 = L1 stril(X), dU1 = triu(X) U1, and the trailing blocks follow from them. The
    # cotangent of X is G_X = stril(L1^T stril(G1)) + triu(triu(G1) U1^T) - triu(L2^T G2)
    # (tall, G = [G1; G2]) - stril(G2 U2^T) (wide, G = [G1 G2]), and that of a[perm] is
    # [L1^-T G_X; G2] U1^-T (tall) or L1^-T [G_X U1^-T, G2] (wide).
    (a,), (lu, _, perm) = op.inputs, op.outputs
    m, n = a.shape[-2:]
    square = m is not None and m == n
    if not square:
        m, n = _static("lu", a, "a non-square factorization")
    k = min(m, n)
    block = lu if square else shape_ops.slice_along(shape_ops.slice_along(lu, a.ndim - 2, 0, k),
                                                    a.ndim - 1, 0, k)
    g1 = g if square else shape_ops.slice_along(
        shape_ops.slice_along(g, a.ndim - 2, 0, k), a.ndim - 1, 0, k)
    rows, cols = _rows_cols(block)
    l1 = ew.select_p.bind(ew.eq_p.bind(rows, cols), shape_ops.ones_like(block),
                          _triangle(block, True, strict=True))
    g_x = ew.add_p.bind(_triangle(_matmul(_mH(l1), _triangle(g1, True, strict=True)), True,
                                  strict=True),
                        _triangle(_matmul(_triangle(g1, False), _mH(_triangle(block, False))),
                                  False))
    if m > n:
        lu2, g2 = _split_last(lu, k, -2)[1], _split_last(g, k, -2)[1]
        g_x = ew.sub_p.bind(g_x, _triangle(_matmul(_mH(lu2), g2), False))
    elif m < n:
        u2, g2 = _split_last(lu, k, -1)[1], _split_last(g, k, -1)[1]
        g_x = ew.sub_p.bind(g_x, _triangle(_matmul(g2, _mH(u2)), True, strict=True))

    def l_inv_t(y):
        return triangular_solve_p.bind(ew.conj(block), y, left_side=True, lower=True,
                                       transpose_a=True, unit_diagonal=True)

    def u_inv_t(y):
        return triangular_solve_p.bind(ew.conj(block), y, left_side=False, lower=False,
                                       transpose_a=True)

    if m >= n:
        top = l_inv_t(g_x)
        if m > n:
            top = shape_ops.concatenate_p.bind(top, g2, dimension=a.ndim - 2)
        g_perm_a = u_inv_t(top)
    else:
        g_perm_a = l_inv_t(shape_ops.concatenate_p.bind(u_inv_t(g_x), g2, dimension=a.ndim - 1))
    return [_matmul(_mH(_permutation_matrix(perm, a.dtype)), g_perm_a)]


lu_pivots_to_permutation_p = Primitive("lu_pivots_to_permutation")
"""The permutation (int32, (..., permutation_size)) that getrf's 0-based row interchanges
`pivots` (..., k) apply to the rows of a matrix: `a[permutation]` is `a` with rows i and
pivots[i] swapped for i = 0, 1, ..., k - 1 in turn."""


@lu_pivots_to_permutation_p.def_abstract_eval
def _lu_pivots_to_permutation_abstract_eval(pivots, *, permutation_size):
    check_kind("lu_pivots_to_permutation", pivots, "int")
    if pivots.ndim < 1:
        raise ShapeError("lu_pivots_to_permutation: pivots must be at least one-dimensional")
    k = pivots.shape[-1]
    if k is not None and k > permutation_size:
        raise ShapeError(f"lu_pivots_to_permutation: {k} pivots for a permutation of size "
                         f"{permutation_size}")
    return TensorType(pivots.shape[:-1] + (permutation_size,), dtypes.int32)


@lu_pivots_to_permutation_p.def_impl
def _lu_pivots_to_permutation_impl(pivots, *, permutation_size):
    m = permutation_size
    out = np.empty(pivots.shape[:-1] + (m,), dtype=np.int32)
    for idx in np.ndindex(pivots.shape[:-1]):
        p = pivots[idx]
        if p.size and (p.min() < 0 or p.max() >= m):
            bad = p.max() if p.max() >= m else p.min()
            raise IndexError(f"lu_pivots_to_permutation: pivot {bad} is out of bounds for {m} "
                             "rows")
        out[idx] = pivots_to_permutation(p, m)
    return out


batch_axes(lu_pivots_to_permutation_p, front=True)
nondifferentiable(lu_pivots_to_permutation_p)


@lu_pivots_to_permutation_p.def_dims
def _lu_pivots_to_permutation_dims(op):
    (p,), (t,) = op.inputs, op.outputs
    for i in range(p.ndim - 1):
        yield p, i, t, i


# -- expm ------------------------------------------------------------------------------------

expm_p = Primitive("expm")
"""The matrix exponential of each square matrix in `a` (Padé approximation with scaling and
squaring, as SciPy's `expm`)."""


@expm_p.def_abstract_eval
def _expm_abstract_eval(a):
    _check_square("expm", a)
    return a


def _expm_impl(a):
    import scipy.linalg  # not at import time

    return np.asarray(scipy.linalg.expm(a), dtype=a.dtype)


expm_p.def_impl(_expm_impl)


batch_axes(expm_p, front=True)


@expm_p.def_dims
def _expm_dims(op):
    (a,), (t,) = op.inputs, op.outputs
    yield a, a.ndim - 1, a, a.ndim - 2
    for i in range(a.ndim):
        yield a, i, t, i


@expm_p.def_grad
def _expm_grad(op, g):
    # The gradient is the Fréchet derivative L(a^T, g), the upper right block of
    # expm([[a^T, g], [0, a^T]]) (Van Loan): an expm itself, so every order follows.
    (a,) = op.inputs
    n = _static("expm", a, "expm")[0]
    nd = a.ndim
    at = _mH(a)
    top = shape_ops.concatenate_p.bind(at, g, dimension=nd - 1)
    bottom = shape_ops.concatenate_p.bind(shape_ops.zeros_like(at), at, dimension=nd - 1)
    e = expm_p.bind(shape_ops.concatenate_p.bind(top, bottom, dimension=nd - 2))
    return [shape_ops.slice_along(shape_ops.slice_along(e, nd - 2, 0, n), nd - 1, n, 2 * n)]
