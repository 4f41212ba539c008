"""Operators and methods of `tg.Tensor` and `tg.Variable`, installed on the classes."""

from __future__ import annotations

import tracegrad.numpy as tnp
from tracegrad.core.ir import Tensor
from tracegrad.core.variables import Variable


def _swap(fn):
    return lambda self, other: fn(other, self)


OPERATORS = {
    "__add__": tnp.add,
    "__radd__": _swap(tnp.add),
    "__sub__": tnp.subtract,
    "__rsub__": _swap(tnp.subtract),
    "__mul__": tnp.multiply,
    "__rmul__": _swap(tnp.multiply),
    "__truediv__": tnp.true_divide,
    "__rtruediv__": _swap(tnp.true_divide),
    "__neg__": tnp.negative,
}

METHODS = {
    "reshape": lambda self, *shape: tnp.reshape(
        self, shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape),
    "sum": lambda self, axis=None, dtype=None, keepdims=False: tnp.sum(self, axis, dtype,
                                                                         keepdims),
    "transpose": lambda self, *axes: tnp.transpose(
        self, None if not axes else axes[0] if len(axes) == 1 and not isinstance(
            axes[0], int) else axes),
}

PROPERTIES = {
    "T": lambda self: tnp.transpose(self),
}


def install():
    for cls in (Tensor, Variable):
        for name, fn in {**OPERATORS, **METHODS}.items():
            setattr(cls, name, fn)
        for name, fn in PROPERTIES.items():
            setattr(cls, name, property(fn))
