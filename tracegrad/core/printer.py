"""The IR's text form (what `str(graph)` prints, read back by `core.parser`) and its dot form.

```
func @loss(%x: f64[3], %y: f64[3]) -> (f64[]) {
  %0 = sin %x : f64[3]
  %1 = mul %0, %y : f64[3]
  %2 = reduce_sum %1 {axes=(0,), keepdims=False} : f64[]
  return %2
}
```

A graph whose `call` ops call compiled functions prints those functions after it, each once,
callers before callees (`%0 = call %x {callee=@inner}` ... `func @inner(...) {...}`).

The grammar is in docs/ir.md. Constant arrays (`Literal` attributes) print as
`VALUES:TYPE` (`[1.0, 2.0]:f64[2]`); one with more than `LITERAL_PRINT_LIMIT` elements
prints its first and last three elements around `...` and cannot be parsed back (the
JSON form keeps every byte).
"""

from __future__ import annotations

import re

import numpy as np

from tracegrad.core import dtypes
from tracegrad.core.ir import FuncGraph, GraphTensor, Literal
from tracegrad.core.source import short_location
from tracegrad.core.types import TensorType
from tracegrad.core.verify import sub_graphs

LITERAL_PRINT_LIMIT = 32  # elements; larger Literals are elided in the text form
_ELIDED_EDGE = 3  # elements shown at each end of an elided Literal
_PLAIN_NAME = re.compile(r"[A-Za-z_<>][\w.<>]*\Z")


# -- attribute values ------------------------------------------------------------------------


def format_scalar(x) -> str:
    """A Python or NumPy scalar as the text form writes it (`2.0`, `inf`, `-3`, `True`,
    `1.5-2.0j`, `nan+infj`)."""
    if isinstance(x, (bool, np.bool_)):
        return "True" if x else "False"
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    if type(x) is float:
        return repr(x)
    if isinstance(x, (complex, np.complexfloating)):
        re, im = (x.real, x.imag) if isinstance(x, np.generic) else (x.real, x.imag)
        sign = "-" if np.signbit(im) and not np.isnan(im) else "+"
        return f"{format_scalar(re)}{sign}{format_scalar(abs(im))}j"
    return str(x)  # a NumPy float: the shortest string that reads back to its dtype


def format_literal(lit: Literal) -> str:
    """`[[1.0, 2.0], [3.0, 4.0]]:f64[2,2]`; elided (`[0.0, 1.0, 2.0, ..., 39.0]`) when large."""
    v = lit.value
    type_ = TensorType(v.shape, v.dtype)
    if v.size > LITERAL_PRINT_LIMIT:
        flat = v.reshape(-1)
        head = [format_scalar(x) for x in flat[:_ELIDED_EDGE]]
        tail = [format_scalar(x) for x in flat[-_ELIDED_EDGE:]]
        return "[" + ", ".join(head + ["..."] + tail) + f"]:{type_}"
    return f"{_nested_values(v)}:{type_}"


def _nested_values(v: np.ndarray) -> str:
    if v.ndim == 0:
        return format_scalar(v[()])
    return "[" + ", ".join(_nested_values(row) for row in v) + "]"


def format_attr(value, names=None, indent: str = "", locations: bool = False) -> str:
    """One attribute value in the text form (see docs/ir.md for the syntax)."""
    if is_callee(value):
        return format_graph_name(names.functions.get(id(value.graph), value.graph.name)
                                 if names is not None else value.graph.name)
    if isinstance(value, FuncGraph):
        return _format_graph(value, names if names is not None else _Names(), indent, locations)
    if isinstance(value, tuple):
        inner = ", ".join(format_attr(v, names, indent, locations) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, np.dtype):
        return dtypes.short_name(value) if value in dtypes.SHORT_NAMES else f"<dtype {value}>"
    if isinstance(value, Literal):
        return format_literal(value)
    if isinstance(value, TensorType):
        return str(value)
    if value is None or isinstance(value, (bool, int, float, np.bool_, np.number)):
        return format_scalar(value) if value is not None else "None"
    if isinstance(value, str):
        return repr(value)
    return _opaque(value)


def _opaque(value) -> str:
    """A Python object the text form cannot hold, written so that the parser rejects it."""
    if callable(value) and hasattr(value, "__qualname__"):
        what, named = "function", value
    else:
        what, named = "object", type(value)
    module = getattr(named, "__module__", None)
    return f"<{what} {module + '.' if module else ''}{named.__qualname__}>"


# -- called functions ------------------------------------------------------------------------


def is_callee(value) -> bool:
    """Whether an attribute value is a compiled function (a `call` op's callee): an object
    with a `.graph` FuncGraph, printed and serialized as a reference to that graph."""
    return not isinstance(value, FuncGraph) and isinstance(getattr(value, "graph", None),
                                                             FuncGraph)


def called_functions(graph: FuncGraph) -> list:
    """The callees the `call` ops of `graph` reach (through sub-graphs and other callees),
    one per callee graph, callers before callees."""
    seen: set[int] = set()
    order: list = []

    def attr_values(v):
        if isinstance(v, tuple):
            for x in v:
                yield from attr_values(x)
        else:
            yield v

    def walk(g: FuncGraph):
        for op in g.operations:
            for value in op.attrs.values():
                for v in attr_values(value):
                    if isinstance(v, FuncGraph):
                        walk(v)
                    elif is_callee(v) and id(v.graph) not in seen:
                        seen.add(id(v.graph))
                        walk(v.graph)
                        order.append(v)  # after everything it calls

    walk(graph)
    return order[::-1]


def function_names(graph: FuncGraph, callees: list) -> dict[int, str]:
    """`id(callee graph) -> name`, unique in the document (and different from `graph`'s
    name): a graph's own name, with `_1`, `_2`... for the second graph of that name."""
    used = {graph.name}
    names = {}
    for c in callees:
        name, k = c.graph.name, 1
        while name in used:
            name = f"{c.graph.name}_{k}"
            k += 1
        used.add(name)
        names[id(c.graph)] = name
    return names


def format_graph_name(name: str) -> str:
    return "@" + (name if _PLAIN_NAME.match(name) else _quote(name))


def _quote(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


# -- graphs ----------------------------------------------------------------------------------


class _Names:
    """SSA names for one printing: `%name` for inputs and captures, `%0, %1 ...` for results."""

    def __init__(self, functions: dict[int, str] | None = None):
        self.names: dict[int, str] = {}
        self.used: set[str] = set()
        self.counter = 0
        self.functions = functions or {}  # id(callee graph) -> its name in the text

    def input(self, t, fallback: str) -> str:
        base = "".join(c if c.isalnum() or c == "_" else "_" for c in (t.name or "")) or fallback
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

    def get(self, t) -> str | None:
        return self.names.get(id(t))

    def __getitem__(self, t) -> str:
        return self.names.get(id(t), "%<undefined>")


def format_graph(graph: FuncGraph, *, locations: bool = False) -> str:
    """The text form of `graph`, then of the functions its `call` ops call; `locations=True`
    ends each op line with `# file.py:LINE`."""
    callees = called_functions(graph)
    functions = function_names(graph, callees)
    blocks = [_format_graph(graph, _Names(functions), "", locations)]
    for c in callees:
        blocks.append(_format_graph(c.graph, _Names(functions), "", locations,
                                    functions[id(c.graph)]))
    return "\n\n".join(blocks)


def format_op(op, names: _Names | None = None, indent: str = "",
              locations: bool = False) -> str:
    """One op in the text form (`%2 = add %0, %1 : f64[3]`); sub-graphs span several lines.

    Without `names`, operands are named by their position (`%in0`) and results `%0...`.
    """
    if names is None:
        names = _Names()
        for i, t in enumerate(op.inputs):
            names.names.setdefault(id(t), f"%in{i}")
    results = ", ".join(names.result(t) for t in op.outputs)
    line = f"{results} = {op.primitive.name}" if results else op.primitive.name
    if op.inputs:
        line += " " + ", ".join(names[t] for t in op.inputs)
    if op.attrs:
        attrs = ", ".join(
            f"{k}={format_attr(v, names, indent, locations)}" for k, v in op.attrs.items()
        )
        line += f" {{{attrs}}}"
    if op.outputs:
        line += " : " + ", ".join(str(t.type) for t in op.outputs)
    if locations and op.source:
        line += f"    # {short_location(op.source)}"
    return line


def _format_graph(graph: FuncGraph, names: _Names, indent: str, locations: bool,
                  name: str | None = None) -> str:
    params = ", ".join(
        f"{names.input(t, f'arg{i}')}: {t.type}" for i, t in enumerate(graph.inputs)
    )
    header = f"func {format_graph_name(name or graph.name)}({params})"
    if graph.captures:
        caps = []
        for i, (external, p) in enumerate(graph.captures):
            cap = f"{names.input(p, f'capture{i}')}: {p.type}"
            outer = names.get(external) if isinstance(external, GraphTensor) else None
            caps.append(cap + (f" = {outer}" if outer else ""))
        header += f" captures({', '.join(caps)})"
    outs = ", ".join(str(t.type) for t in graph.outputs)
    lines = [f"{header} -> ({outs}) {{"]
    body = indent + "  "
    for op in graph.operations:
        lines.append(body + format_op(op, names, body + "  ", locations))
    returned = ", ".join(names[t] for t in graph.outputs)
    lines.append(f"{body}return {returned}" if returned else f"{body}return")
    lines.append(indent + "}")
    return "\n".join(lines)


# -- Graphviz dot ----------------------------------------------------------------------------


def format_dot(graph: FuncGraph) -> str:
    """`graph` in Graphviz dot: inputs and outputs as ellipses, ops as boxes, sub-graphs
    as clusters (`dot -Tsvg` renders it)."""
    out = [
        f"digraph {_quote(graph.name)} {{",
        "  rankdir=TB;",
        '  node [fontname="monospace", fontsize=10];',
        '  edge [fontname="monospace", fontsize=9];',
    ]
    edges: list[str] = []
    _dot_graph(graph, out, edges, {}, [0], "  ")
    # Edges come after every node so that each node stays in the cluster that declares it.
    out += ["  " + e for e in edges]
    out.append("}")
    return "\n".join(out)


def _dot_graph(graph: FuncGraph, out: list, edges: list, nodes: dict, counter: list,
               indent: str) -> list:
    """Emit `graph`'s nodes into `out` and its edges into `edges`; returns its output nodes."""
    prefix = f"g{counter[0]}_"
    counter[0] += 1

    def node(name: str, label: str, style: str):
        out.append(f"{indent}{name} [{style}, label={_quote(label)}];")

    for i, t in enumerate(graph.inputs):
        nodes[id(t)] = f"{prefix}in{i}"
        node(nodes[id(t)], f"{t.name or f'arg{i}'}: {t.type}", "shape=ellipse")
    for i, (external, p) in enumerate(graph.captures):
        nodes[id(p)] = f"{prefix}cap{i}"
        node(nodes[id(p)], f"capture {p.name or i}: {p.type}", "shape=ellipse, style=dashed")
        if id(external) in nodes:
            edges.append(f"{nodes[id(external)]} -> {nodes[id(p)]} [style=dashed];")
    for k, op in enumerate(graph.operations):
        box = f"{prefix}op{k}"
        attrs = [f"{a}={_dot_attr(v)}" for a, v in op.attrs.items()]
        types = ", ".join(str(t.type) for t in op.outputs)
        node(box, "\n".join([op.primitive.name, *attrs, types]), "shape=box")
        many = len(op.inputs) > 1
        for j, t in enumerate(op.inputs):
            src = nodes.get(id(t))
            if src is None:
                src = f"{prefix}undefined{k}_{j}"
                node(src, "undefined", "shape=plaintext, fontcolor=red")
            edges.append(f"{src} -> {box}" + (f' [label="{j}"];' if many else ";"))
        if len(op.outputs) == 1:
            nodes[id(op.outputs[0])] = box
        else:  # a point per result, so that edges say which result they carry
            for i, t in enumerate(op.outputs):
                nodes[id(t)] = f"{box}_r{i}"
                node(nodes[id(t)], f"#{i}", "shape=plaintext")
                edges.append(f"{box} -> {nodes[id(t)]} [arrowhead=none];")
        for attr, sub in sub_graphs(op.attrs):
            out.append(f"{indent}subgraph cluster_g{counter[0]} {{")
            label = f"{op.primitive.name} {attr} = @{sub.name}"
            out.append(f"{indent}  label={_quote(label)}; style=rounded; color=gray50;")
            returned = _dot_graph(sub, out, edges, nodes, counter, indent + "  ")
            out.append(f"{indent}}}")
            edges += [f"{r} -> {box} [style=dotted];" for r in returned]
    returned = []
    for i, t in enumerate(graph.outputs):
        returned.append(f"{prefix}out{i}")
        node(returned[-1], f"return {i}: {t.type}", "shape=ellipse, style=dashed")
        if id(t) in nodes:
            edges.append(f"{nodes[id(t)]} -> {returned[-1]};")
    return returned


def _dot_attr(value) -> str:
    """An attribute in a dot label: as in the text form, a sub-graph by its name only."""
    if isinstance(value, FuncGraph):
        return format_graph_name(value.name)
    if is_callee(value):
        return format_graph_name(value.graph.name)
    if isinstance(value, tuple):
        inner = ", ".join(_dot_attr(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    return format_attr(value)
