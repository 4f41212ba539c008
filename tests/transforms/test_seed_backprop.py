"""The seeds' eager gradient API (backprop.py): implicit_val_and_grad, implicit_grad,
gradients_function, val_and_grad_function, make_vjp, with the values the docstrings state."""

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp


def f(x, y):
    return x * x * x * y - x * y * y


def test_gradients_function_example():
    grad_fn = tg.gradients_function(f)
    x, y = 2.0, 3.0
    x_grad, y_grad = grad_fn(x, y)
    assert x_grad.numpy() == 3 * (2 ** 2) * 3 - 3 ** 2
    assert y_grad.numpy() == (2 ** 3) - 2 * 2 * 3
    assert x_grad.dtype == np.float64

    gradgrad_fn = tg.gradients_function(lambda x, y: grad_fn(x, y)[0])
    x_gradgrad = gradgrad_fn(x, y)[0]
    assert x_gradgrad.numpy() == 6 * 2 * 3

    ygrad_fn = tg.gradients_function(f, params=[1])
    (y_grad,) = ygrad_fn(x, y)
    assert y_grad.numpy() == (2 ** 3) - 2 * 2 * 3


def test_val_and_grad_function_example():
    val_grads_fn = tg.val_and_grad_function(f)
    x, y = 2.0, 3.0
    f_val, (x_grad, y_grad) = val_grads_fn(x, y)
    assert f_val.numpy() == (2 ** 3) * 3 - 2 * (3 ** 2)
    assert x_grad.numpy() == 3 * (2 ** 2) * 3 - 3 ** 2
    assert y_grad.numpy() == (2 ** 3) - 2 * 2 * 3

    val_ygrad_fn = tg.val_and_grad_function(f, params=[1])
    f_val, (y_grad,) = val_ygrad_fn(x, y)
    assert f_val.numpy() == (2 ** 3) * 3 - 2 * (3 ** 2)
    assert y_grad.numpy() == (2 ** 3) - 2 * 2 * 3


def test_params_by_name_and_dy():
    by_name = tg.gradients_function(f, params=["y"])
    (y_grad,) = by_name(2.0, 3.0)
    assert y_grad.numpy() == 8.0 - 12.0
    x = tg.constant([1.0, 2.0])
    (dx,) = tg.gradients_function(lambda x: x * x)(x, dy=tg.constant([10.0, -1.0]))
    np.testing.assert_array_equal(dx.numpy(), [20.0, -4.0])


def test_make_vjp_example():
    def square(x):
        return x * x

    result, vjp = tg.make_vjp(square)(tg.constant(3.0))
    assert result.numpy() == 9.0
    assert [g.numpy() for g in vjp()] == [6.0]
    assert [g.numpy() for g in vjp(dy=2.0)] == [12.0]  # persistent by default


def test_make_vjp_not_persistent_can_be_used_once():
    _, vjp = tg.make_vjp(lambda x: x * x, persistent=False)(tg.constant(3.0))
    assert vjp()[0].numpy() == 6.0
    with pytest.raises(RuntimeError):
        vjp()


def test_same_tensor_passed_twice_is_differentiated_independently():
    g = tg.gradients_function(lambda x, y: x * y)
    one = tg.constant(1.0)
    assert [t.numpy() for t in g(one, one)] == [1.0, 1.0]
    two = tg.constant(2.0)
    assert [t.numpy() for t in g(two, two)] == [2.0, 2.0]


def test_keyword_arguments_are_refused():
    with pytest.raises(ValueError, match="keyword arguments"):
        tg.gradients_function(f)(2.0, y=3.0)
    with pytest.raises(ValueError, match="keyword arguments"):
        tg.val_and_grad_function(f)(2.0, y=3.0, dy=1.0)
    with pytest.raises(ValueError, match="keyword arguments"):
        tg.make_vjp(f)(2.0, y=3.0)


def test_params_must_be_all_strings_or_all_integers():
    with pytest.raises(ValueError, match="all strings or all integers"):
        tg.gradients_function(f, params=[0, "y"])(2.0, 3.0)
    with pytest.raises(ValueError, match="not parameters"):
        tg.gradients_function(f, params=["z"])(2.0, 3.0)


def test_self_is_skipped_for_methods_and_callable_objects_work():
    class Model:
        def __init__(self, scale):
            self.scale = scale

        def loss(self, x, y):
            return x * y * self.scale

        def __call__(self, x):
            return x * x * self.scale

    m = Model(3.0)
    dx, dy = tg.gradients_function(m.loss)(2.0, 5.0)
    assert (dx.numpy(), dy.numpy()) == (15.0, 6.0)
    (dy,) = tg.gradients_function(m.loss, params=["y"])(2.0, 5.0)
    assert dy.numpy() == 6.0
    (dx,) = tg.gradients_function(m)(2.0)
    assert dx.numpy() == 12.0


def test_function_returning_none_raises():
    def forgot(x):
        x * x

    with pytest.raises(ValueError, match="did you forget to return a value from forgot"):
        tg.gradients_function(forgot)(1.0)
    with pytest.raises(ValueError, match="did you forget to return a value from forgot"):
        tg.implicit_grad(forgot)(1.0)


def test_several_outputs_are_summed_and_dy_weights_them():
    def two(x):
        return [x * x, x * 3.0]

    value, (dx,) = tg.val_and_grad_function(two)(tg.constant(2.0))
    assert [v.numpy() for v in value] == [4.0, 6.0]
    assert dx.numpy() == 4.0 + 3.0
    _, (dx,) = tg.val_and_grad_function(two)(tg.constant(2.0), dy=[1.0, -1.0])
    assert dx.numpy() == 4.0 - 3.0


def test_implicit_val_and_grad_differentiates_the_variables_read():
    w = tg.Variable([[1.0], [2.0], [-1.0]])
    b = tg.Variable(0.5)
    unused = tg.Variable(7.0)
    frozen = tg.Variable(2.0, trainable=False)

    def loss(x, y):
        return tnp.sum(tnp.square(x @ w + b - y)) * frozen

    x = tg.constant([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    y = tg.constant([[10.0], [20.0]])
    value, grads_and_vars = tg.implicit_val_and_grad(loss)(x, y)
    residual = x.numpy() @ w.numpy() + 0.5 - y.numpy()
    assert value.numpy() == pytest.approx(2.0 * np.sum(residual ** 2))
    assert [v for _, v in grads_and_vars] == [w, b]  # creation order, no unused or frozen
    np.testing.assert_allclose(grads_and_vars[0][0].numpy(), 4.0 * x.numpy().T @ residual)
    np.testing.assert_allclose(grads_and_vars[1][0].numpy(), 4.0 * residual.sum())
    grads = tg.implicit_grad(loss)(x, y)
    np.testing.assert_allclose(grads[0][0].numpy(), grads_and_vars[0][0].numpy())
    assert unused.numpy() == 7.0


def test_implicit_grad_without_trainable_variables_raises():
    frozen = tg.Variable(2.0, trainable=False)
    with pytest.raises(ValueError, match="No trainable variables were accessed"):
        tg.implicit_grad(lambda x: x * frozen)(tg.constant(1.0))


def test_implicit_grad_through_a_compiled_function():
    w = tg.Variable([1.0, 2.0])
    f = tg.function(lambda x: tnp.sum(tnp.sin(w) * x))
    ((g, v),) = tg.implicit_grad(f)(tg.constant([3.0, 4.0]))
    assert v is w
    np.testing.assert_allclose(g.numpy(), np.cos([1.0, 2.0]) * [3.0, 4.0])


def test_gradients_function_of_a_compiled_function():
    f = tg.function(lambda x, y: x * x * y)
    assert [g.numpy() for g in tg.gradients_function(f)(2.0, 3.0)] == [12.0, 4.0]
    assert [g.numpy() for g in tg.gradients_function(f, params=[1])(2.0, 3.0)] == [4.0]
    second = tg.gradients_function(lambda x, y: tg.gradients_function(f)(x, y)[0])
    assert [g.numpy() for g in second(2.0, 3.0)] == [6.0, 4.0]
