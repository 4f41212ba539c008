"""`verify(graph)`: check that a `FuncGraph` obeys the IR's rules, naming the op that does not.

The rules: every op belongs to the graph; its operands are defined before it (graph inputs,
capture placeholders or earlier results of the same graph); every tensor is assigned once;
result types equal what the primitive's `abstract_eval` infers; attributes are hashable;
the outputs are defined; sub-graphs (attributes holding a FuncGraph) obey the same rules
and capture only values their enclosing graph defines before the op that holds them.
"""

from __future__ import annotations

from tracegrad.core.ir import FuncGraph, GraphTensor
from tracegrad.core.types import TensorType
from tracegrad.errors import GraphVerificationError


def verify(graph: FuncGraph) -> FuncGraph:
    """Raise `GraphVerificationError` if `graph` is malformed; returns `graph`.

    >>> verify(tg.trace(f)(tg.TensorSpec([3])))   # passes quietly
    """
    _verify(graph, outer=None, path=f"@{graph.name}")
    return graph


def _where(op, k: int) -> str:
    return f"op #{k} {op.primitive.name} (created at {op.source})"


def _verify(graph: FuncGraph, outer: frozenset | None, path: str) -> None:
    """`outer`: the tensors enclosing graphs define before the op holding `graph` (None for
    the graph verify() was called on, whose captures may read any enclosing graph)."""
    def fail(message: str):
        raise GraphVerificationError(f"verify {path}: {message}")

    defined: set[int] = set()

    def define(t, what: str):
        if not isinstance(t, GraphTensor):
            fail(f"{what} is a {type(t).__name__}, not a GraphTensor")
        if t.graph is not graph:
            fail(f"{what} ({t.type}) belongs to graph @{t.graph.name}")
        if id(t) in defined:
            fail(f"{what} ({t.type}) is assigned twice")
        defined.add(id(t))

    for i, t in enumerate(graph.inputs):
        define(t, f"input {i}")
        if t.op is not None:
            fail(f"input {i} ({t.type}) is the result of {t.op.primitive.name}")
    for i, (external, p) in enumerate(graph.captures):
        define(p, f"capture {i}")
        if not isinstance(external, GraphTensor):
            continue
        if outer is None and not external.graph.is_ancestor_of(graph):
            fail(f"capture {i} ({p.type}) reads a tensor of @{external.graph.name}, which "
                 "does not enclose this graph")
        if outer is not None and id(external) not in outer:
            fail(
                f"capture {i} ({p.type}) reads a tensor of @{external.graph.name} that no "
                "enclosing graph defines before this sub-graph's op"
            )
    for k, op in enumerate(graph.operations):
        where = _where(op, k)
        if op.graph is not graph:
            other = f"@{op.graph.name}" if op.graph is not None else "no graph (an eager record)"
            fail(f"{where} belongs to {other}")
        for j, t in enumerate(op.inputs):
            if not isinstance(t, GraphTensor) or id(t) not in defined:
                fail(f"{where}: operand {j} ({_describe(t)}) is not defined before the op "
                     "in this graph (neither an input, a capture placeholder nor an earlier "
                     "result)")
        for name, value in op.attrs.items():
            try:
                hash(value)
            except TypeError:
                fail(f"{where}: attribute {name}={value!r} is not hashable "
                     f"({type(value).__name__}); use a tuple or a Literal")
        try:
            expected = op.primitive.infer([t.type for t in op.inputs], op.attrs)
        except Exception as e:
            fail(f"{where}: abstract_eval rejects the op: {type(e).__name__}: {e}")
        got = [t.type if isinstance(t, GraphTensor) else t for t in op.outputs]
        if got != expected:
            fail(f"{where}: result types are ({_types(got)}) but abstract_eval infers "
                 f"({_types(expected)})")
        for name, sub in sub_graphs(op.attrs):
            visible = (outer or frozenset()) | defined
            _verify(sub, frozenset(visible), f"{path}/{op.primitive.name}.{name}@{sub.name}")
        for i, t in enumerate(op.outputs):
            define(t, f"{where}: result {i}")
            if t.op is not op or t.index != i:
                fail(f"{where}: result {i} records op {t.op and t.op.primitive.name} "
                     f"index {t.index}")
    for i, t in enumerate(graph.outputs):
        if not isinstance(t, GraphTensor) or id(t) not in defined:
            fail(f"output {i} ({_describe(t)}) is not defined in this graph")


def _describe(t) -> str:
    if isinstance(t, GraphTensor):
        made = f"result of {t.op.primitive.name} at {t.op.source}" if t.op else "an input"
        return f"{t.type}, {made} of @{t.graph.name}"
    return type(t).__name__


def _types(types) -> str:
    return ", ".join(str(t) if isinstance(t, TensorType) else repr(t) for t in types)


def sub_graphs(attrs: dict) -> list[tuple[str, FuncGraph]]:
    """`(name, graph)` for every FuncGraph in an op's attributes (tuples searched too):
    `branches=(g0, g1)` gives `("branches[0]", g0), ("branches[1]", g1)`."""
    found = []

    def walk(name, v):
        if isinstance(v, FuncGraph):
            found.append((name, v))
        elif isinstance(v, tuple):
            for i, x in enumerate(v):
                walk(f"{name}[{i}]", x)

    for k, v in attrs.items():
        walk(k, v)
    return found
