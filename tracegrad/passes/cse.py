"""Common-subexpression elimination: one op for each distinct computation.

Two ops compute the same thing when they apply the same primitive to the same operands
(in either order for a commutative primitive) with equal attributes and the same gradient
override. The later one is dropped and its uses read the earlier one's results. Equal
constants are merged the same way (a `Literal` attribute compares by value), and
sub-graphs (branches, loop bodies) by their text.

A `while` that another `while` on the same operands repeats with `keep_history=True` (the
replay a loop's gradient runs) keeps the history itself, and the replay reads its
results: the loop runs once (`tg.value_and_grad` of a loop ran it twice).
"""

from __future__ import annotations

from tracegrad.core.ir import FuncGraph
from tracegrad.ops import COMMUTATIVE
from tracegrad.ops.control_flow import while_p
from tracegrad.passes._rewrite import run_pass


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

    def rule(rw, op, ins):
        nonlocal replays
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
