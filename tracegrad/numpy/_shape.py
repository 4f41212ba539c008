"""Shape manipulation with NumPy names: reshape, transpose, stack ..."""

from __future__ import annotations

from tracegrad import ops
from tracegrad.core.shapes import normalize_axis
from tracegrad.numpy._core import promote, read, shape_of


def reshape(a, shape):
    """`a` with its elements in `shape` (row-major; one dim may be -1)."""
    a = read(a)
    if isinstance(shape, int):
        shape = (shape,)
    return ops.reshape(a, new_sizes=tuple(int(d) for d in shape))


def transpose(a, axes=None):
    """`a` with its dims permuted (reversed by default)."""
    a = read(a)
    nd = len(shape_of(a))
    perm = tuple(reversed(range(nd))) if axes is None else tuple(
        normalize_axis(x, nd, "transpose") for x in axes)
    return ops.transpose(a, permutation=perm)


def stack(arrays, axis=0):
    """The arrays (same shape) joined along a new dim `axis`."""
    arrays, _ = promote(*arrays)
    nd = len(shape_of(arrays[0])) + 1
    axis = normalize_axis(axis, nd, "stack")
    expanded = []
    for a in arrays:
        s = list(shape_of(a))
        s.insert(axis, 1)
        expanded.append(ops.reshape(a, new_sizes=tuple(-1 if d is None else d for d in s)))
    return ops.concatenate(*expanded, dimension=axis)
