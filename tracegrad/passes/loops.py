"""Control-flow passes: `while` and `cond` ops keep only what is used, loops compute their
invariant work once, and a `cond` on a constant predicate becomes the chosen branch.

`while(*consts, *carry)` (its condition and body both take `(*consts, *carry)`):

- a carry the body returns unchanged (its own input) becomes a const: its final value is
  its initial one (not when its history is read: the history would have to be built);
- a carry is removed (operand, condition and body input, body output, result) when its
  final value is unused, its history too (`keep_history=True`), and neither the condition
  nor the body output of a kept carry reads it, transitively;
- `keep_history=True` whose iteration count and histories are all unused is dropped;
- loop-invariant code motion: an op of the body or the condition whose operands are
  consts, constants or other such ops, and that reads at least one const, is computed once
  before the loop and read through a new const. A loop may run zero times, so only ops
  that cannot raise are moved: `HOIST_ALWAYS` whatever the shapes, `HOIST_STATIC` only
  when every operand and result shape is known (with an unknown dim they can meet a
  mismatch at run time); gathers, scatters, linear algebra, nested control flow and
  integer `pow` (negative exponents raise) stay. NaN and inf are values, not errors;
- consts neither sub-graph reads are removed; a value passed as two consts is passed once;
- an accumulator (a carry only its own update reads, `acc + t1 + t2 + ...`) whose terms
  include zero-padded blocks (the gradient of a slice of a const) gets one carry per
  padded region, of the block's size: the blocks are summed unpadded in the loop and
  padded into the accumulator once after it (not a zero-filled array per term per step).
  The sums of blocks of one type (and number of terms a step), up to
  `control_flow.PACK_MAX_ELEMENTS` elements each, are one carry, stacked along a new first
  axis.

`cond(pred, *args)`: a constant predicate inlines the chosen branch; an unused result, or
one both branches pass through from the same argument, is removed from the branches; an
argument neither branch reads is removed; a value passed twice is passed once.

Every rewrite keeps each result's value and type. A result the rewritten op no longer
computes is unused: the rule answers it with a typed placeholder the sweep removes.
Ops whose sub-graphs capture tensors (rather than take operands) are left alone.
"""

from __future__ import annotations

import numpy as np

from tracegrad.core import dtypes
from tracegrad.core.ir import FuncGraph
from tracegrad.core.op import constant_p
from tracegrad.ops import BINARY, UNARY, linalg, reductions, shape_ops
from tracegrad.ops import elementwise as ew
from tracegrad.ops.control_flow import cond_p, packed_type, packs, while_p, while_results
from tracegrad.passes._rewrite import (Rewriter, captured_tensors, extended_graph, run_pass,
                                       sweep, use_counts)
from tracegrad.passes.pads import zero_padding

# Ops a loop may compute before it runs (they cannot raise): whatever the shapes ...
HOIST_ALWAYS = frozenset(UNARY | {
    ew.integer_pow_p, ew.convert_element_type_p, ew.stop_gradient_p,
    shape_ops.transpose_p, shape_ops.rev_p, shape_ops.dim_size_p,
    reductions.reduce_sum_p, reductions.reduce_prod_p,
})
# ... and when every operand and result shape is known (no run-time mismatch, no empty
# reduction without identity, no negative broadcast size).
HOIST_STATIC = frozenset(BINARY | {
    ew.select_p, shape_ops.broadcast_in_dim_p, shape_ops.reshape_p, shape_ops.slice_p,
    shape_ops.pad_p, shape_ops.concatenate_p, shape_ops.iota_p, linalg.dot_general_p,
    reductions.reduce_max_p, reductions.reduce_min_p,
})


def simplify_control_flow(graph: FuncGraph) -> FuncGraph:
    """`graph` with its `while` and `cond` ops pruned, loop-invariant ops hoisted and
    constant-predicate conds inlined (one sweep; see `optimize`).

    >>> g = tg.trace(lambda x: tg.fori_loop(0, 3, lambda i, v: v * tnp.cos(x), x))(
    ...     tg.TensorSpec([3]))
    >>> [op.name for op in simplify_control_flow(g).operations][-2:]   # cos before the loop
    ['cos', 'while']
    """
    return run_pass(graph, _make_rule)[0]


def _make_rule(rw):
    live = None  # the tensors of the source graph something reads, found on first need

    def rule(rw, op, ins):
        nonlocal live
        fn = _RULES.get(op.primitive)
        if fn is None:
            return None
        if live is None:
            live = _reads(rw.source, rw.source.outputs)[0]
        return fn(rw, op, ins, live)

    return rule


# -- analysis -----------------------------------------------------------------------------------


def _reads(graph: FuncGraph, roots, cut=frozenset()):
    """`(tensor ids, op ids)`: what computing `roots` in `graph` reads, and the ops it runs;
    the ops producing tensors in `cut` (ids) are not followed."""
    live = {id(t) for t in roots}
    ops = set()
    for op in reversed(graph.operations):
        if any(id(t) in live and id(t) not in cut for t in op.outputs):
            ops.add(id(op))
            live.update(id(t) for t in op.inputs)
            live.update(id(t) for t in captured_tensors(op))
    return live, ops


def _closed(*graphs) -> bool:
    """Whether no op of `graphs` holds a sub-graph that captures a tensor."""
    return not any(True for g in graphs for op in g.operations for _ in captured_tensors(op))


def _hoistable(op) -> bool:
    prim = op.primitive
    if prim in HOIST_ALWAYS:
        return True
    if prim not in HOIST_STATIC or (prim is ew.pow_p and not dtypes.is_inexact(op.inputs[0].dtype)):
        return False
    return all(None not in t.shape for t in (*op.inputs, *op.outputs))


def _invariant(graph: FuncGraph, roots, sources: set, ops: set):
    """`(hoisted ops, frontier)`: the ops (of `ops`, ids) of `graph` computable from the
    tensors `sources` (ids) and constants alone that read a source (constants alone are
    folding's business), and those of their results the rest of the graph or `roots` read."""
    invariant, from_sources, hoisted = set(sources), set(sources), []
    for op in graph.operations:
        if id(op) not in ops:
            continue
        outs = [id(t) for t in op.outputs]
        if op.primitive is constant_p:
            invariant.update(outs)
        elif _hoistable(op) and all(id(t) in invariant for t in op.inputs):
            invariant.update(outs)
            if any(id(t) in from_sources for t in op.inputs):
                from_sources.update(outs)
                hoisted.append(op)
    # A broadcast no other moved op reads stays, reading its operand from before the loop:
    # in the loop a backend fuses it into its consumers; moved, it is a whole array to read.
    kept, read_by_kept = [], set()
    for op in reversed(hoisted):  # readers first
        if op.primitive is not shape_ops.broadcast_in_dim_p or any(
                id(t) in read_by_kept for t in op.outputs):
            kept.append(op)
            read_by_kept.update(id(t) for t in op.inputs)
    hoisted = kept[::-1]
    moved = {id(op) for op in hoisted}
    read = {id(t) for t in roots}
    for op in graph.operations:
        if id(op) in ops and id(op) not in moved:
            read.update(id(t) for t in op.inputs)
            read.update(id(t) for t in captured_tensors(op))
    frontier = [t for op in hoisted for t in op.outputs if id(t) in read]
    return hoisted, frontier


# -- building -----------------------------------------------------------------------------------


def _hoist(rw, graph: FuncGraph, outer: dict, frontier):
    """Copy into the target, in order, the invariant ops of `graph` that `frontier` needs
    (`outer` maps ids of `graph`'s const inputs to the target's operands); the target
    tensor of each frontier tensor, or None if a copy would not keep its types."""
    need, chosen = {id(t) for t in frontier}, []
    for op in reversed(graph.operations):
        if any(id(t) in need for t in op.outputs):
            chosen.append(op)
            need.update(id(t) for t in op.inputs)
    env = dict(outer)
    for op in reversed(chosen):
        ins = [env[id(t)] for t in op.inputs]
        types = op.primitive.infer([t.type for t in ins], op.attrs)
        if types != [t.type for t in op.outputs]:
            return None
        new = rw.target.add_operation(op.primitive, ins, dict(op.attrs), types, op.source)
        new.grad_override = op.grad_override
        for old, t in zip(op.outputs, new.outputs, strict=True):
            t.name = old.name
            env[id(old)] = t
    return [env[id(t)] for t in frontier]


def _group(values, stand_ins, reads):
    """The operands kept, as `(value, types, members)`: operand `i` (outer tensor
    `values[i]`, standing for `stand_ins[g][i]` in sub-graph `g`, or None there) is kept
    when a sub-graph reads it (`reads[g]`, ids); kept operands with the same value and the
    same input types in every sub-graph become one (`members` lists their indices)."""
    groups, index = [], {}
    for i, value in enumerate(values):
        ts = [s[i] for s in stand_ins]
        if not any(t is not None and id(t) in r for t, r in zip(ts, reads, strict=True)):
            continue
        types = tuple(value.type if t is None else t.type for t in ts)
        key = (id(value), types)
        if key in index:
            groups[index[key]][2].append(i)
        else:
            index[key] = len(groups)
            groups.append((value, types, [i]))
    return groups


def _params(groups, stand_ins, g: int):
    """Sub-graph `g`'s new inputs for `groups`: `(type, name, tensors they stand for)`."""
    params = []
    for _, types, members in groups:
        olds = [stand_ins[g][i] for i in members if stand_ins[g][i] is not None]
        params.append((types[g], olds[0].name if olds else None, olds))
    return params


def _rebuild(rw, graph: FuncGraph, params, ops: set, roots) -> FuncGraph:
    """A copy of closed `graph` with inputs `params` (`(type, name, tensors of graph they
    stand for)`), only the ops `ops` (ids) and outputs `roots`, rewritten by the pass."""
    new = FuncGraph(graph.name, outer=rw.target)
    env = {}
    for type_, name, olds in params:
        x = new.add_input(type_, name)
        for t in olds:
            env[id(t)] = x
    for op in graph.operations:
        if id(op) not in ops:
            continue
        copy = new.add_operation(op.primitive, [env[id(t)] for t in op.inputs],
                                 dict(op.attrs), [t.type for t in op.outputs], op.source)
        copy.grad_override = op.grad_override
        for old, t in zip(op.outputs, copy.outputs, strict=True):
            t.name = old.name
            env[id(old)] = t
    new.outputs = [env[id(t)] for t in roots]
    return rw.subgraph(new)


def _emit_like(rw, op, inputs, attrs, kept):
    """`op`'s primitive on `inputs` with `attrs` in the target; its results stand for
    `op`'s results `kept` (indices), whose names they take."""
    types = op.primitive.infer([t.type for t in inputs], attrs)
    new = rw.target.add_operation(op.primitive, inputs, attrs, types, op.source)
    new.grad_override = op.grad_override
    for j, t in zip(kept, new.outputs, strict=True):
        t.name = op.outputs[j].name
    return new.outputs


def _answer(rw, op, results):
    """`results` (None where unused) completed with placeholders (`Rewriter.zeros`)."""
    return [r if r is not None else rw.zeros(t.type, op.source)
            for r, t in zip(results, op.outputs, strict=True)]


# -- while ----------------------------------------------------------------------------------------


def _while(rw, op, ins, live):
    attrs = op.attrs
    k, history = attrs["num_consts"], bool(attrs.get("keep_history"))
    cond, body = attrs["cond_graph"], attrs["body_graph"]
    m = len(ins) - k
    used = [id(t) in live for t in op.outputs]
    if not any(used) or not _closed(cond, body):
        return None  # a dead loop is swept
    split = _split_accumulators(rw, op, ins, used)
    if split is not None:
        return split
    final_used = used[:m]
    hist_used = used[m + 1:] if history else [False] * m
    # carries the body passes through become consts (their final value is the initial one)
    fixed = [j for j in range(m) if body.outputs[j] is body.inputs[k + j] and not hist_used[j]
             and (not final_used[j] or ins[k + j].type == op.outputs[j].type)]
    kept = _kept_carries(cond, body, k, fixed, [f or h for f, h in zip(final_used, hist_used)])
    history_kept = history and (used[m] or any(hist_used[j] for j in kept))
    graphs = (cond, body)
    roots = (list(cond.outputs), [body.outputs[j] for j in kept])
    values, stand_ins, cuts = _hoist_invariants(rw, graphs, roots, ins,
                                                list(range(k)) + [k + j for j in fixed])
    reads = [_reads(g, r, cut) for g, r, cut in zip(graphs, roots, cuts, strict=True)]
    groups = _group(values, stand_ins, [r[0] for r in reads])
    if len(kept) == m and not any(cuts) and len(groups) == k and history_kept == history:
        return None

    new_attrs = dict(attrs, num_consts=len(groups))
    if history and not history_kept:
        del new_attrs["keep_history"]
    for name, g, graph in (("cond_graph", 0, cond), ("body_graph", 1, body)):
        carries = [(graph.inputs[k + j].type, graph.inputs[k + j].name, [graph.inputs[k + j]])
                   for j in kept]
        new_attrs[name] = _rebuild(rw, graph, _params(groups, stand_ins, g) + carries,
                                   reads[g][1], roots[g])
    operands = [v for v, _, _ in groups] + [ins[k + j] for j in kept]
    positions = kept + ([m] + [m + 1 + j for j in kept] if history_kept else [])
    results: list = [None] * len(op.outputs)
    for j, t in zip(positions, _emit_like(rw, op, operands, new_attrs, positions),
                    strict=True):
        results[j] = t
    for j in fixed:
        if final_used[j]:
            results[j] = ins[k + j]
    return _answer(rw, op, results)


def _kept_carries(cond, body, k: int, fixed, read_after) -> list:
    """The carries (indices) a loop must keep: those read after it (`read_after[j]`: the
    final value or history), by its condition, or by the body for a kept carry; not the
    `fixed` ones, which become consts."""
    m = len(read_after)
    kept = {j for j in range(m) if j not in fixed and read_after[j]}
    cond_reads = _reads(cond, cond.outputs)[0]
    while True:
        body_reads = _reads(body, [body.outputs[j] for j in sorted(kept)])[0]
        more = {j for j in range(m) if j not in fixed and j not in kept and (
            id(cond.inputs[k + j]) in cond_reads or id(body.inputs[k + j]) in body_reads)}
        if not more:
            return sorted(kept)
        kept |= more


def _hoist_invariants(rw, graphs, roots, ins, sources):
    """Move the invariant ops of each of a loop's sub-graphs (`graphs`, computing `roots`)
    before it. `sources` index the inputs that are consts (operands `ins[i]`). Returns the
    loop's const values (those of `sources`, then the moved results), the tensors standing
    for them in each sub-graph (None where absent), and each sub-graph's moved results
    (ids; the rest of it does not compute them)."""
    values = [ins[i] for i in sources]
    stand_ins = [[g.inputs[i] for i in sources] for g in graphs]
    cuts = []
    for g, (graph, out) in enumerate(zip(graphs, roots, strict=True)):
        same = {id(graph.inputs[i]) for i in sources if graph.inputs[i].type == ins[i].type}
        hoisted, frontier = _invariant(graph, out, same, _reads(graph, out)[1])
        outer = _hoist(rw, graph, {id(graph.inputs[i]): ins[i] for i in sources},
                       frontier) if frontier else None
        if outer is None:  # nothing to move (or a copy would not keep its types)
            cuts.append(frozenset())
            continue
        cuts.append(frozenset(id(t) for h in hoisted for t in h.outputs))
        values += outer
        for other in range(len(graphs)):
            stand_ins[other] += frontier if other == g else [None] * len(frontier)
    return values, stand_ins, cuts


def _split_accumulators(rw, op, ins, used):
    """`op` with each padded block of its accumulators' updates summed in a carry of its
    own (see the module's docstring), or None when no accumulator has such a block."""
    attrs = op.attrs
    k, history = attrs["num_consts"], bool(attrs.get("keep_history"))
    cond, body = attrs["cond_graph"], attrs["body_graph"]
    m = len(ins) - k
    uses = use_counts(body)
    cond_reads = _reads(cond, cond.outputs)[0]
    plans = {}  # carry -> (other terms, {region: padded terms})
    for j in range(m):
        x, y = body.inputs[k + j], body.outputs[j]
        if (history and used[m + 1 + j]) or id(cond.inputs[k + j]) in cond_reads or \
                uses.get(id(x)) != 1 or y.type != x.type:
            continue
        terms = _sum_terms(y, uses, True)
        if sum(t is x for t in terms) != 1:
            continue
        rest, regions = [], {}
        for t in terms:
            if t is x:
                continue
            cfg = _padded_block(t)
            if cfg is None:
                rest.append(t)
            else:
                regions.setdefault((cfg, t.op.inputs[0].type), []).append(t.op.inputs[0])
        if regions:
            plans[j] = (rest, regions)
    if not plans:
        return None
    blocks = [(j, cfg, type_, parts) for j, (_, regions) in plans.items()
              for (cfg, type_), parts in regions.items()]
    # the sums of blocks of one type and number of terms are one stacked carry (an LSTM's
    # 32 weight rows: one carry, not 32 for a backend to pass and copy at every step)
    stacks = packs([type_ for _, _, type_, _ in blocks], [len(parts) for *_, parts in blocks])
    types = [packed_type(blocks[b[0]][2], len(b)) for b in stacks]
    read = [t for rest, _ in plans.values() for t in rest] + \
        [t for _, _, _, parts in blocks for t in parts]
    new_body = extended_graph(body, types, read, rw.target)
    n, outs = len(body.outputs), new_body.outputs
    copies = dict(zip(map(id, read), outs[n:]))
    ins_b, accs = new_body.inputs, new_body.inputs[len(body.inputs):]
    outs = outs[:n]
    with new_body.as_default():
        for j, (rest, _) in plans.items():
            outs[j] = _summed([ins_b[k + j]] + [copies[id(t)] for t in rest])
        for acc, stack in zip(accs, stacks, strict=True):
            if len(stack) == 1:
                outs.append(_summed([acc] + [copies[id(t)] for t in blocks[stack[0]][3]]))
                continue
            # the blocks' i-th terms side by side: each block's sum in its order
            terms = zip(*[[copies[id(t)] for t in blocks[b][3]] for b in stack])
            outs.append(_summed([acc] + [shape_ops.stacked(ts) for ts in terms]))
    new_body.outputs = outs
    sweep(new_body)
    new_cond = extended_graph(cond, types, [], rw.target)
    zeros = [rw.zeros(type_, op.source) for type_ in types]
    new_attrs = dict(attrs, cond_graph=rw.subgraph(new_cond), body_graph=rw.subgraph(new_body))
    outs = rw.emit(while_p, [*ins, *zeros], new_attrs, op.source)
    results, stacked, count, histories, _ = while_results(outs, m, len(stacks))
    results += [count] + histories if history else []
    for old, t in zip(op.outputs, results, strict=True):
        t.name = old.name
    sums = [None] * len(blocks)
    for total, stack in zip(stacked, stacks, strict=True):
        for i, b in enumerate(stack):
            sums[b] = total if len(stack) == 1 else _row(rw, total, i, op.source)
    for i, (j, cfg, type_, _) in enumerate(blocks):
        zero = rw.constant(np.zeros((), type_.dtype), weak=type_.weak, source=op.source)
        block = rw.emit(shape_ops.pad_p, [sums[i], zero], {"padding_config": cfg},
                        op.source)[0]
        results[j] = rw.emit(ew.add_p, [results[j], block], {}, op.source)[0]
    return results


def _row(rw, stacked, i: int, source):
    """Row `i` of `stacked`, without its first axis."""
    shape = tuple(stacked.shape)
    row = rw.emit(shape_ops.slice_p, [stacked], {
        "start_indices": (i,) + (0,) * (len(shape) - 1),
        "limit_indices": (i + 1,) + shape[1:], "strides": (1,) * len(shape)}, source)[0]
    return rw.emit(shape_ops.reshape_p, [row], {"new_sizes": shape[1:]}, source)[0]


def _sum_terms(t, uses, root=False) -> list:
    """The terms of the tree of `add`s computing `t` (an inner sum read elsewhere, or of
    another type, is a term)."""
    op = t.op
    if op is None or op.primitive is not ew.add_p or not (root or uses.get(id(t)) == 1) or \
            any(i.type != t.type for i in op.inputs):
        return [t]
    return [u for i in op.inputs for u in _sum_terms(i, uses)]


def _padded_block(t):
    """The padding config when `t` is a block padded with zeros (no interior padding,
    known shapes), else None."""
    cfg = zero_padding(t)
    return cfg if cfg is not None and all(i == 0 for _, _, i in cfg) else None


def _summed(terms):
    total = terms[0]
    for t in terms[1:]:
        total = ew.add_p.bind(total, t)
    return total


# -- cond -----------------------------------------------------------------------------------------


def _passed_through(graph: FuncGraph, j: int):
    """The input index output `j` of `graph` returns unchanged, or None."""
    t = graph.outputs[j]
    i = t.index
    return i if t.op is None and 0 <= i < len(graph.inputs) and graph.inputs[i] is t else None


def _cond(rw, op, ins, live):
    pred, args = ins[0], list(ins[1:])
    branches = op.attrs["branches"]
    if pred.op is not None and pred.op.primitive is constant_p:
        chosen = branches[int(bool(pred.op.attrs["value"].value))]
        env = {id(t): a for t, a in zip(chosen.inputs, args, strict=True)}
        return Rewriter(chosen, rw.make_rule, parent=rw, target=rw.target, env=env).run()
    used = [id(t) in live for t in op.outputs]
    if not any(used) or not _closed(*branches):
        return None
    results: list = [None] * len(op.outputs)
    for j, t in enumerate(op.outputs):
        i = _passed_through(branches[0], j)
        if used[j] and i is not None and i == _passed_through(branches[1], j) and \
                args[i].type == t.type:
            results[j] = args[i]
    kept = [j for j, u in enumerate(used) if u and results[j] is None]
    roots = [[g.outputs[j] for j in kept] for g in branches]
    reads = [_reads(g, r) for g, r in zip(branches, roots, strict=True)]
    stand_ins = [list(g.inputs) for g in branches]
    groups = _group(args, stand_ins, [r[0] for r in reads])
    if len(kept) == len(op.outputs) and len(groups) == len(args):
        return None
    if kept:
        new = tuple(_rebuild(rw, g, _params(groups, stand_ins, b), reads[b][1], roots[b])
                    for b, g in enumerate(branches))
        outs = _emit_like(rw, op, [pred, *[v for v, _, _ in groups]],
                          dict(op.attrs, branches=new), kept)
        for j, t in zip(kept, outs, strict=True):
            results[j] = t
    return _answer(rw, op, results)


_RULES = {while_p: _while, cond_p: _cond}
