"""Op-table rows for `tnp.linalg.eig` and `eigvals` (the eig primitive) and `tnp.roots`.

Eigenvectors are unique up to a complex phase, so rows return `|v|^2` elementwise (the same
for every phase) with the eigenvalues. The eigenvalues come in LAPACK's order, the same
for small perturbations of inputs with distinct eigenvalues (the finite differences).
NumPy 2.4 returns real arrays for real input whose eigenvalues are all real; tracegrad's
are complex always (NumPy 2.5's and JAX's), so the references take the complex dtype.
"""

from __future__ import annotations

import numpy as np

import tracegrad.numpy as tnp
from tests.ops.optable import C128, F32, I64, case, rand


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
