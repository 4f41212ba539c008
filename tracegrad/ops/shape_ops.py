"""Primitives that move data without arithmetic: broadcast, reshape, transpose, slice,
rev, pad, concatenate, iota and dim_size.

A dim that is unknown while tracing (`None`) and must be materialised (the target of a
broadcast, the extent of an iota) is supplied at run time by a scalar int64 operand,
one per `None` in the static `shape` attribute, in order (as StableHLO's
`dynamic_broadcast_in_dim` does); `dim_size(x, axis=k)` reads such a dim.
"""

from __future__ import annotations

import numpy as np

from tracegrad.core import dtypes
from tracegrad.core.ir import EagerTensor, Tensor
from tracegrad.core.op import Primitive, constant_p, no_dims
from tracegrad.core.shapes import shape_str
from tracegrad.core.state import state
from tracegrad.core.types import TensorType
from tracegrad.core.variables import Variable
from tracegrad.errors import DTypeError, NotDifferentiableError, ShapeError
from tracegrad.ops import elementwise
from tracegrad.ops._batching import batch_axes, bdim_at, moveaxis
from tracegrad.ops._families import ALIGNED, dims_same, needs, nondifferentiable, same_dtype
from tracegrad.ops.reductions import reduce_sum_p


def _check_dyn_dims(op: str, shape, dyn) -> None:
    needed = sum(d is None for d in shape)
    if len(dyn) != needed:
        raise ShapeError(
            f"{op}: shape {shape_str(shape)} has {needed} unknown dims but {len(dyn)} "
            "dim operands were given"
        )
    for t in dyn:
        if t.shape != () or not dtypes.is_int(t.dtype):
            raise DTypeError(f"{op}: dim operands must be integer scalars, got {t}")


def _resolve_shape(shape, dyn) -> tuple:
    it = iter(dyn)
    return tuple(int(next(it)) if d is None else d for d in shape)


# -- broadcast_in_dim ------------------------------------------------------------------------

broadcast_in_dim_p = Primitive("broadcast_in_dim")
"""Operand dim i becomes result dim `broadcast_dimensions[i]` (size 1 or equal); the other
result dims are new. `shape` is the result shape."""


@broadcast_in_dim_p.def_abstract_eval
def _broadcast_in_dim_abstract_eval(x, *dyn, shape, broadcast_dimensions):
    _check_dyn_dims("broadcast_in_dim", shape, dyn)
    bd = broadcast_dimensions
    if len(bd) != x.ndim or any(not 0 <= d < len(shape) for d in bd) or list(bd) != sorted(
        set(bd)
    ):
        raise ShapeError(
            f"broadcast_in_dim: broadcast_dimensions {bd} do not map operand "
            f"{shape_str(x.shape)} into {shape_str(shape)} (need one increasing dim each)"
        )
    for i, d in enumerate(bd):
        xd, td = x.shape[i], shape[d]
        if xd != 1 and xd is not None and td is not None and xd != td:
            raise ShapeError(
                f"broadcast_in_dim: operand {shape_str(x.shape)} cannot be broadcast to "
                f"{shape_str(shape)}"
            )
    return TensorType(shape, x.dtype, x.weak)


@broadcast_in_dim_p.def_impl
def _broadcast_in_dim_impl(x, *dyn, shape, broadcast_dimensions):
    if dyn:
        shape = _resolve_shape(shape, dyn)
    expanded = [1] * len(shape)
    for i, d in enumerate(broadcast_dimensions):
        expanded[d] = x.shape[i]
    return broadcast_array(x.reshape(expanded), shape)


def broadcast_array(x: np.ndarray, shape: tuple) -> np.ndarray:
    """`x` broadcast to `shape` by NumPy's rules, as a read-only view: `np.broadcast_to`,
    which costs microseconds in Python code, made directly for a contiguous `x`.

    >>> broadcast_array(np.ones((3, 1)), (2, 3, 4)).strides   # (0, 8, 0)
    """
    if x.ndim == 0:  # a scalar (the usual case): every stride is 0
        out = np.ndarray(shape, x.dtype, x, 0, (0,) * len(shape))
        out.setflags(write=False)
        return out
    lead = len(shape) - x.ndim
    if lead < 0 or not x.flags.c_contiguous or x.size == 0:
        return np.broadcast_to(x, shape)
    strides = [0] * lead
    for d, n, stride in zip(shape[lead:], x.shape, x.strides, strict=True):
        if n == d:
            strides.append(stride)
        elif n == 1:
            strides.append(0)
        else:
            return np.broadcast_to(x, shape)  # raises NumPy's error
    out = np.ndarray(shape, x.dtype, x, 0, tuple(strides))
    out.setflags(write=False)
    return out


@broadcast_in_dim_p.def_grad
def _broadcast_in_dim_grad(op, g):
    x, *dyn = op.inputs
    shape, bd = op.attrs["shape"], op.attrs["broadcast_dimensions"]
    new = tuple(i for i in range(len(shape)) if i not in bd)
    ones = tuple(d for i, d in enumerate(bd) if x.shape[i] == 1 and shape[d] != 1)
    if ones:
        g = reduce_sum_p.bind(g, axes=ones, keepdims=True)
    if new:
        g = reduce_sum_p.bind(g, axes=new, keepdims=False)
    return [g] + [None] * len(dyn)


@broadcast_in_dim_p.def_batch
def _broadcast_in_dim_batch(ctx, args, dims, *, shape, broadcast_dimensions):
    (x, *dyn), (d, *dyn_dims) = args, dims
    if any(dd is not None for dd in dyn_dims):
        raise ctx.unsupported("the result's shape differs between iterations")
    x = moveaxis(x, d, 0)
    size = x.shape[0]
    extra = [dim_size_p.bind(x, axis=0)] if size is None else []
    return broadcast_in_dim_p.bind(
        x, *extra, *dyn, shape=(size, *shape),
        broadcast_dimensions=(0, *(b + 1 for b in broadcast_dimensions))), 0


# -- reshape ---------------------------------------------------------------------------------

def _broadcast_in_dim_dims(op):
    (x, *_), (t,) = op.inputs, op.outputs
    for i, d in enumerate(op.attrs["broadcast_dimensions"]):
        if x.shape[i] not in (None, 1):  # a 1 (or an unknown dim: maybe 1) broadcasts
            yield x, i, t, d


# the result's unknown dims are its operands from 1 on
broadcast_in_dim_p.def_dims(_broadcast_in_dim_dims, size_operands=1)
ALIGNED.add(broadcast_in_dim_p)


reshape_p = Primitive("reshape")
"""The operand's elements (row-major) in shape `new_sizes`; one entry may be -1 when the
operand has unknown dims."""


@reshape_p.def_abstract_eval
def _reshape_abstract_eval(x, *, new_sizes):
    if sum(d == -1 for d in new_sizes) > 1 or any(d < -1 for d in new_sizes):
        raise ShapeError(f"reshape: bad new_sizes {new_sizes}")
    known = 1
    for d in new_sizes:
        if d != -1:
            known *= d
    size = 1
    for d in x.shape:
        size = None if size is None or d is None else size * d
    if -1 in new_sizes:
        if size is None:
            out = tuple(None if d == -1 else d for d in new_sizes)
        elif known == 0 or size % known:
            raise ShapeError(
                f"reshape: cannot reshape {shape_str(x.shape)} into {new_sizes}"
            )
        else:
            out = tuple(size // known if d == -1 else d for d in new_sizes)
    else:
        if size is not None and size != known:
            raise ShapeError(
                f"reshape: cannot reshape {shape_str(x.shape)} ({size} elements) into "
                f"{shape_str(new_sizes)} ({known} elements)"
            )
        out = tuple(new_sizes)
    return TensorType(out, x.dtype, x.weak)


@reshape_p.def_impl
def _reshape_impl(x, *, new_sizes):
    return x.reshape(new_sizes)


@reshape_p.def_grad
def _reshape_grad(op, g):
    (x,) = op.inputs
    if 0 in x.shape:  # no elements (-1 could not be inferred back from g's size 0)
        return [zeros_like(x)]
    sizes = tuple(-1 if d is None else d for d in x.shape)
    if sizes.count(-1) > 1:
        raise NotDifferentiableError(
            f"reshape: the gradient reshapes back to {x.type}, which has more than one "
            "unknown dim (give the function an input_signature with known dims)"
        )
    return [reshape_p.bind(g, new_sizes=sizes)]


@reshape_p.def_batch
def _reshape_batch(ctx, args, dims, *, new_sizes):
    (x,), (d,) = args, dims
    x = moveaxis(x, d, 0)
    size = x.shape[0]
    if size is None and -1 in new_sizes:  # one -1 at most: infer the per-iteration one here
        per = x.shape[1:]
        if None in per:
            raise ctx.unsupported("reshape with -1 when both the batch size and the "
                                  "iteration's size are unknown")
        known = int(np.prod([n for n in new_sizes if n != -1], dtype=np.int64))
        new_sizes = tuple(int(np.prod(per, dtype=np.int64)) // known if n == -1 else n
                          for n in new_sizes)
    if size is None and 0 in new_sizes:  # empty iterations: a -1 cannot count them
        return broadcast_in_dim_p.bind(scalar_like(x, 0), dim_size_p.bind(x, axis=0),
                                       shape=(None, *new_sizes), broadcast_dimensions=()), 0
    return reshape_p.bind(x, new_sizes=(-1 if size is None else size, *new_sizes)), 0


# -- transpose -------------------------------------------------------------------------------

def squeeze_map(op):
    """For a reshape that only inserts or removes size-1 dims: the `(operand axis, result
    axis)` pairs of its other dims; None for any other reshape (or unknown dims)."""
    x, out = op.inputs[0].shape, op.outputs[0].shape
    xi = [i for i, d in enumerate(x) if d != 1]
    oi = [j for j, d in enumerate(out) if d != 1]
    if len(xi) != len(oi) or any(
        x[i] is None or out[j] is None or x[i] != out[j] for i, j in zip(xi, oi)
    ):
        return None
    return list(zip(xi, oi))


@reshape_p.def_dims
def _reshape_dims(op):
    """A reshape that only inserts or removes size-1 dims keeps the others."""
    for i, j in squeeze_map(op) or ():
        yield op.inputs[0], i, op.outputs[0], j


ALIGNED.add(reshape_p)


transpose_p = Primitive("transpose")
"""Result dim i is operand dim `permutation[i]`."""


@transpose_p.def_abstract_eval
def _transpose_abstract_eval(x, *, permutation):
    if sorted(permutation) != list(range(x.ndim)):
        raise ShapeError(
            f"transpose: permutation {permutation} is not a permutation of {x.ndim} axes"
        )
    return TensorType(tuple(x.shape[p] for p in permutation), x.dtype, x.weak)


@transpose_p.def_impl
def _transpose_impl(x, *, permutation):
    return x.transpose(permutation)


@transpose_p.def_grad
def _transpose_grad(op, g):
    inverse = tuple(np.argsort(op.attrs["permutation"]).tolist())
    return [transpose_p.bind(g, permutation=inverse)]


@transpose_p.def_batch
def _transpose_batch(ctx, args, dims, *, permutation):
    (x,), (d,) = args, dims
    return transpose_p.bind(x, permutation=(d, *(p + (p >= d) for p in permutation))), 0


# -- slice -----------------------------------------------------------------------------------

@transpose_p.def_dims
def _transpose_dims(op):
    for i, p in enumerate(op.attrs["permutation"]):
        yield op.outputs[0], i, op.inputs[0], p


ALIGNED.add(transpose_p)


slice_p = Primitive("slice")
"""`x[start:limit:stride, ...]` per dim (strides > 0). Indices are non-negative and in
bounds for known dims; for an unknown dim they follow Python slice rules (negative counts
from the end, None is the full extent)."""


def slice_extent(n, start, limit, stride):
    if n is None:
        return None
    return len(range(*slice(start, limit, stride).indices(n)))


@slice_p.def_abstract_eval
def _slice_abstract_eval(x, *, start_indices, limit_indices, strides):
    if not len(start_indices) == len(limit_indices) == len(strides) == x.ndim:
        raise ShapeError(f"slice: need one start, limit and stride per dim of {x}")
    out = []
    for n, s, l, st in zip(x.shape, start_indices, limit_indices, strides):
        if st is None or st <= 0:
            raise ShapeError(f"slice: strides must be positive, got {strides}")
        # None or negative indices (Python slice rules) are the form for a dim unknown when
        # traced; the interpreter re-infers such ops with the run-time sizes.
        relative = s is None or l is None or s < 0 or l < 0
        if n is not None and not relative and not 0 <= s <= l <= n:
            raise ShapeError(
                f"slice: start {start_indices} / limit {limit_indices} out of bounds for "
                f"{shape_str(x.shape)}"
            )
        out.append(slice_extent(n, s, l, st))
    return TensorType(tuple(out), x.dtype, x.weak)


@slice_p.def_impl
def _slice_impl(x, *, start_indices, limit_indices, strides):
    return x[tuple(map(slice, start_indices, limit_indices, strides))]


@slice_p.def_batch
def _slice_batch(ctx, args, dims, *, start_indices, limit_indices, strides):
    (x,), (d,) = args, dims
    return slice_p.bind(x, start_indices=(*start_indices[:d], 0, *start_indices[d:]),
                        limit_indices=(*limit_indices[:d], x.shape[d], *limit_indices[d:]),
                        strides=(*strides[:d], 1, *strides[d:])), d


@slice_p.def_grad
def _slice_grad(op, g):
    # The slice's transpose: g padded with zeros back into the operand's positions.
    (x,), (y,) = op.inputs, op.outputs
    config = []
    for n, m, start, limit, stride in zip(x.shape, y.shape, op.attrs["start_indices"],
                                          op.attrs["limit_indices"], op.attrs["strides"],
                                          strict=True):
        if n is None:
            # x[lo:-hi] pads back with lo and hi zeros, whatever the size
            if stride == 1 and (start or 0) >= 0 and (limit is None or limit < 0):
                config.append((start or 0, -limit if limit else 0, 0))
                continue
            raise NotDifferentiableError(
                f"slice: the gradient of a slice [{start}:{limit}:{stride}] of an unknown dim "
                f"of {x.type} is not supported (only [a:] and [a:-b]); give the function an "
                "input_signature with known dims"
            )
        if m == 0:
            config.append((0, n, 0))
        else:
            last = start + (m - 1) * stride
            config.append((start, n - 1 - last, stride - 1))
    return [pad_p.bind(g, scalar_like(g, 0), padding_config=tuple(config))]


# -- rev -------------------------------------------------------------------------------------

slice_p.def_dims(no_dims)  # (a slice of a whole dim is still its own class)

rev_p = Primitive("rev")
"""The operand reversed along `dimensions`."""


@rev_p.def_abstract_eval
def _rev_abstract_eval(x, *, dimensions):
    if any(not 0 <= d < x.ndim for d in dimensions) or len(set(dimensions)) != len(dimensions):
        raise ShapeError(f"rev: bad dimensions {dimensions} for {x}")
    return x


@rev_p.def_impl
def _rev_impl(x, *, dimensions):
    return np.flip(x, dimensions) if dimensions else x


rev_p.def_grad(lambda op, g: [rev_p.bind(g, dimensions=op.attrs["dimensions"])])
batch_axes(rev_p, ("dimensions",))
rev_p.def_dims(dims_same)


# -- pad -------------------------------------------------------------------------------------

pad_p = Primitive("pad")
"""`x` with `lo` / `hi` copies of the scalar `padding_value` before / after each dim and
`interior` copies between its elements: `padding_config=((lo, hi, interior), ...)`."""


@pad_p.def_abstract_eval
def _pad_abstract_eval(x, padding_value, *, padding_config):
    same_dtype("pad", x, padding_value)
    if padding_value.shape != ():
        raise ShapeError(f"pad: padding_value must be a scalar, got {padding_value}")
    if len(padding_config) != x.ndim or any(
        min(c) < 0 or len(c) != 3 for c in padding_config
    ):
        raise ShapeError(f"pad: bad padding_config {padding_config} for {x}")
    out = tuple(
        None if n is None else lo + hi + n + max(n - 1, 0) * interior
        for n, (lo, hi, interior) in zip(x.shape, padding_config)
    )
    return TensorType(out, x.dtype, x.weak and padding_value.weak)


@pad_p.def_impl
def _pad_impl(x, padding_value, *, padding_config):
    shape = tuple(
        lo + hi + n + max(n - 1, 0) * interior
        for n, (lo, hi, interior) in zip(x.shape, padding_config)
    )
    out = np.full(shape, padding_value, dtype=x.dtype)
    index = tuple(
        slice(lo, lo + n + max(n - 1, 0) * interior, interior + 1)
        for n, (lo, hi, interior) in zip(x.shape, padding_config)
    )
    out[index] = x
    return out


@pad_p.def_grad
def _pad_grad(op, g):
    # The operand's elements are a strided slice of the result; the padding value
    # receives the gradient of every other position.
    x, _ = op.inputs
    config = op.attrs["padding_config"]
    starts, limits, strides, full = [], [], [], True
    for n, m, (lo, hi, interior) in zip(x.shape, g.shape, config, strict=True):
        full = full and lo == hi == 0 and (interior == 0 or n is not None and n <= 1)
        starts.append(lo)
        strides.append(interior + 1)
        if n is None:
            limits.append(-hi if hi else None)
        else:
            limits.append(lo + n + max(n - 1, 0) * interior)
    if full:
        gx = g
    else:
        gx = slice_p.bind(g, start_indices=tuple(starts), limit_indices=tuple(limits),
                          strides=tuple(strides))
    g_pad = None
    if needs(op, 1):
        axes = tuple(range(g.ndim))
        g_pad = elementwise.sub_p.bind(reduce_sum_p.bind(g, axes=axes),
                                       reduce_sum_p.bind(gx, axes=axes))
    return [gx, g_pad]


@pad_p.def_batch
def _pad_batch(ctx, args, dims, *, padding_config):
    (x, value), (d, value_dim) = args, dims
    if d is None:
        x, d = bdim_at(x, None, 0, value, value_dim), 0
    config = padding_config[:d] + ((0, 0, 0),) + padding_config[d:]
    if value_dim is None:
        return pad_p.bind(x, value, padding_config=config), d
    # a padding value per iteration: pad with zero, then select it where the padding is
    padded = pad_p.bind(x, scalar_like(x, 0), padding_config=config)
    inside = pad_p.bind(full_like(x, True, dtypes.bool_), scalar_like(x, False, dtypes.bool_),
                        padding_config=config)
    values = broadcast_like(value, padded, (d,))
    return elementwise.select_p.bind(inside, padded, values), d


# -- concatenate -----------------------------------------------------------------------------

pad_p.def_dims(no_dims)

concatenate_p = Primitive("concatenate")
"""The operands joined along `dimension` (all other dims equal)."""


@concatenate_p.def_abstract_eval
def _concatenate_abstract_eval(*xs, dimension):
    if not xs:
        raise ShapeError("concatenate: needs at least one operand")
    dtype = same_dtype("concatenate", *xs)
    ndim = xs[0].ndim
    if not 0 <= dimension < ndim:
        raise ShapeError(f"concatenate: dimension {dimension} out of range for rank {ndim}")
    out = list(xs[0].shape)
    out[dimension] = 0
    for x in xs:
        if x.ndim != ndim:
            raise ShapeError(
                "concatenate: operands must have the same rank, got "
                + ", ".join(shape_str(t.shape) for t in xs)
            )
        for i, d in enumerate(x.shape):
            if i == dimension:
                out[i] = None if out[i] is None or d is None else out[i] + d
            elif out[i] is None:
                out[i] = d
            elif d is not None and d != out[i]:
                raise ShapeError(
                    f"concatenate: shapes {', '.join(shape_str(t.shape) for t in xs)} "
                    f"differ outside dimension {dimension}"
                )
    return TensorType(tuple(out), dtype, all(x.weak for x in xs))


@concatenate_p.def_impl
def _concatenate_impl(*xs, dimension):
    return np.concatenate(xs, axis=dimension)


batch_axes(concatenate_p, ("dimension",))


@concatenate_p.def_grad
def _concatenate_grad(op, g):
    # Each operand's gradient is its stretch of g along `dimension`; with unknown sizes a
    # stretch is located from whichever end has only known sizes (Python slice rules).
    d = op.attrs["dimension"]
    sizes = [x.shape[d] for x in op.inputs]
    grads = []
    for i, x in enumerate(op.inputs):
        before, size, after = sizes[:i], sizes[i], sizes[i + 1:]
        if not needs(op, i):
            grads.append(None)
        elif size == 0:
            grads.append(zeros_like(x))
        elif g.shape[d] is not None and None not in sizes:
            grads.append(slice_along(g, d, sum(before), sum(before) + size))
        elif None not in after and (size is not None or None not in before):
            start = sum(before) if None not in before else -(sum(after) + size)
            grads.append(slice_along(g, d, start, -sum(after) if sum(after) else None))
        elif None not in before and size is not None:
            grads.append(slice_along(g, d, sum(before), sum(before) + size))
        else:
            raise NotDifferentiableError(
                f"concatenate: cannot locate operand {i} ({x.type}) in the result along "
                f"dimension {d}: unknown sizes on both sides"
            )
    return grads


# -- iota ------------------------------------------------------------------------------------

@concatenate_p.def_dims
def _concatenate_dims(op):
    dim = op.attrs["dimension"]
    for x in op.inputs:
        for i in range(len(x.shape)):
            if i != dim:
                yield x, i, op.outputs[0], i


iota_p = Primitive("iota")
"""An array of `shape` whose elements are their index along `dimension`."""


@iota_p.def_abstract_eval
def _iota_abstract_eval(*dyn, dtype, shape, dimension):
    _check_dyn_dims("iota", shape, dyn)
    dtypes.canonicalize(dtype, op="iota")
    if not 0 <= dimension < len(shape):
        raise ShapeError(f"iota: dimension {dimension} out of range for {shape_str(shape)}")
    return TensorType(shape, dtype)


@iota_p.def_impl
def _iota_impl(*dyn, dtype, shape, dimension):
    shape = _resolve_shape(shape, dyn)
    expanded = [1] * len(shape)
    expanded[dimension] = shape[dimension]
    return np.broadcast_to(np.arange(shape[dimension], dtype=dtype).reshape(expanded), shape)


nondifferentiable(iota_p)


@iota_p.def_batch
def _iota_batch(ctx, args, dims, **attrs):
    raise ctx.unsupported("the shape of iota differs between iterations")


# -- dim_size --------------------------------------------------------------------------------

iota_p.def_dims(no_dims, size_operands=0)  # its unknown dims: its operands

dim_size_p = Primitive("dim_size")
"""The size of the operand's dim `axis`, as an int64 scalar."""


@dim_size_p.def_abstract_eval
def _dim_size_abstract_eval(x, *, axis):
    if not 0 <= axis < x.ndim:
        raise ShapeError(f"dim_size: axis {axis} out of range for {x}")
    return TensorType((), dtypes.int64)


@dim_size_p.def_impl
def _dim_size_impl(x, *, axis):
    return np.asarray(x.shape[axis], dtype=np.int64)


nondifferentiable(dim_size_p)


@dim_size_p.def_batch
def _dim_size_batch(ctx, args, dims, *, axis):
    (x,), (d,) = args, dims
    return dim_size_p.bind(x, axis=axis + (axis >= d)), None  # the same in every iteration


# -- composites every gradient rule needs ----------------------------------------------------


dim_size_p.def_dims(no_dims)


def broadcast_like(g, x, broadcast_dimensions):
    """`g` broadcast to `x`'s shape, g's dims becoming `broadcast_dimensions` (unknown dims of
    `x` are read from `x` at run time)."""
    shape = tuple(x.shape)
    dyn = [dim_size_p.bind(x, axis=i) for i, d in enumerate(shape) if d is None]
    if tuple(g.shape) == shape and not dyn:
        return g
    return broadcast_in_dim_p.bind(g, *dyn, shape=shape,
                                   broadcast_dimensions=tuple(broadcast_dimensions))


def scalar_like(x, value, dtype=None):
    """`value` as a rank-0 tensor of `x`'s dtype (or `dtype`): a graph constant when
    tracing, an eager tensor for tensor `x`, NumPy for NumPy `x`."""
    scalar = np.asarray(value, dtype=x.dtype if dtype is None else dtype)
    if state.graph is not None:
        return state.graph.constant(scalar)
    if isinstance(x, (Tensor, Variable)):
        return EagerTensor(scalar)
    return scalar


def full_like(x, fill_value, dtype=None):
    """A tensor of `x`'s shape filled with `fill_value` (unknown dims read from `x`)."""
    if state.graph is None and not isinstance(x, (Tensor, Variable)):
        return np.full(tuple(x.shape), fill_value, dtype=x.dtype if dtype is None else dtype)
    return broadcast_like(scalar_like(x, fill_value, dtype), x, ())


def zeros_like(x, dtype=None):
    return full_like(x, 0, dtype)


def is_zeros(t) -> bool:
    """Whether `t` is a broadcast constant zero (what `zeros_like` and an unconnected
    gradient are): rules may drop the terms it multiplies."""
    op = getattr(t, "op", None)
    while op is not None and op.primitive is broadcast_in_dim_p:
        op = op.inputs[0].op
    return (op is not None and op.primitive is constant_p
            and not np.any(op.attrs["value"].value))


def ones_like(x, dtype=None):
    return full_like(x, 1, dtype)


def stacked(tensors):
    """`tensors` (of one shape) side by side along a new first axis."""
    return concatenate_p.bind(*[reshape_p.bind(t, new_sizes=(1, *t.shape))
                                for t in tensors], dimension=0)


def slice_along(x, axis, start, limit, stride=1):
    """`x[start:limit:stride]` along `axis`, every other dim whole."""
    starts = [0] * x.ndim
    limits = list(x.shape)
    strides = [1] * x.ndim
    starts[axis], limits[axis], strides[axis] = start, limit, stride
    return slice_p.bind(x, start_indices=tuple(starts), limit_indices=tuple(limits),
                        strides=tuple(strides))


def shift(x, axis, offset, fill):
    """`x` moved `offset` places along `axis` (toward higher indices when positive), the
    vacated places holding `fill`: `shift([1, 2, 3], 0, 1, 9) == [9, 1, 2]`."""
    n = x.shape[axis]
    if n is not None and abs(offset) >= n:
        return full_like(x, fill)
    config = [(0, 0, 0)] * x.ndim
    if offset > 0:
        kept = slice_along(x, axis, 0, n - offset if n is not None else -offset)
        config[axis] = (offset, 0, 0)
    else:
        kept = slice_along(x, axis, -offset, n)
        config[axis] = (0, -offset, 0)
    return pad_p.bind(kept, scalar_like(x, fill), padding_config=tuple(config))


def row_major_index(shape, dyn=(), axis=None, coord=None):
    """An int64 tensor of `shape` holding each element's row-major offset; along `axis` the
    coordinate is read from the int64 tensor `coord` instead. Dims past the first must be
    known; `dyn` holds the dim operand of an unknown first dim."""
    index = None
    for d in range(len(shape)):
        if d == axis:
            c = coord
        else:
            c = iota_p.bind(*dyn, dtype=dtypes.int64, shape=shape, dimension=d)
        stride = int(np.prod(shape[d + 1:]))
        term = c if stride == 1 else elementwise.mul_p.bind(c, full_like(c, stride))
        index = term if index is None else elementwise.add_p.bind(index, term)
    return index
