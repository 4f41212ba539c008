"""Sums of products: `reduce_sum` over free dims of a `dot_general` is taken before it
(a rule of `simplify` for `reduce_sum`).

`sum_n sum_i a[n, k, i] b[k, i, j] = sum_i (sum_n a[n, k, i]) b[k, i, j]`: summing a
product over dims that come from one operand sums that operand first, and the product
shrinks by the summed size (both operands' sums when the dims come from both). Reverse
mode makes this shape: the gradient of `x - mu` broadcast over `n` points is a product
summed over the points (GradBench's GMM: a contraction of 1000 x 25 x 10 x 10 terms that
becomes one of 25 x 10 x 10 after a sum of 1000 x 25 x 10). A `neg` or a `transpose`
between the product and the sum is moved after the new product. Only a product (and each
`neg`/`transpose` between) that the sum alone reads is rewritten: a product read elsewhere
is computed anyway, and summing its operand would add work.

A sum of a product by a broadcast scalar is that scalar times the sum (`sum(c * y) =
c * sum(y)`), whoever else reads the product: summing `y` costs what summing `c * y` did,
and the sum of `y` is often computed already (the common-subexpression pass then merges
them). Reverse mode makes this shape too: the gradient of `log(sum(exp(x - m)))` through
`m` sums `-exp(x - m) / s` (GradBench's lse, every softmax), which becomes `-s / s`, one
pass over `x` less.

The additions are grouped differently (within the error bound of a sum of products, not
the same bits); the rewrite is for float and complex dtypes only, and never for a sum
over a batch dim (each batch element is its own product).
"""

from __future__ import annotations

from tracegrad.core import dtypes
from tracegrad.ops import elementwise as ew
from tracegrad.ops import linalg, reductions, shape_ops

_THROUGH = (ew.neg_p, shape_ops.transpose_p)  # linear, one operand: moved after the product


def _summable(op) -> bool:
    """Whether `reduce_sum` `op` sums over some axes in a float or complex dtype."""
    return bool(op.attrs["axes"]) and dtypes.is_inexact(op.outputs[0].dtype)


def _through(rw, t, prims) -> tuple[list, object]:
    """The ops of `prims` that lead down from `t`, each read by the one above it alone
    (walked in the source graph, where readers are counted), nearest first, and the
    tensor under them."""
    chain = []
    while t.op is not None and t.op.primitive in prims and rw.readers(t) == 1:
        chain.append(t.op)
        t = t.op.inputs[0]
    return chain, t


def sum_of_scaled(rw, op, ins):
    """The `reduce_sum` `op` of a (negated) product by a broadcast scalar as the scalar
    times the sum of the other factor, or None (see the module)."""
    out = op.outputs[0].type
    if not _summable(op) or None in out.shape:
        return None
    negs, t = _through(rw, op.inputs[0], (ew.neg_p,))
    product = rw.read(t).op
    if product is None or product.primitive is not ew.mul_p:
        return None
    for c, y in (product.inputs, reversed(product.inputs)):
        if c.op is not None and c.op.primitive is shape_ops.broadcast_in_dim_p and \
                c.op.inputs[0].ndim == 0 and c.op.inputs[0].dtype == out.dtype and \
                y.type == product.outputs[0].type:
            break
    else:
        return None
    scale = c.op.inputs[0]
    spread = {"shape": tuple(out.shape), "broadcast_dimensions": ()}
    scale_type = shape_ops.broadcast_in_dim_p.infer([scale.type], spread)[0] if out.ndim \
        else scale.type
    if ew.mul_p.infer([scale_type, out], {})[0] != out:  # checked before anything is emitted
        return None
    (z,) = rw.emit(reductions.reduce_sum_p, [y], op.attrs, op.source)
    if out.ndim:
        (scale,) = rw.emit(shape_ops.broadcast_in_dim_p, [scale], spread, op.source)
    (z,) = rw.emit(ew.mul_p, [scale, z], {}, product.source)
    for _ in range(len(negs) % 2):
        (z,) = rw.emit(ew.neg_p, [z], {}, op.source)
    return [z]


def sum_of_product(rw, op, ins):
    """The `reduce_sum` `op` as a product of summed operands, or None (see the module)."""
    out = op.outputs[0].type
    if not _summable(op):
        return None
    keepdims = op.attrs.get("keepdims", False)
    if not keepdims and None in out.shape:
        return None
    chain, t = _through(rw, op.inputs[0], _THROUGH)
    axes = set(op.attrs["axes"])
    for o in chain:
        if o.primitive is shape_ops.transpose_p:
            perm = o.attrs["permutation"]
            axes = {perm[i] for i in axes}
    if t.op is None or t.op.primitive is not linalg.dot_general_p or rw.readers(t) != 1:
        return None
    dot = rw.read(t).op  # the product as this sweep rewrote it (operands, dimension numbers)
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
    # keepdims: the product's dimension numbers stay as they are
    sums = [{"axes": tuple(sorted(own)), "keepdims": True} if own else None for own in summed]
    after = [(o.primitive, o.attrs, o.source) for o in reversed(chain)]
    if not keepdims:
        after.append((shape_ops.reshape_p, {"new_sizes": tuple(out.shape)}, op.source))
    types = [x.type if a is None else reductions.reduce_sum_p.infer([x.type], a)[0]
             for x, a in zip(dot.inputs, sums, strict=True)]
    z = linalg.dot_general_p.infer(types, dot.attrs)[0]
    for prim, attrs, _ in after:
        z = prim.infer([z], attrs)[0]
    if z != out:  # every check is made before anything is emitted
        return None
    operands = [x if a is None else rw.emit(reductions.reduce_sum_p, [x], a, op.source)[0]
                for x, a in zip(dot.inputs, sums, strict=True)]
    (z,) = rw.emit(linalg.dot_general_p, operands, dot.attrs, dot.source)
    for prim, attrs, source in after:
        (z,) = rw.emit(prim, [z], attrs, source)
    return [z]
