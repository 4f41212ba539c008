"""Sequences, signals and polynomials composed of existing functions: convolve, correlate,
the polynomial arithmetic (polyval polyadd polysub polymul polyder polyint), vander,
trapezoid, gradient, unwrap, searchsorted, digitize, interp.

`convolve`/`correlate` are one `conv` (the n-d correlation `tracegrad.scipy.signal` uses).
`searchsorted` (and so `digitize`, `interp`) counts comparisons: O(len(a) * v.size) work
instead of NumPy's binary search, but no data-dependent control flow, so it traces,
differentiates and batches like any elementwise function.
"""

from __future__ import annotations

import numbers
import operator

import numpy as np

from tracegrad import ops
from tracegrad.core import dtypes
from tracegrad.errors import InvalidArgumentError, ShapeError
from tracegrad.numpy._core import (
    axes_arg,
    axis_arg,
    dtype_of,
    has_float_dtype,
    is_tensor,
    ndim_of,
    promote,
    read,
    shape_of,
    static_dim,
)
from tracegrad.numpy._creation import asarray, astype, full_like, zeros
from tracegrad.numpy._indexing import take
from tracegrad.numpy._pad import pad
from tracegrad.numpy._reductions import cumprod, cumsum
from tracegrad.numpy._reductions import sum as _sum
from tracegrad.numpy._shape import (
    _slice_axis,
    atleast_1d,
    broadcast_to,
    concatenate,
    expand_dims,
    flip,
    reshape,
)
from tracegrad.numpy._statistics import diff
from tracegrad.numpy._ufuncs import (
    abs as _abs,
)
from tracegrad.numpy._ufuncs import (
    add,
    clip,
    equal,
    greater,
    isnan,
    less,
    less_equal,
    logical_and,
    logical_not,
    logical_or,
    mod,
    multiply,
    subtract,
    true_divide,
    where,
)

# -- convolution ----------------------------------------------------------------------------

MODES = ("full", "same", "valid")


def mode_windows(s1, s2, mode):
    """(start, size) per dim of `mode`'s range of the full correlation of sizes s1 and s2:
    all of it ("full"), the size of s1 centered ("same"), where one covers the other
    ("valid"; as SciPy's)."""
    if mode == "full":
        return [(0, a + b - 1) for a, b in zip(s1, s2)]
    if mode == "same":
        return [((b - 1) // 2, a) for a, b in zip(s1, s2)]
    return [(min(a, b) - 1, abs(a - b) + 1) for a, b in zip(s1, s2)]


def correlate_direct(in1, kernel, s1, s2, windows, boundary="constant", fillvalue=0):
    """The correlation `sum_k in1[x + k - (len(kernel) - 1) + start] * kernel[k]` over the
    `windows` (`mode_windows`) of `in1` and `kernel` (one dtype, static shapes s1 and s2),
    `in1` extended beyond its ends by `boundary` (NumPy's pad mode): one `conv`."""
    if not s1:
        return multiply(in1, kernel)
    padding = tuple((b - 1 - start, start + size - a) for a, b, (start, size) in
                    zip(s1, s2, windows))
    if boundary != "constant" or not (isinstance(fillvalue, numbers.Number) and fillvalue == 0):
        grow = [(max(lo, 0), max(hi, 0)) for lo, hi in padding]
        extra = {"constant_values": fillvalue} if boundary == "constant" else {}
        in1 = pad(in1, grow, mode=boundary, **extra)
        s1 = shape_of(in1)
        padding = tuple((min(lo, 0), min(hi, 0)) for lo, hi in padding)
    out = ops.conv(reshape(in1, (1, 1) + s1), reshape(kernel, (1, 1) + s2), padding=padding)
    return reshape(out, tuple(size for _, size in windows))


def _vector(x, op, name):
    if ndim_of(x) != 1:
        raise ShapeError(f"{op}: {name} must be 1-D, got {ndim_of(x)} dims")
    n = static_dim(x, 0, op, "convolve sequences of static length")
    if n == 0:
        raise ShapeError(f"{op}: {name} cannot be empty")
    return n


def _correlate(a, v, mode, op):
    if mode not in MODES:
        raise InvalidArgumentError(f"{op}: mode must be one of {MODES}, got {mode!r}")
    (a, v), _ = promote(read(a), read(v))
    n, m = _vector(a, op, "a"), _vector(v, op, "v")
    # NumPy's "same" is the longer sequence's length
    return correlate_direct(a, v, (n,), (m,), mode_windows((max(n, m),), (min(n, m),), mode))


def convolve(a, v, mode="full"):
    """The discrete linear convolution of the 1-D `a` and `v` (`mode` "full", "same" or
    "valid", as NumPy's)."""
    v = read(v)
    return _correlate(a, flip(v) if ndim_of(v) == 1 else v, mode, "convolve")


def correlate(a, v, mode="valid"):
    """The cross-correlation `c[k] = sum_n a[n + k] * conj(v[n])` of the 1-D `a` and `v`,
    over NumPy's `mode` ranges."""
    a, v = read(a), read(v)
    if dtypes.is_complex(dtype_of(v)[0]):
        v = ops.conj(v)
    if ndim_of(a) == 1 and ndim_of(v) == 1 and shape_of(v)[0] is not None and \
            shape_of(a)[0] is not None and shape_of(v)[0] > shape_of(a)[0]:
        # NumPy swaps the operands and reverses the result
        return flip(_correlate(v, a, mode, "correlate"))
    return _correlate(a, v, mode, "correlate")


# -- polynomials ----------------------------------------------------------------------------


def polyval(p, x):
    """The polynomial with coefficients `p` (highest power first) at `x`, by Horner's rule
    as NumPy evaluates it: `y = y * x + p[i]`."""
    p, x = read(p), read(x)
    if ndim_of(p) != 1:
        raise ShapeError("polyval: p must be 1-D")
    n = static_dim(p, 0, "polyval", "a static number of coefficients")
    y = np.zeros_like(asarray(x)) if type(x) in (bool, int, float, complex) else full_like(x, 0)
    for i in range(n):
        y = add(multiply(y, x), take(p, i))
    return y


def _poly_sum(op, name):
    def fn(a1, a2):
        a1, a2 = atleast_1d(read(a1)), atleast_1d(read(a2))
        n1 = static_dim(a1, 0, name, "a static number of coefficients")
        n2 = static_dim(a2, 0, name, "a static number of coefficients")
        if n2 > n1:
            a1 = concatenate([zeros(n2 - n1, dtype_of(a1)[0]), a1])
        elif n1 > n2:
            a2 = concatenate([zeros(n1 - n2, dtype_of(a2)[0]), a2])
        return op(a1, a2)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"The coefficients of `a1 {'+' if op is add else '-'} a2` (highest power "
                  "first; the shorter one padded with leading zeros).")
    return fn


polyadd = _poly_sum(add, "polyadd")
polysub = _poly_sum(subtract, "polysub")


def polymul(a1, a2):
    """The coefficients of the product of two polynomials: `convolve(a1, a2)`."""
    return convolve(atleast_1d(read(a1)), atleast_1d(read(a2)))


def polyder(p, m=1):
    """The coefficients of the `m`-th derivative of the polynomial `p`."""
    m = operator.index(m)
    if m < 0:
        raise InvalidArgumentError("polyder: order of derivative must be positive (see polyint)")
    p = read(p)
    for _ in range(m):
        n = static_dim(p, 0, "polyder", "a static number of coefficients") - 1
        p = multiply(_slice_axis(p, 0, 0, max(n, 0)), np.arange(n, 0, -1))
    return p


def polyint(p, m=1, k=None):
    """The coefficients of the `m`-th antiderivative of `p`, with integration constants
    `k` (zeros by default; one per integration, lowest order first)."""
    m = operator.index(m)
    if m < 0:
        raise InvalidArgumentError("polyint: order of integral must be positive (see polyder)")
    if k is None:
        k = np.zeros(m, float)
    k = atleast_1d(read(k))
    if shape_of(k)[0] == 1 and m > 1:
        k = broadcast_to(k, (m,))
    if shape_of(k)[0] < m:
        raise InvalidArgumentError("polyint: k must be a scalar or a rank-1 array of length m")
    p = add(read(p), 0.0)
    for i in range(m):
        n = static_dim(p, 0, "polyint", "a static number of coefficients")
        p = concatenate([true_divide(p, np.arange(n, 0, -1)), reshape(take(k, i), (1,))])
    return p


def vander(x, N=None, increasing=False):
    """The Vandermonde matrix of the 1-D `x`: columns `x**(N-1) ... x**0` (reversed with
    `increasing=True`), built by running products as NumPy does; int64 for ints/bools."""
    x = read(x)
    if ndim_of(x) != 1:
        raise ShapeError("vander: x must be a one-dimensional array or sequence.")
    n = static_dim(x, 0, "vander", "a static length")
    N = n if N is None else operator.index(N)
    dt = np.promote_types(dtype_of(x)[0], np.int64)
    x = astype(x, dt)
    if N == 0:
        return _slice_axis(reshape(x, (n, 1)), 1, 0, 0)
    cols = [reshape(full_like(x, 1), (n, 1))]
    if N > 1:
        cols.append(cumprod(broadcast_to(reshape(x, (n, 1)), (n, N - 1)), axis=1))
    v = concatenate(cols, axis=1)
    return v if increasing else flip(v, axis=1)


# -- integrals and differences -----------------------------------------------------------------


def trapezoid(y, x=None, dx=1.0, axis=-1):
    """The integral of `y` along `axis` by the trapezoidal rule, with sample points `x`
    (1-D, or `y`'s shape) or spacing `dx`: `sum(d * (y[1:] + y[:-1]) / 2)`."""
    y = read(y)
    nd = ndim_of(y)
    ax = axis_arg(axis, nd, "trapezoid")
    if x is None:
        d = read(dx)
    else:
        x = read(x)
        if ndim_of(x) == 1:
            d = diff(x)
            shape = [1] * nd
            shape[ax] = shape_of(d)[0]
            d = reshape(d, tuple(shape))
        else:
            d = diff(x, axis=axis)
    n = static_dim(y, ax, "trapezoid", "a static number of samples")
    inner = add(_slice_axis(y, ax, min(1, n), n), _slice_axis(y, ax, 0, max(n - 1, 0)))
    return _sum(true_divide(multiply(d, inner), 2.0), axis=ax)


def gradient(f, *varargs, axis=None, edge_order=1):
    """The gradient of `f` by second-order central differences inside and first- or
    second-order (`edge_order`) one-sided ones at the ends, along each axis (a tuple of
    arrays for several axes, as NumPy 2). Spacings are scalars (uniform) or 1-D
    coordinate arrays."""
    f = read(f)
    nd = ndim_of(f)
    axes = tuple(range(nd)) if axis is None else axes_arg(axis, nd, "gradient")
    if not varargs:
        spacing = [1.0] * len(axes)
    elif len(varargs) == 1 and ndim_of(read(varargs[0])) == 0:
        spacing = [varargs[0]] * len(axes)
    elif len(varargs) == len(axes):
        spacing = list(varargs)
    else:
        raise InvalidArgumentError("gradient: invalid number of arguments")
    if edge_order not in (1, 2):
        raise InvalidArgumentError("gradient: 'edge_order' greater than 2 not supported")
    if not has_float_dtype(f):
        f = astype(f, np.float64)
    outs = []
    for ax, h in zip(axes, spacing):
        n = static_dim(f, ax, "gradient", "a static number of samples")
        if n < edge_order + 1:
            raise ShapeError("gradient: Shape of array too small to calculate a numerical "
                             "gradient, at least (edge_order + 1) elements are required.")
        outs.append(_gradient_axis(f, read(h), ax, n, edge_order))
    return outs[0] if len(outs) == 1 else tuple(outs)


def _combine(f3, coefficients, h, ax):
    """`a * f3[0] + b * f3[1] + c * f3[2]` along `ax`, with `(a, b, c) = coefficients / h`
    (NumPy's second-order one-sided differences)."""
    a, b, c = (k / h for k in coefficients)
    return add(add(multiply(a, _slice_axis(f3, ax, 0, 1)), multiply(b, _slice_axis(f3, ax, 1, 2))),
               multiply(c, _slice_axis(f3, ax, 2, 3)))


def _gradient_axis(f, h, ax, n, edge_order):
    def s(lo, hi):
        return _slice_axis(f, ax, lo, hi)

    if ndim_of(h) == 0:  # Python operators: a Python spacing stays weak, as in NumPy
        interior = (s(2, n) - s(0, n - 2)) / (2.0 * h)
        if edge_order == 1:
            first = (s(1, 2) - s(0, 1)) / h
            last = (s(n - 1, n) - s(n - 2, n - 1)) / h
        else:
            first = _combine(s(0, 3), (-1.5, 2.0, -0.5), h, ax)
            last = _combine(s(n - 3, n), (0.5, -2.0, 1.5), h, ax)
        return concatenate([first, interior, last], axis=ax)
    if ndim_of(h) != 1 or shape_of(h)[0] != n:
        raise ShapeError("gradient: when 1d, distances must match the length of the "
                         "corresponding dimension")
    if not has_float_dtype(h):
        h = astype(h, np.float64)
    dx = diff(h)
    if not is_tensor(dx):  # static uniform coordinates: NumPy's scalar path
        d = np.asarray(dx)
        if np.all(d == d[0]):
            return _gradient_axis(f, d[0], ax, n, edge_order)
    shape = [1] * ndim_of(f)
    shape[ax] = n - 2

    def along(v):
        return reshape(v, tuple(shape))

    dx1, dx2 = _slice_axis(dx, 0, 0, n - 2), _slice_axis(dx, 0, 1, n - 1)
    a = true_divide(-dx2, multiply(dx1, add(dx1, dx2)))
    b = true_divide(subtract(dx2, dx1), multiply(dx1, dx2))
    c = true_divide(dx1, multiply(dx2, add(dx1, dx2)))
    interior = add(add(multiply(along(a), s(0, n - 2)), multiply(along(b), s(1, n - 1))),
                   multiply(along(c), s(2, n)))
    if edge_order != 1:
        raise InvalidArgumentError("gradient: edge_order=2 with coordinate arrays is not "
                                   "supported")
    first = true_divide(subtract(s(1, 2), s(0, 1)), take(dx, 0))
    last = true_divide(subtract(s(n - 1, n), s(n - 2, n - 1)), take(dx, n - 2))
    return concatenate([first, interior, last], axis=ax)


def unwrap(p, discont=None, axis=-1, *, period=2 * np.pi):
    """`p` with jumps between neighbours along `axis` larger than `discont` (default
    `period / 2`) replaced by their `period` complement, as NumPy computes it."""
    p = read(p)
    nd = ndim_of(p)
    ax = axis_arg(axis, nd, "unwrap")
    dd = diff(p, axis=ax)
    if discont is None:
        discont = period / 2
    dt = np.result_type(dtype_of(dd)[0], period)
    if np.issubdtype(dt, np.integer):
        high, rem = divmod(period, 2)
        ambiguous = rem == 0
    else:
        high, ambiguous = period / 2, True
    low = -high
    ddmod = add(mod(subtract(dd, low), period), low)
    if ambiguous:
        ddmod = where(logical_and(equal(ddmod, low), greater(dd, 0)), high, ddmod)
    correct = where(less(_abs(dd), discont), 0, subtract(ddmod, dd))
    n = static_dim(p, ax, "unwrap", "a static length")
    p = astype(p, dt)
    if n < 2:
        return p
    return concatenate([_slice_axis(p, ax, 0, 1),
                        add(_slice_axis(p, ax, 1, n), cumsum(correct, axis=ax))], axis=ax)


# -- searching ----------------------------------------------------------------------------------


def searchsorted(a, v, side="left", sorter=None):
    """Where the elements of `v` would go in the sorted 1-D `a` (int64): the number of
    elements of `a` before (`side="left"`) or not after (`"right"`) each one, in NumPy's
    sort order (NaN last). Computed by comparing every pair: O(len(a) * v.size)."""
    if side not in ("left", "right"):
        raise InvalidArgumentError(f"searchsorted: side must be 'left' or 'right', got "
                                   f"{side!r}")
    a, v = read(a), read(v)
    if ndim_of(a) != 1:
        raise ShapeError("searchsorted: a must be 1-D")
    if sorter is not None:
        a = take(a, sorter)
    ve = expand_dims(v, -1) if ndim_of(v) else reshape(v, (1,))
    before = less(a, ve) if side == "left" else less_equal(a, ve)
    if has_float_dtype(a) or has_float_dtype(v):  # NaN sorts last
        nan_v = isnan(ve)
        before = logical_or(before, logical_and(nan_v, logical_not(isnan(a)))
                            if side == "left" else nan_v)
    out = _sum(before, axis=-1, dtype=np.int64)
    return out if ndim_of(v) else reshape(out, ())


def digitize(x, bins, right=False):
    """The index of the bin of `bins` (monotonic, 1-D) each `x` falls in, as NumPy's:
    `searchsorted` on increasing bins, from the end on decreasing ones (chosen by comparing
    the first and last bin when `bins` is traced)."""
    x, bins = read(x), read(bins)
    if ndim_of(bins) != 1:
        raise ShapeError("digitize: bins must be 1-dimensional")
    side = "left" if right else "right"
    n = static_dim(bins, 0, "digitize", "a static number of bins")
    if not is_tensor(bins) or hasattr(bins, "_value"):
        b = np.asarray(getattr(bins, "_value", bins))
        inc, dec = bool(np.all(b[1:] >= b[:-1])), bool(np.all(b[1:] <= b[:-1]))
        if not (inc or dec):
            raise InvalidArgumentError("digitize: bins must be monotonically increasing or "
                                       "decreasing")
        if inc:
            return searchsorted(bins, x, side=side)
        return subtract(n, searchsorted(flip(bins), x, side=side))
    up = searchsorted(bins, x, side=side)
    down = subtract(n, searchsorted(flip(bins), x, side=side))
    return where(less(take(bins, n - 1), take(bins, 0)), down, up) if n > 1 else up


def _real(v):
    return v.real if type(v) is complex else ops.real(astype(v, np.complex128))


def _imag(v):
    return v.imag if type(v) is complex else ops.imag(astype(v, np.complex128))


def interp(x, xp, fp, left=None, right=None, period=None):
    """The piecewise-linear interpolant through `(xp, fp)` (`xp` increasing) at `x`, in
    float64; `left`/`right` (default `fp[0]`/`fp[-1]`) outside `[xp[0], xp[-1]]`. At a
    sample point the gradient is the right-hand segment's (JAX's convention)."""
    if period is not None:
        raise InvalidArgumentError("interp: period= is not supported")
    fp = read(fp)
    if dtypes.is_complex(dtype_of(fp)[0]):  # NumPy's: the parts interpolated alike
        parts = [interp(x, xp, part(fp), None if left is None else part(complex(left)),
                        None if right is None else part(complex(right)))
                 for part in (_real, _imag)]
        return ops.complex_(*parts)
    x, xp, fp = (astype(read(t), np.float64) for t in (x, xp, fp))
    if ndim_of(xp) != 1 or ndim_of(fp) != 1:
        raise ShapeError("interp: xp and fp must be 1-D sequences")
    n = static_dim(xp, 0, "interp", "a static number of sample points")
    if n == 0 or shape_of(fp)[0] != n:
        raise ShapeError("interp: fp and xp are not of the same length" if n else
                         "interp: array of sample points is empty")
    if n == 1:
        y = broadcast_to(take(fp, 0), shape_of(x))
    else:
        i = clip(searchsorted(xp, x, side="right"), 1, n - 1)
        x0, x1 = take(xp, subtract(i, 1)), take(xp, i)
        f0, f1 = take(fp, subtract(i, 1)), take(fp, i)
        slope = true_divide(subtract(f1, f0), subtract(x1, x0))
        y = add(multiply(slope, subtract(x, x0)), f0)
        # x == xp[-1]: fp[-1] exactly, with the last segment's slope as its gradient
        y = where(equal(x, x1), add(multiply(slope, subtract(x, x1)), f1), y)
    lo = take(fp, 0) if left is None else left
    hi = take(fp, n - 1) if right is None else right
    y = where(less(x, take(xp, 0)), lo, y)
    return astype(where(greater(x, take(xp, n - 1)), hi, y), np.float64)
