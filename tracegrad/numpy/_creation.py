"""Array creation and conversion: asarray, astype, zeros/ones/full(_like), arange, linspace,
eye, identity.

Sizes are static (Python ints). Eagerly, with no tensor among the arguments, these return
NumPy arrays (as NumPy's own functions do); inside a traced function they build small
graphs (a broadcast scalar, an iota) rather than embedding large constants.
"""

from __future__ import annotations

import math
import operator

import numpy as np

from tracegrad import ops
from tracegrad.core import dtypes
from tracegrad.core.ir import EagerTensor
from tracegrad.core.state import state
from tracegrad.errors import DTypeError, InvalidArgumentError, ShapeError, ZeroStepError
from tracegrad.numpy._core import (
    broadcast_to_shape,
    cast,
    dim_source,
    dtype_arg,
    dtype_of,
    is_tensor,
    promote,
    read,
    shape_of,
)
from tracegrad.numpy._views import unviewed


def _shape_arg(shape, op: str) -> tuple:
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    out = []
    for d in shape:
        if d is None or (is_tensor(d) and not hasattr(d, "_value")):
            raise ShapeError(
                f"{op}: shape {tuple(shape)} has a dim unknown while tracing; use "
                f"{op}_like(x) to take the shape of a tensor instead"
            )
        d = operator.index(d)
        if d < 0:
            raise ShapeError(f"{op}: negative dimensions are not allowed, got "
                             f"{tuple(shape)}")
        out.append(d)
    return tuple(out)


def _symbolic(*args) -> bool:
    return state.graph is not None or any(is_tensor(a) for a in args)


def _scalar(value, dtype):
    if np.iscomplexobj(value) and np.dtype(dtype).kind != "c":
        value = np.real(value)  # NumPy's cast of a complex value to a real dtype
    value = np.asarray(value, dtype=dtype)
    return state.graph.constant(value) if state.graph is not None else value


def asarray(a, dtype=None):
    """`a` as an array: tensors stay tensors (cast to `dtype` if given), anything else
    becomes a NumPy array of a supported dtype."""
    dt = dtype_arg(dtype, "asarray")
    a = read(a)
    if dt is None:
        return np.asarray(a, dtype=dtypes.canonicalize(np.asarray(a).dtype, op="asarray")) \
            if type(a) in (bool, int, float, complex) else a
    if type(a) in (bool, int, float, complex):
        return np.asarray(a, dtype=dt)
    return cast(a, dt)


def astype(x, dtype, /, *, copy=True, device=None):
    """`x` cast to `dtype` (float -> int truncates toward zero); no op if it already is
    (with `copy=False`, a view stays a view)."""
    out = cast(read(x), dtype_arg(dtype, "astype"))
    return unviewed(out) if copy else out


def full(shape, fill_value, dtype=None):
    """An array of `shape` filled with `fill_value` (a scalar or a broadcastable array)."""
    return _full(shape, fill_value, dtype, "full")


def _full(shape, fill_value, dtype, op):
    shape = _shape_arg(shape, op)
    dt = dtype_arg(dtype, op)
    if not _symbolic(fill_value):
        fill = np.asarray(fill_value)
        return np.full(shape, fill_value, dtype=dt or dtypes.canonicalize(fill.dtype))
    fill = read(fill_value)
    if dt is not None:
        fill = cast(fill, dt)
    elif type(fill) in (bool, int, float, complex):
        fill = np.asarray(fill, dtype=dtype_of(fill)[0])
    return broadcast_to_shape(_constant_or(fill), shape)


def _constant_or(x):
    if isinstance(x, np.ndarray) and state.graph is not None:
        return state.graph.constant(x)
    return x


def zeros(shape, dtype=float):
    """An array of `shape` filled with 0 (float64 by default)."""
    return _full(shape, 0, dtype_arg(dtype, "zeros"), "zeros")


def ones(shape, dtype=float):
    """An array of `shape` filled with 1 (float64 by default)."""
    return _full(shape, 1, dtype_arg(dtype, "ones"), "ones")


def full_like(a, fill_value, dtype=None, shape=None):
    """An array with `a`'s shape (or `shape`) and dtype (or `dtype`) filled with
    `fill_value`; unknown dims of `a` are read at run time."""
    a = read(a)
    dt = dtype_arg(dtype, "full_like") or dtype_of(a)[0]
    if shape is not None:
        return full(shape, fill_value, dt)
    if not _symbolic(a, fill_value):
        return np.full(np.shape(a), fill_value, dtype=dt)
    if state.graph is None and not is_tensor(fill_value):
        return EagerTensor(np.full(shape_of(a), fill_value, dtype=dt))
    fill = read(fill_value)
    fill = cast(fill, dt) if is_tensor(fill) else _scalar(fill, dt)
    return broadcast_to_shape(fill, shape_of(a), (a,))


def zeros_like(a, dtype=None, shape=None):
    """Zeros with `a`'s shape and dtype."""
    return full_like(a, 0, dtype, shape)


def ones_like(a, dtype=None, shape=None):
    """Ones with `a`'s shape and dtype."""
    return full_like(a, 1, dtype, shape)


# -- ranges ----------------------------------------------------------------------------------


def _static_number(x, op):
    x = read(x)
    if hasattr(x, "_value"):
        x = x._value
    if is_tensor(x):
        raise ShapeError(f"{op}: bounds given as traced tensors make the result size "
                         "data-dependent; pass Python numbers")
    return x.item() if isinstance(x, np.ndarray) else x


def arange(start, stop=None, step=None, dtype=None):
    """Evenly spaced values in `[start, stop)` with spacing `step` (static numbers):
    the same values as `np.arange`.

    >>> tnp.arange(5)          # [0 1 2 3 4], int64
    >>> tnp.arange(0.0, 1.0, 0.25)
    """
    start, stop, step = (_static_number(v, "arange") if v is not None else None
                         for v in (start, stop, step))
    if stop is None:
        start, stop = 0, start
    if step is None:
        step = 1
    if step == 0:
        raise ZeroStepError("arange: step must not be zero")
    dt = dtype_arg(dtype, "arange")
    if dt is None:
        dt = dtypes.canonicalize(np.result_type(start, stop, step), op="arange")
    if dt == dtypes.bool_:
        raise DTypeError("arange: a bool range is not supported")
    if state.graph is None:
        return np.arange(start, stop, step, dtype=dt)
    n = max(math.ceil((stop - start) / step), 0)
    first = np.asarray(start).astype(dt)
    second = np.asarray(start + step).astype(dt)
    with np.errstate(all="ignore"):
        delta = second - first
    y = ops.iota(dtype=dt, shape=(n,), dimension=0)
    y = ops.add(ops.mul(y, _splat(delta, n)), _splat(first, n))
    if n > 1 and first + delta != second:
        y = ops.concatenate(
            ops.slice(y, start_indices=(0,), limit_indices=(1,), strides=(1,)),
            state.graph.constant(second.reshape(1)),
            ops.slice(y, start_indices=(2,), limit_indices=(n,), strides=(1,)),
            dimension=0,
        )
    return y


def _splat(value, n):
    return broadcast_to_shape(state.graph.constant(np.asarray(value)), (n,))


def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0):
    """`num` evenly spaced values from `start` to `stop` (inclusive unless `endpoint=False`),
    computed as `np.linspace` does; `start`/`stop` may be arrays or tensors (the values
    then run along `axis`)."""
    num = operator.index(num)
    if num < 0:
        raise InvalidArgumentError(f"linspace: number of samples, {num}, must be non-negative")
    if not _symbolic(start, stop):
        return np.linspace(start, stop, num, endpoint, retstep,
                           dtype_arg(dtype, "linspace"), axis)
    div = (num - 1) if endpoint else num
    (start, stop), dt = promote(start, stop, min_kind="float")
    start, stop = (cast(v, dt) for v in (start, stop))
    out_dt = dtype_arg(dtype, "linspace") or dt
    from tracegrad.numpy._shape import concatenate, moveaxis
    from tracegrad.numpy._ufuncs import add, floor, multiply, subtract, true_divide

    delta = subtract(stop, start)
    nd = len(shape_of(delta))
    y = ops.iota(dtype=dt, shape=(num,), dimension=0)
    y = ops.reshape(y, new_sizes=(num,) + (1,) * nd) if nd else y
    if div > 0:
        step = true_divide(delta, np.asarray(div, dt))
        static_zero = isinstance(step, np.ndarray) and np.any(step == 0)
        y = multiply(true_divide(y, np.asarray(div, dt)), delta) if static_zero else \
            multiply(y, step)
    else:
        step = np.asarray(np.nan, dt)
        y = multiply(y, delta)
    y = add(y, start)
    if endpoint and num > 1:
        head = ops.slice(y, start_indices=(0,) * len(shape_of(y)),
                         limit_indices=(num - 1,) + tuple(shape_of(y)[1:]),
                         strides=(1,) * len(shape_of(y)))
        y = concatenate([head, ops.reshape(broadcast_to_shape(stop, shape_of(y)[1:]),
                                           new_sizes=(1,) + tuple(shape_of(y)[1:]))], 0)
    if axis != 0:
        y = moveaxis(y, 0, axis)
    if dtypes.is_int(out_dt):
        y = floor(y)
    y = cast(y, out_dt)
    return (y, step) if retstep else y


def eye(N, M=None, k=0, dtype=float):
    """The `N x M` matrix with ones on diagonal `k` (0: main, > 0: above)."""
    M = N if M is None else M
    N, M, k = operator.index(N), operator.index(M), operator.index(k)
    dt = dtype_arg(dtype, "eye")
    if state.graph is None:
        return np.eye(N, M, k, dtype=dt)
    return cast(diagonal_mask((N, M), k, ops.eq), dt)


def identity(n, dtype=None):
    """The `n x n` identity matrix (float64 by default)."""
    return eye(n, dtype=float if dtype is None else dtype)


def diagonal_mask(shape, k, compare, sources=()):
    """A bool `shape` (rows, cols) array that is `compare(col - row, k)`; unknown dims are read
    from `sources`."""
    shape = tuple(shape)
    dyn = [dim_source(sources, shape, i) for i, d in enumerate(shape) if d is None]
    rows = ops.iota(*dyn, dtype=dtypes.int64, shape=shape, dimension=0)
    cols = ops.iota(*dyn, dtype=dtypes.int64, shape=shape, dimension=1)
    offset = ops.sub(cols, rows)
    return compare(offset, broadcast_to_shape(_scalar(k, dtypes.int64), shape, (offset,)))

