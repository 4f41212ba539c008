"""`Variable`: mutable state, read eagerly as a snapshot and inside traces as a capture."""

from __future__ import annotations

import itertools

import numpy as np

from tracegrad.core import dtypes
from tracegrad.core.ir import EagerTensor, FuncGraph, GraphTensor
from tracegrad.core.state import state
from tracegrad.core.types import TensorType
from tracegrad.errors import ShapeError, TracegradError, UnsupportedOpError

_variable_ids = itertools.count(1)


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
        t = graph.capture(self, TensorType(self._value.shape, self._value.dtype), self.name)
        if state.tapes and graph is state.graph:
            for tape in state.tapes:
                tape.variable_accessed(self, t)
        return t

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

    def _new_value(self, value, how: str) -> np.ndarray:
        if state.graph is not None:
            raise UnsupportedOpError(
                f"Variable.{how} inside a traced function is not supported; assign outside "
                "the function (the next call reads the new value)"
            )
        if isinstance(value, (EagerTensor, Variable)):
            value = value.numpy()
        arr = np.asarray(value)
        if arr.shape != self._value.shape:
            raise ShapeError(
                f"Variable.{how}: value of shape {arr.shape} does not match the variable's "
                f"shape {self._value.shape}"
            )
        return arr.astype(self._value.dtype, copy=True)

    def assign(self, value) -> Variable:
        """Replace the value; returns the variable."""
        self._value = self._new_value(value, "assign")
        return self

    def assign_add(self, delta) -> Variable:
        # np.asarray: arithmetic on rank-0 arrays gives NumPy scalars
        self._value = np.asarray(self._value + self._new_value(delta, "assign_add"))
        return self

    def assign_sub(self, delta) -> Variable:
        self._value = np.asarray(self._value - self._new_value(delta, "assign_sub"))
        return self

    __hash__ = object.__hash__
