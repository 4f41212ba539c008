"""`x[...]` with NumPy's rules, `take`, `take_along_axis` and `at[...]` updates.

Basic indexing (slices with any step, ints, `None`, `...`) becomes one `rev`, one `slice`
and one `reshape`. Integer-array ("advanced") indices become one `gather`: several arrays
broadcast together and index the flattened product of their dims. Their result dims go
where NumPy puts them: in place when the advanced indices are adjacent, first otherwise.
Boolean masks are turned into integer arrays, which needs their value: they work eagerly
(and as NumPy constants) but not as traced tensors.
"""

from __future__ import annotations

import operator

import numpy as np

from tracegrad import ops
from tracegrad.core import dtypes
from tracegrad.core.ir import EagerTensor, GraphTensor, Tensor
from tracegrad.core.shapes import broadcast_shapes
from tracegrad.core.source import user_location
from tracegrad.core.state import state
from tracegrad.errors import (
    DTypeError,
    InvalidArgumentError,
    ShapeError,
    TracegradIndexError,
    UnsupportedOpError,
)
from tracegrad.numpy._core import (
    axis_arg,
    broadcast_to_shape,
    cast,
    dtype_of,
    is_tensor,
    ndim_of,
    read,
    shape_of,
)
from tracegrad.numpy._core import reshape as _reshape
from tracegrad.numpy._views import as_view, is_view


def _const(value):
    return state.graph.constant(value) if state.graph is not None else value


# -- the index key, classified ---------------------------------------------------------------


def _index_value(k):
    """A NumPy array for a static index (list, ndarray, eager tensor) or the traced tensor."""
    k = read(k)
    if type(k) is EagerTensor:
        return k._value
    if isinstance(k, GraphTensor):
        return k
    return np.asarray(k)


def _classify(key, ndim):
    """Key items as `(kind, value)`: "slice", "int", "array", "new"; masks expanded to integer
    arrays and `...` to full slices. Also whether any item is an array."""
    if not isinstance(key, tuple):
        key = (key,)
    items = []
    for k in key:
        if k is None:
            items.append(("new", None))
        elif k is Ellipsis:
            items.append(("ellipsis", None))
        elif isinstance(k, slice):
            items.append(("slice", k))
        elif isinstance(k, (bool, np.bool_)):
            items.append(("bool", bool(k)))
        elif isinstance(k, (int, np.integer)):
            items.append(("int", int(k)))
        else:
            v = _index_value(k)
            dt = dtype_of(v)[0]
            if isinstance(v, np.ndarray) and v.size == 0 and dt == dtypes.float64:
                v, dt = v.astype(np.int64), dtypes.int64
            if dt == dtypes.bool_:
                items.append(("mask", v))
            elif dtypes.is_int(dt):
                items.append(("array", v))
            else:
                raise TracegradIndexError(
                    "only integers, slices (`:`), ellipsis (`...`), None and integer or "
                    f"boolean arrays are valid indices, got one of dtype {dt.name}"
                )
    if sum(kind == "ellipsis" for kind, _ in items) > 1:
        raise TracegradIndexError("an index can only have a single ellipsis ('...')")
    used = sum(ndim_of(v) if kind == "mask" else 1 for kind, v in items
               if kind in ("slice", "int", "array", "mask"))
    if used > ndim:
        raise TracegradIndexError(f"too many indices for array: array is {ndim}-dimensional, "
                                  f"but {used} were indexed")
    out = []
    for kind, v in items:
        if kind == "ellipsis":
            out += [("slice", slice(None))] * (ndim - used)
        else:
            out.append((kind, v))
    if not any(kind == "ellipsis" for kind, _ in items):
        out += [("slice", slice(None))] * (ndim - used)
    return out


def _expand_masks(items, shape):
    """Items with boolean masks replaced by the integer arrays of their true positions."""
    out = []
    dim = 0
    for kind, v in items:
        if kind == "mask":
            if isinstance(v, GraphTensor):
                raise UnsupportedOpError(
                    f"indexing with a traced boolean mask at {user_location()}: the result "
                    "shape would depend on the mask's values. Use tnp.where(mask, x, 0) (or a "
                    "masked sum) inside traced code; boolean indexing works eagerly"
                )
            for i, (m, d) in enumerate(zip(v.shape, shape[dim:dim + v.ndim])):
                if d is None:
                    raise ShapeError(f"a boolean mask cannot index dim {dim + i}, whose "
                                     "size is unknown while tracing")
                if m != d:
                    raise TracegradIndexError(
                        f"boolean index did not match indexed array along axis {dim + i}; size "
                        f"of axis is {d} but size of corresponding boolean axis is {m}")
            if v.ndim == 0:
                out.append(("new", None))
                if not v:
                    out.append(("empty", None))
                continue
            out += [("array", a.astype(np.int64)) for a in np.nonzero(v)]
            dim += v.ndim
            continue
        if kind == "bool":
            out.append(("new", None))
            if not v:
                out.append(("empty", None))
            continue
        out.append((kind, v))
        if kind in ("slice", "int", "array"):
            dim += 1
    return out


# -- basic indexing --------------------------------------------------------------------------


def _slice_spec(n, s: slice):
    """`(reverse, start, limit, stride)` of `x[s]` on a dim of size `n` (None: unknown) as a
    rev (for negative steps) then a slice with a positive stride."""
    step = 1 if s.step is None else operator.index(s.step)
    if step == 0:
        raise InvalidArgumentError("slice step cannot be zero")
    if n is None:
        if step > 0:
            return False, s.start, s.stop, step
        # Reversed, index i is at -1 - i (Python's negative indexing keeps its clamping).
        flip = [None if v is None else -1 - operator.index(v) for v in (s.start, s.stop)]
        return True, flip[0], flip[1], -step
    start, stop, step = s.indices(n)
    count = len(range(start, stop, step))
    if count == 0:
        return False, 0, 0, 1
    if step > 0:
        return False, start, start + (count - 1) * step + 1, step
    start = n - 1 - start
    return True, start, start + (count - 1) * -step + 1, -step


def getitem(x, key):
    """`x[key]` with NumPy's indexing rules (see the module docstring). Where NumPy's result
    is a view of `x` (basic indexing that does not pick a single element), the result
    remembers `key`, so that an in-place operator on it raises instead of leaving `x`
    unchanged."""
    if type(x) is EagerTensor and state.graph is None:
        kind = type(key)
        if state.tapes:
            if (kind is int or kind is slice) and x._value.ndim:
                out = _first_dim(x, key)
                return as_view(x, out, key) if kind is slice or x._value.ndim > 1 else out
        else:
            value = key if kind is slice or kind is int else _numpy_key(key)
            if value is not None:
                try:
                    out = x._value[value]
                except IndexError:
                    pass  # the general path below raises it, located at the user's line
                else:
                    if type(out) is not np.ndarray:
                        return EagerTensor(np.asarray(out))  # one element: a copy
                    out = EagerTensor(out)
                    if kind is slice or kind is int or is_view(key, out.ndim):
                        out._view = key
                    return out
    out = _getitem_general(x, key)
    if isinstance(out, Tensor) and is_view(key, out.ndim):
        return as_view(x, out, key)
    return out


def _getitem_general(x, key):
    """`x[key]` by the general rules: basic items, then advanced ones, then a reshape."""
    x = read(x)
    items = _expand_masks(_classify(key, ndim_of(x)), shape_of(x))
    x, slots, adv, adjacent = _basic(x, items)
    sliced = shape_of(x)
    if adv:
        x, nb = _gather(x, adv, adjacent)
        b = iter(shape_of(x)[adv[0][0]:adv[0][0] + nb] if adjacent else shape_of(x)[:nb])
        kept = [s for s in slots if s[0] != "adv"]
        first = slots.index(("adv",))
        slots = kept[:first] + [("b",)] * nb + kept[first:] if adjacent else [("b",)] * nb + kept
        target = [next(b) if s[0] == "b" else _slot_size(s, sliced) for s in slots]
    else:
        target = [_slot_size(s, sliced) for s in slots]
    x = _reshape(x, target, "getitem")
    if any(s[0] == "empty" for s in slots):
        begin = tuple(0 if d is not None else None for d in shape_of(x))
        limit = tuple(0 if s[0] == "empty" else d for s, d in zip(slots, shape_of(x)))
        x = ops.slice(x, start_indices=begin, limit_indices=limit, strides=(1,) * len(begin))
    return x


def _first_dim(x, key):
    """`x[key]` for an int or a slice on the first dim of an eager tensor: the ops `_basic`
    builds for that key (a slice, and a reshape dropping the dim of an int), without
    classifying the key."""
    shape = x.shape
    n = shape[0]
    if type(key) is int:
        i = _check_int(key, n, 0)
        start, limit, stride = i, i + 1, 1
    else:
        rev, start, limit, stride = _slice_spec(n, key)
        if rev:
            return _getitem_general(x, key)
        if start == 0 and limit == n and stride == 1:
            return x
    rest = shape[1:]
    x = ops.slice(x, start_indices=(start,) + (0,) * len(rest), limit_indices=(limit, *rest),
                  strides=(stride,) + (1,) * len(rest))
    return ops.reshape(x, new_sizes=rest) if type(key) is int else x


def _basic(x, items):
    """The basic part of an index: one `rev`, one `slice`, and a `gather` per integer on an
    unknown dim. Returns `(x, slots, advanced, adjacent)`: `slots` says what each result dim
    is (`("dim", i)` a dim of the new `x`, `("new",)` / `("empty",)` an inserted size-1 / 0
    dim, `("adv",)` an advanced index); `advanced` lists `(dim, index)` and `adjacent`
    whether those items were next to each other in the key."""
    shape = shape_of(x)
    advanced = any(kind == "array" for kind, _ in items)
    rev, starts, limits, strides = [], [], [], []
    slots, ints, adv, adv_items = [], [], [], []
    dim = 0
    for pos, (kind, v) in enumerate(items):
        if kind in ("new", "empty"):
            if kind == "new":
                slots.append(("new",))
            else:
                slots[-1] = ("empty",)
            continue
        n = shape[dim]
        if kind == "slice":
            r, s, lim, st = _slice_spec(n, v)
            slots.append(("dim", dim))
        else:
            r, s, lim, st = False, 0 if n is not None else None, n, 1
            if kind == "int" and not advanced:
                i = _check_int(v, n, dim)
                ints.append((dim, i))
                if n is not None:
                    s, lim = i, i + 1
            else:
                adv.append((dim, v))
                adv_items.append(pos)
                slots.append(("adv",))
        if r:
            rev.append(dim)
        starts.append(s)
        limits.append(lim)
        strides.append(st)
        dim += 1
    if rev:
        x = ops.rev(x, dimensions=tuple(rev))
    if not all(s in (0, None) and (lim == n or lim is None) and st == 1
               for s, lim, st, n in zip(starts, limits, strides, shape, strict=True)):
        x = ops.slice(x, start_indices=tuple(starts), limit_indices=tuple(limits),
                      strides=tuple(strides))
    gathered = {d for d, _ in ints if shape[d] is None}
    for d, i in sorted(ints, reverse=True):
        if d in gathered:
            x = ops.gather(x, _const(np.asarray(i, np.int64)), axis=d)
    remap = {}
    for d in range(len(shape)):
        if d not in gathered:
            remap[d] = len(remap)
    slots = [("dim", remap[s[1]]) if s[0] == "dim" else s for s in slots]
    adjacent = adv_items == list(range(adv_items[0], adv_items[0] + len(adv_items))) \
        if adv else True
    return x, slots, adv, adjacent


def _numpy_key(key):
    """`key` with eager tensors replaced by their values (NumPy indexes eagerly when nothing
    records), or None when it holds anything else that is not a plain index."""
    if type(key) is not tuple:
        key = (key,)
    out = []
    for k in key:
        t = type(k)
        if t is EagerTensor:
            out.append(k._value)
        elif t in (int, slice, np.ndarray) or k is None or k is Ellipsis:
            out.append(k)
        else:
            return None
    return tuple(out)


def _slot_size(slot, shape):
    return shape[slot[1]] if slot[0] == "dim" else 1


def _check_int(i, n, dim):
    if n is None:
        return i
    if not -n <= i < n:
        raise TracegradIndexError(f"index {i} is out of bounds for axis {dim} with size {n}")
    return i + n if i < 0 else i


# -- advanced indexing -----------------------------------------------------------------------


def _gather(x, adv, adjacent):
    """`x` gathered at the advanced indices `[(dim, index)]`; returns `(result, rank of B)`
    where B is the broadcast index shape, placed at the first advanced dim when `adjacent`,
    else first."""
    dims = [d for d, _ in adv]
    bshape = broadcast_shapes(*(shape_of(v) for _, v in adv), op="getitem")
    shape = shape_of(x)
    if len(adv) == 1:
        d, v = adv[0]
        return ops.gather(x, _index_operand(v, shape[d], d), axis=d), len(bshape)
    nd = len(shape)
    sizes = [shape[d] for d in dims]
    size_ops = [ops.dim_size(x, axis=d) if n is None else None for d, n in zip(dims, sizes)]
    consecutive = dims == list(range(dims[0], dims[0] + len(dims)))
    if not (adjacent and consecutive):
        x = ops.transpose(x, permutation=tuple(dims) + tuple(i for i in range(nd)
                                                              if i not in dims))
        dims = list(range(len(dims)))
        shape = shape_of(x)
    at = dims[0]
    merged = None if None in sizes else int(np.prod(sizes, dtype=np.int64))
    x = _reshape(x, shape[:at] + (merged,) + shape[dims[-1] + 1:], "getitem")
    lin = _linear_index([v for _, v in adv], sizes, size_ops, dims, bshape)
    return ops.gather(x, lin, axis=at), len(bshape)


def _index_operand(v, n, dim):
    """The index operand of a gather: a static index checked and made a constant."""
    if isinstance(v, int):
        v = np.asarray(v, np.int64)
    if isinstance(v, np.ndarray):
        _check_bounds(v, n, dim)
        return _const(v)
    return v


def _check_bounds(v: np.ndarray, n, dim):
    if n is not None and v.size and (v.min() < -n or v.max() >= n):
        bad = v[(v < -n) | (v >= n)].flat[0]
        raise TracegradIndexError(f"index {bad} is out of bounds for axis {dim} with size {n}")


def _linear_index(indices, sizes, size_ops, dims, bshape):
    """The flat index into the merged dims. Static (NumPy) indices are checked and summed
    while tracing; traced ones are normalised when the op runs, and an out-of-bounds one
    maps the flat index to the merged size, so the gather raises."""
    if None in sizes:
        return _linear_index_unknown(indices, sizes, size_ops, bshape)
    strides = [int(np.prod(sizes[k + 1:], dtype=np.int64)) for k in range(len(sizes))]
    static = np.zeros(bshape, np.int64)
    traced = []
    for v, n, d, stride in zip(indices, sizes, dims, strides, strict=True):
        if is_tensor(v):
            traced.append((v, n, stride))
            continue
        a = np.broadcast_to(np.asarray(v, np.int64), bshape)
        _check_bounds(a, n, d)
        static = static + np.where(a < 0, a + n, a) * stride
    if not traced:
        return _const(static)
    arrays = [cast(v, dtypes.int64) for v, _, _ in traced]
    arrays = [broadcast_to_shape(a, bshape, arrays) for a in arrays]
    zero = _splat(0, bshape, arrays)
    lin = bad = None
    for a, (_, n, stride) in zip(arrays, traced, strict=True):
        size = _splat(n, bshape, arrays)
        a = ops.select(ops.lt(a, zero), ops.add(a, size), a)
        out = ops.or_(ops.lt(a, zero), ops.ge(a, size))
        bad = out if bad is None else ops.or_(bad, out)
        term = a if stride == 1 else ops.mul(a, _splat(stride, bshape, arrays))
        lin = term if lin is None else ops.add(lin, term)
    if static.any():
        lin = ops.add(lin, broadcast_to_shape(_const(static), bshape, arrays))
    total = int(np.prod(sizes, dtype=np.int64))
    return ops.select(bad, _splat(total, bshape, arrays), lin)


def _splat(value: int, bshape, sources):
    return broadcast_to_shape(_const(np.asarray(value, np.int64)), bshape, sources)


def _linear_index_unknown(indices, sizes, size_ops, bshape):
    """`_linear_index` when some merged dim is unknown: Horner's rule with sizes read when
    the op runs."""
    arrays = [cast(v if is_tensor(v) else _const(np.asarray(v, np.int64)), dtypes.int64)
              for v in indices]
    arrays = [broadcast_to_shape(a, bshape, arrays) for a in arrays]
    zero = _splat(0, bshape, arrays)
    lin = bad = total = None
    for a, n, op in zip(arrays, sizes, size_ops, strict=True):
        size = op if op is not None else _const(np.asarray(n, np.int64))
        total = size if total is None else ops.mul(total, size)
        size = broadcast_to_shape(size, bshape, arrays)
        a = ops.select(ops.lt(a, zero), ops.add(a, size), a)
        out = ops.or_(ops.lt(a, zero), ops.ge(a, size))
        bad = out if bad is None else ops.or_(bad, out)
        lin = a if lin is None else ops.add(ops.mul(lin, size), a)
    return ops.select(bad, broadcast_to_shape(total, bshape, arrays), lin)


# -- functions -------------------------------------------------------------------------------


def take(a, indices, axis=None, mode=None):
    """Elements of `a` at `indices` along `axis` (None: of the flattened array), as
    `np.take`; `mode="wrap"` or `"clip"` maps out-of-range indices instead of raising."""
    from tracegrad.numpy._shape import ravel

    a = read(a)
    if axis is None:
        a, axis = ravel(a), 0
    axis = axis_arg(axis, ndim_of(a), "take")
    n = shape_of(a)[axis]
    idx = _index_value(indices)
    if not dtypes.is_int(dtype_of(idx)[0]):
        raise DTypeError(f"take: indices must be integers, got {dtype_of(idx)[0].name}")
    if mode in ("wrap", "clip"):
        if isinstance(idx, np.ndarray) and n is not None:
            idx = np.mod(idx, n) if mode == "wrap" else np.clip(idx, 0, n - 1)
        else:
            from tracegrad.numpy._ufuncs import clip, mod

            size = ops.dim_size(a, axis=axis) if n is None else np.asarray(n, np.int64)
            idx = cast(idx, dtypes.int64)
            idx = mod(idx, size) if mode == "wrap" else clip(idx, 0, ops.sub(size, np.asarray(
                1, np.int64)) if n is None else n - 1)
    elif mode not in (None, "raise"):
        raise InvalidArgumentError(f"take: mode must be 'raise', 'wrap' or 'clip', got {mode!r}")
    return ops.gather(a, _index_operand(idx, n, axis), axis=axis)


def take_along_axis(arr, indices, axis=-1):
    """`arr` indexed by `indices` along `axis`, matching the other dims (broadcast), as
    `np.take_along_axis` (e.g. with the result of `argsort`)."""
    from tracegrad.numpy._shape import ravel

    arr = read(arr)
    idx = _index_value(indices)
    if axis is None:
        arr, axis = ravel(arr), 0
    nd = ndim_of(arr)
    if ndim_of(idx) != nd:
        raise ShapeError("take_along_axis: `indices` and `arr` must have the same "
                         f"number of dims, got {ndim_of(idx)} and {nd}")
    axis = axis_arg(axis, nd, "take_along_axis")
    if nd == 1:
        return ops.gather(arr, _index_operand(idx, shape_of(arr)[0], 0), axis=0)
    key = []
    for d in range(nd):
        if d == axis:
            key.append(idx)
            continue
        n = shape_of(arr)[d]
        if n is None:
            raise ShapeError("take_along_axis: needs static sizes for the dims other than "
                             "`axis` while tracing")
        key.append(np.arange(n, dtype=np.int64).reshape([n if i == d else 1
                                                         for i in range(nd)]))
    return getitem(arr, tuple(key))


# -- functional updates ----------------------------------------------------------------------


class _IndexUpdate:
    """`tnp.at(x)[idx]`: `.set(v)`, `.add(v)` and `.get()` return new arrays."""

    __slots__ = ("key", "x")

    def __init__(self, x, key):
        self.x, self.key = x, key

    def get(self):
        """`x[idx]`."""
        return getitem(self.x, self.key)

    def set(self, values):
        """A copy of `x` with `x[idx] = values` (the last write wins for repeated indices)."""
        return _scatter(ops.scatter, self.x, self.key, values)

    def add(self, values):
        """A copy of `x` with `values` added at `idx`; repeated indices accumulate (as
        `np.add.at`)."""
        return _scatter(ops.scatter_add, self.x, self.key, values)


class at:
    """Functional updates: `tnp.at(x)[idx].set(v)` / `.add(v)` return new arrays and leave
    `x` unchanged.

    >>> tnp.at(x)[0, 1:].set(0.0)
    >>> tnp.at(x)[idx].add(1.0)   # repeated indices accumulate
    """

    __slots__ = ("x",)

    def __init__(self, x):
        self.x = read(x)

    def __getitem__(self, key):
        return _IndexUpdate(self.x, key)


def _scatter(fn, x, key, values):
    shape = shape_of(x)
    dtype = dtype_of(x)[0]
    direct = _single_axis(key, len(shape))
    if direct is not None:
        axis, idx = direct
        idx = _index_operand(idx, shape[axis], axis)
        target = shape[:axis] + shape_of(idx) + shape[axis + 1:]
        return fn(x, idx, broadcast_to_shape(cast(read(values), dtype), target, (x, idx)),
                  axis=axis)
    size = None if None in shape else int(np.prod(shape, dtype=np.int64))
    dyn = [] if size is not None else [_flat_size(x)]
    flat_pos = ops.iota(*dyn, dtype=dtypes.int64, shape=(size,), dimension=0)
    positions = _reshape(flat_pos, shape, "at")
    selected = getitem(positions, key)
    sel_shape = shape_of(selected)
    updates = broadcast_to_shape(cast(read(values), dtype), sel_shape, (selected,))
    flat = _reshape(x, (size,), "at")
    out = fn(flat, _reshape(selected, (_size(sel_shape),), "at"),
             _reshape(updates, (_size(sel_shape),), "at"), axis=0)
    return _reshape(out, shape, "at")


def _size(shape):
    return None if None in shape else int(np.prod(shape, dtype=np.int64))


def _flat_size(x):
    total = None
    for i, d in enumerate(shape_of(x)):
        n = ops.dim_size(x, axis=i) if d is None else _const(np.asarray(d, np.int64))
        total = n if total is None else ops.mul(total, n)
    return total


def _single_axis(key, ndim):
    """`(axis, index)` when `key` is one integer index (array or int) with full slices
    elsewhere — a direct scatter along that axis."""
    items = key if isinstance(key, tuple) else (key,)
    found = None
    for i, k in enumerate(items):
        if isinstance(k, slice) and k == slice(None):
            continue
        if found is not None or k is None or k is Ellipsis or isinstance(k, (slice, bool)):
            return None
        v = k if isinstance(k, (int, np.integer)) else _index_value(k)
        if isinstance(v, (int, np.integer)):
            v = np.asarray(int(v), np.int64)
        if not dtypes.is_int(dtype_of(v)[0]):
            return None
        found = (i, v)
    if found is None or len(items) > ndim:
        return None
    return found

