"""Reductions, arg-reductions, cumulative reductions and sorting along axes.

Reductions keep the operand's dtype (`tracegrad.numpy` promotes int32/bool sums to
int64 first, as NumPy does).
"""

from __future__ import annotations

import numpy as np

from tracegrad.core import dtypes
from tracegrad.core.op import Primitive
from tracegrad.core.types import TensorType
from tracegrad.errors import NotDifferentiableError, ShapeError
from tracegrad.ops import elementwise as ew
from tracegrad.ops import indexing, shape_ops
from tracegrad.ops._batching import batch_axes
from tracegrad.ops._families import ALIGNED, REDUCTIONS, check_kind, dims_same, nondifferentiable


def _reduced_shape(op, x, axes, keepdims):
    if len(set(axes)) != len(axes) or any(not 0 <= a < x.ndim for a in axes):
        raise ShapeError(f"{op}: bad axes {axes} for an operand of rank {x.ndim}")
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(x.shape))
    return tuple(d for i, d in enumerate(x.shape) if i not in axes)


def dims_reduction(op):
    """Dims rule of a reduction (`axes`) or an arg-reduction (`axis`): the kept dims."""
    a, x, t = op.attrs, op.inputs[0], op.outputs[0]
    axes = a["axes"] if "axes" in a else (a["axis"],)
    keep = a.get("keepdims", False)
    j = 0
    for i in range(len(x.shape)):
        if i in axes:
            j += 1 if keep else 0
            continue
        yield x, i, t, j
        j += 1


def reduction(name: str, np_fn, kind: str, identity: bool) -> Primitive:
    """A reduction over `axes`; `identity=False` means an empty reduction is an error.
    `np_fn` is a ufunc's `reduce` (what `np.sum` & co. call, without their Python layer)."""
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

    batch_axes(prim, ("axes",), reduces=True)
    prim.def_dims(dims_reduction)
    REDUCTIONS.add(prim)
    ALIGNED.add(prim)
    return prim


reduce_sum_p = reduction("reduce_sum", np.add.reduce, "any", identity=True)


def _kept_dims(op) -> tuple:
    """The operand dims that a reduction's result keeps, in the result's order."""
    x, axes = op.inputs[0], op.attrs["axes"]
    if op.attrs.get("keepdims", False):
        return tuple(range(x.ndim))
    return tuple(i for i in range(x.ndim) if i not in axes)


@reduce_sum_p.def_grad
def _reduce_sum_grad(op, g):
    return [shape_ops.broadcast_like(g, op.inputs[0], _kept_dims(op))]


reduce_prod_p = reduction("reduce_prod", np.multiply.reduce, "any", identity=True)


@reduce_prod_p.def_grad
def _reduce_prod_grad(op, g):
    # d prod / d x_i is the product of the other elements: exclusive products from both
    # sides, exact where x has zeros (no division by x).
    (x,), axes = op.inputs, op.attrs["axes"]
    g = shape_ops.broadcast_like(g, x, _kept_dims(op))
    return [ew.mul_p.bind(g, ew.conj(_products_of_others(x, axes))) if axes else g]


def _products_of_others(x, axes):
    """Element i: the product of the other elements of its slice over `axes`."""
    if len(axes) == 1:
        (axis,) = axes
        left = shape_ops.shift(cumprod_p.bind(x, axis=axis), axis, 1, 1)
        right = shape_ops.shift(cumprod_p.bind(x, axis=axis, reverse=True), axis, -1, 1)
        return ew.mul_p.bind(left, right)
    kept = tuple(i for i in range(x.ndim) if i not in axes)
    perm = kept + tuple(axes)
    lead = tuple(x.shape[i] for i in kept)
    reduced = tuple(x.shape[i] for i in axes)
    if None in reduced or lead.count(None) > 1:
        raise NotDifferentiableError(
            f"reduce_prod: the gradient over several axes {axes} of {x.type} flattens them and "
            "needs their sizes known (and at most one other unknown dim)"
        )
    if 0 in x.shape:  # no elements, no products (a -1 among 0 sizes could not be inferred)
        return shape_ops.zeros_like(x)
    lead_sizes = tuple(-1 if d is None else d for d in lead)
    flat = shape_ops.reshape_p.bind(shape_ops.transpose_p.bind(x, permutation=perm),
                                    new_sizes=lead_sizes + (int(np.prod(reduced)),))
    others = shape_ops.reshape_p.bind(_products_of_others(flat, (len(kept),)),
                                      new_sizes=lead_sizes + reduced)
    return shape_ops.transpose_p.bind(others, permutation=tuple(np.argsort(perm).tolist()))


reduce_max_p = reduction("reduce_max", np.maximum.reduce, "any", identity=False)  # NaN-propagating
reduce_min_p = reduction("reduce_min", np.minimum.reduce, "any", identity=False)


def _reduce_extremum_grad(op, g):
    # The gradient goes to the elements equal to the result, split evenly among ties.
    (x,), (out,) = op.inputs, op.outputs
    kept = _kept_dims(op)
    hit = ew.convert_element_type_p.bind(
        ew.eq_p.bind(x, shape_ops.broadcast_like(out, x, kept)), new_dtype=x.dtype)
    count = reduce_sum_p.bind(hit, axes=op.attrs["axes"], keepdims=op.attrs.get("keepdims", False))
    return [ew.mul_p.bind(shape_ops.broadcast_like(ew.div_p.bind(g, count), x, kept), hit)]


reduce_max_p.def_grad(_reduce_extremum_grad)
reduce_min_p.def_grad(_reduce_extremum_grad)


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

    batch_axes(prim, ("axis",), reduces=True)
    prim.def_dims(dims_reduction)
    nondifferentiable(prim)
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

    batch_axes(prim, ("axis",))
    prim.def_dims(dims_same)
    return prim


cumsum_p = cumulative("cumsum", np.cumsum)
cumsum_p.def_grad(lambda op, g: [cumsum_p.bind(g, axis=op.attrs["axis"],
                                               reverse=not op.attrs.get("reverse", False))])

cumprod_p = cumulative("cumprod", np.cumprod)


@cumprod_p.def_grad
def _cumprod_grad(op, g):
    # Differentiates the log-depth scan y <- y * shift(y, d) for d = 1, 2, 4, ...: products
    # only, so the gradient is exact where x has zeros, and is itself differentiable.
    (x,), axis, reverse = op.inputs, op.attrs["axis"], op.attrs.get("reverse", False)
    n = x.shape[axis]
    if n is None:
        raise NotDifferentiableError(
            f"cumprod: the gradient along an unknown dim of {x.type} is not supported (give "
            "the function an input_signature with that dim known)"
        )
    if reverse:
        x, g = shape_ops.rev_p.bind(x, dimensions=(axis,)), shape_ops.rev_p.bind(
            g, dimensions=(axis,))
    levels = []
    y, d = x, 1
    while d < n:
        shifted = shape_ops.shift(y, axis, d, 1)
        levels.append((y, shifted, d))
        y, d = ew.mul_p.bind(y, shifted), 2 * d
    for y, shifted, d in reversed(levels):
        g = ew.add_p.bind(ew.mul_p.bind(g, ew.conj(shifted)),
                          shape_ops.shift(ew.mul_p.bind(g, ew.conj(y)), axis, -d, 0))
    return [shape_ops.rev_p.bind(g, dimensions=(axis,)) if reverse else g]


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


batch_axes(sort_p, ("axis",))
sort_p.def_dims(dims_same)


@sort_p.def_grad
def _sort_grad(op, g):
    # Each sorted position sends its gradient back to where its element came from.
    (x,), axis = op.inputs, op.attrs["axis"]
    perm = argsort_p.bind(x, axis=axis)
    return [_unpermute(g, perm, axis)]


def _unpermute(g, perm, axis):
    """`r` with `r[..., perm[..., i], ...] = g[..., i, ...]` along `axis` (a permutation)."""
    scatter_add_p = indexing.scatter_add_p
    zeros = shape_ops.zeros_like(g)
    if g.ndim == 1:
        return scatter_add_p.bind(zeros, perm, g, axis=0)
    if None in g.shape:
        raise NotDifferentiableError(
            f"sort: the gradient of a sort of a rank-{g.ndim} tensor with unknown dims "
            f"({g.type}) is not supported"
        )
    size = int(np.prod(g.shape))
    index = shape_ops.row_major_index(tuple(g.shape), axis=axis, coord=perm)
    flat = scatter_add_p.bind(
        shape_ops.reshape_p.bind(zeros, new_sizes=(size,)),
        shape_ops.reshape_p.bind(index, new_sizes=(size,)),
        shape_ops.reshape_p.bind(g, new_sizes=(size,)), axis=0)
    return shape_ops.reshape_p.bind(flat, new_sizes=tuple(g.shape))


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


batch_axes(argsort_p, ("axis",))
argsort_p.def_dims(dims_same)
nondifferentiable(argsort_p)
