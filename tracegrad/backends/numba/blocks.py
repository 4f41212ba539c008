"""Numba code for the primitives that are not fused element by element: arg-reductions,
cumulative ops, sort, scatter, pad and concatenate (`blocks_reduce.py`: the reductions;
`blocks_linalg.py`: dot_general and the linear-algebra primitives). Each emitter
`emit(cg, op)` writes one block per op; its lowering record (lowering.py) is registered
under it.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from tracegrad.backends.numba.lowering import BLOCK, Lowering, register
from tracegrad.backends.numba.plan import AttrSlot
from tracegrad.backends.numba.scalars import NB_TYPE, helper, literal, typed
from tracegrad.core import dtypes
from tracegrad.ops import indexing, reductions, shape_ops


def _ordered(cg, dims, order):
    """A nest looping over `dims` in `order` (axes, outermost first), and the index in
    natural axis order."""
    nest = cg.new_nest([dims[a] for a in order])
    loop = nest.index()
    idx = [None] * len(dims)
    for pos, a in enumerate(order):
        idx[a] = loop[pos]
    return nest, idx


def _ix(parts) -> str:
    return ", ".join(parts) if parts else "()"


def _prod(dims) -> str:
    dims = [d for d in dims if d != "1"]
    if not dims:
        return "1"
    return dims[0] if len(dims) == 1 else "(" + " * ".join(dims) + ")"


def _out_index(t_dims, kept_vars, axes, keepdims, ndim):
    """The index of the reduction result from the loop variables of the kept axes."""
    parts, j = [], 0
    kv = iter(kept_vars)
    for i in range(ndim):
        if i in axes:
            if keepdims:
                parts.append("0")
                j += 1
            continue
        v = next(kv)
        parts.append("0" if t_dims[j] == "1" else v)
        j += 1
    return parts


# -- shared by the reductions: each combines values with a monoid, "sum", "prod", "max" or
# "min" ---------------------------------------------------------------------------------------

_IDENTITY = {"sum": 0, "prod": 1}


def _identity(monoid, dt) -> str:
    if monoid in _IDENTITY:
        return literal(_IDENTITY[monoid], dt)
    big = monoid == "min"
    if dt == dtypes.bool_:
        return "True" if big else "False"
    if dtypes.is_float(dt):
        return f"{NB_TYPE[dt]}({'np.inf' if big else '-np.inf'})"
    if dtypes.is_complex(dt):  # the ends of the lexicographic order
        inf = "np.inf" if big else "-np.inf"
        return f"{NB_TYPE[dt]}(complex({inf}, {inf}))"
    info = np.iinfo(dt)
    return literal(info.max if big else info.min, dt)


def _combine(cg, monoid, dt, acc, v) -> str:
    if dt == dtypes.bool_:
        return f"({acc} | {v})" if monoid in ("sum", "max") else f"({acc} & {v})"
    if monoid == "sum":
        return typed(f"{acc} + {v}", dt)
    if monoid == "prod":
        return typed(f"{acc} * {v}", dt)
    if dtypes.is_float(dt):
        return f"{helper(cg.helpers, monoid + '_f', dt)}({acc}, {v})"
    if dtypes.is_complex(dt):
        return f"{helper(cg.helpers, monoid + '_c', dt)}({acc}, {v})"
    return f"{monoid}({acc}, {v})"


def _argreduce(cg, op, cmp):
    """argmax (`cmp` ">") or argmin ("<")."""
    (x,), t = op.inputs, op.outputs[0]
    axis, keep = op.attrs["axis"], op.attrs.get("keepdims", False)
    kept = [i for i in range(x.ndim) if i != axis]
    nest, idx = _ordered(cg, cg.dims(x), kept + [axis])
    d = len(kept)
    best, bi, found = cg.fresh("best"), cg.fresh("bi"), cg.fresh("found")
    nest.pre[d] += [f"{bi} = 0", f"{found} = False", f"{best} = {_identity('sum', x.dtype)}"]
    v, _ = cg.elem(x, idx, nest)
    better = f"{v} {cmp} {best}"
    if dtypes.is_complex(x.dtype):  # NumPy's lexicographic order
        better = f"{helper(cg.helpers, {'>': 'gt_c', '<': 'lt_c'}[cmp], x.dtype)}({v}, {best})"
    if dtypes.is_inexact(x.dtype):  # the first NaN wins and stays
        better = f"{best} == {best} and ({better} or {v} != {v})"
    j = nest.vars[d]
    nest.stmt(frozenset(range(x.ndim)),
              f"if not {found} or ({better}):\n    {best} = {v}\n    {bi} = {j}\n"
              f"    {found} = True")
    result = f"{NB_TYPE[t.dtype]}({bi})"
    if t.ndim == 0:
        cg.add_nest(nest)
        cg.set_scalar(t, result)
        return
    target = cg.alloc(t)
    out = _out_index(cg.dims(t), nest.vars[:d], (axis,), keep, x.ndim)
    nest.post[d].append(f"{target}[{_ix(out)}] = {result}")
    cg.add_nest(nest)


register(reductions.argmax_p, Lowering(BLOCK, emit=partial(_argreduce, cmp=">")))
register(reductions.argmin_p, Lowering(BLOCK, emit=partial(_argreduce, cmp="<")))


def _cumulative(cg, op, monoid):
    """cumsum (`monoid` "sum") or cumprod ("prod")."""
    (x,), t = op.inputs, op.outputs[0]
    axis, reverse = op.attrs["axis"], op.attrs.get("reverse", False)
    xd = cg.dims(x)
    others = [i for i in range(x.ndim) if i != axis]
    target = cg.alloc(t)
    nest, idx = _ordered(cg, xd, others + [axis])
    d = len(others)
    if reverse:
        e, dep = idx[axis]
        idx[axis] = (f"({xd[axis]} - 1 - {e})", dep)
    acc = cg.fresh("acc")
    nest.pre[d].append(f"{acc} = {_identity(monoid, x.dtype)}")
    v, _ = cg.elem(x, idx, nest)
    parts = ", ".join("0" if dd == "1" else e for (e, _), dd in zip(idx, xd))
    nest.stmt(frozenset(range(x.ndim)),
              f"{acc} = {_combine(cg, monoid, x.dtype, acc, v)}\n{target}[{parts}] = {acc}")
    cg.add_nest(nest)


register(reductions.cumsum_p, Lowering(BLOCK, emit=partial(_cumulative, monoid="sum")))
register(reductions.cumprod_p, Lowering(BLOCK, emit=partial(_cumulative, monoid="prod")))


def _sort(cg, op, indices):
    """sort, or argsort (`indices`)."""
    (x,), t = op.inputs, op.outputs[0]
    axis = op.attrs["axis"]
    xd = cg.dims(x)
    others = [i for i in range(x.ndim) if i != axis]
    target = cg.alloc(t)
    buf, perm, j = cg.fresh("buf"), cg.fresh("perm"), cg.fresh("j")
    bdt = dtypes.int64 if x.dtype == dtypes.bool_ else x.dtype
    cg.emit(f"{buf} = np.empty({xd[axis]}, dtype={NB_TYPE[bdt]})")
    nest, idx = _ordered(cg, xd, others + [axis])
    d = len(others)
    v, _ = cg.elem(x, idx, nest)
    k = nest.vars[d]
    nest.stmt(frozenset(range(x.ndim)), f"{buf}[{k if xd[axis] != '1' else '0'}] = {v}")
    parts = ["0" if dd == "1" else e for (e, _), dd in zip(idx, xd)]
    parts[axis] = j if xd[axis] != "1" else "0"
    if not indices:
        value = f"{buf}[{perm}[{j}]]"
        if x.dtype == dtypes.bool_:
            value = f"({value} != 0)"
    else:
        value = f"{NB_TYPE[t.dtype]}({perm}[{j}])"
    argsort = (f"{helper(cg.helpers, 'argsort_c', x.dtype)}({buf})" if dtypes.is_complex(x.dtype)
               else f'np.argsort({buf}, kind="mergesort")')  # stable; NaN last as NumPy
    nest.post[d] += [
        f"{perm} = {argsort}",
        f"for {j} in range({xd[axis]}):",
        f"    {target}[{', '.join(parts)}] = {value}",
    ]
    cg.add_nest(nest)


register(reductions.sort_p, Lowering(BLOCK, emit=partial(_sort, indices=False)))
register(reductions.argsort_p, Lowering(BLOCK, emit=partial(_sort, indices=True)))


# -- scatter, pad, concatenate ---------------------------------------------------------


def _copy_into(cg, target, x):
    nest = cg.new_nest(cg.dims(x), parallel=True)
    v, _ = cg.elem(x, nest.index(), nest)
    parts = ", ".join("0" if d == "1" else i for i, d in zip(nest.vars, cg.dims(x)))
    nest.stmt(frozenset(range(x.ndim)), f"{target}[{parts or '()'}] = {v}")
    cg.add_nest(nest)


def _scatter(cg, op, add):
    """scatter, or scatter_add (`add`)."""
    (x, ind, upd), t = op.inputs, op.outputs[0]
    ax = op.attrs["axis"]
    r = ind.ndim
    target = cg.alloc(t)
    _copy_into(cg, target, x)
    nest = cg.new_nest(cg.dims(upd))
    idx = nest.index()
    e, _ = cg.elem(ind, idx[ax:ax + r], nest)
    v, _ = cg.elem(upd, idx, nest)
    n = cg.dims(x)[ax]
    g = cg.fresh("g")
    xd = cg.dims(x)
    parts = [i for i, _ in idx[:ax]] + [g] + [i for i, _ in idx[ax + r:]]
    parts = ", ".join("0" if d == "1" else p for p, d in zip(parts, xd))
    cur = f"{target}[{parts}]"
    if not add:
        store = f"{cur} = {v}"
    elif t.dtype == dtypes.bool_:
        store = f"{cur} = {cur} | {v}"
    else:
        store = f"{cur} = {typed(f'{cur} + {v}', t.dtype)}"
    nest.stmt(frozenset(range(upd.ndim)),
              cg.index_stmt(g, e, n, op) + "\n" + store)
    cg.add_nest(nest)


register(indexing.scatter_p, Lowering(BLOCK, emit=partial(_scatter, add=False)))
register(indexing.scatter_add_p, Lowering(BLOCK, emit=partial(_scatter, add=True)))


def _pad(cg, op):
    (x, pv), t = op.inputs, op.outputs[0]
    target = cg.alloc(t)
    fill = cg.new_nest(cg.dims(t), parallel=True)
    v, _ = cg.elem(pv, [], fill)
    parts = ", ".join("0" if d == "1" else i for i, d in zip(fill.vars, cg.dims(t)))
    fill.stmt(frozenset(range(t.ndim)), f"{target}[{parts or '()'}] = {v}")
    cg.add_nest(fill)
    nest = cg.new_nest(cg.dims(x))
    idx = nest.index()
    v, _ = cg.elem(x, idx, nest)
    out = []
    for k, ((i, _), (lo, _, interior), d) in enumerate(
            zip(idx, op.attrs["padding_config"], cg.dims(t), strict=True)):
        if d == "1":
            out.append("0")
            continue
        lo_v = cg.int_local(AttrSlot(id(x), _fixed(lo)), "lo")
        step = cg.int_local(AttrSlot(id(x), _fixed(interior + 1)), "step")
        out.append(f"{lo_v} + {step} * {i}")
    nest.stmt(frozenset(range(x.ndim)), f"{target}[{', '.join(out) or '()'}] = {v}")
    cg.add_nest(nest)


register(shape_ops.pad_p, Lowering(BLOCK, emit=_pad))


def _fixed(value):
    return lambda shape: value


def _concatenate(cg, op):
    t = op.outputs[0]
    dim = op.attrs["dimension"]
    target = cg.alloc(t)
    td = cg.dims(t)
    offset = []
    for x in op.inputs:
        xd = cg.dims(x)
        nest = cg.new_nest(xd, parallel=True)
        idx = nest.index()
        v, _ = cg.elem(x, idx, nest)
        parts = []
        for k, ((i, _), d) in enumerate(zip(idx, td)):
            if k == dim:
                base = " + ".join(offset)
                i = "0" if xd[k] == "1" else i
                parts.append(f"{base} + {i}" if offset else i)
            else:
                parts.append("0" if d == "1" else i)
        nest.stmt(frozenset(range(x.ndim)), f"{target}[{', '.join(parts)}] = {v}")
        cg.add_nest(nest)
        offset.append(xd[dim])


register(shape_ops.concatenate_p, Lowering(BLOCK, emit=_concatenate))
