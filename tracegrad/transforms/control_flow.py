"""`tg.cond`, `tg.while_loop`, `tg.fori_loop`, `tg.scan`: traced into `cond` / `while` ops
with sub-graphs, or, eagerly, run as Python control flow (a recording tape sees the ops of
the branch or iterations that ran).

Tracing a branch, condition or body traces the Python function once into a `FuncGraph`
nested in the graph being built; the values it closes over (tensors of enclosing traces,
Variables) become operands of the op and inputs of the sub-graph (closure conversion), so
the sub-graphs are closed and every rule sees all data flow through operands.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tracegrad import ops
from tracegrad.core import dtypes, tree
from tracegrad.core.ir import FuncGraph, GraphTensor, Tensor
from tracegrad.core.op import constant_p
from tracegrad.core.shapes import shape_str
from tracegrad.core.state import state
from tracegrad.core.types import TensorType
from tracegrad.core.variables import Variable
from tracegrad.errors import ArgumentTypeError, DTypeError, InvalidArgumentError, ShapeError
from tracegrad.ops import control_flow, indexing, shape_ops
from tracegrad.ops import elementwise as ew
from tracegrad.ops._batching import dim_operands
from tracegrad.ops.control_flow import cond_p, while_p
from tracegrad.passes import inline_graph, run_pass
from tracegrad.passes._rewrite import extended_graph
from tracegrad.transforms.backprop import backprop

__all__ = ["cond", "while_loop", "fori_loop", "scan"]


# -- tracing sub-graphs ------------------------------------------------------------------------


def _trace(fn: Callable, arg_types: list, arg_def, name: str):
    """`fn` traced into a graph nested in the current one, with inputs of `arg_types`
    (structured by `arg_def`); returns the graph (outputs set) and the output structure."""
    graph = FuncGraph(name, outer=state.graph)
    with graph.as_default():
        placeholders = [graph.add_input(t) for t in arg_types]
        result = fn(*tree.unflatten(arg_def, placeholders))
        leaves, out_def = tree.flatten(result)
        graph.outputs = [graph.to_tensor(y) for y in leaves]
    return graph, out_def


def _close(graphs: list) -> list:
    """Turn the captures of `graphs` into inputs appended after their own (one for every
    value any of them captures, in one order); returns the captured external values."""
    externals, seen = [], {}
    for g in graphs:
        for external, _ in g.captures:
            if id(external) not in seen:
                seen[id(external)] = len(externals)
                externals.append(external)
    for g in graphs:
        mine = {id(e): p for e, p in g.captures}
        g.captures = []
        g._capture_map = {}
        for external in externals:
            p = mine.get(id(external))
            if p is None:
                g.add_input(_type_of(external))
            else:
                p.index = len(g.inputs)
                g.inputs.append(p)
    return externals


def _type_of(value) -> TensorType:
    if isinstance(value, Variable):
        return TensorType(value.shape, value.dtype)
    return value.type


def _operand(value):
    return state.graph.to_tensor(value)


def _structure_error(what: str, got: str, got_def, want: str, want_def) -> ArgumentTypeError:
    return ArgumentTypeError(
        f"{what}: {got} must have the structure of {want}; {want} is "
        f"{tree.treedef_str(want_def)}, {got} is {tree.treedef_str(got_def)}")


def _mismatch(what: str, got: str, got_def, got_types, want: str, want_def, want_types):
    """The error for outputs `got` (a treedef and types) that should match `want`: an
    ArgumentTypeError naming both structures when they differ, else a ShapeError naming the
    first leaf of another shape, else a DTypeError naming the first of another dtype."""
    if not tree.same_structure(got_def, want_def) or len(got_types) != len(want_types):
        return _structure_error(what, got, got_def, want, want_def)
    paths = tree.leaf_paths(want_def)
    pairs = list(zip(paths, got_types, want_types, strict=True))
    for path, g, w in pairs:
        if g.shape != w.shape:
            return ShapeError(f"{what}: {got}{path} has shape {shape_str(g.shape)} where "
                              f"{want}{path} has {shape_str(w.shape)} ({g} against {w})")
    for path, g, w in pairs:
        if g.dtype != w.dtype:
            return DTypeError(f"{what}: {got}{path} has dtype {g.dtype.name} where {want}{path} "
                              f"has {w.dtype.name} ({g} against {w}); cast one with .astype")
    raise AssertionError("no mismatch")


def _predicate(what: str, pred):
    p = _operand(pred)
    if p.shape != ():
        raise ShapeError(f"{what}: the predicate must be a scalar, got {p.type}")
    if p.dtype != dtypes.bool_:
        if not (dtypes.is_int(p.dtype) or dtypes.is_inexact(p.dtype)):
            raise DTypeError(f"{what}: the predicate must be bool or numeric, got {p.type}")
        p = ops.ne(p, ops.zeros_like(p))
    return p


# Ops a loop step's gradient computes again from the step's inputs: cheap arithmetic, shape
# and index ops. The results of the others (transcendentals, divisions, reductions, linear
# algebra) that the gradient reads are stored by the forward loop
# (`vjp_graph_with_residuals`), as JAX's scan saves its linearization's residuals.
RECOMPUTED = frozenset(ops.COMPARISONS | {
    ew.add_p, ew.sub_p, ew.mul_p, ew.neg_p, ew.abs_p, ew.sign_p, ew.max_p, ew.min_p,
    ew.select_p, ew.convert_element_type_p, ew.stop_gradient_p, ew.not_p, ew.and_p, ew.or_p,
    ew.integer_pow_p, ew.real_p, ew.imag_p, ew.conj_p, ew.complex_p, constant_p,
    shape_ops.broadcast_in_dim_p, shape_ops.reshape_p, shape_ops.transpose_p,
    shape_ops.slice_p, shape_ops.rev_p, shape_ops.pad_p, shape_ops.concatenate_p,
    shape_ops.iota_p, shape_ops.dim_size_p, indexing.gather_p,
})


def vjp_graph(graph: FuncGraph, outputs_known: bool = False) -> FuncGraph:
    """The gradient graph of closed `graph`: inputs `graph`'s, then one cotangent per float
    output; outputs the gradient of each float input (zeros where unconnected).

    `outputs_known=True`: then one more input per float output, its value (a loop's next
    carry, kept in its history), read wherever the gradient needs that output instead of
    computing it again."""
    return _vjp(graph, outputs_known, None)[0]


def vjp_graph_with_residuals(graph: FuncGraph, residuals_from) -> tuple[FuncGraph, list]:
    """`(vjp_graph(graph, outputs_known=True), stored)`, `stored` the tensors of `graph`
    (results of ops not in `RECOMPUTED`, of known shape, depending on its inputs
    `residuals_from`, a loop's carry) whose values the gradient reads from one more input
    each, after the others, instead of computing them again."""
    return _vjp(graph, True, residuals_from)


def _vjp(graph: FuncGraph, outputs_known: bool, residuals_from) -> tuple[FuncGraph, list]:
    g = FuncGraph(f"{graph.name}_grad", outer=state.graph)
    with g.as_default():
        ins = [g.add_input(t.type, t.name) for t in graph.inputs]
        outs, env = inline_graph(graph, g, ins, with_env=True)
        # the copies of graph's ops (a value inline_graph embeds is not one), and the
        # result of graph that each copy stands for
        copied = {id(env[id(op.outputs[0])].op): op.outputs[0] for op in graph.operations
                  if op.outputs and env[id(op.outputs[0])].op is not None}
        forward = [op for op in g.operations if id(op) in copied]
        ys = [y for y in outs if dtypes.is_differentiable(y.dtype)]
        cts = [g.add_input(y.type.strong(), f"ct{k}") for k, y in enumerate(ys)]
        xs = [x for x in ins if dtypes.is_differentiable(x.dtype)]
        before = len(g.operations)
        g.outputs = backprop(list(g.operations), ys, xs, cts, unconnected_gradients="zero")
        if not outputs_known:
            return g, []
        known = {}
        for k, y in enumerate(ys):
            known_y = g.add_input(y.type, f"out{k}")
            if y.op is not None and len(y.op.outputs) == 1 and id(y.op) not in known:
                known[id(y.op)] = known_y
        chosen = [] if residuals_from is None else _residuals(
            g, forward, g.operations[before:], [ins[i] for i in residuals_from], known)
        for k, op in enumerate(chosen):
            known[id(op)] = g.add_input(op.outputs[0].type, f"res{k}")
    g = run_pass(g, lambda rw: lambda rw, op, ins: (
        [rw.env[id(known[id(op)])]] if id(op) in known else None))[0]
    return g, [copied[id(op)] for op in chosen]


def _residuals(g: FuncGraph, forward: list, backward: list, varying: list,
               known: dict) -> list:
    """The ops of `forward` (copies of the forward ops in gradient graph `g`, whose
    `backward` ops follow) whose results the gradient reads (directly or through
    `RECOMPUTED` ops) that depend on a tensor of `varying`, are not `known`, have one
    result of known shape and are not `RECOMPUTED`."""
    depends = {id(x) for x in varying}
    for op in forward:
        if any(id(t) in depends for t in op.inputs):
            depends.update(id(t) for t in op.outputs)
    need = {id(t) for t in g.outputs}
    for op in backward:
        need.update(id(t) for t in op.inputs)
    chosen = []
    for op in reversed(forward):
        if id(op) in known or not any(id(t) in need for t in op.outputs):
            continue
        if op.primitive not in RECOMPUTED and len(op.outputs) == 1 and \
                id(op.outputs[0]) in depends and None not in op.outputs[0].shape:
            chosen.append(op)
        else:
            need.update(id(t) for t in op.inputs)
    return chosen[::-1]


def build_graph(name: str, types: list, fn: Callable) -> FuncGraph:
    """`fn(*inputs)` (a tensor or a list of them) traced into a new graph with inputs of
    `types`, nested in the current one."""
    g = FuncGraph(name, outer=state.graph)
    with g.as_default():
        out = fn(*[g.add_input(t) for t in types])
        g.outputs = [g.to_tensor(y) for y in (out if isinstance(out, (list, tuple)) else [out])]
    return g


control_flow.set_vjp_graph(vjp_graph)
control_flow.set_vjp_graph_with_residuals(vjp_graph_with_residuals)
control_flow.set_extended_graph(
    lambda graph, types, outputs: extended_graph(graph, types, outputs, state.graph))
control_flow.set_build_graph(build_graph)
control_flow.set_inline_graph(lambda graph, values: inline_graph(graph, state.graph, values))


# -- cond --------------------------------------------------------------------------------------


def cond(pred, true_fn: Callable, false_fn: Callable, operands=()):
    """`true_fn(*operands)` if `pred` else `false_fn(*operands)`.

    Both functions must return the same structure of the same shapes and dtypes (a weak
    Python scalar takes the other branch's dtype). Traced, both are traced and the result
    is one `cond` op that runs only the chosen branch; eagerly, `pred` is read and only the
    chosen function runs. Differentiable (each branch's gradient, zeros for what a branch
    does not use) and vectorizable (a batched predicate selects between both branches).

    >>> tg.cond(x > 0, lambda v: v * 2.0, lambda v: -v, operands=(x,))
    """
    operands = tuple(operands) if isinstance(operands, (tuple, list)) else (operands,)
    if state.graph is None or not isinstance(pred, (GraphTensor, Variable)):
        # a predicate known now (eagerly, or a Python / NumPy value while tracing): only the
        # chosen function runs or is traced
        return true_fn(*operands) if bool(pred) else false_fn(*operands)
    p = _predicate("tg.cond", pred)
    leaves, arg_def = tree.flatten(operands)
    args = [_operand(x) for x in leaves]
    types = [a.type for a in args]
    true_graph, true_def = _trace(true_fn, types, arg_def, "true_fn")
    false_graph, false_def = _trace(false_fn, types, arg_def, "false_fn")
    if not tree.same_structure(true_def, false_def) or len(true_graph.outputs) != len(
            false_graph.outputs):
        raise _cond_mismatch(true_def, true_graph, false_def, false_graph)
    _reconcile(true_def, true_graph, false_def, false_graph)
    externals = _close([false_graph, true_graph])
    outs = cond_p.bind(p, *args, *[_operand(e) for e in externals],
                       branches=(false_graph, true_graph))
    return tree.unflatten(true_def, outs)


def _cond_mismatch(true_def, true_graph, false_def, false_graph):
    return _mismatch("tg.cond", "false_fn's result", false_def,
                     [t.type for t in false_graph.outputs], "true_fn's result", true_def,
                     [t.type for t in true_graph.outputs])


def _reconcile(true_def, true_graph, false_def, false_graph) -> None:
    """Make both branches give the same types: a weak result takes the other's dtype."""
    for k, (a, b) in enumerate(zip(true_graph.outputs, false_graph.outputs, strict=True)):
        if a.type == b.type:
            continue
        if a.shape != b.shape:
            raise _cond_mismatch(true_def, true_graph, false_def, false_graph)
        if a.dtype == b.dtype or a.type.weak or b.type.weak:
            dtype = b.dtype if a.type.weak and not b.type.weak else a.dtype
            for g in (true_graph, false_graph):
                t = g.outputs[k]
                if t.type != TensorType(t.shape, dtype):
                    with g.as_default():
                        g.outputs[k] = ops.convert_element_type(t, new_dtype=dtype)
            continue
        raise _cond_mismatch(true_def, true_graph, false_def, false_graph)


# -- while_loop, fori_loop, scan -----------------------------------------------------------


def while_loop(cond_fn: Callable, body_fn: Callable, loop_vars, maximum_iterations=None):
    """`loop_vars = body_fn(*loop_vars)` while `cond_fn(*loop_vars)` (and fewer than
    `maximum_iterations` iterations ran); returns the final `loop_vars` (a tuple or list,
    as given). `body_fn` returns a structure like `loop_vars`, of the same shapes and
    dtypes (weak Python scalars take the carry's dtype).

    Traced, one `while` op whose condition and body are traced once; eagerly, a Python loop.

    >>> tg.while_loop(lambda i, s: i < 10, lambda i, s: (i + 1, s * 2.0), (0, 1.0))
    """
    if not isinstance(loop_vars, (tuple, list)):
        raise ArgumentTypeError(f"tg.while_loop: loop_vars must be a tuple or list, got "
                        f"{type(loop_vars).__name__}")
    if maximum_iterations is not None and (
            not isinstance(maximum_iterations, (int, np.integer)) or maximum_iterations < 0):
        raise InvalidArgumentError(f"tg.while_loop: maximum_iterations must be None or an int >= 0, "
                         f"got {maximum_iterations!r}")
    if len(loop_vars) == 1:  # a body of one loop variable may return it bare
        inner = body_fn

        def body_fn(*v):
            out = inner(*v)
            return out if isinstance(out, (tuple, list)) else type(loop_vars)([out])

    if state.graph is None:
        values, i = loop_vars, 0
        while (maximum_iterations is None or i < maximum_iterations) and bool(
                cond_fn(*values)):
            values = _restructured("tg.while_loop", "body_fn's result", body_fn(*values),
                                   "loop_vars", loop_vars)
            i += 1
        return values
    outs, var_def = _traced_while(cond_fn, body_fn, loop_vars, maximum_iterations)
    return tree.unflatten(var_def, outs[:tree.num_leaves(var_def)])


def _traced_while(cond_fn, body_fn, loop_vars, maximum_iterations, keep_history=False):
    """The `while` op of a traced `while_loop`: its results (flat) and the carry's structure."""
    leaves, var_def = tree.flatten(loop_vars)
    init = [_operand(x) for x in leaves]
    types = [t.type.strong() if t.type.weak and _concrete_weak(x) else t.type
             for t, x in zip(init, leaves, strict=True)]
    init = [ops.convert_element_type(t, new_dtype=ty.dtype) if t.type != ty else t
            for t, ty in zip(init, types, strict=True)]
    cond_graph, _ = _trace(lambda *v: _bool_result(cond_fn(*v)), types, var_def, "cond_fn")
    body_graph, body_def = _trace(body_fn, types, var_def, "body_fn")
    _check_body(body_graph, body_def, var_def, types)
    consts = _close([cond_graph, body_graph])
    for g in (cond_graph, body_graph):  # the consts come first: (*consts, *carry)
        n = len(g.inputs) - len(consts)
        g.inputs = g.inputs[n:] + g.inputs[:n]
        for k, t in enumerate(g.inputs):
            t.index = k
    outs = while_p.bind(*[_operand(c) for c in consts], *init, cond_graph=cond_graph,
                        body_graph=body_graph, num_consts=len(consts),
                        maximum_iterations=None if maximum_iterations is None
                        else int(maximum_iterations),
                        **({"keep_history": True} if keep_history else {}))
    return list(outs), var_def


def _concrete_weak(x) -> bool:
    return isinstance(x, (bool, int, float, complex)) and not isinstance(x, np.generic)


def _bool_result(value):
    return _predicate("tg.while_loop: cond_fn", value)


def _restructured(what: str, got: str, new, want: str, like):
    """`new` (`got`, run eagerly) in the structure of `like` (`want`): lists and tuples are
    alike; another structure is an ArgumentTypeError naming both."""
    (leaves, new_def), like_def = tree.flatten(new), tree.flatten(like)[1]
    if new_def == like_def:
        return new
    if not tree.same_structure(new_def, like_def):
        raise _structure_error(what, got, new_def, want, like_def)
    return tree.unflatten(like_def, leaves)


def _check_body(body_graph, body_def, var_def, types) -> None:
    """body_fn's outputs have the structure (lists and tuples alike), shapes and dtypes of
    the loop variables; a weakly typed output (a Python number) takes its variable's dtype."""
    got = [t.type for t in body_graph.outputs]
    fits = tree.same_structure(body_def, var_def) and len(got) == len(types) and all(
        t.shape == want.shape and (t.dtype == want.dtype or t.weak)
        for t, want in zip(got, types, strict=True))
    if not fits:
        raise _mismatch("tg.while_loop", "body_fn's result", body_def, got, "loop_vars",
                        var_def, types)
    for k, (t, want) in enumerate(zip(got, types, strict=True)):
        if t != want:
            with body_graph.as_default():
                body_graph.outputs[k] = ops.convert_element_type(
                    body_graph.outputs[k], new_dtype=want.dtype, weak=want.weak)


def fori_loop(lower, upper, body_fn: Callable, init):
    """`carry = body_fn(i, carry)` for `i` in `range(lower, upper)`; returns the final
    carry (structured like `init`). Traced, a `while` op counting `i` (the bounds may be
    traced integers); eagerly with concrete bounds, a Python loop.

    >>> tg.fori_loop(0, 10, lambda i, x: x + 0.01 * tnp.sin(x), x0)
    """
    if state.graph is None:
        for name, b in (("lower", lower), ("upper", upper)):
            if np.shape(b) != () or np.asarray(b).dtype.kind not in "iu":
                raise DTypeError(f"tg.fori_loop: {name} must be an integer scalar, got "
                                 f"{b!r}")
        carry = init
        for i in range(int(lower), int(upper)):
            carry = body_fn(_index_value(i, lower, upper), carry)
        return carry

    def cond_fn(i, hi, carry):
        return i < hi

    def body(i, hi, carry):
        return i + 1, hi, body_fn(i, carry)

    lo, hi = _operand(lower), _operand(upper)
    for name, b in (("lower", lo), ("upper", hi)):
        if b.shape != () or not dtypes.is_int(b.dtype):
            raise DTypeError(f"tg.fori_loop: {name} must be an integer scalar, got {b.type}")
    strong = [b.dtype for b in (lo, hi) if not b.type.weak]  # a weak Python int adapts
    dtype = np.result_type(*strong) if strong else np.dtype(np.int64)
    lo = ops.convert_element_type(lo, new_dtype=dtype) if lo.type != TensorType((), dtype) \
        else lo
    hi = ops.convert_element_type(hi, new_dtype=dtype) if hi.type != TensorType((), dtype) \
        else hi
    _, _, carry = while_loop(cond_fn, body, (lo, hi, init))
    return carry


def _index_value(i, lower, upper):
    """The loop index given to an eager body: a NumPy int of the bounds' dtype."""
    dtype = np.result_type(*[np.asarray(b).dtype for b in (lower, upper)
                             if not isinstance(b, (bool, int))] or [np.int64])
    return dtype.type(i)


def scan(fn: Callable, init, xs, length=None, reverse=False):
    """`carry, y = fn(carry, x)` for each `x` along axis 0 of `xs` (a structure of arrays,
    or None with `length`); returns `(carry, ys)` with the `y`s stacked on a new axis 0.
    `reverse=True` walks `xs` from the end (the `y`s keep the order of the `x`s).

    >>> tg.scan(lambda c, x: (c + x, c * x), 0.0, np.arange(4.0))
    """
    x_leaves, x_def = tree.flatten(xs)
    n = _scan_length(x_leaves, length)
    graph = state.graph
    if graph is None and n:
        return _scan_eagerly(fn, init, x_leaves, x_def, n, reverse)
    y_def, y_types, alias = _y_types(fn, init, x_leaves, x_def, graph)
    if any(d is None for t in y_types for d in t.shape):
        return _scan_unknown_dims(fn, init, x_leaves, x_def, n, reverse, graph, y_def)
    if n == 0:  # no step runs: empty ys of the step's types
        ys = [np.zeros((0, *t.shape), t.dtype) for t in y_types]
        return init, tree.unflatten(y_def, ys if graph is None else
                                    [graph.constant(y) for y in ys])
    xs_t = [graph.to_tensor(x) for x in x_leaves]
    # the ys come from the loop's history of a carry holding the last y (no buffer copied
    # at every step): history[1:] then the final value, in iteration order; a y that is
    # one of the new carry's leaves (`return h, h`) is read from that carry's history
    try:
        carry, histories, finals = _scan_loop(fn, init, xs_t, x_def, n, reverse,
                                              _last_ys(graph, y_types, alias), alias)
    except _AliasChanged:  # fn traced otherwise the second time: a carry per y
        alias = [None] * len(y_types)
        carry, histories, finals = _scan_loop(fn, init, xs_t, x_def, n, reverse,
                                              _last_ys(graph, y_types, alias), alias)
    ys = []
    for h, y, t in zip(histories, finals, y_types, strict=True):
        h = ops.reshape(h, new_sizes=(n, *t.shape))  # the loop ran n times
        rest = ops.slice(h, start_indices=(1,) + (0,) * len(t.shape),
                         limit_indices=(n, *t.shape), strides=(1,) * (len(t.shape) + 1))
        stacked = ops.concatenate(rest, ops.reshape(y, new_sizes=(1, *t.shape)), dimension=0)
        ys.append(ops.rev(stacked, dimensions=(0,)) if reverse else stacked)
    return carry, tree.unflatten(y_def, ys)


class _AliasChanged(Exception):
    """A scan's step made a y one of its new carry's leaves in one trace, not in another."""


def _last_ys(graph, y_types, alias) -> list:
    """The initial values of the carries that hold the last y (one per y not aliased)."""
    return [ops.broadcast_in_dim(graph.constant(np.zeros((), t.dtype)), shape=t.shape,
                                 broadcast_dimensions=())
            for t, a in zip(y_types, alias, strict=True) if a is None]


def _scan_loop(fn, init, xs_t, x_def, n, reverse, last, alias=None):
    """The scan's `while` (with history) from `last`, the carries for the ys that are not
    leaves of the new carry (`alias[k]`: the carry leaf y `k` is, or None): the final
    carry, the ys' histories and final values."""
    def cond_fn(i, carry, y):
        return i < n

    def body(i, carry, y):
        k = (n - 1 - i) if reverse else i
        x = tree.unflatten(x_def, [ops.gather(x, k, axis=0) for x in xs_t])
        new, y = fn(carry, x)
        _check_scan_carry(carry, new)
        y_leaves = tree.flatten(y)[0]
        if alias is None:
            return i + 1, new, [_as_tensor(v) for v in y_leaves]
        new_leaves = tree.flatten(new)[0]
        if [_alias_of(v, new_leaves) for v in y_leaves] != alias:
            raise _AliasChanged
        return i + 1, new, [_as_tensor(v) for v, a in zip(y_leaves, alias) if a is None]

    outs, var_def = _traced_while(cond_fn, body, (0, init, last), n, keep_history=True)
    m = tree.num_leaves(var_def)
    carry = tree.unflatten(var_def, outs[:m])[1]
    if alias is None:
        k = len(last)
        return carry, outs[m + 1 + m - k:], outs[m - k:m]
    # outs: i, the carry's leaves, the last ys; the count; the histories in that order
    histories, finals, own = [], [], iter(range(m - len(last), m))
    for a in alias:
        j = 1 + a if a is not None else next(own)
        histories.append(outs[m + 1 + j])
        finals.append(outs[j])
    return carry, histories, finals


def _alias_of(v, new_leaves):
    """The index of the new carry's leaf that `v` is (the same object), or None."""
    return next((j for j, c in enumerate(new_leaves) if c is v), None)


def _scan_unknown_dims(fn, init, x_leaves, x_def, n, reverse, graph, y_def):
    """A traced scan whose ys have dims unknown when traced (from a TensorSpec's None): one
    step traced in the outer graph gives their run-time sizes (its ops are only read for
    their shapes), and the ys are stacked from the history with those sizes."""
    xs_t = [graph.to_tensor(x) for x in x_leaves]
    if n:
        x0 = [ops.gather(x, 0, axis=0) for x in xs_t]
    else:  # no row to read: zeros of a row's shape
        x0 = [ops.broadcast_in_dim(graph.constant(np.zeros((), x.dtype)), *dim_operands(
            x, range(1, x.ndim)), shape=x.shape[1:], broadcast_dimensions=()) for x in xs_t]
    y0 = [_as_tensor(v) for v in tree.flatten(fn(init, tree.unflatten(x_def, x0))[1])[0]]
    if n == 0:
        return init, tree.unflatten(y_def, [_stacked(ops.zeros_like(y), 0) for y in y0])
    carry, histories, finals = _scan_loop(fn, init, xs_t, x_def, n, reverse,
                                          [ops.zeros_like(y) for y in y0])
    ys = []
    for h, y in zip(histories, finals, strict=True):
        rest = ops.slice(h, start_indices=(1,) + (0,) * y.ndim, limit_indices=h.shape,
                         strides=(1,) * h.ndim)
        stacked = ops.concatenate(rest, _stacked(y, 1), dimension=0)
        ys.append(ops.rev(stacked, dimensions=(0,)) if reverse else stacked)
    return carry, tree.unflatten(y_def, ys)


def _stacked(y, count):
    """`y` broadcast along a new leading axis of `count` (known) rows."""
    return ops.broadcast_in_dim(y, *dim_operands(y), shape=(count, *y.shape),
                                broadcast_dimensions=tuple(range(1, y.ndim + 1)))


def _y_types(fn, init, x_leaves, x_def, graph):
    """The structure and types of `fn`'s `y`, and which leaves of `y` are leaves of the new
    carry: `fn` traced once on one slice, aside (its ops are not kept)."""
    probe = FuncGraph("scan_probe", outer=graph)
    source = graph if graph is not None else probe  # eagerly: values become its constants
    c_leaves, c_def = tree.flatten(init)
    with probe.as_default():
        c0 = [probe.add_input(source.to_tensor(c).type) for c in c_leaves]
        x0 = []
        for x in x_leaves:
            t = source.to_tensor(x).type
            x0.append(probe.add_input(TensorType(t.shape[1:], t.dtype)))
        new, y = fn(tree.unflatten(c_def, c0), tree.unflatten(x_def, x0))
        y_leaves, y_def = tree.flatten(y)
        new_leaves = tree.flatten(new)[0]
        return (y_def, [probe.to_tensor(v).type for v in y_leaves],
                [_alias_of(v, new_leaves) for v in y_leaves])


def _check_scan_carry(carry, new) -> None:
    """`fn`'s new carry has the structure, shapes and dtypes of `carry` (a weakly typed
    leaf, such as a Python number, takes the carry's dtype)."""
    (leaves, c_def), (got, n_def) = tree.flatten(carry), tree.flatten(new)
    want = [_as_tensor(v).type for v in leaves]
    have = [_as_tensor(v).type for v in got]
    if tree.same_structure(c_def, n_def) and len(have) == len(want) and all(
            h.shape == w.shape and (h.dtype == w.dtype or h.weak)
            for h, w in zip(have, want, strict=True)):
        return
    raise _mismatch("tg.scan", "fn's new carry", n_def, have, "init", c_def, want)


def _as_tensor(v):
    return state.graph.to_tensor(v)


def _scan_length(x_leaves, length) -> int:
    sizes = {x.shape[0] for x in x_leaves if np.ndim(x) and x.shape[0] is not None}
    if length is not None:
        sizes.add(int(length))
    if len(sizes) != 1:
        raise InvalidArgumentError(f"tg.scan: xs have leading sizes {sorted(sizes)} and length is "
                         f"{length!r}; they must agree on one known size")
    return sizes.pop()


def _scan_eagerly(fn, init, x_leaves, x_def, n, reverse):
    carry, ys = init, []
    order = range(n - 1, -1, -1) if reverse else range(n)
    for k in order:
        x = tree.unflatten(x_def, [x[k] for x in x_leaves])
        new, y = fn(carry, x)
        carry = _restructured("tg.scan", "fn's new carry", new, "init", carry)
        ys.append(y)
    if reverse:
        ys.reverse()
    leaves = [tree.flatten(y)[0] for y in ys]
    y_def = tree.flatten(ys[0])[1]
    stacked = [ops.concatenate(*[ops.reshape(_eager(v), new_sizes=(1, *np.shape(v)))
                                 for v in column], dimension=0)
               for column in zip(*leaves, strict=True)]
    return carry, tree.unflatten(y_def, stacked)


def _eager(v):
    return v if isinstance(v, (Tensor, np.ndarray)) else np.asarray(v)
