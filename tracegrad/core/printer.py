"""The IR's text form (what `str(graph)` prints) and its Graphviz dot form."""

from __future__ import annotations

import numpy as np

from tracegrad.core import dtypes
from tracegrad.core.ir import FuncGraph, Literal
from tracegrad.core.source import short_location


def format_attr(value, names=None, indent="") -> str:
    """One attribute value in the text form (parsed back by `core.parser`)."""
    if isinstance(value, FuncGraph):
        return _format_body(value, names, indent + "  ", nested=True)
    if isinstance(value, np.dtype):
        return dtypes.short_name(value)
    if isinstance(value, Literal):
        return repr(value)
    if isinstance(value, tuple):
        inner = ", ".join(format_attr(v, names, indent) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, float):
        return repr(value)
    return repr(value)


class _Names:
    def __init__(self):
        self.names: dict[int, str] = {}
        self.used: set[str] = set()
        self.counter = 0

    def input(self, t, fallback: str) -> str:
        base = t.name or fallback
        base = "".join(c if c.isalnum() or c == "_" else "_" for c in base) or fallback
        name = base
        k = 1
        while name in self.used or name.isdigit():
            name = f"{base}_{k}"
            k += 1
        self.used.add(name)
        self.names[id(t)] = "%" + name
        return "%" + name

    def result(self, t) -> str:
        name = str(self.counter)
        self.counter += 1
        self.names[id(t)] = "%" + name
        return "%" + name

    def __getitem__(self, t) -> str:
        return self.names.get(id(t), "%<?>")


def format_graph(graph: FuncGraph, *, locations: bool = False) -> str:
    return _format_body(graph, _Names(), "", nested=False, locations=locations)


def _format_body(graph, names, indent, nested, locations=False) -> str:
    params = ", ".join(
        f"{names.input(t, f'arg{i}')}: {t.type}" for i, t in enumerate(graph.inputs)
    )
    header = f"func @{graph.name}({params})"
    if graph.captures:
        caps = ", ".join(
            f"{names.input(p, f'capture{i}')}: {p.type}"
            for i, (_, p) in enumerate(graph.captures)
        )
        header += f" captures({caps})"
    outs = ", ".join(str(t.type) for t in graph.outputs)
    lines = [f"{header} -> ({outs}) {{"]
    body = indent + "  "
    for op in graph.operations:
        results = ", ".join(names.result(t) for t in op.outputs)
        line = f"{body}{results} = {op.primitive.name}" if results else f"{body}{op.primitive.name}"
        if op.inputs:
            line += " " + ", ".join(names[t] for t in op.inputs)
        if op.attrs:
            attrs = ", ".join(f"{k}={format_attr(v, names, body)}" for k, v in op.attrs.items())
            line += f" {{{attrs}}}"
        line += " : " + ", ".join(str(t.type) for t in op.outputs)
        if locations and op.source:
            line += f"    # {short_location(op.source)}"
        lines.append(line)
    lines.append(f"{body}return " + ", ".join(names[t] for t in graph.outputs))
    lines.append(indent + "}")
    return "\n".join(lines)


def format_dot(graph: FuncGraph) -> str:
    """The graph in Graphviz dot: one node per input, op and output."""
    names = {}
    out = [f'digraph "{graph.name}" {{', "  rankdir=TB;", '  node [fontname="monospace"];']
    for i, t in enumerate(graph.all_inputs):
        node = f"in{i}"
        names[id(t)] = node
        label = f"{t.name or f'arg{i}'}: {t.type}"
        out.append(f'  {node} [shape=ellipse, label="{_escape(label)}"];')
    for k, op in enumerate(graph.operations):
        node = f"op{k}"
        attrs = ", ".join(
            f"{a}={format_attr(v) if not isinstance(v, FuncGraph) else '@' + v.name}"
            for a, v in op.attrs.items()
        )
        label = op.primitive.name + (f"\\n{_escape(attrs)}" if attrs else "")
        label += "\\n" + ", ".join(str(t.type) for t in op.outputs)
        out.append(f'  {node} [shape=box, label="{label}"];')
        for j, t in enumerate(op.inputs):
            out.append(f"  {names.get(id(t), 'missing')} -> {node} [label=\"{j}\"];")
        for t in op.outputs:
            names[id(t)] = node
    for i, t in enumerate(graph.outputs):
        out.append(f'  out{i} [shape=ellipse, style=dashed, label="return {i}: {t.type}"];')
        out.append(f"  {names.get(id(t), 'missing')} -> out{i};")
    out.append("}")
    return "\n".join(out)


def _escape(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"')
