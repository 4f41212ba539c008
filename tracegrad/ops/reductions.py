"""Reductions, arg-reductions, cumulative reductions and sorting along axes.

Reductions keep the operand's dtype (`tracegrad.numpy` promotes int32/bool sums to
int64 first, as NumPy does).
"""

from __future__ import annotations

import numpy as np

from tracegrad.core import dtypes
from tracegrad.core.op import Primitive
from tracegrad.core.types import TensorType
from tracegrad.errors import ShapeError
from tracegrad.ops import shape_ops
from tracegrad.ops._families import NONDIFFERENTIABLE, REDUCTIONS, check_kind


def _reduced_shape(op, x, axes, keepdims):
    if len(set(axes)) != len(axes) or any(not 0 <= a < x.ndim for a in axes):
        raise ShapeError(f"{op}: bad axes {axes} for an operand of rank {x.ndim}")
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(x.shape))
    return tuple(d for i, d in enumerate(x.shape) if i not in axes)


def reduction(name: str, np_fn, kind: str, identity: bool) -> Primitive:
    """A reduction over `axes`; `identity=False` means an empty reduction is an error."""
    prim = Primitive(name)

    @prim.def_abstract_eval
    def abstract_eval(x, *, axes, keepdims=False):
        check_kind(name, x, kind)
        if not identity and any(x.shape[a] == 0 for a in axes if 0 <= a < x.ndim):
            raise ShapeError(f"{name}: reduction over a zero-size dim of {x} has no identity")
        return TensorType(_reduced_shape(name, x, axes, keepdims), x.dtype, x.weak)

    if identity:
        @prim.def_impl
        def impl(x, *, axes, keepdims=False):
            return np_fn(x, axis=axes, keepdims=keepdims, dtype=x.dtype)
    else:
        @prim.def_impl
        def impl(x, *, axes, keepdims=False):
            return np_fn(x, axis=axes, keepdims=keepdims)

    REDUCTIONS.add(prim)
    return prim


reduce_sum_p = reduction("reduce_sum", np.sum, "any", identity=True)


@reduce_sum_p.def_grad
def _reduce_sum_grad(op, g):
    (x,) = op.inputs
    axes, keepdims = op.attrs["axes"], op.attrs.get("keepdims", False)
    kept = tuple(range(x.ndim)) if keepdims else tuple(i for i in range(x.ndim) if i not in axes)
    return [shape_ops.broadcast_like(g, x, kept)]


reduce_prod_p = reduction("reduce_prod", np.prod, "any", identity=True)
reduce_max_p = reduction("reduce_max", np.max, "any", identity=False)  # NaN-propagating
reduce_min_p = reduction("reduce_min", np.min, "any", identity=False)


def arg_reduction(name: str, np_fn) -> Primitive:
    """The index (`index_dtype`) of the extreme element along `axis`; first on ties and NaN."""
    prim = Primitive(name)

    @prim.def_abstract_eval
    def abstract_eval(x, *, axis, keepdims=False, index_dtype=dtypes.int64):
        if not 0 <= axis < x.ndim:
            raise ShapeError(f"{name}: axis {axis} out of range for {x}")
        if x.shape[axis] == 0:
            raise ShapeError(f"{name}: attempt to get {name} of an empty sequence ({x})")
        return TensorType(_reduced_shape(name, x, (axis,), keepdims), index_dtype)

    @prim.def_impl
    def impl(x, *, axis, keepdims=False, index_dtype=dtypes.int64):
        return np_fn(x, axis=axis, keepdims=keepdims).astype(index_dtype, copy=False)

    NONDIFFERENTIABLE.add(prim)
    return prim


argmax_p = arg_reduction("argmax", np.argmax)
argmin_p = arg_reduction("argmin", np.argmin)


def cumulative(name: str, np_fn) -> Primitive:
    """The running reduction along `axis` (from the end when `reverse`)."""
    prim = Primitive(name)

    @prim.def_abstract_eval
    def abstract_eval(x, *, axis, reverse=False):
        check_kind(name, x, "any")
        if not 0 <= axis < x.ndim:
            raise ShapeError(f"{name}: axis {axis} out of range for {x}")
        return x

    @prim.def_impl
    def impl(x, *, axis, reverse=False):
        if reverse:
            return np.flip(np_fn(np.flip(x, axis), axis=axis, dtype=x.dtype), axis)
        return np_fn(x, axis=axis, dtype=x.dtype)

    return prim


cumsum_p = cumulative("cumsum", np.cumsum)
cumprod_p = cumulative("cumprod", np.cumprod)


sort_p = Primitive("sort")
"""The operand sorted ascending along `axis` (stable; NaN last, as NumPy)."""


@sort_p.def_abstract_eval
def _sort_abstract_eval(x, *, axis):
    if not 0 <= axis < x.ndim:
        raise ShapeError(f"sort: axis {axis} out of range for {x}")
    return x


@sort_p.def_impl
def _sort_impl(x, *, axis):
    return np.sort(x, axis=axis, kind="stable")


argsort_p = Primitive("argsort")
"""The indices that sort the operand along `axis` (stable)."""


@argsort_p.def_abstract_eval
def _argsort_abstract_eval(x, *, axis, index_dtype=dtypes.int64):
    if not 0 <= axis < x.ndim:
        raise ShapeError(f"argsort: axis {axis} out of range for {x}")
    return TensorType(x.shape, index_dtype)


@argsort_p.def_impl
def _argsort_impl(x, *, axis, index_dtype=dtypes.int64):
    return np.argsort(x, axis=axis, kind="stable").astype(index_dtype, copy=False)


NONDIFFERENTIABLE.add(argsort_p)
