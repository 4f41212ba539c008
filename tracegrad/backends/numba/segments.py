"""Graphs with control flow (`cond`, `while`): compiled kernels between the control-flow ops.
Python primitives (`python_call`, tracegrad.extend) always run here, between kernels.

The straight-line runs of ops between control-flow ops are each compiled as one kernel
(with all the fusion of any graph); a `cond` runs the compiled kernel of the branch its
predicate picks (only that branch runs), a `while` calls the compiled kernels of its
condition and body once per iteration. Sub-graphs with control flow of their own are
segmented the same way. This is the interim form: a Python call per branch and per
iteration (about a microsecond each) instead of branches and loops inside one generated
function.
"""

from __future__ import annotations

import numpy as np

from tracegrad.backends.numba.lowering import CONTROL, find
from tracegrad.core.ir import FuncGraph
from tracegrad.ops.control_flow import cond_p, stack_history
from tracegrad.ops.python_call import python_call_p
from tracegrad.passes import inline_graph, optimize


def _is_control(op) -> bool:
    rec = find(op.primitive)
    return rec is not None and rec.kind == CONTROL


def has_control_flow(graph: FuncGraph) -> bool:
    return any(_is_control(op) for op in graph.operations)


class SegmentedExecutor:
    """`executor(list of arrays) -> list of fresh arrays` for a graph with control flow."""

    def __init__(self, graph: FuncGraph, compile_kernel, parallel: bool = False):
        self.graph = graph
        self._compile_kernel = compile_kernel
        self._parallel = parallel
        self.inputs = [id(t) for t in graph.all_inputs]
        self.outputs = [id(t) for t in graph.outputs]
        self.steps = self._plan(graph)
        self.source = "\n\n".join(s.source for s in self.steps if s.source)

    def _plan(self, graph):
        last_use: dict = {}
        for k, op in enumerate(graph.operations):
            for t in op.inputs:
                last_use[id(t)] = k
        for t in graph.outputs:
            last_use[id(t)] = len(graph.operations)
        steps, run = [], []
        for k, op in enumerate(graph.operations):
            if _is_control(op):
                if run:
                    steps.append(_Kernel(run, last_use, self))
                    run = []
                steps.append(_PythonCall(op) if op.primitive is python_call_p
                             else _Control(op, self))
            else:
                run.append((k, op))
        if run:
            steps.append(_Kernel(run, last_use, self))
        return steps

    def sub(self, graph: FuncGraph):
        """The executor of a closed sub-graph (a branch, a condition, a body)."""
        return compile_graph_any(optimize(graph), self._compile_kernel, self._parallel)

    def __call__(self, arrays):
        env = dict(zip(self.inputs, arrays, strict=True))
        for step in self.steps:
            step.run(env)
        ins = {id(a) for a in arrays}
        return [np.array(env[k]) if id(env[k]) in ins else env[k] for k in self.outputs]


class _Kernel:
    """A straight-line run of ops compiled as one kernel."""

    def __init__(self, run, last_use, owner):
        end = run[-1][0]
        produced = {id(t) for _, op in run for t in op.outputs}
        g = FuncGraph("segment")
        env: dict = {}
        self.reads = []
        for _, op in run:
            for t in op.inputs:
                if id(t) not in produced and id(t) not in env:
                    env[id(t)] = g.add_input(t.type, t.name)
                    self.reads.append(id(t))
            outs = g.add_operation(op.primitive, [env[id(t)] for t in op.inputs], op.attrs,
                                   [t.type for t in op.outputs], op.source).outputs
            outs[0].op.grad_override = op.grad_override
            for old, new in zip(op.outputs, outs, strict=True):
                env[id(old)] = new
        self.writes = [id(t) for _, op in run for t in op.outputs
                       if last_use.get(id(t), -1) > end]
        g.outputs = [env[k] for k in self.writes]
        self.executor = owner._compile_kernel(g)
        self.source = getattr(self.executor, "source", "")

    def run(self, env):
        outs = self.executor([env[k] for k in self.reads])
        env.update(zip(self.writes, outs, strict=True))


class _Control:
    """A cond or while op, run by Python over its sub-graphs' compiled executors."""

    def __init__(self, op, owner):
        self.op = op
        self.reads = [id(t) for t in op.inputs]
        self.writes = [id(t) for t in op.outputs]
        attrs = op.attrs
        if op.primitive is cond_p:
            self.branches = [owner.sub(g) for g in attrs["branches"]]
            parts = [("false branch", self.branches[0]), ("true branch", self.branches[1])]
        else:
            self.num_consts = attrs["num_consts"]
            self.cond = owner.sub(attrs["cond_graph"])
            self.step = owner.sub(_step_graph(attrs["cond_graph"], attrs["body_graph"],
                                              self.num_consts))
            self.maximum_iterations = attrs.get("maximum_iterations")
            self.keep_history = attrs.get("keep_history", False)
            parts = [("condition", self.cond), ("body, then the condition", self.step)]
        self.source = "\n\n".join(
            f"# {op.primitive.name} (created at {op.source}): {what}\n{sub.source}"
            for what, sub in parts)

    def run(self, env):
        args = [env[k] for k in self.reads]
        if self.op.primitive is cond_p:
            pred, *rest = args
            outs = self.branches[int(bool(pred))](rest)
        else:
            consts, carry = args[:self.num_consts], args[self.num_consts:]
            i, limit, history = 0, self.maximum_iterations, []
            go = bool(self.cond(consts + carry)[0])
            while go and (limit is None or i < limit):
                if self.keep_history:
                    history.append([np.asarray(c) for c in carry])
                *carry, go = self.step(consts + carry)  # one kernel call an iteration
                go = bool(go)
                i += 1
            outs = [np.array(c) for c in carry]
            if self.keep_history:
                outs += [np.asarray(i, np.int64), *stack_history(history, outs)]
        env.update(zip(self.writes, outs, strict=True))


class _PythonCall:
    """A python_call op: the user's function called on the arrays (tracegrad.extend)."""

    def __init__(self, op):
        self.op = op
        self.reads = [id(t) for t in op.inputs]
        self.writes = [id(t) for t in op.outputs]
        self.source = f"# python_call {op.attrs['function'].name} (created at {op.source})"

    def run(self, env):
        outs = python_call_p.impl(*[env[k] for k in self.reads], **self.op.attrs)
        env.update(zip(self.writes, outs, strict=True))


def _step_graph(cond_graph: FuncGraph, body_graph: FuncGraph, num_consts: int) -> FuncGraph:
    """One iteration as one graph: the body's new carry, then the condition on it."""
    g = FuncGraph(f"{body_graph.name}_then_{cond_graph.name}")
    ins = [g.add_input(t.type, t.name) for t in body_graph.inputs]
    carry = inline_graph(body_graph, g, ins)
    (go,) = inline_graph(cond_graph, g, ins[:num_consts] + carry)
    g.outputs = [*carry, go]
    return g


def compile_graph_any(graph: FuncGraph, compile_kernel, parallel: bool = False):
    """`compile_kernel(graph)`, or a segmented executor when `graph` has control flow."""
    if has_control_flow(graph):
        return SegmentedExecutor(graph, compile_kernel, parallel)
    return compile_kernel(graph)
