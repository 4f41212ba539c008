"""Creation, index helpers, windows, products and selection composed of existing
functions: array copy empty empty_like logspace geomspace tri indices the *_indices family,
bartlett blackman hamming hanning, cross kron vecdot matvec vecmat, select choose isin
insert, cov corrcoef.

Index helpers and windows depend on sizes only, so they return NumPy arrays (constants
inside a trace), as `np.tril_indices` does; `empty` is `zeros` (tensors are never
uninitialised memory).
"""

from __future__ import annotations

import operator

import numpy as np

from tracegrad.core import dtypes
from tracegrad.errors import InvalidArgumentError, ShapeError
from tracegrad.numpy._complex import conjugate
from tracegrad.numpy._core import (
    axis_arg,
    dtype_arg,
    dtype_of,
    is_tensor,
    ndim_of,
    read,
    shape_of,
    static_dim,
    tracing,
)
from tracegrad.numpy._creation import asarray, astype, linspace, zeros, zeros_like
from tracegrad.numpy._indexing import take, take_along_axis
from tracegrad.numpy._matrix import diagonal
from tracegrad.numpy._products import matmul
from tracegrad.numpy._reductions import any as _any
from tracegrad.numpy._reductions import sum as _sum
from tracegrad.numpy._shape import (
    broadcast_to,
    concatenate,
    expand_dims,
    moveaxis,
    ravel,
    reshape,
    squeeze,
    stack,
    transpose,
)
from tracegrad.numpy._statistics import average
from tracegrad.numpy._ufuncs import (
    clip,
    equal,
    log10,
    logical_not,
    mod,
    multiply,
    negative,
    power,
    sign,
    sqrt,
    subtract,
    true_divide,
    where,
)
from tracegrad.numpy._views import unviewed

# -- creation -------------------------------------------------------------------------------


def empty(shape, dtype=float, order="C", *, device=None, like=None):
    """`zeros(shape, dtype)`: tensors have no uninitialised memory, so NumPy's arbitrary
    values are zeros here."""
    return zeros(shape, dtype)


def empty_like(prototype, dtype=None, order="K", subok=True, shape=None, *, device=None):
    """`zeros_like(prototype, dtype, shape)` (see `empty`)."""
    return zeros_like(prototype, dtype, shape)


def array(object, dtype=None, *, copy=True, order="K", subok=False, ndmin=0, like=None):
    """`asarray(object, dtype)` with at least `ndmin` dims (leading 1s). A NumPy input is
    copied when `copy` is true; a tensor is immutable, so it is its own copy."""
    x = read(object)
    if not is_tensor(x):
        x = np.array(x, dtype=dtype_arg(dtype, "array") or (
            None if isinstance(x, np.ndarray) else dtypes.canonicalize(
                np.asarray(x).dtype, op="array")), copy=True if copy else None)
    elif dtype is not None:
        x = asarray(x, dtype)
    if copy:
        x = unviewed(x)
    nd = ndim_of(x)
    if ndmin > nd:
        x = reshape(x, (1,) * (ndmin - nd) + shape_of(x))
    return x


def copy(a, order="K", subok=False):
    """A copy of `a` (`array(a, copy=True)`; a tensor is returned as it is)."""
    return array(a, copy=True)


def logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0):
    """`base ** linspace(start, stop, num, endpoint, axis=axis)`."""
    if not (tracing() or is_tensor(start) or is_tensor(stop) or is_tensor(base)):
        return np.logspace(start, stop, num, endpoint, base, dtype_arg(dtype, "logspace"),
                           axis)
    y = linspace(start, stop, num, endpoint, axis=axis)
    base = read(base)
    out = power(np.asarray(base) if not is_tensor(base) else base, y)
    return out if dtype is None else astype(out, dtype)


def geomspace(start, stop, num=50, endpoint=True, dtype=None, axis=0):
    """`num` numbers from `start` to `stop` spaced evenly on a log scale (the ends exact),
    as NumPy computes them for real bounds of the same sign."""
    if not (tracing() or is_tensor(start) or is_tensor(stop)):
        return np.geomspace(start, stop, num, endpoint, dtype_arg(dtype, "geomspace"), axis)
    start, stop = read(start), read(stop)
    out_sign = sign(start)
    start, stop = true_divide(start, out_sign), true_divide(stop, out_sign)
    y = logspace(log10(start), log10(stop), num, endpoint, 10.0)
    num = operator.index(num)
    ends = []
    if num > 0:
        ends.append((0, start))
    if num > 1 and endpoint:
        ends.append((num - 1, stop))
    if ends:
        pos = np.arange(num).reshape((num,) + (1,) * (ndim_of(y) - 1))
        for i, v in ends:
            y = where(pos == i, astype(v, dtype_of(y)[0]), y)
    y = multiply(y, out_sign)
    if axis != 0:
        y = moveaxis(y, 0, axis)
    return y if dtype is None else astype(y, dtype)


def tri(N, M=None, k=0, dtype=float, *, like=None):
    """The `N x M` array with ones at and below diagonal `k`, zeros elsewhere."""
    return np.tri(N, M, k, dtype_arg(dtype, "tri"))


def indices(dimensions, dtype=int, sparse=False):
    """The index grids of an array of shape `dimensions` (NumPy arrays: static)."""
    return np.indices(tuple(dimensions), dtype_arg(dtype, "indices"), sparse)


def tril_indices(n, k=0, m=None):
    """The row and column indices of the lower triangle of an `n x m` array."""
    return np.tril_indices(n, k, m)


def triu_indices(n, k=0, m=None):
    """The row and column indices of the upper triangle of an `n x m` array."""
    return np.triu_indices(n, k, m)


def diag_indices(n, ndim=2):
    """The indices of the main diagonal of an `n x ... x n` array (`ndim` of them)."""
    return np.diag_indices(n, ndim)


def _matrix_shape(arr, op):
    s = shape_of(read(arr))
    if len(s) != 2 or None in s:
        raise ShapeError(f"{op}: input array must be 2-d with static sizes")
    return s


def tril_indices_from(arr, k=0):
    """`tril_indices` for `arr`'s (2-D) shape."""
    n, m = _matrix_shape(arr, "tril_indices_from")
    return np.tril_indices(n, k, m)


def triu_indices_from(arr, k=0):
    """`triu_indices` for `arr`'s (2-D) shape."""
    n, m = _matrix_shape(arr, "triu_indices_from")
    return np.triu_indices(n, k, m)


def diag_indices_from(arr):
    """`diag_indices` for `arr`'s shape (at least 2-D, all sizes equal)."""
    s = shape_of(read(arr))
    if len(s) < 2:
        raise ShapeError("diag_indices_from: input array must be at least 2-d")
    if len(set(s)) != 1 or None in s:
        raise ShapeError("diag_indices_from: All dimensions of input must be of equal length")
    return np.diag_indices(s[0], len(s))


def mask_indices(n, mask_func, k=0):
    """The indices where `mask_func(ones((n, n)), k)` is non-zero (`triu`, `tril` ...)."""
    from tracegrad.numpy._matrix import tril, triu

    m = {triu: np.triu, tril: np.tril}.get(mask_func, mask_func)(np.ones((n, n), int), k)
    return np.nonzero(np.asarray(m) != 0)


def _window(fn, name):
    def window(M):
        return fn(operator.index(M))

    window.__name__ = window.__qualname__ = name
    window.__doc__ = f"NumPy's {name} window of `M` points (a NumPy array: static)."
    return window


bartlett = _window(np.bartlett, "bartlett")
blackman = _window(np.blackman, "blackman")
hamming = _window(np.hamming, "hamming")
hanning = _window(np.hanning, "hanning")

# -- products -------------------------------------------------------------------------------


def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """The cross product of 2- or 3-element vectors along `axisa`/`axisb` (`axis` sets all
    three), broadcast over the other dims; two 2-element vectors give the z component."""
    if axis is not None:
        axisa = axisb = axisc = axis
    a, b = read(a), read(b)
    a = moveaxis(a, axis_arg(axisa, ndim_of(a), "cross"), -1)
    b = moveaxis(b, axis_arg(axisb, ndim_of(b), "cross"), -1)
    na, nb = shape_of(a)[-1], shape_of(b)[-1]
    if na not in (2, 3) or nb not in (2, 3):
        raise ShapeError("cross: incompatible dimensions for cross product (dimension must "
                         "be 2 or 3)")
    a0, a1 = take(a, 0, axis=-1), take(a, 1, axis=-1)
    b0, b1 = take(b, 0, axis=-1), take(b, 1, axis=-1)
    z = subtract(multiply(a0, b1), multiply(a1, b0))
    if na == 2 and nb == 2:
        return z
    if na == 3:
        a2 = take(a, 2, axis=-1)
    if nb == 3:
        b2 = take(b, 2, axis=-1)
    if na == 2:  # a2 == 0
        cp = stack([multiply(a1, b2), negative(multiply(a0, b2)), z], axis=-1)
    elif nb == 2:  # b2 == 0
        cp = stack([negative(multiply(a2, b1)), multiply(a2, b0), z], axis=-1)
    else:
        cp = stack([subtract(multiply(a1, b2), multiply(a2, b1)),
                    subtract(multiply(a2, b0), multiply(a0, b2)), z], axis=-1)
    return moveaxis(cp, -1, axis_arg(axisc, ndim_of(cp), "cross"))


def kron(a, b):
    """The Kronecker product: blocks `a[i, j] * b` laid out in `a`'s pattern."""
    a, b = read(a), read(b)
    nd = max(ndim_of(a), ndim_of(b))
    if nd == 0:
        return multiply(a, b)
    sa = (1,) * (nd - ndim_of(a)) + shape_of(a)
    sb = (1,) * (nd - ndim_of(b)) + shape_of(b)
    a = reshape(a, tuple(x for d in sa for x in (d, 1)))
    b = reshape(b, tuple(x for d in sb for x in (1, d)))
    return reshape(multiply(a, b), tuple(x * y for x, y in zip(sa, sb)))


def vecdot(x1, x2, /, *, axis=-1):
    """The dot products of the vectors along `axis` (broadcast): `sum(conj(x1) * x2, axis)`,
    in the product's dtype."""
    p = multiply(conjugate(x1), x2)
    return _sum(p, axis=axis, dtype=dtype_of(p)[0])


def matvec(x1, x2, /):
    """The matrix-vector products of the stacks `x1 (..., m, n)` and `x2 (..., n)`."""
    return squeeze(matmul(x1, expand_dims(x2, -1)), -1)


def vecmat(x1, x2, /):
    """The vector-matrix products `conj(x1) @ x2` of the stacks `x1 (..., n)` and
    `x2 (..., n, m)`."""
    return squeeze(matmul(expand_dims(conjugate(x1), -2), x2), -2)


# -- selection ------------------------------------------------------------------------------


def select(condlist, choicelist, default=0):
    """The element of the first `choicelist[i]` whose `condlist[i]` holds (`default`
    where none does), everything broadcast; in the choices' promoted dtype."""
    if len(condlist) != len(choicelist):
        raise InvalidArgumentError("select: list of cases must be same length as list of "
                                   "conditions")
    if not condlist:
        raise InvalidArgumentError("select with an empty condition list is not possible")
    conds = [read(c) for c in condlist]
    for i, c in enumerate(conds):
        if dtype_of(c)[0] != dtypes.bool_:
            raise InvalidArgumentError(f"select: invalid entry {i} in condlist: should be "
                                       "boolean ndarray")
    # as NumPy's: Python ints and floats stay weak in the promotion, the rest are arrays
    choices = [c if type(c) in (int, float, complex) else read(c) if is_tensor(c) else asarray(c)
               for c in (*choicelist, default)]
    dt = np.result_type(*(c if type(c) in (int, float, complex) else dtype_of(c)[0] for c in choices))
    choices = [np.asarray(c, dt) if type(c) in (int, float, complex) else astype(c, dt)
               for c in choices]
    out = choices[-1]
    for c, v in zip(reversed(conds), reversed(choices[:-1])):
        out = where(c, v, out)
    return out


def choose(a, choices, out=None, mode="raise"):
    """`choices[a[i]][i]` for every index `i` (all broadcast); `mode` "raise", "wrap" or
    "clip" as NumPy's (out-of-range indices raise when `a` is concrete)."""
    if out is not None:
        raise InvalidArgumentError("choose: out= is not supported")
    a = read(a)
    n = len(choices)
    if mode == "wrap":
        a = mod(a, n)
    elif mode == "clip":
        a = clip(a, 0, n - 1)
    elif mode != "raise":
        raise InvalidArgumentError(f"choose: mode must be 'raise', 'wrap' or 'clip', got "
                                   f"{mode!r}")
    elif not is_tensor(a) or hasattr(a, "_value"):
        v = np.asarray(getattr(a, "_value", a))
        if v.size and (v.min() < 0 or v.max() >= n):
            raise InvalidArgumentError("choose: invalid entry in choice array")
    from tracegrad.numpy._arrange import broadcast_arrays

    parts = broadcast_arrays(a, *choices)
    stacked = stack(list(parts[1:]))
    return squeeze(take_along_axis(stacked, expand_dims(parts[0], 0), axis=0), 0)


def isin(element, test_elements, assume_unique=False, invert=False, *, kind=None):
    """Whether each element of `element` equals one of `test_elements` (compared with all
    of them: O(element.size * test_elements.size))."""
    element, test = read(element), ravel(read(test_elements))
    found = _any(equal(expand_dims(element, -1), test), axis=-1)
    found = logical_not(found) if invert else found
    return found if is_tensor(found) else np.asarray(found)  # NumPy's: an array, never a scalar


def insert(arr, obj, values, axis=None):
    """`arr` with `values` inserted before the static index or indices `obj` along `axis`
    (flattened for None), as NumPy's: a gather from `arr` and the broadcast values."""
    arr = read(arr)
    if axis is None:
        arr, axis = ravel(arr), 0
    ax = axis_arg(axis, ndim_of(arr), "insert")
    n = static_dim(arr, ax, "insert", "insert along a dim of static size")
    values = read(values)
    if is_tensor(obj):
        if not hasattr(obj, "_value"):
            raise ShapeError("insert: the indices must be static (Python ints or a NumPy "
                             "array)")
        obj = obj._value
    dt = dtype_of(arr)[0]
    dummy = np.insert(np.zeros(shape_of(arr), bool), obj, np.zeros(shape_of(values), bool),
                      ax)
    numnew = dummy.shape[ax] - n
    order = np.insert(np.arange(n), obj, np.arange(n, n + numnew))
    block = list(shape_of(arr))
    block[ax] = numnew
    v = astype(values, dt) if is_tensor(values) else np.asarray(values, dt)
    v = reshape(v, (1,) * (ndim_of(arr) - ndim_of(v)) + shape_of(v))
    if np.ndim(obj) == 0 and not isinstance(obj, slice):
        v = moveaxis(v, 0, ax)
    v = broadcast_to(v, tuple(block))
    return take(concatenate([arr, v], axis=ax), order, axis=ax)


# -- covariance -----------------------------------------------------------------------------


def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None, *,
        dtype=None):
    """The covariance matrix of the variables in the rows (`rowvar`) or columns of `m`
    (and `y`), normalised by `N - 1` (`N` with `bias`, `N - ddof` with `ddof`), as NumPy
    computes it; float64 unless `dtype`. No `fweights`/`aweights`."""
    if fweights is not None or aweights is not None:
        raise InvalidArgumentError("cov: fweights= and aweights= are not supported")
    m = read(m)
    if ndim_of(m) > 2:
        raise ShapeError("cov: m has more than 2 dimensions")
    ys = () if y is None else (read(y),)
    dt = dtype_arg(dtype, "cov") or np.result_type(*(dtype_of(x)[0] for x in (m,) + ys),
                                                   np.float64)
    X = array(astype(m, dt), ndmin=2)
    if not rowvar and shape_of(X)[0] != 1:
        X = transpose(X)
    if shape_of(X)[0] == 0:
        return np.array([]).reshape(0, 0)
    if ys:
        Y = array(astype(ys[0], dt), ndmin=2)
        if not rowvar and shape_of(Y)[0] != 1:
            Y = transpose(Y)
        X = concatenate([X, Y], axis=0)
    if ddof is None:
        ddof = 0 if bias else 1
    avg = average(X, axis=1)
    fact = static_dim(X, 1, "cov", "a static number of observations") - ddof
    X = subtract(X, expand_dims(avg, 1))
    c = matmul(X, conjugate(transpose(X)))
    c = multiply(c, np.true_divide(1, fact) if fact > 0 else np.inf)
    return squeeze(astype(c, dt))


def corrcoef(x, y=None, rowvar=True, *, dtype=None):
    """The correlation coefficients `cov / sqrt(outer(var, var))`, clipped to [-1, 1]."""
    c = cov(x, y, rowvar, dtype=dtype)
    if ndim_of(c) == 0:
        return true_divide(c, c)
    d = diagonal(c)
    std = sqrt(d)
    c = true_divide(c, expand_dims(std, 1))
    c = true_divide(c, expand_dims(std, 0))
    return clip(c, -1, 1)
