"""`Variable`: mutable state, read eagerly as a snapshot and inside traces as a capture.

Inside a `tg.function` trace a Variable may also be assigned: the trace keeps, per Variable,
the tensor holding its value at the current point of the program (`effect_scope`), reads
return it, and the function layer turns the final values into extra graph outputs that it
writes back after a successful call (docs/variables.md).
"""

from __future__ import annotations

import itertools
import sys
import weakref

import numpy as np

from tracegrad.core import dtypes
from tracegrad.core.hooks import Hook
from tracegrad.core.ir import EagerTensor, FuncGraph, GraphTensor
from tracegrad.core.shapes import shape_str
from tracegrad.core.state import state
from tracegrad.core.types import TensorType
from tracegrad.errors import DTypeError, ShapeError, TracegradError

_variable_ids = itertools.count(1)

# The graphs of `tg.function` traces being built, where Variables may be assigned: each maps
# a Variable to the tensor that holds its value at this point of the trace (insertion order:
# first assignment). Filled by the function layer's traced writes (`set_traced_write`).
_SCOPES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

# `write(variable, graph, value, how)`: binds a traced `assign` (installed by
# tracegrad/function/_effects.py, which may use the ops; core may not).
_traced_write = Hook("Variable assignment inside a trace", "tracegrad.function._effects")


def set_traced_write(write) -> None:
    """Install `write(variable, graph, value, how)`, which a Variable's assignment inside a
    trace calls."""
    _traced_write.install(write)


def effect_scope(graph: FuncGraph) -> dict:
    """Let Variables be assigned while `graph` is traced; returns its assignment map."""
    return _SCOPES.setdefault(graph, {})


def close_effect_scope(graph: FuncGraph) -> list:
    """End `graph`'s scope; returns `[(variable, final value tensor)]` in order of first
    assignment."""
    return list(_SCOPES.pop(graph, {}).items())


def scope_of(graph: FuncGraph) -> dict | None:
    """The assignment map of `graph`, if Variables may be assigned in it."""
    return _SCOPES.get(graph)


def _assigned_value(variable, graph: FuncGraph):
    """The tensor a trace assigned to `variable` last, seen from `graph`: looked up in the
    nearest enclosing `tg.function` trace (through branches, loop bodies and transforms
    traced inside it), or None."""
    g = graph
    while g is not None:
        scope = _SCOPES.get(g)
        if scope is not None:
            return scope.get(variable)
        g = g.outer
    return None


class Variable:
    """A named, mutable array (float64 by default for Python floats).

    Eagerly, reading gives a `tg.Tensor` snapshot; inside a traced function a read is a
    capture fed with the variable's current value at every call, so `assign` between
    calls is seen by the compiled code. Trainable variables read under a
    `GradientTape` are watched automatically.

    >>> v = tg.Variable(2.0)
    >>> v.assign_add(1.0).numpy()
    3.0
    """

    __array_priority__ = 1000

    def __init__(self, initial_value, trainable: bool = True, name: str | None = None,
                 dtype=None):
        if callable(initial_value):
            initial_value = initial_value()
        if isinstance(initial_value, (EagerTensor, Variable)):
            initial_value = initial_value.numpy()
        arr = np.array(initial_value, dtype=None if dtype is None else
                       dtypes.canonicalize(dtype, op="Variable"))
        self._value = arr.astype(dtypes.canonicalize(arr.dtype, op="Variable"), copy=False)
        self._spare = None  # see _donated_buffer
        self.trainable = bool(trainable)
        self._unique_id = next(_variable_ids)
        self.name = name if name is not None else f"Variable_{self._unique_id}"

    # -- metadata ----------------------------------------------------------------------------

    @property
    def shape(self) -> tuple:
        return self._value.shape

    @property
    def dtype(self) -> np.dtype:
        return self._value.dtype

    @property
    def ndim(self) -> int:
        return self._value.ndim

    @property
    def size(self) -> int:
        return self._value.size

    # -- reading -----------------------------------------------------------------------------

    def value(self):
        """The current value: an eager `tg.Tensor`, or the capture inside a trace."""
        graph = state.graph
        if graph is not None:
            return self._read_in_graph(graph)
        t = EagerTensor(self._value)
        if state.tapes:
            for tape in state.tapes:
                tape.variable_accessed(self, t)
        return t

    read_value = value

    def _read_in_graph(self, graph: FuncGraph) -> GraphTensor:
        assigned = _assigned_value(self, graph) if _SCOPES else None
        if assigned is None:
            t = self._placeholder(graph)
        else:  # after a write in this trace: the written value
            t = graph.to_tensor(assigned)
        if state.tapes and graph is state.graph:
            # A tape finds a Variable source by its capture in the graph, and sums the
            # gradients of every tensor read from it: the capture stands for the Variable
            # even when only values written later were read.
            root = (self._placeholder(graph)
                    if assigned is not None and _SCOPES.get(graph) is not None else None)
            for tape in state.tapes:
                if root is not None:
                    tape.variable_accessed(self, root)
                tape.variable_accessed(self, t)
        return t

    def _placeholder(self, graph: FuncGraph) -> GraphTensor:
        """The capture fed with the value the Variable has when the compiled call starts."""
        return graph.capture(self, TensorType(self._value.shape, self._value.dtype), self.name)

    def numpy(self):
        v = self._value
        return v[()] if v.ndim == 0 else v.copy()

    def __array__(self, dtype=None, copy=None):
        if state.graph is not None:
            raise TracegradError(
                f"cannot convert Variable {self.name!r} to a NumPy array inside a traced "
                "function; use it in tracegrad ops (it is captured and read at every call)"
            )
        v = self._value
        return v.astype(dtype) if dtype is not None else v.copy()

    def __bool__(self):
        return bool(self.value())

    def __float__(self):
        return float(self._value)

    def __int__(self):
        return int(self._value)

    def __repr__(self):
        return (
            f"<tg.Variable {self.name!r} shape={self.shape} dtype={self.dtype.name}, "
            f"numpy={np.array_repr(self._value)}>"
        )

    # -- writing -----------------------------------------------------------------------------

    def check_value(self, shape: tuple, dtype, weak: bool, how: str) -> None:
        """Raise `ShapeError` / `DTypeError` unless a value of `shape` and `dtype` (`weak`: a
        Python number or list) fits the Variable: the same shape, and a dtype that NumPy's
        promotion with the Variable's dtype keeps at the Variable's dtype (a Python float
        into a float32 Variable, an int64 array into a float64 one; not a float64 array into
        a float32 one, nor a float into an integer one)."""
        if tuple(shape) != self._value.shape:
            unknown = any(d is None for d in shape)
            raise ShapeError(
                f"Variable.{how}: a value of shape {shape_str(shape)} does not fit Variable "
                f"{self.name!r} of shape {shape_str(self._value.shape)}"
                + (" (a dim of the value is unknown while tracing: tnp.reshape it to the "
                   "Variable's shape)" if unknown else "")
            )
        dtype = dtypes.canonicalize(dtype, op=f"Variable.{how}")
        promoted, _ = dtypes.result_type((self._value.dtype, False), (dtype, weak))
        if promoted != self._value.dtype:
            raise DTypeError(
                f"Variable.{how}: a value of dtype {dtype.name} does not fit Variable "
                f"{self.name!r} of dtype {self._value.dtype.name} (NumPy promotes the two to "
                f"{promoted.name}); cast it first, e.g. tnp.astype(value, "
                f"{self._value.dtype.name!r})"
            )

    def _new_value(self, value, how: str) -> np.ndarray:
        if isinstance(value, (EagerTensor, Variable)):
            arr, weak = np.asarray(value.numpy()), False
        elif isinstance(value, (np.ndarray, np.generic)):
            arr, weak = np.asarray(value), False
        else:  # a Python number or a (nested) list of them: weakly typed, as in NumPy 2
            arr, weak = np.asarray(value), True
        self.check_value(arr.shape, arr.dtype, weak, how)
        return arr.astype(self._value.dtype, copy=True)

    def _write(self, value, how: str) -> Variable:
        graph = state.graph
        if graph is not None:
            _traced_write(self, graph, value, how)
            return self
        old = self._value
        if type(value) is EagerTensor and how != "assign":
            delta = value._value  # the common update: a tensor of the Variable's type
            if delta.dtype is old.dtype and delta.shape == old.shape:
                self._value = np.asarray(old + delta if how == "assign_add" else old - delta)
                return self
        new = self._new_value(value, how)
        if how == "assign_add":
            new = np.asarray(self._value + new)  # rank 0: arithmetic gives NumPy scalars
        elif how == "assign_sub":
            new = np.asarray(self._value - new)
        self._value = new
        return self

    def assign(self, value) -> Variable:
        """Replace the value (same shape; a dtype that fits, see `check_value`); returns the
        variable. Inside a `tg.function` it is an `assign` op, applied when the call
        succeeds (docs/variables.md)."""
        return self._write(value, "assign")

    def assign_add(self, delta) -> Variable:
        """`assign(value + delta)`; returns the variable."""
        return self._write(delta, "assign_add")

    def assign_sub(self, delta) -> Variable:
        """`assign(value - delta)`; returns the variable."""
        return self._write(delta, "assign_sub")

    # -- the compiled call's write-back ------------------------------------------------------

    def _donated_buffer(self):
        """A buffer of the Variable's type that a compiled call may write its new value into,
        or None: the buffer of the value before last, when nothing else references it (no
        snapshot, view or tape holds it), so reusing it is invisible."""
        spare = self._spare
        if spare is not None and sys.getrefcount(spare) == _SPARE_REFS \
                and spare.flags.c_contiguous:
            return spare
        self._spare = None
        return None

    def _commit(self, new: np.ndarray) -> None:
        """Make `new` (a fresh array of the Variable's type) the value, in O(1): the old
        buffer becomes the spare the next compiled call may write into."""
        self._spare = self._value
        self._value = new

    __hash__ = object.__hash__


# References to an unshared spare buffer seen by `sys.getrefcount` in `_donated_buffer`:
# the Variable's attribute, the local name, the call's argument.
_SPARE_REFS = 3

