"""Nothing silently leaves the tape or the trace: a NumPy function tracegrad lacks, called
on a tg.Tensor or tg.Variable eagerly, under a tape or traced, raises UnsupportedOpError
naming the function and the caller's line; only np.asarray / .numpy() leave on purpose, and
the functions that return no array (dtype queries; comparisons and printing of concrete
values) still answer."""

from __future__ import annotations

import os

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tracegrad.errors import UnsupportedOpError

A = np.array([[0.5, 1.5, -2.0], [3.0, 0.25, 1.0]])
HERE = os.path.basename(__file__)

# name in the message -> the call (each on its own line: the message names that line)
MISSING = {
    "numpy.busday_count": lambda t: np.busday_count(t, t),
    "numpy.sort_complex": lambda t: np.sort_complex(t),
    "numpy.is_busday": lambda t: np.is_busday(t),
    "numpy.isnat": lambda t: np.isnat(t),
    "numpy.gcd.reduce": lambda t: np.gcd.reduce(t),
    "numpy.nextafter.reduce": lambda t: np.nextafter.reduce(t),
    "numpy.sin with where=": lambda t: np.sin(t, where=A > 0),
    "numpy.add with out=": lambda t: np.add(t, 1.0, out=np.empty((2, 3))),
    "numpy.sum with where=": lambda t: np.sum(t, where=A > 0),
    "numpy.add.outer with dtype=": lambda t: np.add.outer(t, t, dtype=np.float32),
    "numpy.maximum.accumulate": lambda t: np.maximum.accumulate(t),
    "numpy.subtract.reduce": lambda t: np.subtract.reduce(t),
    "numpy.subtract.accumulate": lambda t: np.subtract.accumulate(t),
    "numpy.add.reduceat": lambda t: np.add.reduceat(t, [0, 1]),
    "numpy.add.at": lambda t: np.add.at(np.zeros((2, 3)), (0, 1), t[0, 0]),
}


def _check(info, name):
    message = str(info.value)
    assert name in message
    line = MISSING[name].__code__.co_firstlineno
    assert f"{HERE}:{line}" in message, message


def _source(kind):
    return tg.constant(A) if kind == "tensor" else tg.Variable(A)


@pytest.mark.parametrize("kind", ["tensor", "variable"])
@pytest.mark.parametrize("name", list(MISSING))
def test_missing_function_eagerly_raises(name, kind):
    with pytest.raises(UnsupportedOpError) as info:
        MISSING[name](_source(kind))
    _check(info, name)


@pytest.mark.parametrize("kind", ["tensor", "variable"])
@pytest.mark.parametrize("name", list(MISSING))
def test_missing_function_under_a_tape_raises(name, kind):
    x = _source(kind)
    with tg.GradientTape() as tape:
        tape.watch(x)
        with pytest.raises(UnsupportedOpError) as info:
            MISSING[name](x * 1.0 if kind == "tensor" else x)
    _check(info, name)


@pytest.mark.parametrize("kind", ["tensor", "variable"])
@pytest.mark.parametrize("name", list(MISSING))
def test_missing_function_traced_raises(name, kind):
    if kind == "tensor":
        f, args = tg.function(MISSING[name], backend="numpy"), (A,)
    else:
        v = tg.Variable(A)
        f, args = tg.function(lambda: MISSING[name](v), backend="numpy"), ()
    with pytest.raises(UnsupportedOpError) as info:
        f(*args)
    _check(info, name)


def test_a_function_tracegrad_lacks_raises_instead_of_losing_the_gradient():
    with tg.GradientTape() as t:
        x = tg.constant(np.array([1.0, -2.0, 3.0]))
        t.watch(x)
        with pytest.raises(UnsupportedOpError, match=r"numpy\.fix") as info:
            np.fix(x)
    assert f"{HERE}:{info.tb.tb_lineno}" in str(info.value)


def test_the_issue_snippet_now_records_the_gradient():
    xs, ys = np.array([0.0, 1.0, 2.0, 4.0]), np.array([1.0, 2.5, 2.0, 5.0])
    with tg.GradientTape() as t:
        y = tg.constant(ys)
        t.watch(y)
        slope, intercept = np.polyfit(xs, y, 1)
    g = t.gradient(slope, y).numpy()
    centered = xs - xs.mean()
    np.testing.assert_allclose(g, centered / np.sum(centered ** 2), rtol=1e-12)


def test_asarray_and_numpy_leave_on_purpose():
    v = tg.Variable(A)
    with tg.GradientTape() as tape:
        t = tg.constant(A) * 2.0
        for x, want in ((t, 2 * A), (v, A)):
            out = np.asarray(x)
            assert type(out) is np.ndarray
            np.testing.assert_array_equal(out, want)
            np.testing.assert_array_equal(x.numpy(), want)
            np.testing.assert_array_equal(np.array(x, dtype=np.float32), want.astype(np.float32))
        loss = tnp.sum(v * 3.0)
    assert tape.gradient(loss, v).numpy().tolist() == [[3.0] * 3] * 2


# -- what NumPy answers without leaving: no array, so no gradient to lose -------------------


TYPE_QUERIES = {
    "result_type": (lambda t: np.result_type(t, np.float32), np.dtype("float64")),
    "result_type int": (lambda t: np.result_type(t.astype("int32"), np.int64),
                        np.dtype("int64")),
    "can_cast": (lambda t: np.can_cast(t, np.float32), False),
    "can_cast same_kind": (lambda t: np.can_cast(t, np.float32, "same_kind"), True),
    "common_type": (lambda t: np.common_type(t, t.astype("float32")), np.float64),
    "iscomplexobj": (lambda t: np.iscomplexobj(t), False),
    "isrealobj": (lambda t: np.isrealobj(t), True),
    "shape ndim size": (lambda t: (np.shape(t), np.ndim(t), np.size(t)), ((2, 3), 2, 6)),
}


@pytest.mark.parametrize("name", list(TYPE_QUERIES))
def test_dtype_and_shape_queries_answer_eagerly_and_traced(name):
    query, want = TYPE_QUERIES[name]
    v = tg.Variable(A)
    assert query(tg.constant(A)) == want
    assert query(v) == want
    seen = []

    def f(x):
        seen.append((query(x), query(v)))
        return x * 2.0

    np.testing.assert_array_equal(tg.function(f, backend="numpy")(A), 2 * A)
    assert seen == [(want, want)]


def test_weak_scalars_are_python_scalars_to_result_type():
    f32 = np.ones(2, np.float32)
    seen = []
    tg.function(lambda s: seen.append(np.result_type(s, f32)) or s * 1.0)(2.0)
    assert seen == [np.dtype("float32")]


VALUE_QUERIES = {
    "numpy.allclose": (lambda t: np.allclose(t, A), True),
    "numpy.array_equal": (lambda t: np.array_equal(t, A + 1), False),
    "numpy.array_equiv": (lambda t: np.array_equiv(t, A), True),
    "numpy.array_repr": (lambda t: np.array_repr(t), np.array_repr(A)),
    "numpy.array_str": (lambda t: np.array_str(t), np.array_str(A)),
    "numpy.array2string": (lambda t: np.array2string(t), np.array2string(A)),
}


@pytest.mark.parametrize("name", list(VALUE_QUERIES))
def test_value_comparisons_and_printing_read_concrete_values_only(name):
    query, want = VALUE_QUERIES[name]
    x = tg.constant(A)
    with tg.GradientTape() as tape:
        tape.watch(x)
        assert query(x) == want
        assert query(tg.Variable(A)) == want
    with pytest.raises(UnsupportedOpError, match="reads the values of a traced Tensor") as info:
        tg.function(query, backend="numpy")(A)
    assert name in str(info.value)
    assert f"{HERE}:{query.__code__.co_firstlineno}" in str(info.value)


# -- ufunc methods tracegrad has keep the gradient ----------------------------------------------


UFUNC_METHODS = {
    "add.outer": (lambda t: np.add.outer(t[0], t[1]), lambda a: np.add.outer(a[0], a[1])),
    "multiply.outer": (lambda t: np.multiply.outer(t, t[0]),
                       lambda a: np.multiply.outer(a, a[0])),
    "maximum.outer": (lambda t: np.maximum.outer(A[1], t[0]),
                      lambda a: np.maximum.outer(A[1], a[0])),
    "add.reduce": (lambda t: np.add.reduce(t, axis=1), lambda a: np.add.reduce(a, axis=1)),
    "multiply.accumulate": (lambda t: np.multiply.accumulate(t),
                            lambda a: np.multiply.accumulate(a)),
}


@pytest.mark.parametrize("name", list(UFUNC_METHODS))
def test_implemented_ufunc_methods_dispatch_and_differentiate(name, backend):
    call, reference = UFUNC_METHODS[name]
    want = reference(A)
    np.testing.assert_allclose(tg.function(call)(A), want, rtol=1e-15)
    x = tg.Variable(A)
    with tg.GradientTape() as tape:
        y = call(x)
    assert isinstance(y, tg.Tensor)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-15)
    weights = np.random.default_rng(4).normal(size=want.shape)
    grad = tape.gradient(y, x, output_gradients=tg.constant(weights)).numpy()
    h = 1e-6
    for idx in np.ndindex(A.shape):
        step = np.zeros_like(A)
        step[idx] = h
        fd = np.sum(weights * (reference(A + step) - reference(A - step))) / (2 * h)
        np.testing.assert_allclose(grad[idx], fd, rtol=1e-6, atol=1e-8)
