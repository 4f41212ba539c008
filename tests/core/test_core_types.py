"""TensorType and TensorSpec: parse, str, equality, hashing."""

import numpy as np
import pytest

import tracegrad as tg
from tracegrad.core.types import TensorSpec, TensorType
from tracegrad.errors import DTypeError, ShapeError

F64, F32 = np.dtype("float64"), np.dtype("float32")


@pytest.mark.parametrize("text,shape,dtype,weak", [
    ("f64[3,4]", (3, 4), "float64", False),
    ("f32[?,8]", (None, 8), "float32", False),
    ("i64[]", (), "int64", False),
    ("bool[5]", (5,), "bool", False),
    ("~f64[]", (), "float64", True),
    ("~i32[?]", (None,), "int32", True),
    ("f64[0,1]", (0, 1), "float64", False),
])
def test_type_parse_and_str_round_trip(text, shape, dtype, weak):
    t = TensorType.parse(text)
    assert (t.shape, t.dtype, t.weak) == (shape, np.dtype(dtype), weak)
    assert str(t) == text == repr(t)
    assert t.ndim == len(shape)


def test_type_parse_is_lenient_about_spaces_and_long_names():
    assert TensorType.parse(" float32[None, 2] ") == TensorType((None, 2), F32)


@pytest.mark.parametrize("bad,error", [
    ("f64", ValueError), ("f64[3", ValueError), ("f64[a]", ValueError), ("c256[2]", DTypeError),
])
def test_type_parse_errors(bad, error):
    with pytest.raises(error):
        TensorType.parse(bad)


def test_type_equality_and_hash_include_weakness():
    a, b, c = TensorType((3,), F64), TensorType([3], F64), TensorType((3,), F64, True)
    assert a == b and hash(a) == hash(b)
    assert a != c and a != TensorType((3,), F32) and a != TensorType((None,), F64)
    assert a != "f64[3]"
    assert len({a, b, c}) == 2
    assert c.strong() == a and a.strong() is a
    assert a.with_shape((2, 2)) == TensorType((2, 2), F64)
    assert c.with_dtype(F32) == TensorType((3,), F32, True)


def test_spec_normalises_shape_and_dtype():
    s = TensorSpec([None, 3], "float32")
    assert s.shape == (None, 3) and s.dtype == F32 and s.name is None and s.ndim == 2
    assert repr(s) == "TensorSpec(shape=(None, 3), dtype=float32, name=None)"
    assert TensorSpec((2,)).dtype == F64
    assert TensorSpec((np.int64(2),), "f32").shape == (2,)
    assert tg.TensorSpec is TensorSpec


def test_spec_equality_and_hash():
    a = TensorSpec((None, 3), "float32", name="x")
    assert a == TensorSpec([None, 3], np.float32, name="x")
    assert hash(a) == hash(TensorSpec([None, 3], np.float32, name="x"))
    assert a != TensorSpec((None, 3), "float32")
    assert a != TensorSpec((None, 3), "float64", name="x")
    assert a != TensorSpec((2, 3), "float32", name="x")


def test_spec_compatibility_and_type():
    s = TensorSpec((None, 3), "float64")
    assert s.is_compatible_with((5, 3), F64)
    assert not s.is_compatible_with((5, 4), F64)
    assert not s.is_compatible_with((5, 3), F32)
    assert not s.is_compatible_with((3,), F64)
    assert s.to_type() == TensorType((None, 3), F64)
    assert TensorSpec.from_value(np.zeros((2, 2), np.int32)) == TensorSpec((2, 2), "int32")


def test_spec_errors():
    with pytest.raises(ShapeError, match=r"TensorSpec: negative dim in \(2, -1\)"):
        TensorSpec((2, -1))
    with pytest.raises(DTypeError, match="TensorSpec: dtype 'clongdouble' is not supported"):
        TensorSpec((2,), "clongdouble")
