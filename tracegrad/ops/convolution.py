"""The n-d convolution: one primitive, `conv`, a cross-correlation of images with kernels
over any number of spatial dims with zero (or negative: cropping) padding, as XLA's
`conv_general_dilated` at unit strides and dilations; `tracegrad.scipy.signal` and the
autograd-style channel contractions are built on it. Its gradients are convs again."""

from __future__ import annotations

import math

import numpy as np

from tracegrad.core.op import Primitive
from tracegrad.core.shapes import shape_str
from tracegrad.core.types import TensorType
from tracegrad.errors import ShapeError
from tracegrad.ops import elementwise as ew
from tracegrad.ops import shape_ops
from tracegrad.ops._batching import all_at, moveaxis
from tracegrad.ops._families import ALIGNED, needs, same_dtype

conv_p = Primitive("conv")
"""`out[*b, n, o, x] = sum_{i, k} lhs_padded[*b, n, i, x + k] * rhs[*b, o, i, k]`: `lhs` is
`(*batch, N, C_in, *spatial)`, `rhs` `(*batch, C_out, C_in, *kernel)`, the result
`(*batch, N, C_out, *out)`; `padding` holds one `(low, high)` pair of ints per spatial dim
(zeros added to `lhs`; a negative count crops), so `out = spatial + low + high - kernel + 1`.
The leading batch dims (the same number on both) pair one image set with one kernel set.
No conjugation: a correlation of complex signals conjugates its kernel first."""


def _out_sizes(spatial, kernel, padding):
    """The result's spatial sizes: `spatial + low + high - kernel + 1` per dim."""
    return tuple(s + lo + hi - k + 1 for s, k, (lo, hi) in zip(spatial, kernel, padding))


def _split(t, padding):
    """(batch dims, spatial dims) of a conv operand: the last len(padding) are spatial."""
    nb = t.ndim - 2 - len(padding)
    return t.shape[:nb], t.shape[nb + 2:]


@conv_p.def_abstract_eval
def _conv_abstract_eval(lhs, rhs, *, padding):
    dtype = same_dtype("conv", lhs, rhs)
    ns = len(padding)
    if ns < 1 or lhs.ndim != rhs.ndim or lhs.ndim < ns + 2 or any(
            len(p) != 2 or not all(isinstance(v, int) for v in p) for p in padding):
        raise ShapeError(f"conv: operands {shape_str(lhs.shape)} and {shape_str(rhs.shape)} "
                         f"with padding {padding}: need equal ranks of at least "
                         f"{ns + 2}, one (low, high) pair of ints per spatial dim")
    nb = lhs.ndim - 2 - ns
    lb, ls = _split(lhs, padding)
    rb, ks = _split(rhs, padding)
    if None in ls or None in ks:
        raise ShapeError(f"conv: spatial dims must be static, got {shape_str(lhs.shape)} "
                         f"and {shape_str(rhs.shape)}")
    pairs = list(zip(lb, rb)) + [(lhs.shape[nb + 1], rhs.shape[nb + 1])]
    if any(a is not None and b is not None and a != b for a, b in pairs):
        raise ShapeError(f"conv: batch and input-channel dims of {shape_str(lhs.shape)} and "
                         f"{shape_str(rhs.shape)} differ")
    out = _out_sizes(ls, ks, padding)
    if any(o < 0 for o in out) or any(s + lo < 0 or s + hi < 0 for s, (lo, hi) in
                                      zip(ls, padding)):
        raise ShapeError(f"conv: kernel {shape_str(rhs.shape)} does not fit operand "
                         f"{shape_str(lhs.shape)} padded by {padding}")
    batch = tuple(a if a is not None else b for a, b in zip(lb, rb))
    return TensorType(batch + (lhs.shape[nb], rhs.shape[nb]) + out, dtype,
                      lhs.weak and rhs.weak)


def _pad_or_crop(x, padding):
    """`x` zero-padded (negative counts: cropped) on its last len(padding) dims."""
    lead = x.ndim - len(padding)
    crop = (slice(None),) * lead + tuple(
        slice(max(-lo, 0), x.shape[lead + i] - max(-hi, 0)) for i, (lo, hi) in
        enumerate(padding))
    x = x[crop]
    grow = [(0, 0)] * lead + [(max(lo, 0), max(hi, 0)) for lo, hi in padding]
    return np.pad(x, grow) if any(g != (0, 0) for g in grow) else x


@conv_p.def_impl
def _conv_impl(lhs, rhs, *, padding):
    # the kernel windows of every output point gathered (im2col) and contracted with the
    # kernels by BLAS; the copy runs along the longer of the last output and kernel dims
    ns = len(padding)
    nb = lhs.ndim - 2 - ns
    batch, (n, ci), ks = lhs.shape[:nb], lhs.shape[nb:nb + 2], rhs.shape[nb + 2:]
    co = rhs.shape[nb]
    out = _out_sizes(lhs.shape[nb + 2:], ks, padding)
    if 0 in out:  # no window fits (the padded operand may be shorter than the kernel)
        return np.zeros(batch + (n, co) + out, lhs.dtype)
    padded = _pad_or_crop(lhs, padding)
    windows = np.lib.stride_tricks.sliding_window_view(padded, ks, axis=tuple(
        range(nb + 2, lhs.ndim)))  # (*b, n, ci, *out, *k)
    nbatch, npts, nk = math.prod(batch), math.prod(out), ci * math.prod(ks)
    points, kernel = (nb,) + tuple(range(nb + 2, nb + 2 + ns)), (nb + 1,) + tuple(
        range(nb + 2 + ns, windows.ndim))
    kernels = rhs.reshape(nbatch, co, nk)
    if out[-1] >= ks[-1]:
        cols = np.ascontiguousarray(windows.transpose(tuple(range(nb)) + kernel + points))
        result = np.matmul(kernels, cols.reshape(nbatch, nk, n * npts))  # (b, co, n * out)
        result = result.reshape(nbatch, co, n, npts).transpose(0, 2, 1, 3)
    else:
        cols = np.ascontiguousarray(windows.transpose(tuple(range(nb)) + points + kernel))
        result = np.matmul(cols.reshape(nbatch, n * npts, nk), kernels.transpose(0, 2, 1))
        result = result.reshape(nbatch, n, npts, co).transpose(0, 1, 3, 2)
    return np.ascontiguousarray(result.reshape(batch + (n, co) + out), dtype=lhs.dtype)


def _new_sizes(sizes):
    """`sizes` as reshape's `new_sizes` (an unknown one -1), or None when two are unknown."""
    return tuple(-1 if s is None else s for s in sizes) if list(sizes).count(None) < 2 else None


@conv_p.def_batch
def _conv_batch(ctx, args, dims, *, padding):
    # One operand batched: its batch merges into that operand's image (lhs) or out-channel
    # (rhs) dim, so the other one is not copied per example; both: one more leading batch
    # dim (also when unknown sizes leave the merge no reshape).
    (lhs, rhs), (ld, rd) = args, dims
    if (ld is None) != (rd is None):
        nb = lhs.ndim - 2 - len(padding) - (ld is not None)
        x = moveaxis(lhs, ld, nb) if rd is None else moveaxis(rhs, rd, nb)
        lhs, rhs = (x, rhs) if rd is None else (lhs, x)
        pair = x.shape[nb:nb + 2]
        merged = None if None in pair else pair[0] * pair[1]
        batch = tuple(a if a is not None else b for a, b in zip(lhs.shape[:nb], rhs.shape[:nb]))
        out = _out_sizes(lhs.shape[-len(padding):], rhs.shape[-len(padding):], padding)
        inner = pair + (rhs.shape[nb],) if rd is None else (lhs.shape[nb],) + pair
        to = _new_sizes(x.shape[:nb] + (merged,) + x.shape[nb + 2:])
        back = _new_sizes(batch + inner + out)
        if to is not None and back is not None:
            x = shape_ops.reshape_p.bind(x, new_sizes=to)
            y = conv_p.bind(x, rhs, padding=padding) if rd is None else conv_p.bind(
                lhs, x, padding=padding)
            return shape_ops.reshape_p.bind(y, new_sizes=back), nb + (rd is not None)
        args, dims = (lhs, rhs), (nb, None) if rd is None else (None, nb)
    return conv_p.bind(*all_at(args, dims, 0), padding=padding), 0


@conv_p.def_dims
def _conv_dims(op):
    (lhs, rhs), (t,) = op.inputs, op.outputs
    nb = lhs.ndim - 2 - len(op.attrs["padding"])
    for i in range(nb):
        yield lhs, i, rhs, i
        yield lhs, i, t, i
    yield lhs, nb, t, nb
    yield rhs, nb, t, nb + 1
    yield lhs, nb + 1, rhs, nb + 1


ALIGNED.add(conv_p)  # its kernel and input-channel dims are summed over: no row of them is kept


def _swap(x, i):
    """`x` with dims i and i + 1 exchanged."""
    perm = list(range(x.ndim))
    perm[i], perm[i + 1] = i + 1, i
    return shape_ops.transpose_p.bind(x, permutation=tuple(perm))


@conv_p.def_grad
def _conv_grad(op, g):
    # dlhs: g correlated with the flipped, channel-swapped kernel, padded to the full
    # range less the forward padding; drhs: lhs correlated with g, images as channels.
    (lhs, rhs), padding = op.inputs, op.attrs["padding"]
    ns = len(padding)
    nb = lhs.ndim - 2 - ns
    spatial = tuple(range(nb + 2, lhs.ndim))
    _, ks = _split(rhs, padding)
    grads = [None, None]
    if needs(op, 0):
        flipped = shape_ops.rev_p.bind(_swap(ew.conj(rhs), nb), dimensions=spatial)
        back = tuple((k - 1 - lo, k - 1 - hi) for k, (lo, hi) in zip(ks, padding))
        grads[0] = conv_p.bind(g, flipped, padding=back)
    if needs(op, 1):
        d = conv_p.bind(_swap(ew.conj(lhs), nb), _swap(g, nb), padding=padding)
        grads[1] = _swap(d, nb)
    return grads
