"""Common-subexpression elimination: one op for each distinct computation.

Two ops compute the same thing when they apply the same primitive to the same operands
(in either order for a commutative primitive) with equal attributes and the same gradient
override. The later one is dropped and its uses read the earlier one's results. Equal
constants are merged the same way (a `Literal` attribute compares by value), and
sub-graphs (branches, loop bodies) by their text.

A `while` that another `while` on the same operands repeats with `keep_history=True` (the
replay a loop's gradient runs) keeps the history itself, and the replay reads its
results: the loop runs once (`tg.value_and_grad` of a loop ran it twice). So does a loop
that such a replay extends with more carries (the values a loop's gradient stores, each
starting at zeros and read by neither the condition nor the body): the replay runs in its
place.
"""

from __future__ import annotations

import numpy as np

from tracegrad.core.ir import FuncGraph
from tracegrad.ops import COMMUTATIVE
from tracegrad.ops.control_flow import while_p, while_results
from tracegrad.ops.shape_ops import is_zeros
from tracegrad.passes._rewrite import Rewriter, run_pass, sweep


def cse(graph: FuncGraph) -> FuncGraph:
    """`graph` with duplicate computations merged.

    >>> g = tg.trace(lambda x: tnp.sin(x) + tnp.sin(x))(tg.TensorSpec([3]))
    >>> [op.name for op in cse(g).operations]
    ['sin', 'add']
    """
    return run_pass(graph, _make_rule)[0]


def _attr_key(value, texts=None):
    """A hashable key that tells values of different types apart (`1`, `1.0`, `True`);
    a sub-graph's key is its text (`texts` caches them)."""
    if type(value) is tuple:
        return (tuple, tuple(_attr_key(v, texts) for v in value))
    if isinstance(value, FuncGraph):
        if texts is None:
            return (FuncGraph, str(value))
        found = texts.get(id(value))
        if found is None:
            found = texts[id(value)] = (FuncGraph, str(value), value)
        return found[:2]
    return (type(value), value)


def _key(op, operands, texts, attrs=None):
    attrs = op.attrs if attrs is None else attrs
    return (op.primitive, tuple(operands), id(op.grad_override) if callable(
        op.grad_override) else op.grad_override,
        tuple(sorted((k, _attr_key(v, texts)) for k, v in attrs.items())))


def _with_history(op):
    return {**op.attrs, "keep_history": True}


def _make_rule(rw):
    seen: dict = {}
    texts: dict = {}
    replays = None  # keys of the source's loops that keep their history
    extensions = None  # id(loop) -> the later loop that extends it
    merged: dict = {}  # id(extending loop) -> its results

    def rule(rw, op, ins):
        nonlocal replays, extensions
        if id(op) in merged:
            return merged[id(op)]
        operands = [id(t) for t in ins]
        if op.primitive in COMMUTATIVE:
            operands.sort()
        try:
            key = _key(op, operands, texts)
            found = seen.get(key)
        except TypeError:  # an unhashable attribute: never merged
            return None
        if found is not None:
            return list(found)
        if op.primitive is while_p:
            if extensions is None:
                extensions = _extensions(rw.source, texts)
            longer = extensions.get(id(op))
            if longer is not None:
                outs = _run_extension(rw, op, ins, longer)
                merged[id(longer)] = outs
                return _results_of(op, longer, outs)
        if op.primitive is while_p and not op.attrs.get("keep_history"):
            if replays is None:
                replays = _replays(rw.source, texts)
            if _key(op, [id(t) for t in op.inputs], texts, _with_history(op)) in replays:
                attrs = _with_history(op)
                outs = rw.emit(while_p, ins, attrs, op.source)
                seen[_key(op, operands, texts, attrs)] = outs
                seen[key] = outs = outs[:len(op.outputs)]
                return list(outs)
        seen[key] = outs = rw.copy(op, ins).outputs
        return list(outs)

    return rule


def _replays(graph: FuncGraph, texts) -> set:
    keys = set()
    for op in graph.operations:
        if op.primitive is while_p and op.attrs.get("keep_history"):
            try:
                keys.add(_key(op, [id(t) for t in op.inputs], texts))
            except TypeError:
                pass
    return keys


def _extensions(graph: FuncGraph, texts) -> dict:
    """`{id(loop): longer loop}` for each loop of `graph` that a later `keep_history` loop
    extends: the same operands then more carries starting at zeros, and, without those
    carries' inputs (unread) and outputs in its condition and body, the same attributes
    (`_key`, `keep_history` aside)."""
    earlier: dict = {}  # key of a loop, keep_history aside -> the loops of that key
    found = {}
    for b in (op for op in graph.operations if op.primitive is while_p):
        if b.attrs.get("keep_history"):
            k = b.attrs["num_consts"]
            for n in sorted({n for n, _ in earlier}, reverse=True):
                r = len(b.inputs) - n
                if r <= 0 or n < k or not all(is_zeros(t) for t in b.inputs[n:]):
                    continue
                cond = _without(b.attrs["cond_graph"], r, False)
                body = _without(b.attrs["body_graph"], r, True)
                if cond is None or body is None:
                    continue
                try:
                    shorter = earlier.get((n, _loop_key(b, b.inputs[:n], None,
                                                        cond_graph=cond, body_graph=body)), ())
                except TypeError:  # an unhashable attribute: never merged
                    shorter = ()
                for a in shorter:
                    found.setdefault(id(a), b)
        try:
            earlier.setdefault((len(b.inputs), _loop_key(b, b.inputs, texts)), []).append(b)
        except TypeError:
            pass
    return found


def _loop_key(op, operands, texts, **attrs):
    """The `_key` of `while` op `op` on `operands` with `attrs` replaced, `keep_history`
    aside."""
    attrs = {k: v for k, v in {**op.attrs, **attrs}.items() if k != "keep_history"}
    return _key(op, [id(t) for t in operands], texts, attrs)


def _without(graph: FuncGraph, r: int, outputs: bool):
    """`graph` without its last `r` inputs (and outputs), or None if it reads them."""
    g = FuncGraph(graph.name, outer=graph.outer)
    env = {id(t): g.add_input(t.type, t.name) for t in graph.inputs[:-r]}
    try:
        outs = Rewriter(graph, target=g, env=env).run()
    except KeyError:  # an op reads a dropped input
        return None
    g.outputs = outs[:-r] if outputs else outs
    sweep(g)
    return g


def _run_extension(rw, op, ins, longer) -> list:
    """The results of `longer` (extending `op`) run on `op`'s operands `ins` and zeros."""
    zeros = [rw.zeros(t.type, op.source) for t in longer.inputs[len(op.inputs):]]
    return list(rw.emit(while_p, [*ins, *zeros], dict(longer.attrs), op.source))


def _results_of(op, longer, outs) -> list:
    """`op`'s results among those of `longer`, the loop extending it."""
    carries, _, count, histories, _ = while_results(
        outs, len(op.inputs) - op.attrs["num_consts"], len(longer.inputs) - len(op.inputs))
    return carries + [count] + histories if op.attrs.get("keep_history") else carries
