"""Unique elements and set operations, whose result size depends on the data: unique and
its array-API forms, intersect1d, setdiff1d, union1d, setxor1d, trim_zeros.

As `nonzero` (`_datadep.py`): on NumPy input with nothing recording they return NumPy's own
result; on eager tensors NumPy's result size is read and the traced form below runs with it,
so the values are gathered from the input and keep its gradient; inside a trace `size=`
(static) pads the result with `fill_value` or truncates it, as in jax.numpy. The traced form
sorts stably (`argsort`), marks the first element of each run of equal values, and moves the
marked positions to the front (`_positions`).
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from tracegrad.core.ir import EagerTensor
from tracegrad.errors import InvalidArgumentError
from tracegrad.numpy._construct import isin
from tracegrad.numpy._core import (
    as_eager,
    axis_arg,
    dtype_of,
    has_float_dtype,
    is_tensor,
    ndim_of,
    read,
    shape_of,
    static_dim,
)
from tracegrad.numpy._creation import astype, full
from tracegrad.numpy._datadep import _need_size, _positions, _size_arg, _traced
from tracegrad.numpy._indexing import at, take
from tracegrad.numpy._reductions import any as _any
from tracegrad.numpy._reductions import argmax, argsort, cumsum
from tracegrad.numpy._shape import concatenate, expand_dims, moveaxis, ravel, reshape
from tracegrad.numpy._ufuncs import (
    equal,
    isnan,
    logical_and,
    logical_not,
    not_equal,
    subtract,
)
from tracegrad.numpy._ufuncs import where as _where

UniqueAllResult = namedtuple("UniqueAllResult", ["values", "indices", "inverse_indices",
                                                 "counts"])
UniqueCountsResult = namedtuple("UniqueCountsResult", ["values", "counts"])
UniqueInverseResult = namedtuple("UniqueInverseResult", ["values", "inverse_indices"])


def _value(x):
    """The concrete NumPy value of a NumPy array or eager tensor."""
    return x._value if isinstance(x, EagerTensor) else np.asarray(x)


def _flat(a):
    return a if ndim_of(a) == 1 else ravel(a)


def _tensors(out, like):
    """`out` (a result, or a tuple or list of them) with NumPy arrays as eager tensors when
    an input in `like` is a tensor (results built from static data are NumPy otherwise)."""
    if not any(is_tensor(x) for x in like):
        return out
    if isinstance(out, (tuple, list)):
        items = [_tensors(o, like) for o in out]
        return type(out)(*items) if hasattr(out, "_fields") else type(out)(items)
    return as_eager(out)


def _runs(flat, equal_nan: bool):
    """`(perm, first)` of the 1-D `flat` (non-empty): the stable sorting permutation, and
    whether each sorted element starts a run of equal values (NaNs one run when
    `equal_nan`)."""
    perm = argsort(flat)
    s = take(flat, perm)
    new = not_equal(s[1:], s[:-1])
    if equal_nan and has_float_dtype(s):
        new = logical_and(new, logical_not(logical_and(isnan(s[1:]), isnan(s[:-1]))))
    return perm, concatenate([np.ones(1, bool), new])


def _pick(x, pos, valid, fill):
    """The slices `x[pos]` where `valid`, `fill` elsewhere (default: the first gathered
    slice, the smallest of a sorted result; 0 when nothing is valid)."""
    got = take(x, pos, axis=0)
    size = shape_of(pos)[0]
    if size == 0:
        return got
    dt = dtype_of(x)[0]
    if fill is None:
        fill = _where(valid[0], got[0], np.zeros((), dt))
    else:
        fill = astype(fill, dt) if is_tensor(fill) else np.asarray(fill).astype(dt)
    return _where(reshape(valid, (size,) + (1,) * (ndim_of(x) - 1)), got, fill)


def _filled(shape, value, dtype):
    return full(shape, 0 if value is None else value, dtype=dtype)


# -- unique ------------------------------------------------------------------------------------


def unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None, *,
           equal_nan=True, sorted=True, size=None, fill_value=None):
    """The sorted unique elements of `ar` (flattened, or the unique slices along `axis`), as
    `np.unique`, with the first indices, the inverse and the counts on request. Inside a
    trace pass `size=`: `size` entries, padded with `fill_value` (default: the smallest
    unique value; indices with an out-of-bounds index, counts with 0) or truncated.
    `sorted=False` is accepted: the result is sorted anyway (NumPy allows either order)."""
    return _unique_api(ar, (return_index, return_inverse, return_counts), axis, equal_nan,
                       size, fill_value, "unique")


def _unique_api(ar, extras, axis, equal_nan, size, fill_value, name):
    """`unique` called as `name`: NumPy's result on NumPy input, the size= form otherwise."""
    ar = read(ar)
    if size is None:
        if _traced(ar):
            raise _need_size(name)
        value = _value(ar)
        got = np.unique(value, *extras, axis=axis, equal_nan=equal_nan)
        if not is_tensor(ar):
            return got
        got = got[0] if isinstance(got, tuple) else got
        size = got.shape[0 if axis is None else axis_arg(axis, value.ndim, name)]
    size = _size_arg(size, name)
    out = _unique(ar, size, fill_value, axis, equal_nan, *extras)
    return _tensors(out[0] if len(out) == 1 else tuple(out), [ar])


def _unique(ar, size, fill, axis, equal_nan, want_index, want_inverse, want_counts):
    """`[values, index?, inverse?, counts?]` of `unique` with `size` entries (only the
    requested ones are built)."""
    if axis is None:
        x, ax, inverse_shape = _flat(ar), 0, shape_of(ar)
    else:
        ax = axis_arg(axis, ndim_of(ar), "unique")
        x, inverse_shape = moveaxis(ar, ax, 0), None
    n = static_dim(x, 0, "unique")
    if n == 0:
        values = _filled((size,) + tuple(shape_of(x)[1:]), fill, dtype_of(x)[0])
        out = [values if axis is None else moveaxis(values, 0, ax)]
        out += [np.zeros(size, np.int64)] if want_index else []
        out += [np.zeros(inverse_shape or (0,), np.int64)] if want_inverse else []
        return out + ([np.zeros(size, np.int64)] if want_counts else [])
    # NumPy compares slices (axis=) element by element, NaN unequal: equal_nan does not apply
    perm, first = _runs(x, equal_nan) if axis is None else _row_runs(x)
    pos, valid = _positions(first, size + want_counts, "unique")
    if want_counts:
        starts = _where(valid, pos, np.int64(n))
        counts = subtract(starts[1:], starts[:-1])
        pos, valid = pos[:size], valid[:size]
    idx = take(perm, pos)
    values = _pick(x, idx, valid, fill)
    out = [values if axis is None else moveaxis(values, 0, ax)]
    if want_index:
        out.append(_where(valid, idx, np.int64(n)))
    if want_inverse:
        run = subtract(cumsum(astype(first, np.int64)), np.int64(1))
        inverse = at(np.zeros(n, np.int64))[perm].set(run)
        out.append(inverse if inverse_shape is None else reshape(inverse, inverse_shape))
    return out + ([counts] if want_counts else [])


def _row_runs(x):
    """`_runs` of the slices `x[i]`, ordered lexicographically (a stable sort per column,
    the last column first); slices holding a NaN are never equal."""
    n = shape_of(x)[0]
    rows = reshape(x, (n, -1))
    perm = np.arange(n, dtype=np.int64)
    for c in reversed(range(static_dim(rows, 1, "unique"))):
        perm = take(perm, argsort(take(rows[:, c], perm)))
    s = take(rows, perm, axis=0)
    new = _any(not_equal(s[1:], s[:-1]), axis=1)
    return perm, concatenate([np.ones(1, bool), new])


def unique_all(x, *, size=None, fill_value=None):
    """`UniqueAllResult(values, indices, inverse_indices, counts)` of `x` (as
    `np.unique_all`: NaNs distinct); `size=` as `unique`."""
    return UniqueAllResult(*_unique_api(x, (True, True, True), None, False, size, fill_value,
                                        "unique_all"))


def unique_counts(x, *, size=None, fill_value=None):
    """`UniqueCountsResult(values, counts)` of `x` (as `np.unique_counts`); `size=` as
    `unique`."""
    return UniqueCountsResult(*_unique_api(x, (False, False, True), None, False, size,
                                           fill_value, "unique_counts"))


def unique_inverse(x, *, size=None, fill_value=None):
    """`UniqueInverseResult(values, inverse_indices)` of `x` (as `np.unique_inverse`);
    `size=` as `unique`."""
    return UniqueInverseResult(*_unique_api(x, (False, True, False), None, False, size,
                                            fill_value, "unique_inverse"))


def unique_values(x, *, size=None, fill_value=None):
    """The unique elements of `x`, sorted (`np.unique_values`, NaNs distinct; NumPy leaves
    the order unspecified); `size=` as `unique`."""
    return _unique_api(x, (False, False, False), None, False, size, fill_value,
                       "unique_values")


# -- set operations ---------------------------------------------------------------------------


def _set_op(name, numpy_fn, traced_fn, arrays, size, fill_value, **options):
    """NumPy's result on NumPy input; `traced_fn(*arrays, size, fill_value)` with NumPy's
    result size on eager tensors, with `size` inside a trace."""
    arrays = [read(a) for a in arrays]
    if size is None:
        if _traced(*arrays):
            raise _need_size(name)
        got = numpy_fn(*[_value(a) for a in arrays], **options)
        if not any(is_tensor(a) for a in arrays):
            return got
        size = (got[0] if isinstance(got, tuple) else got).shape[0]
    out = traced_fn(*[_flat(a) for a in arrays], _size_arg(size, name), fill_value)
    return _tensors(out, arrays)


def _first_in_own(flat):
    """Whether each element of the 1-D `flat` is the first of its value (NaNs one value)."""
    n = shape_of(flat)[0]
    if n == 0:
        return np.zeros(0, bool)
    perm, first = _runs(flat, True)
    return at(np.zeros(n, bool))[perm].set(first)


def _sorted_pick(x, keep, size, fill, name):
    """The elements of the 1-D `x` where `keep`, in sorted order (stable: the first of
    equal values first), `size` of them: `(values, positions in x, valid)`."""
    n = static_dim(x, 0, name)
    if n == 0:
        return _filled((size,), fill, dtype_of(x)[0]), np.zeros(size, np.int64), \
            np.zeros(size, bool)
    perm = argsort(x)
    pos, valid = _positions(take(keep, perm), size, name)
    idx = take(perm, pos)
    return _pick(x, idx, valid, fill), idx, valid


def intersect1d(ar1, ar2, assume_unique=False, return_indices=False, *, size=None,
                fill_value=None):
    """The sorted unique values in both `ar1` and `ar2` (flattened), as `np.intersect1d`,
    with the indices of their first occurrences on request; the values are gathered from
    `ar1`. Inside a trace pass `size=`: padded with `fill_value` (default: the smallest
    value; indices with the input's length) or truncated."""
    def traced(a, b, size, fill):
        dt = np.result_type(dtype_of(a)[0], dtype_of(b)[0])
        a, b = astype(a, dt), astype(b, dt)
        n1, n2 = static_dim(a, 0, "intersect1d"), static_dim(b, 0, "intersect1d")
        keep = logical_and(_first_in_own(a), isin(a, b)) if n2 else np.zeros(n1, bool)
        values, idx, valid = _sorted_pick(a, keep, size, fill, "intersect1d")
        if not return_indices:
            return values
        ind1 = _where(valid, idx, np.int64(n1))
        if n1 == 0 or n2 == 0:
            return values, ind1, np.full(size, n2, np.int64)
        first_b = argmax(equal(expand_dims(values, 1), b), axis=1)
        return values, ind1, _where(valid, first_b, np.int64(n2))

    return _set_op("intersect1d", np.intersect1d, traced, (ar1, ar2), size, fill_value,
                   assume_unique=assume_unique, return_indices=return_indices)


def setdiff1d(ar1, ar2, assume_unique=False, *, size=None, fill_value=None):
    """The unique values of `ar1` not in `ar2`, sorted (with `assume_unique`: the elements
    of `ar1` not in `ar2`, in order), as `np.setdiff1d`; gathered from `ar1`. Inside a
    trace pass `size=`: padded with `fill_value` (default: the first value) or truncated."""
    def traced(a, b, size, fill):
        n1 = static_dim(a, 0, "setdiff1d")
        out = logical_not(isin(a, b)) if shape_of(b)[0] else np.ones(n1, bool)
        if not assume_unique:
            return _sorted_pick(a, logical_and(_first_in_own(a), out), size, fill,
                                "setdiff1d")[0]
        if n1 == 0:
            return _filled((size,), fill, dtype_of(a)[0])
        pos, valid = _positions(out, size, "setdiff1d")
        return _pick(a, pos, valid, fill)

    return _set_op("setdiff1d", np.setdiff1d, traced, (ar1, ar2), size, fill_value,
                   assume_unique=assume_unique)


def union1d(ar1, ar2, *, size=None, fill_value=None):
    """The sorted unique values of `ar1` and `ar2` together (flattened), as `np.union1d`;
    `size=` as `unique`."""
    def traced(a, b, size, fill):
        return unique(concatenate([a, b]), size=size, fill_value=fill)

    return _set_op("union1d", np.union1d, traced, (ar1, ar2), size, fill_value)


def setxor1d(ar1, ar2, assume_unique=False, *, size=None, fill_value=None):
    """The sorted values in exactly one of `ar1` and `ar2` (flattened), as `np.setxor1d`.
    Inside a trace pass `size=`: padded with `fill_value` (default: the smallest value) or
    truncated."""
    def traced(a, b, size, fill):
        c = concatenate([a, b])
        n1, n = shape_of(a)[0], static_dim(c, 0, "setxor1d")
        if assume_unique:  # NumPy's rule: a value unequal to both neighbours once sorted
            if n == 0:
                return _sorted_pick(c, np.zeros(0, bool), size, fill, "setxor1d")[0]
            perm = argsort(c)
            s = take(c, perm)
            edge = np.ones(1, bool)
            differs = not_equal(s[1:], s[:-1])
            lone = logical_and(concatenate([edge, differs]), concatenate([differs, edge]))
            pos, valid = _positions(lone, size, "setxor1d")
            return _pick(c, take(perm, pos), valid, fill)
        if n1 == 0 or n1 == n:
            keep = _first_in_own(c)
        else:
            keep = concatenate([logical_and(_first_in_own(a), logical_not(isin(a, b))),
                                logical_and(_first_in_own(b), logical_not(isin(b, a)))])
        return _sorted_pick(c, keep, size, fill, "setxor1d")[0]

    return _set_op("setxor1d", np.setxor1d, traced, (ar1, ar2), size, fill_value,
                   assume_unique=assume_unique)


def trim_zeros(filt, trim="fb", axis=None):
    """`filt` without its leading (`"f"` in `trim`) and trailing (`"b"`) zeros, along `axis`
    (None: every axis), as `np.trim_zeros`: a slice of `filt`. The size depends on the
    values, so it needs concrete data (a NumPy array or an eager tensor)."""
    filt = read(filt)
    if _traced(filt):
        raise InvalidArgumentError(
            "trim_zeros: the result size depends on the values of a traced tensor; call it "
            "on concrete data (there is no size= form), or mask the zeros with where()")
    value = _value(filt)
    if not is_tensor(filt):
        return np.trim_zeros(value, trim, axis)
    trim = trim.lower()
    if not set(trim) <= {"f", "b"}:
        raise InvalidArgumentError(f"trim_zeros: unexpected character(s) in trim: {trim!r}")
    axes = range(value.ndim) if axis is None else \
        [axis_arg(a, value.ndim, "trim_zeros") for a in np.atleast_1d(axis)]
    nz = np.argwhere(value)
    key = [slice(None)] * value.ndim
    for a in axes:
        if not len(nz):  # all zeros: nothing is left, whichever end is trimmed
            key[a] = slice(0, 0)
            continue
        start, stop = int(nz[:, a].min()), int(nz[:, a].max()) + 1
        key[a] = slice(start if "f" in trim else None, stop if "b" in trim else None)
    return filt[tuple(key)]
