"""`tracegrad.scipy.linalg`: solve_triangular, cho_factor, cho_solve, block_diag, lu,
lu_factor, lu_solve, solve, inv, det, cholesky, eigh, eig, eigvals and expm with SciPy's
signatures and values, over the linear-algebra primitives. Matrix functions batch over
leading dims."""

from __future__ import annotations

import operator

import numpy as np

from tracegrad import ops
from tracegrad.core import dtypes
from tracegrad.core.shapes import broadcast_shapes, shape_str
from tracegrad.errors import DTypeError, InvalidArgumentError, ShapeError, UnsupportedOpError
from tracegrad.numpy import linalg as _np_linalg
from tracegrad.numpy.linalg import _mH as _adjoint
from tracegrad.numpy._complex import conjugate
from tracegrad.numpy._core import (
    broadcast_to_shape,
    cast,
    dtype_of,
    ndim_of,
    promote,
    read,
    shape_of,
)
from tracegrad.numpy._core import reshape as _reshape
from tracegrad.numpy._creation import arange, diagonal_mask, eye, ones_like
from tracegrad.numpy._decompositions import floating, matrices, square_matrices
from tracegrad.numpy._indexing import take_along_axis
from tracegrad.numpy._matrix import diagonal, tril, triu
from tracegrad.numpy._pad import pad
from tracegrad.numpy._products import matmul
from tracegrad.numpy._reductions import argsort
from tracegrad.numpy._shape import concatenate, stack, swapaxes
from tracegrad.numpy._ufuncs import add, divide, equal


def _float(x):
    """`x` read as SciPy's LAPACK wrappers take it: integers and bools as float64, float16
    as float32."""
    x = floating(x)
    return cast(x, dtypes.float32) if dtype_of(x)[0] == dtypes.float16 else x


_TRANS = {0: False, "N": False, 1: True, "T": True, 2: "C", "C": "C"}  # "C": a^H


def _tsolve(c, b, lower, how=False, unit=False):
    """`op(c)^-1 b` for triangular `c`: `op` the identity (`how` False), the transpose
    (True) or the adjoint ("C")."""
    if how == "C":
        return ops.triangular_solve(conjugate(c), b, lower=lower, transpose_a=True,
                                    unit_diagonal=unit)
    return ops.triangular_solve(c, b, lower=lower, transpose_a=bool(how), unit_diagonal=unit)


def _with_rhs(op, a, b):
    """`(a, b as a batch of matrices, b was a vector)`, float and batch dims broadcast."""
    (a, b), _ = promote(_float(a), _float(b))
    square_matrices(op, a)
    vector = ndim_of(b) == 1  # SciPy's rule: otherwise b is (..., n, k)
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
    `op(a)` is `a.T` for `trans` 1/"T", `a^H` for 2/"C"); `unit_diagonal` takes a's
    diagonal as ones. `b` is a 1-D vector or a (batch of) matrices."""
    if trans not in _TRANS:
        raise InvalidArgumentError(f"solve_triangular: incorrect trans {trans!r}")
    a, b, vector = _with_rhs("solve_triangular", a, b)
    x = _tsolve(a, b, bool(lower), _TRANS[trans], bool(unit_diagonal))
    return _unvector(x, vector, "solve_triangular")


def cho_factor(a, lower=False, overwrite_a=False, check_finite=True):
    """`(c, lower)`: `c` holds the Cholesky factor of symmetric positive-definite `a` in
    its lower (`lower`) or upper triangle, read from that triangle of `a`; its other
    triangle is `a`'s, as SciPy leaves it."""
    a = _float(a)
    square_matrices("cho_factor", a)
    if lower:
        return add(ops.cholesky(a), triu(a, 1)), lower
    return add(_adjoint(_cholesky_lower(a, False)), tril(a, -1)), lower


def cho_solve(c_and_lower, b, overwrite_b=False, check_finite=True):
    """`x` with `A @ x == b`, `A` given by `cho_factor`'s `(c, lower)`."""
    c, lower = c_and_lower
    c, b, vector = _with_rhs("cho_solve", c, b)
    lower = bool(lower)  # A = L L^H, or U^H U
    y = _tsolve(c, b, lower, False if lower else "C")
    x = _tsolve(c, y, lower, "C" if lower else False)
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


# -- LU ------------------------------------------------------------------------------------------


def lu_factor(a, overwrite_a=False, check_finite=True):
    """`(lu, piv)`: the LU factorization with partial pivoting of each (m x n) matrix in `a`,
    `L` (unit diagonal, not stored) below the diagonal of `lu` and `U` on and above it;
    `piv` (int32, min(m, n)) the 0-based row interchanges (row i swapped with piv[i])."""
    a = _float(a)
    matrices("lu_factor", a)
    lu_, piv, _ = ops.lu(a)
    return lu_, piv


def lu(a, permute_l=False, overwrite_a=False, check_finite=True, p_indices=False):
    """`(p, l, u)` with `a == p @ l @ u` for each (m x n) matrix in `a` (k = min(m, n)): `l`
    (m, k) unit lower-trapezoidal, `u` (k, n) upper-trapezoidal, `p` the (m, m) permutation
    matrix, or with `p_indices` the int32 rows with `a == l[p] @ u`. With `permute_l`,
    `(p @ l, u)`."""
    a = _float(a)
    matrices("lu", a)
    lu_, _, perm = ops.lu(a)
    m, n = shape_of(a)[-2:]
    if m is None or n is None:
        raise ShapeError(f"lu: the matrix dims must be known when traced, got "
                         f"{shape_str(shape_of(a))}")
    k = min(m, n)
    low = add(tril(lu_[..., :, :k], -1), eye(m, k, dtype=dtype_of(a)[0]))
    up = triu(lu_[..., :k, :])
    if permute_l:
        return take_along_axis(low, argsort(perm, axis=-1)[..., :, None], axis=-2), up
    rows = argsort(perm, axis=-1).astype(np.int32)
    if p_indices:
        return rows, low, up
    p = cast(equal(rows[..., :, None], arange(m, dtype=np.int32)),
             dtypes.real_dtype(dtype_of(a)[0]))
    return p, low, up


def lu_solve(lu_and_piv, b, trans=0, overwrite_b=False, check_finite=True):
    """`x` with `a @ x == b` (`trans` 0), `a.T @ x == b` (1) or `a^H @ x == b` (2) for `a`
    given by `lu_factor`'s `(lu, piv)`."""
    if trans not in (0, 1, 2):
        raise InvalidArgumentError(f"lu_solve: incorrect trans {trans!r}")
    lu_, piv = lu_and_piv
    lu_, b, vector = _with_rhs("lu_solve", lu_, b)
    n = shape_of(lu_)[-1]
    if n is None:
        raise ShapeError(f"lu_solve: the matrix dims must be known when traced, got "
                         f"{shape_str(shape_of(lu_))}")
    piv = read(piv)
    if not dtypes.is_int(dtype_of(piv)[0]):
        raise DTypeError(f"lu_solve: piv must be integers, got {dtype_of(piv)[0].name}")
    perm = ops.lu_pivots_to_permutation(piv, permutation_size=n)
    perm = broadcast_to_shape(perm, shape_of(lu_)[:-1], (perm, lu_))
    if _TRANS[trans]:  # a.T = U.T L.T P.T (a^H alike)
        y = _tsolve(lu_, b, False, _TRANS[trans])
        z = _tsolve(lu_, y, True, _TRANS[trans], unit=True)
        x = take_along_axis(z, argsort(perm, axis=-1)[..., :, None], axis=-2)
    else:
        y = take_along_axis(b, perm[..., :, None], axis=-2)
        z = ops.triangular_solve(lu_, y, lower=True, unit_diagonal=True)
        x = ops.triangular_solve(lu_, z, lower=False)
    return _unvector(x, vector, "lu_solve")


# -- solve, inv, det, cholesky -------------------------------------------------------------------

_STRUCTURES = {
    None: "gen", "gen": "gen", "general": "gen", "banded": "gen",
    "sym": "sym", "symmetric": "sym", "her": "her", "hermitian": "her",
    "pos": "pos", "positive definite": "pos", "diagonal": "diagonal",
    "tridiagonal": "tridiagonal", "upper triangular": "upper", "lower triangular": "lower",
}


def _structure(op, assume_a):
    if assume_a not in _STRUCTURES:
        raise InvalidArgumentError(f"{op}: {assume_a!r} is not a recognized matrix structure")
    return _STRUCTURES[assume_a]


def _symmetric(a, lower, hermitian=False):
    """The symmetric (`hermitian`: Hermitian) matrices whose `lower` (or upper) triangle is
    `a`'s."""
    mirror = _adjoint if hermitian else (lambda x: swapaxes(x, -1, -2))
    if lower:
        return add(tril(a), mirror(tril(a, -1)))
    return add(triu(a), mirror(triu(a, 1)))


def _cholesky_lower(a, lower):
    """The lower Cholesky factor of the symmetric (Hermitian) matrices given by `a`'s `lower`
    (or upper) triangle."""
    return ops.cholesky(a) if lower else ops.cholesky(_adjoint(a))


def _solve_structured(a, b, kind, lower, transposed):
    """`x` with `op(a) @ x == b` for matrices `a` and `b` of equal rank, `a` read as `kind`."""
    if kind == "pos":
        c = _cholesky_lower(a, lower)
        return _tsolve(c, _tsolve(c, b, True), True, "C")
    if kind in ("upper", "lower"):
        return ops.triangular_solve(a, b, lower=kind == "lower", transpose_a=transposed)
    if kind == "diagonal":
        return divide(b, diagonal(a, 0, -2, -1)[..., :, None])
    if kind in ("sym", "her"):
        a = _symmetric(a, lower, kind == "her")
    elif kind == "tridiagonal":
        a = triu(tril(a, 1), -1)
    return ops.solve(swapaxes(a, -1, -2) if transposed else a, b)


def solve(a, b, lower=False, overwrite_a=False, overwrite_b=False, check_finite=True,
          assume_a=None, transposed=False):
    """`x` with `a @ x == b` (`a.T @ x == b` if `transposed`) for square `a`; `b` is a 1-D
    vector or a (batch of) matrices. `assume_a` names `a`'s structure and so
    the entries read: "gen"/"general" (the default; also "banded") all, "sym"/"symmetric",
    "her"/"hermitian" and "pos"/"positive definite" the `lower` (else upper) triangle,
    "diagonal", "tridiagonal", "upper triangular", "lower triangular" those."""
    kind = _structure("solve", assume_a)
    a, b, vector = _with_rhs("solve", a, b)
    return _unvector(_solve_structured(a, b, kind, bool(lower), bool(transposed)), vector,
                     "solve")


def inv(a, overwrite_a=False, check_finite=True, *, assume_a=None, lower=False):
    """The inverse of each square matrix in `a`, read as `solve`'s `assume_a` says."""
    kind = _structure("inv", assume_a)
    a = _float(a)
    square_matrices("inv", a)
    eye_ = broadcast_to_shape(cast(diagonal_mask(shape_of(a)[-2:], 0, ops.eq, (a,)),
                                   dtype_of(a)[0]), shape_of(a), (a,))
    return _solve_structured(a, eye_, kind, bool(lower), False)


def det(a, overwrite_a=False, check_finite=True):
    """The determinant of each square matrix in `a`, float64 for every real dtype as
    SciPy's (float32 and float16 matrices computed in float64: within float32 rounding of
    SciPy's, which factors them in float32)."""
    a = read(a)
    return _np_linalg.det(a if dtypes.is_complex(dtype_of(a)[0]) else cast(a, dtypes.float64))


def cholesky(a, lower=False, overwrite_a=False, check_finite=True):
    """The Cholesky factor of each symmetric positive-definite matrix in `a`: upper `U` with
    `a == U^H @ U` read from `a`'s upper triangle, or (`lower`) lower `L` with
    `a == L @ L^H` read from its lower triangle (`^H`: the transpose of real matrices)."""
    a = _float(a)
    square_matrices("cholesky", a)
    c = _cholesky_lower(a, bool(lower))
    return c if lower else _adjoint(c)


# -- eigh, expm ----------------------------------------------------------------------------------


def eigh(a, b=None, *, lower=True, eigvals_only=False, overwrite_a=False, overwrite_b=False,
         type=1, check_finite=True, subset_by_index=None, subset_by_value=None, driver=None):
    """`(w, v)`: the eigenvalues (ascending) and eigenvectors (columns) of each symmetric
    matrix in `a`, read from its `lower` (else upper) triangle; with `eigvals_only`, `w`.
    With a symmetric positive-definite `b` (read alike) the generalized problem: `a v = w b v`
    (`type` 1), `a b v = w v` (2) or `b a v = w v` (3), `v` normalized as SciPy does
    (`v.T b v = I` for types 1 and 2, `v.T b^-1 v = I` for 3). `subset_by_index=(lo, hi)`
    keeps eigenvalues lo..hi (inclusive, ascending order)."""
    if subset_by_value is not None:
        raise UnsupportedOpError("eigh: subset_by_value gives a data-dependent number of "
                                 "eigenvalues; use subset_by_index or select from w")
    if type not in (1, 2, 3):
        raise InvalidArgumentError(f"eigh: unknown type {type!r}; expected 1, 2 or 3")
    a = _float(a)
    square_matrices("eigh", a)
    lower = bool(lower)
    c = None
    if b is not None:
        (a, b), _ = promote(a, _float(b))
        square_matrices("eigh", b)
        c = _cholesky_lower(b, lower)
        a = _symmetric(a, lower, hermitian=True)
        if type == 1:  # C = L^-1 a L^-H
            a = _adjoint(ops.triangular_solve(c, _adjoint(ops.triangular_solve(c, a, lower=True)),
                                              lower=True))
        else:  # C = L^H a L
            a = matmul(_adjoint(c), matmul(a, c))
        lower = True
    w, v = ops.eigh(a, lower=lower)
    if subset_by_index is not None:
        lo, hi = (operator.index(i) for i in subset_by_index)
        n = shape_of(a)[-1]
        if n is not None and not 0 <= lo <= hi < n:
            raise InvalidArgumentError(f"eigh: requested eigenvalue indices [{lo}, {hi}] are "
                                       f"not valid for {n} eigenvalues")
        w, v = w[..., lo:hi + 1], v[..., :, lo:hi + 1]
    if eigvals_only:
        return w
    if c is not None:
        v = _tsolve(c, v, True, "C") if type in (1, 2) else matmul(c, v)
    return w, v


def _general_eig(op, a, b):
    a = _float(a)
    square_matrices(op, a)
    if b is not None:
        raise UnsupportedOpError(f"{op}: the generalized eigenproblem (b) is not supported")
    return ops.eig(a)


def _homogeneous(w, homogeneous_eigvals):
    return stack([w, ones_like(w)], axis=-2) if homogeneous_eigvals else w


def eig(a, b=None, left=False, right=True, overwrite_a=False, overwrite_b=False,
        check_finite=True, homogeneous_eigvals=False):
    """`(w, vr)`: the eigenvalues and right eigenvectors (columns of unit norm) of each square
    matrix in `a`; with `left`, `(w, vl, vr)` or `(w, vl)`, the left ones (`vl[:, i]^H a =
    w[i] vl[:, i]^H`, unit norm); with neither, `w`. Complex always, as `numpy.linalg.eig`
    here. `homogeneous_eigvals` gives `w` as the (2, n) pairs `(w, 1)`."""
    w, vr = _general_eig("eig", a, b)
    out = [_homogeneous(w, homogeneous_eigvals)]
    if left:  # the rows of vr^-1, as columns of unit norm
        vl = _adjoint(_np_linalg.inv(vr))
        out.append(divide(vl, _np_linalg.norm(vl, axis=-2, keepdims=True)))
    if right:
        out.append(vr)
    return out[0] if len(out) == 1 else tuple(out)


def eigvals(a, b=None, overwrite_a=False, check_finite=True, homogeneous_eigvals=False):
    """The eigenvalues (complex) of each square matrix in `a`, in `eig`'s order."""
    return _homogeneous(_general_eig("eigvals", a, b)[0], homogeneous_eigvals)


def expm(A):
    """The matrix exponential of each square matrix in `A` (SciPy's Padé approximation with
    scaling and squaring); its gradient is the Fréchet derivative."""
    A = _float(A)
    square_matrices("expm", A)
    return ops.expm(A)
