"""The plan of a graph's kernel: dim classes, run-time integer slots, constants, and which
tensors are fused into loops ("virtual") and which become arrays or scalar locals.

Nothing here depends on concrete sizes except the slot *values*: the generated source
refers to dims only through dim classes (`n3`, read from the int vector `I`), so one
kernel serves every size with the same ranks, dtypes and size-1 pattern.

- A *dim class* is a set of (tensor, axis) pairs that are equal at run time because an op
  requires it (elementwise operands, kept reduction dims, contracted dims ...): each
  primitive states which in its dims rule (`Primitive.def_dims`, beside its definition in
  `ops/`). A dim that is statically 1 is the literal `1` instead (it is part of the
  broadcast pattern).
- The int vector `I` holds, in structural order: one value per dim class, the integer
  attributes that may depend on sizes (slice starts and strides, pad amounts), and the
  integer and bool scalar constants. The float vector `F` holds float scalar constants.
- `shapes(arrays)` computes every tensor's concrete shape for a graph with unknown dims,
  re-running each op's shape rule on concrete types (a mismatch is a ShapeError naming
  the op and its source line) and evaluating the scalar ops that feed dim operands.
"""

from __future__ import annotations

import numpy as np

from tracegrad.backends.numba.lowering import check_graph
from tracegrad.core import dtypes
from tracegrad.core.ir import FuncGraph
from tracegrad.core.op import constant_p
from tracegrad.core.printer import _Names, format_op
from tracegrad.core.types import TensorType
from tracegrad.errors import ShapeError, TracegradError, UnsupportedOpError
from tracegrad.ops.shape_ops import broadcast_in_dim_p, dim_size_p


def dyn_count(op) -> int:
    """How many trailing operands of `op` are run-time dim sizes (broadcast_in_dim, iota)."""
    return op.primitive.size_operand_count(op)


def data_inputs(op):
    """The operands of `op` that are read as data (dim-size operands are not)."""
    n = dyn_count(op)
    return op.inputs[: len(op.inputs) - n] if n else op.inputs


class _UnionFind:
    """Union-find whose representative is the earliest-added member (structural order)."""

    def __init__(self):
        self.parent: dict = {}
        self.order: dict = {}

    def add(self, a):
        if a not in self.parent:
            self.parent[a] = a
            self.order[a] = len(self.order)

    def find(self, a):
        p = self.parent
        while p[a] != a:
            p[a] = p[p[a]]
            a = p[a]
        return a

    def union(self, a, b):
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            if self.order[ra] <= self.order[rb]:
                self.parent[rb] = ra
            else:
                self.parent[ra] = rb


class Plan:
    """Everything the code generator and the executor need to know about `graph`."""

    def __init__(self, graph: FuncGraph):
        check_graph(graph)
        self.graph = graph
        self.tensors = list(graph.all_inputs)
        self.input_index = {id(t): k for k, t in enumerate(graph.all_inputs)}
        for op in graph.operations:
            self.tensors.extend(op.outputs)
        self.static = all(None not in t.type.shape for t in self.tensors)
        self._number_tensors()
        self._classify_dims()
        self._count_uses()
        self.int_slots: list = []  # per slot: fn(shapes) -> int
        self.float_values: list = []
        self._class_slots()
        self.data_dependent = any(
            _reads_data(t) for op in graph.operations for t in op.inputs[
                len(op.inputs) - dyn_count(op):] if dyn_count(op)
        )

    # -- naming ------------------------------------------------------------------------------

    def _number_tensors(self):
        names = _Names()
        for i, t in enumerate(self.graph.inputs):
            names.input(t, f"arg{i}")
        for i, (_, p) in enumerate(self.graph.captures):
            names.input(p, f"capture{i}")
        self.ir_lines = {}
        for op in self.graph.operations:
            self.ir_lines[id(op)] = format_op(op, names).split("\n")[0]
        self.ir_names = {id(t): names[t] for t in self.tensors}
        self.header = str(self.graph).split("\n")[0].rstrip(" {")

    # -- dim classes ---------------------------------------------------------------------------

    def _classify_dims(self):
        uf = _UnionFind()
        for t in self.tensors:
            for ax, d in enumerate(t.type.shape):
                if d != 1:
                    uf.add((id(t), ax))

        def unify(x, i, y, j):
            a, b = (id(x), i), (id(y), j)
            if a in uf.parent and b in uf.parent:
                uf.union(a, b)

        for op in self.graph.operations:
            _unify_op(op, unify)
        self._uf = uf
        self.dim_class: dict = {}
        roots: dict = {}
        for t in self.tensors:
            for ax, d in enumerate(t.type.shape):
                a = (id(t), ax)
                if a in uf.parent:
                    r = uf.find(a)
                    if r not in roots:
                        roots[r] = (len(roots), t, ax)
                    self.dim_class[a] = roots[r][0]
        self.class_members = [None] * len(roots)
        for cls, t, ax in roots.values():
            self.class_members[cls] = (t, ax)

    def dims(self, t) -> tuple:
        """The dims of `t` as generated-code expressions: `"1"` or a class variable, as a
        slot of a statement's template (`"{n3}"`: records.py)."""
        return tuple(
            "1" if d == 1 else f"{{n{self.dim_class[(id(t), ax)]}}}"
            for ax, d in enumerate(t.shape)
        )

    def _class_slots(self):
        for t, ax in self.class_members:
            self.int_slots.append(_ShapeRead(id(t), ax))

    # -- slots for attributes and constants ----------------------------------------------------

    def int_slot(self, fn) -> int:
        """A new slot of `I` whose value is `fn(shapes)`; returns its index."""
        self.int_slots.append(fn)
        return len(self.int_slots) - 1

    def const_slot(self, value) -> tuple[str, int]:
        """(`"I"`, `"F"` or `"C"`, index) of a scalar constant's slot (a complex one takes
        two slots of `F`: its real and imaginary parts)."""
        if dtypes.is_float(value.dtype):
            self.float_values.append(float(value))
            return "F", len(self.float_values) - 1
        if dtypes.is_complex(value.dtype):
            z = complex(value)
            self.float_values.extend((z.real, z.imag))
            return "C", len(self.float_values) - 2
        # a uint64 past the int64 range keeps its bits (read back as np.uint64)
        return "I", self.int_slot(_Fixed(int(np.asarray(value).astype(np.int64))))

    # -- uses ----------------------------------------------------------------------------------

    def _count_uses(self):
        self.consumers: dict = {id(t): [] for t in self.tensors}
        for op in self.graph.operations:
            for k, t in enumerate(data_inputs(op)):
                self.consumers[id(t)].append((op, k))
        self.output_positions: dict = {}
        for k, t in enumerate(self.graph.outputs):
            self.output_positions.setdefault(id(t), []).append(k)

    def is_output(self, t) -> bool:
        return id(t) in self.output_positions

    # -- run-time shapes -----------------------------------------------------------------------

    def static_shapes(self) -> dict:
        return {id(t): t.type.shape for t in self.tensors}

    def shapes(self, arrays) -> dict:
        """The concrete shape of every tensor for these input arrays (unknown dims resolved)."""
        graph = self.graph
        shapes: dict = {}
        values: dict = {}
        for t, a in zip(graph.all_inputs, arrays, strict=True):
            if a.ndim != len(t.shape) or any(
                d is not None and d != n for d, n in zip(t.shape, a.shape)
            ):
                raise ShapeError(
                    f"{graph.name}: input {self.ir_names[id(t)]} of type {t.type} got an "
                    f"array of shape {a.shape}"
                )
            shapes[id(t)] = a.shape
            values[id(t)] = a
        for op in graph.operations:
            types = [TensorType(shapes[id(t)], t.dtype) for t in op.inputs]
            try:
                outs = op.primitive.infer(types, op.attrs)
            except TracegradError as e:
                raise type(e)(f"{e} (at run time, op created at {op.source})") from None
            n = dyn_count(op)
            if n:
                dyn = [int(_value(values, t, shapes)) for t in op.inputs[len(op.inputs) - n:]]
                it = iter(dyn)
                shape = tuple(next(it) if d is None else d for d in outs[0].shape)
                if op.primitive is broadcast_in_dim_p:
                    x = shapes[id(op.inputs[0])]
                    for i, d in enumerate(op.attrs["broadcast_dimensions"]):
                        if x[i] != 1 and x[i] != shape[d]:
                            raise ShapeError(
                                f"broadcast_in_dim: operand of shape {x} cannot be broadcast "
                                f"to {shape} (at run time, op created at {op.source})"
                            )
                outs = [TensorType(shape, outs[0].dtype)]
            for t, o in zip(op.outputs, outs, strict=True):
                shapes[id(t)] = o.shape
            if op.primitive is dim_size_p:
                values[id(op.outputs[0])] = np.int64(shapes[id(op.inputs[0])][op.attrs["axis"]])
        return shapes

    def int_values(self, shapes) -> np.ndarray:
        # a None: a size only the kernel knows (a loop's history), set in the kernel
        return np.array([fn(self, shapes) or 0 for fn in self.int_slots], dtype=np.int64)


def _reads_data(t) -> bool:
    """Whether the value of dim operand `t` depends on input data (not only on shapes)."""
    op = t.op
    if op is None:
        return True
    if op.primitive is dim_size_p or op.primitive is constant_p:
        return False
    return any(_reads_data(x) for x in op.inputs)


def _value(values, t, shapes):
    """The value of a scalar tensor that feeds a dim operand (computed with NumPy)."""
    found = values.get(id(t))
    if found is not None:
        return found
    op = t.op
    if op is None:
        raise ShapeError(f"a dim operand {t} has no value at run time")
    if op.primitive is dim_size_p:
        result = np.int64(shapes[id(op.inputs[0])][op.attrs["axis"]])
    else:
        args = [_value(values, x, shapes) for x in op.inputs]
        with np.errstate(all="ignore"):
            result = op.primitive.impl(*args, **op.attrs)
    values[id(t)] = result
    return result


class _ShapeRead:
    """Slot value: dim `axis` of the tensor with id `tid`."""

    __slots__ = ("axis", "tid")

    def __init__(self, tid, axis):
        self.tid, self.axis = tid, axis

    def __call__(self, plan, shapes):
        return shapes[self.tid][self.axis]


class _Fixed:
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __call__(self, plan, shapes):
        return self.value


class AttrSlot:
    """Slot value computed from an op's concrete operand shape: `fn(shape) -> int`."""

    __slots__ = ("fn", "tid")

    def __init__(self, tid, fn):
        self.tid, self.fn = tid, fn

    def __call__(self, plan, shapes):
        return self.fn(shapes[self.tid])


# -- which dims are equal: the primitive's dims rule (Primitive.def_dims) ---------------------


def _unify_op(op, unify):
    rule = op.primitive.dims
    if rule is None:
        raise UnsupportedOpError(
            f"numba backend: primitive {op.primitive.name!r} declares no dim relations "
            "(Primitive.def_dims; `no_dims` if none of its result dims equals an operand's)"
        )
    for x, i, y, j in rule(op):
        unify(x, i, y, j)

