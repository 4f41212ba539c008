"""Arrays from outside tracegrad as NumPy arrays in the machine's byte order: other
libraries' arrays (through `__array__` or DLPack), lists, non-native byte orders."""

from __future__ import annotations

import numpy as np


def native(arr: np.ndarray) -> np.ndarray:
    """`arr`, or a copy in the machine's byte order if its dtype has another one (the
    order NumPy's ufuncs give their results in)."""
    dt = arr.dtype
    return arr if dt.isnative else arr.astype(dt.newbyteorder("="))


def is_foreign_array(x) -> bool:
    """Whether `x` is another library's array (it has `__array__` or `__dlpack__`)."""
    t = type(x)
    return hasattr(t, "__array__") or hasattr(t, "__dlpack__")


def as_array(x) -> np.ndarray:
    """`x` (an array of any library, a list, a scalar) as a NumPy array in native byte
    order; an object that has `__dlpack__` but no `__array__` is read through DLPack."""
    t = type(x)
    if hasattr(t, "__dlpack__") and not hasattr(t, "__array__"):
        return native(np.from_dlpack(x))
    return native(np.asarray(x))
