"""The plan of a graph's kernel: dim classes, run-time integer slots, constants, and which
tensors are fused into loops ("virtual") and which become arrays or scalar locals.

Nothing here depends on concrete sizes except the slot *values*: the generated source
refers to dims only through dim classes (`n3`, read from the int vector `I`), so one
kernel serves every size with the same ranks, dtypes and size-1 pattern.

- A *dim class* is a set of (tensor, axis) pairs that are equal at run time because an op
  requires it (elementwise operands, kept reduction dims, contracted dims ...). A dim that
  is statically 1 is the literal `1` instead (it is part of the broadcast pattern).
- The int vector `I` holds, in structural order: one value per dim class, the integer
  attributes that may depend on sizes (slice starts and strides, pad amounts), and the
  integer and bool scalar constants. The float vector `F` holds float scalar constants.
- `shapes(arrays)` computes every tensor's concrete shape for a graph with unknown dims,
  re-running each op's shape rule on concrete types (a mismatch is a ShapeError naming
  the op and its source line) and evaluating the scalar ops that feed dim operands.
"""

from __future__ import annotations

import numpy as np

from tracegrad.core import dtypes
from tracegrad.core.ir import FuncGraph
from tracegrad.core.printer import _Names, format_op
from tracegrad.core.types import TensorType
from tracegrad.errors import ShapeError, TracegradError
from tracegrad.ops import ELEMENTWISE

# Ops the code generator can evaluate element by element inside a consumer's loop.
REMAPS = {"broadcast_in_dim", "transpose", "slice", "rev", "gather"}
GENERATORS = {"iota", "dim_size", "constant"}
FUSIBLE = {p.name for p in ELEMENTWISE} | REMAPS | GENERATORS

# Consumers that need their operand as a real (C-contiguous) array.
NEEDS_ARRAY = {"dot_general", "cholesky", "triangular_solve", "solve", "det", "slogdet",
               "reshape", "cond", "while"}

# Ops whose result is a view of an operand's array (not a fresh buffer).
VIEWS = {"reshape"}


def squeeze_map(op):
    """For a reshape that only inserts or removes size-1 dims: the `(operand axis, result
    axis)` pairs of its other dims; None for any other reshape (or unknown dims)."""
    x, out = op.inputs[0].shape, op.outputs[0].shape
    xi = [i for i, d in enumerate(x) if d != 1]
    oi = [j for j, d in enumerate(out) if d != 1]
    if len(xi) != len(oi) or any(
        x[i] is None or out[j] is None or x[i] != out[j] for i, j in zip(xi, oi)
    ):
        return None
    return list(zip(xi, oi))


def dyn_count(op) -> int:
    """How many trailing operands of a broadcast_in_dim / iota are run-time dim sizes."""
    name = op.primitive.name
    if name == "broadcast_in_dim":
        return len(op.inputs) - 1
    if name == "iota":
        return len(op.inputs)
    return 0


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
        """The dims of `t` as generated-code expressions: `"1"` or a class variable `"n3"`."""
        return tuple(
            "1" if d == 1 else f"n{self.dim_class[(id(t), ax)]}" for ax, d in enumerate(t.shape)
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
        """(`"I"` or `"F"`, index) of a scalar constant's slot."""
        if dtypes.is_float(value.dtype):
            self.float_values.append(float(value))
            return "F", len(self.float_values) - 1
        return "I", self.int_slot(_Fixed(int(value)))

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
                if op.primitive.name == "broadcast_in_dim":
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
            if op.primitive.name == "dim_size":
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
    if op.primitive.name in ("dim_size", "constant"):
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
    args = [_value(values, x, shapes) for x in op.inputs] if op.primitive.name != "dim_size" \
        else []
    if op.primitive.name == "dim_size":
        result = np.int64(shapes[id(op.inputs[0])][op.attrs["axis"]])
    else:
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


# -- which dims are equal: one rule per op family ----------------------------------------------


def _unify_same(unify, x, y):
    for i in range(len(x.shape)):
        unify(x, i, y, i)


def _unify_op(op, unify):
    name = op.primitive.name
    outs, ins, a = op.outputs, op.inputs, op.attrs
    if op.primitive in ELEMENTWISE:
        for x in ins:
            _unify_same(unify, outs[0], x)
    elif name == "broadcast_in_dim":
        for i, d in enumerate(a["broadcast_dimensions"]):
            if ins[0].shape[i] is not None:  # an unknown operand dim may broadcast from 1
                unify(ins[0], i, outs[0], d)
    elif name == "transpose":
        for i, p in enumerate(a["permutation"]):
            unify(outs[0], i, ins[0], p)
    elif name in ("reduce_sum", "reduce_prod", "reduce_max", "reduce_min", "argmax",
                  "argmin"):
        axes = a["axes"] if "axes" in a else (a["axis"],)
        keep = a.get("keepdims", False)
        j = 0
        for i in range(len(ins[0].shape)):
            if i in axes:
                j += 1 if keep else 0
                continue
            unify(ins[0], i, outs[0], j)
            j += 1
    elif name in ("cumsum", "cumprod", "sort", "argsort", "rev", "cholesky"):
        _unify_same(unify, outs[0], ins[0])
        if name == "cholesky":
            r = len(ins[0].shape)
            unify(ins[0], r - 1, ins[0], r - 2)
    elif name == "gather":
        x, idx = ins
        ax = a["axis"]
        r = len(idx.shape)
        for i in range(ax):
            unify(x, i, outs[0], i)
        for i in range(r):
            unify(idx, i, outs[0], ax + i)
        for i in range(ax + 1, len(x.shape)):
            unify(x, i, outs[0], i - 1 + r)
    elif name in ("scatter", "scatter_add"):
        x, idx, upd = ins
        ax = a["axis"]
        r = len(idx.shape)
        _unify_same(unify, outs[0], x)
        for i in range(ax):
            unify(x, i, upd, i)
        for i in range(r):
            unify(idx, i, upd, ax + i)
        for i in range(ax + 1, len(x.shape)):
            unify(x, i, upd, i - 1 + r)
    elif name == "dot_general":
        (lc, rc), (lb, rb) = a["dimension_numbers"]
        lhs, rhs = ins
        for i, j in zip(lc, rc):
            unify(lhs, i, rhs, j)
        for k, (i, j) in enumerate(zip(lb, rb)):
            unify(lhs, i, rhs, j)
            unify(lhs, i, outs[0], k)
        k = len(lb)
        for i in range(len(lhs.shape)):
            if i not in lc and i not in lb:
                unify(lhs, i, outs[0], k)
                k += 1
        for i in range(len(rhs.shape)):
            if i not in rc and i not in rb:
                unify(rhs, i, outs[0], k)
                k += 1
    elif name == "concatenate":
        dim = a["dimension"]
        for x in ins:
            for i in range(len(x.shape)):
                if i != dim:
                    unify(x, i, outs[0], i)
    elif name == "reshape":
        for i, j in squeeze_map(op) or ():
            unify(ins[0], i, outs[0], j)
    elif name in ("triangular_solve", "solve"):
        m, b = ins
        r = len(m.shape)
        unify(m, r - 1, m, r - 2)
        for i in range(r - 2):
            unify(m, i, b, i)
        left = a.get("left_side", True)
        unify(m, r - 1, b, r - 2 if left else r - 1)
        _unify_same(unify, outs[0], b)
    elif name == "while":  # the final carry, and each carry's history, have its shape
        carry = ins[a["num_consts"]:]
        m = len(carry)
        for k, x in enumerate(carry):
            _unify_same(unify, x, outs[k])
            if len(outs) > m:
                for i in range(len(x.shape)):
                    unify(x, i, outs[m + 1 + k], i + 1)
    elif name in ("det", "slogdet"):
        m = ins[0]
        r = len(m.shape)
        unify(m, r - 1, m, r - 2)
        for t in outs:
            for i in range(r - 2):
                unify(m, i, t, i)
    # reshape, slice, iota, constant, dim_size: result dims are classes of their own
