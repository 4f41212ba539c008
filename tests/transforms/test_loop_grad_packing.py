"""A loop's gradient stacks values of one type: the residuals its replay stores at each step
are one carry per type, and so are the sums of the gradients of the const slices a step
reads. A step reading six weight rows threads one stacked sum through the backward loop,
not six (issue 30: the LSTM's backward loop had 133 operands)."""

from __future__ import annotations

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tests.finite_diff import central_difference
from tracegrad.ops import control_flow
from tracegrad.ops.control_flow import while_p
from tracegrad.passes import optimize
from tracegrad.transforms.evaluate import Interpreter

RNG = np.random.default_rng(7)
N, STEPS = 5, 40


def _rnn(w, b, x0, xs, scale):
    """A recurrence whose step reads three weight and three bias vectors of one size, a
    vector of another size and a scalar; it stores `tanh`s and `exp`s of both sizes."""
    def step(h, x):
        a = tnp.tanh(h * w[0] + x * w[1] + b[0])
        c = tnp.tanh(a * w[2] + b[1]) * tnp.exp(-h * h * 0.1)
        h = a * 0.5 + c * 0.5 + b[2] * tnp.sum(tnp.exp(x0 * scale))
        return h, tnp.sum(h * h)

    h, ys = tg.scan(step, tnp.zeros(N), xs)
    return tnp.sum(ys) + tnp.sum(h)


def _rnn_np(w, b, x0, xs, scale):
    h = np.zeros(N)
    total = 0.0
    for x in xs:
        a = np.tanh(h * w[0] + x * w[1] + b[0])
        c = np.tanh(a * w[2] + b[1]) * np.exp(-h * h * 0.1)
        h = a * 0.5 + c * 0.5 + b[2] * np.sum(np.exp(x0 * scale))
        total += np.sum(h * h)
    return total + np.sum(h)


def _args():
    return (RNG.standard_normal((3, N)) * 0.5, RNG.standard_normal((3, N)) * 0.2,
            RNG.standard_normal(3) * 0.3, RNG.standard_normal((STEPS, N)), 0.7)


def _loops(graph):
    return [op for op in graph.operations if op.primitive is while_p]


def test_the_backward_loop_stacks_the_weights_gradients_and_the_residuals():
    args = _args()
    vg = tg.value_and_grad(_rnn, argnums=(0, 1, 2))
    graph = optimize(tg.function(vg).get_concrete_function(*args).graph)
    forward, backward = _loops(graph)
    # the forward loop: the counter, h, the sum, and the three residuals of N stacked
    # (without stacking, a carry each)
    carries = [tuple(t.shape) for t in forward.inputs[forward.attrs["num_consts"]:]]
    assert (3, N) in carries and len(carries) == 4, carries
    # the backward loop's carries: the step, the cotangents of the float carries, x0's
    # gradient, and one stacked sum of the gradients of the six rows of w and b the step
    # reads (without stacking, a carry per row)
    carries = [tuple(t.shape) for t in backward.inputs[backward.attrs["num_consts"]:]]
    assert (6, 1, N) in carries and len(carries) == 5, carries


@pytest.mark.parametrize("backend_name", ["numpy", "numba"])
def test_the_stacked_gradient_matches_finite_differences(backend_name):
    w, b, x0, xs, scale = _args()
    value, (gw, gb, gx0) = tg.function(tg.value_and_grad(_rnn, argnums=(0, 1, 2)),
                                       backend=backend_name)(w, b, x0, xs, scale)
    np.testing.assert_allclose(value, _rnn_np(w, b, x0, xs, scale), rtol=1e-12)
    np.testing.assert_allclose(gw, central_difference(
        lambda v: _rnn_np(v, b, x0, xs, scale), w), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gb, central_difference(
        lambda v: _rnn_np(w, v, x0, xs, scale), b), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gx0, central_difference(
        lambda v: _rnn_np(w, b, v, xs, scale), x0), rtol=1e-6, atol=1e-8)


def test_unknown_dims_and_integer_consts_are_not_stacked():
    def f(w, k, xs):
        def step(h, x):
            h = tnp.tanh(h * w[0] + x * w[1]) + tnp.sin(h * w[2]) * k.astype(h.dtype)
            return h, tnp.sum(h)

        return tnp.sum(tg.scan(step, tnp.zeros_like(w[0]), xs)[1])

    spec = [tg.TensorSpec([3, None]), tg.TensorSpec([], "int64"), tg.TensorSpec([7, None])]
    w, xs = RNG.standard_normal((3, 4)) * 0.5, RNG.standard_normal((7, 4))
    grad = tg.function(tg.grad(f), input_signature=spec)(w, np.int64(2), xs)
    np.testing.assert_allclose(grad, central_difference(
        lambda v: tg.function(f, backend="numpy")(v, np.int64(2), xs), w), rtol=1e-6,
        atol=1e-8)


def test_second_derivatives_through_the_stacked_loop():
    xs = RNG.standard_normal((6, 3))

    def f(w):
        def step(h, x):
            h = tnp.tanh(h * w[0] + x * w[1] + w[2])
            return h, tnp.sum(h * h)

        return tnp.sum(tg.scan(step, tnp.zeros(3), xs)[1])

    w = RNG.standard_normal((3, 3)) * 0.5
    hess = tg.function(tg.hessian(f))(w)
    grad = tg.function(tg.grad(f), backend="numpy")
    want = np.stack([central_difference(lambda v: grad(v)[i], w) for i in np.ndindex(3, 3)])
    np.testing.assert_allclose(hess.reshape(9, 3, 3), want, rtol=1e-5, atol=1e-7)


def test_a_taped_loop_gradient_stacks_eagerly_too():
    w = tg.Variable(RNG.standard_normal((3, 4)) * 0.5)
    xs = RNG.standard_normal((5, 4))

    def step(h, x):
        h = tnp.tanh(h * w[0] + x * w[1] + w[2])
        return h, tnp.sum(h * h)

    with tg.GradientTape() as tape:
        loss = tnp.sum(tg.scan(step, tnp.zeros(4), tg.constant(xs))[1])
    got = tape.gradient(loss, w)

    def loss_np(v):
        h, total = np.zeros(4), 0.0
        for x in xs:
            h = np.tanh(h * v[0] + x * v[1] + v[2])
            total += np.sum(h * h)
        return total

    np.testing.assert_allclose(np.asarray(got), central_difference(loss_np, w.numpy()),
                               rtol=1e-6, atol=1e-8)


def test_rows_of_a_large_const_are_stacked_not_the_const():
    # the loop pass sums each row's gradient in a carry of its own (passes/loops.py,
    # `_split_accumulators`), the rows of one size stacked; a const above PACK_MAX_ELEMENTS
    # is never stacked whole (the step would add zero-padded matrices)
    big = int(np.sqrt(control_flow.PACK_MAX_ELEMENTS)) + 8
    a, b = RNG.standard_normal((2, big, big)) * 0.1
    xs = RNG.standard_normal((6, big))

    def f(a, b):
        def step(h, x):
            h = tnp.tanh(h * a[0] + x * b[1]) + tnp.sin(h * a[2] + b[3])
            return h, tnp.sum(h)

        return tnp.sum(tg.scan(step, tnp.zeros(big), xs)[1])

    graph = optimize(tg.function(tg.grad(f, argnums=(0, 1))).get_concrete_function(a, b).graph)
    backward = _loops(graph)[-1]
    carries = [tuple(t.shape) for t in backward.inputs[backward.attrs["num_consts"]:]]
    assert (2, big, big) not in carries and (big, big) not in carries, carries
    assert (4, 1, big) in carries, carries
    ga, gb = tg.function(tg.grad(f, argnums=(0, 1)))(a, b)
    run = tg.function(f, backend="numpy")
    np.testing.assert_allclose(ga, central_difference(lambda v: run(v, b), a), rtol=1e-6,
                               atol=1e-8)
    np.testing.assert_allclose(gb, central_difference(lambda v: run(a, v), b), rtol=1e-6,
                               atol=1e-8)


def test_stacked_row_sums_keep_the_bits_of_the_unstacked(monkeypatch):
    # each row read twice a step: its two terms are added in their order, stacked or not
    xs = RNG.standard_normal((30, 4))

    def f(w):
        def step(h, x):
            h = tnp.tanh(h * w[0] + x * w[1]) * tnp.cos(h * w[0] - x * w[1] + w[2])
            return h, tnp.sum(h)

        return tnp.sum(tg.scan(step, tnp.zeros(4), xs)[1])

    w = RNG.standard_normal((3, 4)) * 0.5
    graph = tg.function(tg.grad(f)).get_concrete_function(w).graph
    stacked = optimize(graph)
    backward = _loops(stacked)[-1]
    carries = [tuple(t.shape) for t in backward.inputs[backward.attrs["num_consts"]:]]
    assert (2, 1, 4) in carries, carries  # rows 0 and 1, two terms each
    monkeypatch.setattr(control_flow, "PACK_MAX_ELEMENTS", 0)
    apart = optimize(graph)
    backward = _loops(apart)[-1]
    assert (2, 1, 4) not in [tuple(t.shape) for t in backward.inputs]
    got = Interpreter(stacked)([w])[0]
    np.testing.assert_array_equal(got, Interpreter(apart)([w])[0])
    np.testing.assert_allclose(got, central_difference(
        lambda v: tg.function(f, backend="numpy")(v), w), rtol=1e-6, atol=1e-8)
