"""The eager fast paths (elementwise functions and operators, sum/prod/max/min, matmul/dot,
basic indexing, constants broadcast under a tape) give exactly what NumPy and the general
paths give: dtype (NEP 50 with weak Python scalars), shape, values, tape records, gradients,
and errors located at the user's line."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tests.ops.optable import recording
from tracegrad.core import dtypes
from tracegrad.errors import DTypeError, ShapeError
from tracegrad.ops.shape_ops import broadcast_array

DTYPES = ["float64", "float32", "int64", "int32", "bool"]


def _array(dtype, shape=(2, 3), seed=0):
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.random(shape) > 0.5
    if dtype.startswith("int"):
        return rng.integers(1, 5, shape).astype(dtype)
    return rng.uniform(0.5, 2.0, shape).astype(dtype)


def _numpy_or_error(fn, arrays):
    try:
        with np.errstate(all="ignore"):
            return fn(*arrays)
    except (TypeError, ValueError):  # a loop NumPy lacks, or bool negation/subtraction
        return None


def check_like_numpy(fn, *arrays, rtol=0.0):
    """`fn` on tensors (eager, under a recording tape, and traced) against `fn` on the
    NumPy arrays: the same dtype, shape and values (equal unless `rtol`); and the tape
    recorded the ops (unless `fn` returned an operand)."""
    expected = _numpy_or_error(fn, arrays)
    if expected is None or np.asarray(expected).dtype not in dtypes.SUPPORTED:
        with pytest.raises(tg.errors.TracegradError):
            fn(*[tg.constant(a) for a in arrays])
        return
    expected = np.asarray(expected)
    tensors = [tg.constant(a) for a in arrays]
    with np.errstate(all="ignore"):
        fast = fn(*tensors)
        with recording() as recorder:
            recorded = fn(*tensors)
        traced = tg.function(fn, backend="numpy")(*arrays)
    for out in (fast, recorded):
        assert isinstance(out, tg.Tensor)
    for out in (fast, recorded, traced):
        assert out.dtype == expected.dtype, (out.dtype, expected.dtype)
        assert out.shape == expected.shape
        if rtol:
            np.testing.assert_allclose(np.asarray(out), expected, rtol=rtol)
        else:
            np.testing.assert_array_equal(np.asarray(out), expected)
    assert recorder.records or any(recorded is t for t in tensors), "nothing recorded"
    for op in recorder.records:  # the IR's rule: binary elementwise operands of one shape
        if len(op.inputs) == 2 and op.primitive.name in ("add", "sub", "mul", "div", "max"):
            assert op.inputs[0].shape == op.inputs[1].shape


BINARY = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "truediv": lambda a, b: a / b, "floordiv": lambda a, b: a // b, "mod": lambda a, b: a % b,
    "maximum": np.maximum, "less": lambda a, b: a < b, "eq": lambda a, b: a == b,
    "and": lambda a, b: a & b, "arctan2": np.arctan2, "power": lambda a, b: a ** b,
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_tensors_of_one_dtype_match_numpy(name, dtype):
    check_like_numpy(BINARY[name], _array(dtype), _array(dtype, seed=1))


@pytest.mark.parametrize("dtypes", [("float32", "float64"), ("int32", "float32"),
                                    ("int32", "int64"), ("bool", "int32")])
@pytest.mark.parametrize("name", ["add", "mul", "truediv", "less"])
def test_binary_tensors_of_two_dtypes_match_numpy(name, dtypes):
    check_like_numpy(BINARY[name], _array(dtypes[0]), _array(dtypes[1], seed=1))


@pytest.mark.parametrize("shapes", [((2, 3), (3,)), ((2, 1), (1, 3)), ((), (2, 3)),
                                    ((3,), ())])
@pytest.mark.parametrize("name", ["add", "mul", "less"])
def test_binary_broadcasting_matches_numpy(name, shapes):
    check_like_numpy(BINARY[name], _array("float64", shapes[0]), _array("float64", shapes[1]))


@pytest.mark.parametrize("scalar", [2.0, 3, True, -1.5, 0])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["add", "sub", "mul", "truediv", "maximum", "less"])
def test_tensor_and_python_scalar_keep_nep50_weak_promotion(name, dtype, scalar):
    op = BINARY[name]
    check_like_numpy(lambda a: op(a, scalar), _array(dtype))
    check_like_numpy(lambda a: op(scalar, a), _array(dtype))


def test_weak_scalar_dtypes_are_numpys():
    f32, i32 = tg.constant(np.ones(2, np.float32)), tg.constant(np.ones(2, np.int32))
    assert (f32 * 2.0).dtype == np.float32 and (2.0 - f32).dtype == np.float32
    assert (i32 + 2).dtype == np.int32 and (i32 + 2.5).dtype == np.float64
    assert (tg.constant([True]) + 1).dtype == np.int64
    assert (i32 / 2).dtype == np.float64


UNARY = {"sin": tnp.sin, "exp": np.exp, "neg": lambda a: -a, "invert": lambda a: ~a,
         "sign": tnp.sign, "sqrt": tnp.sqrt, "abs": abs}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_matches_numpy(name, dtype):
    check_like_numpy(UNARY[name], _array(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["sum", "prod", "max", "min"])
@pytest.mark.parametrize("axis, keepdims", [(None, False), (0, False), (-1, True), ((0, 1), False)])
def test_reductions_match_numpy(name, dtype, axis, keepdims):
    check_like_numpy(lambda a: getattr(a, name)(axis=axis, keepdims=keepdims), _array(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shapes", [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 2)),
                                    ((2, 3), (3, 4)), ((2, 2, 3), (3, 4)), ((2, 2, 3), (2, 3, 1))])
def test_matmul_and_dot_match_numpy(shapes, dtype):
    a, b = _array(dtype, shapes[0]), _array(dtype, shapes[1], seed=1)
    # Batched products run one BLAS call over the batch, NumPy's matmul its own loop.
    rtol = 1e-6 if len(shapes[0]) > 2 and dtype.startswith("float") else 0.0
    check_like_numpy(lambda x, y: x @ y, a, b, rtol=rtol)
    if len(shapes[1]) <= 2:
        check_like_numpy(np.dot, a, b)


def test_matmul_of_two_dtypes_promotes():
    check_like_numpy(lambda x, y: x @ y, _array("float32", (2, 3)), _array("int64", (3,)))


@pytest.mark.parametrize("key", [1, -1, slice(1, None), slice(None, None, -2), (0, 1),
                                 (slice(None), None, 0), (Ellipsis, 1), np.array([1, 0])])
def test_indexing_matches_numpy(key):
    check_like_numpy(lambda a: a[key], _array("float64", (3, 4)))
    check_like_numpy(lambda a: a[key], _array("int32", (3, 4)))


def test_numpy_operands_give_numpy_results():
    out = tnp.add(np.ones(3), 2.0)
    assert type(out) is np.ndarray and out.dtype == np.float64
    assert type(tnp.multiply(2, 3)) is np.int64
    assert type(tnp.sin(np.float32(1.0))) is np.float32
    assert type(tnp.sum(np.ones(3, np.int32))) is np.int64


def test_gradients_through_the_fast_paths():
    x = tg.constant([0.5, 1.0, 2.0])
    y = tg.constant([1.5, -1.0, 4.0])
    with tg.GradientTape(persistent=True) as tape:
        tape.watch([x, y])
        outs = {
            "scale": tnp.sum(x * 2.0), "rsub": tnp.sum(2.0 - x), "div": tnp.sum(x / y),
            "sin": tnp.sum(tnp.sin(x)), "dot": x @ y, "slice": tnp.sum(x[1:]),
            "max": x.max(), "int": tnp.sum(x * 3), "bcast": tnp.sum(x + 1.0) * 2.0,
        }
    xv, yv = x.numpy(), y.numpy()
    expected = {
        "scale": 2 * np.ones(3), "rsub": -np.ones(3), "div": 1 / yv, "sin": np.cos(xv),
        "dot": yv, "slice": [0.0, 1.0, 1.0], "max": [0.0, 0.0, 1.0], "int": 3 * np.ones(3),
        "bcast": 2 * np.ones(3),
    }
    for name, out in outs.items():
        np.testing.assert_allclose(tape.gradient(out, x).numpy(), expected[name],
                                   rtol=1e-14, err_msg=name)
    np.testing.assert_allclose(tape.gradient(outs["div"], y).numpy(), -xv / yv**2, rtol=1e-14)


def test_variables_take_the_general_path_and_are_watched():
    v = tg.Variable([1.0, 2.0])
    with tg.GradientTape() as tape:
        y = tnp.sum(v * 3.0 + v)
    np.testing.assert_allclose(tape.gradient(y, v).numpy(), [4.0, 4.0])
    assert (v + 1).dtype == np.float64


def _raises_at_line(exc, fn):
    where = f"{__file__}:{fn.__code__.co_firstlineno}"
    with pytest.raises(exc, match=re.escape(where)):
        fn()


@pytest.mark.parametrize("taped", [False, True])
def test_fast_path_errors_name_the_users_line(taped):
    x, x3 = tg.constant(np.ones(4)), tg.constant(np.ones(3))
    i32 = tg.constant(np.ones(2, np.int32))
    m = tg.constant(np.ones((2, 3)))
    with tg.GradientTape() as tape:
        if taped:
            tape.watch([x, m])
        _raises_at_line(ShapeError, lambda: x + x3)
        _raises_at_line(ShapeError, lambda: tnp.sin(x) * x3)
        _raises_at_line(DTypeError, lambda: i32 + 2**40)
        _raises_at_line(DTypeError, lambda: 2**40 - i32)
        _raises_at_line(IndexError, lambda: x[7])
        _raises_at_line(ShapeError, lambda: x.sum(axis=1))
        _raises_at_line(ShapeError, lambda: m @ m)
        _raises_at_line(ShapeError, lambda: x @ x3)


@pytest.mark.parametrize("src, shape", [
    ((), (4,)), ((3, 1), (2, 3, 4)), ((3,), (2, 3)), ((1,), (0, 1)), ((2, 3), (2, 3)),
    ((0,), (2, 0)),
])
def test_broadcast_array_is_numpys_broadcast_to(src, shape):
    x = np.arange(float(np.prod(src))).reshape(src)
    for v in (x, x[..., ::-1] if x.ndim else x, np.asfortranarray(x)):
        out = broadcast_array(v, shape)
        np.testing.assert_array_equal(out, np.broadcast_to(v, shape))
        assert out.shape == shape and not out.flags.writeable
    with pytest.raises(ValueError):
        broadcast_array(np.ones(3), (4,))
    with pytest.raises(ValueError):
        broadcast_array(np.ones((2, 3)), (3,))


@pytest.mark.parametrize("key", [0, -1, 2, slice(1, None), slice(None, 2), slice(0, 3, 2),
                                 slice(None, None, -1), slice(5, 9), slice(None)])
def test_first_dim_keys_under_a_tape_record_the_general_paths_ops(key):
    x = tg.constant(_array("float64", (3, 4)))
    with recording() as fast:
        out = x[key]
    with recording() as general:
        ref = tnp._indexing._getitem_general(x, key)
        if ref is x:  # `x[:]` is a view: a new tensor (a reshape), so that `x` is unmarked
            ref = tnp._views._alias(x)
    assert [op.primitive.name for op in fast.records] == \
        [op.primitive.name for op in general.records]
    assert [op.attrs for op in fast.records] == [op.attrs for op in general.records]
    assert out.shape == ref.shape
    np.testing.assert_array_equal(out.numpy(), x.numpy()[key])
    with tg.GradientTape() as tape:
        tape.watch(x)
        y = tnp.sum(x[key] * 2.0)
    expected = np.zeros((3, 4))
    expected[key] = 2.0
    np.testing.assert_array_equal(tape.gradient(y, x).numpy(), expected)
