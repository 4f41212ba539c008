"""Counting into bins: bincount, histogram, histogram_bin_edges, histogram2d, histogramdd.

An integer bin count fixes the result's shape, so these trace: the edges are NumPy's
(`linspace` between the data's min and max, or `range`), each value's bin is found by
comparing it with the edges (`searchsorted`), and the counts are a `scatter_add` of ones or
of the weights in element order, as NumPy's `bincount` adds them. Counts have no gradient;
weights and (through the edges) a density's bin widths do. `bincount`'s length depends on
the largest value: inside a trace it needs jax.numpy's static `length=`.
"""

from __future__ import annotations

import operator

import numpy as np

from tracegrad.core import dtypes
from tracegrad.core.ir import EagerTensor
from tracegrad.errors import DTypeError, InvalidArgumentError, ShapeError
from tracegrad.numpy._core import dtype_of, is_tensor, ndim_of, read, shape_of, static_dim
from tracegrad.numpy._creation import astype, linspace, zeros
from tracegrad.numpy._datadep import _size_arg, _traced
from tracegrad.numpy._indexing import at, take
from tracegrad.numpy._reductions import max as _max
from tracegrad.numpy._reductions import min as _min
from tracegrad.numpy._reductions import sum as _sum
from tracegrad.numpy._sequences import searchsorted
from tracegrad.numpy._sets import _tensors, _value
from tracegrad.numpy._shape import ravel, reshape, stack, transpose
from tracegrad.numpy._statistics import diff
from tracegrad.numpy._ufuncs import (
    add,
    equal,
    greater_equal,
    less,
    logical_and,
    multiply,
    subtract,
    true_divide,
)
from tracegrad.numpy._ufuncs import where as _where
from tracegrad.numpy._views import unviewed


def _by_numpy(name: str, fn, *args):
    """`fn(*args)`, NumPy's own result, its argument errors as InvalidArgumentError naming
    `name`."""
    try:
        return fn(*args)
    except (ValueError, TypeError) as e:
        raise InvalidArgumentError(f"{name}: {e}") from None

def _concrete(x) -> bool:
    return not is_tensor(x) or isinstance(x, EagerTensor)


def _add_at(index, weights, length: int, dtype):
    """`bincount(index, weights, length)`: the `weights` (ones when None) summed per index
    in element order; indices outside `[0, length)` are dropped."""
    if length == 0:
        return np.zeros(0, dtype)
    ok = logical_and(greater_equal(index, 0), less(index, length))
    w = np.ones((), dtype) if weights is None else astype(weights, dtype)
    w = _where(ok, w, np.zeros((), dtype))
    return at(zeros(length, dtype))[_where(ok, index, np.int64(0))].add(w)


def bincount(x, weights=None, minlength=0, *, length=None):
    """The number of times each value `0, 1, ...` occurs in the 1-D non-negative integer
    `x` (the sum of `weights` there, float64), as `np.bincount`; `max(x) + 1` entries, at
    least `minlength`. The length depends on the values: inside a trace pass a static
    `length=` (as jax.numpy; values outside `[0, length)` are then dropped)."""
    x = read(x)
    weights = None if weights is None else read(weights)
    if weights is not None and dtypes.is_complex(dtype_of(weights)[0]):
        raise DTypeError("bincount: complex weights are not supported (as NumPy's)")
    if ndim_of(x) != 1:
        raise ShapeError(f"bincount: x must be 1-D, got {ndim_of(x)}-D")
    dt = dtype_of(x)[0]
    if not (dtypes.is_int(dt) or dt == np.bool_):
        raise DTypeError(f"bincount: x must be integers, got {dt.name}")
    minlength = operator.index(minlength)
    if minlength < 0:
        raise InvalidArgumentError(f"bincount: minlength must be non-negative, got {minlength}")
    if weights is not None and shape_of(weights) != shape_of(x):
        raise ShapeError(f"bincount: weights of shape {shape_of(weights)} do not match x of "
                         f"shape {shape_of(x)}")
    if length is None:
        if _traced(x):
            raise InvalidArgumentError(
                "bincount: the result length depends on the values of a traced tensor; pass "
                "a static length= (values outside [0, length) are dropped), as in jax.numpy")
        value = _value(x).astype(np.int64)
        if value.size and value.min() < 0:
            raise InvalidArgumentError("bincount: x must be non-negative")
        if not (is_tensor(x) or is_tensor(weights)):
            return np.bincount(value, None if weights is None else _value(weights), minlength)
        length = max(int(value.max()) + 1 if value.size else 0, minlength)
    length = _size_arg(length, "bincount")
    dtype = np.int64 if weights is None else np.float64
    return _tensors(_add_at(astype(x, np.int64), weights, length, dtype), [x, weights])


# -- edges -------------------------------------------------------------------------------------


def _outer_edges(a, range, name):
    """NumPy's first and last edge for `a` (flat): `range`, else its min and max (0 and 1
    when empty), half a unit apart when they are equal."""
    if range is not None:
        first, last = range
        if is_tensor(first) or is_tensor(last):
            raise InvalidArgumentError(f"{name}: range must be static numbers")
        if first > last:
            raise InvalidArgumentError(f"{name}: max must be larger than min in range "
                                       "parameter")
        if not (np.isfinite(first) and np.isfinite(last)):
            raise InvalidArgumentError(f"{name}: supplied range of [{first}, {last}] is not "
                                       "finite")
    elif static_dim(a, 0, name) == 0:
        first, last = 0, 1
    else:
        first, last = _min(a), _max(a)
        if _concrete(a) and not (np.isfinite(_value(first)) and np.isfinite(_value(last))):
            raise InvalidArgumentError(f"{name}: autodetected range of [{_value(first)}, "
                                       f"{_value(last)}] is not finite")
    if not (is_tensor(first) or is_tensor(last)):
        if first == last:
            first, last = first - 0.5, last + 0.5
        return first, last
    same = equal(first, last)
    return _where(same, subtract(first, 0.5), first), _where(same, add(last, 0.5), last)


def _bin_edges(a, bins, range, weights, name, *, histogramdd=False):
    """The edges for the flat `a`: an int count spaced as NumPy spaces them, a 1-D sequence
    as given, a string estimator (concrete data only) through NumPy."""
    if isinstance(bins, str):
        if not (_concrete(a) and (weights is None or _concrete(weights))):
            raise InvalidArgumentError(
                f"{name}: bins={bins!r} chooses the number of bins from the values of a "
                "traced tensor; pass an int number of bins (a static shape) or the edges")
        return _by_numpy(name, np.histogram_bin_edges, _value(a), bins, range,
                         None if weights is None else _value(weights))
    if is_tensor(bins) or np.ndim(bins) == 1:
        edges = read(bins)
        if ndim_of(edges) != 1:
            raise InvalidArgumentError(f"{name}: bins must be 1d, when an array")
        if _concrete(edges) and np.any(_value(edges)[:-1] > _value(edges)[1:]):
            raise InvalidArgumentError(f"{name}: bins must increase monotonically, when an "
                                       "array")
        return edges
    if np.ndim(bins) != 0:
        raise InvalidArgumentError(f"{name}: bins must be 1d, when an array")
    try:
        n = operator.index(bins)
    except TypeError:
        raise InvalidArgumentError(f"{name}: bins must be an integer, a string, or an "
                                   "array") from None
    if n < 1:
        raise InvalidArgumentError(f"{name}: bins must be positive, when an integer")
    first, last = _outer_edges(a, range, name)
    if histogramdd:  # np.linspace(first, last, n + 1): the edges' own dtype
        return linspace(first, last, n + 1)
    bin_type = np.result_type(*(dtype_of(e)[0] if is_tensor(e) else e for e in (first, last)),
                              np.empty(0, dtype_of(a)[0]))
    if dtypes.is_int(bin_type) or bin_type == np.bool_:
        bin_type = np.result_type(bin_type, float)
    return linspace(first, last, n + 1, dtype=bin_type)


def _bin_index(v, edges, name):
    """The 1-based bin of each of `v` (0 below the first edge, `len(edges)` above the last
    or NaN), the last edge belonging to the last bin."""
    m = static_dim(edges, 0, name)
    idx = searchsorted(edges, v, side="right")
    return _where(equal(v, take(edges, m - 1)), np.int64(m - 1), idx)


# -- histograms --------------------------------------------------------------------------------


def histogram_bin_edges(a, bins=10, range=None, weights=None):
    """The bin edges `histogram` would use, as `np.histogram_bin_edges`."""
    a = ravel(read(a))
    weights = None if weights is None else ravel(read(weights))
    return _tensors(_bin_edges(a, bins, range, weights, "histogram_bin_edges"),
                    [a, weights, bins])


def histogram(a, bins=10, range=None, density=None, weights=None):
    """`(counts, edges)` of the values of `a` (flattened) in `bins` (a count of equal bins
    over `range` or the data's span, the edges, or a NumPy estimator name on concrete
    data), as `np.histogram`: each bin holds `[edge, next edge)`, the last also its right
    edge. Counts are int64, the weights' dtype with `weights`, float64 densities with
    `density=True`."""
    a = read(a)
    weights = None if weights is None else read(weights)
    if not (is_tensor(a) or is_tensor(weights) or is_tensor(bins)):
        return _by_numpy("histogram", np.histogram, a, bins, range, density, weights)
    if weights is not None:
        if shape_of(weights) != shape_of(a):
            raise ShapeError("histogram: weights should have the same shape as a")
        weights = ravel(weights)
    a = ravel(a)
    edges = _bin_edges(a, bins, range, weights, "histogram")
    nb = static_dim(edges, 0, "histogram") - 1
    ntype = np.int64 if weights is None else dtype_of(weights)[0]
    counts = _add_at(subtract(_bin_index(a, edges, "histogram"), 1), weights, nb,
                     np.int64 if weights is None else np.float64)
    counts = astype(counts, ntype)
    if density:
        counts = true_divide(true_divide(counts, astype(diff(edges), np.float64)),
                             _sum(counts))
    return _tensors((counts, edges), [a, weights, bins])


def histogramdd(sample, bins=10, range=None, density=None, weights=None):
    """`(counts, [edges per dim])` of the `(N, D)` `sample` (or a sequence of D arrays), as
    `np.histogramdd`: float64 counts, bins per dim as `histogram`'s (int or edges)."""
    if isinstance(sample, (list, tuple)):
        sample = transpose(stack([ravel(read(s)) for s in sample]))
    sample = read(sample)
    weights = None if weights is None else read(weights)
    if not (is_tensor(sample) or is_tensor(weights) or _has_tensor(bins)):
        return _by_numpy("histogramdd", np.histogramdd, sample, bins, range, density, weights)
    if ndim_of(sample) != 2:
        sample = reshape(sample, (-1, 1)) if ndim_of(sample) <= 1 else sample
    d = static_dim(sample, 1, "histogramdd")
    if isinstance(bins, (list, tuple)) or (not is_tensor(bins) and np.ndim(bins) == 1
                                           and d != 1):
        if len(bins) != d:
            raise InvalidArgumentError("histogramdd: the dimension of bins must be equal to "
                                       "the dimension of the sample x.")
    else:
        bins = [bins] * d
    ranges = (None,) * d if range is None else range
    if len(ranges) != d:
        raise InvalidArgumentError("histogramdd: range argument must have one entry per "
                                   "dimension")
    edges, index, nbin = [], None, []
    for i, (b, r) in enumerate(zip(bins, ranges, strict=True)):
        col = sample[:, i]
        if isinstance(b, str):
            raise InvalidArgumentError(f"histogramdd: bins must be integers or edges, not {b!r}")
        e = _bin_edges(col, b, r, None, "histogramdd", histogramdd=True)
        edges.append(e)
        nbin.append(static_dim(e, 0, "histogramdd") + 1)
        k = _bin_index(col, e, "histogramdd")
        index = k if index is None else add(multiply(index, nbin[-1]), k)
    total = int(np.prod(nbin))
    hist = _add_at(index, None if weights is None else ravel(weights), total, np.float64)
    hist = unviewed(reshape(hist, nbin)[tuple(slice(1, -1) for _ in nbin)])  # NumPy's copy
    if density:
        s = _sum(hist)
        for i, e in enumerate(edges):
            shape = [1] * d
            shape[i] = nbin[i] - 2
            hist = true_divide(hist, reshape(astype(diff(e), np.float64), shape))
        hist = true_divide(hist, s)
    return _tensors((hist, edges), [sample, weights, *(bins if isinstance(bins, list) else [])])


def _has_tensor(bins) -> bool:
    return is_tensor(bins) or (isinstance(bins, (list, tuple)) and any(map(is_tensor, bins)))


def histogram2d(x, y, bins=10, range=None, density=None, weights=None):
    """`(counts, x edges, y edges)` of the points `(x[i], y[i])`, as `np.histogram2d`:
    `bins` is an int or edges for both dims, or a pair of them."""
    x, y = read(x), read(y)
    if not (is_tensor(x) or is_tensor(y) or is_tensor(weights) or _has_tensor(bins)):
        return _by_numpy("histogram2d", np.histogram2d, x, y, bins, range, density, weights)
    try:
        n = len(bins)
    except TypeError:
        n = 1
    if n not in (1, 2):
        bins = [bins, bins]
    hist, (xedges, yedges) = histogramdd([x, y], bins, range, density, weights)
    return hist, xedges, yedges
