"""What batch rules share: moving the batch dim, materializing loop-invariant operands,
and the rule factories of op families.

A batch rule is `rule(ctx, args, dims, **attrs) -> (result, dim)` (lists of results and
dims for a primitive with several results). `args` are tensors of the graph being built,
`dims[i]` is the axis of `args[i]` that the batch runs along, or None for a value that is
the same in every iteration (loop-invariant); at least one is not None. `dim` says where
the result's batch axis is (None if the result is invariant). `ctx` is the vectorizing
transform: `ctx.vectorize_graph(graph, dims)` batches a sub-graph (the rules of primitives
that hold one use it), and `ctx.unsupported(why)` is the error for a case with no rule.
"""

from __future__ import annotations

from tracegrad.core.op import Primitive


def _shape_ops():
    from tracegrad.ops import shape_ops  # the shape primitives are defined after families

    return shape_ops


def moveaxis(x, src: int, dst: int):
    """`x` with axis `src` moved to position `dst` (a `transpose`; none if it is there)."""
    if src == dst:
        return x
    perm = [i for i in range(x.ndim) if i != src]
    perm.insert(dst, src)
    return _shape_ops().transpose_p.bind(x, permutation=tuple(perm))


def dim_operands(x, axes=None) -> list:
    """The run-time sizes (`dim_size`) of `x`'s unknown dims among `axes` (all by default),
    in order: the operands a shape attribute with `None` entries needs."""
    axes = range(x.ndim) if axes is None else axes
    return [_shape_ops().dim_size_p.bind(x, axis=a) for a in axes if x.shape[a] is None]


def bdim_at(x, d, at: int, like=None, like_dim=None):
    """`x` batched on axis `at`: moved there, or, when invariant (`d` None), broadcast along a
    new axis `at` whose size is axis `like_dim` of `like` (a batched tensor)."""
    if d is not None:
        return moveaxis(x, d, at)
    size = like.shape[like_dim]
    shape = x.shape[:at] + (size,) + x.shape[at:]
    dims = tuple(i for i in range(len(shape)) if i != at)
    dyn = dim_operands(x, range(at))
    dyn += [_shape_ops().dim_size_p.bind(like, axis=like_dim)] if size is None else []
    dyn += dim_operands(x, range(at, x.ndim))
    return _shape_ops().broadcast_in_dim_p.bind(x, *dyn, shape=shape, broadcast_dimensions=dims)


def first_batched(args, dims):
    """(tensor, dim) of the first batched argument."""
    for x, d in zip(args, dims, strict=True):
        if d is not None:
            return x, d
    raise AssertionError("a batch rule was called with no batched argument")


def all_at(args, dims, at: int = 0) -> list:
    """Every argument batched on axis `at` (invariant ones broadcast)."""
    like, like_dim = first_batched(args, dims)
    return [bdim_at(x, d, at, like, like_dim) for x, d in zip(args, dims, strict=True)]


def _same_shape_operands(args, dims):
    """Operands of an elementwise op batched on one common axis: the axis they share when
    every batched operand has it (no transpose), else 0. Returns (operands, axis)."""
    batched = {d for d in dims if d is not None}
    at = batched.pop() if len(batched) == 1 else 0
    return all_at(args, dims, at), at


def batch_elementwise(prim: Primitive):
    """The batch rule of an elementwise primitive whose operands have equal shapes: the op
    itself on operands batched along one axis."""

    def rule(ctx, args, dims, **attrs):
        operands, at = _same_shape_operands(args, dims)
        return prim.bind(*operands, **attrs), at

    prim.def_batch(rule)
    return rule


def batch_axes(prim: Primitive, names: tuple = (), *, reduces: bool = False,
               front: bool = False):
    """The batch rule of a primitive that acts along the axes named by its attributes
    `names` (an int or a tuple of ints each) and independently along every other axis: the
    op on operands batched along one common axis (axis 0 with `front`, for ops that take
    leading batch dims, as linalg does), the axis attributes renumbered around it. With
    `reduces`, the named axes are removed from the result unless `keepdims`."""

    def rule(ctx, args, dims, **attrs):
        if front:
            operands, d = all_at(args, dims, 0), 0
        else:
            operands, d = _same_shape_operands(args, dims)
        reduced = ()
        for name in names:
            a = attrs[name]
            if isinstance(a, tuple):
                attrs[name] = tuple(i + (i >= d) for i in a)
                reduced += attrs[name]
            else:
                attrs[name] = a + (a >= d)
                reduced += (attrs[name],)
        out = prim.bind(*operands, **attrs)
        if reduces and not attrs.get("keepdims", False):
            d -= sum(a < d for a in reduced)
        if prim.multiple_results:
            return list(out), [d] * len(out)
        return out, d

    prim.def_batch(rule)
    return rule
