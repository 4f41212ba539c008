"""Control-flow primitives whose attributes hold sub-graphs: `cond` and `while`.

Sub-graphs are closed: every value a branch or a loop reads from outside is an operand of
the op (`tg.cond` / `tg.while_loop` turn closures into operands when they trace), so rules
see all data flow through operands.

- `cond(pred, *args, branches=(false_graph, true_graph))`: the outputs of
  `branches[int(pred)]` applied to `args`; both branches take `args`' types and give the
  same result types.
- `while(*consts, *init, cond_graph=c, body_graph=b, num_consts=k, maximum_iterations=m)`:
  `carry = init; while c(*consts, *carry) and (m is None or i < m): carry = b(*consts,
  *carry)`; the final carry. `c` returns a bool scalar, `b` the carry's types.

The reference `impl`s run sub-graphs with the interpreter, and the gradient rules build
sub-graph gradients with the reverse-mode routine, that the transforms layer installs
(`install`), so that ops need not import it.
"""

from __future__ import annotations

import numpy as np

from tracegrad.core import dtypes
from tracegrad.core.hooks import Hook
from tracegrad.core.op import Primitive, no_dims
from tracegrad.core.types import TensorType
from tracegrad.errors import DTypeError, InvalidArgumentError, ShapeError
from tracegrad.ops import elementwise as ew
from tracegrad.ops._batching import bdim_at, moveaxis
from tracegrad.ops.reductions import reduce_sum_p
from tracegrad.ops.indexing import gather_p
from tracegrad.ops.shape_ops import (
    broadcast_in_dim_p,
    broadcast_like,
    is_zeros,
    reshape_p,
    scalar_like,
    slice_along,
    stacked,
    zeros_like,
)

# The transforms the rules need (ops import no transforms; these install them when imported).
_run = Hook("the reference interpreter of control-flow sub-graphs",
            "tracegrad.transforms.evaluate")
_vjp_graph = Hook("the vjp of control-flow sub-graphs", "tracegrad.transforms.control_flow")
_vjp_residuals = Hook("the vjp of loop bodies with residuals",
                      "tracegrad.transforms.control_flow")
_inline = Hook("the inliner of control-flow sub-graphs", "tracegrad.transforms.control_flow")
_build_graph = Hook("the tracer of control-flow sub-graphs", "tracegrad.transforms.control_flow")
_extended = Hook("the extender of control-flow sub-graphs", "tracegrad.transforms.control_flow")


def set_run_graph(run) -> None:
    """Install `run(graph, arrays) -> arrays`, the reference interpreter (eager cond/while)."""
    _run.install(run)


def set_vjp_graph(vjp_graph) -> None:
    """Install `vjp_graph(graph, outputs_known=False) -> graph` (inputs: the graph's, then one
    cotangent per float output; outputs: one gradient per float input, zeros where
    unconnected; `outputs_known`: then the outputs' values as inputs)."""
    _vjp_graph.install(vjp_graph)


def set_vjp_graph_with_residuals(vjp) -> None:
    """Install `vjp(graph, residuals_from) -> (graph, stored)`: `vjp_graph(graph,
    outputs_known=True)` that also reads `stored`, tensors of `graph` depending on the
    inputs `residuals_from`, from inputs after the others."""
    _vjp_residuals.install(vjp)


def set_extended_graph(extended) -> None:
    """Install `extended(graph, extra_input_types, extra_outputs) -> graph`: a copy of
    `graph` with unread inputs and more outputs (its tensors) appended."""
    _extended.install(extended)


def set_inline_graph(inline) -> None:
    """Install `inline(graph, tensors) -> tensors`: a closed graph's ops copied into the graph
    being built."""
    _inline.install(inline)


def set_build_graph(build_graph) -> None:
    """Install `build_graph(name, input_types, fn) -> graph`: `fn` traced into a new closed
    graph nested in the current one."""
    _build_graph.install(build_graph)


def run_graph(graph, arrays, fresh: bool = True) -> list:
    """`graph`'s outputs on `arrays` by the reference interpreter; not `fresh`: an output
    may be one of `arrays` or a view of one."""
    return _run(graph, list(arrays), fresh)


def _fits(t: TensorType, want: TensorType) -> bool:
    return t.dtype == want.dtype and len(t.shape) == len(want.shape) and all(
        a is None or b is None or a == b for a, b in zip(t.shape, want.shape))


def _check_inputs(name: str, what: str, graph, types) -> None:
    params = graph.inputs
    if len(params) != len(types) or not all(
            _fits(t, p.type) for t, p in zip(types, params)):
        got = ", ".join(str(t) for t in types)
        want = ", ".join(str(p.type) for p in params)
        raise ShapeError(f"{name}: {what} takes ({want}) but is given ({got})")
    if graph.captures:
        raise InvalidArgumentError(f"{name}: {what} must read outer values through operands, "
                             "not captures")


def _check_pred(name: str, pred: TensorType) -> None:
    if pred.shape != () or pred.dtype != dtypes.bool_:
        raise DTypeError(f"{name}: the predicate must be a bool scalar, got {pred}")


# -- cond ------------------------------------------------------------------------------------

cond_p = Primitive("cond", multiple_results=True)


@cond_p.def_abstract_eval
def _cond_abstract_eval(pred, *args, branches):
    _check_pred("cond", pred)
    if len(branches) != 2:
        raise ShapeError(f"cond: needs two branches (false, true), got {len(branches)}")
    false_graph, true_graph = branches
    for what, g in (("the false branch", false_graph), ("the true branch", true_graph)):
        _check_inputs("cond", what, g, args)
    outs_f = [t.type for t in false_graph.outputs]
    outs_t = [t.type for t in true_graph.outputs]
    if outs_f != outs_t:
        raise ShapeError(
            "cond: the branches give different types: false "
            f"({', '.join(map(str, outs_f))}), true ({', '.join(map(str, outs_t))})")
    return outs_t


cond_p.def_dims(no_dims)  # its results come from its branches, not from its operands


@cond_p.def_impl
def _cond_impl(pred, *args, branches):
    return tuple(run_graph(branches[int(bool(pred))], args))


@cond_p.def_grad
def _cond_grad(op, *out_grads):
    # The seed's cond gradient: each branch's outputs differentiated w.r.t. its inputs
    # (zeros for inputs it does not use), chosen by the same predicate.
    pred, *args = op.inputs
    false_graph, true_graph = op.attrs["branches"]
    grads = [g for g, t in zip(out_grads, op.outputs, strict=True)
             if dtypes.is_differentiable(t.dtype)]
    if not grads:
        return [None] * len(op.inputs)
    branches = (_vjp_graph(false_graph), _vjp_graph(true_graph))
    outs = iter(cond_p.bind(pred, *args, *grads, branches=branches))
    return [None] + [next(outs) if dtypes.is_differentiable(a.dtype) else None for a in args]


@cond_p.def_batch
def _cond_batch(ctx, args, dims, *, branches):
    (pred, *xs), (pd, *xds) = args, dims
    if pd is not None:
        # a predicate per iteration: both branches run on the whole batch (each masked to
        # the lanes that take it), then a select
        like, like_dim = pred, pd
        pred = moveaxis(pred, pd, 0)
        outs = []
        for g, lanes in zip(branches, (ew.not_p.bind(pred), pred), strict=True):
            with ctx.masked(lanes):
                outs.append(ctx.run(g, xs, xds))
        result = []
        for (f, fd), (t, td) in zip(zip(*outs[0]), zip(*outs[1]), strict=True):
            f, t = bdim_at(f, fd, 0, like, like_dim), bdim_at(t, td, 0, like, like_dim)
            mask = broadcast_like(pred, t, (0,))
            result.append(ew.select_p.bind(mask, t, f))
        return result, [0] * len(result)
    xs = [moveaxis(x, d, 0) if d is not None else x for x, d in zip(xs, xds, strict=True)]
    xds = [None if d is None else 0 for d in xds]
    size = next(x.shape[0] for x, d in zip(xs, xds, strict=True) if d is not None)
    batched = tuple(ctx.vectorize_graph(g, xds, size) for g in branches)
    outs = cond_p.bind(pred, *xs, branches=batched)
    return list(outs), [0] * len(outs)


# -- while -----------------------------------------------------------------------------------

while_p = Primitive("while", multiple_results=True)


@while_p.def_abstract_eval
def _while_abstract_eval(*args, cond_graph, body_graph, num_consts, maximum_iterations=None,
                         keep_history=False):
    if not 0 <= num_consts <= len(args):
        raise ShapeError(f"while: num_consts={num_consts} for {len(args)} operands")
    carry = list(args[num_consts:])
    _check_inputs("while", "the condition", cond_graph, args)
    _check_inputs("while", "the body", body_graph, args)
    (c,) = cond_graph.outputs if len(cond_graph.outputs) == 1 else (None,)
    if c is None:
        raise ShapeError("while: the condition must give one bool scalar")
    _check_pred("while", c.type)
    outs = [t.type for t in body_graph.outputs]
    if len(outs) != len(carry) or not all(_fits(o, t) for o, t in zip(outs, carry)):
        raise ShapeError(
            "while: the body gives (" + ", ".join(map(str, outs)) + ") for a carry of ("
            + ", ".join(map(str, carry)) + ")")
    if maximum_iterations is not None and (
            not isinstance(maximum_iterations, int) or maximum_iterations < 0):
        raise ShapeError(f"while: maximum_iterations must be None or an int >= 0, got "
                         f"{maximum_iterations!r}")
    result = [TensorType(t.shape, t.dtype, o.weak and t.weak) for o, t in zip(outs, carry)]
    if keep_history:  # the iteration count, and each carry at the start of each iteration
        result += [TensorType((), dtypes.int64)]
        result += [TensorType((None, *t.shape), t.dtype, t.weak) for t in carry]
    return result


@while_p.def_dims
def _while_dims(op):
    """The final carry, and each carry's history (after its iteration axis), have the
    carry's shape."""
    ins, outs = op.inputs, op.outputs
    carry = ins[op.attrs["num_consts"]:]
    m = len(carry)
    for k, x in enumerate(carry):
        for i in range(len(x.shape)):
            yield x, i, outs[k], i
        if len(outs) > m:
            for i in range(len(x.shape)):
                yield x, i, outs[m + 1 + k], i + 1


@while_p.def_impl
def _while_impl(*args, cond_graph, body_graph, num_consts, maximum_iterations=None,
                keep_history=False):
    consts = [np.asarray(c) for c in args[:num_consts]]  # the body runs on arrays
    carry = [np.asarray(c) for c in args[num_consts:]]
    history: list = []
    i = 0
    while maximum_iterations is None or i < maximum_iterations:
        (go,) = run_graph(cond_graph, consts + carry, fresh=False)
        if not bool(go):
            break
        if keep_history:
            history.append(carry)
        carry = run_graph(body_graph, consts + carry, fresh=False)
        i += 1
    if not keep_history:
        return tuple(carry)
    return (*carry, np.asarray(i, np.int64), *stack_history(history, carry))


def while_results(outs, m: int, r: int = 0) -> tuple:
    """The results `outs` of a `while` whose carry is `m` carries then `r` more, as
    `(carries, more carries, count, histories, more histories)` (lists; the count None and
    the histories empty when the loop keeps no history)."""
    outs, n = list(outs), m + r
    if len(outs) == n:
        return outs[:m], outs[m:], None, [], []
    return outs[:m], outs[m:n], outs[n], outs[n + 1:n + 1 + m], outs[n + 1 + m:]


def stack_history(history: list, carry: list) -> list:
    """The carries recorded at each iteration, one `[n, ...]` array per carry."""
    if not history:
        return [np.zeros((0, *c.shape), c.dtype) for c in carry]
    return [np.stack(column) for column in zip(*history, strict=True)]


@while_p.def_grad
def _while_grad(op, *out_grads):
    # Reverse mode with a dynamic trip count: the loop is run again keeping each
    # iteration's carry (a growing history, as a tape would; a loop that kept it already
    # is not run again), then a second loop walks
    # the history backwards through the body's gradient graph, carrying the cotangents of
    # the carry and summing those of the consts.
    attrs = op.attrs
    k, m = attrs["num_consts"], len(op.outputs)
    ct_history = {}
    if attrs.get("keep_history"):  # the history's cotangents join the carry's on the way
        m = (m - 1) // 2
        ct_history = {i: g for i, g in enumerate(out_grads[m + 1:])
                      if g is not None and not is_zeros(g)}
    consts, init = list(op.inputs[:k]), list(op.inputs[k:])
    float_consts = [i for i, c in enumerate(consts) if dtypes.is_differentiable(c.dtype)]
    float_carry = [i for i, c in enumerate(init) if dtypes.is_differentiable(c.dtype)]
    if not float_carry:
        return [None] * len(op.inputs)
    # the body's gradient reads the carry after the step from the history (the next row,
    # the final carry after the last step) instead of computing it again, and the costly
    # values of the step (`stored`) from the histories of more carries the replay keeps
    vjp_body, stored = _vjp_residuals(attrs["body_graph"], range(k, k + m))
    # residuals of one type are one carry, stacked (fewer values for a backend to thread
    # through the loop: an LSTM's step stores tens of vectors of one size)
    res_packs = packs([t.type for t in stored])
    r = len(res_packs)
    if attrs.get("keep_history") and not r:  # the loop kept its history already
        replay = op.outputs
    else:  # with the residuals: cse runs this loop in place of the forward one
        cond, body = attrs["cond_graph"], attrs["body_graph"]
        types = [packed_type(stored[p[0]].type, len(p)) for p in res_packs]
        if r:
            cond = _extended(cond, types, [])
            longer = _extended(body, types, stored)
            body = _build_graph(body.name, [t.type for t in longer.inputs], lambda *v: _packed(
                run_inline(longer, v), len(longer.outputs) - len(stored), res_packs))
        replay = while_p.bind(*consts, *init, *[_zeros(stored[p[0]], p) for p in res_packs],
                              cond_graph=cond, body_graph=body, num_consts=k,
                              maximum_iterations=attrs.get("maximum_iterations"),
                              keep_history=True)
    _, res_finals, count, history, res_history = while_results(replay, m, r)
    cts = [out_grads[i] for i in float_carry]
    accs = [zeros_like(consts[i]) for i in float_consts]

    joined = [j for j, i in enumerate(float_carry) if i in ct_history]  # carry cts that join
    ct_history = [ct_history[float_carry[j]] for j in joined]
    finals = [replay[i] for i in float_carry] + res_finals
    history += res_history
    fixed = [*consts, *history, *ct_history, *finals, count]  # the backward loop's consts

    def back_cond(*v):
        step = v[len(fixed)]
        return ew.gt_p.bind(step, scalar_like(step, 0))

    def back_body(*v):
        cs, hist = list(v[:k]), list(v[k:k + len(history)])
        ct_hist = list(v[k + len(history):k + len(history) + len(ct_history)])
        final = list(v[len(fixed) - 1 - len(finals):len(fixed) - 1])
        n = v[len(fixed) - 1]
        step, rest = v[len(fixed)], list(v[len(fixed) + 1:])
        ct, acc = rest[:len(cts)], rest[len(cts):]
        step = ew.sub_p.bind(step, scalar_like(step, 1))
        carry_at = [gather_p.bind(h, step, axis=0) for h in hist[:m]]
        after = ew.add_p.bind(step, scalar_like(step, 1))
        row = ew.min_p.bind(after, ew.sub_p.bind(n, scalar_like(n, 1)))
        in_history = ew.lt_p.bind(after, n)
        nexts = [ew.select_p.bind(broadcast_like(in_history, f, ()),
                                  gather_p.bind(hist[i], row, axis=0), f)
                 for i, f in zip([*float_carry, *range(m, m + r)], final, strict=True)]
        n_carry = len(float_carry)
        nexts = nexts[:n_carry] + _unpacked(nexts[n_carry:], res_packs,
                                            [t.type for t in stored])
        grads = run_inline(vjp_body, cs + carry_at + ct + nexts)
        g_consts, g_carry = grads[:len(float_consts)], grads[len(float_consts):]
        for j, h in zip(joined, ct_hist, strict=True):
            g_carry[j] = ew.add_p.bind(g_carry[j], gather_p.bind(h, step, axis=0))
        return [step, *g_carry, *[ew.add_p.bind(a, g) for a, g in zip(acc, g_consts,
                                                                    strict=True)]]

    carry_types = [t.type for t in [count, *cts, *accs]]
    types = [c.type for c in fixed] + carry_types
    back = while_p.bind(*fixed, count, *cts, *accs,
                        cond_graph=_build_graph("while_grad_cond", types, back_cond),
                        body_graph=_build_graph("while_grad_body", types, back_body),
                        num_consts=len(fixed))
    g_init, g_consts = back[1:1 + len(cts)], back[1 + len(cts):]
    grads = [None] * len(op.inputs)
    for i, g in zip(float_consts, g_consts, strict=True):
        grads[i] = g
    for i, g in zip(float_carry, g_init, strict=True):
        grads[k + i] = g
    return grads


# The largest value (in elements) a loop's carry stacks with others of its type: a residual
# its gradient stores (`_while_grad`), a slice's gradient summed over the steps
# (passes/loops.py); beside a larger one's work a carry's cost is small
PACK_MAX_ELEMENTS = 1024


def packs(types: list, tags=None) -> list:
    """`types`' positions grouped by type (and by `tags[i]`, when given), in order of first
    appearance: each group of more than one (all dims known, at most `PACK_MAX_ELEMENTS`
    elements) is one stacked value, the others stay as they are."""
    groups: dict = {}
    for i, t in enumerate(types):
        alone = None in t.shape or int(np.prod(t.shape, dtype=np.int64)) > PACK_MAX_ELEMENTS
        key = ("alone", i) if alone else (t, None if tags is None else tags[i])
        groups.setdefault(key, []).append(i)
    return list(groups.values())


def packed_type(t: TensorType, n: int) -> TensorType:
    """The type of `n` values of type `t` stacked (`t` itself for one)."""
    return t if n == 1 else TensorType((n, *t.shape), t.dtype, t.weak)


def _zeros(x, pack: list):
    """Zeros like `x`, stacked `len(pack)` times if the pack has more than one value."""
    z = zeros_like(x)
    if len(pack) == 1:
        return z
    return broadcast_in_dim_p.bind(z, shape=(len(pack), *x.shape),
                                   broadcast_dimensions=tuple(range(1, len(x.shape) + 1)))


def _packed(values: list, start: int, packs: list) -> list:
    """`values[:start]`, then `values[start:]` stacked by `packs`."""
    rest = values[start:]
    out = list(values[:start])
    for p in packs:
        out.append(rest[p[0]] if len(p) == 1 else stacked([rest[i] for i in p]))
    return out


def _unpacked(values: list, packs: list, types: list) -> list:
    """The values stacked by `packs` (`_packed`), one per type of `types`."""
    out = [None] * len(types)
    for v, p in zip(values, packs, strict=True):
        if len(p) == 1:
            out[p[0]] = v
        else:
            for j, i in enumerate(p):
                out[i] = reshape_p.bind(slice_along(v, 0, j, j + 1),
                                        new_sizes=tuple(types[i].shape))
    return out


@while_p.def_batch
def _while_batch(ctx, args, dims, *, cond_graph, body_graph, num_consts,
                 maximum_iterations=None, keep_history=False):
    # Every carry batched on axis 0 (a carry may become batched in the body); the loop
    # runs while any lane's condition holds, and a lane whose condition fails keeps its
    # carry (the body's result is selected away). With the history kept, each lane also
    # counts its own iterations; the history, one entry per iteration of the whole batch,
    # is batched on axis 1 (a lane's first `count` entries are its own iterations).
    consts, carry = args[:num_consts], args[num_consts:]
    cdims = dims[:num_consts]
    like, like_dim = next((a, d) for a, d in zip(args, dims, strict=True) if d is not None)
    consts = [moveaxis(c, d, 0) if d is not None else c for c, d in zip(consts, cdims,
                                                                          strict=True)]
    cdims = [None if d is None else 0 for d in cdims]
    carry = [bdim_at(c, d, 0, like, like_dim)
             for c, d in zip(carry, dims[num_consts:], strict=True)]
    size = carry[0].shape[0] if carry else like.shape[like_dim]
    in_dims = cdims + [0] * len(carry)
    lane_cond = ctx.vectorize_graph(cond_graph, in_dims, size)  # -> bool[B]
    types = [t.type for t in lane_cond.inputs]
    m = len(carry)
    if keep_history:
        counts = bdim_at(scalar_like(like, 0, dtypes.int64), None, 0, like, like_dim)
        carry = carry + [counts]
        types = types + [counts.type]
    any_cond = _build_graph("cond_any", types, lambda *v: _any(run_inline(
        lane_cond, v[:len(v) - keep_history])[0]))
    masked = _build_graph("body_masked", types, lambda *v: _masked_step(
        ctx, lane_cond, body_graph, in_dims, v, num_consts, keep_history))
    outs = list(while_p.bind(*consts, *carry, cond_graph=any_cond, body_graph=masked,
                             num_consts=num_consts, maximum_iterations=maximum_iterations,
                             keep_history=keep_history))
    if not keep_history:
        return outs, [0] * len(outs)
    finals, counts = outs[:m], outs[m]
    histories = outs[m + 2:m + 2 + m]  # the counts' own history is not needed
    return [*finals, counts, *histories], [0] * m + [0] + [1] * m


def run_inline(graph, values) -> list:
    return _inline(graph, list(values))


def _any(lanes):
    """Whether any element of bool vector `lanes` is true (False for an empty batch)."""
    count = reduce_sum_p.bind(ew.convert_element_type_p.bind(lanes, new_dtype=dtypes.int64),
                              axes=(0,))
    return ew.gt_p.bind(count, ew.sub_p.bind(count, count))


def _masked_step(ctx, lane_cond, body_graph, in_dims, values, num_consts, counting=False):
    """One iteration of a batched loop: the body on every lane, kept where the condition
    holds (finished lanes keep their carry; their body values are masked out)."""
    values = list(values)
    counts = values.pop() if counting else None
    (active,) = run_inline(lane_cond, values)
    with ctx.masked(active, fresh=True):
        new, new_dims = ctx.run(body_graph, values, in_dims)
    new = [bdim_at(n, d, 0, active, 0) for n, d in zip(new, new_dims, strict=True)]
    old = values[num_consts:]
    out = [ew.select_p.bind(broadcast_like(active, n, (0,)), n, o)
           for n, o in zip(new, old, strict=True)]
    if counting:
        out.append(ew.add_p.bind(counts, ew.convert_element_type_p.bind(
            active, new_dtype=dtypes.int64)))
    return out
