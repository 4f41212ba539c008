"""Numba code for the primitives that are not fused element by element: reductions (which
absorb their elementwise producers as accumulating loops), arg-reductions, cumulative
ops, sort, scatter, pad, concatenate and reshape (`blocks_linalg.py`: dot_general and the
linear-algebra primitives). `BLOCKS[name](cg, op)` emits one block per op.
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


# -- reductions ---------------------------------------------------------------------------------

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


@block("reduce_sum", "reduce_prod", "reduce_max", "reduce_min")
def _reduce(cg, op):
    """Float sums follow NumPy's order exactly (pairwise over the trailing run of reduced
    axes, then accumulated in memory order), so they are bit-identical. Other reductions:
    reduced axes trailing: one scalar accumulator per result element; otherwise
    accumulate into the result in memory order."""
    (x,), t = op.inputs, op.outputs[0]
    name = op.primitive.name
    axes = tuple(op.attrs["axes"])
    kept = [i for i in range(x.ndim) if i not in axes]
    dt = x.dtype
    d = x.ndim
    while d > 0 and d - 1 in axes:
        d -= 1
    if name in _ROW_HELPER and dtypes.is_float(dt) and d < x.ndim:
        _row_reduce(cg, op, d, accumulate=bool(set(axes) - set(range(d, x.ndim))))
        return
    if kept != list(range(len(kept))):
        _reduce_in_memory_order(cg, op, kept)
        return
    nest, d, store = _reduction_nest(cg, op, len(kept))
    acc = cg.fresh("acc")
    nest.pre[d].append(f"{acc} = {_identity(name, dt)}")
    v, _ = cg.elem(x, nest.index(), nest)
    nest.stmt(frozenset(range(len(nest.dims))), f"{acc} = {_combine(cg, name, dt, acc, v)}")
    if t.ndim == 0:
        cg.add_nest(nest)
        cg.set_scalar(t, acc)
        return
    nest.post[d].append(f"{store()} = {acc}")
    cg.add_nest(nest)


def _reduction_nest(cg, op, d):
    """A nest over the operand of a reduction whose first `d` axes are kept: collapsed to
    (kept, reduced) when the operand is read at its own index. Returns the nest, the depth
    of one result element, and `store()` -> the result element to assign."""
    (x,), t = op.inputs, op.outputs[0]
    xd = cg.dims(x)
    axes = tuple(op.attrs["axes"]) if "axes" in op.attrs else (op.attrs["axis"],)
    keep = op.attrs.get("keepdims", False)
    if x.ndim > 1 and cg.flat_ok(x):
        groups = [g for g in (tuple(range(d)), tuple(range(d, x.ndim))) if g]
        nest = cg.new_nest([_prod([xd[a] for a in g]) for g in groups], parallel=d > 0)
        nest.collapse(groups)

        def store():
            target = cg.alloc(t, nest.prologue)
            if d == 0:
                return f"{target}[{_ix(['0'] * t.ndim)}]"
            return f"{_flat_view(nest, target, cg.dims(t))}[{nest.vars[0]}]"
        return nest, min(d, 1), store
    nest = cg.new_nest(xd, parallel=d > 0)

    def store():
        target = cg.alloc(t, nest.prologue)
        return f"{target}[{_ix(_out_index(cg.dims(t), nest.vars[:d], axes, keep, x.ndim))}]"
    return nest, d, store


def _flat_view(nest, target, dims):
    name = f"{target}_flat"
    nest.prologue.append(f"{name} = {target}.reshape(({_prod(dims)},))")
    return name


def _flat_index(vars_, dims) -> str:
    """The row-major flat index of loop variables `vars_` over `dims`."""
    expr = "0"
    for v, d in zip(vars_, dims):
        v = "0" if d == "1" else v
        expr = v if expr == "0" else f"({expr}) * {d} + {v}"
    return expr


# Float reductions over a trailing run of axes call a row helper: NumPy's pairwise sum
# (bit-identical sums), or an 8-lane max/min (vectorizes; the order does not matter).
_ROW_HELPER = {"reduce_sum": "pairwise", "reduce_max": "rowmax", "reduce_min": "rowmin"}


def _row_reduce(cg, op, d, accumulate):
    """Reduce over axes d.. per row with a row helper; rows loop over the leading axes in
    memory order (combining into the result when some of them are reduced too)."""
    (x,), t = op.inputs, op.outputs[0]
    name = op.primitive.name
    axes, keep = tuple(op.attrs["axes"]), op.attrs.get("keepdims", False)
    xd, td = cg.dims(x), cg.dims(t)
    pw = helper(cg.helpers, _ROW_HELPER[name], x.dtype)
    rows, m = _prod(xd[:d]), _prod(xd[d:])
    ref = cg.refs.get(id(x))
    direct = ref is not None and ref.kind == "arr"
    if t.ndim and not accumulate:
        target = cg.alloc(t)
    elif t.ndim:
        target = cg.alloc(t)
        init = cg.new_nest(td)
        ti = ", ".join("0" if dd == "1" else v for v, dd in zip(init.vars, td))
        init.stmt(frozenset(range(t.ndim)), f"{target}[{ti}] = {_identity(name, x.dtype)}")
        cg.add_nest(init)
    acc = cg.fresh("acc")
    if direct:
        flat = cg.fresh("xf")
        cg.emit(f"{flat} = {ref.name}.reshape(({rows}, {m}))")
        nest = cg.new_nest(xd[:d], parallel=not accumulate)
        nest.pre[d].append(f"{acc} = {pw}({flat}[{_flat_index(nest.vars, xd[:d])}], 0, {m})")
    elif not accumulate and x.ndim > 1 and cg.flat_ok(x):
        # a fused operand read at its own index: loop over (rows, row) views
        if d == 0 and name != "reduce_sum":  # max/min in any order: a row-sized buffer
            _extreme_by_rows(cg, op, pw)
            return
        buf = cg.fresh("buf")
        cg.emit(f"{buf} = np.empty({m}, dtype={NB_TYPE[x.dtype]})")
        groups = [g for g in (tuple(range(d)), tuple(range(d, x.ndim))) if g]
        nest = cg.new_nest([_prod([xd[a] for a in g]) for g in groups])
        nest.collapse(groups)
        v, _ = cg.elem(x, nest.index(), nest)
        nest.stmt(frozenset(range(len(groups))), f"{buf}[{nest.vars[-1]}] = {v}")
        nest.post[len(groups) - 1].append(f"{acc} = {pw}({buf}, 0, {m})")
        if t.ndim:
            flat = f"{target}_flat"
            row = nest.vars[0] if d else "0"  # d == 0: one row, the whole operand
            nest.prologue.append(f"{flat} = {target}.reshape(({rows},))")
            nest.post[len(groups) - 1].append(f"{flat}[{row}] = {acc}")
        cg.add_nest(nest)
        if t.ndim == 0:
            cg.set_scalar(t, acc)
        return
    else:  # a fused operand: evaluate one row into a buffer, then reduce it
        buf, pos = cg.fresh("buf"), cg.fresh("pos")
        cg.emit(f"{buf} = np.empty({m}, dtype={NB_TYPE[x.dtype]})")
        nest = cg.new_nest(xd)
        nest.pre[d].append(f"{pos} = 0")
        v, _ = cg.elem(x, nest.index(), nest)
        nest.stmt(frozenset(range(x.ndim)), f"{buf}[{pos}] = {v}\n{pos} += 1")
        nest.post[d].append(f"{acc} = {pw}({buf}, 0, {m})")
    stores = nest.pre[d] if direct else nest.post[d]
    if t.ndim == 0:
        cg.add_nest(nest)
        cg.set_scalar(t, acc)
        return
    kept_vars = [nest.vars[i] for i in range(d) if i not in axes]
    cur = f"{target}[{_ix(_out_index(td, kept_vars, axes, keep, x.ndim))}]"
    combined = _combine(cg, name, x.dtype, cur, acc)
    stores.append(f"{cur} = {combined}" if accumulate else f"{cur} = {acc}")
    cg.add_nest(nest)


def _extreme_by_rows(cg, op, row_helper):
    """max/min of a whole fused operand to a scalar: one row at a time through a row buffer
    (not a buffer of the whole operand)."""
    (x,), t = op.inputs, op.outputs[0]
    xd, name = cg.dims(x), op.primitive.name
    groups = [tuple(range(x.ndim - 1)), (x.ndim - 1,)]
    buf, acc, row = cg.fresh("buf"), cg.fresh("acc"), cg.fresh("row")
    cg.emit(f"{buf} = np.empty({xd[-1]}, dtype={NB_TYPE[x.dtype]})")
    nest = cg.new_nest([_prod(xd[:-1]), xd[-1]])
    nest.collapse(groups)
    nest.pre[0].append(f"{acc} = {_identity(name, x.dtype)}")
    v, _ = cg.elem(x, nest.index(), nest)
    nest.stmt(frozenset((0, 1)), f"{buf}[{nest.vars[1]}] = {v}")
    nest.post[1].append(f"{row} = {row_helper}({buf}, 0, {xd[-1]})")
    nest.post[1].append(f"{acc} = {_combine(cg, name, x.dtype, acc, row)}")
    cg.add_nest(nest)
    if t.ndim:  # keepdims: every result dim is 1
        target = cg.alloc(t)
        cg.emit(f"{target}[{_ix(['0'] * t.ndim)}] = {acc}")
    else:
        cg.set_scalar(t, acc)


def _reduce_in_memory_order(cg, op, kept):
    (x,), t = op.inputs, op.outputs[0]
    name, dt = op.primitive.name, x.dtype
    axes, keep = tuple(op.attrs["axes"]), op.attrs.get("keepdims", False)
    target = cg.alloc(t)
    td = cg.dims(t)
    init = cg.new_nest(td)
    ti = ", ".join("0" if d == "1" else v for v, d in zip(init.vars, td))
    init.stmt(frozenset(range(t.ndim)), f"{target}[{ti}] = {_identity(name, dt)}")
    cg.add_nest(init)
    nest = cg.new_nest(cg.dims(x))
    v, _ = cg.elem(x, nest.index(), nest)
    out = ", ".join(_out_index(td, [nest.vars[i] for i in kept], axes, keep, x.ndim))
    cur = f"{target}[{out}]"
    nest.stmt(frozenset(range(x.ndim)), f"{cur} = {_combine(cg, name, dt, cur, v)}")
    cg.add_nest(nest)


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
    cg.emit(f"{name} = {cg.array(x)}.reshape(({shape},))")
    from tracegrad.backends.numba.codegen import Ref

    cg.refs[id(t)] = Ref("arr", name)
