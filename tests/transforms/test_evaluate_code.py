"""The numpy backend turns a graph it runs often (a loop body, a function called again) into
one generated Python function: the same values bit for bit as the op-by-op walk, the same
errors naming the op and the user's line, and results the caller owns (issue 30)."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tracegrad.core.op import REGISTRY, Primitive
from tracegrad.core.types import TensorType
from tracegrad.errors import ShapeError, TracegradIndexError
from tracegrad.transforms import evaluate


@pytest.fixture
def code_at_once(monkeypatch):
    """Every interpreter generates its code on its first run."""
    monkeypatch.setattr(evaluate, "_WALKS_BEFORE_CODE", 0)


def _loop(x, w):
    def body(i, h, acc):
        h = tnp.tanh(h * w[i % 3] + 0.5) * 0.9
        return i + 1, h, acc + tnp.sum(h ** 2) / (i + 1.0)

    _, h, acc = tg.while_loop(lambda i, h, acc: i < 100, body, (0, x, 0.0))
    return h, acc


def test_a_loop_body_runs_as_code_after_its_first_walks():
    x, w = np.linspace(-1.0, 1.0, 5), np.array([[0.5], [1.5], [-0.7]]) * np.ones((3, 5))
    f = tg.function(_loop, backend="numpy")
    h, acc = f(x, w)
    (loop,) = [op for op in f.get_concrete_function(x, w).graph.operations
               if op.name == "while"]
    body = evaluate.interpreter_of(loop.attrs["body_graph"])
    assert body._code is not None, "the body of a 100-step loop was walked every step"
    hh, total = x.copy(), 0.0
    for i in range(100):
        hh = np.tanh(hh * w[i % 3] + 0.5) * 0.9
        total = total + np.sum(hh ** 2) / (i + 1.0)
    np.testing.assert_allclose(h, hh, rtol=1e-14)
    np.testing.assert_allclose(acc, total, rtol=1e-14)


def test_code_and_walk_agree_bit_for_bit_with_the_gradient():
    x, w = np.linspace(-1.0, 1.0, 5), np.array([[0.5], [1.5], [-0.7]]) * np.ones((3, 5))
    graph = tg.function(tg.value_and_grad(lambda x, w: _loop(x, w)[1], argnums=(0, 1))
                        ).get_concrete_function(x, w).graph
    interp = evaluate.Interpreter(graph)
    arrays = [x, w] + [np.asarray(c._value) for c, _ in graph.captures]
    walked = interp._walk(arrays)
    coded = evaluate._Generated(interp).fn(*arrays)
    assert len(walked) == len(coded) == 3
    for a, b in zip(walked, coded, strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    assert np.any(walked[1][1] != 0.0)


def test_an_index_out_of_bounds_in_generated_code_names_the_op_and_line():
    def f(table, n):
        def body(i, acc):
            return i + 1, acc + tnp.take(table, i)  # reads past the end at i == 40

        return tg.while_loop(lambda i, acc: i < n, body, (0, 0.0))[1]

    table = np.arange(40.0)
    run = tg.function(f, backend="numpy")
    assert float(run(table, 40)) == table.sum()  # 40 steps: the body is code by now
    with pytest.raises(TracegradIndexError) as info:
        run(table, 41)
    message = str(info.value)
    assert message.startswith("gather: index 40 is out of bounds"), message
    line = f.__code__.co_firstlineno + 2
    assert f"{__file__}:{line}" in message, message


@pytest.mark.usefixtures("code_at_once")
def test_unknown_dims_that_do_not_fit_are_a_shape_error_in_generated_code():
    f = tg.function(lambda a, b: a // b, backend="numpy",
                    input_signature=[tg.TensorSpec([0, None, None]), tg.TensorSpec([0, None])])
    for _ in range(3):  # shapes checked once, then remembered
        assert f(np.ones((0, 0, 3)), np.ones((0, 3))).shape == (0, 0, 3)
    with pytest.raises(ShapeError, match="broadcast_in_dim.*at run time"):
        f(np.ones((0, 0, 1)), np.ones((0, 3)))


@pytest.mark.usefixtures("code_at_once")
def test_results_are_the_callers_own_arrays():
    def f(x, y):
        def body(i, a, b):
            return i + 1, y, tnp.reshape(a, (-1,))  # the operand itself, and a view

        _, a, b = tg.while_loop(lambda i, a, b: i < 3, body, (0, x, x))
        return a, b, x

    x, y = np.arange(4.0), np.arange(4.0) + 10.0
    a, b, same = tg.function(f, backend="numpy")(x, y)
    for r in (a, b, same):
        assert r.flags.writeable and r.base is None
        assert not np.shares_memory(r, x) and not np.shares_memory(r, y)
    np.testing.assert_array_equal(a, y)
    np.testing.assert_array_equal(b, y)
    np.testing.assert_array_equal(same, x)


@pytest.fixture
def keyword_attr():
    prim = Primitive("test_scaled_by_keyword")
    prim.def_abstract_eval(lambda x, **attrs: TensorType(x.shape, x.dtype))
    prim.def_impl(lambda x, **attrs: x * attrs["lambda"])
    yield prim
    del REGISTRY[prim.name]


@pytest.mark.usefixtures("code_at_once")
def test_an_attribute_named_by_a_python_keyword(keyword_attr):
    f = tg.function(lambda x: keyword_attr.bind(x, **{"lambda": 3.0}) + 1.0, backend="numpy")
    np.testing.assert_array_equal(f(np.arange(3.0)), np.arange(3.0) * 3.0 + 1.0)


def test_a_sub_graph_interpreter_does_not_keep_its_graph_alive():
    # interpreters kept in a dict by graph (each holding its graph) kept every loop body
    # and the functions around them alive for the life of the process
    refs = []
    for k in range(4):
        f = tg.function(lambda x, k=k: tg.while_loop(
            lambda i, v: i < 30, lambda i, v: (i + 1, v * 0.5 + k), (0, x))[1],
            backend="numpy")
        np.testing.assert_allclose(f(np.ones(3)), np.full(3, 0.5 ** 30 + 2 * k * (1 - 0.5 ** 30)))
        refs.append(weakref.ref(f.get_concrete_function(np.ones(3)).graph))
        del f
    gc.collect()
    assert [r() for r in refs] == [None] * 4
