"""Sums of zero-padded blocks: the blocks are assembled into one tensor by concatenation
(a rule of `simplify` for `add`).

The gradient of a slice is its cotangent padded with zeros to the sliced operand's shape,
so code that reads a tensor through many static slices (`w[i, 0]`, `w[i, 1]`, ... of a
weight tensor, a parameter vector cut into pieces) has a gradient that adds as many
zero-padded arrays of the whole shape: GradBench's LSTM (l=4) adds 16 of them per weight
tensor after its backward loop, each a zero fill of the whole tensor and a copy of the
block, then the sums. When the blocks of such a sum do not overlap, they are placed by
`concatenate`s along cuts between them (zeros where no block is), each element written
once: `pad(a, ((0, 1),)) + pad(b, ((1, 0),))` is `concatenate(a, b)`.

Blocks of the same region are first summed as the tree sums them (a recurrent step's
state gradient adds two blocks per layer: `pad(dh_i) + pad(dh_i') + ...`); blocks of
different regions must not overlap. A cut is a plane along one axis that crosses no
block; the blocks on either side are assembled the same way, within their part. When no axis has such a cut (blocks arranged
like a pinwheel) or blocks overlap, the sum is left as it is. Every element of the result
is one block's element or zero, and `x + 0 = x` exactly: values are unchanged (but for
the sign of a zero, as with simplify's `x + 0`). Other terms of the sum must all come
before the blocks, their sum an inner sum of the tree, to which the assembled blocks are
added, each region then holding one block: each element is the same sum of the same
values as before (a term after a block, or two blocks of a region after other terms,
would be added in another order). Only known shapes and pads without interior padding
are assembled, and one kind of interior padding: blocks of
one stride `s` along one axis at each of the `s + 1` offsets `b, ..., b + s` (the
gradients of `w[0::2]` and `w[1::2]`), which are interleaved into one block first. In a
sub-graph, a sum with an input of it among its terms (a loop's accumulator) is left to
passes/loops.py, which sums each block in a carry of its own and pads it once after the
loop, where this rule assembles them.
"""

from __future__ import annotations

from tracegrad.ops import elementwise as ew
from tracegrad.ops import shape_ops
from tracegrad.ops.shape_ops import is_zeros


def sum_of_padded(rw, op, ins):
    """The `add` tree rooted at `op` with its zero-padded blocks assembled (see the
    module), or None."""
    out = op.outputs[0]
    if None in out.shape or not out.shape or not _is_root(rw, op):
        return None
    tree = _tree(rw, op)
    terms = list(_leaves(tree))
    blocks, rest, strided = [], [], {}
    for t in terms:
        found = _block(t, out)
        if found is None:
            found = _strided(t, out)
            if found is not None:
                key, lo, x = found
                strided.setdefault(key, {}).setdefault(lo, []).append((t, x))
                blocks.append(None)
                continue
        if found is not None:
            blocks.append((t, *found))
        elif blocks:
            return None  # a term after a block: the sums would be grouped differently
        elif not (is_zeros(t) and t.type == out.type):
            rest.append(t)
    count = len(blocks)
    blocks = [b for b in blocks if b is not None]
    for key, offsets in strided.items():
        interleaved = _interleaved(rw, op, key, offsets)
        if interleaved is None:
            return None
        blocks.append((None, *interleaved))
    if count < 2 or (rw.parent is not None and any(t.op is None for t in rest)):
        # an accumulator of a loop body (`acc + pad(a) + ...`): passes/loops.py gives each
        # block a carry of its own, padded once after the loop, where this rule meets them
        return None
    regions: dict = {}
    for t, x, region in blocks:
        regions.setdefault(region, []).append((t, x))
    if any(t is None and len(regions[r]) > 1 for t, _, r in blocks) or \
            (rest and len(regions) < len(blocks)):
        return None  # (R + a1) + a2 is not R + (a1 + a2)
    placed = []
    for region, members in regions.items():
        if len(members) == 1:
            placed.append((members[0][1], region))
        else:  # the blocks of one region summed as the tree sums them
            inner = {id(t): x for t, x in members}
            placed.append((_restricted(rw, op, tree, inner), region))
    whole = tuple((0, n) for n in out.shape)
    assembled = _assemble(rw, op, placed, whole, out.type)
    if assembled is None:
        return None
    if not rest:
        return [assembled]
    total = _prefix(tree, len(terms) - count)
    if total is None:
        return None
    return rw.emit(ew.add_p, [total, assembled], {}, op.source)


def _is_root(rw, op) -> bool:
    """Whether `op`'s result is not a term of an enclosing `add` of the same type (the
    tree is rewritten once, from its root)."""
    t = op.outputs[0]
    if rw.readers(t) != 1:
        return True
    reader = rw.reader_ops(t)
    return not (len(reader) == 1 and reader[0].primitive is ew.add_p
                and reader[0].outputs[0].type == t.type)


class _Sum:
    """An inner `add` of the tree: its two operands (sums or terms) and its tensor in the
    target graph (None at the root)."""

    __slots__ = ("left", "right", "size", "tensor")

    def __init__(self, left, right, tensor):
        self.left, self.right, self.tensor = left, right, tensor
        self.size = sum(k.size if isinstance(k, _Sum) else 1 for k in (left, right))


def _tree(rw, op, root=True) -> _Sum:
    """The tree of `add`s of one type that computes `op`'s result, each inner sum read by
    its parent alone; its terms are tensors of the target graph."""
    kids = []
    for x in op.inputs:
        inner = x.op
        if inner is not None and inner.primitive is ew.add_p and rw.readers(x) == 1 and \
                x.type == op.outputs[0].type:
            kids.append(_tree(rw, inner, root=False))
        else:
            kids.append(rw.read(x))
    return _Sum(kids[0], kids[1], None if root else rw.read(op.outputs[0]))


def _leaves(node):
    if not isinstance(node, _Sum):
        yield node
        return
    yield from _leaves(node.left)
    yield from _leaves(node.right)


def _restricted(rw, op, node, inner):
    """The sum the tree makes of its terms in `inner` (term id -> the tensor added in its
    place), grouped as in the tree; None when it holds none of them."""
    if not isinstance(node, _Sum):
        return inner.get(id(node))
    left, right = (_restricted(rw, op, k, inner) for k in (node.left, node.right))
    if left is None or right is None:
        return left if right is None else right
    return rw.emit(ew.add_p, [left, right], {}, op.source)[0]


def _prefix(node, count):
    """The tensor summing the tree's first `count` terms as the tree does (an inner sum on
    its left spine, or its first term), or None when no inner sum is theirs alone."""
    while isinstance(node, _Sum) and node.size > count:
        node = node.left
    size = node.size if isinstance(node, _Sum) else 1
    if size != count:
        return None
    return node.tensor if isinstance(node, _Sum) else node


def zero_padding(t):
    """The padding config when `t` is a block padded with zeros, both shapes known, else
    None (pad widths are never negative: `pad`'s shape rule)."""
    op = t.op
    if op is None or op.primitive is not shape_ops.pad_p or None in t.shape or \
            None in op.inputs[0].shape or not is_zeros(op.inputs[1]):
        return None
    return op.attrs["padding_config"]


def _block(t, out):
    """`(block, region)`: when `t` is a block padded with zeros to `out`'s type without
    interior padding, the block and its `(start, stop)` per axis."""
    cfg = zero_padding(t) if t.type == out.type else None
    if cfg is None or any(interior for _, _, interior in cfg):
        return None
    x = t.op.inputs[0]
    return x, tuple((lo, lo + n) for (lo, _, _), n in zip(cfg, x.shape, strict=True))


def _strided(t, out):
    """`(key, lo, block)` when `t` is a block padded with zeros to `out`'s type with
    interior padding along one axis (a slice's gradient with a stride): `key` holds the
    axis, the stride, the block's shape and the other axes' widths; `lo` its offset."""
    cfg = zero_padding(t) if t.type == out.type else None
    axes = [d for d, (_, _, interior) in enumerate(cfg or ()) if interior]
    if len(axes) != 1:
        return None
    (d,) = axes
    x = t.op.inputs[0]
    other = tuple(c[:2] for k, c in enumerate(cfg) if k != d)
    return (d, cfg[d][2], tuple(x.shape), other), cfg[d][0], x


def _interleaved(rw, op, key, offsets):
    """`(block, region)`: blocks of one stride `s` along axis `d` at the `s + 1` offsets
    `b ... b + s`, interleaved into one block without interior padding; None when the
    offsets are not those, or one comes twice."""
    d, s, shape, other = key
    base = min(offsets)
    if sorted(offsets) != list(range(base, base + s + 1)) or \
            any(len(members) != 1 for members in offsets.values()):
        return None
    n = shape[d]
    split = shape[:d + 1] + (1,) + shape[d + 1:]
    parts = [rw.emit(shape_ops.reshape_p, [offsets[lo][0][1]], {"new_sizes": split},
                     op.source)[0] for lo in sorted(offsets)]
    (stacked,) = rw.emit(shape_ops.concatenate_p, parts, {"dimension": d + 1}, op.source)
    merged = shape[:d] + (n * (s + 1),) + shape[d + 1:]
    (block,) = rw.emit(shape_ops.reshape_p, [stacked], {"new_sizes": merged}, op.source)
    widths = list(other)
    region = []
    for k, size in enumerate(merged):
        lo = base if k == d else widths.pop(0)[0]
        region.append((lo, lo + size))
    return block, tuple(region)


def _assemble(rw, op, blocks, box, type_):
    """A tensor over `box` (`(start, stop)` per axis) holding each block of `blocks` at its
    region and zeros elsewhere, or None when the blocks cannot be cut apart."""
    if not blocks:
        return rw.zeros(type_.with_shape(tuple(b - a for a, b in box)), op.source)
    if len(blocks) == 1 and blocks[0][1] == box:
        return blocks[0][0]
    for axis, (lo, hi) in enumerate(box):
        groups = _groups(blocks, axis)
        if len(groups) == 1 and groups[0][0] == (lo, hi):
            continue  # no cut along this axis
        pieces, at = [], lo
        for (start, stop), members in groups:
            for a, b, inside in ((at, start, ()), (start, stop, members)):
                if a == b:
                    continue
                part = box[:axis] + ((a, b),) + box[axis + 1:]
                piece = _assemble(rw, op, list(inside), part, type_)
                if piece is None:
                    return None
                pieces.append(piece)
            at = stop
        if at < hi:
            part = box[:axis] + ((at, hi),) + box[axis + 1:]
            pieces.append(_assemble(rw, op, [], part, type_))
        if len(pieces) == 1:
            return pieces[0]
        return rw.emit(shape_ops.concatenate_p, pieces, {"dimension": axis}, op.source)[0]
    return None  # blocks that overlap, or that no plane separates


def _groups(blocks, axis) -> list:
    """The blocks grouped by their overlapping extents along `axis`, in order: a list of
    `((start, stop), members)`."""
    groups: list = []
    for block in sorted(blocks, key=lambda b: b[1][axis]):
        start, stop = block[1][axis]
        if groups and start < groups[-1][0][1]:
            (a, b), members = groups[-1]
            groups[-1] = ((a, max(b, stop)), members + [block])
        else:
            groups.append(((start, stop), [block]))
    return groups
