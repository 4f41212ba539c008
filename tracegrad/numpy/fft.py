"""`tnp.fft`: NumPy's discrete Fourier transforms (fft, ifft, rfft, irfft, hfft, ihfft, their
2-d and n-d forms), the frequency grids (fftfreq, rfftfreq) and fftshift/ifftshift.

Every transform is the `fft` primitive (unnormalized) over the transformed axes, with the
input zero-padded or trimmed to NumPy's `n`/`s` and the result scaled for `norm`. Real input
is computed in float64 (complex128), float16 and float32 in float32 (complex64), as NumPy 2
does.
"""

from __future__ import annotations

import operator
import warnings

import numpy as np

from tracegrad import ops
from tracegrad.core import dtypes
from tracegrad.errors import DTypeError, InvalidArgumentError, ShapeError, UnsupportedOpError
from tracegrad.numpy._arrange import roll
from tracegrad.numpy._complex import conjugate
from tracegrad.numpy._core import axis_arg, cast, count, dtype_of, ndim_of, read, shape_of
from tracegrad.numpy._indexing import take
from tracegrad.numpy._ufuncs import floor_divide, mod, multiply, subtract, true_divide
from tracegrad.ops import shape_ops
from tracegrad.ops.fourier import irfft_length

__all__ = [
    "fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2", "irfft2",
    "fftn", "ifftn", "rfftn", "irfftn", "fftfreq", "rfftfreq", "fftshift", "ifftshift",
]

_NORMS = (None, "backward", "ortho", "forward")
_SWAP = {None: "forward", "backward": "forward", "ortho": "ortho", "forward": "backward"}
_INVERSE = ("ifft", "irfft")


def _check_norm(name, norm):
    if norm not in _NORMS:
        raise InvalidArgumentError(f'{name}: Invalid norm value {norm}; should be "backward", '
                                   '"ortho" or "forward".')
    return norm


def _no_out(name, out):
    if out is not None:
        raise UnsupportedOpError(f"{name}: out= is not supported (results are new arrays)")


def _input(name, a, kind):
    """`a` read and cast to the dtype the transform computes in (a DTypeError for complex
    input to a real transform)."""
    a = read(a)
    if ndim_of(a) == 0:
        raise ShapeError(f"{name}: a 0-dimensional array has no axis to transform")
    dtype, _ = dtype_of(a)
    if kind == "rfft":
        if dtypes.is_complex(dtype):
            raise DTypeError(f"{name}: the input must be real, got {dtype.name}")
        want = dtypes.real_dtype(dtypes.complex_dtype(dtype))
    else:
        want = dtypes.complex_dtype(dtype)
    return cast(a, want)


def _length(name, n):
    n = operator.index(n)
    if n < 1:
        raise InvalidArgumentError(f"{name}: Invalid number of FFT data points ({n}) specified.")
    return n


def _resize(x, axis, n):
    """`x` trimmed or zero-padded to `n` points along `axis` (unknown sizes too)."""
    m = shape_of(x)[axis]
    if m == n:
        return x
    config = [(0, 0, 0)] * ndim_of(x)
    if m is None or m < n:  # (an unknown size: padded by n, then the first n kept)
        config[axis] = (0, n - m if m is not None else n, 0)
        x = ops.pad(x, shape_ops.scalar_like(x, 0), padding_config=tuple(config))
    return x if m is not None and m < n else shape_ops.slice_along(x, axis, 0, n)


def _scaled(x, kind, norm, axes, lengths, points):
    """`x` scaled for `norm` (a forward transform by 1, 1/sqrt(N) or 1/N for "backward",
    "ortho" or "forward"; an inverse one the other way round), N the points transformed:
    the `lengths` along `axes`, unknown ones read from `points` (the real side)."""
    if kind in _INVERSE:
        norm = _SWAP[norm]
    if norm in (None, "backward"):
        return x
    dtype = dtype_of(x)[0]
    real = dtypes.real_dtype(dtype)
    if None in lengths:
        size = count(points, [a for a, n in zip(axes, lengths, strict=True) if n is None], real)
        size = multiply(size, np.asarray(np.prod([n for n in lengths if n is not None]), real))
        factor = true_divide(np.asarray(1, real), size if norm == "forward" else ops.sqrt(size))
        return multiply(x, cast(factor, dtype))
    size = real.type(np.prod(lengths))
    factor = real.type(1) / (size if norm == "forward" else np.sqrt(size))
    return multiply(x, np.asarray(factor, dtype))


def _transform(name, kind, a, s, axes, norm):
    """The `kind` transform of `a` over non-negative `axes` of lengths `s` (None: as the
    input is; for irfft the real output length, None: 2 (m - 1)), NumPy's order of 1-d
    transforms: the real axis is the last of `axes`."""
    # (NumPy's 1-d irfft of float16 input gives float16, computed in float32)
    half = kind == "irfft" and len(axes) == 1 and dtype_of(read(a))[0] == dtypes.float16
    x = _input(name, a, "rfft" if kind == "rfft" else "fft")
    nd = ndim_of(x)
    if len(set(axes)) != len(axes):  # NumPy transforms a repeated axis again
        return _repeated(name, kind, x, s, axes, norm)
    lengths = []
    for i, (ax, n) in enumerate(zip(axes, s, strict=True)):
        real_out = kind == "irfft" and i == len(axes) - 1
        if n is not None:
            x = _resize(x, ax, n // 2 + 1 if real_out else n)
        elif real_out:
            m = shape_of(x)[ax]
            n = None if m is None else _length(name, irfft_length(m, None))
        else:
            n = shape_of(x)[ax]
            n = n if n is None else _length(name, n)
        lengths.append(n)
    attrs = {"fft_type": kind, "axes": tuple(ax - nd for ax in axes)}
    if kind == "irfft":
        attrs["n"] = lengths[-1]
    y = ops.fft(x, **attrs)
    y = _scaled(y, kind, norm, axes, lengths, x if kind == "rfft" else y)
    return cast(y, dtypes.float16) if half else y


def _repeated(name, kind, x, s, axes, norm):
    """NumPy's n-d transform as its sequence of 1-d ones (axes may repeat)."""
    if kind == "rfft":
        x = _transform(name, "rfft", x, s[-1:], axes[-1:], norm)
        s, axes, kind = s[:-1], axes[:-1], "fft"
    if kind == "irfft":
        for n, ax in zip(s[:-1], axes[:-1], strict=True):
            x = _transform(name, "ifft", x, [n], [ax], norm)
        return _transform(name, "irfft", x, s[-1:], axes[-1:], norm)
    for n, ax in reversed(list(zip(s, axes, strict=True))):
        x = _transform(name, kind, x, [n], [ax], norm)
    return x


def _one_axis(name, kind, a, n, axis, norm, out):
    _check_norm(name, norm)
    _no_out(name, out)
    a = read(a)
    axis = axis_arg(axis, max(ndim_of(a), 1), name)
    return _transform(name, kind, a, [None if n is None else _length(name, n)], [axis], norm)


def _n_axes(name, kind, a, s, axes, norm, out):
    """NumPy's `_cook_nd_args`: the lengths and non-negative axes of an n-d transform."""
    _check_norm(name, norm)
    _no_out(name, out)
    a = read(a)
    nd = ndim_of(a)
    shape = shape_of(a)
    if axes is None:
        if s is not None:
            warnings.warn(f"{name}: `axes` should not be `None` if `s` is not `None` "
                          "(deprecated in NumPy 2.0); pass the axes `s` is for",
                          DeprecationWarning, stacklevel=3)
        axes = list(range(nd)) if s is None else list(range(nd - len(s), nd))
    axes = [axis_arg(ax, nd, name) for ax in axes]
    if s is None:  # (the lengths of the input's axes, as they are before any transform)
        s = [shape[ax] for ax in axes]
        if kind == "irfft" and axes and s[-1] is not None:
            s[-1] = _length(name, irfft_length(s[-1], None))
    else:
        s = list(s)
        if len(s) != len(axes):
            raise InvalidArgumentError(f"{name}: Shape and axes have different lengths.")
        if any(n == -1 and shape[ax] is None for n, ax in zip(s, axes, strict=True)):
            raise ShapeError(f"{name}: s[i] == -1 takes the length of axis axes[i], which "
                             "is unknown when traced")
        s = [n if n is None else shape[ax] if n == -1 else _length(name, n)
             for n, ax in zip(s, axes, strict=True)]
    if not axes:
        if kind in ("rfft", "irfft"):
            raise InvalidArgumentError(f"{name}: a real transform needs at least one axis")
        return a
    return _transform(name, kind, a, s, axes, norm)


# -- 1-d --------------------------------------------------------------------------------------


def fft(a, n=None, axis=-1, norm=None, out=None):
    """The discrete Fourier transform of `a` along `axis` (zero-padded or trimmed to `n`
    points)."""
    return _one_axis("fft", "fft", a, n, axis, norm, out)


def ifft(a, n=None, axis=-1, norm=None, out=None):
    """The inverse discrete Fourier transform of `a` along `axis`."""
    return _one_axis("ifft", "ifft", a, n, axis, norm, out)


def rfft(a, n=None, axis=-1, norm=None, out=None):
    """The discrete Fourier transform of real `a` along `axis`: its `n // 2 + 1`
    non-negative frequency terms."""
    return _one_axis("rfft", "rfft", a, n, axis, norm, out)


def irfft(a, n=None, axis=-1, norm=None, out=None):
    """The inverse of `rfft`: `n` real points (default `2 * (m - 1)`) from the `m`
    non-negative frequency terms of a Hermitian spectrum along `axis`."""
    return _one_axis("irfft", "irfft", a, n, axis, norm, out)


def hfft(a, n=None, axis=-1, norm=None, out=None):
    """The (real) discrete Fourier transform of a signal with Hermitian symmetry, given by
    its first half `a` along `axis`: `n` real points (default `2 * (m - 1)`)."""
    _check_norm("hfft", norm)
    return _one_axis("hfft", "irfft", conjugate(read(a)), n, axis,
                     _SWAP[norm], out)


def ihfft(a, n=None, axis=-1, norm=None, out=None):
    """The inverse of `hfft`: the `n // 2 + 1` non-negative frequency terms of the
    inverse transform of real `a` along `axis`."""
    _check_norm("ihfft", norm)
    return conjugate(_one_axis("ihfft", "rfft", a, n, axis, _SWAP[norm], out))


# -- n-d --------------------------------------------------------------------------------------


def fftn(a, s=None, axes=None, norm=None, out=None):
    """The n-dimensional discrete Fourier transform of `a` over `axes` (all by default),
    each zero-padded or trimmed to the lengths `s`."""
    return _n_axes("fftn", "fft", a, s, axes, norm, out)


def ifftn(a, s=None, axes=None, norm=None, out=None):
    """The n-dimensional inverse discrete Fourier transform of `a` over `axes`."""
    return _n_axes("ifftn", "ifft", a, s, axes, norm, out)


def rfftn(a, s=None, axes=None, norm=None, out=None):
    """The n-dimensional discrete Fourier transform of real `a`: `rfft` over the last of
    `axes`, then `fft` over the others."""
    return _n_axes("rfftn", "rfft", a, s, axes, norm, out)


def irfftn(a, s=None, axes=None, norm=None, out=None):
    """The inverse of `rfftn`: `ifft` over all but the last of `axes`, then `irfft` over it
    (default length `2 * (m - 1)`)."""
    return _n_axes("irfftn", "irfft", a, s, axes, norm, out)


def fft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    """The 2-dimensional discrete Fourier transform (`fftn` over `axes`)."""
    return _n_axes("fft2", "fft", a, s, axes, norm, out)


def ifft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    """The 2-dimensional inverse discrete Fourier transform (`ifftn` over `axes`)."""
    return _n_axes("ifft2", "ifft", a, s, axes, norm, out)


def rfft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    """The 2-dimensional discrete Fourier transform of real `a` (`rfftn` over `axes`)."""
    return _n_axes("rfft2", "rfft", a, s, axes, norm, out)


def irfft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    """The inverse of `rfft2` (`irfftn` over `axes`)."""
    return _n_axes("irfft2", "irfft", a, s, axes, norm, out)


# -- frequencies and shifts -------------------------------------------------------------------


def fftfreq(n, d=1.0, device=None):
    """The sample frequencies of an `n`-point transform with sample spacing `d`:
    `[0, 1, ..., (n - 1) // 2, -(n // 2), ..., -1] / (n d)`."""
    n = operator.index(n)
    ints = np.concatenate([np.arange(0, (n - 1) // 2 + 1), np.arange(-(n // 2), 0)])
    return multiply(ints, true_divide(1.0, multiply(n, read(d))))


def rfftfreq(n, d=1.0, device=None):
    """The sample frequencies of an `n`-point `rfft` with sample spacing `d`:
    `[0, 1, ..., n // 2] / (n d)`."""
    n = operator.index(n)
    return multiply(np.arange(0, n // 2 + 1), true_divide(1.0, multiply(n, read(d))))


def _shift(name, x, axes, sign):
    x = read(x)
    nd = ndim_of(x)
    if axes is None:
        axes = tuple(range(nd))
    elif isinstance(axes, int):
        axes = (axes,)
    axes = tuple(axis_arg(ax, nd, name) for ax in axes)
    shape = shape_of(x)
    static = [ax for ax in axes if shape[ax] is not None]
    if static:
        x = roll(x, tuple(sign * (shape[ax] // 2) for ax in static), axis=tuple(static))
    for ax in axes:
        if shape[ax] is None:  # a gather of the indices rolled by half the run-time length
            n = ops.dim_size(x, axis=ax)
            index = ops.iota(n, dtype=dtypes.int64, shape=(None,), dimension=0)
            source = mod(subtract(index, multiply(floor_divide(n, 2), sign)), n)
            x = take(x, source, axis=ax)
    return x


def fftshift(x, axes=None):
    """`x` with the zero-frequency term moved to the center of `axes` (all by default)."""
    return _shift("fftshift", x, axes, 1)


def ifftshift(x, axes=None):
    """The inverse of `fftshift`."""
    return _shift("ifftshift", x, axes, -1)
