"""Bits of uint8 arrays: packbits and unpackbits, composed from comparisons, shifts, masks
and sums (the lengths along the packed axis must be known while tracing)."""

from __future__ import annotations

import numpy as np

from tracegrad.core import dtypes
from tracegrad.errors import ArgumentTypeError, InvalidArgumentError
from tracegrad.numpy._core import axis_arg, cast, dtype_of, read, shape_of, static_dim
from tracegrad.numpy._indexing import take
from tracegrad.numpy._pad import pad
from tracegrad.numpy._reductions import sum as _sum
from tracegrad.numpy._shape import expand_dims, ravel, reshape
from tracegrad.numpy._ufuncs import bitwise_and, multiply, not_equal, right_shift

_BIG = np.array([128, 64, 32, 16, 8, 4, 2, 1], np.uint8)


def _weights(bitorder, op):
    """The value of each bit of a byte, first bit first."""
    if bitorder not in ("big", "little"):
        raise InvalidArgumentError(f"{op}: bitorder must be 'big' or 'little', not "
                                   f"{bitorder!r}")
    return _BIG if bitorder == "big" else _BIG[::-1].copy()


def _along(values, axis, ndim):
    """`values` (1-D) shaped to broadcast along dim `axis` of a rank-`ndim` array."""
    return values.reshape((-1,) + (1,) * (ndim - 1 - axis))


def _widths(axis, ndim, before, after):
    return [(before, after) if d == axis else (0, 0) for d in range(ndim)]


def packbits(a, axis=None, bitorder="big"):
    """The elements of an integer or bool array as bits (nonzero: 1) packed into uint8,
    eight to a byte along `axis` (None: of the flattened array), the last byte padded with
    zeros; `bitorder` "big" puts the first element in the high bit.

    >>> tnp.packbits(np.array([1, 0, 1, 1, 0, 0, 0, 0, 1]))  # array([176, 128], uint8)
    """
    a = read(a)
    if not (dtypes.is_int(dtype_of(a)[0]) or dtypes.is_bool(dtype_of(a)[0])):
        raise ArgumentTypeError(f"packbits: expected an integer or bool array, not "
                                f"{dtype_of(a)[0].name}")
    weights = _weights(bitorder, "packbits")
    if axis is None:
        a, axis = ravel(a), 0
    axis = axis_arg(axis, len(shape_of(a)), "packbits")
    n = static_dim(a, axis, "packbits")
    bits = cast(not_equal(a, 0), dtypes.uint8)
    if n % 8:
        bits = pad(bits, _widths(axis, len(shape_of(bits)), 0, -n % 8))
    shape = shape_of(bits)
    grouped = reshape(bits, shape[:axis] + (shape[axis] // 8, 8) + shape[axis + 1:])
    weighted = multiply(grouped, _along(weights, axis + 1, len(shape) + 1))
    return _sum(weighted, axis=axis + 1, dtype=dtypes.uint8)


def unpackbits(a, axis=None, count=None, bitorder="big"):
    """The bits of a uint8 array, eight elements (0 or 1, uint8) for each byte along `axis`
    (None: of the flattened array); `count` keeps the first `count` of them (zeros added
    past the end; negative: all but the last `-count`).

    >>> tnp.unpackbits(np.array([176], np.uint8), count=4)  # array([1, 0, 1, 1], uint8)
    """
    a = read(a)
    if dtype_of(a)[0] != dtypes.uint8:
        raise ArgumentTypeError(f"unpackbits: expected a uint8 array, not "
                                f"{dtype_of(a)[0].name}")
    shifts = np.log2(_weights(bitorder, "unpackbits")).astype(np.uint8)
    if axis is None:
        a, axis = ravel(a), 0
    axis = axis_arg(axis, len(shape_of(a)), "unpackbits")
    n = 8 * static_dim(a, axis, "unpackbits")
    shape = shape_of(a)
    spread = right_shift(expand_dims(a, axis + 1), _along(shifts, axis + 1, len(shape) + 1))
    bits = reshape(bitwise_and(spread, np.uint8(1)), shape[:axis] + (n,) + shape[axis + 1:])
    if count is None:
        return bits
    keep = int(count) if count >= 0 else max(n + int(count), 0)
    if keep > n:
        return pad(bits, _widths(axis, len(shape), 0, keep - n))
    return take(bits, np.arange(keep), axis=axis) if keep < n else bits
