"""The reference interpreter: runs a FuncGraph op by op with each primitive's NumPy `impl`.

This is the living definition every other backend is tested against (`backend="numpy"`).
A `call` op runs its callee's graph with this interpreter too (not the callee's own compiled
executor), so a graph runs on the numpy backend all the way down.
"""

from __future__ import annotations

import bisect
import keyword

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

    `arrays` feeds `graph.all_inputs` (inputs, then capture placeholders) in order. The first
    runs walk the plan op by op; a graph run often enough (a loop body, a function called
    again) is turned into one Python function with a statement per op.
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
        # op-by-op runs left before the plan becomes code: generating it costs about 20
        # walks (15-20 us an op against 0.6-1 us saved an op a run), so a graph stops being
        # walked after as many runs as its code would have cost
        self._walks_left = _WALKS_BEFORE_CODE
        self._code = None

    def __call__(self, arrays) -> list[np.ndarray]:
        return _fresh(self.run(arrays), arrays, self.out_slots, self.n_inputs)

    def run(self, arrays) -> list:
        """The graph's outputs on `arrays`; an output may be one of `arrays` or a view."""
        code = self._code
        if code is None:
            if self._walks_left > 0:
                self._walks_left -= 1
                return self._walk(arrays)
            code = self._code = _Generated(self)
        with np.errstate(all="ignore"):
            try:
                return code.fn(*arrays)
            except TracegradError:
                raise
            except Exception as e:  # noqa: BLE001 - re-raised, located
                raise code.located(e) from None

    def _walk(self, arrays) -> list:
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
                    raise _located(op, check, args, e) from None
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
        return [env[i] for i in self.out_slots]


_WALKS_BEFORE_CODE = 24


def _located(op, check, args, e: Exception) -> Exception:
    """The exception `e` of `op`'s impl on `args`, naming the op and where it was created."""
    if check:
        _check_op_shapes(op, args, None)
        if type(e) is ValueError:  # NumPy's: sizes that do not fit
            return ShapeError(f"{op.primitive.name}: {e} (at run time, op created at "
                              f"{op.source})")
    return runtime_error(e, op.primitive.name, f"op created at {op.source}")


def _fresh(outs: list, arrays, out_slots, n_inputs) -> list[np.ndarray]:
    """`outs` with copies in place of inputs, views, read-only arrays and repeats: arrays
    the caller owns."""
    fed = {id(a) for a in arrays}  # an op that returns its operand returns an input
    result = []
    for i, x in zip(out_slots, outs):
        if i < n_inputs or id(x) in fed or x.base is not None or not x.flags.writeable:
            x = np.array(x)
        fed.add(id(x))  # the same array as two outputs: the second is a copy
        result.append(x)
    return result


class _ShapeChecks:
    """`_check_op_shapes` for one op, once per distinct set of operand and result shapes."""

    __slots__ = ("op", "seen")

    def __init__(self, op):
        self.op, self.seen = op, set()

    def __call__(self, args, results):
        key = tuple((a.shape, a.dtype.num) for a in args + results)
        if key not in self.seen:
            _check_op_shapes(self.op, list(args), list(results))
            self.seen.add(key)


class _Generated:
    """An interpreter's plan as one Python function `fn(*arrays) -> outputs`: a statement
    per op, `del` where a value is read for the last time."""

    def __init__(self, interp: Interpreter):
        names = {"asarray": np.asarray}
        lines = [f"def run({', '.join(f's{i}' for i in range(interp.n_inputs))}):"]
        self.first_line = []  # per op: the line (1-based) its statements start at
        for k, (op, impl, attrs, ins, outs, check, frees) in enumerate(interp.plan):
            names[f"f{k}"] = impl
            call = [f"s{i}" for i in ins]
            if all(key.isidentifier() and not keyword.iskeyword(key) for key in attrs):
                for key, value in attrs.items():
                    names[f"a{k}_{key}"] = value
                    call.append(f"{key}=a{k}_{key}")
            elif attrs:
                names[f"a{k}"] = attrs
                call.append(f"**a{k}")
            call = f"f{k}({', '.join(call)})"
            self.first_line.append(len(lines) + 1)
            res = [f"s{i}" for i in outs]
            if op.primitive.multiple_results:
                body = [f"{', '.join(res)}{',' if len(res) == 1 else ''} = {call}"]
                body += [f"{r} = asarray({r})" for r in res]
            else:
                body = [f"{res[0]} = asarray({call})"]
            if check:
                names[f"c{k}"] = _ShapeChecks(op)
                body.append(f"c{k}(({''.join(f's{i}, ' for i in ins)}), "
                            f"({''.join(r + ', ' for r in res)}))")
            if frees:
                body.append(f"del {', '.join(f's{i}' for i in frees)}")
            lines += ["    " + b for b in body]
        lines.append(f"    return [{', '.join(f's{i}' for i in interp.out_slots)}]")
        exec(compile("\n".join(lines), f"<tracegrad numpy run of {interp.graph.name}>", "exec"),
             names)
        self.fn = names["run"]
        self.plan = interp.plan

    def located(self, e: Exception) -> Exception:
        """`e`, raised while `fn` ran, located at the op whose statement raised it."""
        tb = e.__traceback__
        while tb is not None and tb.tb_frame.f_code is not self.fn.__code__:
            tb = tb.tb_next
        if tb is None:  # (not from an op: a wrong number of arrays)
            return e
        k = bisect.bisect_right(self.first_line, tb.tb_lineno) - 1
        op, _, _, ins, _, check, _ = self.plan[k]
        args = [tb.tb_frame.f_locals.get(f"s{i}") for i in ins]
        return _located(op, check, args, e)


def compile_graph(graph: FuncGraph) -> Interpreter:
    """The numpy backend's compile step."""
    return Interpreter(graph)


def evaluate(graph: FuncGraph, *arrays) -> list[np.ndarray]:
    """Run `graph` once on `arrays` (one per input and capture placeholder)."""
    return Interpreter(graph)([np.asarray(a) for a in arrays])


def interpreter_of(graph: FuncGraph) -> Interpreter:
    """The interpreter a sub-graph (a branch, a loop body) runs with, kept on the graph:
    it lives as long as the graph (held elsewhere, the interpreter, which holds the graph,
    would keep it alive)."""
    interp = getattr(graph, "_interpreter", None)
    if interp is None:
        interp = graph._interpreter = Interpreter(graph)
    return interp


def run_subgraph(graph: FuncGraph, arrays, fresh: bool = True) -> list[np.ndarray]:
    """Run a sub-graph (a branch, a loop body) on `arrays`. Not `fresh`: `arrays` are NumPy
    arrays, and an output may be one of them or a view (for a caller that only reads them,
    as a loop reads its body's)."""
    interp = interpreter_of(graph)
    if not fresh:
        return interp.run(arrays)
    return interp([np.asarray(a) for a in arrays])


def _run_callee(graph: FuncGraph):
    def run(*arrays):
        return run_subgraph(graph, arrays, fresh=False)

    return run


control_flow.set_run_graph(run_subgraph)

