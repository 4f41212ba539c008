"""Numba code for the primitives that are not fused element by element: arg-reductions,
cumulative ops, sort, scatter, pad, concatenate and reshape (`blocks_reduce.py`: the
reductions; `blocks_linalg.py`: dot_general and the linear-algebra primitives).
`BLOCKS[name](cg, op)` emits one block per op.
"""

from __future__ import annotations

from tracegrad.backends.numba.scalars import NB_TYPE, helper, literal, typed
from tracegrad.core import dtypes

BLOCKS: dict = {}


def block(*names):
    def register(fn):
        for n in names:
            BLOCKS[n] = fn
        return fn
    return register


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


# -- shared by the reductions ---------------------------------------------------------------------------------

_IDENTITY = {"reduce_sum": 0, "reduce_prod": 1}


def _identity(name, dt) -> str:
    if name in _IDENTITY:
        return literal(_IDENTITY[name], dt)
    big = name == "reduce_min"
    if dt == dtypes.bool_:
        return "True" if big else "False"
    if dtypes.is_float(dt):
        return f"{NB_TYPE[dt]}({'np.inf' if big else '-np.inf'})"
    info = "np.iinfo(np.int64)" if dt == dtypes.int64 else "np.iinfo(np.int32)"
    return f"{NB_TYPE[dt]}({info}.{'max' if big else 'min'})"


def _combine(cg, name, dt, acc, v) -> str:
    if dt == dtypes.bool_:
        return f"({acc} | {v})" if name in ("reduce_sum", "reduce_max") else f"({acc} & {v})"
    if name == "reduce_sum":
        return typed(f"{acc} + {v}", dt)
    if name == "reduce_prod":
        return typed(f"{acc} * {v}", dt)
    kind = "max" if name == "reduce_max" else "min"
    if dtypes.is_float(dt):
        return f"{helper(cg.helpers, kind + '_f', dt)}({acc}, {v})"
    return f"{kind}({acc}, {v})"


@block("argmax", "argmin")
def _argreduce(cg, op):
    (x,), t = op.inputs, op.outputs[0]
    axis, keep = op.attrs["axis"], op.attrs.get("keepdims", False)
    kept = [i for i in range(x.ndim) if i != axis]
    nest, idx = _ordered(cg, cg.dims(x), kept + [axis])
    d = len(kept)
    best, bi, found = cg.fresh("best"), cg.fresh("bi"), cg.fresh("found")
    nest.pre[d] += [f"{bi} = 0", f"{found} = False", f"{best} = {_identity('reduce_sum', x.dtype)}"]
    v, _ = cg.elem(x, idx, nest)
    cmp = ">" if op.primitive.name == "argmax" else "<"
    better = f"{v} {cmp} {best}"
    if dtypes.is_float(x.dtype):  # the first NaN wins and stays
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


@block("cumsum", "cumprod")
def _cumulative(cg, op):
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
    red = "reduce_sum" if op.primitive.name == "cumsum" else "reduce_prod"
    nest.pre[d].append(f"{acc} = {_identity(red, x.dtype)}")
    v, _ = cg.elem(x, idx, nest)
    parts = ", ".join("0" if dd == "1" else e for (e, _), dd in zip(idx, xd))
    nest.stmt(frozenset(range(x.ndim)),
              f"{acc} = {_combine(cg, red, x.dtype, acc, v)}\n{target}[{parts}] = {acc}")
    cg.add_nest(nest)


@block("sort", "argsort")
def _sort(cg, op):
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
    if op.primitive.name == "sort":
        value = f"{buf}[{perm}[{j}]]"
        if x.dtype == dtypes.bool_:
            value = f"({value} != 0)"
    else:
        value = f"{NB_TYPE[t.dtype]}({perm}[{j}])"
    nest.post[d] += [
        f'{perm} = np.argsort({buf}, kind="mergesort")',  # stable; NaN last as NumPy
        f"for {j} in range({xd[axis]}):",
        f"    {target}[{', '.join(parts)}] = {value}",
    ]
    cg.add_nest(nest)


# -- scatter, pad, concatenate, reshape ---------------------------------------------------------


def _copy_into(cg, target, x):
    nest = cg.new_nest(cg.dims(x), parallel=True)
    v, _ = cg.elem(x, nest.index(), nest)
    parts = ", ".join("0" if d == "1" else i for i, d in zip(nest.vars, cg.dims(x)))
    nest.stmt(frozenset(range(x.ndim)), f"{target}[{parts or '()'}] = {v}")
    cg.add_nest(nest)


@block("scatter", "scatter_add")
def _scatter(cg, op):
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
    tag = cg.raise_tag(op)
    xd = cg.dims(x)
    parts = [i for i, _ in idx[:ax]] + [g] + [i for i, _ in idx[ax + r:]]
    parts = ", ".join("0" if d == "1" else p for p, d in zip(parts, xd))
    cur = f"{target}[{parts}]"
    if op.primitive.name == "scatter":
        store = f"{cur} = {v}"
    elif t.dtype == dtypes.bool_:
        store = f"{cur} = {cur} | {v}"
    else:
        store = f"{cur} = {typed(f'{cur} + {v}', t.dtype)}"
    nest.stmt(frozenset(range(upd.ndim)),
              f"{g} = np.int64({e})\nif {g} < 0:\n    {g} += {n}\n"
              f"if {g} < 0 or {g} >= {n}:\n    raise IndexError({tag}, np.int64({e}), {n})\n"
              + store)
    cg.add_nest(nest)


@block("pad")
def _pad(cg, op):
    from tracegrad.backends.numba.plan import AttrSlot

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


def _fixed(value):
    return lambda shape: value


@block("concatenate")
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


@block("reshape")
def _reshape(cg, op):
    (x,), t = op.inputs, op.outputs[0]
    shape = ", ".join(cg.dims(t))
    name = cg.fresh("r")
    cg.emit(f"{name} = _cview({cg.array(x)}, ({shape},))")
    from tracegrad.backends.numba.codegen import Ref

    cg.refs[id(t)] = Ref("arr", name)
