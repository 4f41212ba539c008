"""Op-table rows for `tnp.linalg.eig` and `eigvals` (the eig primitive), `tnp.roots`, and
the complex operands of the other decompositions (eigh, svd, qr, lu, expm).

Eigenvectors are unique up to a complex phase, so rows return `|v|^2` elementwise (the same
for every phase) with the eigenvalues. The eigenvalues come in LAPACK's order, the same
for small perturbations of inputs with distinct eigenvalues (the finite differences).
NumPy 2.4 returns real arrays for real input whose eigenvalues are all real; tracegrad's
are complex always (NumPy 2.5's and JAX's), so the references take the complex dtype.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

import tracegrad.numpy as tnp
import tracegrad.scipy.linalg as tsl
from tests.ops.optable import C64, C128, F32, I64, case, rand


def _complex(w):
    return np.asarray(w).astype(np.result_type(w, np.complex64))


def _eig_invariants(lib):
    def fn(a):
        w, v = lib.linalg.eig(a)
        return (_complex(w) if lib is np else w), lib.abs(v) ** 2
    return fn


case("linalg.eig[4x4]", _eig_invariants(tnp), _eig_invariants(np), rand((4, 4), seed=90),
     grad_argnums=(0,), primitive="eig")
case("linalg.eig[2x3x3,c128]", _eig_invariants(tnp), _eig_invariants(np),
     rand((2, 3, 3), C128, seed=91), grad_argnums=(0,), primitive="eig")
case("linalg.eig[3x3,f32]", _eig_invariants(tnp), _eig_invariants(np),
     rand((3, 3), F32, seed=92), primitive="eig", atol=1e-5,
     why="NumPy's sgeev in single precision; the numba backend's dgeev in double")
case("linalg.eigvals[2x4x4]", tnp.linalg.eigvals, lambda a: _complex(np.linalg.eigvals(a)),
     rand((2, 4, 4), seed=93), grad_argnums=(0,))
case("linalg.eigvals[i64]", tnp.linalg.eigvals, lambda a: _complex(np.linalg.eigvals(a)),
     rand((3, 3), I64, seed=94))

# roots traced need strip_zeros=False (their inputs have no zero at either end, so NumPy's
# stripping keeps them all); poly of a matrix is poly of its eigenvalues, real for real input
case("roots[5]", lambda p: tnp.roots(p, strip_zeros=False), lambda p: _complex(np.roots(p)),
     np.array([2.0, -1.0, 0.5, 3.0, 1.0]), grad_argnums=(0,))
case("roots[3,f32]", lambda p: tnp.roots(p, strip_zeros=False), lambda p: _complex(np.roots(p)),
     np.array([1.0, -3.0, 2.0], F32))
case("poly[3x3]", tnp.poly, np.poly, rand((3, 3), seed=95), grad_argnums=(0,), atol=1e-13,
     why="the product of the factors in another order than NumPy's convolutions")


# -- complex eigh, svd, qr, lu, expm -----------------------------------------------------------


def _hermitian(shape, dtype=C128, seed=0):
    a = rand(shape, dtype, seed=seed)
    return ((a + np.conj(np.swapaxes(a, -1, -2))) / 2).astype(dtype)


def _eigh_c(lib):
    def fn(a):
        w, v = lib.linalg.eigh(a)
        return w, lib.abs(v) ** 2
    return fn


# NumPy's complex `@` is BLAS's zgemm, whose kernel on some CPUs (AMD Zen 5's OpenBLAS)
# adds with fused multiply-adds: the last bit of an outer product may differ
_OUTER_WHY = "NumPy's complex product is zgemm, with fused multiply-adds on some CPUs"


def _svd_c(lib):
    def fn(a):
        u, s, vh = lib.linalg.svd(a, full_matrices=False)
        return lib.abs(u) ** 2, s, u[..., :, :1] @ vh[..., :1, :]
    return fn


case("linalg.eigh[2x3x3,c128]", _eigh_c(tnp), _eigh_c(np), _hermitian((2, 3, 3), seed=96),
     grad_argnums=(0,))
case("linalg.eigh[3x3,c64]", _eigh_c(tnp), _eigh_c(np), _hermitian((3, 3), C64, seed=97),
     atol=1e-5, why="NumPy's cheevd in single precision; the numba backend's zheevd in double")
case("linalg.svd[4x3,c128]", _svd_c(tnp), _svd_c(np), rand((4, 3), C128, seed=98),
     grad_argnums=(0,), rtol=1e-13, why=_OUTER_WHY)
case("linalg.svd[2x3x4,c128]", _svd_c(tnp), _svd_c(np), rand((2, 3, 4), C128, seed=99),
     grad_argnums=(0,), rtol=1e-13, why=_OUTER_WHY)
case("linalg.qr[4x3,c128]", lambda a: tuple(tnp.linalg.qr(a)), lambda a: tuple(np.linalg.qr(a)),
     rand((4, 3), C128, seed=100), grad_argnums=(0,))
case("linalg.qr[2x3,complete,c128]", lambda a: tuple(tnp.linalg.qr(a, "complete")),
     lambda a: tuple(np.linalg.qr(a, "complete")), rand((2, 3), C128, seed=101),
     grad_argnums=(0,))
case("scipy.lu_factor[3x3,c128]", lambda a: tsl.lu_factor(a)[0],
     lambda a: scipy.linalg.lu_factor(a)[0], rand((3, 3), C128, seed=102), grad_argnums=(0,))
case("scipy.lu[4x3,c128]", lambda a: tsl.lu(a), lambda a: scipy.linalg.lu(a),
     rand((4, 3), C128, seed=103), grad_argnums=(0,))
case("scipy.expm[3x3,c128]", tsl.expm, scipy.linalg.expm, rand((3, 3), C128, seed=104) / 2,
     grad_argnums=(0,), atol=1e-14, why="SciPy's own Padé code, in another order of products")
