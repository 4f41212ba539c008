"""The IR: `Tensor` (symbolic `GraphTensor` or concrete `EagerTensor`), `Operation`, `FuncGraph`.

A `FuncGraph` is a list of `Operation`s in topological order between its `inputs`
(and capture placeholders) and its `outputs`. Each operation applies one primitive to
tensors of the same graph, carries hashable keyword attributes and records the user's
file:line that created it.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from tracegrad.core import dtypes
from tracegrad.core.source import user_location
from tracegrad.core.state import state
from tracegrad.core.types import TensorType
from tracegrad.errors import ArgumentTypeError, TracegradError, TracerBoolError

class Tensor:
    """A multi-dimensional array value: symbolic inside traced code, concrete eagerly.

    Operators, methods (`.sum`, `.reshape`, `.T` ...) and the NumPy protocols are
    installed by `tracegrad.numpy`.
    """

    # `_view`: None, or the key of the basic indexing (`x[1:-1]`) that made this tensor,
    # where NumPy's result would be a view of `x`: in-place operators on it raise, as they
    # could not change `x`.
    __slots__ = ("_view",)
    __array_priority__ = 1000

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int | None:
        n = 1
        for d in self.shape:
            if d is None:
                return None
            n *= d
        return n

    def __len__(self):
        d = self.shape[0] if self.shape else None
        if not self.shape:
            raise ArgumentTypeError("len() of a rank-0 tensor")
        if d is None:
            raise ArgumentTypeError("len() of a tensor whose first dim is unknown")
        return d

    def __iter__(self):
        n = len(self)
        return (self[i] for i in range(n))

    __hash__ = object.__hash__


class GraphTensor(Tensor):
    """A symbolic tensor: the output `index` of `op` in `graph` (`op` is None for inputs)."""

    __slots__ = ("type", "graph", "op", "index", "name", "__weakref__")

    def __init__(self, type_: TensorType, graph: FuncGraph, op=None, index=0, name=None):
        self.type = type_
        self.graph = graph
        self.op = op
        self.index = index
        self.name = name
        self._view = None

    @property
    def shape(self) -> tuple:
        return self.type.shape

    @property
    def dtype(self) -> np.dtype:
        return self.type.dtype

    @property
    def weak_type(self) -> bool:
        return self.type.weak

    def _where(self) -> str:
        return self.op.source if self.op is not None else user_location()

    def _bool_error(self, what: str):
        return TracerBoolError(
            f"{what} of a traced Tensor ({self.type}) at {user_location()}: its value is "
            "not known while tracing. Use tg.cond / tg.while_loop / tnp.where for "
            "data-dependent control flow, or mark the argument static with "
            "static_argnums / static_argnames."
        )

    def __bool__(self):
        raise self._bool_error("bool()")

    def __int__(self):
        raise self._bool_error("int()")

    def __float__(self):
        raise self._bool_error("float()")

    def __index__(self):
        raise self._bool_error("using as an index (__index__)")

    def __complex__(self):
        raise self._bool_error("complex()")

    def __array__(self, dtype=None, copy=None):
        raise TracegradError(
            f"cannot convert a traced Tensor ({self.type}) to a NumPy array at "
            f"{user_location()}: NumPy functions on a Tensor dispatch to tracegrad; "
            "use tracegrad.numpy for ops NumPy cannot dispatch (np.asarray, in-place writes)"
        )

    def numpy(self):
        raise TracegradError(
            f".numpy() of a traced Tensor ({self.type}) at {user_location()}: "
            "its value is only known when the compiled function runs"
        )

    def __repr__(self):
        made = f"{self.op.primitive.name} at {self.op.source}" if self.op else "input"
        return f"<tg.Tensor {self.type} traced: {made}>"


class EagerTensor(Tensor):
    """A concrete tensor holding a NumPy array; `.numpy()` returns it."""

    __slots__ = ("_value", "__weakref__")

    def __init__(self, value: np.ndarray):
        self._value = value
        self._view = None

    @property
    def shape(self) -> tuple:
        return self._value.shape

    @property
    def dtype(self) -> np.dtype:
        return self._value.dtype

    @property
    def type(self) -> TensorType:
        return TensorType(self._value.shape, self._value.dtype)

    weak_type = False

    def numpy(self):
        """The value as a NumPy array (a NumPy scalar for rank 0)."""
        v = self._value
        return v[()] if v.ndim == 0 else v

    def __array__(self, dtype=None, copy=None):
        v = self._value
        if dtype is not None and np.dtype(dtype) != v.dtype:
            return v.astype(dtype)
        return v.copy() if copy else v

    def __bool__(self):
        return bool(self._value)

    def __int__(self):
        return int(self._value)

    def __float__(self):
        return float(self._value)

    def __index__(self):
        if not dtypes.is_int(self._value.dtype) or self._value.ndim:
            raise ArgumentTypeError("only integer rank-0 tensors can be used as an index")
        return int(self._value)

    def __complex__(self):
        return complex(self._value)

    def __format__(self, spec):
        if self._value.ndim == 0:
            return format(self._value[()], spec)
        return format(str(self), spec)

    def __repr__(self):
        return (
            f"<tg.Tensor: shape={self.shape}, dtype={self.dtype.name}, "
            f"numpy={np.array_repr(self._value)}>"
        )

    def __str__(self):
        return str(self._value)

    def __reduce__(self):
        return (EagerTensor, (self._value,))


class Literal:
    """A constant array as an op attribute: hashable by content, printed by value."""

    __slots__ = ("value", "_hash")

    def __init__(self, value: np.ndarray):
        self.value = value
        self._hash = None

    def __hash__(self):
        if self._hash is None:
            v = self.value
            digest = hashlib.blake2b(np.ascontiguousarray(v).tobytes(), digest_size=8)
            self._hash = hash((v.dtype.str, v.shape, digest.digest()))
        return self._hash

    def __eq__(self, other):
        return (
            type(other) is Literal
            and self.value.dtype == other.value.dtype
            and self.value.shape == other.value.shape
            and np.array_equal(self.value, other.value, equal_nan=self.value.dtype.kind in "fc")
        )

    def __repr__(self):
        v = self.value
        if v.ndim == 0:
            return repr(v[()].item())
        with np.printoptions(threshold=16, floatmode="unique"):
            return np.array2string(v, separator=", ").replace("\n", "")


class Operation:
    """One application of `primitive` to `inputs`, producing `outputs`.

    Also used, with `graph=None`, as the record of an op executed eagerly on a tape.
    """

    __slots__ = ("primitive", "inputs", "outputs", "attrs", "source", "graph", "grad_override")

    def __init__(self, primitive, inputs, attrs, source, graph=None, grad_override=None):
        self.primitive = primitive
        self.inputs = tuple(inputs)
        self.outputs = ()
        self.attrs = attrs
        self.source = source
        self.graph = graph
        self.grad_override = grad_override

    @property
    def name(self) -> str:
        return self.primitive.name

    def __repr__(self):
        return f"<Operation {self.primitive.name} at {self.source}>"


class FuncGraph:
    """A traced function: typed inputs, operations in topological order, outputs.

    `captures` lists `(external, placeholder)` pairs: values from outside the function
    (Variables, tensors of an enclosing graph) that are fed to `placeholder` at every call.
    """

    def __init__(self, name: str = "fn", outer: FuncGraph | None = None):
        self.name = name
        self.outer = outer
        self.inputs: list[GraphTensor] = []
        self.outputs: list[GraphTensor] = []
        self.operations: list[Operation] = []
        self.captures: list[tuple[Any, GraphTensor]] = []
        self._capture_map: dict[int, GraphTensor] = {}
        self._constant_cache: dict[Any, GraphTensor] = {}
        # Eager tensors read while building are captured (fed at each run) rather than
        # embedded as constants: a graph built to run once eagerly (a vectorized tape
        # Jacobian) keeps them connected to the tapes that watch them.
        self.capture_eager = outer.capture_eager if outer is not None else False

    # -- building --------------------------------------------------------------------------

    def add_input(self, type_: TensorType, name: str | None = None) -> GraphTensor:
        t = GraphTensor(type_, self, None, len(self.inputs), name)
        self.inputs.append(t)
        return t

    def add_operation(self, primitive, inputs, attrs, out_types, source=None) -> Operation:
        """Append an op whose result types are `out_types` (a list); returns it."""
        op = Operation(
            primitive,
            inputs,
            attrs,
            source or user_location(),
            self,
            state.grad_overrides.get(primitive.name) if state.grad_overrides else None,
        )
        op.outputs = tuple(GraphTensor(t, self, op, i) for i, t in enumerate(out_types))
        self.operations.append(op)
        return op

    def capture(self, external, type_: TensorType, name: str | None = None) -> GraphTensor:
        """The placeholder fed with `external` at every call (created once per value)."""
        key = id(external)
        found = self._capture_map.get(key)
        if found is not None:
            return found
        placeholder = GraphTensor(type_, self, None, -1, name)
        self.captures.append((external, placeholder))
        self._capture_map[key] = placeholder
        return placeholder

    def constant(self, value: np.ndarray, weak: bool = False) -> GraphTensor:
        """A `constant` op holding `value` (small constants are shared)."""
        from tracegrad.core.op import constant_p

        value = np.array(value, copy=True)
        value.flags.writeable = False
        small = value.size <= 16
        if small:
            key = (value.dtype.str, value.shape, value.tobytes(), weak)
            found = self._constant_cache.get(key)
            if found is not None:
                return found
        attrs = {"value": Literal(value), "weak": True} if weak else {"value": Literal(value)}
        out = constant_p.bind_in_graph(self, (), attrs)
        if small:
            self._constant_cache[key] = out
        return out

    def owns(self, t: GraphTensor) -> bool:
        return t.graph is self

    def is_ancestor_of(self, graph: FuncGraph) -> bool:
        g = graph.outer
        while g is not None:
            if g is self:
                return True
            g = g.outer
        return False

    def to_tensor(self, value) -> GraphTensor:
        """`value` as a tensor of this graph: captured, embedded as a constant or as is."""
        from tracegrad.core.variables import Variable

        if isinstance(value, GraphTensor):
            if value.graph is self:
                return value
            stand_in = state.stand_ins.get(id(value))
            if stand_in is not None and stand_in[0] is value:
                return self.to_tensor(stand_in[1])
            if value.graph.is_ancestor_of(self):
                return self.capture(value, value.type)
            raise TracegradError(
                f"a traced Tensor ({value.type}) created at {value._where()} is used at "
                f"{user_location()} outside the function that traced it (a leaked tracer); "
                "return it from the function instead"
            )
        if isinstance(value, EagerTensor):
            if self.capture_eager:
                return self.capture(value, value.type)
            return self.constant(value._value)
        if isinstance(value, Variable):
            return value._read_in_graph(self)
        if isinstance(value, (bool, int, float, complex)) and not isinstance(value, np.generic):
            dtype = dtypes.python_scalar_dtype(value)
            return self.constant(np.asarray(value, dtype), weak=True)
        arr = np.asarray(value)
        dtype = dtypes.canonicalize(arr.dtype)
        return self.constant(arr if arr.dtype == dtype else arr.astype(dtype))

    # -- views -----------------------------------------------------------------------------

    @property
    def capture_placeholders(self) -> list[GraphTensor]:
        return [p for _, p in self.captures]

    @property
    def all_inputs(self) -> list[GraphTensor]:
        """Inputs followed by capture placeholders: what a compiled graph is fed."""
        return self.inputs + [p for _, p in self.captures]

    def __str__(self):
        from tracegrad.core.printer import format_graph

        return format_graph(self)

    def pretty(self, *, locations: bool = False) -> str:
        """The text form of the graph (`locations=True` adds each op's file:line)."""
        from tracegrad.core.printer import format_graph

        return format_graph(self, locations=locations)

    def __repr__(self):
        return (
            f"<FuncGraph @{self.name}: {len(self.inputs)} inputs, "
            f"{len(self.operations)} ops, {len(self.outputs)} outputs>"
        )

    @staticmethod
    def parse(text: str) -> FuncGraph:
        """Read back the text form printed by `str(graph)`."""
        from tracegrad.core.parser import parse_graph

        return parse_graph(text)

    def to_json(self) -> str:
        from tracegrad.core.serialize import graph_to_json

        return graph_to_json(self)

    @staticmethod
    def from_json(text: str) -> FuncGraph:
        from tracegrad.core.serialize import graph_from_json

        return graph_from_json(text)

    def to_dot(self) -> str:
        from tracegrad.core.printer import format_dot

        return format_dot(self)

    def as_default(self):
        """Context manager making this the graph new ops go into."""
        return _GraphContext(self)


class _GraphContext:
    """Makes a graph current; eager tapes are set aside while it is being built."""

    __slots__ = ("graph", "saved")

    def __init__(self, graph: FuncGraph):
        self.graph = graph

    def __enter__(self):
        self.saved = (state.graph, state.tapes)
        state.graph = self.graph
        state.tapes = []
        return self.graph

    def __exit__(self, *exc):
        state.graph, state.tapes = self.saved
