"""The one rewriting helper every pass builds its new graph with.

A `Rewriter` copies a source graph op by op into a target graph. For each op a pass's
*rule* may return replacement tensors (already in the target graph); otherwise the op is
copied with its operands mapped. A replacement must have exactly the type of the result it
replaces, or it is refused and the op copied. Sub-graphs held in attributes (cond branches,
loop bodies) are rewritten by the same pass, their captures of rewritten tensors remapped.
Finally the dead ops of the target are swept away, so every pass also eliminates dead code.

The source graph is never modified: passes are pure functions `FuncGraph -> FuncGraph`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tracegrad.core.ir import FuncGraph, GraphTensor, Literal, Operation
from tracegrad.core.op import constant_p
from tracegrad.errors import TracegradError
from tracegrad.ops.shape_ops import broadcast_in_dim_p

# A rule: `rule(rewriter, op, mapped_inputs) -> replacement results | None`; a pass gives
# `make_rule(rewriter) -> rule`, called once per graph (sub-graphs get their own).
Rule = Callable[["Rewriter", Operation, list], "list | None"]


class Rewriter:
    """Copies `source` into a new graph (or into `target`, seeded with `env`), applying
    the per-graph rule that `make_rule(rewriter)` returns (None copies every op)."""

    def __init__(self, source: FuncGraph,
                 make_rule: Callable[[Rewriter], Rule] | None = None, *,
                 parent: Rewriter | None = None,
                 target: FuncGraph | None = None, env: dict | None = None):
        self.source = source
        self.parent = parent
        self.make_rule = make_rule
        self.env: dict[int, GraphTensor] = {} if env is None else env
        self.rule_changed = False
        self._copied = None
        self._uses = None
        self._reader_ops = None
        if target is None:
            outer = parent.target if parent is not None else source.outer
            target = FuncGraph(source.name, outer=outer)
            for t in source.inputs:
                self.env[id(t)] = target.add_input(t.type, t.name)
            for external, p in source.captures:
                self.env[id(p)] = target.capture(self._external(external), p.type, p.name)
        self.target = target
        self.rule = make_rule(self) if make_rule is not None else None

    # -- for rules ---------------------------------------------------------------------------

    def emit(self, primitive, inputs, attrs: dict, source: str | None) -> tuple:
        """A new op in the target graph, its result types inferred; returns its outputs."""
        out_types = primitive.infer([t.type for t in inputs], attrs)
        op = self.target.add_operation(primitive, inputs, attrs, out_types, source)
        op.grad_override = None
        return op.outputs

    def constant(self, value, *, weak: bool = False, source: str | None = None) -> GraphTensor:
        """A `constant` op holding (a read-only copy of) `value`."""
        value = np.array(value, copy=True)
        value.flags.writeable = False
        attrs = {"value": Literal(value), "weak": True} if weak else {"value": Literal(value)}
        return self.emit(constant_p, [], attrs, source)[0]

    def zeros(self, type_, source: str | None = None) -> GraphTensor:
        """Zeros of `type_` (an unknown dim has size 0: then only a stand-in for a result
        nothing reads, which the sweep removes)."""
        zero = self.constant(np.zeros((), type_.dtype), weak=type_.weak, source=source)
        if not type_.shape:
            return zero
        dims = [self.constant(np.int64(0), source=source) for d in type_.shape if d is None]
        return self.emit(broadcast_in_dim_p, [zero, *dims],
                         {"shape": tuple(type_.shape), "broadcast_dimensions": ()}, source)[0]

    def copy(self, op: Operation, inputs) -> Operation:
        """`op` applied to `inputs` in the target graph (sub-graph attributes rewritten)."""
        attrs = {k: self._attr(v) for k, v in op.attrs.items()}
        new = self.target.add_operation(op.primitive, inputs, attrs,
                                        [t.type for t in op.outputs], op.source)
        new.grad_override = op.grad_override
        for old, t in zip(op.outputs, new.outputs, strict=True):
            t.name = old.name
        self._copied = new
        return new

    def subgraph(self, graph: FuncGraph) -> FuncGraph:
        """`graph`, held by an op of the target, rewritten by the same pass (a fresh rule
        state); its captures of rewritten tensors are remapped."""
        sub = Rewriter(graph, self.make_rule, parent=self)
        new = sub.finish()
        self.rule_changed = self.rule_changed or sub.changed
        return new

    # -- driving -----------------------------------------------------------------------------

    def read(self, t: GraphTensor) -> GraphTensor:
        return self.env[id(t)]

    def readers(self, t: GraphTensor) -> int:
        """How many times tensor `t` of the source graph is read there (`use_counts`)."""
        if self._uses is None:
            self._uses = use_counts(self.source)
        return self._uses.get(id(t), 0)

    def reader_ops(self, t: GraphTensor) -> list:
        """The ops of the source graph that take tensor `t` as an operand."""
        if self._reader_ops is None:
            self._reader_ops = {}
            for op in self.source.operations:
                for x in op.inputs:
                    self._reader_ops.setdefault(id(x), []).append(op)
        return self._reader_ops.get(id(t), [])

    def run(self) -> list[GraphTensor]:
        """Rewrite every op of the source; returns the mapped outputs."""
        rule = self.rule
        for op in self.source.operations:
            inputs = [self.env[id(t)] for t in op.inputs]
            outs = None
            if rule is not None:
                self._copied = None
                try:
                    outs = rule(self, op, inputs)
                except TracegradError:  # a rewrite that cannot be typed is not made
                    outs = None
                if outs is not None:
                    outs = self._accepted(op, outs)
            if outs is None:
                outs = self.copy(op, inputs).outputs
            for old, new in zip(op.outputs, outs, strict=True):
                self.env[id(old)] = new
        return [self.env[id(t)] for t in self.source.outputs]

    def finish(self) -> FuncGraph:
        """Run, set the outputs, sweep dead ops; returns the new graph."""
        self.target.outputs = self.run()
        sweep(self.target)
        return self.target

    @property
    def changed(self) -> bool:
        return self.rule_changed or len(self.target.operations) != len(self.source.operations)

    # -- internals ---------------------------------------------------------------------------

    def _accepted(self, op, outs):
        outs = list(outs)
        if len(outs) != len(op.outputs) or any(
            not isinstance(n, GraphTensor) or n.graph is not self.target or n.type != o.type
            for o, n in zip(op.outputs, outs)
        ):
            return None  # a replacement must keep every result's type exactly
        copied = self._copied
        if copied is None or any(a is not b for a, b in zip(outs, copied.outputs)):
            self.rule_changed = True
        return outs

    def _external(self, external):
        """A captured value, mapped if it is a tensor of an enclosing graph being rewritten."""
        r = self.parent
        while r is not None:
            found = r.env.get(id(external))
            if found is not None:
                return found
            r = r.parent
        return external

    def _attr(self, value):
        if isinstance(value, FuncGraph):
            return self.subgraph(value)
        if type(value) is tuple and any(isinstance(v, (FuncGraph, tuple)) for v in value):
            return tuple(self._attr(v) for v in value)
        return value


def subgraphs(value):
    """The FuncGraphs held in an attribute value (a graph or nested tuples of them)."""
    if isinstance(value, FuncGraph):
        yield value
    elif type(value) is tuple:
        for v in value:
            yield from subgraphs(v)


def captured_tensors(op: Operation):
    """The tensors of enclosing graphs that the sub-graphs of `op` capture, at any depth."""
    for value in op.attrs.values():
        for g in subgraphs(value):
            for external, _ in g.captures:
                if isinstance(external, GraphTensor):
                    yield external
            for inner in g.operations:
                yield from captured_tensors(inner)


def use_counts(graph: FuncGraph) -> dict:
    """How many times each tensor of `graph` is read: as an operand of its ops, an output,
    or a capture by a sub-graph (`id(tensor) -> count`)."""
    counts: dict = {}
    for op in graph.operations:
        for t in [*op.inputs, *captured_tensors(op)]:
            counts[id(t)] = counts.get(id(t), 0) + 1
    for t in graph.outputs:
        counts[id(t)] = counts.get(id(t), 0) + 1
    return counts


def sweep(graph: FuncGraph) -> None:
    """Remove, in place, the ops of a graph under construction whose results nothing uses
    (uses: later operands, outputs, captures by sub-graphs). Inputs and captures stay."""
    live = {id(t) for t in graph.outputs}
    kept = []
    for op in reversed(graph.operations):
        if any(id(t) in live for t in op.outputs):
            kept.append(op)
            live.update(id(t) for t in op.inputs)
            live.update(id(t) for t in captured_tensors(op))
    kept.reverse()
    graph.operations = kept


def run_pass(graph: FuncGraph, make_rule=None) -> tuple[FuncGraph, bool]:
    """`(new graph, changed)`: `graph` rewritten with the rule `make_rule(rewriter)` gives."""
    rw = Rewriter(graph, make_rule)
    return rw.finish(), rw.changed


def inline_graph(graph: FuncGraph, target: FuncGraph, inputs, *, with_env: bool = False):
    """Copy the ops of `graph` into `target`, `inputs` (tensors of `target`) feeding its
    inputs and its captured values read into `target`; returns the copied outputs (and,
    `with_env`, the map `id(tensor of graph) -> its copy`)."""
    env = {id(t): x for t, x in zip(graph.inputs, inputs, strict=True)}
    for external, p in graph.captures:
        env[id(p)] = target.to_tensor(external)
    outs = Rewriter(graph, target=target, env=env).run()
    return (outs, env) if with_env else outs


def extended_graph(graph: FuncGraph, extra_types: list, extra_outputs: list,
                   outer: FuncGraph | None) -> FuncGraph:
    """A copy of closed `graph` (nested in `outer`) with inputs of the types `extra_types`
    after its own, which it does not read, and the copies of its tensors `extra_outputs`
    after its outputs."""
    g = FuncGraph(graph.name, outer=outer)
    env = {id(t): g.add_input(t.type, t.name) for t in graph.inputs}
    for t in extra_types:
        g.add_input(t)
    g.outputs = Rewriter(graph, target=g, env=env).run() + [env[id(t)] for t in extra_outputs]
    return g
