"""tg.custom_gradient, tg.recompute_grad and tg.grad_pass_through (the custom_gradient.py
seed): eagerly, under tapes, traced inside tg.function, and nested for higher orders."""

import warnings

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp


@tg.custom_gradient
def log1pexp(x):
    e = tnp.exp(x)

    def grad(dy):
        return dy * (1 - 1 / (1 + e))

    return tnp.log(1 + e), grad


def naive_log1pexp(x):
    return tnp.log(1 + tnp.exp(x))


def tape_grad(fn, *xs):
    xs = [tg.constant(x) for x in xs]
    with tg.GradientTape() as g:
        g.watch(xs)
        y = fn(*xs)
    return [None if d is None else d.numpy() for d in g.gradient(y, xs)]


# -- the seed's examples ----------------------------------------------------------------------


def test_log1pexp_gradient_is_finite_at_100():
    assert tape_grad(log1pexp, 100.0) == [1.0]
    # float64 overflows where the seed's float32 did at 100: the naive gradient is NaN
    with np.errstate(over="ignore", invalid="ignore"):
        assert np.isnan(tape_grad(naive_log1pexp, 1000.0)[0])
        assert tape_grad(log1pexp, 1000.0) == [1.0]
    np.testing.assert_allclose(tape_grad(log1pexp, 0.5)[0], 1 / (1 + np.exp(-0.5)))


def test_bar_example_with_two_inputs():
    @tg.custom_gradient
    def bar(x, y):
        def grad(upstream):
            dz_dx = y
            dz_dy = x
            return upstream * dz_dx, upstream * dz_dy

        z = x * y
        return z, grad

    x = tg.constant(2.0)
    y = tg.constant(3.0)
    with tg.GradientTape(persistent=True) as tape:
        tape.watch(x)
        tape.watch(y)
        z = bar(x, y)
    assert z.numpy() == 6.0
    assert tape.gradient(z, x).numpy() == 3.0
    assert tape.gradient(z, y).numpy() == 2.0


def test_custom_gradient_replaces_the_true_gradient():
    @tg.custom_gradient
    def clip_grad(x):
        return x * x, lambda dy: dy * 0.5

    assert tape_grad(clip_grad, 3.0) == [0.5]


def test_custom_gradient_traced_in_function_and_with_functional_grad(backend):
    @tg.function
    def g(x):
        with tg.GradientTape() as tape:
            tape.watch(x)
            y = log1pexp(x)
        return tape.gradient(y, x)

    assert g(100.0) == 1.0
    np.testing.assert_allclose(g(np.array([0.0, 2.0])), 1 / (1 + np.exp(-np.array([0, 2.0]))))
    np.testing.assert_allclose(tg.grad(log1pexp)(100.0), 1.0)
    np.testing.assert_allclose(tg.grad(tg.function(log1pexp))(100.0), 1.0)


def test_custom_gradient_in_function_under_eager_tape(backend):
    f = tg.function(lambda x: tnp.sum(log1pexp(x) * 2.0))
    x = tg.constant([100.0, 0.0])
    with tg.GradientTape() as g:
        g.watch(x)
        y = f(x)
    np.testing.assert_allclose(g.gradient(y, x).numpy(), [2.0, 1.0])


def test_custom_gradient_with_tg_gradients_inside_trace(backend):
    @tg.function
    def f(x):
        return tg.gradients(log1pexp(x) * 3.0, x)[0]

    np.testing.assert_allclose(f(100.0), 3.0)


# -- variables ----------------------------------------------------------------------------------


def test_grad_fn_receives_variables_and_returns_their_gradients():
    w = tg.Variable(2.0)
    inside = tg.Variable(5.0)  # an input: gets its gradient as an input

    @tg.custom_gradient
    def scaled(x, v):
        def grad(dy, variables=None):
            assert variables == [w]
            return (dy * w * 10.0, dy * x), [dy * x * v * 100.0]

        return x * w * v, grad

    x = tg.constant(3.0)
    with tg.GradientTape() as g:
        g.watch(x)
        y = scaled(x, inside)
    dx, dinside, dw = g.gradient(y, [x, inside, w])
    assert (dx.numpy(), dinside.numpy(), dw.numpy()) == (20.0, 3.0, 1500.0)


def test_variables_in_traced_custom_gradient(backend):
    w = tg.Variable(np.array([1.0, 2.0]))

    @tg.custom_gradient
    def f(x):
        def grad(dy, variables):
            return dy * w * 3.0, [dy * x * 3.0]

        return x * w, grad

    @tg.function
    def both(x):
        with tg.GradientTape() as g:
            g.watch(x)
            y = tnp.sum(f(x))
        return g.gradient(y, [x, w])

    dx, dw = both(np.array([5.0, 7.0]))
    np.testing.assert_allclose(dx, [3.0, 6.0])
    np.testing.assert_allclose(dw, [15.0, 21.0])


SCALE = tg.Variable(np.array([2.0, -3.0]))
SHIFT = tg.Variable(0.5)


@tg.custom_gradient
def straight_through(x):
    """SCALE * round(x) + SHIFT with a straight-through gradient for x (round's own is 0)."""
    rounded = tnp.round(x)

    def grad(dy, variables):
        assert variables == [SCALE, SHIFT]
        return dy * SCALE, [dy * rounded, tnp.sum(dy)]

    return SCALE * rounded + SHIFT, grad


X = np.array([0.4, 1.7])
WEIGHTS = np.array([1.0, 10.0])  # d loss / d y
# the custom gradients of sum(WEIGHTS * straight_through(X)) w.r.t. x, SCALE and SHIFT
WANT = ([2.0, -30.0], [0.0, 20.0], 11.0)


def assert_want(grads):
    assert len(grads) == 3
    for got, want in zip(grads, WANT, strict=True):
        np.testing.assert_array_equal(np.asarray(got), want)


def test_custom_gradient_reading_variables_eagerly_under_a_tape():
    x = tg.constant(X)
    with tg.GradientTape() as g:
        g.watch(x)
        loss = tnp.sum(WEIGHTS * straight_through(x))
    grads = g.gradient(loss, [x, SCALE, SHIFT])
    assert all(isinstance(d, tg.Tensor) for d in grads)
    assert_want(grads)


def test_custom_gradient_reading_variables_with_tg_gradients_in_a_function(backend):
    @tg.function
    def grads(x):
        return tg.gradients(tnp.sum(WEIGHTS * straight_through(x)), [x, SCALE, SHIFT])

    assert_want(grads(X))
    assert_want(grads(X))  # the compiled call, no retrace
    assert grads.tracing_count == 1


def test_custom_gradient_reading_variables_with_a_tape_in_a_function(backend):
    @tg.function
    def grads(x):
        with tg.GradientTape() as g:
            g.watch(x)
            loss = tnp.sum(WEIGHTS * straight_through(x))
        return g.gradient(loss, [x, SCALE, SHIFT])

    assert_want(grads(X))


def test_custom_gradient_reading_variables_through_a_compiled_call_on_a_tape(backend):
    forward = tg.function(lambda x: tnp.sum(WEIGHTS * straight_through(x)))
    x = tg.constant(X)
    with tg.GradientTape() as g:
        g.watch(x)
        loss = forward(x)
    assert_want(g.gradient(loss, [x, SCALE, SHIFT]))
    # the functional transforms see the input's custom gradient too
    np.testing.assert_array_equal(
        tg.grad(lambda x: tnp.sum(WEIGHTS * straight_through(x)))(X), WANT[0])


def test_grad_fn_must_accept_variables_when_f_reads_one():
    w = tg.Variable(2.0)

    @tg.custom_gradient
    def f(x):
        return x * w, lambda dy: dy

    with pytest.raises(TypeError, match="must accept keyword argument 'variables'"):
        f(tg.constant(1.0))


def test_wrong_number_of_variable_gradients_raises():
    w = tg.Variable(2.0)

    @tg.custom_gradient
    def f(x):
        def grad(dy, variables=None):
            return dy, []

        return x * w, grad

    x = tg.constant(1.0)
    with tg.GradientTape() as g:
        g.watch(x)
        y = f(x)
    with pytest.raises(ValueError, match="Must return gradient for each variable"):
        g.gradient(y, x)


def test_variables_in_signature_without_variables_warns():
    def f(x):
        def grad(dy, variables=None):
            return dy

        return x * 2.0, grad

    with pytest.warns(UserWarning, match="no trainable Variables"):
        tg.custom_gradient(f)(tg.constant(1.0))


# -- errors and arguments -----------------------------------------------------------------------


def test_wrong_number_of_input_gradients_is_a_clear_error():
    @tg.custom_gradient
    def f(x, y):
        return x * y, lambda dy: dy

    x, y = tg.constant(1.0), tg.constant(2.0)
    with tg.GradientTape() as g:
        g.watch([x, y])
        z = f(x, y)
    with pytest.raises(ValueError, match="expected to return 2 gradients but returned 1"):
        g.gradient(z, x)
    with pytest.raises(ValueError, match="expected to return 2 gradients but returned 1"):
        tg.grad(tg.function(lambda a, b: f(a, b)))(1.0, 2.0)  # traced: when a gradient is


def test_f_must_return_a_pair():
    with pytest.raises(TypeError, match="must return a pair"):
        tg.custom_gradient(lambda x: x * 2.0)(tg.constant(1.0))


def test_keyword_arguments_reach_f_and_get_no_gradient(backend):
    @tg.custom_gradient
    def scale(x, *, factor):
        return x * factor, lambda dy: dy * factor

    x = tg.constant(3.0)
    factor = tg.constant(4.0)
    with tg.GradientTape() as g:
        g.watch([x, factor])
        y = scale(x, factor=factor)
    assert y.numpy() == 12.0
    dx, dfactor = g.gradient(y, [x, factor])
    assert dx.numpy() == 4.0
    assert dfactor is None
    traced = tg.function(lambda x: scale(x, factor=2.0))
    assert traced(5.0) == 10.0
    np.testing.assert_allclose(tg.grad(traced)(5.0), 2.0)


def test_structured_inputs_and_outputs():
    @tg.custom_gradient
    def f(pair, scale):
        a, b = pair

        def grad(da, db):
            return (da * 10.0, db * 20.0), da + db

        return {"a": a * scale, "b": b * scale}, grad

    a, b, s = tg.constant(1.0), tg.constant(2.0), tg.constant(3.0)
    with tg.GradientTape() as g:
        g.watch([a, b, s])
        out = f((a, b), s)
        y = out["a"] + out["b"] * 2.0
    da, db, ds = g.gradient(y, [a, b, s])
    assert (da.numpy(), db.numpy(), ds.numpy()) == (10.0, 40.0, 3.0)


def test_custom_gradient_on_a_method():
    class Layer:
        def __init__(self):
            self.k = 5.0

        @tg.custom_gradient
        def __call__(self, x):
            return x * self.k, lambda dy: dy * 100.0

    layer = Layer()
    assert tape_grad(layer, 2.0) == [100.0]


# -- higher order -------------------------------------------------------------------------------


def first_and_second(fn, x):
    """(fn'(x), fn''(x)) with nested tapes (eagerly or inside a trace)."""
    with tg.GradientTape() as outer:
        outer.watch(x)
        with tg.GradientTape() as inner:
            inner.watch(x)
            y = fn(x)
        d1 = inner.gradient(y, x)
    return d1, outer.gradient(d1, x)


def test_differentiable_grad_fn_gives_second_derivative():
    @tg.custom_gradient
    def cube(x):
        def grad(dy):
            return dy * 3.0 * x * x

        return x * x * x, grad

    d1, d2 = first_and_second(cube, tg.constant(2.0))
    assert (d1.numpy(), d2.numpy()) == (12.0, 12.0)  # 3x^2, 6x


def test_nested_custom_gradient_controls_the_second_order(backend):
    calls = []

    @tg.custom_gradient
    def cube(x):
        def first_order(dy):
            @tg.custom_gradient
            def first_order_custom(unused_x):
                def second_order(ddy):
                    calls.append("second")
                    return ddy * 6.0 * unused_x

                return 3.0 * unused_x * unused_x, second_order

            return dy * first_order_custom(x)

        return x * x * x, first_order

    d1, d2 = first_and_second(cube, tg.constant(2.0))
    assert (d1.numpy(), d2.numpy()) == (12.0, 12.0)
    assert calls == ["second"]
    traced = tg.function(lambda x: first_and_second(cube, x))
    np.testing.assert_allclose(traced(3.0), (27.0, 18.0))


def test_decorated_grad_fn_differentiates_with_respect_to_dy():
    # The seed's warning: a decorated grad_fn's own gradient is w.r.t. dy, not a second
    # derivative with respect to x.
    @tg.custom_gradient
    def square(x):
        @tg.custom_gradient
        def grad_fn(dy):
            def grad_grad_fn(ddy):
                return ddy * 2.0 * x

            return dy * 2.0 * x, grad_grad_fn

        return x * x, grad_fn

    x = tg.constant(3.0)
    dy = tg.constant(1.0)
    with tg.GradientTape(persistent=True) as outer:
        outer.watch([x, dy])
        with tg.GradientTape() as inner:
            inner.watch(x)
            y = square(x)
        dx = inner.gradient(y, x, output_gradients=dy)
    assert dx.numpy() == 6.0
    assert outer.gradient(dx, dy).numpy() == 6.0
    assert outer.gradient(dx, x) is None


# -- recompute_grad ------------------------------------------------------------------------------


def test_recompute_grad_recomputes_the_forward_in_the_backward_pass():
    runs = []

    def block(x, w):
        runs.append(1)
        return tnp.sum(tnp.tanh(x * w) * x)

    fast = tg.recompute_grad(block)
    x0, w0 = np.array([0.5, -1.0]), np.array([2.0, 0.3])
    x, w = tg.constant(x0), tg.constant(w0)
    with tg.GradientTape() as g:
        g.watch([x, w])
        y = fast(x, w)
    assert len(runs) == 1
    assert len(g._tape.records) == 1  # only the boundary op: intermediates were not kept
    dx, dw = g.gradient(y, [x, w])
    assert len(runs) == 2
    t = np.tanh(x0 * w0)
    np.testing.assert_allclose(y.numpy(), np.sum(t * x0))
    np.testing.assert_allclose(dx.numpy(), t + x0 * w0 * (1 - t ** 2))
    np.testing.assert_allclose(dw.numpy(), x0 * x0 * (1 - t ** 2))


def test_recompute_grad_with_variables_and_second_order():
    v = tg.Variable(1.5)
    f = tg.recompute_grad(lambda x: tnp.sin(x * v))
    x = tg.constant(0.4)
    with tg.GradientTape() as outer:
        outer.watch(x)
        with tg.GradientTape() as inner:
            inner.watch(x)
            y = f(x)
        dx, dv = inner.gradient(y, [x, v])
    np.testing.assert_allclose(dx.numpy(), 1.5 * np.cos(0.6))
    np.testing.assert_allclose(dv.numpy(), 0.4 * np.cos(0.6))
    np.testing.assert_allclose(outer.gradient(dx, x).numpy(), -1.5 ** 2 * np.sin(0.6))


def test_recompute_grad_inside_function(backend):
    f = tg.recompute_grad(lambda x: tnp.exp(x) * x)
    np.testing.assert_allclose(tg.grad(tg.function(lambda x: tnp.sum(f(x))))(np.array([0.0, 1.0])),
                               np.exp([0.0, 1.0]) * (1 + np.array([0.0, 1.0])))


# -- grad_pass_through ---------------------------------------------------------------------------


def test_grad_pass_through_assign_example():
    x = tg.Variable(1.0, name="x")
    z = tg.Variable(3.0, name="z")
    with tg.GradientTape() as tape:
        y = tg.grad_pass_through(x.assign)(z ** 2)
    assert y.numpy() == 9.0
    assert x.numpy() == 9.0
    assert tape.gradient(y, z).numpy() == 6.0


def test_grad_pass_through_moving_average():
    class MovingAverage:
        def __init__(self):
            self.value = tg.Variable(0.0, trainable=False)

        def __call__(self, x):
            self.value.assign(self.value * 0.5 + x * 0.5)
            return self.value.value()

    avg = MovingAverage()
    avg(tg.constant(8.0))
    x = tg.constant(2.0)
    with tg.GradientTape() as tape:
        tape.watch(x)
        m = tg.grad_pass_through(avg)(x)
    assert m.numpy() == 3.0
    assert tape.gradient(m, x).numpy() == 1.0


def test_grad_pass_through_of_rounding_inside_function(backend):
    q = tg.function(lambda x: tnp.sum(tg.grad_pass_through(tnp.round)(x) * x))
    x = np.array([0.4, 1.6])
    np.testing.assert_allclose(q(x), np.sum(np.round(x) * x))
    np.testing.assert_allclose(tg.grad(q)(x), x + np.round(x))


def test_no_warning_for_recompute_and_pass_through():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tg.recompute_grad(lambda x: x * 2.0)(tg.constant(1.0))
        tg.grad_pass_through(lambda x: x * 2.0)(tg.constant(1.0))


def test_integer_outputs_get_no_upstream_gradient(backend):
    @tg.custom_gradient
    def with_index(x):
        def grad(dy, di):
            assert di is None
            return dy * 7.0

        return (x * 2.0, tnp.argmax(x)), grad

    x = tg.constant([1.0, 3.0])
    with tg.GradientTape() as g:
        g.watch(x)
        y, i = with_index(x)
    assert i.numpy() == 1
    np.testing.assert_array_equal(g.gradient(y, x).numpy(), [7.0, 7.0])
    traced = tg.function(lambda x: tnp.sum(with_index(x)[0]))
    np.testing.assert_array_equal(tg.grad(traced)(np.array([1.0, 3.0])), [7.0, 7.0])


def test_traced_custom_gradient_is_deferred_in_the_ir_and_written_out_in_json():
    from tracegrad.transforms.custom import vjp_graph
    from tracegrad.transforms.evaluate import evaluate

    graph = tg.trace(lambda x: log1pexp(x) * 2.0)(tg.TensorSpec([2]))
    text = str(graph)
    # the gradient function is traced only when a gradient is asked for ...
    assert "custom_gradient" in text and "grad_graph" not in text
    # ... or when the graph is written out, with the forward values it reads as operands
    read_back = tg.FuncGraph.from_json(graph.to_json())
    assert "grad_graph=func @log1pexp_grad" in str(read_back)
    assert str(tg.FuncGraph.from_json(read_back.to_json())) == str(read_back)
    for g in (graph, read_back):
        backward, wrt, _ = vjp_graph(g)
        assert wrt == [0]
        (dx,) = evaluate(backward, np.array([100.0, 0.0]), np.ones(2))
        np.testing.assert_allclose(dx, [2.0, 1.0])
    # forward-only compiled code does not keep the boundary
    assert "custom_gradient" not in str(tg.optimize(graph))


@tg.custom_gradient
def _sqrt_by_iteration(a):
    x = a
    for _ in range(60):
        x = 0.5 * (x + a / x)

    def grad(g):
        return g / (2.0 * _sqrt_by_iteration(a))  # the function calls itself, as autograd allows

    return x, grad


def test_a_gradient_function_may_call_its_own_function():
    assert tg.grad(_sqrt_by_iteration)(2.0) == pytest.approx(0.5 / np.sqrt(2.0), rel=1e-15)
    # second derivative: through the plain iteration the gradient function called
    assert tg.grad(tg.grad(_sqrt_by_iteration))(2.0) == pytest.approx(-0.25 * 2.0 ** -1.5,
                                                                       rel=1e-12)
    a = np.array([2.0, 9.0])
    np.testing.assert_allclose(tg.vmap(tg.grad(_sqrt_by_iteration))(a), 0.5 / np.sqrt(a),
                               rtol=1e-15)
    v = tg.Variable(4.0)
    with tg.GradientTape() as tape:
        y = _sqrt_by_iteration(v)
    assert tape.gradient(y, v).numpy() == pytest.approx(0.25, rel=1e-15)


@tg.custom_gradient
def _exp_by_itself(x):
    y = tnp.exp(tg.stop_gradient(x))

    def grad(dy):
        return dy * _exp_by_itself(x)

    return y, grad


def test_an_eager_self_calling_gradient_keeps_its_rule_to_every_order():
    x = tg.Variable(0.5)
    with tg.GradientTape() as outer:
        with tg.GradientTape() as inner:
            y = _exp_by_itself(x)
        d1 = inner.gradient(y, x)
    assert d1.numpy() == pytest.approx(np.exp(0.5), rel=1e-15)
    assert outer.gradient(d1, x).numpy() == pytest.approx(np.exp(0.5), rel=1e-15)
