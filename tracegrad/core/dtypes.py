"""The five dtypes tracegrad supports and NumPy 2 (NEP 50) promotion with weak scalars."""

from __future__ import annotations

import numpy as np

from tracegrad.errors import DTypeError

bool_ = np.dtype("bool")
int32 = np.dtype("int32")
int64 = np.dtype("int64")
float32 = np.dtype("float32")
float64 = np.dtype("float64")

SUPPORTED = (bool_, int32, int64, float32, float64)
FLOATS = frozenset((float32, float64))
INTS = frozenset((int32, int64))

SHORT_NAMES = {bool_: "bool", int32: "i32", int64: "i64", float32: "f32", float64: "f64"}
_BY_NAME = {name: dt for dt, name in SHORT_NAMES.items()}
_BY_NAME.update({dt.name: dt for dt in SUPPORTED})
_BY_NAME.update({"bool_": bool_, "float": float64, "int": int64, "double": float64})
_BY_TYPE = {bool: bool_, int: int64, float: float64}

# Kind order for weak promotion: bool < int < float.
_KIND = {bool_: 0, int32: 1, int64: 1, float32: 2, float64: 2}
_DEFAULT_OF_KIND = {0: bool_, 1: int64, 2: float64}


def canonicalize(dtype, *, op: str | None = None) -> np.dtype:
    """The supported `np.dtype` for `dtype` (a dtype, a scalar type or a name like "f32");
    a dtype of another byte order gives the native one."""
    if isinstance(dtype, np.dtype) and dtype in _KIND:
        return dtype
    if isinstance(dtype, str):
        found = _BY_NAME.get(dtype)
        if found is not None:
            return found
    elif isinstance(dtype, type) and dtype in _BY_TYPE:
        return _BY_TYPE[dtype]
    try:
        dt = np.dtype(dtype)
    except TypeError:
        dt = None
    if dt is not None and not dt.isnative:
        dt = dt.newbyteorder("=")  # as NumPy's ufuncs give results in the native order
    if dt is not None and dt in _KIND:
        return dt
    where = f"{op}: " if op else ""
    name = dtype.name if isinstance(dtype, np.dtype) else repr(dtype)
    raise DTypeError(
        f"{where}dtype {name} is not supported; tracegrad supports "
        "float64, float32, int64, int32 and bool (convert with .astype first)"
    )


def short_name(dtype: np.dtype) -> str:
    return SHORT_NAMES[dtype]


def from_short_name(name: str) -> np.dtype:
    try:
        return _BY_NAME[name]
    except KeyError:
        raise DTypeError(f"unknown dtype name {name!r}") from None


def is_float(dtype: np.dtype) -> bool:
    return dtype in FLOATS


def is_int(dtype: np.dtype) -> bool:
    return dtype in INTS


def is_bool(dtype: np.dtype) -> bool:
    return dtype == bool_


def is_differentiable(dtype: np.dtype) -> bool:
    return dtype in FLOATS


def python_scalar_dtype(value) -> np.dtype:
    """The dtype a weak Python scalar defaults to (bool, int64 or float64)."""
    if isinstance(value, bool):
        return bool_
    if isinstance(value, int):
        return int64
    if isinstance(value, float):
        return float64
    raise DTypeError(f"{type(value).__name__} scalars are not supported")


def result_type(*operands: tuple[np.dtype, bool]) -> tuple[np.dtype, bool]:
    """NEP 50 promotion of `(dtype, weak)` pairs; returns `(dtype, weak)`.

    Strong dtypes promote as NumPy does; a weak operand (a Python scalar) only
    contributes its kind: `f32 + 2.0 -> f32`, `i32 + 2 -> i32`, `i32 + 2.0 -> f64`,
    `bool + 1 -> i64`. The result is weak only when every operand is weak.
    """
    strong = None
    weak_kind = -1
    for dtype, weak in operands:
        if weak:
            k = _KIND[dtype]
            if k > weak_kind:
                weak_kind = k
        elif strong is None:
            strong = dtype
        elif strong != dtype:
            strong = np.promote_types(strong, dtype)
    if strong is None:
        return _DEFAULT_OF_KIND[weak_kind], True
    if weak_kind > _KIND[strong]:
        return _DEFAULT_OF_KIND[weak_kind], False
    return strong, False
