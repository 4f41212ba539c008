"""dtypes: the twelve supported dtypes, names, and NEP 50 promotion checked against NumPy 2."""

import itertools

import numpy as np
import pytest

from tracegrad.core import dtypes
from tracegrad.errors import DTypeError

ALL = dtypes.SUPPORTED
SCALARS = {np.dtype("bool"): True, np.dtype("int64"): 3, np.dtype("float64"): 2.5}


@pytest.mark.parametrize("a,b", list(itertools.product(ALL, ALL)), ids=str)
def test_strong_pairs_promote_as_numpy(a, b):
    assert dtypes.result_type((a, False), (b, False)) == (np.result_type(a, b), False)


@pytest.mark.parametrize("dtype,weak", list(itertools.product(ALL, SCALARS)), ids=str)
def test_array_with_python_scalar_promotes_as_numpy_2(dtype, weak):
    """`np.array(.., dtype) + python_scalar` decides the result dtype (NEP 50)."""
    scalar = SCALARS[weak]
    expected = (np.ones(2, dtype) + scalar).dtype
    assert dtypes.result_type((dtype, False), (weak, True)) == (expected, False)
    assert dtypes.result_type((weak, True), (dtype, False)) == (expected, False)


@pytest.mark.parametrize("a,b", list(itertools.product(SCALARS, SCALARS)), ids=str)
def test_python_scalars_together_stay_weak(a, b):
    expected = np.result_type(SCALARS[a], SCALARS[b])
    assert dtypes.result_type((a, True), (b, True)) == (expected, True)


def test_weak_scalar_kind_decides_only_when_higher():
    f32, i32 = np.dtype("float32"), np.dtype("int32")
    assert dtypes.result_type((f32, False), (dtypes.float64, True)) == (f32, False)
    assert dtypes.result_type((i32, False), (dtypes.int64, True)) == (i32, False)
    assert dtypes.result_type((i32, False), (dtypes.float64, True)) == (dtypes.float64, False)
    assert dtypes.result_type((dtypes.bool_, False), (dtypes.int64, True)) == (
        dtypes.int64, False)


def test_three_operands():
    f32, i32 = np.dtype("float32"), np.dtype("int32")
    assert dtypes.result_type((i32, False), (f32, False), (dtypes.float64, True)) == (
        np.result_type(i32, f32), False)


@pytest.mark.parametrize("spec,expected", [
    ("f32", "float32"), ("float32", "float32"), ("i64", "int64"), ("bool", "bool"),
    ("bool_", "bool"), ("float", "float64"), (float, "float64"), (int, "int64"),
    (bool, "bool"), (np.float32, "float32"), (np.dtype("int32"), "int32"), ("double", "float64"),
])
def test_canonicalize_accepts_names_types_and_dtypes(spec, expected):
    assert dtypes.canonicalize(spec) == np.dtype(expected)


@pytest.mark.parametrize("spec", ["clongdouble", np.longdouble, "f65", object, "S3", "M8[s]"])
def test_canonicalize_refuses_unsupported_dtypes_naming_the_op(spec):
    with pytest.raises(DTypeError, match=r"^myop: dtype .* is not supported; tracegrad "
                                         r"supports bool, int8, .* float16, float32, float64, complex64 and "
                                         r"complex128"):
        dtypes.canonicalize(spec, op="myop")


def test_short_names_round_trip():
    for dt in ALL:
        assert dtypes.from_short_name(dtypes.short_name(dt)) == dt
    assert [dtypes.short_name(d) for d in ALL] == [
        "bool", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f16", "f32", "f64",
        "c64", "c128"]
    with pytest.raises(DTypeError, match="unknown dtype name 'f128'"):
        dtypes.from_short_name("f128")


def test_kind_predicates_and_python_scalar_dtypes():
    assert [dtypes.is_float(d) for d in ALL] == [False] * 9 + [True] * 3 + [False] * 2
    assert [dtypes.is_complex(d) for d in ALL] == [False] * 12 + [True] * 2
    assert [dtypes.is_inexact(d) for d in ALL] == [False] * 9 + [True] * 5
    assert [dtypes.is_int(d) for d in ALL] == [False] + [True] * 8 + [False] * 5
    assert [dtypes.is_unsigned(d) for d in ALL] == [False] * 5 + [True] * 4 + [False] * 5
    assert [dtypes.is_bool(d) for d in ALL] == [True] + [False] * 13
    assert dtypes.is_differentiable(np.dtype("float16"))
    assert dtypes.is_differentiable(np.dtype("float32"))
    assert dtypes.is_differentiable(np.dtype("complex64"))
    assert not dtypes.is_differentiable(np.dtype("int64"))
    assert [dtypes.python_scalar_dtype(v) for v in (True, 1, 1.0, 1j)] == [
        dtypes.bool_, dtypes.int64, dtypes.float64, dtypes.complex128]
    assert dtypes.real_dtype(np.dtype("complex64")) == np.float32
    assert dtypes.complex_dtype(np.dtype("float16")) == np.complex64
    assert dtypes.complex_dtype(np.dtype("int8")) == np.complex128
    with pytest.raises(DTypeError, match="str scalars are not supported"):
        dtypes.python_scalar_dtype("1")
