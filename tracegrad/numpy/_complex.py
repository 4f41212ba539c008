"""Complex numbers: the parts of a complex array, its conjugate and angle, and the tests of
complexness (`iscomplex`, `isrealobj`, `real_if_close` ...).

On real input these are NumPy's too: `real` and `conj` return the input, `imag` zeros, and
`angle` the angle of the real number (0, or pi below zero).
"""

from __future__ import annotations

import numpy as np

from tracegrad import ops
from tracegrad.core import dtypes
from tracegrad.core.ir import EagerTensor, GraphTensor
from tracegrad.errors import TracerBoolError
from tracegrad.numpy._core import dtype_of, read
from tracegrad.numpy._creation import astype, full_like, zeros_like
from tracegrad.numpy._ufuncs import arctan2, multiply


def _is_complex(x) -> bool:
    return dtypes.is_complex(dtype_of(x)[0])


def real(val):
    """The real part of `val` (`val` itself when it is real)."""
    x = read(val)
    return ops.real_p.bind(x) if _is_complex(x) else x


def imag(val):
    """The imaginary part of `val` (zeros of its shape and dtype when it is real)."""
    x = read(val)
    return ops.imag_p.bind(x) if _is_complex(x) else zeros_like(x)


def conjugate(x):
    """The complex conjugate of `x`, elementwise (`x` itself when it is real)."""
    x = read(x)
    return ops.conj_p.bind(x) if _is_complex(x) else x


conj = conjugate


def angle(z, deg=False):
    """The angle of `z` in the complex plane, `arctan2(imag(z), real(z))` in `[-pi, pi]`
    (for real input pi for negative numbers and -0.0, else 0); in degrees with `deg=True`.
    Integer and bool input gives float64."""
    z = read(z)
    if _is_complex(z):
        a = arctan2(ops.imag_p.bind(z), ops.real_p.bind(z))
    else:
        a = arctan2(zeros_like(z), z)
    return multiply(a, 180.0 / np.pi) if deg else a


def _imaginary_test(x, compare, real_answer: bool):
    x = read(x)
    if not _is_complex(x):
        return full_like(x, real_answer, dtype=dtypes.bool_)
    i = ops.imag_p.bind(x)
    return compare(i, ops.zeros_like(i))


def iscomplex(x):
    """Elementwise whether `x` has a non-zero imaginary part (all False for real input)."""
    return _imaginary_test(x, ops.ne, False)


def isreal(x):
    """Elementwise whether `x` has a zero imaginary part (all True for real input)."""
    return _imaginary_test(x, ops.eq, True)


def iscomplexobj(x) -> bool:
    """Whether `x` has a complex dtype (whatever its values)."""
    return _is_complex(read(x))


def isrealobj(x) -> bool:
    """Whether `x` has a real dtype."""
    return not _is_complex(read(x))


def real_if_close(a, tol=100):
    """`a` as its real part when every imaginary part is within `tol` machine epsilons of
    zero (`tol` <= 1: an absolute tolerance), else `a` unchanged. The answer reads the
    values, so a traced `a` raises: the result's dtype would depend on them."""
    a = read(a)
    if not _is_complex(a):
        return a
    if isinstance(a, GraphTensor):
        raise TracerBoolError(
            f"real_if_close of a traced Tensor ({a.type}): whether the result is real "
            "depends on its values; use tnp.real where the imaginary part is known to be 0")
    if tol > 1:
        tol = tol * float(np.finfo(dtypes.real_dtype(dtype_of(a)[0])).eps)
    value = a.numpy() if isinstance(a, EagerTensor) else np.asarray(a)
    return real(a) if bool(np.all(np.abs(value.imag) < tol)) else a


# NumPy's sort_complex gives complex64 for these real dtypes, complex128 for the others.
_TO_COMPLEX64 = frozenset((dtypes.int8, dtypes.int16, dtypes.uint8, dtypes.uint16))


def sort_complex(a):
    """`a` sorted along its last axis by real part, then imaginary part (NaNs last, as
    NumPy's `sort`), as a complex array (real input is sorted, then made complex128, or
    complex64 for 8 and 16 bit integers)."""
    from tracegrad.numpy._reductions import sort

    a = read(a)
    dt = dtype_of(a)[0]
    if not _is_complex(a):
        return astype(sort(a, axis=-1),
                      dtypes.complex64 if dt in _TO_COMPLEX64 else dtypes.complex128)
    return sort(a, axis=-1)
