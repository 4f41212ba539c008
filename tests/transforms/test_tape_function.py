"""GradientTape and tg.function: tapes inside traced code, and compiled calls recorded on
eager tapes as one op whose gradient is compiled too."""

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tests.finite_diff import central_difference


def model(x, w):
    return tnp.sum(tnp.tanh(x @ w) * tnp.exp(-x[:, :1]))


def model_np(x, w):
    return np.sum(np.tanh(x @ w) * np.exp(-x[:, :1]))


RNG = np.random.default_rng(7)
X = RNG.normal(size=(4, 3))
W = RNG.normal(size=(3, 2))


# -- tapes inside traced code ------------------------------------------------------------------


def test_tape_inside_function_records_graph_ops(backend):
    @tg.function
    def grad_of_cube(x):
        with tg.GradientTape() as g:
            g.watch(x)
            y = x * x * x
        return y, g.gradient(y, x)

    y, dy = grad_of_cube(np.array([1.0, 2.0]))
    np.testing.assert_allclose(y, [1.0, 8.0])
    np.testing.assert_allclose(dy, [3.0, 12.0])
    graph = grad_of_cube.get_concrete_function(np.array([1.0, 2.0])).graph
    assert len(graph.operations) > 2  # the gradient is part of the graph


def test_nested_tapes_inside_function_give_second_derivative(backend):
    @tg.function
    def second(x):
        with tg.GradientTape() as g:
            g.watch(x)
            with tg.GradientTape() as gg:
                gg.watch(x)
                y = tnp.sin(x) * x
            dy = gg.gradient(y, x)
        return dy, g.gradient(dy, x)

    x = np.array([0.3, -1.2])
    dy, d2y = second(x)
    np.testing.assert_allclose(dy, np.cos(x) * x + np.sin(x))
    np.testing.assert_allclose(d2y, -np.sin(x) * x + 2 * np.cos(x))


def test_tape_inside_function_watches_captured_variables(backend):
    v = tg.Variable(np.array([1.0, -2.0]))

    @tg.function
    def grads(x):
        with tg.GradientTape() as g:
            y = tnp.sum(v * v * x)
        return g.gradient(y, v)

    np.testing.assert_allclose(grads(np.array([3.0, 4.0])), [6.0, -16.0])
    v.assign([2.0, 2.0])
    np.testing.assert_allclose(grads(np.array([3.0, 4.0])), [12.0, 16.0])


@pytest.mark.parametrize("pfor", [False, True], ids=["loop", "pfor"])
def test_tape_inside_function_with_jacobian_and_errors(backend, pfor):
    @tg.function
    def jac(x):
        with tg.GradientTape() as g:  # not persistent: allowed inside a trace
            g.watch(x)
            y = x * x
        return g.jacobian(y, x, experimental_use_pfor=pfor)

    np.testing.assert_allclose(jac(np.array([1.0, 3.0])), [[2.0, 0.0], [0.0, 6.0]])

    @tg.function
    def twice(x):
        with tg.GradientTape() as g:
            g.watch(x)
            y = x * x
        g.gradient(y, x)
        return g.gradient(y, x)

    with pytest.raises(RuntimeError, match="non-persistent"):
        twice(np.array(1.0))


# -- tg.function called under an eager tape ------------------------------------------------------


def test_function_call_is_recorded_as_one_op_with_the_right_gradient(backend):
    f = tg.function(model)
    x, w = tg.constant(X), tg.constant(W)
    with tg.GradientTape(persistent=True) as g:
        g.watch([x, w])
        y = f(x, w)
    assert len(g._tape.records) == 1
    assert g._tape.records[0].primitive.name == "call"
    np.testing.assert_allclose(y.numpy(), model_np(X, W))
    dx, dw = g.gradient(y, [x, w])
    np.testing.assert_allclose(value := dx.numpy(), central_difference(lambda a: model_np(a, W),
                                                                       X), rtol=1e-7)
    assert value.shape == X.shape
    np.testing.assert_allclose(dw.numpy(), central_difference(lambda b: model_np(X, b), W),
                               rtol=1e-7)


def test_gradient_function_of_a_call_is_compiled_once_and_cached(backend):
    f = tg.function(lambda x: tnp.sin(x) * x)
    callee = None
    for value in (0.5, 1.5):
        x = tg.constant(np.array([value, 2 * value]))
        with tg.GradientTape() as g:
            g.watch(x)
            y = f(x)
        record = g._tape.records[0]
        if callee is None:
            callee = record.attrs["callee"]
        assert record.attrs["callee"] is callee
        dx = g.gradient(y, x)
        xs = np.array([value, 2 * value])
        np.testing.assert_allclose(dx.numpy(), np.cos(xs) * xs + np.sin(xs))
    assert callee._backward is not None
    backward_graph = callee._backward[0].graph
    assert any(op.primitive.name == "cos" for op in backward_graph.operations)


def test_call_under_tape_with_variables_as_arguments_and_captures(backend):
    scale = tg.Variable(2.0)
    frozen = tg.Variable(10.0, trainable=False)

    @tg.function
    def f(x, v):
        return tnp.sum(x * v * scale) + frozen

    x = tg.constant([1.0, 2.0])
    v = tg.Variable([3.0, 4.0])
    with tg.GradientTape() as g:
        g.watch(x)
        y = f(x, v)
    assert y.numpy() == 2.0 * (3.0 + 8.0) + 10.0
    dx, dv, dscale, dfrozen = g.gradient(y, [x, v, scale, frozen])
    np.testing.assert_allclose(dx.numpy(), [6.0, 8.0])
    np.testing.assert_allclose(dv.numpy(), [2.0, 4.0])
    assert dscale.numpy() == 11.0
    assert dfrozen is None
    assert set(g.watched_variables()) == {scale, v}


def test_call_with_unwatched_inputs_is_not_recorded(backend):
    f = tg.function(lambda a, b: a * b)
    a, b = tg.constant(2.0), tg.constant(3.0)
    with tg.GradientTape() as g:
        g.watch(a)
        unrelated = f(b, b)
        y = f(a, unrelated)
    assert len(g._tape.records) == 1
    assert g.gradient(y, a).numpy() == 9.0


def test_call_with_several_outputs_integer_outputs_and_python_scalars(backend):
    @tg.function
    def f(x, k, c):
        return {"s": x * c, "i": tnp.argmax(x), "c": tnp.cos(x)}

    x = tg.constant([0.1, 0.7, 0.2])
    with tg.GradientTape() as g:
        g.watch(x)
        out = f(x, 3, 2.5)
        total = tnp.sum(out["s"]) + tnp.sum(out["c"] * 2.0)
    assert out["i"].numpy() == 1
    np.testing.assert_allclose(g.gradient(total, x).numpy(), 2.5 - 2.0 * np.sin(x.numpy()))


def test_higher_order_through_nested_tapes_over_function_calls(backend):
    f = tg.function(lambda x: tnp.sin(x) * x * x)
    x0 = np.array([0.4, -1.1])
    x = tg.constant(x0)
    with tg.GradientTape() as g3:
        g3.watch(x)
        with tg.GradientTape() as g2:
            g2.watch(x)
            with tg.GradientTape() as g1:
                g1.watch(x)
                y = f(x)
            d1 = g1.gradient(y, x)
        d2 = g2.gradient(d1, x)
    d3 = g3.gradient(d2, x)
    s, c = np.sin(x0), np.cos(x0)
    np.testing.assert_allclose(d1.numpy(), c * x0 ** 2 + 2 * x0 * s)
    np.testing.assert_allclose(d2.numpy(), -s * x0 ** 2 + 4 * x0 * c + 2 * s)
    np.testing.assert_allclose(d3.numpy(), -c * x0 ** 2 - 6 * x0 * s + 6 * c)


def test_function_of_function_gradient_under_tape(backend):
    inner = tg.function(lambda x: tnp.exp(x) * 2.0)
    outer = tg.function(lambda x: tnp.sum(inner(x) * x))
    x = tg.constant([0.5, 1.0])
    with tg.GradientTape() as g:
        g.watch(x)
        y = outer(x)
    e = np.exp(x.numpy())
    np.testing.assert_allclose(g.gradient(y, x).numpy(), 2 * e * x.numpy() + 2 * e)


def test_plain_numpy_call_is_not_recorded_and_returns_numpy(backend):
    f = tg.function(lambda x: x * 2.0)
    with tg.GradientTape() as g:
        out = f(np.array([1.0]))
    assert isinstance(out, np.ndarray)
    assert g._tape.records == []


def test_tape_inside_function_sees_an_inlined_concrete_function(backend):
    inner = tg.function(lambda x: tnp.sin(x) * x)
    concrete = inner.get_concrete_function(tg.TensorSpec([2]))

    @tg.function
    def outer(x):
        with tg.GradientTape() as g:
            g.watch(x)
            y = concrete(x)
        return g.gradient(y, x)

    x = np.array([1.0, 2.0])
    np.testing.assert_allclose(outer(x), np.cos(x) * x + np.sin(x))


def test_numpy_call_of_a_function_capturing_a_watched_variable_is_recorded(backend):
    w = tg.Variable(np.array([1.0, 2.0]))
    f = tg.function(lambda x: tnp.sum(tnp.exp(w) * x))
    with tg.GradientTape() as g:
        y = f(np.array([3.0, 4.0]))
    assert isinstance(y, tg.Tensor)
    np.testing.assert_allclose(g.gradient(y, w).numpy(), np.exp([1.0, 2.0]) * [3.0, 4.0])


def test_a_call_op_in_a_graph_is_inlined_by_optimize(backend):
    f = tg.function(lambda x: tnp.exp(x) * 2.0)
    x = tg.constant([0.5, 1.0])
    with tg.GradientTape() as g:
        g.watch(x)
        f(x)
    callee = g._tape.records[0].attrs["callee"]
    from tracegrad.ops.custom import call_p

    outer = tg.function(lambda x: call_p.bind(x, callee=callee)[0] + 1.0)
    np.testing.assert_allclose(outer(np.array([0.5, 1.0])), np.exp([0.5, 1.0]) * 2.0 + 1.0)
    graph = outer.get_concrete_function(np.array([0.5, 1.0])).graph
    assert "call" in {op.primitive.name for op in graph.operations}
    assert "call" not in {op.primitive.name for op in tg.optimize(graph).operations}
