"""Shape manipulation with NumPy names: reshape, transpose, concatenate, split, tile ...

No-ops are skipped (a transpose of rank <= 1, a reshape to the same shape). Functions that
need a static size on an unknown (None) dim raise ShapeError with a hint.
"""

from __future__ import annotations

import itertools
import operator

import numpy as np

from tracegrad import ops
from tracegrad.core.shapes import broadcast_shapes, shape_str
from tracegrad.errors import ArgumentTypeError, InvalidArgumentError, ShapeError
from tracegrad.numpy._core import (
    axes_arg,
    axis_arg,
    broadcast_to_shape,
    expand_dims_at,
    is_tensor,
    ndim_of,
    promote,
    read,
    shape_of,
    static_dim,
)
from tracegrad.numpy._core import reshape as _reshape


def _ints(shape, op):
    if isinstance(shape, (int, np.integer)) or is_tensor(shape) and not shape_of(shape):
        return (operator.index(shape),)
    return tuple(operator.index(d) for d in shape)


def reshape(a, shape=None, order="C", *, newshape=None):
    """`a`'s elements (row-major) in `shape`; one dim may be -1. `order=None` is 'C', as
    in NumPy.

    >>> tnp.reshape(x, (2, -1))
    """
    if order not in ("C", None):
        raise InvalidArgumentError(f"reshape: only order='C' is supported, got {order!r}")
    shape = newshape if shape is None else shape
    a = read(a)
    sizes = _ints(shape, "reshape")
    if sizes == shape_of(a):
        return a
    return ops.reshape(a, new_sizes=sizes)


def ravel(a, order="C"):
    """`a` flattened to 1-D (row-major)."""
    return reshape(a, (-1,), order)


def transpose(a, axes=None):
    """`a` with its dims permuted (reversed by default)."""
    a = read(a)
    nd = ndim_of(a)
    if axes is None:
        perm = tuple(reversed(range(nd)))
    else:
        perm = tuple(axis_arg(x, nd, "transpose") for x in axes)
        if sorted(perm) != list(range(nd)):
            raise ShapeError(f"transpose: axes {tuple(axes)} do not match an array of "
                             f"rank {nd}")
    if perm == tuple(range(nd)):
        return a
    return ops.transpose(a, permutation=perm)


def swapaxes(a, axis1, axis2):
    """`a` with dims `axis1` and `axis2` exchanged."""
    a = read(a)
    nd = ndim_of(a)
    perm = list(range(nd))
    i, j = axis_arg(axis1, nd, "swapaxes"), axis_arg(axis2, nd, "swapaxes")
    perm[i], perm[j] = perm[j], perm[i]
    return transpose(a, perm)


def moveaxis(a, source, destination):
    """`a` with dims `source` moved to positions `destination` (ints or sequences)."""
    a = read(a)
    nd = ndim_of(a)
    src = [source] if isinstance(source, int) else list(source)
    dst = [destination] if isinstance(destination, int) else list(destination)
    if len(src) != len(dst):
        raise ShapeError("moveaxis: source and destination must have the same number "
                         "of axes")
    src = [axis_arg(s, nd, "moveaxis") for s in src]
    dst = [axis_arg(d, nd, "moveaxis") for d in dst]
    order = [i for i in range(nd) if i not in src]
    for d, s in sorted(zip(dst, src, strict=True)):
        order.insert(d, s)
    return transpose(a, order)


def expand_dims(a, axis):
    """`a` with size-1 dims inserted at `axis` (int or tuple, positions in the result)."""
    a = read(a)
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    nd = ndim_of(a) + len(axes)
    return expand_dims_at(a, axes_arg(axes, nd, "expand_dims"))


def squeeze(a, axis=None):
    """`a` without its size-1 dims (only those in `axis` if given; they must have size 1)."""
    a = read(a)
    shape = shape_of(a)
    if axis is None:
        drop = [i for i, d in enumerate(shape) if d == 1]
    else:
        drop = axes_arg(axis, len(shape), "squeeze")
        for i in drop:
            if shape[i] != 1:
                raise ShapeError(
                    f"squeeze: cannot squeeze dim {i} of {shape_str(shape)}: its size is not 1"
                )
    return _reshape(a, [d for i, d in enumerate(shape) if i not in drop], "squeeze")


def broadcast_to(array, shape):
    """`array` broadcast to `shape` by NumPy's rules."""
    array = read(array)
    shape = _ints(shape, "broadcast_to")
    src = shape_of(array)
    if len(src) > len(shape) or broadcast_shapes(src, shape, op="broadcast_to") != shape:
        raise ShapeError(
            f"broadcast_to: cannot broadcast {shape_str(src)} to {shape_str(shape)}"
        )
    return broadcast_to_shape(array, shape)


def atleast_1d(a):
    a = read(a)
    return _reshape(a, (1,), "atleast_1d") if ndim_of(a) == 0 else a


def atleast_2d(a):
    a = read(a)
    nd = ndim_of(a)
    return a if nd >= 2 else _reshape(a, (1,) * (2 - nd) + shape_of(a), "atleast_2d")


def concatenate(arrays, axis=0, dtype=None):
    """The arrays joined along the existing dim `axis` (None: flattened first); dtypes
    promote as NumPy's `result_type`."""
    if not isinstance(arrays, (list, tuple)):
        raise ArgumentTypeError("concatenate: expects a sequence of arrays")
    if not arrays:
        raise InvalidArgumentError("concatenate: need at least one array to concatenate")
    arrays, _ = promote(*arrays)
    if dtype is not None:
        from tracegrad.numpy._creation import astype

        arrays = [astype(a, dtype) for a in arrays]
    if axis is None:
        arrays = [ravel(a) for a in arrays]
        axis = 0
    nd = ndim_of(arrays[0])
    if nd == 0:
        raise ShapeError("concatenate: zero-dimensional arrays cannot be concatenated")
    axis = axis_arg(axis, nd, "concatenate")
    if len(arrays) == 1:
        return arrays[0]
    return ops.concatenate(*arrays, dimension=axis)


def stack(arrays, axis=0):
    """The arrays (all of one shape) joined along a new dim `axis`."""
    if not len(arrays):
        raise InvalidArgumentError("stack: need at least one array to stack")
    arrays, _ = promote(*arrays)
    shapes = {shape_of(a) for a in arrays}
    if len(shapes) > 1:
        raise ShapeError(f"stack: all input arrays must have the same shape, got "
                         f"{', '.join(shape_str(s) for s in shapes)}")
    nd = ndim_of(arrays[0]) + 1
    axis = axis_arg(axis, nd, "stack")
    expanded = [expand_dims_at(a, (axis,)) for a in arrays]
    return expanded[0] if len(expanded) == 1 else ops.concatenate(*expanded, dimension=axis)


def hstack(tup):
    """The arrays joined along dim 1 (dim 0 for 1-D arrays)."""
    arrays = [atleast_1d(a) for a in tup]
    if not arrays:
        raise InvalidArgumentError("hstack: need at least one array to concatenate")
    return concatenate(arrays, axis=0 if ndim_of(arrays[0]) == 1 else 1)


def vstack(tup):
    """The arrays (1-D ones as rows) joined along dim 0."""
    return concatenate([atleast_2d(a) for a in tup], axis=0)


def split(ary, indices_or_sections, axis=0):
    """A list of sub-arrays of `ary` along `axis`: `N` equal parts, or cut at the given
    indices."""
    ary = read(ary)
    nd = ndim_of(ary)
    axis = axis_arg(axis, nd, "split")
    n = static_dim(ary, axis, "split", "split along a dim of static size")
    if isinstance(indices_or_sections, (int, np.integer)):
        sections = int(indices_or_sections)
        if sections <= 0 or n % sections:
            raise ShapeError(f"split: array split does not result in an equal division "
                             f"({n} into {sections})")
        cuts = [n // sections * i for i in range(1, sections)]
    else:
        cuts = [operator.index(i) for i in indices_or_sections]
    bounds = [0] + [min(max(c if c >= 0 else c + n, 0), n) for c in cuts] + [n]
    return [_slice_axis(ary, axis, lo, max(lo, hi)) for lo, hi in itertools.pairwise(bounds)]


def _slice_axis(a, axis, lo, hi, stride=1):
    shape = shape_of(a)
    if (lo, hi, stride) == (0, shape[axis], 1):
        return a
    start = [0 if d is not None else None for d in shape]
    limit = list(shape)
    strides = [1] * len(shape)
    start[axis], limit[axis], strides[axis] = lo, hi, stride
    return ops.slice(a, start_indices=tuple(start), limit_indices=tuple(limit),
                     strides=tuple(strides))


def tile(A, reps):
    """`A` repeated `reps` times along each dim (broadcast + reshape)."""
    A = read(A)
    reps = _ints(reps, "tile")
    nd = max(ndim_of(A), len(reps))
    A = _reshape(A, (1,) * (nd - ndim_of(A)) + shape_of(A), "tile")
    reps = (1,) * (nd - len(reps)) + reps
    shape = tuple(static_dim(A, i, "tile", "tile needs static sizes") for i in range(nd))
    if all(r == 1 for r in reps):
        return A
    inter = tuple(x for r, d in zip(reps, shape, strict=True) for x in (1, d))
    full = tuple(x for r, d in zip(reps, shape, strict=True) for x in (r, d))
    out = broadcast_to_shape(ops.reshape(A, new_sizes=inter), full)
    return ops.reshape(out, new_sizes=tuple(r * d for r, d in zip(reps, shape, strict=True)))


def repeat(a, repeats, axis=None):
    """Each element of `a` repeated `repeats` times along `axis` (None: flattened first);
    `repeats` is an int or a static sequence with one count per element."""
    a = read(a)
    if axis is None:
        a, axis = ravel(a), 0
    axis = axis_arg(axis, ndim_of(a), "repeat")
    if is_tensor(repeats):
        repeats = _static_repeats(repeats)
    counts = np.asarray(repeats)
    shape = shape_of(a)
    if counts.ndim == 0 or counts.size == 1:
        r = int(counts.reshape(()))
        if r < 0:
            raise ShapeError("repeat: negative repeat count")
        if r == 1:
            return a
        n = static_dim(a, axis, "repeat", "repeat along a dim of static size")
        inter = shape[: axis + 1] + (1,) + shape[axis + 1:]
        full = shape[: axis + 1] + (r,) + shape[axis + 1:]
        out = broadcast_to_shape(_reshape(a, inter, "repeat"), full, (a,))
        return _reshape(out, shape[:axis] + (n * r,) + shape[axis + 1:], "repeat")
    n = static_dim(a, axis, "repeat", "repeat along a dim of static size")
    if counts.shape != (n,):
        raise ShapeError(f"repeat: {counts.size} repeat counts for an axis of size {n}")
    index = np.repeat(np.arange(n, dtype=np.int64), counts)
    return ops.gather(a, _constant(index), axis=axis)


def _static_repeats(repeats):
    from tracegrad.core.ir import EagerTensor

    value = read(repeats)
    if type(value) is EagerTensor:
        return value._value
    raise ShapeError("repeat: counts given as a traced tensor make the result shape "
                     "data-dependent; pass them as a Python int or a NumPy array")


def _constant(value: np.ndarray):
    from tracegrad.core.state import state

    return state.graph.constant(value) if state.graph is not None else value


def flip(m, axis=None):
    """`m` with the order of elements reversed along `axis` (None: every dim)."""
    m = read(m)
    axes = axes_arg(axis, ndim_of(m), "flip")
    return ops.rev(m, dimensions=axes) if axes else m


def shape(a) -> tuple:
    """The shape of `a` (unknown dims are None while tracing)."""
    return shape_of(read(a))


def ndim(a) -> int:
    """The number of dims of `a`."""
    return ndim_of(read(a))


def size(a, axis=None):
    """The number of elements of `a` (along `axis`); None when unknown while tracing."""
    s = shape_of(read(a))
    if axis is not None:
        return s[axis_arg(axis, len(s), "size")]
    return None if None in s else int(np.prod(s, dtype=np.int64))


