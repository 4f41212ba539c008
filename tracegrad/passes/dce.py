"""Dead-code elimination: the ops whose results no output depends on are removed.

Inputs and captures stay (they are the graph's calling convention); an op is live when an
output, a live op's operand or a live sub-graph's capture reads one of its results.
"""

from __future__ import annotations

from tracegrad.core.ir import FuncGraph
from tracegrad.passes._rewrite import run_pass


def dce(graph: FuncGraph) -> FuncGraph:
    """`graph` without its dead ops (every other pass sweeps dead ops too)."""
    return run_pass(graph)[0]
