"""Op-table rows for `tnp.linalg`'s decompositions (qr, eigh, eigvalsh, svd, svdvals and the
matrix norms over them) and the functions composed over them.

Eigenvectors and singular vectors are unique up to sign only, so rows that return them
return quantities every sign choice gives alike: elementwise squares of the vectors (a
column's sign flips all its entries), projectors onto their spans, reconstructions. Their
values, gradients (central differences of the NumPy reference) and batch rules then do
not depend on LAPACK's signs. Inputs have well-separated eigenvalues and singular values.
"""

from __future__ import annotations

import numpy as np

import tracegrad.numpy as tnp
from tests.ops.optable import F32, F64, I64, case, rand, ulps

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
                     rand((3, 4) if _axis is None else (3, 2, 4), seed=39), grad_argnums=(0,))
_values_only("norm[matrix,ord=2,keepdims]", lambda a: tnp.linalg.norm(a, 2, (0, 1), True),
             lambda a: np.linalg.norm(a, 2, (0, 1), True), rand((3, 4, 2), seed=40))
