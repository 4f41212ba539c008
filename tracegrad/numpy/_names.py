"""NumPy's names for its array type and aliases that NumPy programs use: `ndarray` (for
`isinstance`), `asanyarray`, `double`."""

from __future__ import annotations

import numpy as np

from tracegrad.core.dtypes import float64
from tracegrad.core.ir import Tensor
from tracegrad.core.variables import Variable
from tracegrad.errors import UnsupportedOpError
from tracegrad.numpy._creation import asarray

_ARRAYS = (np.ndarray, Tensor, Variable)


class _ArrayType(type):
    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, _ARRAYS)

    def __subclasscheck__(cls, sub) -> bool:
        return issubclass(sub, _ARRAYS)


class ndarray(metaclass=_ArrayType):
    """The arrays `tracegrad.numpy` functions take, for `isinstance(x, tnp.ndarray)`: NumPy
    arrays, tensors (traced or eager) and Variables. Make arrays with `tnp.zeros`,
    `tnp.asarray`..., not by calling it."""

    def __new__(cls, *args, **kwargs):
        raise UnsupportedOpError("ndarray(shape): make arrays with tnp.zeros, tnp.empty or "
                                 "tnp.asarray")


def asanyarray(a, dtype=None, order=None):
    """`asarray(a, dtype)`: tracegrad has no array subclasses to keep."""
    return asarray(a, dtype)


double = float64
