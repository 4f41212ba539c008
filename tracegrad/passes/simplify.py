"""Algebraic simplification: identities that remove ops without changing any value.

`x*1`, `1*x`, `x+0`, `0+x`, `x-0`, `x/1` become `x`; `x*0` becomes the zero only for
integer and bool dtypes (for floats `inf*0` and `nan*0` are nan); `neg(neg(x))` is `x`;
transposes, reshapes and broadcasts of their own kind compose into one op, and disappear
when they do nothing; `convert_element_type` to the dtype the operand has is dropped;
`dim_size` reads a known dim as a constant and an unknown one from the producer's operand
(the producer's dims rule says which); a
`custom_gradient` boundary becomes its results (the gradient it carries is built by then)
and a `call` of a compiled function becomes the callee's ops (`passes/inline.py`, the
inliner the numba backend uses too); a `dot_general` with a diagonal operand (an identity's
rows, as jacobians start from, times broadcast factors) becomes a scaling of the other
operand (`passes/diagonal.py`), one whose contracted dims have size 1 an elementwise
product (an outer product), and a transposed operand is read untransposed, the
transpose moved into its dimension numbers; a `reduce_sum` over a product's free dims is
taken before the product (`passes/sums.py`); a sum of zero-padded blocks that do not
overlap (the gradient of many slices of one tensor) is the blocks' concatenation
(`passes/pads.py`); a tree of slices, reshapes, transposes and concatenations that reads
one tensor is one slice or gather of its rows (`passes/moves.py`).
"1" and "0" are constants of that value, possibly broadcast, reshaped or cast (what
`ones_like` and unconnected gradients produce). Every rewrite keeps the result type
exactly (weak types included); one that would not is not made.

`x + 0` with `x = -0.0` gives `+0.0`: the only value the rewrite changes is the sign of a
zero, which compares equal (XLA and LLVM's fast-math make the same rewrite).
"""

from __future__ import annotations

import numpy as np

from tracegrad.core import dtypes
from tracegrad.core.ir import FuncGraph
from tracegrad.core.op import constant_p
from tracegrad.ops import custom, linalg, reductions, shape_ops
from tracegrad.ops import elementwise as ew
from tracegrad.passes._rewrite import run_pass
from tracegrad.passes.inline import inline_call, inline_custom_gradient


def simplify(graph: FuncGraph) -> FuncGraph:
    """`graph` with the algebraic identities applied (one sweep; see `optimize`).

    >>> str(simplify(tg.trace(lambda x: x * 1.0)(tg.TensorSpec([3]))))   # no mul left
    """
    return run_pass(graph, _make_rule)[0]


def _make_rule(rw):
    def rule(rw, op, ins):
        fn = RULES.get(op.primitive)
        return None if fn is None else fn(rw, op, ins)

    return rule


# -- what a tensor is known to hold ----------------------------------------------------------


def uniform_value(t):
    """The one value every element of `t` holds, if `t` is a constant (possibly broadcast,
    reshaped, transposed or cast) whose elements are all equal; else None."""
    op = t.op
    if op is None:
        return None
    prim = op.primitive
    if prim is constant_p:
        v = op.attrs["value"].value
        if v.size == 0:
            return None
        first = v.reshape(-1)[0]
        return first if v.size == 1 or bool(np.all(v == first)) else None
    if prim in _VALUE_PRESERVING:
        return uniform_value(op.inputs[0])
    if prim is ew.convert_element_type_p:
        u = uniform_value(op.inputs[0])
        return None if u is None else np.asarray(u).astype(op.attrs["new_dtype"])[()]
    return None


_VALUE_PRESERVING = {shape_ops.broadcast_in_dim_p, shape_ops.reshape_p, shape_ops.transpose_p}


def _is(t, value) -> bool:
    u = uniform_value(t)
    return u is not None and bool(u == value)


def _producer(t, prim):
    """The op of primitive `prim` that produced `t`, or None."""
    op = t.op
    return op if op is not None and op.primitive is prim else None


# -- rules: each returns the replacement results, or None --------------------------------------


def _mul(rw, op, ins):
    x, y = ins
    (out,) = op.outputs
    for a, b in ((x, y), (y, x)):
        if _is(b, 1) and a.type == out.type:
            return [a]
        if not dtypes.is_inexact(out.dtype) and _is(b, 0) and b.type == out.type:
            return [b]
    return None


def _add(rw, op, ins):
    x, y = ins
    for a, b in ((x, y), (y, x)):
        if _is(b, 0) and a.type == op.outputs[0].type:
            return [a]
    return pads.sum_of_padded(rw, op, ins)


def _right_identity(value):
    def rule(rw, op, ins):
        x, y = ins
        return [x] if _is(y, value) and x.type == op.outputs[0].type else None

    return rule


def _neg(rw, op, ins):
    inner = _producer(ins[0], ew.neg_p)
    return [inner.inputs[0]] if inner is not None else None


def _transpose(rw, op, ins):
    (x,) = ins
    perm = tuple(op.attrs["permutation"])
    inner = _producer(x, shape_ops.transpose_p)
    if inner is not None:
        first = inner.attrs["permutation"]
        x, perm = inner.inputs[0], tuple(first[p] for p in perm)
    if perm == tuple(range(len(perm))):
        return [x]
    if inner is None:
        return None
    return rw.emit(shape_ops.transpose_p, [x], {"permutation": perm}, op.source)


def _reshape(rw, op, ins):
    (x,) = ins
    if x.type == op.outputs[0].type:  # one -1 at most: equal types mean equal shapes
        return [x]
    inner = _producer(x, shape_ops.reshape_p)
    if inner is None:
        return None
    y = inner.inputs[0]
    if y.type == op.outputs[0].type:
        return [y]
    return rw.emit(shape_ops.reshape_p, [y], dict(op.attrs), op.source)


def _broadcast(rw, op, ins):
    x, *dyn = ins
    shape, dims = op.attrs["shape"], tuple(op.attrs["broadcast_dimensions"])
    if _is_identity_broadcast(x, dyn, shape, dims):
        return [x]
    inner = _producer(x, shape_ops.broadcast_in_dim_p)
    if inner is None:
        return None
    composed = tuple(dims[d] for d in inner.attrs["broadcast_dimensions"])
    return rw.emit(shape_ops.broadcast_in_dim_p, [inner.inputs[0], *dyn],
                   {"shape": shape, "broadcast_dimensions": composed}, op.source)


def _is_identity_broadcast(x, dyn, shape, dims) -> bool:
    """A broadcast to the operand's own shape: every unknown dim is read from the operand
    itself (an unknown dim of size 1 could otherwise be stretched)."""
    if tuple(x.shape) != tuple(shape) or dims != tuple(range(len(shape))):
        return False
    k = 0
    for axis, d in enumerate(shape):
        if d is None:
            size_op = _producer(dyn[k], shape_ops.dim_size_p)
            if size_op is None or size_op.inputs[0] is not x or size_op.attrs["axis"] != axis:
                return False
            k += 1
    return True


def _convert(rw, op, ins):
    (x,) = ins
    return [x] if x.type == op.outputs[0].type else None


def _dim_size(rw, op, ins):
    """A known dim is a constant; an unknown one is read from further up, by the producer's
    dims rule (`Primitive.def_dims`): one of its size operands, or the operand dim it
    equals. So an op computed only for its size (a forward result a gradient needs the shape
    of) goes."""
    (x,), axis = ins, op.attrs["axis"]
    n = x.shape[axis]
    if n is not None:
        return [rw.constant(np.int64(n), source=op.source)]
    producer = x.op
    if producer is None:
        return None
    prim = producer.primitive
    if prim.size_operands is not None and x is producer.outputs[0]:
        return [producer.inputs[prim.size_operands + x.shape[:axis].count(None)]]
    operands = {id(t) for t in producer.inputs}
    for a, i, b, j in prim.dims(producer) if prim.dims is not None else ():
        for (t, k), (source, s) in (((a, i), (b, j)), ((b, j), (a, i))):
            if t is x and k == axis and id(source) in operands:
                return rw.emit(shape_ops.dim_size_p, [source], {"axis": s}, op.source)
    return None


def _same_type_identity(rw, op, ins):
    """reduce_sum over no axes, stop_gradient-free identities: the operand if types agree."""
    (x,) = ins
    return [x] if not op.attrs.get("axes") and x.type == op.outputs[0].type else None


def _select(rw, op, ins):
    pred, on_true, on_false = ins
    out = op.outputs[0].type
    if on_true is on_false and on_true.type == out:
        return [on_true]
    u = uniform_value(pred)
    if u is not None:
        chosen = on_true if bool(u) else on_false
        return [chosen] if chosen.type == out else None
    return None


RULES = {
    ew.mul_p: _mul,
    ew.add_p: _add,
    ew.sub_p: _right_identity(0),
    ew.div_p: _right_identity(1),
    ew.neg_p: _neg,
    ew.convert_element_type_p: _convert,
    ew.select_p: _select,
    shape_ops.transpose_p: _transpose,
    shape_ops.reshape_p: _reshape,
    shape_ops.broadcast_in_dim_p: _broadcast,
    shape_ops.dim_size_p: _dim_size,
    custom.custom_gradient_p: inline_custom_gradient,
    custom.call_p: inline_call,
}

from tracegrad.passes import diagonal  # noqa: E402  (it reads uniform_value above)
from tracegrad.passes import moves, pads, sums  # noqa: E402


def _reduce_sum(rw, op, ins):
    """A sum over no axes is its operand; one over a product's free dims is taken before
    the product (`sums.sum_of_product`); one of a product by a scalar is the scalar times
    the sum (`sums.sum_of_scaled`)."""
    for rule in (_same_type_identity, sums.sum_of_product, sums.sum_of_scaled):
        replaced = rule(rw, op, ins)
        if replaced is not None:
            return replaced
    return None


def _dot_general(rw, op, ins):
    """A diagonal operand becomes a scaling (`diagonal.rewrite_dot`); a transposed operand
    is read as it is, the transpose moved into the dimension numbers, when the result's
    dims keep their order (BLAS reads a transposed matrix without a copy)."""
    replaced = diagonal.rewrite_dot(rw, op, ins)
    if replaced is None:
        replaced = _outer(rw, op, ins)
    if replaced is not None:
        return replaced
    (lc, rc), (lb, rb) = op.attrs["dimension_numbers"]
    operands, numbers, folded = list(ins), [[lc, lb], [rc, rb]], False
    for side, x in enumerate(ins):
        inner = _producer(x, shape_ops.transpose_p)
        if inner is None:
            continue
        perm = inner.attrs["permutation"]
        contract, batch = numbers[side]
        free = [perm[i] for i in range(x.ndim) if i not in contract and i not in batch]
        if free != sorted(free):  # the result's free dims would come out permuted
            continue
        operands[side] = inner.inputs[0]
        numbers[side] = (tuple(perm[i] for i in contract), tuple(perm[i] for i in batch))
        folded = True
    if not folded:
        return None
    (lc, lb), (rc, rb) = numbers
    attrs = {**op.attrs, "dimension_numbers": ((lc, rc), (lb, rb))}
    if linalg.dot_general_p.infer([t.type for t in operands], attrs) != [op.outputs[0].type]:
        return None
    return rw.emit(linalg.dot_general_p, operands, attrs, op.source)


def _outer(rw, op, ins):
    """A product without batch dims whose contracted dims all have size 1 (an outer
    product, as the gradient of a solve with one right-hand side makes): the operands'
    elementwise product, broadcast, which fuses with what reads it."""
    (lc, rc), (lb, rb) = op.attrs["dimension_numbers"]
    out = op.outputs[0].type
    if lb or not lc or None in out.shape or any(ins[0].shape[i] != 1 for i in lc) or \
            any(ins[1].shape[i] != 1 for i in rc) or \
            any(x.type.dtype != out.dtype or x.type.weak != out.weak for x in ins):
        return None
    factors, start = [], 0
    for x, contract in zip(ins, (lc, rc), strict=True):
        free = tuple(d for i, d in enumerate(x.shape) if i not in contract)
        if len(free) != x.ndim:
            (x,) = rw.emit(shape_ops.reshape_p, [x], {"new_sizes": free}, op.source)
        positions = list(range(start, start + len(free)))
        factors.append(diagonal._placed(rw, op, x, positions, tuple(out.shape)))
        start += len(free)
    (y,) = rw.emit(ew.mul_p, factors, {}, op.source)
    return [y] if y.type == out else None


RULES[linalg.dot_general_p] = _dot_general
RULES[reductions.reduce_sum_p] = _reduce_sum


def _or_collapsed(rule):
    def either(rw, op, ins):
        outs = rule(rw, op, ins) if rule is not None else None
        return outs if outs is not None else moves.collapsed(rw, op, ins)

    return either


for _prim in (shape_ops.concatenate_p, shape_ops.reshape_p, shape_ops.transpose_p,
              shape_ops.slice_p, shape_ops.rev_p):
    RULES[_prim] = _or_collapsed(RULES.get(_prim))
