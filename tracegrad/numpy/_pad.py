"""`pad`: "constant" is the `pad` primitive; "edge", "reflect", "symmetric" and "wrap" are
slices, reversals and concatenations, applied axis by axis in NumPy's order (so corners
and pads wider than the array come out as NumPy's do)."""

from __future__ import annotations

import numpy as np

from tracegrad import ops
from tracegrad.core.state import state
from tracegrad.errors import InvalidArgumentError, ShapeError, UnsupportedOpError
from tracegrad.numpy._core import (
    broadcast_to_shape,
    cast,
    dtype_of,
    ndim_of,
    read,
    shape_of,
    static_dim,
)
from tracegrad.numpy._shape import _slice_axis


def _pairs(value, ndim, op, what):
    try:
        pairs = np.broadcast_to(np.asarray(value), (ndim, 2))
    except ValueError:
        raise ShapeError(f"{op}: {what} {value!r} does not fit an array of rank "
                         f"{ndim}") from None
    return [tuple(p) for p in pairs.tolist()]


def pad(array, pad_width, mode="constant", constant_values=0):
    """`array` padded by `pad_width` (an int, a `(before, after)` pair or one pair per dim).

    `mode`: "constant" (`constant_values`: a scalar or pairs per dim), "edge", "reflect",
    "symmetric", "wrap" — NumPy's modes with NumPy's results.

    >>> tnp.pad(x, ((1, 1), (0, 2)), mode="reflect")
    """
    x = read(array)
    nd = ndim_of(x)
    widths = [(int(b), int(a)) for b, a in _pairs(pad_width, nd, "pad", "pad_width")]
    if any(b < 0 or a < 0 for b, a in widths):
        raise ShapeError("pad: index can't contain negative values")
    if mode == "constant":
        return _constant(x, widths, constant_values)
    grow = {"edge": _edge, "reflect": _reflect, "symmetric": _symmetric, "wrap": _wrap}.get(mode)
    if grow is None:
        raise UnsupportedOpError(f"pad: mode {mode!r} is not supported (constant, edge, "
                                 "reflect, symmetric, wrap are)")
    for axis, (before, after) in enumerate(widths):
        if before == after == 0:
            continue
        n = static_dim(x, axis, "pad", f"mode={mode!r} needs a static size on padded dims")
        if n == 0:
            raise InvalidArgumentError(f"pad: can't extend empty axis {axis} using modes other "
                                       "than 'constant'")
        x = grow(x, axis, before, after, n)
    return x


def _constant(x, widths, values):
    dtype = dtype_of(x)[0]
    pairs = np.asarray(values)
    if pairs.ndim == 0:
        if all(w == (0, 0) for w in widths):
            return x
        fill = _scalar(values, dtype)
        return ops.pad(x, fill, padding_config=tuple((b, a, 0) for b, a in widths))
    per_axis = _pairs(values, len(widths), "pad", "constant_values")
    nd = len(widths)
    for axis, ((b, a), (vb, va)) in enumerate(zip(widths, per_axis, strict=True)):
        for width, value, side in ((b, vb, 0), (a, va, 1)):
            if width:
                config = [(0, 0, 0)] * nd
                config[axis] = (width, 0, 0) if side == 0 else (0, width, 0)
                x = ops.pad(x, _scalar(value, dtype), padding_config=tuple(config))
    return x


def _scalar(value, dtype):
    v = read(value)
    if hasattr(v, "shape") and not isinstance(v, np.ndarray):
        return cast(v, dtype)
    v = np.asarray(v).astype(dtype)
    return state.graph.constant(v) if state.graph is not None else v


def _length(x, axis):
    return shape_of(x)[axis]


def _reversed(x, axis, lo, hi):
    return ops.rev(_slice_axis(x, axis, lo, hi), dimensions=(axis,))


def _join(parts, axis):
    parts = [p for p in parts if shape_of(p)[axis] != 0]
    return parts[0] if len(parts) == 1 else ops.concatenate(*parts, dimension=axis)


def _edge(x, axis, before, after, n):
    parts = []
    for width, lo in ((before, 0), (after, n - 1)):
        shape = list(shape_of(x))
        shape[axis] = width
        parts.append(broadcast_to_shape(_slice_axis(x, axis, lo, lo + 1), tuple(shape), (x,))
                     if width else None)
    return _join([p for p in (parts[0], x, parts[1]) if p is not None], axis)


def _mirror(x, axis, before, after, n, include_edge):
    if n == 1:
        return _edge(x, axis, before, after, n)
    period = n if include_edge else n - 1
    offset = 0 if include_edge else 1
    while before > 0 or after > 0:
        length = _length(x, axis)
        if include_edge:
            usable = length // period * period
        else:
            usable = (length - 1) // period * period
        left = right = None
        if before > 0:
            chunk = min(usable, before)
            left = _reversed(x, axis, offset, offset + chunk)
            before -= chunk
        if after > 0:
            chunk = min(usable, after)
            right = _reversed(x, axis, length - offset - chunk, length - offset)
            after -= chunk
        x = _join([p for p in (left, x, right) if p is not None], axis)
    return x


def _reflect(x, axis, before, after, n):
    return _mirror(x, axis, before, after, n, include_edge=False)


def _symmetric(x, axis, before, after, n):
    return _mirror(x, axis, before, after, n, include_edge=True)


def _wrap(x, axis, before, after, n):
    while before > 0 or after > 0:
        length = _length(x, axis)
        period = length // n * n
        left = right = None
        if before > 0:
            chunk = min(period, before)
            left = _slice_axis(x, axis, period - chunk, period)
            before -= chunk
        if after > 0:
            chunk = min(period, after)
            right = _slice_axis(x, axis, length - period, length - period + chunk)
            after -= chunk
        x = _join([p for p in (left, x, right) if p is not None], axis)
    return x
