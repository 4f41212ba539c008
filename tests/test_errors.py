"""Errors point at the user's own line: Python control flow on traced values, shape and
dtype mismatches, NumPy functions tracegrad lacks."""

import sys

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tracegrad import ops
from tracegrad.errors import (
    ArgumentTypeError,
    DTypeError,
    InvalidArgumentError,
    ShapeError,
    TracegradError,
    TracerBoolError,
    UnsupportedOpError,
)
from tracegrad.transforms import evaluate


def here(offset=0) -> str:
    """`"this_file.py:LINE"` for the caller's line plus `offset`."""
    return f"{__file__}:{sys._getframe(1).f_lineno + offset}"


# -- Python control flow on traced values ----------------------------------------------------


def test_if_on_a_traced_comparison():
    where = []

    @tg.function
    def f(x):
        where.append(here(1))
        if tnp.sum(x) > 0:
            return x
        return -x

    with pytest.raises(TracerBoolError) as info:
        f(np.ones(3))
    message = str(info.value)
    assert where[0] in message
    assert "tg.cond" in message and "static_argnums" in message
    assert isinstance(info.value, TypeError)


def test_while_on_a_traced_value():
    where = []

    @tg.function
    def f(x):
        where.append(here(1))
        while x:
            x = x - 1
        return x

    with pytest.raises(TracerBoolError, match="tg.while_loop") as info:
        f(np.float64(3.0))
    assert where[0] in str(info.value)


@pytest.mark.parametrize("convert", [bool, int, float], ids=["bool", "int", "float"])
def test_python_conversions_of_a_traced_value(convert):
    where = []

    def fn(x):
        where.append(here(1))
        return x * convert(x)

    with pytest.raises(TracerBoolError, match=f"{convert.__name__}\\(\\)") as info:
        tg.function(fn)(np.float64(2.0))
    assert where[0] in str(info.value)
    assert "static_argnums" in str(info.value)


def test_python_loop_bound_by_a_traced_value():
    where = []

    def fn(x, n):
        where.append(here(1))
        for _ in range(n):
            x = x * 2
        return x

    with pytest.raises(TracerBoolError) as info:
        tg.function(fn)(np.ones(2), 3)
    assert where[0] in str(info.value)
    np.testing.assert_allclose(tg.function(fn, static_argnums=1)(np.ones(2), 3), [8.0, 8.0])


# -- shape and dtype mismatches ----------------------------------------------------------------


def test_broadcast_mismatch_names_both_shapes_and_the_line():
    where = []

    def fn(x, y):
        where.append(here(1))
        return x + y

    with pytest.raises(ShapeError) as info:
        tg.function(fn)(np.ones(3), np.ones(4))
    message = str(info.value)
    assert "[3]" in message and "[4]" in message
    assert where[0] in message


def test_matmul_mismatch_names_the_op_both_shapes_and_the_line():
    where = []

    def fn(a, b):
        where.append(here(1))
        return a @ b

    with pytest.raises(ShapeError) as info:
        tg.function(fn)(np.ones((3, 2)), np.ones((3, 2)))
    message = str(info.value)
    assert "matmul" in message or "dot_general" in message
    assert "[3,2]" in message.replace(" ", "")
    assert where[0] in message


def test_reshape_mismatch_names_the_op_and_the_line():
    where = []

    def fn(x):
        where.append(here(1))
        return tnp.reshape(x, (4, 2))

    with pytest.raises(ShapeError, match="reshape") as info:
        tg.function(fn)(np.ones(6))
    assert where[0] in str(info.value)


def test_primitive_operand_mismatch_names_the_op_both_shapes_and_the_line():
    where = []

    def fn(x, y):
        where.append(here(1))
        return ops.add(x, y)

    with pytest.raises(ShapeError, match=r"add: .*\[3\] and \[4\]") as info:
        tg.function(fn)(np.ones(3), np.ones(4))
    assert where[0] in str(info.value)


def test_primitive_dtype_mismatch_names_the_op_the_dtype_and_the_line():
    where = []

    def fn(x):
        where.append(here(1))
        return ops.and_(x, x)

    with pytest.raises(DTypeError, match="and: .*float64") as info:
        tg.function(fn)(np.ones(3))
    assert where[0] in str(info.value)


def test_unsupported_dtype_names_it_and_the_line():
    where = []

    def fn(x):
        where.append(here(1))
        return tnp.astype(x, "clongdouble")

    with pytest.raises(DTypeError, match="clongdouble") as info:
        tg.function(fn)(np.ones(3))
    assert where[0] in str(info.value)


def test_unsupported_argument_dtype_names_the_function():
    def half_input(x):
        return x

    with pytest.raises(DTypeError, match=f"half_input.*{np.dtype(np.clongdouble).name}"):
        tg.function(half_input)(np.ones(2, np.clongdouble))


def test_run_time_mismatch_of_unknown_dims_names_the_op_and_its_line():
    where = []

    def fn(x, y):
        where.append(here(1))
        return x + y

    f = tg.function(fn, input_signature=[tg.TensorSpec([None]), tg.TensorSpec([None])],
                    backend="numpy")
    np.testing.assert_allclose(f(np.ones(3), np.ones(3)), np.full(3, 2.0))
    with pytest.raises(ShapeError, match=r"add: .*\[3\] and \[4\]") as info:
        f(np.ones(3), np.ones(4))
    assert where[0] in str(info.value)


def test_eager_mismatch_is_a_shape_error():
    with pytest.raises(ShapeError, match=r"\[3\].*\[2\]"):
        tg.constant([1.0, 2.0, 3.0]) + tg.constant([1.0, 2.0])


# -- NumPy functions tracegrad lacks ---------------------------------------------------------


def test_numpy_function_tracegrad_lacks_is_named():
    where = []

    def fn(x):
        where.append(here(1))
        return np.busday_count(x, x)

    with pytest.raises(UnsupportedOpError, match="busday_count") as info:
        tg.function(fn)(np.ones(3))
    assert where[0] in str(info.value)
    assert isinstance(info.value, NotImplementedError)


def test_numpy_ufunc_tracegrad_lacks_is_named():
    with pytest.raises(UnsupportedOpError, match="isnat"):
        tg.function(lambda x: np.isnat(x))(np.arange(3))


# -- misuse of traced values and functions ---------------------------------------------------


def test_leaked_tracer_is_named_where_it_was_made_and_used():
    leaked = []

    def fn(x):
        leaked.append(x)
        return x

    tg.function(fn)(np.ones(2))
    with pytest.raises(TracegradError, match="leaked") as info:
        tg.function(lambda y: y + leaked[0])(np.ones(2))
    assert __file__ in str(info.value)


def test_wrong_number_of_arguments_names_the_function():
    def two(x, y):
        return x + y

    with pytest.raises(TypeError, match="two"):
        tg.function(two)(np.ones(2), y=np.ones(2), z=1)


def test_leaked_tracer_passed_to_a_compiled_function():
    leaked = []
    tg.function(lambda x: leaked.append(x) or x)(np.ones(2))
    with pytest.raises(TracegradError, match="leaked"):
        tg.function(lambda y: y * 2)(leaked[0])


def test_python_int_too_large_for_int64():
    f = tg.function(lambda n: n + 1)
    assert f(2**62) == 2**62 + 1
    with pytest.raises(DTypeError, match="does not fit int64"):
        f(2**70)


# -- bad arguments: eager and traced on both backends, each at the user's line ---------------

BAD_CALLS = {
    "matmul": (ShapeError, lambda x: tnp.matmul(x, tnp.ones((4, 2)))),
    "concatenate": (ShapeError, lambda x: tnp.concatenate([x, tnp.ones((2, 2))], axis=0)),
    "reshape": (ShapeError, lambda x: x.reshape(4, 2)),
    "sum axis": (ShapeError, lambda x: np.sum(x, axis=2)),
    "transpose axes": (ShapeError, lambda x: tnp.transpose(x, (0, 0))),
    "moveaxis": (ShapeError, lambda x: tnp.moveaxis(x, (0, 1), 0)),
    "squeeze": (ShapeError, lambda x: tnp.squeeze(x, axis=0)),
    "split": (ShapeError, lambda x: tnp.split(x, 2, axis=1)),
    "einsum": (ShapeError, lambda x: tnp.einsum("ij,jk->ik", x, tnp.ones((2, 2)))),
    "cholesky": (ShapeError, lambda x: tnp.linalg.cholesky(x)),
    "astype": (DTypeError, lambda x: x.astype("clongdouble")),
    "bool minus bool": (DTypeError, lambda x: (x > 0) - (x > 1)),
    "one_hot": (DTypeError, lambda x: tg.nn.one_hot(x, 3)),
    "index out of range": (IndexError, lambda x: x[5]),
    "take out of range": (IndexError, lambda x: tnp.take(x, np.array([7]), axis=0)),
    "grad of a non-scalar": (ShapeError, lambda x: tg.grad(tnp.sin)(x)),
    "grad of an int argument": (DTypeError, lambda x: tg.grad(lambda i: i * 2.0)(x.shape[0])),
    "jacobian of an int argument": (DTypeError, lambda x: tg.jacobian(tnp.sin)(x > 0)),
    "vmap of unequal sizes": (ShapeError, lambda x: tg.vmap(tnp.add)(x, x[0])),
    "vjp cotangent shape": (ShapeError, lambda x: tg.vjp(tnp.sin, x)[1](tnp.ones(2))),
    "scan lengths": (InvalidArgumentError, lambda x: tg.scan(lambda c, v: (c, v), 0.0, x, length=3)),
    "fori_loop bound": (DTypeError, lambda x: tg.fori_loop(0, tnp.sum(x), lambda i, c: c, x)),
}
# Errors that only a trace meets (eagerly, the branch or loop runs as Python code).
TRACED_ERRORS = {
    "cond shapes": (ShapeError, lambda x: tg.cond(x[0, 0] > 0, lambda: x, lambda: x[0])),
    "cond dtypes": (DTypeError, lambda x: tg.cond(x[0, 0] > 0, lambda: x, lambda: x > 0)),
    "cond structures": (ArgumentTypeError, lambda x: tg.cond(x[0, 0] > 0, lambda: x, lambda: [x, x])),
    "while shapes": (ShapeError, lambda x: tg.while_loop(lambda v: v[0, 0] < 9, lambda v: (v[0],), (x,))),
    "while dtypes": (DTypeError, lambda x: tg.while_loop(lambda v: v[0, 0] < 9, lambda v: [v > 0], (x,))),
    "scan carry": (ShapeError, lambda x: tg.scan(lambda c, v: (v, v), 0.0, x)),
    "if on a tensor": (TracerBoolError, lambda x: x if x[0, 0] > 0 else -x),
}


@pytest.mark.parametrize("mode", ["eager", "numpy", "numba"])
@pytest.mark.parametrize("name", list(BAD_CALLS))
def test_bad_arguments_raise_the_documented_error_at_the_users_line(name, mode):
    """The error class of the table, from tracegrad.errors (IndexError as NumPy raises it),
    naming the line of the table's lambda that made the bad call."""
    error, fn = BAD_CALLS[name]
    x = np.arange(6.0).reshape(2, 3)
    with pytest.raises(error) as info:
        if mode == "eager":
            fn(tg.constant(x))
        else:
            tg.function(fn, backend=mode)(x)
    assert error is IndexError or isinstance(info.value, TracegradError)
    _assert_names_the_line_once(info.value, fn)


@pytest.mark.parametrize("mode", ["numpy", "numba"])
@pytest.mark.parametrize("name", list(TRACED_ERRORS))
def test_traced_errors_raise_the_documented_error_at_the_users_line(name, mode):
    error, fn = TRACED_ERRORS[name]
    with pytest.raises(error) as info:
        tg.function(fn, backend=mode)(np.arange(6.0).reshape(2, 3))
    _assert_names_the_line_once(info.value, fn)


def _assert_names_the_line_once(e, fn):
    """The message names the line of `fn` once, and no other location of this file."""
    where, message = f"{__file__}:{fn.__code__.co_firstlineno}", str(e)
    assert message.count(where) == 1, message
    assert message.count(__file__) == 1, message


RUN_TIME_FAILURES = {
    "gather": (IndexError, lambda x, i: tnp.take(x, i, axis=0)),
    "scatter_add": (IndexError, lambda x, i: tnp.at(x)[i].add(1.0)),
    "cholesky": (np.linalg.LinAlgError, lambda x, i: tnp.linalg.cholesky(-x[:2, :2] - 1.0)),
}


@pytest.mark.parametrize("mode", ["eager", "numpy", "numpy code", "numba"])
@pytest.mark.parametrize("name", list(RUN_TIME_FAILURES))
def test_failures_found_when_an_op_runs_name_the_op_and_its_line(name, mode, monkeypatch):
    """Data-dependent failures keep NumPy's error type, on every backend and eagerly, and in
    the numpy backend's generated code (a graph it runs often)."""
    error, fn = RUN_TIME_FAILURES[name]
    if mode == "numpy code":
        monkeypatch.setattr(evaluate, "_WALKS_BEFORE_CODE", 0)
        mode = "numpy"
    x, i = np.arange(6.0).reshape(3, 2), np.array([0, 7])
    with pytest.raises(error) as info:
        if mode == "eager":
            fn(tg.constant(x), tg.constant(i))
        else:
            tg.function(fn, backend=mode)(x, i)
    assert f"{__file__}:{fn.__code__.co_firstlineno}" in str(info.value), str(info.value)
    if mode != "eager" and error is IndexError:
        assert str(info.value).startswith(f"{name}: index 7 is out of bounds"), str(info.value)


@pytest.mark.parametrize("mode", ["eager", "numpy", "numba"])
def test_a_python_int_out_of_the_int32_range_never_wraps(mode):
    """NumPy refuses `int32 array + 2**40`; so does tracegrad, eagerly and when the int is
    an argument of a compiled function (its value is not in the trace)."""
    x = np.arange(3, dtype=np.int32)
    def fn(a, n):
        return a * n

    call = (lambda n: fn(tg.constant(x), n)) if mode == "eager" else (
        lambda n: tg.function(fn, backend=mode)(x, n))
    for big in (2**31, -2**31 - 1, 2**40):
        with pytest.raises(DTypeError, match=f"Python int {big} (passed as n )?does not fit int32") as info:
            call(big)
        assert __file__ in str(info.value)
    np.testing.assert_array_equal(np.asarray(call(2**31 - 1)), x * np.int32(2**31 - 1))
    np.testing.assert_array_equal(np.asarray(call(-2**31)), x * np.int32(-2**31))


def test_python_int_arguments_fitting_int32_share_one_trace():
    f = tg.function(lambda a, n: a + n)
    x64, x32 = np.arange(3), np.arange(3, dtype=np.int32)
    np.testing.assert_array_equal(f(x64, 2**40), x64 + 2**40)  # int64 arrays take any int64
    for n in (1, -7, 2**31 - 1):
        np.testing.assert_array_equal(f(x32, n), x32 + n)
    assert f.tracing_count == 2
