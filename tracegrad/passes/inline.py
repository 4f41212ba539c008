"""Inlining: a `call` op becomes its callee's ops, a `custom_gradient` boundary its first
operands (the gradient it carries is built by then).

The one inliner: `simplify` applies these as rules, and the numba backend removes these ops
with them before planning (its `INLINED` lowering records).
"""

from __future__ import annotations

from tracegrad.passes._rewrite import Rewriter


def inline_call(rw, op, ins):
    """A `call` of a compiled function is its callee's graph, inlined into `rw`'s target
    (`ins` feed the callee's inputs and captures)."""
    callee = op.attrs["callee"].graph
    env = {id(t): x for t, x in zip(callee.all_inputs, ins, strict=True)}
    return Rewriter(callee, target=rw.target, env=env).run()


def inline_custom_gradient(rw, op, ins):
    """A `custom_gradient` boundary is its first operands (one per result)."""
    return ins[: len(op.outputs)]
