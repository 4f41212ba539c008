"""Op-table rows for `tnp.linalg`'s decompositions (qr, eigh, eigvalsh, svd, svdvals and the
matrix norms over them), the functions composed over them, and `tracegrad.scipy.linalg`.

Eigenvectors and singular vectors are unique up to sign only, so rows that return them
return quantities every sign choice gives alike: elementwise squares of the vectors (a
column's sign flips all its entries), projectors onto their spans, reconstructions. Their
values, gradients (central differences of the NumPy reference) and batch rules then do
not depend on LAPACK's signs. Inputs have well-separated eigenvalues and singular values.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

import tracegrad.numpy as tnp
import tracegrad.scipy.linalg as tsl
from tests.ops.optable import F32, F64, I32, I64, case, rand, ulps

_VALUES_ONLY = ("eigvalsh and svd(compute_uv=False) are eigh and svd with vectors: LAPACK "
                "rounds the values-only drivers differently")


def _mT(x):
    return x.swapaxes(-1, -2) if hasattr(x, "swapaxes") else np.swapaxes(x, -1, -2)


def _mm(lib, a, b):
    return lib.matmul(a, b)


def _sym(shape, dtype=F64, seed=0):
    """Symmetric matrices with distinct eigenvalues."""
    a = rand(shape, dtype, seed=seed)
    return ((a + np.swapaxes(a, -1, -2)) / 2).astype(dtype)


# -- qr ------------------------------------------------------------------------------------------


def _qr_invariants(lib, mode, k):
    """(Q's first k columns squared, the projector onto Q's other columns, R squared,
    Q @ R) of `lib.linalg.qr`."""
    def fn(a):
        if mode == "r":
            r = lib.linalg.qr(a, mode="r")
            return r * r
        q, r = lib.linalg.qr(a, mode=mode)
        out = [q[..., :, :k] * q[..., :, :k], r * r, _mm(lib, q, r)]
        if q.shape[-1] > k:
            rest = q[..., :, k:]
            out.append(_mm(lib, rest, _mT(rest)))
        return tuple(out)
    return fn


for _shape, _mode, _dt in (((4, 3), "reduced", F64), ((3, 5), "reduced", F64),
                           ((2, 4, 4), "reduced", F64), ((5, 3), "complete", F64),
                           ((3, 5), "complete", F64), ((4, 3), "r", F64),
                           ((2, 3, 3), "reduced", F32), ((3, 2), "reduced", I64)):
    _k = min(_shape[-2:])
    case(f"linalg.qr[{'x'.join(map(str, _shape))},{_mode},{_dt}]",
         _qr_invariants(tnp, _mode, _k), _qr_invariants(np, _mode, _k),
         rand(_shape, _dt, seed=31), grad_argnums=(0,) if _dt == F64 else (),
         primitive="qr" if _shape in ((4, 3), (2, 3, 3)) else None)


# -- eigh, eigvalsh ------------------------------------------------------------------------------


def _eigh_invariants(lib, uplo):
    """(eigenvalues, eigenvectors squared, the projector onto the first two)."""
    def fn(a):
        w, v = lib.linalg.eigh(a, UPLO=uplo)
        two = v[..., :, :2]
        return w, v * v, _mm(lib, two, _mT(two))
    return fn


for _shape, _uplo, _dt, _general in (((4, 4), "L", F64, False), ((4, 4), "U", F64, True),
                                     ((2, 3, 3), "L", F64, True), ((2, 3, 3), "U", F32, False)):
    _a = rand(_shape, _dt, seed=32) if _general else _sym(_shape, _dt, seed=32)
    case(f"linalg.eigh[{'x'.join(map(str, _shape))},{_uplo},{_dt}"
         f"{',general' if _general else ''}]",
         _eigh_invariants(tnp, _uplo), _eigh_invariants(np, _uplo), _a,
         grad_argnums=(0,) if _dt == F64 else (), primitive="eigh" if _dt == F64 else None)
for _uplo in ("L", "U"):
    case(f"linalg.eigvalsh[{_uplo}]", lambda a, u=_uplo: tnp.linalg.eigvalsh(a, u),
         lambda a, u=_uplo: np.linalg.eigvalsh(a, u), rand((2, 4, 4), seed=33),
         grad_argnums=(0,), why=_VALUES_ONLY, **ulps(np.linalg.eigvalsh, rand((2, 4, 4), seed=33)))


# -- svd, svdvals, matrix norms ------------------------------------------------------------------


def _svd_invariants(lib, full, k):
    """(U's first k columns squared, S, Vh's first k rows squared, U S Vh, and the projectors
    onto U's other columns and Vh's other rows)."""
    def fn(a):
        u, s, vh = lib.linalg.svd(a, full_matrices=full)
        uk, vk = u[..., :, :k], vh[..., :k, :]
        out = [uk * uk, s, vk * vk, _mm(lib, uk * s[..., None, :], vk)]
        if u.shape[-1] > k:
            out.append(_mm(lib, u[..., :, k:], _mT(u[..., :, k:])))
        if vh.shape[-2] > k:
            out.append(_mm(lib, _mT(vh[..., k:, :]), vh[..., k:, :]))
        return tuple(out)
    return fn


for _shape, _full, _dt in (((4, 3), False, F64), ((3, 4), False, F64), ((2, 3, 3), False, F64),
                           ((4, 3), True, F64), ((2, 3, 5), True, F64), ((3, 3), True, F64),
                           ((2, 4, 3), False, F32)):
    _k = min(_shape[-2:])
    case(f"linalg.svd[{'x'.join(map(str, _shape))},full={_full},{_dt}]",
         _svd_invariants(tnp, _full, _k), _svd_invariants(np, _full, _k),
         rand(_shape, _dt, seed=34), grad_argnums=(0,) if _dt == F64 else (),
         primitive="svd" if _shape in ((4, 3), (2, 4, 3)) and not _full else None)


def _values_only(name, fn, reference, a, **options):
    """A row of a values-only result that NumPy computes with LAPACK's values-only driver."""
    case(name, fn, reference, a, why=_VALUES_ONLY, **ulps(reference, a), **options)


_values_only("linalg.svd[compute_uv=False]", lambda a: tnp.linalg.svd(a, compute_uv=False),
             lambda a: np.linalg.svd(a, compute_uv=False), rand((2, 3, 5), seed=35),
             grad_argnums=(0,))
case("linalg.svd[hermitian]",
     lambda a: tuple(x * x for x in tnp.linalg.svd(a, hermitian=True)),
     lambda a: tuple(x * x for x in np.linalg.svd(a, hermitian=True)), _sym((2, 4, 4), seed=36),
     grad_argnums=(0,))
_values_only("linalg.svd[hermitian,compute_uv=False]",
             lambda a: tnp.linalg.svd(a, compute_uv=False, hermitian=True),
             lambda a: np.linalg.svd(a, compute_uv=False, hermitian=True),
             _sym((4, 4), seed=37), grad_argnums=(0,))
_values_only("linalg.svdvals[3x5]", tnp.linalg.svdvals, np.linalg.svdvals, rand((3, 5), seed=38),
             grad_argnums=(0,))
_values_only("linalg.svdvals[i64]", tnp.linalg.svdvals, np.linalg.svdvals,
             rand((2, 3, 2), I64, seed=38))
for _ord in (2, -2, "nuc"):
    for _axis in (None, (2, 0)):
        _values_only(f"norm[matrix,ord={_ord},axis={_axis}]",
                     lambda a, o=_ord, x=_axis: tnp.linalg.norm(a, o, x),
                     lambda a, o=_ord, x=_axis: np.linalg.norm(a, o, x),
                     rand((3, 4) if _axis is None else (3, 2, 4), seed=39),
                     grad_argnums=(0,) if _axis is None else ())
_values_only("norm[matrix,ord=2,keepdims]", lambda a: tnp.linalg.norm(a, 2, (0, 1), True),
             lambda a: np.linalg.norm(a, 2, (0, 1), True), rand((3, 4, 2), seed=40))


# -- compositions: lstsq, pinv, matrix_rank, cond, matrix_power, multi_dot, tensor solves --------

_SVD_ORDER = "computed through the SVD (NumPy: LAPACK's gelsd or its own order of products)"


def _near(name, fn, reference, *args, n=64, **options):
    """A row whose value NumPy computes another way (another LAPACK driver, another order of
    products): within `n` ulps of its largest float result."""
    out = reference(*args)
    leaves = [np.asarray(x) for x in (out if isinstance(out, tuple) else (out,))]
    atol = max((ulps(lambda x=x: x, n=n)["atol"] for x in leaves), default=0.0)
    case(name, fn, reference, *args, why=_SVD_ORDER, atol=atol, **options)


_A53, _B5, _B52 = rand((5, 3), seed=41), rand((5,), seed=42), rand((5, 2), seed=43)
_near("linalg.lstsq[5x3,5]", lambda a, b: tuple(tnp.linalg.lstsq(a, b)),
      lambda a, b: tuple(np.linalg.lstsq(a, b)), _A53, _B5, grad_argnums=(0, 1))
_near("linalg.lstsq[5x3,5x2,rcond]", lambda a, b: tuple(tnp.linalg.lstsq(a, b, rcond=1e-3)),
      lambda a, b: tuple(np.linalg.lstsq(a, b, rcond=1e-3)), _A53, _B52, grad_argnums=(0, 1))
_near("linalg.lstsq[3x5,3]", lambda a, b: tuple(tnp.linalg.lstsq(a, b)),
      lambda a, b: tuple(np.linalg.lstsq(a, b)), _A53.T.copy(), _B5[:3].copy(),
      grad_argnums=(0, 1))
_near("linalg.lstsq[f32]", lambda a, b: tuple(tnp.linalg.lstsq(a, b)),
      lambda a, b: tuple(np.linalg.lstsq(a, b)), _A53.astype(F32), _B5.astype(F32), n=4)

_near("linalg.pinv[4x3]", tnp.linalg.pinv, np.linalg.pinv, rand((4, 3), seed=44),
      grad_argnums=(0,))
_near("linalg.pinv[batch,rtol=None]", lambda a: tnp.linalg.pinv(a, rtol=None),
      lambda a: np.linalg.pinv(a, rtol=None), rand((2, 3, 3), seed=45), grad_argnums=(0,))
_near("linalg.pinv[hermitian]", lambda a: tnp.linalg.pinv(a, hermitian=True),
      lambda a: np.linalg.pinv(a, hermitian=True), _sym((3, 3), seed=46), grad_argnums=(0,))
_near("linalg.pinv[rank 1]", tnp.linalg.pinv, np.linalg.pinv, np.ones((3, 2)))

case("linalg.matrix_rank[batch]", tnp.linalg.matrix_rank, np.linalg.matrix_rank,
     np.stack([np.ones((3, 3)), rand((3, 3), seed=47), np.diag([1.0, 1.0, 0.0])]))
case("linalg.matrix_rank[tol,rtol]",
     lambda a: (tnp.linalg.matrix_rank(a, tol=0.5), tnp.linalg.matrix_rank(a, rtol=0.1)),
     lambda a: (np.linalg.matrix_rank(a, tol=0.5), np.linalg.matrix_rank(a, rtol=0.1)),
     np.diag([3.0, 1.0, 0.2]))
case("linalg.matrix_rank[hermitian,i64]", lambda a: tnp.linalg.matrix_rank(a, hermitian=True),
     lambda a: np.linalg.matrix_rank(a, hermitian=True), np.array([[2, 1], [1, 2]]))
case("linalg.matrix_rank[1-D]", tnp.linalg.matrix_rank, np.linalg.matrix_rank,
     np.array([0.0, 2.0]))

for _p in (None, "fro", "nuc", np.inf, -np.inf, 1, -1, 2, -2):
    _near(f"linalg.cond[p={_p}]", lambda a, p=_p: tnp.linalg.cond(a, p),
          lambda a, p=_p: np.linalg.cond(a, p), rand((2, 3, 3), seed=48),
          grad_argnums=(0,) if _p in (None, "fro", -2) else ())
case("linalg.cond[singular]", tnp.linalg.cond, np.linalg.cond, np.ones((2, 2)))

for _n in (0, 1, 2, 3, 5, -1, -3):
    _near(f"linalg.matrix_power[n={_n}]", lambda a, n=_n: tnp.linalg.matrix_power(a, n),
          lambda a, n=_n: np.linalg.matrix_power(a, n), rand((2, 3, 3), seed=49) + 2 * np.eye(3),
          grad_argnums=(0,) if _n in (3, 5, -3) else (), n=16)
case("linalg.matrix_power[i64]", lambda a: tnp.linalg.matrix_power(a, 6),
     lambda a: np.linalg.matrix_power(a, 6), rand((3, 3), I64, -3, 3, seed=50))

for _shapes in (((4,), (4, 6), (6, 2), (2, 5), (5,)), ((3, 4), (4, 6), (6, 2), (2, 5)),
                ((2, 3), (3, 4), (4,)), ((3,), (3, 2))):
    _ms = [rand(sh, seed=51 + k) for k, sh in enumerate(_shapes)]
    _near(f"linalg.multi_dot[{len(_shapes)},{_shapes[0]},{_shapes[-1]}]",
          lambda *a: tnp.linalg.multi_dot(a), lambda *a: np.linalg.multi_dot(a), *_ms,
          grad_argnums=tuple(range(len(_ms))) if len(_ms) in (3, 5) else (), n=8)

_near("linalg.tensorsolve", tnp.linalg.tensorsolve, np.linalg.tensorsolve,
      rand((6, 2, 3), seed=56) + np.eye(6).reshape(6, 2, 3) * 3, rand((6,), seed=57),
      grad_argnums=(0, 1), n=16)
_near("linalg.tensorsolve[axes]", lambda a, b: tnp.linalg.tensorsolve(a, b, axes=(0,)),
      lambda a, b: np.linalg.tensorsolve(a, b, axes=(0,)),
      rand((2, 6, 3), seed=58) + np.eye(6).reshape(6, 3, 2).transpose(2, 0, 1) * 3,
      rand((6,), seed=59), grad_argnums=(0, 1), n=16)
_near("linalg.tensorinv", tnp.linalg.tensorinv, np.linalg.tensorinv,
      rand((4, 6, 8, 3), seed=60) + np.eye(24).reshape(4, 6, 8, 3) * 3, grad_argnums=(0,),
      n=16)
_near("linalg.tensorinv[ind=1]", lambda a: tnp.linalg.tensorinv(a, ind=1),
      lambda a: np.linalg.tensorinv(a, ind=1), rand((6, 2, 3), seed=61) + np.eye(6).reshape(
          6, 2, 3) * 3, n=16)

# -- NumPy 2's array-API linalg names ------------------------------------------------------------

_X234 = rand((2, 3, 4), seed=62)
case("linalg.cross", lambda a, b: tnp.linalg.cross(a, b, axis=0),
     lambda a, b: np.linalg.cross(a, b, axis=0), rand((3, 2), seed=63), rand((3, 1), seed=64),
     grad_argnums=(0, 1))
case("linalg.outer", tnp.linalg.outer, np.linalg.outer, rand((3,), seed=65),
     rand((4,), I32, seed=66), grad_argnums=(0,))
_near("linalg.matmul", tnp.linalg.matmul, np.linalg.matmul, _X234, rand((4, 2), seed=67), n=4)
_near("linalg.vecdot", lambda a, b: tnp.linalg.vecdot(a, b, axis=1),
      lambda a, b: np.linalg.vecdot(a, b, axis=1), _X234, rand((1, 3, 1), seed=68),
      grad_argnums=(0, 1), n=4)
_near("linalg.tensordot", lambda a, b: tnp.linalg.tensordot(a, b, axes=1),
      lambda a, b: np.linalg.tensordot(a, b, axes=1), _X234, rand((4, 2), seed=69), n=4)
case("linalg.matrix_transpose", tnp.linalg.matrix_transpose, np.linalg.matrix_transpose, _X234)
case("linalg.trace", lambda a: tnp.linalg.trace(a, offset=1),
     lambda a: np.linalg.trace(a, offset=1), _X234, grad_argnums=(0,))
case("linalg.trace[i32,dtype]", lambda a: tnp.linalg.trace(a, dtype=np.float64),
     lambda a: np.linalg.trace(a, dtype=np.float64), rand((3, 3), I32, seed=70))
case("linalg.diagonal", lambda a: tnp.linalg.diagonal(a, offset=-1),
     lambda a: np.linalg.diagonal(a, offset=-1), _X234)
for _axis, _keep, _ord in ((None, False, 2), ((0, 2), True, 2), (1, True, 1), (-1, False, np.inf),
                           ((2, 0), False, 3)):
    _near(f"linalg.vector_norm[axis={_axis},keepdims={_keep},ord={_ord}]",
          lambda a, x=_axis, k=_keep, o=_ord: tnp.linalg.vector_norm(a, axis=x, keepdims=k,
                                                                     ord=o),
          lambda a, x=_axis, k=_keep, o=_ord: np.linalg.vector_norm(a, axis=x, keepdims=k,
                                                                    ord=o),
          _X234, grad_argnums=(0,) if isinstance(_axis, tuple) or _axis == 1 else (), n=4)
case("linalg.vector_norm[i64]", tnp.linalg.vector_norm, np.linalg.vector_norm,
     rand((2, 3), I64, seed=71), why="a sum of squares in another order", **ulps(
         np.linalg.vector_norm, rand((2, 3), I64, seed=71)))
for _ord, _keep in (("fro", False), ("nuc", True), (2, False), (-np.inf, False)):
    _values_only(f"linalg.matrix_norm[ord={_ord},keepdims={_keep}]",
                 lambda a, o=_ord, k=_keep: tnp.linalg.matrix_norm(a, ord=o, keepdims=k),
                 lambda a, o=_ord, k=_keep: np.linalg.matrix_norm(a, ord=o, keepdims=k), _X234,
                 grad_argnums=(0,) if _ord == "nuc" else ())

# -- tracegrad.scipy.linalg ---------------------------------------------------------------------

_SPD = _sym((4, 4), seed=72) + 4 * np.eye(4)
_TRI = rand((4, 4), seed=73) + 3 * np.eye(4)
for _trans, _lower, _unit in ((0, False, False), (1, True, False), ("T", False, True),
                              (0, True, True)):
    for _b in (rand((4, 2), seed=74), rand((4,), seed=75)):
        case(f"scipy.solve_triangular[trans={_trans},lower={_lower},unit={_unit},"
             f"b={_b.ndim}-D]",
             lambda a, b, t=_trans, lo=_lower, u=_unit: tsl.solve_triangular(a, b, t, lo, u),
             lambda a, b, t=_trans, lo=_lower, u=_unit: scipy.linalg.solve_triangular(
                 a, b, t, lo, u), _TRI, _b, grad_argnums=(0, 1) if _b.ndim == 2 else ())
for _lower in (True, False):
    case(f"scipy.cho_factor[lower={_lower}]",
         lambda a, lo=_lower: tsl.cho_factor(a, lower=lo)[0],
         lambda a, lo=_lower: scipy.linalg.cho_factor(a, lower=lo)[0], _SPD,
         grad_argnums=(0,), why="LAPACK's potrf for the upper factor, a transposed lower one "
         "here", **ulps(np.linalg.cholesky, _SPD))
    _c = scipy.linalg.cho_factor(_SPD, lower=_lower)[0]
    for _b in (rand((4, 3), seed=76), rand((4,), seed=77)):
        _near(f"scipy.cho_solve[lower={_lower},b={_b.ndim}-D]",
              lambda c, b, lo=_lower: tsl.cho_solve((c, lo), b),
              lambda c, b, lo=_lower: scipy.linalg.cho_solve((c, lo), b), _c, _b,
              grad_argnums=(0, 1) if _b.ndim == 2 else (), n=8)
case("scipy.block_diag", lambda a, b, c: tsl.block_diag(a, b, c),
     lambda a, b, c: scipy.linalg.block_diag(a, b, c), rand((2, 3), seed=78),
     rand((3,), seed=79), rand((1, 1), I32, seed=80), grad_argnums=(0, 1))
case("scipy.block_diag[one]", tsl.block_diag, scipy.linalg.block_diag, rand((2, 2), I64))

# -- tracegrad.scipy.linalg: LU, solve, inv, det, cholesky, eigh, expm ---------------------------


def _pivots_to_permutation(piv, m):
    """The rows getrf's interchanges `piv` put first, in order (a loop, per matrix)."""
    out = np.empty(piv.shape[:-1] + (m,), dtype=np.int32)
    for idx in np.ndindex(piv.shape[:-1]):
        perm = list(range(m))
        for i, p in enumerate(piv[idx]):
            perm[i], perm[p] = perm[p], perm[i]
        out[idx] = perm
    return out


for _shape, _dt in (((4, 4), F64), ((5, 3), F64), ((3, 5), F64), ((2, 4, 4), F64),
                    ((2, 3, 3), F32), ((3, 3), I64)):
    case(f"scipy.lu_factor[{'x'.join(map(str, _shape))},{_dt}]", tsl.lu_factor,
         lambda a: tuple(np.stack(x).reshape(a.shape[:-2] + x[0].shape) for x in zip(
             *[scipy.linalg.lu_factor(m) for m in a.reshape((-1,) + a.shape[-2:])], strict=True)),
         rand(_shape, _dt, seed=81), grad_argnums=(0,) if _shape in ((4, 4), (5, 3)) else (),
         primitive="lu" if _shape in ((4, 4), (5, 3), (2, 3, 3)) else None)
for _shape in ((4, 4), (5, 3), (2, 3, 5)):
    _a = rand(_shape, seed=82)
    case(f"scipy.lu[{'x'.join(map(str, _shape))}]", tsl.lu, scipy.linalg.lu, _a,
         grad_argnums=(0,) if _shape == (3, 5) else ())
    case(f"scipy.lu[{'x'.join(map(str, _shape))},p_indices]",
         lambda a: tsl.lu(a, p_indices=True), lambda a: scipy.linalg.lu(a, p_indices=True), _a)
    case(f"scipy.lu[{'x'.join(map(str, _shape))},permute_l]",
         lambda a: tsl.lu(a, permute_l=True), lambda a: scipy.linalg.lu(a, permute_l=True), _a,
         grad_argnums=(0,) if len(_shape) == 3 else ())
case("ops.lu_pivots_to_permutation",
     lambda p: __import__("tracegrad").ops.lu_pivots_to_permutation(p, permutation_size=5),
     lambda p: _pivots_to_permutation(p, 5), np.array([[3, 1, 4, 3], [0, 2, 2, 4]], np.int32),
     primitive="lu_pivots_to_permutation")

_LU_A = rand((4, 4), seed=83) + 2 * np.eye(4)
_LU, _PIV = scipy.linalg.lu_factor(_LU_A)
for _trans in (0, 1, 2):
    for _b in (rand((4, 2), seed=84), rand((4,), seed=85)):
        _near(f"scipy.lu_solve[trans={_trans},b={_b.ndim}-D]",
              lambda lu, piv, b, t=_trans: tsl.lu_solve((lu, piv), b, trans=t),
              lambda lu, piv, b, t=_trans: scipy.linalg.lu_solve((lu, piv), b, trans=t),
              _LU, _PIV, _b, grad_argnums=(0, 2) if _b.ndim == 2 and _trans < 2 else (), n=16)
_near("scipy.lu_solve[batch]", lambda lu, piv, b: tsl.lu_solve((lu, piv), b),
      lambda lu, piv, b: scipy.linalg.lu_solve((lu, piv), b),
      np.stack([_LU, _LU.T]), np.stack([_PIV, _PIV[::-1]]), rand((2, 4, 3), seed=86),
      grad_argnums=(0, 2), n=16)

_GEN = rand((4, 4), seed=87) + 3 * np.eye(4)
_STRUCTURED = {"gen": _GEN, "sym": _GEN, "pos": _SPD + np.tril(_GEN, -1), "diagonal": _GEN,
               "tridiagonal": _GEN, "upper triangular": _GEN, "lower triangular": _GEN}
for _assume, _a in _STRUCTURED.items():
    for _lower, _transposed in ((False, False), (True, True)):
        _near(f"scipy.solve[assume_a={_assume},lower={_lower},transposed={_transposed}]",
              lambda a, b, s=_assume, lo=_lower, t=_transposed: tsl.solve(
                  a, b, lower=lo, assume_a=s, transposed=t),
              lambda a, b, s=_assume, lo=_lower, t=_transposed: scipy.linalg.solve(
                  a, b, lower=lo, assume_a=s, transposed=t),
              _a, rand((4, 2), seed=88), grad_argnums=(0, 1) if not _lower or _assume in (
                  "sym", "pos") else (), n=16)
_near("scipy.solve[default,batch,b vector]", tsl.solve, scipy.linalg.solve,
      np.stack([_GEN, _SPD]), rand((4,), seed=89), grad_argnums=(0, 1), n=16)
for _assume in (None, "pos", "sym", "upper triangular"):
    _near(f"scipy.inv[assume_a={_assume}]", lambda a, s=_assume: tsl.inv(a, assume_a=s),
          lambda a, s=_assume: scipy.linalg.inv(a, assume_a=s),
          _SPD + np.triu(_GEN, 1), grad_argnums=(0,) if _assume in (None, "pos") else (), n=16)
_near("scipy.det", tsl.det, scipy.linalg.det, np.stack([_GEN, _SPD]), grad_argnums=(0,), n=16)
for _lower in (False, True):
    case(f"scipy.cholesky[lower={_lower}]", lambda a, lo=_lower: tsl.cholesky(a, lower=lo),
         lambda a, lo=_lower: scipy.linalg.cholesky(a, lower=lo),
         np.stack([_SPD + np.tril(_GEN, -1), _SPD + np.triu(_GEN, 1)]),
         grad_argnums=(0,) if _lower else (),
         why="LAPACK's potrf for the upper factor, a transposed lower one here",
         **ulps(np.linalg.cholesky, _SPD))


def _scipy_eigh_invariants(eigh, **options):
    """(eigenvalues, eigenvectors squared) of SciPy's eigh with `options`."""
    def fn(*args):
        out = eigh(*args, **options)
        if options.get("eigvals_only"):
            return out
        w, v = out
        return w, v * v
    return fn


_B_SPD = _sym((4, 4), seed=90) + 3 * np.eye(4) + np.tril(rand((4, 4), seed=91), -1)
for _opts in ({}, {"lower": False}, {"eigvals_only": True}, {"subset_by_index": (1, 2)}):
    _near(f"scipy.eigh[{_opts}]", _scipy_eigh_invariants(tsl.eigh, **_opts),
          _scipy_eigh_invariants(scipy.linalg.eigh, **_opts), rand((2, 4, 4), seed=92),
          grad_argnums=(0,) if len(_opts) != 1 or "lower" in _opts else (), n=16)
for _type in (1, 2, 3):
    for _lower in (True, False):
        _near(f"scipy.eigh[b,type={_type},lower={_lower}]",
              _scipy_eigh_invariants(tsl.eigh, type=_type, lower=_lower),
              _scipy_eigh_invariants(scipy.linalg.eigh, type=_type, lower=_lower),
              rand((4, 4), seed=93), _B_SPD, grad_argnums=(0, 1) if _lower else (), n=64)

for _scale, _shape, _dt in ((0.01, (4, 4), F64), (0.5, (4, 4), F64), (3.0, (2, 4, 4), F64),
                            (40.0, (3, 3), F64), (1.0, (2, 3, 3), F32)):
    case(f"scipy.expm[{_scale},{'x'.join(map(str, _shape))},{_dt}]", tsl.expm,
         scipy.linalg.expm, (_scale * rand(_shape, seed=94)).astype(_dt),
         grad_argnums=(0,) if _dt == F64 and _scale != 0.01 else (), grad_rtol=1e-5,
         primitive="expm" if _scale in (0.5, 40.0) or _dt == F32 else None)
_F16 = (rand((3, 3), seed=95) + 3 * np.eye(3)).astype("float16")
case("scipy.solve[f16]", tsl.solve, scipy.linalg.solve, _F16, rand((3,), "float16", seed=96),
     why="float16 is solved in float32 as SciPy does; LAPACK's gesv and NumPy's differ in "
     "the last bits", **ulps(scipy.linalg.solve, _F16.astype(F32), rand((3,), F32, seed=96),
                            n=8))
case("scipy.expm[f16]", tsl.expm, scipy.linalg.expm, _F16 / 4,
     why="float16 in float32 (SciPy's), float64 rounded to float32 on the numba backend",
     **ulps(scipy.linalg.expm, (_F16 / 4).astype(F32), n=8))
case("scipy.det[f32]", tsl.det, scipy.linalg.det, rand((2, 3, 3), F32, seed=97),
     why="float64 from float32 input here, SciPy factors in float32 and returns float64",
     atol=8 * float(np.finfo(F32).eps) * float(np.max(np.abs(scipy.linalg.det(
         rand((2, 3, 3), F32, seed=97))))))
