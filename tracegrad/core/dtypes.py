"""The dtypes tracegrad supports (bool, the signed and unsigned integers of 8 to 64 bits,
float16, float32, float64, complex64, complex128) and NumPy 2 (NEP 50) promotion with weak
scalars."""

from __future__ import annotations

import numpy as np

from tracegrad.errors import DTypeError

bool_ = np.dtype("bool")
int8 = np.dtype("int8")
int16 = np.dtype("int16")
int32 = np.dtype("int32")
int64 = np.dtype("int64")
uint8 = np.dtype("uint8")
uint16 = np.dtype("uint16")
uint32 = np.dtype("uint32")
uint64 = np.dtype("uint64")
float16 = np.dtype("float16")
float32 = np.dtype("float32")
float64 = np.dtype("float64")
complex64 = np.dtype("complex64")
complex128 = np.dtype("complex128")

SIGNED = (int8, int16, int32, int64)
UNSIGNED = (uint8, uint16, uint32, uint64)
SUPPORTED = (bool_, *SIGNED, *UNSIGNED, float16, float32, float64, complex64, complex128)
SUPPORTED_TEXT = ("bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16, "
                  "float32, float64, complex64 and complex128")
FLOATS = frozenset((float16, float32, float64))
COMPLEX = frozenset((complex64, complex128))
INEXACT = FLOATS | COMPLEX
INTS = frozenset(SIGNED + UNSIGNED)

SHORT_NAMES = {bool_: "bool", int8: "i8", int16: "i16", int32: "i32", int64: "i64",
               uint8: "u8", uint16: "u16", uint32: "u32", uint64: "u64",
               float16: "f16", float32: "f32", float64: "f64", complex64: "c64",
               complex128: "c128"}
_BY_NAME = {name: dt for dt, name in SHORT_NAMES.items()}
_BY_NAME.update({dt.name: dt for dt in SUPPORTED})
_BY_NAME.update({"bool_": bool_, "float": float64, "int": int64, "double": float64,
                 "complex": complex128, "cdouble": complex128, "csingle": complex64})
_BY_TYPE = {bool: bool_, int: int64, float: float64, complex: complex128}

# Kind order for weak promotion: bool < int < float < complex.
_KIND = ({dt: 1 for dt in INTS} | {bool_: 0, float16: 2, float32: 2, float64: 2}
         | {complex64: 3, complex128: 3})
_DEFAULT_OF_KIND = {0: bool_, 1: int64, 2: float64, 3: complex128}
# The complex dtype a float meets a weak complex in (NumPy keeps its precision).
_COMPLEX_OF = {float16: complex64, float32: complex64, float64: complex128}
_REAL_OF = {complex64: float32, complex128: float64}


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
        f"{SUPPORTED_TEXT} (convert with .astype first)"
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


def is_complex(dtype: np.dtype) -> bool:
    return dtype in COMPLEX


def is_inexact(dtype: np.dtype) -> bool:
    """Whether `dtype` is a float or complex one."""
    return dtype in INEXACT


def real_dtype(dtype: np.dtype) -> np.dtype:
    """The real dtype of a complex one's parts (float32 of complex64); other dtypes as they are."""
    return _REAL_OF.get(dtype, dtype)


def complex_dtype(dtype: np.dtype) -> np.dtype:
    """The complex dtype with parts of a float dtype (complex64 for float16 and float32);
    complex dtypes as they are, others complex128."""
    return _COMPLEX_OF.get(dtype, dtype if dtype in COMPLEX else complex128)


def is_int(dtype: np.dtype) -> bool:
    return dtype in INTS


def is_unsigned(dtype: np.dtype) -> bool:
    return dtype in UNSIGNED


def bits(dtype: np.dtype) -> int:
    """The width of `dtype` in bits."""
    return dtype.itemsize * 8


def is_bool(dtype: np.dtype) -> bool:
    return dtype == bool_


def is_differentiable(dtype: np.dtype) -> bool:
    return dtype in INEXACT


def python_scalar_dtype(value) -> np.dtype:
    """The dtype a weak Python scalar defaults to (bool, int64, float64 or complex128)."""
    if isinstance(value, bool):
        return bool_
    if isinstance(value, int):
        return int64
    if isinstance(value, float):
        return float64
    if isinstance(value, complex):
        return complex128
    raise DTypeError(f"{type(value).__name__} scalars are not supported")


def result_type(*operands: tuple[np.dtype, bool]) -> tuple[np.dtype, bool]:
    """NEP 50 promotion of `(dtype, weak)` pairs; returns `(dtype, weak)`.

    Strong dtypes promote as NumPy does; a weak operand (a Python scalar) only
    contributes its kind: `f32 + 2.0 -> f32`, `i32 + 2 -> i32`, `i32 + 2.0 -> f64`,
    `bool + 1 -> i64`, `f32 + 1j -> c64`, `i32 + 1j -> c128`. The result is weak only when
    every operand is weak.
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
        if weak_kind == 3:
            return _COMPLEX_OF.get(strong, complex128), False
        return _DEFAULT_OF_KIND[weak_kind], False
    return strong, False
