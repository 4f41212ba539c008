"""Reductions with NumPy names: `axis=None|int|tuple`, `keepdims`, negative axes and NumPy's
result dtypes (narrower integer sums and products are int64 or uint64, means of integers
are float64)."""

from __future__ import annotations

import builtins

import numpy as np

from tracegrad import ops
from tracegrad.core import dtypes
from tracegrad.core.ir import EagerTensor
from tracegrad.numpy._core import (
    axes_arg,
    axis_arg,
    cast,
    count,
    dtype_arg,
    dtype_of,
    ndim_of,
    read,
    reshape,
    shape_of,
)
from tracegrad.numpy._ufuncs import abs_squared, sqrt, subtract, true_divide

# The integers NumPy sums and multiplies in a wider dtype (its platform integer).
_WIDENED = {dtypes.bool_: dtypes.int64, dtypes.int8: dtypes.int64, dtypes.int16: dtypes.int64,
            dtypes.int32: dtypes.int64, dtypes.uint8: dtypes.uint64,
            dtypes.uint16: dtypes.uint64, dtypes.uint32: dtypes.uint64}
_SMALL_INTS = tuple(_WIDENED)


def _accumulator(a, dtype, op: str) -> np.dtype:
    """The dtype NumPy sums/multiplies in: `dtype`, else int64 for bool and the narrower
    signed integers, uint64 for the narrower unsigned ones."""
    dt = dtype_arg(dtype, op)
    if dt is not None:
        return dt
    src = dtype_of(a)[0]
    return _WIDENED.get(src, src)


def _as(a, dtype):
    return cast(a, dtype, dtype_of(a)[1] and dtype == dtype_of(a)[0])


def _python_ints(a) -> bool:
    """Whether `a` is a tuple or list of Python ints (a shape): NumPy's sum or product of it
    is known while tracing, and stays a NumPy value."""
    return type(a) in (tuple, list) and builtins.all(type(d) is int for d in a)


def sum(a, axis=None, dtype=None, keepdims=False):
    """Sum of elements over `axis` (None: all). bool and integers narrower than 64 bits sum
    as int64 (uint64 when unsigned), as NumPy. A tuple or list of Python ints sums to
    NumPy's value also while tracing (an int64; 0.0 for an empty one, as NumPy).

    >>> tnp.sum(x, axis=(0, -1), keepdims=True)
    """
    if _python_ints(a):
        return np.sum(a, axis=axis, dtype=dtype, keepdims=keepdims)
    if type(a) is EagerTensor and dtype is None and a._value.dtype not in _SMALL_INTS:
        # An eager tensor summed in its own dtype: nothing to read or convert.
        return ops.reduce_sum(a, axes=axes_arg(axis, a._value.ndim, "sum"),
                              keepdims=bool(keepdims))
    a = read(a)
    axes = axes_arg(axis, ndim_of(a), "sum")
    a = _as(a, _accumulator(a, dtype, "sum"))
    return ops.reduce_sum(a, axes=axes, keepdims=bool(keepdims))


def prod(a, axis=None, dtype=None, keepdims=False):
    """Product of elements over `axis`; bool and narrower integers multiply as int64 (uint64
    when unsigned). A tuple or list of Python ints (a shape, as in `prod(x.shape[1:])`)
    multiplies to NumPy's value also while tracing, a size known when tracing: an int64,
    1.0 for an empty one (NumPy's float64 product of an empty float array)."""
    if _python_ints(a):
        return np.prod(a, axis=axis, dtype=dtype, keepdims=keepdims)
    if type(a) is EagerTensor and dtype is None and a._value.dtype not in _SMALL_INTS:
        return ops.reduce_prod(a, axes=axes_arg(axis, a._value.ndim, "prod"),
                               keepdims=bool(keepdims))
    a = read(a)
    axes = axes_arg(axis, ndim_of(a), "prod")
    a = _as(a, _accumulator(a, dtype, "prod"))
    return ops.reduce_prod(a, axes=axes, keepdims=bool(keepdims))


def max(a, axis=None, keepdims=False):
    """Largest element over `axis` (NaN if any is NaN); empty reductions raise ShapeError."""
    a = a if type(a) is EagerTensor else read(a)
    return ops.reduce_max(a, axes=axes_arg(axis, ndim_of(a), "max"), keepdims=bool(keepdims))


def min(a, axis=None, keepdims=False):
    """Smallest element over `axis` (NaN if any is NaN)."""
    a = a if type(a) is EagerTensor else read(a)
    return ops.reduce_min(a, axes=axes_arg(axis, ndim_of(a), "min"), keepdims=bool(keepdims))


amax = max
amin = min


def any(a, axis=None, keepdims=False):
    """Whether any element over `axis` is true (False for an empty reduction)."""
    a = cast(read(a), dtypes.bool_)
    return ops.reduce_sum(a, axes=axes_arg(axis, ndim_of(a), "any"), keepdims=bool(keepdims))


def all(a, axis=None, keepdims=False):
    """Whether every element over `axis` is true (True for an empty reduction)."""
    a = cast(read(a), dtypes.bool_)
    return ops.reduce_prod(a, axes=axes_arg(axis, ndim_of(a), "all"), keepdims=bool(keepdims))


def _float_accumulator(a, dtype, op: str) -> np.dtype:
    dt = dtype_arg(dtype, op)
    if dt is not None:
        return dt
    src = dtype_of(a)[0]
    return src if dtypes.is_inexact(src) else dtypes.float64


# The dtypes a mean is computed in when they are the operand's own.
_OWN_MEAN = frozenset((dtypes.float32, dtypes.float64, dtypes.complex64, dtypes.complex128))


def mean(a, axis=None, dtype=None, keepdims=False):
    """Arithmetic mean over `axis`; integers and bools average in float64, float16 in
    float32 (the result is float16), as NumPy. Over an unknown (None) dim the count is read
    at run time."""
    if type(a) is EagerTensor and dtype is None and a._value.dtype in _OWN_MEAN:
        # an eager tensor averaged in its own dtype: nothing to read or convert
        v = a._value
        axes = axes_arg(axis, v.ndim, "mean")
        total = ops.reduce_sum(a, axes=axes, keepdims=bool(keepdims))
        return true_divide(total, count(a, axes, v.dtype))
    a = read(a)
    axes = axes_arg(axis, ndim_of(a), "mean")
    dt = _float_accumulator(a, dtype, "mean")
    if dt == dtypes.float16 and dtype is None:
        return cast(mean(_as(a, dtypes.float32), axis, None, keepdims), dt)
    total = ops.reduce_sum(_as(a, dt), axes=axes, keepdims=bool(keepdims))
    if not dtypes.is_inexact(dt):
        # An integer dtype= sums in it and truncates the quotient, as NumPy does.
        return cast(true_divide(total, count(a, axes, dtypes.float64)), dt)
    return true_divide(total, count(a, axes, dt))


def var(a, axis=None, dtype=None, ddof=0, keepdims=False):
    """Variance over `axis`: `sum(|a - mean|**2) / (n - ddof)`, computed as NumPy does
    (real for complex `a`)."""
    a = read(a)
    axes = axes_arg(axis, ndim_of(a), "var")
    dt = _float_accumulator(a, dtype, "var")
    n = count(a, axes, dt)
    mu = true_divide(ops.reduce_sum(_as(a, dt), axes=axes, keepdims=True), n)
    x = abs_squared(subtract(a, mu))
    if dt != dtypes.real_dtype(dt):  # complex a: a real variance
        dt = dtypes.real_dtype(dt)
        n = cast(n, dt) if isinstance(n, np.ndarray) else n
    total = ops.reduce_sum(_as(x, dt), axes=axes, keepdims=bool(keepdims))
    if isinstance(n, np.ndarray):
        denom = np.maximum(n.astype(np.float64) - ddof, 0.0)
        if denom.astype(dt) == denom:
            return true_divide(total, denom.astype(dt))
        return cast(true_divide(cast(total, dtypes.float64), denom), dt)
    denom = ops.max_(ops.sub(cast(n, dtypes.float64), np.asarray(float(ddof))),
                     np.asarray(0.0))
    return cast(true_divide(cast(total, dtypes.float64), denom), dt)


def std(a, axis=None, dtype=None, ddof=0, keepdims=False):
    """Standard deviation over `axis`: `sqrt(var(a, axis, dtype, ddof))`."""
    return sqrt(var(a, axis, dtype, ddof, keepdims))


def _arg_reduction(prim, name):
    def fn(a, axis=None, keepdims=False):
        a = read(a)
        nd = ndim_of(a)
        if axis is None:
            flat = reshape(a, (_flat_size(a),), name)
            out = prim.bind(flat, axis=0)
            return reshape(out, (1,) * nd, name) if keepdims else out
        return prim.bind(a, axis=axis_arg(axis, nd, name), keepdims=bool(keepdims))

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"Index (int64) of the first {name[3:]}imum along `axis` (None: of the "
                  "flattened array); NaN counts as the extreme.")
    return fn


def _flat_size(a):
    return _flat_size_of(shape_of(a))


argmax = _arg_reduction(ops.argmax_p, "argmax")
argmin = _arg_reduction(ops.argmin_p, "argmin")


def ravel_for_axis(a, axis, op):
    """`(a, axis)` with `a` flattened when `axis` is None (NumPy's rule for cumsum, sort ...)."""
    a = read(a)
    if axis is None:
        return reshape(a, (_flat_size(a),), op), 0
    return a, axis_arg(axis, ndim_of(a), op)


def _cumulative(prim, name):
    def fn(a, axis=None, dtype=None):
        a, ax = ravel_for_axis(a, axis, name)
        return prim.bind(_as(a, _accumulator(a, dtype, name)), axis=ax)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"Running {name[3:]} along `axis` (None: of the flattened array); bool and "
                  "narrower integers accumulate as int64 (uint64 when unsigned).")
    return fn


cumsum = _cumulative(ops.cumsum_p, "cumsum")
cumprod = _cumulative(ops.cumprod_p, "cumprod")


def sort(a, axis=-1, kind=None, stable=None):
    """`a` sorted ascending along `axis` (None: flattened); NaNs last. Every sort is stable,
    so `kind` and `stable` do not change the result."""
    a, ax = ravel_for_axis(a, axis, "sort")
    return ops.sort(a, axis=ax)


def argsort(a, axis=-1, kind=None, stable=None):
    """Indices (int64) that sort `a` along `axis` (None: flattened). Always stable (as NumPy's
    `kind="stable"`): equal elements keep their order."""
    a, ax = ravel_for_axis(a, axis, "argsort")
    return ops.argsort(a, axis=ax)



def _flat_size_of(s):
    n = 1
    for d in s:
        if d is None:
            return None
        n *= d
    return n
