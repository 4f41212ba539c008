"""The discrete Fourier transform: one primitive, `fft`, of four kinds (XLA's FftType) over
one or more axes, unnormalized in both directions; `tracegrad.numpy.fft` pads, trims and
scales around it (NumPy's `n`, `s` and `norm`)."""

from __future__ import annotations

import numpy as np

from tracegrad.core import dtypes
from tracegrad.core.op import Primitive
from tracegrad.core.shapes import shape_str
from tracegrad.core.types import TensorType
from tracegrad.errors import InvalidArgumentError, NotDifferentiableError, ShapeError
from tracegrad.ops import elementwise as ew
from tracegrad.ops import shape_ops
from tracegrad.ops._batching import batch_axes
from tracegrad.ops._families import check_kind

FFT_TYPES = ("fft", "ifft", "rfft", "irfft")

fft_p = Primitive("fft")
"""The DFT of `x` over `axes` (distinct negative axes: leading dims are a batch):
`fft_type="fft"` sums `x[m] e^(-2 pi i k m / n)` (complex to complex), `"ifft"` the same with
`e^(+...)` and no `1/n` (complex to complex), `"rfft"` the forward sum of a real `x`, keeping
the first `n // 2 + 1` bins of axis `axes[-1]` (and complex sums over the others), `"irfft"`
its inverse, `n` real points along `axes[-1]` (default `2 * (m - 1)` for `m` bins) from the
Hermitian spectrum those bins stand for (imaginary parts of bin 0 and of bin n/2 ignored),
again without `1/n`."""


def _check_attrs(x, fft_type, axes):
    if fft_type not in FFT_TYPES:
        raise InvalidArgumentError(f"fft: fft_type must be one of {FFT_TYPES}, got {fft_type!r}")
    if not axes or len(set(axes)) != len(axes) or any(
            not isinstance(a, int) or not -x.ndim <= a < 0 for a in axes):
        raise ShapeError(f"fft: axes must be distinct negative axes of a "
                         f"{x.ndim}-dimensional operand, got {axes}")


def irfft_length(m, n):
    """The real length of an irfft of `m` bins (`n` if given, else `2 * (m - 1)`)."""
    if n is not None:
        return n
    return None if m is None else 2 * (m - 1)


@fft_p.def_abstract_eval
def _fft_abstract_eval(x, *, fft_type, axes, n=None):
    _check_attrs(x, fft_type, axes)
    shape = list(x.shape)
    last = axes[-1]
    if fft_type == "rfft":
        check_kind("fft", x, "float")
        dtype = dtypes.complex_dtype(x.dtype)
        shape[last] = None if shape[last] is None else shape[last] // 2 + 1
    else:
        check_kind("fft", x, "complex")
        dtype = x.dtype
        if fft_type == "irfft":
            dtype = dtypes.real_dtype(x.dtype)
            length = irfft_length(shape[last], n)
            m = shape[last]
            if length is not None and (length < 1 or (m is not None and m != length // 2 + 1)):
                raise ShapeError(f"fft: an irfft of {length} points takes {length // 2 + 1} "
                                 f"bins along axis {last}, got {shape_str(x.shape)}")
            shape[last] = length
    return TensorType(tuple(shape), dtype)


def _fft_impl(x, *, fft_type, axes, n=None):
    axes = list(axes)
    if fft_type == "fft":
        y = np.fft.fftn(x, axes=axes)
    elif fft_type == "ifft":
        y = np.fft.ifftn(x, axes=axes, norm="forward")
    elif fft_type == "rfft":
        y = np.fft.rfftn(x, axes=axes)
    else:
        s = [x.shape[a] for a in axes[:-1]] + [irfft_length(x.shape[axes[-1]], n)]
        y = np.fft.irfftn(x, s=s, axes=axes, norm="forward")
    out = dtypes.complex_dtype(x.dtype) if fft_type != "irfft" else dtypes.real_dtype(x.dtype)
    return y.astype(out, copy=False)


fft_p.def_impl(_fft_impl)
batch_axes(fft_p, front=True)


@fft_p.def_dims
def _fft_dims(op):
    x, y = op.inputs[0], op.outputs[0]
    real = op.attrs["fft_type"] in ("rfft", "irfft")
    last = x.ndim + op.attrs["axes"][-1]
    for i in range(x.ndim):
        if not (real and i == last):
            yield x, i, y, i


def _bin_weights(g, axis, n, interior):
    """`g` (bins along `axis` of an `n`-point real transform) with its interior bins (all
    but bin 0 and, for even `n`, bin n/2) multiplied by `interior` (weights made from an
    iota, computed in the consumer's loop rather than stored)."""
    m = g.shape[axis]
    bins = shape_ops.iota_p.bind(dtype=dtypes.int64, shape=(m,), dimension=0)
    edge = ew.eq_p.bind(bins, shape_ops.zeros_like(bins))
    if n % 2 == 0:
        edge = ew.or_p.bind(edge, ew.eq_p.bind(bins, shape_ops.full_like(bins, m - 1)))
    w = ew.select_p.bind(edge, shape_ops.ones_like(bins, g.dtype),
                         shape_ops.full_like(bins, interior, g.dtype))
    return ew.mul_p.bind(g, shape_ops.broadcast_like(w, g, (g.ndim + axis,)))


def _real_length(op, x_or_y):
    n = x_or_y.shape[op.attrs["axes"][-1]]
    if n is None:
        raise NotDifferentiableError(
            f"fft: the gradient of a real transform ({op.attrs['fft_type']}) needs the "
            f"length of axis {op.attrs['axes'][-1]} when traced; give it statically (got "
            f"{shape_str(x_or_y.shape)})")
    return n


@fft_p.def_grad
def _fft_grad(op, g):
    # Each kind is a real-linear map; its gradient (TF's convention, dL/dRe + i dL/dIm) is
    # the transposed map: fft <-> ifft; rfft's is an irfft of the interior bins halved
    # (irfft counts each twice); irfft's an rfft with the interior bins doubled.
    kind, axes = op.attrs["fft_type"], op.attrs["axes"]
    if kind in ("fft", "ifft"):
        return [fft_p.bind(g, fft_type="ifft" if kind == "fft" else "fft", axes=axes)]
    if kind == "rfft":
        n = _real_length(op, op.inputs[0])
        return [fft_p.bind(_bin_weights(g, axes[-1], n, 0.5), fft_type="irfft", axes=axes, n=n)]
    n = _real_length(op, op.outputs[0])
    return [_bin_weights(fft_p.bind(g, fft_type="rfft", axes=axes), axes[-1], n, 2.0)]
