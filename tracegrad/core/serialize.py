"""The JSON form of a `FuncGraph`: lossless, versioned (`graph.to_json()`, `FuncGraph.from_json`).

```
{"format": "tracegrad.graph", "version": 1,
 "graph": {"name": "f",
           "inputs": [{"id": 0, "name": "x", "type": "f64[?]"}],
           "captures": [{"id": 1, "name": "w", "type": "f64[3]", "outer": null}],
           "operations": [{"primitive": "sin", "inputs": [0],
                           "outputs": [{"id": 2, "type": "f64[?]"}],
                           "attrs": {}, "source": "model.py:12"}],
           "outputs": [2]}}
```

A graph with `call` ops has version 2: `"functions"` lists the graphs of their callees, each
once, callers first, and a callee is written as `{"function": NAME}` (docs/ir.md).

Tensor ids are unique in the whole document, so a sub-graph's capture names the tensor of
an enclosing graph it reads (`"outer": id`). The external values of top-level captures
(Variables, tensors of a graph being traced around this one) are not serialized: the loaded
graph has placeholders whose external is a `ParsedCapture`; feed them explicitly.
Attribute values are tagged where JSON alone is ambiguous (docs/ir.md lists the tags);
constant arrays keep their raw little-endian bytes in base64, whatever their size.
"""

from __future__ import annotations

import base64
import json
import math

import numpy as np

from tracegrad.core import dtypes
from tracegrad.core.ir import FuncGraph, GraphTensor, Literal
from tracegrad.core.parser import ParsedCapture, load_callee
from tracegrad.core.printer import called_functions, function_names, is_callee
from tracegrad.core.types import TensorType
from tracegrad.errors import GraphParseError, TracegradError

FORMAT = "tracegrad.graph"
VERSION = 2  # 2 added "functions"; a document without them is written as version 1


# -- writing ---------------------------------------------------------------------------------


class _Writer:
    def __init__(self, functions: dict[int, str]):
        self.ids: dict[int, int] = {}  # id(tensor) -> its id in the document
        self.count = 0
        self.functions = functions  # id(callee graph) -> its name in the document
        self.grad_graphs: set[int] = set()  # gradient functions traced to be written out
        self.in_grad_graph = False

    def tensor(self, t: GraphTensor, **extra) -> dict:
        # A sub-graph held twice is written twice, with fresh ids the second time.
        self.ids[id(t)] = self.count
        self.count += 1
        out = {"id": self.ids[id(t)]}
        if t.name is not None:
            out["name"] = t.name
        out["type"] = str(t.type)
        out.update(extra)
        return out

    def ref(self, t, where: str) -> int:
        found = self.ids.get(id(t))
        if found is None:
            raise TracegradError(f"to_json: {where} is not defined in the graph (verify it)")
        return found

    def graph(self, graph: FuncGraph) -> dict:
        saved = self.in_grad_graph
        self.in_grad_graph = saved or id(graph) in self.grad_graphs
        try:
            return self._graph(graph)
        finally:
            self.in_grad_graph = saved

    def _graph(self, graph: FuncGraph) -> dict:
        inputs = [self.tensor(t) for t in graph.inputs]
        captures = []
        for external, p in graph.captures:
            outer = self.ids.get(id(external)) if isinstance(external, GraphTensor) else None
            captures.append(self.tensor(p, outer=outer))
        operations = []
        for k, op in enumerate(graph.operations):
            where = f"op #{k} {op.primitive.name} of @{graph.name} (created at {op.source})"
            op = self.deferred(op)
            entry = {
                "primitive": op.primitive.name,
                "inputs": [self.ref(t, f"operand {j} of {where}")
                           for j, t in enumerate(op.inputs)],
                "attrs": {name: self.attr(v, f"attribute {name} of {where}")
                          for name, v in op.attrs.items()},
            }
            entry["outputs"] = [self.tensor(t) for t in op.outputs]
            entry["source"] = op.source or "<unknown>"
            if op.grad_override is not None:
                override = getattr(op.grad_override, "serialized_as", op.grad_override)
                if not isinstance(override, str):
                    raise TracegradError(
                        f"to_json: {where} has a gradient override that is a Python "
                        f"function ({op.grad_override!r}); only registered names serialize"
                    )
                entry["grad_override"] = override
            operations.append(entry)
        return {
            "name": graph.name,
            "inputs": inputs,
            "captures": captures,
            "operations": operations,
            "outputs": [self.ref(t, f"output {i} of @{graph.name}")
                        for i, t in enumerate(graph.outputs)],
        }

    def deferred(self, op):
        """`op`, or for an op whose gradient function is traced when asked for (a
        custom_gradient), the op with that function traced into its attributes. One order
        is written out: gradient functions called inside it stay unwritten (one that calls
        its own function would never end)."""
        materialized = getattr(op.grad_override, "materialized", None)
        if materialized is None or self.in_grad_graph:
            return op
        op = materialized(op)
        self.grad_graphs.add(id(op.attrs["grad_graph"]))
        return op

    def attr(self, v, where: str):
        if v is None or isinstance(v, (bool, str)):
            return v
        if isinstance(v, (int, np.integer)) and not isinstance(v, np.bool_):
            return int(v)
        if isinstance(v, (float, np.floating)):
            v = float(v)
            return v if math.isfinite(v) else {"float": repr(v)}
        if isinstance(v, (complex, np.complexfloating)):
            return {"complex": [self.attr(float(v.real), where), self.attr(float(v.imag), where)]}
        if isinstance(v, np.bool_):
            return bool(v)
        if isinstance(v, tuple):
            return {"tuple": [self.attr(x, where) for x in v]}
        if isinstance(v, np.dtype):
            return {"dtype": v.name}
        if isinstance(v, TensorType):
            return {"type": str(v)}
        if isinstance(v, Literal):
            a = v.value
            raw = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<")).tobytes()
            return {"literal": {"dtype": a.dtype.name, "shape": list(a.shape),
                                "data": base64.b64encode(raw).decode("ascii")}}
        if isinstance(v, FuncGraph):
            return {"graph": self.graph(v)}
        if is_callee(v):
            return {"function": self.functions[id(v.graph)]}
        raise TracegradError(
            f"to_json: {where} is a {type(v).__name__} ({v!r}), which JSON cannot hold"
        )


def graph_to_json(graph: FuncGraph, indent: int | None = None) -> str:
    """The JSON document for `graph` (see the module docstring)."""
    callees = called_functions(graph)
    names = function_names(graph, callees)
    writer = _Writer(names)
    doc = {"format": FORMAT, "version": VERSION if callees else 1,
           "graph": writer.graph(graph)}
    if callees:
        functions = []
        for c in callees:
            if any(isinstance(e, GraphTensor) for e, _ in c.graph.captures):
                raise TracegradError(
                    f"to_json: function @{c.graph.name} reads tensors of the trace it was "
                    "made in; only functions independent of their caller serialize"
                )
            entry = writer.graph(c.graph)
            entry["name"] = names[id(c.graph)]
            functions.append(entry)
        doc["functions"] = functions
    return json.dumps(doc, indent=indent, allow_nan=False)


# -- reading ---------------------------------------------------------------------------------


class _Reader:
    def __init__(self):
        self.tensors: dict[int, GraphTensor] = {}
        self.functions: dict[str, object] = {}  # name -> callee

    def fail(self, path: str, message: str):
        raise GraphParseError(f"from_json: {path}: {message}")

    def field(self, obj, key: str, kind, path: str):
        if not isinstance(obj, dict):
            self.fail(path, f"expected an object, got {type(obj).__name__}")
        if key not in obj:
            self.fail(path, f"missing field {key!r}")
        value = obj[key]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            names = kind.__name__ if isinstance(kind, type) else "/".join(
                k.__name__ for k in kind)
            self.fail(f"{path}.{key}", f"expected {names}, got {type(value).__name__}")
        return value

    def type_(self, obj, path: str) -> TensorType:
        text = self.field(obj, "type", str, path)
        try:
            return TensorType.parse(text)
        except (ValueError, TracegradError) as e:
            self.fail(f"{path}.type", f"bad tensor type {text!r} ({e})")

    def define(self, obj, tensor: GraphTensor, path: str):
        tid = self.field(obj, "id", int, path)
        if tid in self.tensors:
            self.fail(f"{path}.id", f"tensor id {tid} is defined twice")
        self.tensors[tid] = tensor

    def ref(self, tid, graph: FuncGraph, path: str) -> GraphTensor:
        t = self.tensors.get(tid) if isinstance(tid, int) and not isinstance(tid, bool) else None
        if t is None:
            self.fail(path, f"{tid!r} is not the id of a tensor defined before")
        if t.graph is not graph:
            self.fail(path, f"tensor {tid} belongs to @{t.graph.name}, not @{graph.name}")
        return t

    def graph(self, obj, outer: FuncGraph | None, path: str) -> FuncGraph:
        from tracegrad.core.op import REGISTRY

        graph = FuncGraph(self.field(obj, "name", str, path), outer=outer)
        for i, t in enumerate(self.field(obj, "inputs", list, path)):
            p = f"{path}.inputs[{i}]"
            self.define(t, graph.add_input(self.type_(t, p), self.name(t, p)), p)
        for i, c in enumerate(self.field(obj, "captures", list, path)):
            p = f"{path}.captures[{i}]"
            type_, name = self.type_(c, p), self.name(c, p)
            external = ParsedCapture(name, type_)
            if c.get("outer") is not None:
                external = self.tensors.get(c["outer"]) if isinstance(c["outer"], int) else None
                if external is None or not external.graph.is_ancestor_of(graph):
                    self.fail(f"{p}.outer", f"{c['outer']!r} is not a tensor of an "
                                            "enclosing graph")
                if any(e is external for e, _ in graph.captures):
                    self.fail(f"{p}.outer", f"tensor {c['outer']} is captured twice")
            self.define(c, graph.capture(external, type_, name), p)
        for k, o in enumerate(self.field(obj, "operations", list, path)):
            p = f"{path}.operations[{k}]"
            name = self.field(o, "primitive", str, p)
            prim = REGISTRY.get(name)
            if prim is None:
                self.fail(f"{p}.primitive", f"unknown primitive {name!r}" + (
                    " (import tracegrad, which loads tracegrad.ops, before reading graphs)"
                    if len(REGISTRY) <= 1 else ""))
            inputs = [self.ref(t, graph, f"{p}.inputs[{j}]")
                      for j, t in enumerate(self.field(o, "inputs", list, p))]
            attrs = {key: self.attr(v, graph, f"{p}.attrs.{key}")
                     for key, v in self.field(o, "attrs", dict, p).items()}
            outputs = self.field(o, "outputs", list, p)
            types = [self.type_(t, f"{p}.outputs[{i}]") for i, t in enumerate(outputs)]
            try:
                inferred = prim.infer([t.type for t in inputs], attrs)
            except Exception as e:
                self.fail(p, f"{name}: {type(e).__name__}: {e}")
            if inferred != types:
                self.fail(f"{p}.outputs", f"{name} infers ({', '.join(map(str, inferred))}), "
                                          f"the document says ({', '.join(map(str, types))})")
            source = o.get("source")
            if not isinstance(source, str):
                self.fail(f"{p}.source", "expected a string")
            op = graph.add_operation(prim, inputs, attrs, inferred, source)
            override = o.get("grad_override")
            if override is not None and not isinstance(override, str):
                self.fail(f"{p}.grad_override", "expected a registered gradient name")
            op.grad_override = override
            for i, (t, out) in enumerate(zip(outputs, op.outputs, strict=True)):
                out.name = self.name(t, f"{p}.outputs[{i}]")
                self.define(t, out, f"{p}.outputs[{i}]")
        graph.outputs = [self.ref(t, graph, f"{path}.outputs[{i}]")
                         for i, t in enumerate(self.field(obj, "outputs", list, path))]
        return graph

    def name(self, obj, path: str):
        name = obj.get("name")
        if name is not None and not isinstance(name, str):
            self.fail(f"{path}.name", "expected a string")
        return name

    def attr(self, v, graph: FuncGraph, path: str):
        if v is None or isinstance(v, (bool, int, float, str)):
            return v
        if isinstance(v, list):
            self.fail(path, "a bare list is not an attribute (tuples are {\"tuple\": [...]})")
        if not isinstance(v, dict) or len(v) != 1:
            self.fail(path, f"expected a value or a one-key tagged object, got {v!r}")
        (tag, body), = v.items()
        if tag == "tuple" and isinstance(body, list):
            return tuple(self.attr(x, graph, f"{path}[{i}]") for i, x in enumerate(body))
        if tag == "float" and body in ("inf", "-inf", "nan"):
            return float(body)
        if tag == "complex" and isinstance(body, list) and len(body) == 2:
            re, im = (self.attr(x, graph, f"{path}[{i}]") for i, x in enumerate(body))
            if isinstance(re, float) and isinstance(im, float):
                return complex(re, im)
        if tag == "dtype" and isinstance(body, str):
            try:
                return dtypes.canonicalize(body)
            except TracegradError as e:
                self.fail(path, str(e))
        if tag == "type" and isinstance(body, str):
            return self.type_(v, path)
        if tag == "literal":
            return self.literal(body, path)
        if tag == "graph":
            return self.graph(body, graph, f"{path}.graph")
        if tag == "function" and isinstance(body, str):
            callee = self.functions.get(body)
            if callee is None:
                self.fail(path, f"{body!r} names no function listed after the graph that "
                                "calls it")
            return callee
        self.fail(path, f"unknown attribute tag {tag!r} or a malformed body")

    def literal(self, body, path: str) -> Literal:
        name = self.field(body, "dtype", str, path)
        shape = self.field(body, "shape", list, path)
        data = self.field(body, "data", str, path)
        try:
            dtype = dtypes.canonicalize(name)
        except TracegradError as e:
            self.fail(f"{path}.dtype", str(e))
        if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
            self.fail(f"{path}.shape", f"expected non-negative ints, got {shape}")
        try:
            raw = base64.b64decode(data, validate=True)
        except ValueError as e:
            self.fail(f"{path}.data", f"bad base64: {e}")
        count = math.prod(shape)
        if len(raw) != count * dtype.itemsize:
            self.fail(f"{path}.data", f"{len(raw)} bytes do not hold {count} {name} values")
        array = np.frombuffer(raw, dtype=dtype.newbyteorder("<")).astype(dtype).reshape(shape)
        array.flags.writeable = False
        return Literal(array)


def graph_from_json(text: str) -> FuncGraph:
    """The `FuncGraph` in a JSON document written by `graph_to_json`."""
    from tracegrad.core.verify import verify

    try:
        doc = json.loads(text)
    except (json.JSONDecodeError, TypeError) as e:
        raise GraphParseError(f"from_json: not valid JSON: {e}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise GraphParseError(
            f"from_json: not a tracegrad graph document (expected \"format\": \"{FORMAT}\")"
        )
    version = doc.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise GraphParseError(f"from_json: bad version {version!r}")
    if version > VERSION:
        raise GraphParseError(
            f"from_json: the document has format version {version}, written by a newer "
            f"tracegrad; this one reads versions up to {VERSION}: upgrade tracegrad"
        )
    reader = _Reader()
    functions = doc.get("functions", [])
    if not isinstance(functions, list):
        reader.fail("document.functions", "expected a list")
    for i in reversed(range(len(functions))):  # callees before their callers
        callee_graph = reader.graph(functions[i], None, f"functions[{i}]")
        verify(callee_graph)
        if callee_graph.name in reader.functions:
            reader.fail(f"functions[{i}].name", f"function {callee_graph.name!r} is listed "
                                                "twice")
        reader.functions[callee_graph.name] = load_callee(callee_graph)
    graph = reader.graph(reader.field(doc, "graph", dict, "document"), None, "graph")
    verify(graph)
    return graph
