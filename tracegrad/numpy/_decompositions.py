"""`tnp.linalg`'s decompositions: qr, eigh, eigvalsh, eig, eigvals, svd, svdvals (the qr,
eigh, eig and svd primitives), with NumPy's result named tuples."""

from __future__ import annotations

from typing import NamedTuple

from tracegrad import ops
from tracegrad.core import dtypes
from tracegrad.core.shapes import shape_str
from tracegrad.errors import InvalidArgumentError, ShapeError, UnsupportedOpError
from tracegrad.numpy._complex import conjugate
from tracegrad.numpy._core import cast, dtype_of, ndim_of, read, shape_of
from tracegrad.numpy._indexing import take_along_axis
from tracegrad.numpy._reductions import argsort
from tracegrad.numpy._shape import flip, swapaxes
from tracegrad.numpy._ufuncs import absolute, multiply, sign


class QRResult(NamedTuple):
    Q: object
    R: object


class EighResult(NamedTuple):
    eigenvalues: object
    eigenvectors: object


class EigResult(NamedTuple):
    eigenvalues: object
    eigenvectors: object


class SVDResult(NamedTuple):
    U: object
    S: object
    Vh: object


def floating(x):
    """`x` read, integer and bool arrays as float64 (linalg computes in a float dtype)."""
    x = read(x)
    dtype, weak = dtype_of(x)
    return x if dtypes.is_inexact(dtype) else cast(x, dtypes.float64, weak)


def matrices(op, a):
    """Raise unless `a` is a (batch of) matrices."""
    if ndim_of(a) < 2:
        raise ShapeError(f"{op}: {ndim_of(a)}-dimensional array given; the array must "
                         "be at least two-dimensional")


def square_matrices(op, a):
    """Raise unless `a` is a (batch of) square matrices."""
    matrices(op, a)
    n, m = shape_of(a)[-2:]
    if n is not None and m is not None and n != m:
        raise ShapeError(f"{op}: last 2 dimensions of the array must be square, got "
                         f"{shape_str(shape_of(a))}")


def qr(a, mode="reduced"):
    """The QR factorization of each matrix in `a` (m x n, k = min(m, n)): `mode="reduced"`
    gives `QRResult(Q (m, k), R (k, n))`, `"complete"` `QRResult(Q (m, m), R (m, n))`,
    `"r"` only `R (k, n)`. Signs are LAPACK's (NumPy's)."""
    if mode not in ("reduced", "complete", "r", "raw"):
        raise InvalidArgumentError(f"qr: unrecognized mode {mode!r}")
    if mode == "raw":
        raise UnsupportedOpError("qr: mode='raw' (Householder reflectors) is not supported; "
                                 "use 'reduced', 'complete' or 'r'")
    a = floating(a)
    matrices("qr", a)
    q, r = ops.qr(a, full_matrices=mode == "complete")
    return r if mode == "r" else QRResult(q, r)


def _uplo(op, UPLO):
    if UPLO not in ("L", "U", "l", "u"):
        raise InvalidArgumentError(f"{op}: UPLO argument must be 'L' or 'U', got {UPLO!r}")
    return UPLO in ("L", "l")


def eigh(a, UPLO="L"):
    """`EighResult(eigenvalues, eigenvectors)` of each symmetric matrix in `a`, read from its
    lower (`UPLO="L"`) or upper triangle: eigenvalues ascending, eigenvectors as columns,
    with LAPACK's (NumPy's) signs."""
    a = floating(a)
    square_matrices("eigh", a)
    return EighResult(*ops.eigh(a, lower=_uplo("eigh", UPLO)))


def eigvalsh(a, UPLO="L"):
    """The eigenvalues (ascending) of each symmetric matrix in `a` (read as `eigh` does)."""
    a = floating(a)
    square_matrices("eigvalsh", a)
    return ops.eigh(a, lower=_uplo("eigvalsh", UPLO))[0]


def eig(a):
    """`EigResult(eigenvalues, eigenvectors)` of each square matrix in `a`: eigenvectors as
    columns of unit norm, in LAPACK's (NumPy's) order and phases. Both are complex, for real
    `a` too (complex64 for float32), as in NumPy 2.5 and JAX. Gradients are those of
    functions invariant to each eigenvector's phase, at distinct eigenvalues."""
    a = floating(a)
    square_matrices("eig", a)
    return EigResult(*ops.eig(a))


def eigvals(a):
    """The eigenvalues of each square matrix in `a` (complex, in `eig`'s order)."""
    a = floating(a)
    square_matrices("eigvals", a)
    return ops.eig(a)[0]


def svd(a, full_matrices=True, compute_uv=True, hermitian=False):
    """`SVDResult(U, S, Vh)` with `a == U @ (S[..., None] * Vh)`, S descending; with
    `compute_uv=False` only S. `full_matrices` makes U (m, m) and Vh (n, n), otherwise
    (m, k) and (k, n), k = min(m, n). `hermitian` takes `a` symmetric and uses `eigh`, as
    NumPy does. Signs are LAPACK's (NumPy's)."""
    a = floating(a)
    matrices("svd", a)
    if hermitian:
        square_matrices("svd", a)
        w, v = ops.eigh(a, lower=True)
        order = flip(argsort(absolute(w), axis=-1), axis=-1)
        s = take_along_axis(absolute(w), order, axis=-1)
        if not compute_uv:
            return s
        u = take_along_axis(v, order[..., None, :], axis=-1)
        signs = take_along_axis(sign(w), order, axis=-1)
        return SVDResult(u, s, conjugate(swapaxes(multiply(u, signs[..., None, :]), -1, -2)))
    u, s, vh = ops.svd(a, full_matrices=bool(full_matrices) and compute_uv)
    return SVDResult(u, s, vh) if compute_uv else s


def svdvals(x):
    """The singular values of each matrix in `x`, descending (`svd(x, compute_uv=False)`)."""
    return svd(x, compute_uv=False)
