"""Sums of products: `reduce_sum` over free dims of a `dot_general` is taken before it.

`sum_n sum_i a[n, k, i] b[k, i, j] = sum_i (sum_n a[n, k, i]) b[k, i, j]`: summing a
product over dims that come from one operand sums that operand first, and the product
shrinks by the summed size (both operands' sums when the dims come from both). Reverse
mode makes this shape: the gradient of `x - mu` broadcast over `n` points is a product
summed over the points (GradBench's GMM: a contraction of 1000 x 25 x 10 x 10 terms that
becomes one of 25 x 10 x 10 after a sum of 1000 x 25 x 10). A `neg` or a `transpose`
between the product and the sum is moved after the new product.

The additions are grouped differently (within the error bound of a sum of products, not
the same bits); the rewrite is for float and complex dtypes only, and never for a sum
over a batch dim (each batch element is its own product).
"""

from __future__ import annotations

from tracegrad.core import dtypes
from tracegrad.core.ir import FuncGraph
from tracegrad.ops import elementwise as ew
from tracegrad.ops import linalg, reductions, shape_ops
from tracegrad.passes._rewrite import run_pass

_THROUGH = (ew.neg_p, shape_ops.transpose_p)  # linear, one operand: moved after the product


def sum_products(graph: FuncGraph) -> FuncGraph:
    """`graph` with sums over a product's free dims taken before the product (one sweep;
    see `optimize`)."""
    return run_pass(graph, _make_rule)[0]


def _make_rule(rw):
    def rule(rw, op, ins):
        return _sum_of_product(rw, op, ins) if op.primitive is reductions.reduce_sum_p \
            else None
    return rule


def _sum_of_product(rw, op, ins):
    (y,) = ins
    axes = set(op.attrs["axes"])
    out = op.outputs[0].type
    if not axes or not dtypes.is_inexact(out.dtype):
        return None
    chain, t = [], y
    while t.op is not None and t.op.primitive in _THROUGH:
        chain.append(t.op)
        if t.op.primitive is shape_ops.transpose_p:
            perm = t.op.attrs["permutation"]
            axes = {perm[i] for i in axes}
        t = t.op.inputs[0]
    dot = t.op
    if dot is None or dot.primitive is not linalg.dot_general_p:
        return None
    (lhs, rhs) = dot.inputs
    (lc, rc), (lb, rb) = dot.attrs["dimension_numbers"]
    lf = [i for i in range(lhs.ndim) if i not in lc and i not in lb]
    rf = [i for i in range(rhs.ndim) if i not in rc and i not in rb]
    nb = len(lb)
    if min(axes) < nb:
        return None
    summed = ([lf[p - nb] for p in axes if p - nb < len(lf)],
              [rf[p - nb - len(lf)] for p in axes if p - nb >= len(lf)])
    operands = []
    for x, own in zip((lhs, rhs), summed, strict=True):
        if own:  # keepdims: the product's dimension numbers stay as they are
            (x,) = rw.emit(reductions.reduce_sum_p, [x],
                           {"axes": tuple(sorted(own)), "keepdims": True}, op.source)
        operands.append(x)
    (z,) = rw.emit(linalg.dot_general_p, operands, dot.attrs, dot.source)
    for o in reversed(chain):
        (z,) = rw.emit(o.primitive, [z], o.attrs, o.source)
    if not op.attrs.get("keepdims", False):
        if None in out.shape:
            return None
        (z,) = rw.emit(shape_ops.reshape_p, [z], {"new_sizes": tuple(out.shape)}, op.source)
    return [z] if z.type == out else None
