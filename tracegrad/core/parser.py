"""Reads the IR's text form back into a `FuncGraph` (`FuncGraph.parse(text)`).

Primitives are looked up by name in the registry when the text is parsed (the core imports
no ops: `import tracegrad` first), result types are re-inferred with each primitive's
`abstract_eval` and must equal the printed ones. The functions `call` ops call follow the
graph (callers first); each becomes a callee through `load_callee` (the loader
`set_callee_loader` installs). Errors give the line and column.
"""

from __future__ import annotations

import ast
import re

import numpy as np

from tracegrad.core import dtypes
from tracegrad.core.hooks import Hook
from tracegrad.core.ir import FuncGraph, GraphTensor, Literal
from tracegrad.core.printer import LITERAL_PRINT_LIMIT
from tracegrad.core.types import TensorType
from tracegrad.errors import GraphParseError, TracegradError

_TOKEN = re.compile(
    r"""
    (?P<ws>[ \t\r\n]+)
  | (?P<comment>\#[^\n]*)
  | (?P<arrow>->)
  | (?P<ellipsis>\.\.\.)
  | (?P<complex>-?(?:inf|nan|(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?)
                [+-](?:inf|nan|(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?)j)
  | (?P<number>-?(?:inf|nan)\b|-?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?)
  | (?P<value>%[\w]+)
  | (?P<graph>@(?:"(?:[^"\\\n]|\\.)*"|[A-Za-z_<>][\w.<>]*))
  | (?P<string>'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*")
  | (?P<opaque><(?:[^<>\n]|<[^<>\n]*>)*>)
  | (?P<name>[A-Za-z_][\w.]*)
  | (?P<punct>[()\[\]{},=:~?])
    """,
    re.VERBOSE,
)


class _Token:
    __slots__ = ("kind", "text", "line", "col")

    def __init__(self, kind, text, line, col):
        self.kind, self.text, self.line, self.col = kind, text, line, col

    def __repr__(self):
        return "end of text" if self.kind == "end" else repr(self.text)


def _tokenize(text: str) -> list[_Token]:
    tokens = []
    match = _TOKEN.match
    pos, line, line_start, n = 0, 1, 0, len(text)
    while pos < n:
        m = match(text, pos)
        if m is None:
            raise GraphParseError(
                f"line {line}, column {pos - line_start + 1}: unexpected character "
                f"{text[pos]!r}"
            )
        kind, end = m.lastgroup, m.end()
        if kind == "ws":  # only whitespace holds newlines
            newlines = text.count("\n", pos, end)
            if newlines:
                line += newlines
                line_start = text.rfind("\n", pos, end) + 1
        else:
            tokens.append(_Token(kind, text[pos:end], line, pos - line_start + 1))
        pos = end
    tokens.append(_Token("end", "", line, pos - line_start + 1))
    return tokens


class _Scope:
    """The SSA names visible in one graph (and, for captures only, in enclosing graphs)."""

    def __init__(self, graph: FuncGraph, parent: _Scope | None):
        self.graph = graph
        self.parent = parent
        self.values: dict[str, GraphTensor] = {}

    def outer_lookup(self, name: str):
        scope = self.parent
        while scope is not None:
            if name in scope.values:
                return scope.values[name]
            scope = scope.parent
        return None


# `loader(graph) -> callee`: how a function read back from text or JSON becomes the callee of
# the `call` ops that name it (an object with `.graph`, see ops/custom.py); installed by
# tracegrad/transforms/custom.py (the core imports no transforms).
_callee_loader = Hook("the callee loader of call ops read from text or JSON",
                      "tracegrad.transforms.custom")


def set_callee_loader(loader) -> None:
    """Install `loader(graph) -> callee`, which `load_callee` calls."""
    _callee_loader.install(loader)


def load_callee(graph: FuncGraph):
    """The callee of `call` ops naming `graph` (a UsageError if no loader is installed)."""
    return _callee_loader(graph)


class ParsedCapture:
    """Stands for the external value of a capture read from text or JSON (not serialized).

    Feed the placeholder explicitly when running such a graph
    (`evaluate(graph, *inputs, *capture_values)`).
    """

    __slots__ = ("name", "type")

    def __init__(self, name: str | None, type_: TensorType):
        self.name = name
        self.type = type_

    def __repr__(self):
        return f"<external value of capture {self.name!r}: {self.type}>"


class _Parser:
    def __init__(self, text: str):
        self.lines = text.splitlines()
        self.tokens = _tokenize(text)
        self.pos = 0
        self.functions: dict[str, object] = {}  # name -> callee, for `callee=@name`

    # -- tokens ------------------------------------------------------------------------------

    def peek(self, k: int = 0) -> _Token:
        i = self.pos
        while True:
            t = self.tokens[i]
            if t.kind != "comment":
                if k == 0:
                    return t
                k -= 1
            i += 1

    def next(self) -> _Token:
        while self.tokens[self.pos].kind == "comment":
            self.pos += 1
        t = self.tokens[self.pos]
        if t.kind != "end":
            self.pos += 1
        return t

    def at(self, text: str) -> bool:
        t = self.peek()
        return t.text == text and t.kind in ("punct", "name", "arrow", "ellipsis")

    def expect(self, text: str, what: str | None = None) -> _Token:
        t = self.next()
        if t.text != text or t.kind not in ("punct", "name", "arrow"):
            self.fail(t, f"expected {what or repr(text)}, got {t!r}")
        return t

    def expect_kind(self, kind: str, what: str) -> _Token:
        t = self.next()
        if t.kind != kind:
            self.fail(t, f"expected {what}, got {t!r}")
        return t

    def comment_on_line(self, line: int) -> str | None:
        """The text of a `# ...` comment that follows on `line`, consumed."""
        t = self.tokens[self.pos]
        if t.kind == "comment" and t.line == line:
            self.pos += 1
            return t.text[1:].strip()
        return None

    def fail(self, t: _Token, message: str):
        where = f"line {t.line}, column {t.col}"
        source = self.lines[t.line - 1].strip() if 0 < t.line <= len(self.lines) else ""
        raise GraphParseError(f"{where}: {message}" + (f"\n    {source}" if source else ""))

    # -- types -------------------------------------------------------------------------------

    def tensor_type(self) -> TensorType:
        first = self.peek()
        weak = self.at("~")
        if weak:
            self.next()
        name = self.expect_kind("name", "a tensor type such as f64[3]")
        dtype = self.dtype(name)
        self.expect("[", "'[' after the dtype of a tensor type")
        return TensorType(self.dims(first), dtype, weak)

    def dtype(self, t: _Token) -> np.dtype:
        dt = _DTYPES.get(t.text)
        if dt is None:
            self.fail(t, f"unknown dtype {t.text!r} (expected one of f64, f32, i64, i32, bool)")
        return dt

    def dims(self, first: _Token) -> tuple:
        dims = []
        while not self.at("]"):
            t = self.next()
            if t.text == "?":
                dims.append(None)
            elif t.kind == "number" and re.fullmatch(r"\d+", t.text):
                dims.append(int(t.text))
            else:
                self.fail(t, f"expected a dim (a size or ?), got {t!r}")
            if not self.at("]"):
                self.expect(",", "',' or ']' in a shape")
        self.next()
        return tuple(dims)

    def type_list(self) -> list[TensorType]:
        types = [self.tensor_type()]
        while self.at(","):
            self.next()
            types.append(self.tensor_type())
        return types

    # -- graphs ------------------------------------------------------------------------------

    def graph(self, parent: _Scope | None) -> FuncGraph:
        self.expect("func", "'func'")
        name = _graph_name(self.expect_kind("graph", "a graph name such as @f"))
        graph = FuncGraph(name, outer=parent.graph if parent else None)
        scope = _Scope(graph, parent)
        self.expect("(")
        while not self.at(")"):
            t = self.expect_kind("value", "a parameter such as %x")
            self.expect(":", "':' and the parameter's type")
            self.define(scope, t, graph.add_input(self.tensor_type(), t.text[1:]))
            if not self.at(")"):
                self.expect(",", "',' or ')' after a parameter")
        self.next()
        if self.at("captures"):
            self.captures(scope)
        self.expect("->")
        self.expect("(")
        declared = [] if self.at(")") else self.type_list()
        self.expect(")", "')' after the result types")
        self.expect("{")
        while not self.at("return"):
            if self.peek().kind == "end" or self.at("}"):
                self.fail(self.peek(), f"graph @{name} has no return")
            self.operation(scope)
        ret = self.next()
        outputs = []
        if self.peek().kind == "value":
            outputs.append(self.use(scope, self.next()))
            while self.at(","):
                self.next()
                outputs.append(self.use(scope, self.expect_kind("value", "a value")))
        self.expect("}", "'}' after return")
        types = [t.type for t in outputs]
        if types != declared:
            self.fail(ret, f"@{name} returns {_types(types)} but its header says "
                           f"-> ({_types(declared)})")
        graph.outputs = outputs
        return graph

    def captures(self, scope: _Scope):
        self.next()
        self.expect("(")
        graph = scope.graph
        while not self.at(")"):
            t = self.expect_kind("value", "a capture such as %w")
            self.expect(":")
            type_ = self.tensor_type()
            external = ParsedCapture(t.text[1:], type_)
            if self.at("="):
                self.next()
                ref = self.expect_kind("value", "the captured value of an enclosing graph")
                external = scope.outer_lookup(ref.text[1:])
                if external is None:
                    self.fail(ref, f"{ref.text} is not a value of an enclosing graph")
                if external.type != type_:
                    self.fail(ref, f"capture {t.text}: {type_} of {ref.text}, which is "
                                   f"{external.type}")
                if any(e is external for e, _ in graph.captures):
                    self.fail(ref, f"{ref.text} is captured twice")
            self.define(scope, t, graph.capture(external, type_, t.text[1:]))
            if not self.at(")"):
                self.expect(",", "',' or ')' after a capture")
        self.next()

    def define(self, scope: _Scope, t: _Token, tensor: GraphTensor):
        name = t.text[1:]
        if name in scope.values:
            self.fail(t, f"{t.text} is defined twice")
        scope.values[name] = tensor

    def use(self, scope: _Scope, t: _Token) -> GraphTensor:
        found = scope.values.get(t.text[1:])
        if found is not None:
            return found
        if scope.outer_lookup(t.text[1:]) is not None:
            self.fail(t, f"{t.text} belongs to an enclosing graph: a sub-graph reads it "
                         "through a capture (captures(%c: TYPE = " + t.text + "))")
        self.fail(t, f"{t.text} is used before it is defined")

    # -- operations --------------------------------------------------------------------------

    def operation(self, scope: _Scope):
        start = self.peek()
        results = []
        if start.kind == "value":
            results.append(self.next())
            while self.at(","):
                self.next()
                results.append(self.expect_kind("value", "a result name"))
            self.expect("=", "'=' after the results")
        prim_tok = self.expect_kind("name", "a primitive name")
        operands = []
        if self.peek().kind == "value" and self.peek().line == prim_tok.line:
            operands.append(self.use(scope, self.next()))
            while self.at(","):
                self.next()
                operands.append(self.use(scope, self.expect_kind("value", "an operand")))
        attrs = {}
        if self.at("{"):
            self.next()
            while not self.at("}"):
                key = self.expect_kind("name", "an attribute name")
                if key.text in attrs:
                    self.fail(key, f"attribute {key.text} is given twice")
                self.expect("=", f"'=' after attribute {key.text}")
                attrs[key.text] = self.attr_value(scope)
                if not self.at("}"):
                    self.expect(",", "',' or '}' after an attribute")
            self.next()
        types = []
        last_line = self.tokens[self.pos - 1].line
        if self.at(":"):
            self.next()
            types = self.type_list()
            last_line = self.tokens[self.pos - 1].line
        location = self.comment_on_line(last_line)
        prim = _primitive(self, prim_tok)
        try:
            inferred = prim.infer([t.type for t in operands], attrs)
        except TracegradError as e:
            self.fail(prim_tok, str(e))
        except Exception as e:  # missing, unexpected or ill-typed attributes
            self.fail(prim_tok, f"{prim.name}: attributes {attrs} do not fit: "
                                f"{type(e).__name__}: {e}")
        if len(results) != len(inferred) or types != inferred:
            self.fail(prim_tok, f"{prim.name} gives {len(inferred)} result(s) of type "
                                f"{_types(inferred)}, the text says {len(results)} result(s) "
                                f"of type {_types(types)}")
        source = location or f"<ir>:{start.line}"
        op = scope.graph.add_operation(prim, operands, attrs, inferred, source)
        op.grad_override = None
        for t, out in zip(results, op.outputs, strict=True):
            self.define(scope, t, out)

    def attr_value(self, scope: _Scope):
        t = self.peek()
        if t.kind == "punct" and t.text == "(":
            return self.tuple_value(scope)
        if t.kind == "name" and t.text == "func":
            return self.graph(scope)
        if t.kind == "graph":  # a function defined after this graph
            self.next()
            callee = self.functions.get(_graph_name(t))
            if callee is None:
                self.fail(t, f"{t.text} names no function defined after this graph "
                             "(functions follow the graph, each after its callers)")
            return callee
        if t.kind == "string":
            self.next()
            return ast.literal_eval(t.text)
        if t.kind == "opaque":
            self.fail(t, f"attribute value {t.text} is a Python object the text form cannot "
                         "hold (serialize graphs with such attributes with to_json, or "
                         "rebuild them in Python)")
        if t.kind in ("number", "complex") or (t.kind == "punct" and t.text == "["):
            return self.number_or_literal()
        if t.kind == "punct" and t.text == "~":
            return self.tensor_type()
        if t.kind == "name":
            if t.text in ("True", "False") and self.peek(1).text == ":":
                return self.number_or_literal()
            if t.text in _CONSTANTS:
                self.next()
                return _CONSTANTS[t.text]
            if t.text in _DTYPES:
                if self.peek(1).text == "[":
                    return self.tensor_type()
                self.next()
                return _DTYPES[t.text]
        self.fail(t, f"expected an attribute value, got {t!r}")

    def tuple_value(self, scope: _Scope) -> tuple:
        self.next()
        items = []
        while not self.at(")"):
            items.append(self.attr_value(scope))
            if self.at(","):
                self.next()
            elif not self.at(")"):
                self.fail(self.peek(), f"expected ',' or ')' in a tuple, got {self.peek()!r}")
        self.next()
        return tuple(items)

    def number_or_literal(self):
        start = self.peek()
        values = self.nested_numbers()
        if not self.at(":"):
            if isinstance(values, list):
                self.fail(start, "a list is not an attribute value (attributes are hashable: "
                                 "write a tuple, or a constant array as [...]:TYPE)")
            return _number(values)
        self.next()
        type_ = self.tensor_type()
        if None in type_.shape or type_.weak:
            self.fail(start, f"a constant array has a concrete strong type, not {type_}")
        if _has_ellipsis(values):
            self.fail(start, f"this {type_} constant is elided ('...') in the text form, which "
                             f"prints at most {LITERAL_PRINT_LIMIT} elements: use "
                             "graph.to_json() / FuncGraph.from_json for a lossless copy")
        try:
            array = _literal_array(values, type_)
        except (ValueError, OverflowError) as e:
            self.fail(start, f"bad constant of type {type_}: {e}")
        return Literal(array)

    def nested_numbers(self):
        t = self.next()
        if t.kind in ("number", "complex") or (t.kind == "name" and t.text in ("True", "False")):
            return t
        if t.kind == "ellipsis":
            return ...
        if t.text != "[":
            self.fail(t, f"expected a number, got {t!r}")
        items = []
        while not self.at("]"):
            items.append(self.nested_numbers())
            if not self.at("]"):
                self.expect(",", "',' or ']' in an array")
        self.next()
        return items


_CONSTANTS = {"None": None, "True": True, "False": False}
_DTYPES = {name: dt for dt, name in dtypes.SHORT_NAMES.items()}


def _types(types) -> str:
    return ", ".join(str(t) for t in types)


def _number(t: _Token):
    if t.kind == "name":
        return t.text == "True"
    text = t.text
    if t.kind == "complex":
        split = max(text.rfind("+"), text.rfind("-"))
        while text[split - 1] in "eE":  # the sign of an exponent of the real part
            split = max(text.rfind("+", 0, split), text.rfind("-", 0, split))
        return complex(float(text[:split]), float(text[split:-1]))
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    return float(text)


def _has_ellipsis(values) -> bool:
    if values is ...:
        return True
    return isinstance(values, list) and any(_has_ellipsis(v) for v in values)


def _literal_array(values, type_: TensorType) -> np.ndarray:
    kind = type_.dtype.kind  # "c", "f", "i", "u" or "b"

    def convert(v):
        if isinstance(v, list):
            return [convert(x) for x in v]
        x = _number(v)
        if ((kind == "b") != isinstance(x, bool) or (kind in "iu" and not isinstance(x, int))
                or (kind != "c" and isinstance(x, complex))):
            raise ValueError(f"{v.text} is not a {type_.dtype.name} value")
        return x

    array = np.array(convert(values), dtype=type_.dtype)
    if array.size == 0:
        array = array.reshape(type_.shape)
    if array.shape != type_.shape:
        raise ValueError(f"the values have shape {array.shape}")
    array.flags.writeable = False
    return array


def _primitive(parser: _Parser, t: _Token):
    from tracegrad.core.op import REGISTRY

    prim = REGISTRY.get(t.text)
    if prim is None:
        hint = (
            " (only the core's primitives are registered: import tracegrad, which loads "
            "tracegrad.ops, before parsing)"
            if len(REGISTRY) <= 1 else ""
        )
        parser.fail(t, f"unknown primitive {t.text!r}{hint}")
    return prim


def _graph_name(t: _Token) -> str:
    name = t.text[1:]
    return ast.literal_eval(name) if name.startswith('"') else name


def _top_level_blocks(parser: _Parser) -> list[int]:
    """The token positions of the `func` keywords outside any braces (the first is where
    the first token that is not a comment is, whatever it is)."""
    first = next(i for i, t in enumerate(parser.tokens) if t.kind != "comment")
    starts, depth = [], 0
    for i, t in enumerate(parser.tokens):
        if t.kind == "punct" and t.text == "{":
            depth += 1
        elif t.kind == "punct" and t.text == "}":
            depth -= 1
        elif depth == 0 and t.kind == "name" and t.text == "func":
            starts.append(i)
    return starts if starts[:1] == [first] else [first, *starts]


def parse_graph(text: str) -> FuncGraph:
    """The `FuncGraph` written in `text` (the form `str(graph)` prints): the first graph,
    the functions its `call` ops call following it."""
    from tracegrad.core.verify import verify

    parser = _Parser(text)
    starts = _top_level_blocks(parser)
    ends = starts[1:] + [len(parser.tokens) - 1]  # the last token is the end marker
    graph = None
    for k in reversed(range(len(starts))):  # callees before their callers
        parser.pos = starts[k]
        graph = parser.graph(None)
        t = parser.peek()
        if parser.tokens.index(t, parser.pos) != ends[k]:
            parser.fail(t, f"unexpected {t!r} after the graph's closing brace")
        verify(graph)
        if k:
            if graph.name in parser.functions:
                parser.fail(parser.tokens[starts[k] + 1], f"function @{graph.name} is "
                                                          "defined twice")
            parser.functions[graph.name] = load_callee(graph)
    return graph
