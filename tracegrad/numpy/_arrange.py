"""Rearranging arrays, composed of the shape functions: roll, rot90, fliplr/flipud, the
*stack and *split families, append, delete, resize, block, meshgrid, ix_, broadcast_arrays,
and NumPy 2's array-API spellings (concat, permute_dims, matrix_transpose, unstack).

Counts, shifts and indices are static (Python ints or concrete arrays), as in NumPy; `roll`
also takes a traced shift (a gather). Sizes along the dims they cut must be known.
"""

from __future__ import annotations

import operator

import numpy as np

from tracegrad.core.shapes import broadcast_shapes as _broadcast_shapes
from tracegrad.core.shapes import shape_str
from tracegrad.errors import InvalidArgumentError, ShapeError
from tracegrad.numpy._core import (
    axis_arg,
    is_tensor,
    ndim_of,
    read,
    shape_of,
    static_dim,
)
from tracegrad.numpy._core import reshape as _reshape
from tracegrad.numpy._indexing import take
from tracegrad.numpy._pad import pad
from tracegrad.numpy._shape import (
    _slice_axis,
    broadcast_to,
    concatenate,
    flip,
    moveaxis,
    ravel,
    split,
    squeeze,
    swapaxes,
    transpose,
)
from tracegrad.numpy._ufuncs import mod, subtract

# NumPy 2's array-API names (the same functions there: np.concat is np.concatenate).
concat = concatenate
permute_dims = transpose


def matrix_transpose(x, /):
    """`x` with its last two dims swapped (at least 2-D)."""
    x = read(x)
    if ndim_of(x) < 2:
        raise ShapeError(f"matrix_transpose: needs at least 2 dims, got "
                         f"{shape_str(shape_of(x))}")
    return swapaxes(x, -1, -2)


def unstack(x, /, *, axis=0):
    """A tuple of the slices of `x` along `axis` (that dim removed)."""
    x = read(x)
    axis = axis_arg(axis, ndim_of(x), "unstack")
    n = static_dim(x, axis, "unstack", "unstack along a dim of static size")
    return tuple(squeeze(_slice_axis(x, axis, i, i + 1), axis) for i in range(n))


def rollaxis(a, axis, start=0):
    """`a` with dim `axis` moved before position `start` (NumPy's older `moveaxis`)."""
    a = read(a)
    n = ndim_of(a)
    axis = axis_arg(axis, n, "rollaxis")
    start = operator.index(start)
    if start < 0:
        start += n
    if not 0 <= start <= n:
        raise ShapeError(f"rollaxis: start {start} is out of bounds for {n} dims")
    if axis < start:
        start -= 1
    return a if axis == start else moveaxis(a, axis, start)


def atleast_3d(*arys):
    """Each array with at least 3 dims: `(1, 1, 1)` for a scalar, `(1, N, 1)` for 1-D,
    `(M, N, 1)` for 2-D (one array for one argument, else a tuple)."""
    out = []
    for a in arys:
        a = read(a)
        s = shape_of(a)
        out.append(_reshape(a, {0: (1, 1, 1), 1: (1,) + s + (1,), 2: s + (1,)}.get(len(s), s),
                            "atleast_3d"))
    return out[0] if len(out) == 1 else tuple(out)


def column_stack(tup):
    """1-D and 2-D arrays joined as columns of a 2-D array."""
    cols = []
    for a in tup:
        a = read(a)
        cols.append(_reshape(a, shape_of(a) + (1,), "column_stack") if ndim_of(a) < 2 else a)
    return concatenate(cols, axis=1)


def dstack(tup):
    """The arrays (made at least 3-D) joined along dim 2."""
    return concatenate([atleast_3d(a) for a in tup], axis=2)


def array_split(ary, indices_or_sections, axis=0):
    """Like `split`, but `N` sections need not divide the dim: the first `n % N` sections
    get one element more."""
    ary = read(ary)
    if not isinstance(indices_or_sections, (int, np.integer)):
        return split(ary, indices_or_sections, axis)
    sections = int(indices_or_sections)
    if sections <= 0:
        raise InvalidArgumentError("array_split: number sections must be larger than 0")
    axis = axis_arg(axis, ndim_of(ary), "array_split")
    n = static_dim(ary, axis, "array_split", "split along a dim of static size")
    each, extra = divmod(n, sections)
    sizes = [each + 1] * extra + [each] * (sections - extra)
    return split(ary, list(np.cumsum(sizes[:-1])), axis)


def _split_along(name, axis_of, min_ndim):
    def fn(ary, indices_or_sections):
        ary = read(ary)
        if ndim_of(ary) < min_ndim:
            raise ShapeError(f"{name}: only works on arrays of {min_ndim} or more dimensions")
        return split(ary, indices_or_sections, axis_of(ndim_of(ary)))

    fn.__name__ = fn.__qualname__ = name
    return fn


hsplit = _split_along("hsplit", lambda nd: 0 if nd == 1 else 1, 1)
hsplit.__doc__ = "`split` along dim 1 (dim 0 for 1-D arrays)."
vsplit = _split_along("vsplit", lambda nd: 0, 2)
vsplit.__doc__ = "`split` along dim 0 (at least 2-D)."
dsplit = _split_along("dsplit", lambda nd: 2, 3)
dsplit.__doc__ = "`split` along dim 2 (at least 3-D)."


def fliplr(m):
    """`m` reversed along dim 1 (at least 2-D)."""
    if ndim_of(read(m)) < 2:
        raise ShapeError("fliplr: input must be >= 2-d")
    return flip(m, 1)


def flipud(m):
    """`m` reversed along dim 0 (at least 1-D)."""
    if ndim_of(read(m)) < 1:
        raise ShapeError("flipud: input must be >= 1-d")
    return flip(m, 0)


def rot90(m, k=1, axes=(0, 1)):
    """`m` rotated by 90 degrees `k` times in the plane of `axes` (from the first axis
    toward the second)."""
    m = read(m)
    nd = ndim_of(m)
    if len(axes) != 2:
        raise ShapeError("rot90: len(axes) must be 2")
    a0, a1 = (axis_arg(x, nd, "rot90") for x in axes)
    if a0 == a1:
        raise ShapeError("rot90: axes must be different")
    k = operator.index(k) % 4
    if k == 0:
        return m
    if k == 2:
        return flip(flip(m, a0), a1)
    perm = list(range(nd))
    perm[a0], perm[a1] = perm[a1], perm[a0]
    if k == 1:
        return transpose(flip(m, a1), perm)
    return flip(transpose(m, perm), a1)


def roll(a, shift, axis=None):
    """`a` with its elements shifted by `shift` along `axis` (None: of the flattened array,
    reshaped back), wrapping around. `shift` and `axis` may be tuples; a traced scalar
    shift becomes a gather."""
    a = read(a)
    if axis is None:
        return _reshape(roll(ravel(a), shift, 0), shape_of(a), "roll")
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    shifts = tuple(shift) if isinstance(shift, (tuple, list)) else (shift,)
    if len(shifts) != len(axes) and 1 not in (len(shifts), len(axes)):
        raise ShapeError(f"roll: shift {shifts} and axis {axes} cannot be broadcast together")
    count = max(len(shifts), len(axes))  # as NumPy: broadcast, then the shifts of an axis add
    static, traced = {}, []
    for s, ax in zip(shifts * (count // len(shifts)), axes * (count // len(axes)), strict=True):
        ax = axis_arg(ax, ndim_of(a), "roll")
        if is_tensor(s):
            traced.append((s, ax))
        else:
            static[ax] = static.get(ax, 0) + operator.index(s)
    for ax, s in static.items():
        n = static_dim(a, ax, "roll", "roll along a dim of static size")
        if n and s % n:
            s %= n
            a = concatenate([_slice_axis(a, ax, n - s, n), _slice_axis(a, ax, 0, n - s)], ax)
    for s, ax in traced:
        n = static_dim(a, ax, "roll", "roll along a dim of static size")
        if n:
            a = take(a, mod(subtract(np.arange(n), s), n), axis=ax)
    return a


def append(arr, values, axis=None):
    """`values` appended to `arr` along `axis` (None: both flattened)."""
    arr = read(arr)
    if axis is None:
        return concatenate([ravel(arr), ravel(values)], 0)
    return concatenate([arr, values], axis)


def delete(arr, obj, axis=None):
    """`arr` without the entries `obj` (static ints, a slice or a bool mask) along `axis`
    (None: of the flattened array)."""
    arr = read(arr)
    if axis is None:
        arr, axis = ravel(arr), 0
    axis = axis_arg(axis, ndim_of(arr), "delete")
    n = static_dim(arr, axis, "delete", "delete along a dim of static size")
    if is_tensor(obj):
        raise ShapeError("delete: a traced index makes the result size data-dependent; "
                         "pass Python ints or a NumPy array")
    keep = np.delete(np.arange(n), obj)
    if keep.size == n:
        return arr
    return take(arr, keep, axis=axis)


def resize(a, new_shape):
    """An array of `new_shape` filled with `a`'s elements (row-major), repeated as needed."""
    a = ravel(read(a))
    shape = (operator.index(new_shape),) if isinstance(new_shape, (int, np.integer)) else \
        tuple(operator.index(d) for d in new_shape)
    if any(d < 0 for d in shape):
        raise ShapeError("resize: all elements of `new_shape` must be non-negative")
    size = int(np.prod(shape, dtype=np.int64))
    n = static_dim(a, 0, "resize", "resize needs a static size")
    if size == 0:
        return _reshape(_slice_axis(a, 0, 0, 0), shape, "resize")
    if n == 0:  # NumPy: zeros
        return broadcast_to(pad(a, (0, 1)), shape)
    if size != n:
        a = take(a, np.arange(size) % n)
    return _reshape(a, shape, "resize")


def diagflat(v, k=0):
    """The 2-D array with the flattened `v` on diagonal `k`."""
    from tracegrad.numpy._matrix import diag

    return diag(ravel(v), k)


def broadcast_shapes(*args) -> tuple:
    """The shape the given shapes broadcast to (NumPy's rules)."""
    shapes = [(operator.index(s),) if isinstance(s, (int, np.integer)) else tuple(s)
              for s in args]
    return _broadcast_shapes(*shapes, op="broadcast_shapes") if shapes else ()


def broadcast_arrays(*args):
    """The arrays broadcast to their common shape (a tuple)."""
    arrays = [read(a) for a in args]
    shape = broadcast_shapes(*(shape_of(a) for a in arrays))
    return tuple(broadcast_to(a, shape) for a in arrays)


def meshgrid(*xi, copy=True, sparse=False, indexing="xy"):
    """Coordinate arrays from 1-D coordinate vectors: `indexing="xy"` (Cartesian: the first
    two outputs' dims swapped) or `"ij"` (matrix); `sparse=True` leaves them unbroadcast."""
    if indexing not in ("xy", "ij"):
        raise InvalidArgumentError("meshgrid: Valid values for `indexing` are 'xy' and 'ij'.")
    nd = len(xi)
    out = []
    for i, x in enumerate(xi):
        shape = [1] * nd
        shape[i] = -1
        if indexing == "xy" and nd > 1 and i < 2:
            shape[i], shape[1 - i] = 1, -1
        out.append(_as_shape(ravel(read(x)), shape))
    if not sparse and out:
        out = list(broadcast_arrays(*out))
    return tuple(out)


def _as_shape(x, shape):
    n = shape_of(x)[0]
    return _reshape(x, tuple(n if d == -1 else d for d in shape), "meshgrid")


def ix_(*args):
    """An open mesh from 1-D integer sequences: arg `i` reshaped to `(1, ..., n, ..., 1)` with
    `n` at position `i`, for indexing the cross product."""
    out = []
    nd = len(args)
    for i, a in enumerate(args):
        a = read(a)
        if not is_tensor(a):
            a = np.asarray(a)
            if a.dtype == np.bool_:
                (a,) = np.nonzero(a)
            elif a.size == 0:
                a = a.astype(np.int64)
        if ndim_of(a) != 1:
            raise ShapeError("ix_: Cross index must be 1 dimensional")
        shape = [1] * nd
        shape[i] = -1
        out.append(_as_shape(a, shape))
    return tuple(out)


def block(arrays):
    """An array assembled from nested lists of blocks: the innermost lists are joined along
    the last dim, the next ones along the one before, ... (blocks are first made of equal
    rank by leading size-1 dims)."""
    depth, leaves = _block_depth(arrays)
    if depth == 0:
        return read(arrays)
    nd = max([depth] + [ndim_of(x) for x in leaves])

    def assemble(x, level):
        if level == depth:
            x = read(x)
            return _reshape(x, (1,) * (nd - ndim_of(x)) + shape_of(x), "block")
        return concatenate([assemble(e, level + 1) for e in x], axis=-(depth - level))

    return assemble(arrays, 0)


def _block_depth(x):
    if isinstance(x, tuple):
        raise InvalidArgumentError("block: arrays is a tuple; only lists can be used to "
                                   "arrange blocks")
    if not isinstance(x, list):
        return 0, [read(x)]
    if not x:
        raise InvalidArgumentError("block: lists cannot be empty")
    found = [_block_depth(e) for e in x]
    depths = {d for d, _ in found}
    if len(depths) != 1:
        raise ShapeError("block: list depths are mismatched")
    return depths.pop() + 1, [leaf for _, leaves in found for leaf in leaves]


