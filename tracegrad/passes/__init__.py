"""Graph passes: pure functions `FuncGraph -> FuncGraph` that never modify their input.

`dce`, `cse`, `fold_constants`, `simplify` (with sums of products taken before the
product) and `simplify_control_flow` (loops and conds),
each built with the one rewriting helper (`_rewrite.Rewriter`), and `optimize`, which runs
them to a fixed point. The numba backend compiles `optimize(graph)`; the numpy backend runs
graphs as traced (the reference).
"""

from __future__ import annotations

from tracegrad.core.ir import FuncGraph
from tracegrad.passes import cse as _cse
from tracegrad.passes import fold as _fold
from tracegrad.passes import loops as _loops
from tracegrad.passes import simplify as _simplify
from tracegrad.passes._rewrite import Rewriter, inline_graph, run_pass
from tracegrad.passes.cse import cse
from tracegrad.passes.dce import dce
from tracegrad.passes.fold import fold_constants
from tracegrad.passes.loops import simplify_control_flow
from tracegrad.passes.simplify import simplify

MAX_ROUNDS = 8  # each round shrinks the graph or stops; the bound only guards the loop

_PIPELINE = (_simplify._make_rule, _fold._make_rule, _cse._make_rule, _loops._make_rule)


def optimize(graph: FuncGraph) -> FuncGraph:
    """`graph` simplified, constant-folded, de-duplicated and its loops and conds pruned
    until nothing changes (at most `MAX_ROUNDS` rounds); dead ops are gone. Results, types,
    inputs, captures and each op's source line are kept.

    >>> print(tg.optimize(tg.trace(lambda x: -(-x) * 1.0)(tg.TensorSpec([3]))))
    func @<lambda>(%x: f64[3]) -> (f64[3]) {
      return %x
    }
    """
    graph, _ = run_pass(graph)
    for _ in range(MAX_ROUNDS):
        changed = False
        for make_rule in _PIPELINE:
            graph, c = run_pass(graph, make_rule)
            changed = changed or c
        if not changed:
            break
    return graph


__all__ = ["Rewriter", "cse", "dce", "fold_constants", "inline_graph", "optimize", "run_pass",
           "simplify", "simplify_control_flow"]
