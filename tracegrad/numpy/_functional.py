"""Functions that call the user's functions: piecewise, apply_along_axis, apply_over_axes,
fromfunction, frompyfunc; and einsum_path, which only reads shapes.

`apply_along_axis` and `frompyfunc` vectorize the user's function with `tg.vmap` (traced
once, whatever the number of slices or elements); `piecewise` calls each function on the
whole array and selects with `where`, as jax.numpy does; `fromfunction` calls the function
on NumPy's index grids, as NumPy does.
"""

from __future__ import annotations

import numpy as np

from tracegrad.errors import InvalidArgumentError, ShapeError
from tracegrad.numpy._arrange import broadcast_arrays
from tracegrad.numpy._construct import indices
from tracegrad.numpy._core import (
    axis_arg,
    dtype_arg,
    dtype_of,
    is_python_scalar,
    is_tensor,
    ndim_of,
    read,
    shape_of,
    static_shape,
)
from tracegrad.numpy._creation import astype, zeros_like
from tracegrad.numpy._reductions import any as _any
from tracegrad.numpy._shape import broadcast_to, expand_dims, moveaxis, reshape, stack
from tracegrad.numpy._ufuncs import logical_not, where


def _vmap(fn):
    from tracegrad.autodiff import vmap  # (autodiff imports tracegrad.numpy)

    return vmap(fn)


def piecewise(x, condlist, funclist, *args, **kw):
    """`x` mapped by pieces: where `condlist[i]` holds, `funclist[i]` (a function of the array
    and `*args, **kw`, or a value); one more function than conditions covers where none
    holds; elsewhere 0. Later conditions win where several hold. The result has `x`'s dtype.

    Each function is called on the whole of `x` (not on the selected elements, as NumPy
    does), so it must work elementwise there; its values outside its piece are discarded.
    """
    x = read(x)
    shape = shape_of(x)
    if is_tensor(condlist) or isinstance(condlist, np.ndarray) or is_python_scalar(condlist):
        condlist = read(condlist)
        single = ndim_of(condlist) == len(shape)
        condlist = [condlist] if single else [condlist[i] for i in range(condlist.shape[0])]
    elif (condlist and not isinstance(condlist[0], (list, np.ndarray))
          and not is_tensor(condlist[0]) and len(shape) != 0):
        condlist = [condlist]  # a list of Python bools is one condition, as in NumPy
    conds = [broadcast_to(astype(read(c), np.bool_), shape) for c in condlist]
    if len(conds) == len(funclist) - 1:
        conds.append(logical_not(_any(stack(conds), axis=0)) if conds else
                     np.ones(shape, np.bool_))
    elif len(conds) != len(funclist):
        raise InvalidArgumentError(
            f"piecewise: with {len(conds)} condition(s), either {len(conds)} or "
            f"{len(conds) + 1} functions are expected, got {len(funclist)}")
    dtype = dtype_of(x)[0]
    y = zeros_like(x)
    for cond, fn in zip(conds, funclist, strict=True):
        value = fn(x, *args, **kw) if callable(fn) else fn
        y = where(cond, astype(read(value), dtype), y)
    return y


def apply_along_axis(func1d, axis, arr, *args, **kwargs):
    """`func1d(slice, *args, **kwargs)` for every 1-D slice of `arr` along `axis`; the
    result's dims replace `axis` (`arr.shape[:axis] + result.shape + arr.shape[axis+1:]`).
    `func1d` is traced once and vectorized over the slices."""
    arr = read(arr)
    shape = static_shape(arr, "apply_along_axis")
    axis = axis_arg(axis, len(shape), "apply_along_axis")
    outer = shape[:axis] + shape[axis + 1:]
    if 0 in outer:
        raise InvalidArgumentError("apply_along_axis: cannot apply along an axis when any "
                                   "other dim is 0")
    rows = reshape(moveaxis(arr, axis, -1), (-1, shape[axis]))
    out = read(_vmap(lambda row: func1d(row, *args, **kwargs))(rows))
    res = shape_of(out)[1:]
    out = reshape(out, outer + res)
    nd = len(res)
    for k in range(nd):  # the result's dims go where `axis` was
        out = moveaxis(out, len(outer) + k, axis + k)
    return out


def apply_over_axes(func, a, axes):
    """`func(a, axis)` applied for each axis of `axes` in turn, each result (with the reduced
    dim kept or put back as size 1) the next input; the result has `a`'s number of dims."""
    a = read(a)
    nd = ndim_of(a)
    for axis in np.atleast_1d(np.asarray(axes)).tolist():
        axis = axis + nd if axis < 0 else axis
        res = read(func(a, axis))
        if ndim_of(res) == ndim_of(a):
            a = res
        elif ndim_of(res) == ndim_of(a) - 1:
            a = expand_dims(res, axis)
        else:
            raise ShapeError("apply_over_axes: function is not returning an array of the "
                             "correct shape")
    return a


def fromfunction(function, shape, *, dtype=float, like=None, **kwargs):
    """`function(*grids, **kwargs)` on the index grids of `shape` (NumPy arrays of `dtype`,
    one per dim): whatever the function returns."""
    del like
    return function(*indices(shape, dtype=dtype_arg(dtype, "fromfunction")), **kwargs)


class _Vectorized:
    """A scalar function applied elementwise to broadcast arrays (see `frompyfunc`)."""

    def __init__(self, func, nin, nout, identity):
        self.func, self.nin, self.nout, self.identity = func, nin, nout, identity
        self.nargs = nin + nout
        self.__name__ = getattr(func, "__name__", "frompyfunc") + " (vectorized)"

    def __call__(self, *args):
        if len(args) != self.nin:
            raise InvalidArgumentError(f"{self.__name__}: takes {self.nin} arguments, got "
                                       f"{len(args)}")
        xs = broadcast_arrays(*[read(a) for a in args])
        shape = static_shape(xs[0], "frompyfunc")
        out = _vmap(self.func)(*[reshape(x, (-1,)) for x in xs])
        outs = out if isinstance(out, tuple) else (out,)
        if len(outs) != self.nout:
            raise InvalidArgumentError(f"{self.__name__}: the function gave {len(outs)} "
                                       f"results, nout is {self.nout}")
        outs = tuple(reshape(read(o), shape) for o in outs)
        return outs if self.nout > 1 else outs[0]

    def outer(self, a, b):
        """`self(a[..., None, ...], b)`: every element of `a` with every element of `b`."""
        a, b = read(a), read(b)
        return self(expand_dims(a, tuple(range(ndim_of(a), ndim_of(a) + ndim_of(b)))), b)


def frompyfunc(func, /, nin, nout, *, identity=None):
    """A callable applying the scalar function `func` (of `nin` arguments, `nout` results)
    elementwise to broadcast arrays, vectorized with `tg.vmap`, as jax.numpy's frompyfunc;
    the results have the dtypes `func` gives (not NumPy's object arrays). `.outer(a, b)`
    applies it to every pair."""
    if not callable(func):
        raise InvalidArgumentError(f"frompyfunc: func must be callable, got {func!r}")
    if nin < 1 or nout < 1:
        raise InvalidArgumentError(f"frompyfunc: nin and nout must be >= 1, got {nin}, {nout}")
    return _Vectorized(func, nin, nout, identity)


def einsum_path(subscripts, *operands, optimize="greedy", einsum_call=False):
    """NumPy's contraction order for `einsum(subscripts, *operands)` and its report: a
    function of the operands' shapes (static ones), answered by NumPy."""
    if einsum_call:
        raise InvalidArgumentError("einsum_path: einsum_call=True is NumPy's internal form")
    stand_ins = [
        np.broadcast_to(np.zeros((), dtype_of(read(x))[0]), static_shape(read(x), "einsum_path"))
        if is_tensor(x) or isinstance(x, np.ndarray) else x for x in operands]
    return np.einsum_path(subscripts, *stand_ins, optimize=optimize)
