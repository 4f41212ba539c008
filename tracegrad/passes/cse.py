"""Common-subexpression elimination: one op for each distinct computation.

Two ops compute the same thing when they apply the same primitive to the same operands
(in either order for a commutative primitive) with equal attributes and the same gradient
override. The later one is dropped and its uses read the earlier one's results. Equal
constants are merged the same way (a `Literal` attribute compares by value).
"""

from __future__ import annotations

from tracegrad.core.ir import FuncGraph
from tracegrad.ops import COMMUTATIVE
from tracegrad.passes._rewrite import run_pass


def cse(graph: FuncGraph) -> FuncGraph:
    """`graph` with duplicate computations merged.

    >>> g = tg.trace(lambda x: tnp.sin(x) + tnp.sin(x))(tg.TensorSpec([3]))
    >>> [op.name for op in cse(g).operations]
    ['sin', 'add']
    """
    return run_pass(graph, _make_rule)[0]


def _attr_key(value):
    """A hashable key that tells values of different types apart (`1`, `1.0`, `True`)."""
    if type(value) is tuple:
        return (tuple, tuple(_attr_key(v) for v in value))
    return (type(value), value)


def _make_rule(rw):
    seen: dict = {}

    def rule(rw, op, ins):
        operands = [id(t) for t in ins]
        if op.primitive in COMMUTATIVE:
            operands.sort()
        try:
            key = (op.primitive, tuple(operands), id(op.grad_override) if callable(
                op.grad_override) else op.grad_override,
                   tuple(sorted((k, _attr_key(v)) for k, v in op.attrs.items())))
            found = seen.get(key)
        except TypeError:  # an unhashable attribute: never merged
            return None
        if found is not None:
            return list(found)
        seen[key] = outs = rw.copy(op, ins).outputs
        return list(outs)

    return rule
