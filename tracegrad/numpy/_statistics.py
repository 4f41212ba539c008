"""Statistics and NaN-ignoring reductions composed of the reductions: nansum ... nanvar,
nanargmax/nanargmin, nancumsum/nancumprod, ptp, average, quantile/percentile/median,
cumulative_sum/prod, diff, ediff1d, count_nonzero.

Order statistics sort along the axis and interpolate between neighbours, so their
gradient flows to the one or two elements they pick (as JAX's, through `sort`); `nanmax`
and `nanmin` pass it to the extreme element, never to a NaN.
"""

from __future__ import annotations

import operator

import numpy as np

from tracegrad.core import dtypes
from tracegrad.core.ir import GraphTensor
from tracegrad.errors import ArgumentTypeError, DTypeError, InvalidArgumentError, ShapeError
from tracegrad.numpy._core import (
    axes_arg,
    axis_arg,
    dtype_of,
    has_float_dtype,
    ndim_of,
    read,
    shape_of,
    static_dim,
)
from tracegrad.numpy._creation import astype, full_like
from tracegrad.numpy._indexing import take, take_along_axis
from tracegrad.numpy._pad import pad
from tracegrad.numpy._reductions import all as _all
from tracegrad.numpy._reductions import (
    argmax,
    argmin,
    cumprod,
    cumsum,
    mean,
    prod,
    sort,
    var,
)
from tracegrad.numpy._reductions import (
    max as _max,
)
from tracegrad.numpy._reductions import (
    min as _min,
)
from tracegrad.numpy._reductions import sum as _sum
from tracegrad.numpy._shape import (
    _slice_axis,
    broadcast_to,
    concatenate,
    expand_dims,
    moveaxis,
    ravel,
    reshape,
    transpose,
)
from tracegrad.numpy._ufuncs import (
    abs_squared,
    add,
    greater,
    isnan,
    logical_not,
    multiply,
    not_equal,
    sqrt,
    subtract,
    true_divide,
    where,
)


def _replace_nan(a, value):
    a = read(a)
    return where(isnan(a), value, a) if has_float_dtype(a) else a


def nansum(a, axis=None, dtype=None, keepdims=False):
    """`sum` treating NaN as 0."""
    return _sum(_replace_nan(a, 0), axis, dtype, keepdims)


def nanprod(a, axis=None, dtype=None, keepdims=False):
    """`prod` treating NaN as 1."""
    return prod(_replace_nan(a, 1), axis, dtype, keepdims)


def nancumsum(a, axis=None, dtype=None):
    """`cumsum` treating NaN as 0."""
    return cumsum(_replace_nan(a, 0), axis, dtype)


def nancumprod(a, axis=None, dtype=None):
    """`cumprod` treating NaN as 1."""
    return cumprod(_replace_nan(a, 1), axis, dtype)


def _nan_ignoring(reduce, fill, name, all_nan):
    """`reduce` over `a` with its NaNs replaced by `fill` (a value that never wins); where a
    slice is all NaN, `all_nan` (None: what `reduce` gives there)."""
    def fn(a, axis=None, keepdims=False):
        a = read(a)
        if not has_float_dtype(a):
            return reduce(a, axis, keepdims)
        nan = isnan(a)
        m = reduce(where(nan, fill, a), axis, keepdims)
        return m if all_nan is None else where(_all(nan, axis, keepdims), all_nan, m)

    fn.__name__ = fn.__qualname__ = name
    tail = ("NaN where a slice is all NaN, where NumPy also warns" if all_nan is not None
            else "0 for an all-NaN slice, where NumPy raises ValueError")
    fn.__doc__ = f"`{reduce.__name__}` ignoring NaNs ({tail})."
    return fn


nanmax = _nan_ignoring(_max, -np.inf, "nanmax", np.nan)
nanmin = _nan_ignoring(_min, np.inf, "nanmin", np.nan)
nanargmax = _nan_ignoring(argmax, -np.inf, "nanargmax", None)
nanargmin = _nan_ignoring(argmin, np.inf, "nanargmin", None)


def _count(a, axis, keepdims, dtype):
    return _sum(logical_not(isnan(a)), axis, dtype, keepdims)


def nanmean(a, axis=None, dtype=None, keepdims=False):
    """`mean` of the non-NaN elements (NaN for an all-NaN slice)."""
    a = read(a)
    if not has_float_dtype(a):
        return mean(a, axis, dtype, keepdims)
    dt = dtype or dtype_of(a)[0]
    return true_divide(nansum(a, axis, dt, keepdims), _count(a, axis, keepdims, dt))


def nanvar(a, axis=None, dtype=None, ddof=0, keepdims=False):
    """`var` of the non-NaN elements: `sum(|a - nanmean|**2) / (n - ddof)`."""
    a = read(a)
    if not has_float_dtype(a):
        return var(a, axis, dtype, ddof, keepdims)
    dt = dtype or dtype_of(a)[0]
    mu = nanmean(a, axis, dt, keepdims=True)
    d = _replace_nan(subtract(a, mu), 0)  # before squaring: no NaN reaches the gradient
    dt = dtypes.real_dtype(dtypes.canonicalize(dt))  # a real variance for complex a
    total = _sum(abs_squared(d), axis, dt, keepdims)
    n = subtract(_count(a, axis, keepdims, dt), ddof)
    empty = n <= 0  # NaN there, as NumPy, and no 0 * (1/0) in the other slices' gradients
    return where(empty, np.nan, true_divide(total, where(empty, 1, n)))


def nanstd(a, axis=None, dtype=None, ddof=0, keepdims=False):
    """`sqrt(nanvar(...))`."""
    return sqrt(nanvar(a, axis, dtype, ddof, keepdims))


def ptp(a, axis=None, keepdims=False):
    """`max - min` over `axis` ("peak to peak"), in `a`'s dtype."""
    return subtract(_max(a, axis, keepdims), _min(a, axis, keepdims))


def count_nonzero(a, axis=None, *, keepdims=False):
    """The number of non-zero elements over `axis` (int64)."""
    a = read(a)
    return _sum(not_equal(a, 0) if dtype_of(a)[0] != dtypes.bool_ else a, axis, None,
                keepdims)


def average(a, axis=None, weights=None, returned=False, *, keepdims=False):
    """The weighted mean over `axis`: `sum(a * w) / sum(w)` (`mean` without weights); a
    1-D `weights` with an `axis` runs along that axis. `returned=True` also gives the sum
    of the weights (broadcast to the result)."""
    a = read(a)
    if weights is None:
        avg = mean(a, axis, keepdims=keepdims)
        if not returned:
            return avg
        n = np.asarray(int(np.prod([shape_of(a)[i] for i in axes_arg(axis, ndim_of(a),
                                                                     "average")])))
        return avg, full_like(avg, n)
    w = read(weights)
    dt = np.result_type(*(dtype_of(x)[0] for x in (a, w)), *(
        () if has_float_dtype(a) else (np.float64,)))
    if shape_of(w) != shape_of(a):
        if axis is None:
            raise ShapeError("average: axis must be specified when shapes of a and weights "
                             "differ")
        if ndim_of(w) != 1:
            raise ShapeError("average: 1D weights expected when shapes of a and weights "
                             "differ")
        ax = axis_arg(axis, ndim_of(a), "average")
        shape = [1] * ndim_of(a)
        shape[ax] = shape_of(w)[0]
        w = reshape(w, tuple(shape))
    a, w = astype(a, dt), astype(w, dt)
    scl = _sum(multiply(full_like(a, 1), w), axis, keepdims=keepdims)
    avg = true_divide(_sum(multiply(a, w), axis, keepdims=keepdims), scl)
    return (avg, scl) if returned else avg


# -- order statistics ------------------------------------------------------------------------

_METHODS = ("linear", "lower", "higher", "midpoint", "nearest")


def _check_quantile_args(op, out, weights, method):
    if out is not None or weights is not None:
        raise InvalidArgumentError(f"{op}: out= and weights= are not supported")
    if method not in _METHODS:
        raise InvalidArgumentError(f"{op}: method={method!r} is not supported; use one of "
                                   f"{', '.join(_METHODS)}")


def quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
             keepdims=False, *, weights=None):
    """The `q`-th quantiles (static `q` in [0, 1]) over `axis`, interpolated by `method`
    ("linear", "lower", "higher", "midpoint", "nearest") between the sorted neighbours, as
    NumPy computes them; NaN where a slice holds a NaN. `q`'s dims come first."""
    _check_quantile_args("quantile", out, weights, method)
    return _quantile(read(a), q, axis, method, keepdims, "quantile")


def percentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
               keepdims=False, *, weights=None):
    """`quantile(a, q / 100, ...)`."""
    return quantile(a, _static_q(q, "percentile") / 100, axis, out, overwrite_input, method,
                    keepdims, weights=weights)


def median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """The median over `axis`: the middle element of the sorted slice, or the mean of the
    two middle ones (NaN where a slice holds a NaN)."""
    if out is not None:
        raise InvalidArgumentError("median: out= is not supported")
    return _quantile(read(a), 0.5, axis, "median", keepdims, "median")


def _static_q(q, op):
    if type(q) in (int, float):
        return float(q)
    if isinstance(q, GraphTensor):
        raise ArgumentTypeError(f"{op}: q must be known while tracing (a Python number or a "
                                "NumPy array), got a traced tensor")
    q = np.asarray(q)
    return np.asarray(q, dtype=np.float64) if q.dtype.kind != "f" else q


def _quantile(a, q, axis, method, keepdims, op):
    q = _static_q(q, op)
    weak_q = type(q) is float
    qs = np.asarray(q, dtype=np.float64)
    if np.any((qs < 0) | (qs > 1)):
        raise InvalidArgumentError(f"{op}: Quantiles must be in the range [0, 1]")
    nd = ndim_of(a)
    if axis is None:
        a, ax = ravel(a), 0
    else:
        axes = axes_arg(axis, nd, op)
        if len(axes) != 1:
            keep = [i for i in range(nd) if i not in axes]
            moved = transpose(a, keep + list(axes))
            a = reshape(moved, tuple(shape_of(moved)[:len(keep)]) + (-1,))
            ax = len(keep)
        else:
            ax = axes[0]
    n = static_dim(a, ax, op, "quantiles need a static size along the axis")
    if n == 0:
        raise ShapeError(f"{op}: cannot take a quantile of an empty slice")
    src = dtype_of(a)[0]
    if dtypes.is_complex(src) and op != "median":
        raise DTypeError(f"{op}: a must be an array of real numbers (NumPy's rule)")
    if method in ("lower", "higher", "nearest"):
        out_dt = src
    elif weak_q:
        out_dt = src if dtypes.is_inexact(src) else dtypes.float64
    else:
        out_dt = np.result_type(src if dtypes.is_float(src) else dtypes.float64, qs.dtype)
    s = sort(a, axis=ax)
    virtual = (n - 1) * qs
    lo = np.floor(virtual).astype(np.int64)
    hi = np.minimum(lo + 1, n - 1)
    if method == "lower":
        picked = take(s, lo, axis=ax)
    elif method == "higher":
        picked = take(s, np.ceil(virtual).astype(np.int64), axis=ax)
    elif method == "nearest":
        picked = take(s, np.around(virtual).astype(np.int64), axis=ax)
    else:
        left = take(s, lo, axis=ax)
        right = take(s, np.where(virtual > lo, hi, lo), axis=ax)
        if method == "median":  # NumPy's median: the mean of the middle two
            picked = true_divide(add(astype(left, out_dt), astype(right, out_dt)), 2)
        else:
            gamma = virtual - lo if method == "linear" else np.where(virtual > lo, 0.5, 0.0)
            g, g1 = (_expand_to(np.asarray(t, out_dt), qs.ndim, ax, ndim_of(s))
                     for t in (gamma, 1 - gamma))
            picked = _lerp(left, right, g, g1, _expand_to(gamma >= 0.5, qs.ndim, ax, ndim_of(s)),
                           out_dt)
    if has_float_dtype(s):
        last = take(s, n - 1 if qs.ndim == 0 else np.full((1,) * qs.ndim, n - 1), axis=ax)
        picked = where(isnan(last), np.nan, picked)
    picked = astype(picked, out_dt)
    if qs.ndim:
        picked = moveaxis(picked, ax, 0)
    if keepdims:
        picked = _keepdims(picked, axis, nd, qs.ndim)
    return picked


def _lerp(left, right, g, g1, upper, out_dt):
    """NumPy's `_lerp`: `right - d * g1` where `upper`, else `left + d * g`, with the
    difference `d` taken in the dtype of the values (then promoted with `g`)."""
    if dtype_of(left)[0] == dtypes.bool_:
        left, right = astype(left, out_dt), astype(right, out_dt)
    d = subtract(right, left)
    return where(upper, subtract(right, multiply(d, g1)), add(left, multiply(d, g)))


def _expand_to(v, q_ndim, ax, nd):
    """A NumPy array over `q`'s dims placed at `ax` in a rank-`nd` result of `take`."""
    if q_ndim == 0:
        return v
    return v.reshape((1,) * ax + v.shape + (1,) * (nd - ax - 1))


def _keepdims(x, axis, nd, q_ndim):
    axes = axes_arg(axis, nd, "quantile") if axis is not None else tuple(range(nd))
    return expand_dims(x, tuple(q_ndim + i for i in axes)) if q_ndim else \
        expand_dims(x, axes)


# -- differences and running totals ----------------------------------------------------------


def diff(a, n=1, axis=-1, prepend=None, append=None):
    """The `n`-th discrete difference along `axis` (`a[1:] - a[:-1]`, `!=` for bools), with
    `prepend` / `append` joined first."""
    a = read(a)
    n = operator.index(n)
    if n < 0:
        raise InvalidArgumentError(f"diff: order must be non-negative but got {n}")
    if n == 0:
        return a
    nd = ndim_of(a)
    if nd == 0:
        raise ShapeError("diff: requires input that is at least one dimensional")
    ax = axis_arg(axis, nd, "diff")
    parts = []
    for extra in (prepend, a, append):
        if extra is None:
            continue
        extra = read(extra)
        if ndim_of(extra) == 0:
            shape = list(shape_of(a))
            shape[ax] = 1
            extra = broadcast_to(extra, tuple(shape))
        parts.append(extra)
    if len(parts) > 1:
        a = concatenate(parts, ax)
    size = static_dim(a, ax, "diff", "diff along a dim of static size")
    op = not_equal if dtype_of(a)[0] == dtypes.bool_ else subtract
    for _ in range(n):
        a = op(_slice_axis(a, ax, min(1, size), size), _slice_axis(a, ax, 0, max(size - 1, 0)))
        size = max(size - 1, 0)
    return a


def ediff1d(ary, to_end=None, to_begin=None):
    """The differences of consecutive elements of the flattened `ary`, with `to_begin` and
    `to_end` (flattened) around them; in `ary`'s dtype."""
    flat = ravel(read(ary))
    d = diff(flat) if static_dim(flat, 0, "ediff1d") else flat
    dt = dtype_of(flat)[0]
    ends = []
    for name, x in (("to_begin", to_begin), ("to_end", to_end)):
        if x is not None:
            x = ravel(read(x))
            if not np.can_cast(dtype_of(x)[0], dt, "same_kind"):
                raise DTypeError(f"ediff1d: dtype of {name} ({dtype_of(x)[0].name}) must be "
                                 f"compatible with the input's ({dt.name}) under the "
                                 "same_kind rule")
            ends.append(astype(x, dt))
    parts = ends[:1] + [d] + ends[1:] if to_begin is not None else [d] + ends
    return concatenate(parts, 0) if len(parts) > 1 else d


def _cumulative(fn, name, initial):
    def cumulative(x, /, *, axis=None, dtype=None, include_initial=False):
        x = read(x)
        if axis is None:
            if ndim_of(x) > 1:
                raise ShapeError(f"{name}: axis must be given for arrays of more than one "
                                 "dim")
            axis = 0
        out = fn(x, axis, dtype)
        if include_initial:
            ax = axis_arg(axis, ndim_of(out), name)
            config = [(0, 0)] * ndim_of(out)
            config[ax] = (1, 0)
            out = pad(out, config, constant_values=initial)
        return out

    cumulative.__name__ = cumulative.__qualname__ = name
    cumulative.__doc__ = (f"NumPy 2's `{name}`: `{fn.__name__}` along `axis` (required beyond "
                          f"1-D), with `include_initial` prepending {initial}.")
    return cumulative


cumulative_sum = _cumulative(cumsum, "cumulative_sum", 0)
cumulative_prod = _cumulative(cumprod, "cumulative_prod", 1)



# -- NaN-ignoring order statistics ------------------------------------------------------------


def nanquantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                keepdims=False, *, weights=None):
    """`quantile` of the non-NaN elements of each slice (NaN for an all-NaN slice): NaNs
    sort last, so the positions interpolated between are `(count - 1) * q` of the sorted
    slice, computed per slice (a gather at traced indices)."""
    _check_quantile_args("nanquantile", out, weights, method)
    return _nanquantile(read(a), q, axis, method, keepdims, "nanquantile")


def nanpercentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                  keepdims=False, *, weights=None):
    """`nanquantile(a, q / 100, ...)`."""
    return nanquantile(a, _static_q(q, "nanpercentile") / 100, axis, out, overwrite_input,
                       method, keepdims, weights=weights)


def nanmedian(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """The median of the non-NaN elements over `axis` (NaN for an all-NaN slice)."""
    if out is not None:
        raise InvalidArgumentError("nanmedian: out= is not supported")
    return _nanquantile(read(a), 0.5, axis, "median", keepdims, "nanmedian")


def _nanquantile(a, q, axis, method, keepdims, op):
    if not has_float_dtype(a):  # no NaN to ignore
        return _quantile(a, q, axis, method, keepdims, op)
    q = _static_q(q, op)
    qs = np.asarray(q, dtype=np.float64)
    if np.any((qs < 0) | (qs > 1)):
        raise InvalidArgumentError(f"{op}: Quantiles must be in the range [0, 1]")
    nd = ndim_of(a)
    if axis is None:
        x = ravel(a)
    else:
        axes = axes_arg(axis, nd, op)
        keep = [i for i in range(nd) if i not in axes]
        moved = transpose(a, keep + list(axes))
        x = reshape(moved, tuple(shape_of(moved)[:len(keep)]) + (-1,))
    n = static_dim(x, -1, op, "quantiles need a static size along the axis")
    if n == 0:
        raise ShapeError(f"{op}: cannot take a quantile of an empty slice")
    out_dt = dtype_of(a)[0] if type(q) is float or method in ("lower", "higher", "nearest") \
        else np.result_type(dtype_of(a)[0], qs.dtype)
    s = sort(x, axis=-1)
    nan = isnan(x)
    count = _sum(logical_not(nan), axis=-1, keepdims=True)  # int64, (..., 1)
    last = subtract(count, 1)
    virtual = multiply(astype(last, np.float64), qs.reshape(-1))  # (..., nq)
    from tracegrad.numpy._ufuncs import around, ceil, clip, floor, greater_equal

    def at(i, dt=out_dt):
        return astype(take_along_axis(s, clip(i, 0, n - 1), axis=-1), dt)

    if method == "lower":
        picked = at(astype(floor(virtual), np.int64))
    elif method == "higher":
        picked = at(astype(ceil(virtual), np.int64))
    elif method == "nearest":
        picked = at(astype(around(virtual), np.int64))
    else:
        lo_f = floor(virtual)
        lo = astype(lo_f, np.int64)
        above = greater_equal(virtual, astype(last, np.float64))
        lo = where(above, last, lo)
        hi = where(above, last, where(greater(virtual, lo_f), add(lo, 1), lo))
        if method == "median":
            picked = true_divide(add(at(lo), at(hi)), 2)
        else:
            gamma = subtract(virtual, lo_f)  # float64, as NumPy's (1 - gamma too)
            if method == "midpoint":
                gamma = where(greater(gamma, 0), 0.5, 0.0)
            src = dtype_of(s)[0]
            picked = _lerp(at(lo, src), at(hi, src), astype(gamma, out_dt),
                           astype(subtract(1.0, gamma), out_dt), greater_equal(gamma, 0.5),
                           out_dt)
    picked = where(count > 0, picked, np.nan)
    picked = astype(picked, out_dt)
    if qs.ndim:
        picked = reshape(moveaxis(picked, -1, 0), qs.shape + tuple(shape_of(picked)[:-1]))
    else:
        picked = reshape(picked, tuple(shape_of(picked)[:-1]))
    if keepdims:
        picked = _keepdims(picked, axis, nd, qs.ndim)
    return picked
