"""Products with diagonal tensors: `dot_general(D, W)` where `D[.., i, .., j, ..]` is
`delta(i, j)` times broadcast factors becomes a scaling of (a transposed, broadcast) `W`.

Jacobians start their batched backward pass from the rows of an identity
(`eq(iota_0, iota_1)`), scaled by the elementwise derivatives it meets; a `dot_general`
that contracts one of the two diagonal dims then costs `n` times what it needs. With the
other diagonal dim free, the sum has one term: `sum_j delta(i, j) V[.., i, ..] W[.., j, ..]
= V[.., i, ..] W[.., i, ..]` — a product of `W`, its contracted dim placed where `i` is,
with the factors restricted to the diagonal. The factors must be broadcasts that vary
along at most one of the two diagonal dims (otherwise their diagonal would have to be
gathered, and the product is left alone).
"""

from __future__ import annotations

from dataclasses import dataclass

from tracegrad.core import dtypes
from tracegrad.ops import elementwise as ew
from tracegrad.ops import shape_ops
from tracegrad.passes.simplify import uniform_value


@dataclass
class Diagonal:
    """`t = delta(t_a, t_b) * prod(broadcast_in_dim(src, t.shape, dims))` over `factors`
    (pairs `(src, dims)`)."""

    a: int
    b: int
    factors: list


def diagonal_of(t) -> Diagonal | None:
    """How `t` is a diagonal tensor, or None."""
    op = t.op
    if op is None or None in t.shape:
        return None
    prim = op.primitive
    if prim is ew.convert_element_type_p:
        return _identity(op.inputs[0])
    if prim is ew.mul_p:
        for x, y in (op.inputs, op.inputs[::-1]):
            d = diagonal_of(x)
            if d is None:
                continue
            u = uniform_value(y)
            if u is not None and u == 1:
                return d
            f = _broadcast_factor(y)
            return None if f is None else Diagonal(d.a, d.b, d.factors + [f])
        return None
    if prim is shape_ops.broadcast_in_dim_p:
        d = diagonal_of(op.inputs[0])
        if d is None:
            return None
        dims = op.attrs["broadcast_dimensions"]
        inner = op.inputs[0].shape
        if inner[d.a] != t.shape[dims[d.a]] or inner[d.b] != t.shape[dims[d.b]]:
            return None  # a size-1 diagonal stretched
        return Diagonal(dims[d.a], dims[d.b],
                        [(src, tuple(dims[k] for k in fd)) for src, fd in d.factors])
    if prim is shape_ops.transpose_p:
        d = diagonal_of(op.inputs[0])
        if d is None:
            return None
        where = {k: i for i, k in enumerate(op.attrs["permutation"])}
        return Diagonal(where[d.a], where[d.b],
                        [(src, tuple(where[k] for k in fd)) for src, fd in d.factors])
    return None


def _identity(t) -> Diagonal | None:
    """`eq(iota along p, iota along q)` over known dims of equal size: delta(p, q)."""
    op = t.op
    if op is None or op.primitive is not ew.eq_p:
        return None
    x, y = op.inputs
    ox, oy = x.op, y.op
    if ox is None or oy is None or ox.primitive is not shape_ops.iota_p or (
            oy.primitive is not shape_ops.iota_p) or ox.inputs or oy.inputs:
        return None
    p, q = ox.attrs["dimension"], oy.attrs["dimension"]
    if p == q or x.shape[p] != x.shape[q]:
        return None
    return Diagonal(p, q, [])


def _broadcast_factor(t):
    op = t.op
    if op is None or op.primitive is not shape_ops.broadcast_in_dim_p or len(op.inputs) > 1:
        return None
    return op.inputs[0], tuple(op.attrs["broadcast_dimensions"])


def rewrite_dot(rw, op, ins):
    """The replacement of `dot_general(lhs, rhs)` when one operand is diagonal with one of
    its diagonal dims contracted (and no other) and the other free; else None."""
    lhs, rhs = ins
    (lc, rc), (lb, rb) = op.attrs["dimension_numbers"]
    out = op.outputs[0]
    if None in out.shape or not dtypes.is_float(out.dtype):
        return None
    for t_side, (t, w, tc, wc, tb, wb) in enumerate(((lhs, rhs, lc, rc, lb, rb),
                                                     (rhs, lhs, rc, lc, rb, lb))):
        d = diagonal_of(t)
        if d is None or len(tc) != 1 or tc[0] not in (d.a, d.b):
            continue
        a, b = (d.b, d.a) if tc[0] == d.a else (d.a, d.b)  # b is contracted, a stays
        if a in tb:
            continue
        replaced = _scaled(rw, op, d, a, b, t, w, wc[0], tb, wb, t_side)
        if replaced is not None:
            return replaced
    return None


def _scaled(rw, op, d, a, b, t, w, w_contract, tb, wb, t_side):
    out = op.outputs[0]
    nb = len(tb)
    t_free = [k for k in range(t.ndim) if k not in tb and k != b]
    w_free = [k for k in range(w.ndim) if k not in wb and k != w_contract]
    t_start = nb if t_side == 0 else nb + len(w_free)
    w_start = nb + len(t_free) if t_side == 0 else nb
    where_t = {k: i for i, k in enumerate(tb)}  # t's dims -> the result's
    where_t.update({k: t_start + i for i, k in enumerate(t_free)})
    where_w = {k: i for i, k in enumerate(wb)}
    where_w.update({k: w_start + i for i, k in enumerate(w_free)})
    where_w[w_contract] = where_t[a]
    shape = tuple(out.shape)
    terms = [_placed(rw, op, w, [where_w[k] for k in range(w.ndim)], shape)]
    for src, dims in d.factors:
        if a in dims and b in dims:
            return None
        moved = [where_t[a if k == b else k] for k in dims]
        terms.append(_placed(rw, op, src, moved, shape))
    result = terms[0]
    for term in terms[1:]:
        if term.dtype != result.dtype:
            return None
        (result,) = rw.emit(ew.mul_p, [result, term], {}, op.source)
    return [result]


def _placed(rw, op, x, positions, shape):
    """`x` broadcast into `shape`, its dim k at `positions[k]` (transposed first when the
    positions are not increasing)."""
    order = sorted(range(len(positions)), key=lambda k: positions[k])
    if order != list(range(len(positions))):
        (x,) = rw.emit(shape_ops.transpose_p, [x], {"permutation": tuple(order)}, op.source)
        positions = [positions[k] for k in order]
    if tuple(x.shape) == shape and positions == list(range(len(shape))):
        return x
    (y,) = rw.emit(shape_ops.broadcast_in_dim_p, [x],
                   {"shape": shape, "broadcast_dimensions": tuple(positions)}, op.source)
    return y
