"""Constant folding: ops whose operands are all constants become constants.

The op's NumPy `impl` computes the value at optimization time. Folding is limited so that
it never blows up a graph: a result larger than `FOLD_LIMIT` elements stays an op, and
ops that only make a big array out of a small one (`broadcast_in_dim`, `iota`) are never
folded, so `zeros_like(x)` stays a broadcast scalar. Ops holding sub-graphs are left alone,
and so is an op whose `impl` fails (it fails again, with its message, when the graph runs).
"""

from __future__ import annotations

import numpy as np

from tracegrad.core.ir import FuncGraph
from tracegrad.core.op import constant_p
from tracegrad.ops import shape_ops
from tracegrad.passes._rewrite import run_pass, subgraphs

FOLD_LIMIT = 1024  # largest result (in elements) a fold may create
NEVER_FOLDED = {constant_p, shape_ops.broadcast_in_dim_p, shape_ops.iota_p}


def fold_constants(graph: FuncGraph) -> FuncGraph:
    """`graph` with constant subexpressions evaluated.

    >>> g = tg.trace(lambda x: x * (tnp.exp(0.0) + 1.0))(tg.TensorSpec([3]))
    >>> [op.name for op in fold_constants(g).operations]   # exp and add are folded
    ['constant', 'broadcast_in_dim', 'mul']
    """
    return run_pass(graph, _make_rule)[0]


def _make_rule(rw):
    return _fold


def _fold(rw, op, ins):
    if op.primitive in NEVER_FOLDED or any(
        t.op is None or t.op.primitive is not constant_p for t in ins
    ) or any(True for v in op.attrs.values() for _ in subgraphs(v)):
        return None
    values = [t.op.attrs["value"].value for t in ins]
    try:
        with np.errstate(all="ignore"):
            result = op.primitive.impl(*values, **op.attrs)
    except Exception:  # noqa: BLE001  (any failure: the op stays and fails when run)
        return None
    results = list(result) if op.primitive.multiple_results else [result]
    if any(np.size(r) > FOLD_LIMIT for r in results):
        return None
    # A result whose type differs from the op's (dtype, shape) is refused by the rewriter.
    return [rw.constant(r, weak=old.type.weak, source=op.source)
            for old, r in zip(op.outputs, results, strict=True)]
