"""`tracegrad.scipy.signal`: convolve, correlate, fftconvolve, convolve2d, correlate2d and
detrend with SciPy's signatures and values. The direct method is one `conv` primitive (an
n-d correlation whose gradients are correlations again); the FFT method is
`tracegrad.numpy.fft`. Everything differentiates, batches and compiles."""

from __future__ import annotations

import math

import numpy as np

from tracegrad.core import dtypes
from tracegrad.core.shapes import shape_str
from tracegrad.errors import InvalidArgumentError, ShapeError, UnsupportedOpError
from tracegrad.numpy import fft as _fft
from tracegrad.numpy._complex import conjugate
from tracegrad.numpy._core import ndim_of, promote, read, shape_of, static_dim
from tracegrad.numpy._creation import astype, zeros
from tracegrad.numpy._reductions import mean
from tracegrad.numpy._reductions import sum as sum_
from tracegrad.numpy._sequences import MODES, correlate_direct, mode_windows
from tracegrad.numpy._shape import flip
from tracegrad.numpy._ufuncs import around, multiply, subtract

__all__ = ["convolve", "correlate", "fftconvolve", "convolve2d", "correlate2d", "detrend",
           "choose_conv_method"]

_METHODS = ("auto", "direct", "fft")
_BOUNDARIES = {"fill": "constant", "pad": "constant", "wrap": "wrap", "circular": "wrap",
               "symm": "symmetric", "symmetric": "symmetric"}
# `method="auto"` takes the FFT when both operands have more points than this (the direct
# loop's work grows with their product, the FFT's with their sum)
FFT_ABOVE = 256


def _check(value, allowed, what, op):
    if value not in allowed:
        raise InvalidArgumentError(f"{op}: {what} must be one of {', '.join(map(repr, allowed))}, "
                                   f"got {value!r}")


def _operands(in1, in2, op, ndim=None):
    """`in1`, `in2` promoted to their common dtype, their static shapes, and that dtype."""
    (in1, in2), dtype = promote(read(in1), read(in2))
    if ndim_of(in1) != ndim_of(in2) or (ndim is not None and ndim_of(in1) != ndim):
        want = f"both {ndim}-D arrays" if ndim is not None else "the same dimensionality"
        raise ShapeError(f"{op}: in1 and in2 should have {want}, got "
                         f"{shape_str(shape_of(in1))} and {shape_str(shape_of(in2))}")
    s1 = tuple(static_dim(in1, a, op, "static shapes") for a in range(ndim_of(in1)))
    s2 = tuple(static_dim(in2, a, op, "static shapes") for a in range(ndim_of(in2)))
    return in1, in2, s1, s2, dtype


def _valid_swap(mode, s1, s2, op):
    """Whether 'valid' mode computes with the operands exchanged (in2 larger everywhere);
    a ShapeError when neither is at least as large as the other in every dim."""
    if mode != "valid" or not s1:
        return False
    ok1 = all(a >= b for a, b in zip(s1, s2))
    ok2 = all(b >= a for a, b in zip(s1, s2))
    if not (ok1 or ok2):
        raise ShapeError(f"{op}: for 'valid' mode, one must be at least as large as the other "
                         f"in every dimension, got {shape_str(s1)} and {shape_str(s2)}")
    return not ok1


def _fft_convolve(in1, in2, axes, s1, s2, dtype, mode, op):
    """The convolution of `in1` and `in2` (of `dtype`) along `axes` by FFTs (the other dims
    broadcast)."""
    swap = _valid_swap(mode, [s1[a] for a in axes], [s2[a] for a in axes], op)
    if swap:
        in1, in2, s1, s2 = in2, in1, s2, s1
    full = [s1[a] + s2[a] - 1 for a in axes]
    if dtypes.is_complex(dtype):
        out = _fft.ifftn(multiply(_fft.fftn(in1, full, axes), _fft.fftn(in2, full, axes)),
                         full, axes)
    else:
        out = _fft.irfftn(multiply(_fft.rfftn(in1, full, axes), _fft.rfftn(in2, full, axes)),
                          full, axes)
    windows = mode_windows([s1[a] for a in axes], [s2[a] for a in axes], mode)
    index = [slice(None)] * len(s1)
    for a, (start, size) in zip(axes, windows):
        index[a] = slice(start, start + size)
    return out[tuple(index)]


def _as_input_dtype(out, dtype):
    """An FFT result back in the inputs' `dtype`, rounded when that is an integer one (as
    SciPy's convolve and correlate)."""
    if dtypes.is_inexact(dtype):
        return out
    return astype(around(out), dtype)


def choose_conv_method(in1, in2, mode="full", measure=False):
    """The method ("direct" or "fft") `convolve`/`correlate` use for `method="auto"`: the
    FFT when both operands are inexact and have more than `FFT_ABOVE` points."""
    if measure:
        raise UnsupportedOpError("choose_conv_method: measure=True is not supported")
    _check(mode, MODES, "mode", "choose_conv_method")
    _, _, s1, s2, dtype = _operands(in1, in2, "choose_conv_method")
    return _auto_method(s1, s2, dtype)


def _auto_method(s1, s2, dtype):
    if dtypes.is_inexact(dtype) and min(math.prod(s1), math.prod(s2)) > FFT_ABOVE:
        return "fft"
    return "direct"


def _conv_nd(in1, in2, mode, method, op, reverse):
    _check(mode, MODES, "mode", op)
    _check(method, _METHODS, "method", op)
    in1, in2, s1, s2, dtype = _operands(in1, in2, op)
    if not all(s1) or not all(s2):
        return zeros((0,), dtype)
    if method == "auto":
        method = _auto_method(s1, s2, dtype)
    kernel = in2
    if dtypes.is_complex(dtype) and not reverse:
        kernel = conjugate(kernel)
    if method == "fft" and s1:
        flipped = kernel if reverse else flip(kernel)
        out = _fft_convolve(in1, flipped, tuple(range(len(s1))), s1, s2, dtype, mode, op)
        return _as_input_dtype(out, dtype)
    _valid_swap(mode, s1, s2, op)
    kernel = flip(kernel) if reverse and s1 else kernel
    return correlate_direct(in1, kernel, s1, s2, mode_windows(s1, s2, mode))


def convolve(in1, in2, mode="full", method="auto"):
    """The n-dimensional convolution of `in1` and `in2` (the same number of dims), over
    SciPy's `mode` ranges ("full", "same": the size of `in1`, centered, "valid"), by
    `method` "direct", "fft" or "auto" (`choose_conv_method`)."""
    return _conv_nd(in1, in2, mode, method, "convolve", reverse=True)


def correlate(in1, in2, mode="full", method="auto"):
    """The n-dimensional cross-correlation `z[k] = sum_l in1[l] * conj(in2[l - k + K - 1])`
    of `in1` and `in2`, over SciPy's `mode` ranges, by `method` (as `convolve`)."""
    return _conv_nd(in1, in2, mode, method, "correlate", reverse=False)


def fftconvolve(in1, in2, mode="full", axes=None):
    """The convolution of `in1` and `in2` by FFTs over `axes` (all by default; the other
    dims must be equal or 1, and broadcast), over SciPy's `mode` ranges."""
    _check(mode, MODES, "mode", "fftconvolve")
    in1, in2, s1, s2, dtype = _operands(in1, in2, "fftconvolve")
    if not s1:
        return multiply(in1, in2)
    if not all(s1) or not all(s2):
        return zeros((0,), dtype)
    n = len(s1)
    axes = tuple(range(n)) if axes is None else tuple(
        sorted({a % n for a in np.atleast_1d(axes).tolist()}))
    for a in range(n):
        if a not in axes and s1[a] != s2[a] and 1 not in (s1[a], s2[a]):
            raise ShapeError(f"fftconvolve: incompatible shapes for in1 and in2: "
                             f"{shape_str(s1)} and {shape_str(s2)}")
    return _fft_convolve(in1, in2, axes, s1, s2, dtype, mode, "fftconvolve")


def _conv_2d(in1, in2, mode, boundary, fillvalue, op, reverse):
    _check(mode, MODES, "mode", op)
    _check(boundary, tuple(_BOUNDARIES), "boundary", op)
    if np.ndim(fillvalue) != 0 and np.size(fillvalue) != 1:
        raise InvalidArgumentError(f"{op}: fillvalue must be scalar or an array with one "
                                   "element")
    fillvalue = np.asarray(fillvalue).reshape(()).item()
    in1, in2, s1, s2, dtype = _operands(in1, in2, op, ndim=2)
    if not all(s1) or not all(s2):
        return zeros((0,), dtype)
    swap = _valid_swap(mode, s1, s2, op)
    if swap:
        in1, in2, s1, s2 = in2, in1, s2, s1
    complex_ = dtypes.is_complex(dtype)
    kernel = flip(in2) if reverse else (conjugate(in2) if complex_ else in2)
    windows = mode_windows(s1, s2, mode)
    if mode == "same" and not reverse:  # SciPy centers it as the convolution it computes
        windows = [(b // 2, a) for a, b in zip(s1, s2)]
    out = correlate_direct(in1, kernel, s1, s2, windows, _BOUNDARIES[boundary], fillvalue)
    if swap and not reverse:
        out = flip(out)  # (SciPy's: the swapped correlation reversed, not conjugated)
    return out


def convolve2d(in1, in2, mode="full", boundary="fill", fillvalue=0):
    """The convolution of the 2-D `in1` and `in2` over SciPy's `mode` ranges, `in1`
    extended by `boundary`: "fill" (with `fillvalue`), "wrap" or "symm"."""
    return _conv_2d(in1, in2, mode, boundary, fillvalue, "convolve2d", reverse=True)


def correlate2d(in1, in2, mode="full", boundary="fill", fillvalue=0):
    """The cross-correlation of the 2-D `in1` and `in2` (as `convolve2d`, with the
    conjugated, unreversed `in2`)."""
    return _conv_2d(in1, in2, mode, boundary, fillvalue, "correlate2d", reverse=False)


def detrend(data, axis=-1, type="linear", bp=0, overwrite_data=False):
    """`data` less its mean (`type="constant"`) or its least-squares line (`"linear"`)
    along `axis`; breakpoints (`bp`) are not supported."""
    _check(type, ("linear", "l", "constant", "c"), "type", "detrend")
    if not (np.ndim(bp) == 0 and bp == 0):
        raise UnsupportedOpError("detrend: breakpoints (bp) are not supported")
    data = read(data)
    dtype = promote(data)[1]
    if not dtypes.is_inexact(dtype):
        data, dtype = astype(data, dtypes.float64), dtypes.float64
    if type in ("constant", "c"):
        return subtract(data, mean(data, axis=axis, keepdims=True))
    n = static_dim(data, axis, "detrend", "a static length along axis")
    centered = subtract(data, mean(data, axis=axis, keepdims=True))
    t = np.arange(n) - (n - 1) / 2.0  # the least-squares line's slope is <t, y> / <t, t>
    norm = float(t @ t) or 1.0
    shape = [1] * ndim_of(data)
    shape[axis] = n
    t = astype(np.reshape(t, shape), dtype)
    slope = multiply(sum_(multiply(centered, t), axis=axis, keepdims=True), 1.0 / norm)
    return subtract(centered, multiply(slope, t))
