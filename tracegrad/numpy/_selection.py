"""Partial and multi-key sorts, flat and multi-dim index conversion, and NumPy's in-place
updates as functional ones: partition, argpartition, lexsort, ravel_multi_index,
unravel_index, put, put_along_axis, place, fill_diagonal.

`partition`/`argpartition` return a full (stable) sort, which has the partition property
NumPy promises (its order inside the partitions is unspecified). `lexsort` is a chain of
stable argsorts, least significant key first. Tensors are immutable, so `put`,
`put_along_axis`, `place` and `fill_diagonal` on tensors take `inplace=False` and return
the updated array, as in jax.numpy (built on `tnp.at(x)[idx].set(v)`); on plain NumPy
arrays with nothing recording they change the array in place, as NumPy does.
"""

from __future__ import annotations

import operator

import numpy as np

from tracegrad.core import dtypes
from tracegrad.core.ir import EagerTensor, GraphTensor
from tracegrad.errors import DTypeError, InvalidArgumentError, ShapeError, UnsupportedOpError
from tracegrad.numpy._core import (
    axis_arg,
    dtype_of,
    is_tensor,
    ndim_of,
    read,
    result,
    shape_of,
    static_dim,
    static_shape,
    tracing,
)
from tracegrad.numpy._creation import astype
from tracegrad.numpy._indexing import _index_value, at, take, take_along_axis
from tracegrad.numpy._reductions import argsort, cumsum, sort
from tracegrad.numpy._shape import ravel, reshape
from tracegrad.numpy._ufuncs import add, clip, floor_divide, mod, multiply, subtract, where

# -- partial and multi-key sorts ---------------------------------------------------------------


def _kth(kth, n, name):
    ks = np.asarray(kth.numpy() if isinstance(kth, EagerTensor) else kth)
    if isinstance(kth, GraphTensor) or ks.dtype.kind not in "iu":
        raise InvalidArgumentError(f"{name}: kth must be static integers, got {kth!r}")
    for k in ks.ravel():
        if not -n <= k < n:
            raise InvalidArgumentError(f"{name}: kth(={int(k)}) out of bounds ({n})")


def _partition_args(a, kth, axis, kind, order, name):
    a = read(a)
    if axis is None:
        a, axis = ravel(a), 0
    axis = axis_arg(axis, ndim_of(a), name)
    if kind != "introselect":
        raise InvalidArgumentError(f"{name}: kind must be 'introselect', got {kind!r}")
    if order is not None:
        raise InvalidArgumentError(f"{name}: order= needs structured arrays, which tracegrad "
                                   "does not have")
    _kth(kth, static_dim(a, axis, name), name)
    return a, axis


def partition(a, kth, axis=-1, kind="introselect", order=None):
    """`a` with the elements at the `kth` positions (an int or a sequence) along `axis`
    where a sort would put them, smaller ones before, larger ones after (None: flattened).
    The result is the full sort, a valid partition (NumPy leaves the order inside the
    partitions unspecified)."""
    a, axis = _partition_args(a, kth, axis, kind, order, "partition")
    return sort(a, axis)


def argpartition(a, kth, axis=-1, kind="introselect", order=None):
    """Indices (int64) that partition `a` along `axis` around `kth` (see `partition`): the
    stable argsort, a valid argpartition."""
    a, axis = _partition_args(a, kth, axis, kind, order, "argpartition")
    return argsort(a, axis)


def lexsort(keys, axis=-1):
    """Indices (int64) that sort by several keys along `axis`: by the last key, ties broken
    by the one before, and so on (a stable sort: full ties keep their order). `keys` is a
    sequence of arrays of one shape, or an array whose first dim runs over the keys."""
    keys = read(keys) if is_tensor(keys) or isinstance(keys, np.ndarray) else keys
    if is_tensor(keys) or isinstance(keys, np.ndarray):
        keys = [keys[i] for i in range(static_dim(keys, 0, "lexsort"))]
    keys = [read(k) for k in keys]
    if not keys:
        raise InvalidArgumentError("lexsort: need a sequence of keys with len > 0")
    if len({shape_of(k) for k in keys}) > 1:
        raise ShapeError("lexsort: all keys need to be the same shape, got "
                         f"{[shape_of(k) for k in keys]}")
    if axis is None:
        keys, axis = [ravel(k) for k in keys], 0
    if ndim_of(keys[0]) == 0:
        raise ShapeError("lexsort: the keys must be at least 1-D")
    axis = axis_arg(axis, ndim_of(keys[0]), "lexsort")
    order = argsort(keys[0], axis)
    for k in keys[1:]:
        order = take_along_axis(order, argsort(take_along_axis(k, order, axis), axis), axis)
    return order


# -- index conversion -------------------------------------------------------------------------

_MODES = ("raise", "wrap", "clip")


def _dims_arg(dims, name):
    dims = (dims,) if isinstance(dims, (int, np.integer)) else tuple(dims)
    try:
        dims = tuple(operator.index(d) for d in dims)
    except TypeError:
        raise InvalidArgumentError(f"{name}: dims must be Python ints, got {dims!r}") from None
    if any(d < 0 for d in dims):
        raise InvalidArgumentError(f"{name}: dims must be non-negative, got {dims}")
    return dims


def _strides(dims, order, name):
    if order not in ("C", "F"):
        raise InvalidArgumentError(f"{name}: order must be 'C' or 'F', got {order!r}")
    seq = dims if order == "C" else dims[::-1]
    strides = [int(np.prod(seq[k + 1:], dtype=np.int64)) for k in range(len(seq))]
    return strides if order == "C" else strides[::-1]


def _int_index(x, name):
    x = read(x)
    if not dtypes.is_int(dtype_of(x)[0]):
        raise DTypeError(f"{name}: only int indices permitted, got {dtype_of(x)[0].name}")
    return astype(x, dtypes.int64)


def _concrete(x):
    """The values of `x`, or None while they are traced."""
    if isinstance(x, GraphTensor):
        return None
    return x.numpy() if isinstance(x, EagerTensor) else np.asarray(x)


def ravel_multi_index(multi_index, dims, mode="raise", order="C"):
    """Flat indices (int64) into an array of shape `dims` from one integer index array per
    dim (broadcast together). `mode` ('raise', 'wrap', 'clip', or one per dim) handles
    indices out of bounds; 'raise' needs concrete indices (inside a trace use 'wrap' or
    'clip', as in jax.numpy)."""
    name = "ravel_multi_index"
    dims = _dims_arg(dims, name)
    if is_tensor(multi_index) or isinstance(multi_index, np.ndarray):
        multi_index = [multi_index[i] for i in range(static_dim(read(multi_index), 0, name))]
    index = [_int_index(i, name) for i in multi_index]
    if len(index) != len(dims):
        raise InvalidArgumentError(f"{name}: parameter multi_index must be a sequence of "
                                   f"length {len(dims)}, got {len(index)}")
    modes = (mode,) * len(dims) if isinstance(mode, str) else tuple(mode)
    if len(modes) != len(dims) or any(m not in _MODES for m in modes):
        raise InvalidArgumentError(f"{name}: mode must be one of {_MODES} or one per dim, "
                                   f"got {mode!r}")
    flat = None
    for i, d, m, s in zip(index, dims, modes, _strides(dims, order, name), strict=True):
        if m == "wrap":
            i = mod(i, np.int64(d)) if d else i
        elif m == "clip":
            i = clip(i, 0, max(d - 1, 0))
        else:
            value = _concrete(i)
            if value is None:
                raise InvalidArgumentError(
                    f"{name}: mode='raise' cannot check the values of a traced index; use "
                    "mode='wrap' or mode='clip' (as in jax.numpy)")
            if np.any((value < 0) | (value >= d)):
                raise InvalidArgumentError(f"{name}: invalid entry in coordinates array")
        term = multiply(i, np.int64(s))
        flat = term if flat is None else add(flat, term)
    return result(flat)


def unravel_index(indices, shape, order="C"):
    """One int64 index array per dim of `shape` for the flat `indices` (the inverse of
    `ravel_multi_index`). Concrete indices out of bounds raise, as in NumPy; traced ones are
    clipped into range, as in jax.numpy."""
    name = "unravel_index"
    dims = _dims_arg(shape, name)
    i = _int_index(indices, name)
    size = int(np.prod(dims, dtype=np.int64))
    value = _concrete(i)
    if value is not None:
        bad = value[(value < 0) | (value >= size)]
        if bad.size:
            raise InvalidArgumentError(f"{name}: index {int(bad.ravel()[0])} is out of bounds "
                                       f"for array with size {size}")
    else:
        i = clip(i, 0, max(size - 1, 0))
    return tuple(result(mod(floor_divide(i, np.int64(s)), np.int64(d)) if d else i)
                 for d, s in zip(dims, _strides(dims, order, name), strict=True))


# -- in-place updates, functionally --------------------------------------------------------------


def _in_place(name, inplace, *args) -> bool:
    """Whether to run NumPy's in-place function: `inplace` with only NumPy arguments and
    nothing traced; an error for tensors (immutable) unless `inplace=False`."""
    if not inplace:
        return False
    if tracing() or any(is_tensor(a) for a in args):
        raise UnsupportedOpError(
            f"{name}: tensors are immutable, so it cannot update its argument in place; pass "
            f"inplace=False to get the updated array (tnp.{name}(..., inplace=False), as in "
            "jax.numpy)")
    return True


def _cycled(values, n, dtype, name):
    """`values` flattened, repeated or cut to `n` elements, as `dtype`."""
    values = ravel(astype(read(values), dtype))
    m = static_dim(values, 0, name)
    if m == 0:
        if n:
            raise InvalidArgumentError(f"{name}: cannot insert from an empty array")
        return values
    return values if m == n else take(values, np.arange(n) % m)


def put(a, ind, v, mode="raise", *, inplace=True):
    """`a` with the flat positions `ind` set to `v` (repeated as needed; the last write wins
    for repeated positions). `mode` 'wrap' or 'clip' maps positions out of range. Tensors:
    pass `inplace=False` to get the new array; NumPy arrays are updated in place."""
    if _in_place("put", inplace, a, ind, v):
        return np.put(a, ind, v, mode)
    a = read(a)
    shape = static_shape(a, "put")
    n = int(np.prod(shape, dtype=np.int64))
    ind = ravel(_int_index(_index_value(ind), "put"))
    if mode == "wrap":
        ind = mod(ind, np.int64(n))
    elif mode == "clip":
        ind = clip(ind, 0, n - 1)
    elif mode != "raise":
        raise InvalidArgumentError(f"put: mode must be one of {_MODES}, got {mode!r}")
    k = static_dim(ind, 0, "put")
    if k == 0:
        return a
    values = _cycled(v, k, dtype_of(a)[0], "put")
    return reshape(at(ravel(a))[ind].set(values), shape)


def put_along_axis(arr, indices, values, axis, *, inplace=True):
    """`arr` with `values` written at `indices` along `axis` (matching the other dims, as
    `take_along_axis` reads them; None: the flattened array). Tensors: pass
    `inplace=False` to get the new array; NumPy arrays are updated in place."""
    if _in_place("put_along_axis", inplace, arr, indices, values):
        return np.put_along_axis(arr, indices, values, axis)
    arr = read(arr)
    shape = shape_of(arr)
    idx = _int_index(_index_value(indices), "put_along_axis")
    flat = axis is None
    target = ravel(arr) if flat else arr
    axis = 0 if flat else axis
    nd = ndim_of(target)
    if ndim_of(idx) != nd:
        raise ShapeError("put_along_axis: `indices` and `arr` must have the same number of "
                         f"dims, got {ndim_of(idx)} and {nd}")
    axis = axis_arg(axis, nd, "put_along_axis")
    key = tuple(idx if d == axis else
                np.arange(static_dim(target, d, "put_along_axis")).reshape(
                    [-1 if i == d else 1 for i in range(nd)]) for d in range(nd))
    out = at(target)[key].set(values)
    return reshape(out, shape) if flat else out


def place(arr, mask, vals, *, inplace=True):
    """`arr` with its elements where `mask` is true set to `vals` in turn (repeated as
    needed). Tensors: pass `inplace=False` to get the new array; NumPy arrays are updated
    in place."""
    if _in_place("place", inplace, arr, mask, vals):
        return np.place(arr, mask, vals)
    arr, mask = read(arr), ravel(astype(read(mask), dtypes.bool_))
    shape = static_shape(arr, "place")
    n = int(np.prod(shape, dtype=np.int64))
    if static_dim(mask, 0, "place") != n:
        raise ShapeError(f"place: mask and data must be the same size, got "
                         f"{static_dim(mask, 0, 'place')} and {n}")
    vals = ravel(astype(read(vals), dtype_of(arr)[0]))
    m = static_dim(vals, 0, "place")
    if m == 0:
        value = _concrete(mask)
        if value is not None and value.any():
            raise InvalidArgumentError("place: cannot insert from an empty array")
        return arr
    rank = subtract(cumsum(astype(mask, dtypes.int64)), 1)  # which value each true takes
    return reshape(where(mask, take(vals, mod(rank, np.int64(m))), ravel(arr)), shape)


def fill_diagonal(a, val, wrap=False, *, inplace=True):
    """`a` (at least 2-D; all dims equal beyond 2-D) with its main diagonal set to `val`
    (repeated as needed). A tall 2-D matrix restarts the diagonal every `ncols + 1` rows
    with `wrap=True`. Tensors: pass `inplace=False` to get the new array; NumPy arrays are
    updated in place."""
    if _in_place("fill_diagonal", inplace, a, val):
        return np.fill_diagonal(a, val, wrap)
    a = read(a)
    shape = static_shape(a, "fill_diagonal")
    if len(shape) < 2:
        raise ShapeError("fill_diagonal: array must be at least 2-d")
    if len(shape) == 2:
        step = shape[1] + 1
        end = None if wrap else shape[1] * shape[1]
    else:
        if len(set(shape)) != 1:
            raise ShapeError("fill_diagonal: all dimensions of input must be of equal length")
        step, end = 1 + int(np.cumprod(shape[:-1]).sum()), None
    positions = np.arange(int(np.prod(shape)))[:end:step]
    values = _cycled(val, len(positions), dtype_of(a)[0], "fill_diagonal")
    return reshape(at(ravel(a))[positions].set(values), shape)
