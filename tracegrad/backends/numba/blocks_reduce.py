"""Numba code for the reductions (reduce_sum, reduce_prod, reduce_max, reduce_min).

Each evaluates its operand in a nest from `cg.loop_nest`, so sibling reductions of one
array (and elementwise roots over the same dims) share one pass over it. Float sums over
the trailing reduced axes are blocked pairwise sums (NumPy's pairwise order within blocks
of `helpers.SUM_BLOCK` elements, blocks combined pairwise: docs/numba.md, "Float sums"):
a fused operand is evaluated block by block into a buffer of one block (`_blocked_row`).
Sums over other axes accumulate in NumPy's memory order (bit-identical). max/min do not
depend on the order, so a whole-operand max/min keeps one running value per column (a loop
that vectorizes) and reduces that row at the end, and a fused row's max/min in a nest of
several loops is one running value the innermost loop updates in vector lanes."""

from __future__ import annotations

import math
from functools import partial

from tracegrad.backends.numba import helpers
from tracegrad.backends.numba.blocks import (
    _combine,
    _identity,
    _ix,
    _out_index,
    _prod,
)
from tracegrad.backends.numba.lowering import REDUCTION, Lowering, register
from tracegrad.backends.numba.records import Stmt, name_of, slot, stmts
from tracegrad.backends.numba.scalars import NB_TYPE, helper
from tracegrad.core import dtypes, shapes
from tracegrad.ops import reductions

# Float reductions over a trailing run of axes call a row helper: the blocked pairwise sum
# (deterministic; NumPy's bits up to one block), or an 8-lane max/min (vectorizes; the
# order does not matter).
_ROW_HELPER = {"sum": "bsum", "max": "rowmax", "min": "rowmin"}
# A float row of at most this many elements (of known count) reduced in a loop nest is
# reduced in registers, the row's loop written out (`_unrolled_row`).
SHORT_ROW = 16


def _reduce(cg, op, monoid):
    """Dispatch on the layout: whole-operand float max/min by columns; float sum/max/min
    over trailing axes by row helpers; leading kept axes: a scalar accumulator per result
    element; otherwise accumulate into the result in memory order. Returns whether the
    innermost loop may be run again for one block (the reduction does not accumulate in
    it: see `Nest.render`)."""
    (x,) = op.inputs
    axes = tuple(op.attrs["axes"])
    kept = [i for i in range(x.ndim) if i not in axes]
    is_float = dtypes.is_float(x.dtype)
    d = x.ndim
    while d > 0 and d - 1 in axes:
        d -= 1
    if monoid in ("max", "min") and is_float and not kept and x.ndim > 1:
        _extreme_by_columns(cg, op, monoid)
    elif monoid in _ROW_HELPER and is_float and d < x.ndim:
        return _row_reduce(cg, op, monoid, d,
                           accumulate=bool(set(axes) - set(range(d, x.ndim))))
    elif kept != list(range(len(kept))):
        _reduce_in_memory_order(cg, op, monoid, kept)
    else:
        _reduce_by_accumulators(cg, op, monoid, len(kept))
    return False


for _prim, _monoid in ((reductions.reduce_sum_p, "sum"), (reductions.reduce_prod_p, "prod"),
                       (reductions.reduce_max_p, "max"), (reductions.reduce_min_p, "min")):
    register(_prim, Lowering(REDUCTION, emit=partial(_reduce, monoid=_monoid)))


def _groups(ndim, d):
    """Axis groups (kept, reduced) collapsing a nest over a fused operand that reads its
    arrays at its own index; None when no group has more than one axis."""
    groups = [g for g in (tuple(range(d)), tuple(range(d, ndim))) if g]
    return groups if any(len(g) > 1 for g in groups) else None


def _reduce_by_accumulators(cg, op, monoid, d):
    """First `d` axes kept: one scalar accumulator per result element."""
    (x,), t = op.inputs, op.outputs[0]
    dt = x.dtype
    xd = cg.dims(x)
    axes, keep = tuple(op.attrs["axes"]), op.attrs.get("keepdims", False)
    groups = _groups(x.ndim, d) if x.ndim > 1 and cg.flat_ok(x) else None
    nest = cg.loop_nest(xd, x, groups=groups, parallel=d > 0, op=op)
    depth = min(d, 1) if groups else d
    acc = cg.fresh("acc")
    # complex64 sums and products accumulate in complex128 (there is no pairwise complex
    # sum here): within complex64 rounding of NumPy's pairwise result
    wide = dtypes.complex128 if dt == dtypes.complex64 and monoid in ("sum", "prod") else dt
    nest.pre[depth].append(f"{acc} = {_identity(monoid, wide)}")
    v, _ = cg.elem(x, nest.index(), nest)
    nest.stmt(frozenset(range(len(nest.dims))), f"{acc} = {_combine(cg, monoid, wide, acc, v)}",
              defines=(name_of(acc),))
    if t.ndim == 0:
        cg.nest_scalar(nest, t, acc if wide == dt else f"np.complex64({acc})")
        return
    target = cg.alloc(t, nest.prologue)
    if groups and d:
        store = f"{_flat_view(nest, target, cg.dims(t))}[{nest.vars[0]}]"
    elif groups:
        store = f"{target}[{_ix(['0'] * t.ndim)}]"
    else:
        store = f"{target}[{_ix(_out_index(cg.dims(t), nest.vars[:d], axes, keep, x.ndim))}]"
    nest.post[depth].append(f"{store} = {acc}")


def _flat_view(nest, target, dims):
    name = slot(name_of(target) + "_flat")
    cg = nest.cg
    nest.prologue.append(f"{name} = {cg.view(target, f'({_prod(dims)},)')}")
    return name


def _flat_index(vars_, dims) -> str:
    """The row-major flat index of loop variables `vars_` over `dims`."""
    expr = "0"
    for v, d in zip(vars_, dims):
        v = "0" if d == "1" else v
        expr = v if expr == "0" else f"({expr}) * {d} + {v}"
    return expr


def _init(cg, nest, target, t, monoid, dt):
    """Fill the result `target` with the identity before `nest`'s loops."""
    td = cg.dims(t)
    init = cg.new_nest(td)
    ti = ", ".join("0" if d == "1" else v for v, d in zip(init.vars, td))
    init.stmt(frozenset(range(t.ndim)), f"{target}[{ti}] = {_identity(monoid, dt)}")
    nest.prologue.extend(init.render())


def _row_reduce(cg, op, monoid, d, accumulate):
    """Reduce over axes d.. per row with a row helper; rows loop over the leading axes in
    memory order (combining into the result when some of them are reduced too). A fused
    operand whose row one loop walks is written out when short (`_unrolled_row`), kept in
    a running max/min in a nest of several loops (`_running_extreme`), else evaluated in
    blocks of SUM_BLOCK elements into a small buffer, reduced block by block
    (`_blocked_row`): no buffer of a row's size."""
    (x,), t = op.inputs, op.outputs[0]
    dt = x.dtype
    axes, keep = tuple(op.attrs["axes"]), op.attrs.get("keepdims", False)
    xd, td = cg.dims(x), cg.dims(t)
    rows, m = _prod(xd[:d]), _prod(xd[d:])
    ref = cg.refs.get(id(x))
    acc = cg.fresh("acc")
    safe = True  # nothing accumulates in the innermost loop but a block buffer
    if ref is not None and ref.kind == "arr":  # the operand's rows are there: no buffer
        pw = helper(cg.helpers, _ROW_HELPER[monoid], dt)
        nest = cg.loop_nest(xd, x, parallel=not accumulate, op=op, at_index=False)
        flat = cg.fresh("xf")
        nest.prologue.append(f"{flat} = {cg.view(ref.name, f'({rows}, {m})')}")
        row_end = nest.pre[d]
        if nest.split_blocks and monoid == "sum":  # the blocks of `_bsum` on the threads
            k, _, count, _ = nest.block
            part = f"{helper(cg.helpers, 'pairwise', dt)}({flat}[0], {k} * " \
                   f"{helpers.SUM_BLOCK}, {count})"
            _block_results(cg, nest, monoid, dt, part, acc)
        else:
            row_end.append(f"{acc} = {pw}({flat}[{_flat_index(nest.vars, xd[:d])}], 0, {m})")
    else:  # a fused operand: evaluate it row by row (in blocks when one loop walks a row)
        groups = _groups(x.ndim, d) if not accumulate and cg.flat_ok(x) else None
        one_loop = bool(groups) or d == x.ndim - 1  # one loop walks the row
        nest = cg.loop_nest(xd, x, groups=groups, op=op, parallel=one_loop and not accumulate)
        depth = min(d, 1) if groups else d
        count = shapes.size(x.shape[d:])
        # decided before the operand's code: its reads depend on the loops
        written_out = one_loop and _written_out(nest, count)
        v, _ = cg.elem(x, nest.index(), nest)
        row_end = nest.post[depth]
        if one_loop:
            if written_out:
                _unrolled_row(cg, nest, monoid, dt, v, acc)
            elif monoid != "sum" and len(nest.dims) > 1:
                _running_extreme(cg, nest, monoid, dt, v, acc, depth)
                safe = False  # the running value is not per block
            else:
                _blocked_row(cg, nest, monoid, dt, v, acc)
        else:
            safe = False
            buf, pos = cg.fresh("buf"), cg.fresh("pos")
            size = None if None in x.type.shape else math.prod(x.type.shape[d:])
            nest.prologue.append(cg.scratch(buf, m, size, dt))
            nest.pre[depth].append(Stmt(f"{pos} = 0", (name_of(pos),)))
            # a store in the innermost loop: the nest is not jammed (`Nest._jams`)
            inner = frozenset(range(len(nest.dims)))
            nest.stmt(inner, f"{buf}[{pos}] = {v}")
            nest.stmt(inner, f"{pos} += 1", defines=(name_of(pos),))
            row = helper(cg.helpers, _ROW_HELPER[monoid], dt)
            row_end.append(f"{acc} = {row}({buf}, 0, {m})")
        if groups and t.ndim:
            target = cg.alloc(t, nest.prologue)
            row = nest.vars[0] if d else "0"  # d == 0: one row, the whole operand
            row_end.append(f"{_flat_view(nest, target, td)}[{row}] = {acc}")
            return safe
    if t.ndim == 0:
        cg.nest_scalar(nest, t, acc)
        return safe
    target = cg.alloc(t, nest.prologue)
    if accumulate:
        _init(cg, nest, target, t, monoid, dt)
    kept_vars = [nest.vars[i] for i in range(d) if i not in axes]
    cur = f"{target}[{_ix(_out_index(td, kept_vars, axes, keep, x.ndim))}]"
    row_end.append(f"{cur} = {_combine(cg, monoid, dt, cur, acc)}" if accumulate else
                   f"{cur} = {acc}")
    return safe


def _unrolled_row(cg, nest, monoid, dt, v, acc):
    """`acc` = the reduction of value `v` over a row of the nest's innermost loop, written
    out (`_written_out`): a sum in NumPy's pairwise order (`_pairwise_expr`), a max/min
    combined in order. A short row (the squared coordinates of a point, the components of a
    mixture) is then a few additions in registers: no buffer, no helper call, no block loop
    per row."""
    inner = len(nest.dims)
    w = cg.fresh("v")
    nest.stmt(frozenset(range(inner)), f"{w} = {v}", defines=(name_of(w),))
    values = nest.copies(w)
    post = nest.post[inner - 1]
    if monoid == "sum":
        post.append(f"{acc} = {_pairwise_expr(values, dt)}")
        return
    post.append(f"{acc} = {values[0]}")
    post.extend(f"{acc} = {_combine(cg, monoid, dt, acc, x)}" for x in values[1:])


def _running_extreme(cg, nest, monoid, dt, v, acc, depth):
    """`acc` = the max/min of value `v` over the innermost loop, one running value updated
    by LLVM's maximum/minimum (`_vmax_f64`...): a reduction the loop vectorizes in its lanes,
    with no buffer or helper call per block (kmeans' minimum over 1000 distances a point
    stored each block's distances and read them back). Only in a nest of several loops: a
    nest of one loop may split its blocks between threads."""
    nest.pre[depth].append(f"{acc} = {_identity(monoid, dt)}")
    step = f"{helper(cg.helpers, 'v' + monoid + '_f', dt)}({acc}, {v})"
    nest.stmt(frozenset(range(len(nest.dims))), f"{acc} = {step}", defines=(name_of(acc),))


def _written_out(nest, count) -> bool:
    """Whether the innermost loop of `nest`, a row of `count` elements, is written out
    (`_unrolled_row`; it is from then on): False when the row is not short, the nest
    already loops in blocks, or the row is the nest's only loop (then its loop, which
    vectorizes, is kept: a recurrent step's cells)."""
    return count is not None and 2 <= count <= SHORT_ROW and len(nest.dims) >= 2 and \
        nest.unroll(count)


def _pairwise_expr(values, dt) -> str:
    """The sum of `values` (at most 128) in NumPy's pairwise order: in order from zero
    below 8 terms, else 8 running sums over the multiples of 8, combined as a tree, then the
    rest in order (helpers' `_pwleaf`)."""
    n = len(values)
    if n < 8:
        return " + ".join([_identity("sum", dt), *values])
    m = n - n % 8
    r = [" + ".join(values[j:m:8]) for j in range(8)]
    r = [f"({x})" if "+" in x else x for x in r]
    tree = f"(({r[0]} + {r[1]}) + ({r[2]} + {r[3]})) + (({r[4]} + {r[5]}) + ({r[6]} + {r[7]}))"
    return " + ".join([f"({tree})", *values[m:]])


def _blocked_row(cg, nest, monoid, dt, v, acc):
    """`acc` (set after the innermost loop) = the reduction of value `v` over that loop,
    run in blocks: each block's values go to a buffer of SUM_BLOCK elements, reduced by the
    row helper when the block ends. Sums combine the block sums pairwise (`_bpush`,
    `_bfinish`: the order depends only on the row's length); max/min combine them as they
    come (their result does not depend on the order)."""
    k, count, m, j = nest.blocked()
    inner = len(nest.dims)
    buf = cg.fresh("buf")
    # a parallel nest's scratch is each block's (split blocks) or each row's own
    if nest.parallel:
        scratch = nest.block_start if nest.split_blocks else nest.pre[1]
        scratch.append(f"{buf} = np.empty({helpers.SUM_BLOCK}, dtype={NB_TYPE[dt]})")
    else:
        scratch = nest.prologue
        scratch.append(cg.scratch(buf, str(helpers.SUM_BLOCK), helpers.SUM_BLOCK, dt))
    nest.stmt(frozenset(range(inner)), f"{buf}[{j}] = {v}")
    row = "pairwise" if monoid == "sum" else _ROW_HELPER[monoid]  # a block: NumPy's order
    _block_results(cg, nest, monoid, dt, f"{helper(cg.helpers, row, dt)}({buf}, 0, {m})", acc,
                   scratch)


def _block_results(cg, nest, monoid, dt, part, acc, scratch=None):
    """`acc` (set after the blocked loop) = the blocks' results `part` combined: sums by
    the binary counter, max/min in block order. In a split nest each block writes its
    result to its own slot, combined after the parallel loop in the same order."""
    k, count, _, _ = nest.block
    inner = len(nest.dims)
    if nest.split_blocks:  # blocks on several threads: their results combined in order
        parts, kk = cg.fresh("parts"), cg.fresh("kp")
        nest.prologue.append(f"{parts} = np.empty({count}, dtype={NB_TYPE[dt]})")
        nest.block_end.append(f"{parts}[{k}] = {part}")
        part = f"{parts}[{kk}]"
        combine = [f"for {kk} in range({count}):"]
    else:
        combine = None
    if monoid == "sum":
        stk = cg.fresh("stk")
        if nest.parallel and not combine:
            scratch.append(f"{stk} = np.empty(64, dtype={NB_TYPE[dt]})")
        else:
            nest.prologue.append(cg.scratch(stk, "64", 64, dt))
        push = f"{helper(cg.helpers, 'bpush', dt)}({stk}, {k if not combine else kk}, {part})"
        finish = f"{acc} = {helper(cg.helpers, 'bfinish', dt)}({stk}, {count})"
        if combine:
            nest.post[0].extend(stmts("\n    ".join(combine + [push]) + "\n" + finish))
        else:
            nest.block_end.append(push)
            nest.post[inner - 1].append(finish)
    else:
        init = f"{acc} = {_identity(monoid, dt)}"
        step = f"{acc} = {_combine(cg, monoid, dt, acc, part)}"
        if combine:
            nest.post[0].extend(stmts(init + "\n" + "\n    ".join(combine + [step])))
        else:
            nest.pre[inner - 1].append(init)
            nest.block_end.append(step)


def _extreme_by_columns(cg, op, monoid):
    """max/min over every axis: a running value per position of the last axis (updated
    row after row: a vectorizable loop), then the row helper over those values."""
    (x,), t = op.inputs, op.outputs[0]
    dt = x.dtype
    xd = cg.dims(x)
    groups = [tuple(range(x.ndim - 1)), (x.ndim - 1,)] if x.ndim > 2 and cg.flat_ok(x) \
        else None
    nest = cg.loop_nest(xd, x, groups=groups, op=op)
    part = cg.fresh("part")
    nest.prologue.append(f"{part} = np.full({xd[-1]}, {_identity(monoid, dt)})")
    v, _ = cg.elem(x, nest.index(), nest)
    j = "0" if xd[-1] == "1" else nest.vars[-1]
    cur = f"{part}[{j}]"
    nest.stmt(frozenset(range(len(nest.dims))), f"{cur} = {_combine(cg, monoid, dt, cur, v)}")
    result = f"{helper(cg.helpers, _ROW_HELPER[monoid], dt)}({part}, 0, {xd[-1]})"
    if t.ndim == 0:
        cg.nest_scalar(nest, t, result)
        return
    target = cg.alloc(t, nest.prologue)  # keepdims: every result dim is 1
    nest.post[0].append(f"{target}[{_ix(['0'] * t.ndim)}] = {result}")


def _reduce_in_memory_order(cg, op, monoid, kept):
    """Kept axes not leading: accumulate into the result, walking the operand in memory
    order (the inner loop updates consecutive result elements: it vectorizes)."""
    (x,), t = op.inputs, op.outputs[0]
    dt = x.dtype
    axes, keep = tuple(op.attrs["axes"]), op.attrs.get("keepdims", False)
    nest = cg.loop_nest(cg.dims(x), x, op=op)
    target = cg.alloc(t, nest.prologue)
    _init(cg, nest, target, t, monoid, dt)
    v, _ = cg.elem(x, nest.index(), nest)
    out = _ix(_out_index(cg.dims(t), [nest.vars[i] for i in kept], axes, keep, x.ndim))
    cur = f"{target}[{out}]"
    nest.stmt(frozenset(range(x.ndim)), f"{cur} = {_combine(cg, monoid, dt, cur, v)}")
