"""Tensor operators against NumPy's, and NumPy 2 (NEP 50) promotion with weak Python scalars,
traced and eager."""

from __future__ import annotations

import itertools
import operator

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tracegrad.core import dtypes
from tracegrad.errors import DTypeError

DTYPES = ["float64", "float32", "int64", "int32", "bool"]

OPERATORS = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
    "//": operator.floordiv, "%": operator.mod, "**": operator.pow, "@": operator.matmul,
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
    "==": operator.eq, "!=": operator.ne, "&": operator.and_, "|": operator.or_,
    "^": operator.xor, "<<": operator.lshift, ">>": operator.rshift,
}
UNARY = {"-x": operator.neg, "+x": operator.pos, "abs": abs, "~": operator.invert}


def _operand(dtype, seed):
    values = np.random.default_rng(seed).integers(1, 4, size=(3, 3))
    return values.astype(dtype)


def _numpy_result(fn, *args):
    try:
        with np.errstate(all="ignore"):
            out = fn(*args)
    except (TypeError, ValueError):
        return None
    return np.asarray(out)


def _check(fn, *args):
    expected = _numpy_result(fn, *args)
    tensors = [tg.constant(a) if isinstance(a, np.ndarray) else a for a in args]
    if expected is None or expected.dtype not in dtypes.SUPPORTED:
        with pytest.raises((TypeError, ValueError)):
            fn(*tensors)
        return
    eager = fn(*tensors)
    assert eager.dtype == expected.dtype
    np.testing.assert_array_equal(eager.numpy(), expected)
    array_args = [a for a in args if isinstance(a, np.ndarray)]

    def traced_fn(*arrays):
        it = iter(arrays)
        return fn(*[next(it) if isinstance(a, np.ndarray) else a for a in args])

    traced = tg.function(traced_fn, backend="numpy")(*array_args)
    assert np.asarray(traced).dtype == expected.dtype
    np.testing.assert_array_equal(traced, expected)


@pytest.mark.parametrize("name", list(OPERATORS))
@pytest.mark.parametrize("da, db", list(itertools.product(DTYPES, DTYPES)))
def test_binary_operators_match_numpy(name, da, db):
    _check(OPERATORS[name], _operand(da, 1), _operand(db, 2))


@pytest.mark.parametrize("name", list(OPERATORS))
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("scalar", [2, 2.5, True], ids=["int", "float", "bool"])
def test_operators_with_python_scalars_on_either_side(name, dtype, scalar):
    if name == "@":
        return
    fn = OPERATORS[name]
    x = _operand(dtype, 3)
    if name == "**" and dtype == "bool" and type(scalar) is int:
        # NumPy's `**` squares a bool array into int8 (its fast path for exponent 2) while
        # np.power gives int64; tracegrad's `**` is np.power.
        np.testing.assert_array_equal((tg.constant(x) ** scalar).numpy(), np.power(x, scalar))
        assert (tg.constant(x) ** scalar).dtype == np.power(x, scalar).dtype
        return
    _check(lambda a: fn(a, scalar), x)
    _check(lambda a: fn(scalar, a), x)


@pytest.mark.parametrize("name", list(UNARY))
@pytest.mark.parametrize("dtype", DTYPES)
def test_unary_operators_match_numpy(name, dtype):
    _check(UNARY[name], _operand(dtype, 4) - (0 if dtype == "bool" else 2))


def test_weak_scalars_keep_the_tensor_dtype():
    f32 = tg.constant([1.0, 2.0], dtype="float32")
    assert (f32 * 2.0).dtype == np.float32
    assert (2.0 * f32).dtype == np.float32
    i32 = tg.constant([1, 2], dtype="int32")
    assert (i32 + 2).dtype == np.int32
    assert (i32 + 2.5).dtype == np.float64
    assert (i32 / 2).dtype == np.float64
    b = tg.constant([True, False])
    assert (b + 1).dtype == np.int64
    assert tnp.sin(i32).dtype == np.float64


def test_traced_python_scalar_arguments_are_weak():
    @tg.function(backend="numpy")
    def scale(x, s):
        return x * s

    out = scale(np.ones(2, np.float32), 3.0)
    assert out.dtype == np.float32
    assert scale(np.ones(2, np.float32), 4.0).dtype == np.float32
    assert scale.tracing_count == 1
    assert scale(np.ones(2, np.int32), 2.5).dtype == np.float64


@pytest.mark.parametrize("fn", [
    lambda a, b: a // b, lambda a, b: a % b, lambda a, b: a ** b,
    lambda a, b: tnp.arctan2(a, b), lambda a, b: tnp.exp(a),
])
def test_bool_operands_compute_in_numpys_loop_dtype(fn):
    # bool // bool is int8 in NumPy, arctan2 and exp of bools float16
    a, b = np.array([True, False, True]), np.array([True, True, True])
    with np.errstate(all="ignore"):
        want = fn(a, b)
    for got in (fn(tg.constant(a), tg.constant(b)), tg.function(fn, backend="numpy")(a, b)):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(np.asarray(got), want)


def test_bool_subtract_raises_naming_the_function():
    b = tg.constant([True, False])
    with pytest.raises(DTypeError, match="subtract"):
        b - b
    with pytest.raises(DTypeError, match="subtract"):
        tg.function(lambda x: x - x, backend="numpy")(np.array([True]))


def test_equality_with_non_arrays_is_not_elementwise():
    t = tg.constant([1.0, 2.0])
    assert (t == None) is False
    assert (t != "a") is True
    assert t in [t]
    assert len({t, t}) == 1


def test_graph_inspection_compares_traced_tensors_by_identity():
    graph = tg.trace(lambda x: x * 2.0)(np.ones(3))
    out = graph.outputs[0]
    assert out in graph.outputs
    assert out not in graph.inputs
    assert graph.inputs[0] == graph.inputs[0]


def test_reflected_operators_with_numpy_arrays_return_tensors():
    t = tg.constant([1.0, 2.0])
    a = np.array([10.0, 20.0])
    for result in (a + t, a - t, a * t, a / t, a ** t, a > t, a @ t):
        assert isinstance(result, tg.Tensor), type(result)
    np.testing.assert_array_equal((a - t).numpy(), [9.0, 18.0])


def test_integer_power_exponent_is_an_integer_pow_op():
    graph = tg.trace(lambda x: x ** 3)(np.ones(2))
    assert [op.primitive.name for op in graph.operations] == ["integer_pow"]
    assert graph.operations[0].attrs["y"] == 3
