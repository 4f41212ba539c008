"""The reference interpreter: runs a FuncGraph op by op with each primitive's NumPy `impl`.

This is the living definition every other backend is tested against (`backend="numpy"`).
A `call` op runs its callee's graph with this interpreter too (not the callee's own compiled
executor), so a graph runs on the numpy backend all the way down.
"""

from __future__ import annotations

import weakref

import numpy as np

from tracegrad.core.ir import FuncGraph
from tracegrad.core.op import runtime_error
from tracegrad.core.types import TensorType
from tracegrad.errors import ShapeError, TracegradError
from tracegrad.ops import control_flow
from tracegrad.ops.custom import call_p


def _has_unknown_dims(op) -> bool:
    return any(None in t.type.shape for t in op.inputs + op.outputs)


# On a dim unknown while tracing, `slice` takes Python's slice rules (negative, None and
# out-of-range indices), which its abstract_eval accepts only for unknown dims: such an op is
# checked against the type it was traced with.
_CHECKED_AS_TRACED = frozenset({"slice"})


def _check_op_shapes(op, args, results):
    """At run time, the concrete shapes of an op traced with unknown dims must fit it."""
    if op.primitive.name in _CHECKED_AS_TRACED:
        expected = [t.type for t in op.outputs]
    else:
        try:
            expected = op.primitive.infer([TensorType(a.shape, a.dtype) for a in args],
                                          op.attrs)
        except TracegradError as e:
            raise type(e)(f"{e} (at run time, op created at {op.source})") from None
    if results is None:  # impl failed: the shapes fit, so the failure is not a shape error
        return
    for t, r in zip(expected, results, strict=True):
        if len(t.shape) != r.ndim or any(d is not None and d != n
                                         for d, n in zip(t.shape, r.shape)):
            raise ShapeError(
                f"{op.primitive.name}: produced shape {r.shape}, expected {t.shape} "
                f"(op created at {op.source})"
            )


def _with_frees(plan, n_slots, out_slots):
    """Each step of `plan` with the slots its op reads or writes last (not the graph's
    outputs): dropped once it ran, so a run holds the values still to be read, not every
    value it computed."""
    last = [-1] * n_slots
    for k, (_, _, _, ins, outs, _) in enumerate(plan):
        for i in ins + outs:
            last[i] = k
    for i in out_slots:
        last[i] = -1
    frees = [[] for _ in plan]
    for i, k in enumerate(last):
        if k >= 0:
            frees[k].append(i)
    return [(*step, tuple(f)) for step, f in zip(plan, frees, strict=True)]


class Interpreter:
    """A FuncGraph prepared for repeated evaluation: `interp(arrays) -> list of arrays`.

    `arrays` feeds `graph.all_inputs` (inputs, then capture placeholders) in order.
    """

    def __init__(self, graph: FuncGraph):
        slots: dict[int, int] = {}
        for t in graph.all_inputs:
            slots[id(t)] = len(slots)
        self.n_inputs = len(slots)
        plan = []
        for op in graph.operations:
            ins = tuple(slots[id(t)] for t in op.inputs)
            outs = []
            for t in op.outputs:
                if id(t) in slots:
                    raise TracegradError(f"{op.primitive.name}: tensor assigned twice")
                slots[id(t)] = len(slots)
                outs.append(slots[id(t)])
            if op.primitive is call_p:
                impl, attrs = _run_callee(op.attrs["callee"].graph), {}
            else:
                impl, attrs = op.primitive.impl, op.attrs
            plan.append((op, impl, attrs, ins, tuple(outs), _has_unknown_dims(op)))
        self.n_slots = len(slots)
        self.out_slots = [slots[id(t)] for t in graph.outputs]
        self.plan = _with_frees(plan, self.n_slots, self.out_slots)
        self.graph = graph

    def __call__(self, arrays) -> list[np.ndarray]:
        env = [None] * self.n_slots
        env[: self.n_inputs] = arrays
        with np.errstate(all="ignore"):
            for op, impl, attrs, ins, outs, check, frees in self.plan:
                args = [env[i] for i in ins]
                try:
                    result = impl(*args, **attrs)
                except TracegradError:
                    raise
                except Exception as e:  # noqa: BLE001 - re-raised, located
                    if check:
                        _check_op_shapes(op, args, None)
                        if type(e) is ValueError:  # NumPy's: sizes that do not fit
                            raise ShapeError(f"{op.primitive.name}: {e} (at run time, op "
                                             f"created at {op.source})") from None
                    raise runtime_error(e, op.primitive.name,
                                        f"op created at {op.source}") from None
                if op.primitive.multiple_results:
                    result = [np.asarray(r) for r in result]
                else:
                    result = [np.asarray(result)]
                if check:
                    _check_op_shapes(op, args, result)
                for i, r in zip(outs, result):
                    env[i] = r
                for i in frees:
                    env[i] = None
        fed = {id(a) for a in arrays}  # an op that returns its operand returns an input
        outs = []
        for i in self.out_slots:
            x = env[i]
            if i < self.n_inputs or id(x) in fed or x.base is not None or not x.flags.writeable:
                x = np.array(x)
            fed.add(id(x))  # the same array as two outputs: the second is a copy
            outs.append(x)
        return outs


def compile_graph(graph: FuncGraph) -> Interpreter:
    """The numpy backend's compile step."""
    return Interpreter(graph)


def evaluate(graph: FuncGraph, *arrays) -> list[np.ndarray]:
    """Run `graph` once on `arrays` (one per input and capture placeholder)."""
    return Interpreter(graph)([np.asarray(a) for a in arrays])


_INTERPRETERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def run_subgraph(graph: FuncGraph, arrays) -> list[np.ndarray]:
    """Run a sub-graph (a branch, a loop body) on `arrays`; its interpreter is kept as long
    as the graph lives."""
    interp = _INTERPRETERS.get(graph)
    if interp is None:
        interp = _INTERPRETERS[graph] = Interpreter(graph)
    return interp([np.asarray(a) for a in arrays])


def _run_callee(graph: FuncGraph):
    def run(*arrays):
        return run_subgraph(graph, arrays)

    return run


control_flow.set_run_graph(run_subgraph)

