"""Functions whose output size depends on the data: nonzero, argwhere, flatnonzero,
one-argument where, extract, compress (unique and the set operations are in `_sets.py`).

On concrete data (NumPy arrays, eager tensors: nothing traced) they return NumPy's exact
result (a tensor for tensor input; `extract`/`compress` values gather from the input, so
they keep its gradient). Inside a trace the size must be given statically, as in
JAX: `size=` pads the result with `fill_value` or truncates it. The padded form is built
from existing ops: a stable `argsort` of the mask puts the selected positions first, in
order, and a comparison with the count of selected elements marks the padding.
"""

from __future__ import annotations

import operator

import numpy as np

from tracegrad.core.ir import EagerTensor, GraphTensor
from tracegrad.errors import InvalidArgumentError
from tracegrad.numpy._core import axis_arg, is_tensor, ndim_of, read, shape_of, static_dim
from tracegrad.numpy._indexing import take
from tracegrad.numpy._reductions import argsort
from tracegrad.numpy._reductions import sum as _sum
from tracegrad.numpy._shape import atleast_1d, concatenate, ravel, reshape, stack
from tracegrad.numpy._ufuncs import floor_divide, less, logical_not, mod, not_equal
from tracegrad.numpy._ufuncs import where as _where3


def _traced(*xs) -> bool:
    return any(isinstance(x, GraphTensor) for x in xs)


def _need_size(name: str):
    return InvalidArgumentError(
        f"{name}: the result size depends on the values of a traced tensor; pass a static "
        f"size= (the result is padded with fill_value or truncated to it), as in jax.numpy")


def _size_arg(size, name: str) -> int:
    try:
        size = operator.index(size)
    except TypeError:
        raise InvalidArgumentError(f"{name}: size= must be a Python int, got {size!r}") from None
    if size < 0:
        raise InvalidArgumentError(f"{name}: size= must be >= 0, got {size}")
    return size


def _out(value, like):
    """NumPy's `value` as a tensor when `like` is one."""
    return EagerTensor(np.asarray(value)) if is_tensor(like) else value


def _positions(mask, size: int, name: str):
    """`(pos, valid)`: the flat positions (int64, `size` of them) of the true elements of
    the 1-D bool `mask`, in order, zero-padded or truncated, and where they are real."""
    n = static_dim(mask, 0, name)
    order = argsort(logical_not(mask).astype(np.int32))
    if size <= n:
        pos = order[:size]
    else:
        pos = concatenate([order, np.zeros(size - n, np.int64)])
    count = _sum(mask.astype(np.int64))
    return pos, less(np.arange(size, dtype=np.int64), count)


def nonzero(a, *, size=None, fill_value=None):
    """The indices of the non-zero elements of `a`, one int64 array per dim (as
    `np.nonzero`). Inside a trace pass `size=`: each array has `size` entries, padded with
    `fill_value` (default 0; a scalar or one per dim) or truncated."""
    return _nonzero(a, size, fill_value, "nonzero")


def _nonzero(a, size, fill_value, name):
    a = read(a)
    if ndim_of(a) == 0:
        raise InvalidArgumentError(f"{name}: not defined on a 0-d array (NumPy raises too); "
                                   "use atleast_1d(a)")
    if size is None:
        if _traced(a):
            raise _need_size(name)
        value = a._value if isinstance(a, EagerTensor) else np.asarray(a)
        return tuple(_out(i.astype(np.int64), a) for i in np.nonzero(value))
    size = _size_arg(size, name)
    shape = [static_dim(a, d, name) for d in range(ndim_of(a))]
    fills = fill_value if isinstance(fill_value, (tuple, list)) else [fill_value] * len(shape)
    if len(fills) != len(shape):
        raise InvalidArgumentError(f"{name}: fill_value has {len(fills)} entries, "
                                   f"a has {len(shape)} dims")
    pos, valid = _positions(ravel(not_equal(a, 0)), size, name)
    out, stride = [], 1
    for d in reversed(range(len(shape))):
        idx = pos if len(shape) == 1 else mod(floor_divide(pos, stride), shape[d])
        fill = 0 if fills[d] is None else fills[d]
        out.append(_where3(valid, idx, np.asarray(fill, np.int64)))
        stride *= shape[d]
    return tuple(reversed(out))


def flatnonzero(a, *, size=None, fill_value=None):
    """The indices of the non-zero elements of `ravel(a)` (as `np.flatnonzero`); `size=` as
    `nonzero`."""
    a = read(a)
    if size is None and _traced(a):
        raise _need_size("flatnonzero")
    return nonzero(ravel(a), size=size, fill_value=fill_value)[0]


def argwhere(a, *, size=None, fill_value=None):
    """The indices of the non-zero elements of `a`, one row per element (shape
    `(N, a.ndim)`, as `np.argwhere`); `size=` as `nonzero` (`size` rows)."""
    a = read(a)
    if size is None:
        if _traced(a):
            raise _need_size("argwhere")
        value = a._value if isinstance(a, EagerTensor) else np.asarray(a)
        return _out(np.argwhere(value).astype(np.int64), a)
    if ndim_of(a) == 0:
        a = atleast_1d(a)
        return stack(nonzero(a, size=size, fill_value=fill_value), axis=1)[:, :0]
    return stack(nonzero(a, size=size, fill_value=fill_value), axis=1)


def extract(condition, arr, *, size=None, fill_value=0):
    """The elements of `ravel(arr)` where `ravel(condition)` is non-zero (as `np.extract`),
    gathered from `arr` (differentiable in `arr`). Inside a trace with a traced `condition`
    pass `size=`: padded with `fill_value` or truncated."""
    condition, arr = read(condition), read(arr)
    flat = ravel(arr)
    if size is None:
        if _traced(condition):
            raise _need_size("extract")
        value = condition._value if isinstance(condition, EagerTensor) else np.asarray(condition)
        idx = np.flatnonzero(value).astype(np.int64)
        if not (is_tensor(arr) or is_tensor(condition)):
            return np.extract(value, arr)
        return take(flat, idx) if is_tensor(arr) else _out(np.take(flat, idx), condition)
    pos, valid = _positions(ravel(not_equal(condition, 0)), _size_arg(size, "extract"),
                            "extract")
    return _where3(valid, take(flat, pos, mode="clip"), fill_value)


def compress(condition, a, axis=None, *, size=None, fill_value=0):
    """The slices of `a` along `axis` (None: of `ravel(a)`) where the 1-D `condition` is
    true (as `np.compress`), gathered from `a`. Inside a trace with a traced `condition` pass
    `size=`: `size` slices, padded with `fill_value` or truncated."""
    condition, a = read(condition), read(a)
    if ndim_of(condition) != 1:
        raise InvalidArgumentError(f"compress: condition must be 1-D, got {ndim_of(condition)}-D")
    if axis is None:
        a, axis = ravel(a), 0
    axis = axis_arg(axis, ndim_of(a), "compress")
    if size is None:
        if _traced(condition):
            raise _need_size("compress")
        value = condition._value if isinstance(condition, EagerTensor) else np.asarray(condition)
        idx = np.nonzero(value)[0].astype(np.int64)
        if not (is_tensor(a) or is_tensor(condition)):
            return np.compress(value, a, axis=axis)
        n = shape_of(a)[axis]
        if n is not None and idx.size and idx[-1] >= n:
            raise InvalidArgumentError(f"compress: condition selects index {idx[-1]}, "
                                       f"out of bounds for axis {axis} of size {n}")
        return take(a, idx, axis=axis) if is_tensor(a) else \
            _out(np.take(a, idx, axis=axis), condition)
    size = _size_arg(size, "compress")
    n = static_dim(a, axis, "compress")
    m = static_dim(condition, 0, "compress")
    mask = not_equal(condition, 0)
    if m > n:
        mask = mask[:n]
    elif m < n:
        mask = concatenate([mask, np.zeros(n - m, bool)])
    pos, valid = _positions(mask, size, "compress")
    taken = take(a, pos, axis=axis)
    valid = reshape(valid, [size if d == axis else 1 for d in range(ndim_of(a))])
    return _where3(valid, taken, fill_value)


def where(condition, x=None, y=None, *, size=None, fill_value=None):
    """`x` where `condition` else `y` (NumPy promotion of x and y, broadcasting of all three).

    The one-argument form is `nonzero(condition)`: its size depends on the values, so inside
    a trace it needs `size=` (and takes `fill_value=`), as `nonzero`.
    """
    if x is None and y is None:
        return _nonzero(condition, size, fill_value, "where(condition)")
    return _where3(condition, x, y)
