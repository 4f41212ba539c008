"""A traced `tg.custom_gradient` function's gradient function is traced only when a
gradient is asked for: it may call its own function (to any order), read the forward's
intermediates, and what it computes is differentiated again — second derivatives go
through the custom rule, not through the forward pass."""

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tests.finite_diff import central_difference

# the reference backend (the numba backend is sampled by the last test of this group)
pytestmark = pytest.mark.usefixtures("numpy_backend")


@tg.custom_gradient
def doubling_sin(x):
    """sin(x), with the rule f' = 2 f: deliberately not sin's derivative, so a derivative
    taken through the rule (2^k sin x) differs from one taken through the forward pass."""
    y = tnp.sin(x)

    def grad(dy):
        return dy * 2.0 * doubling_sin(x)

    return y, grad


@tg.custom_gradient
def squared_rule(x):
    """exp(x), with the rule f' = e * x^2 where e is the forward's intermediate exp(x)."""
    e = tnp.exp(x)

    def grad(dy):
        return dy * e * x * x

    return e, grad


def _nth(f, n):
    for _ in range(n):
        f = tg.grad(f)
    return f


@pytest.mark.parametrize("order", [1, 2, 3])
def test_higher_derivatives_go_through_the_rule_that_calls_its_own_function(order):
    x = 0.7
    # through the forward pass the second derivative would be 2 cos(x)
    assert _nth(doubling_sin, order)(x) == pytest.approx(2.0 ** order * np.sin(x), rel=1e-14)


def test_second_derivative_of_a_rule_reading_forward_values_is_the_rules_derivative():
    x = 0.3
    d1 = tg.grad(squared_rule)
    assert d1(x) == pytest.approx(np.exp(x) * x * x, rel=1e-14)
    # the rule as a function of x, differentiated numerically
    fd = central_difference(lambda v: d1(float(v)), x)
    assert tg.grad(d1)(x) == pytest.approx(float(fd), rel=1e-8)
    assert tg.grad(d1)(x) == pytest.approx(np.exp(x) * (x * x + 2 * x), rel=1e-14)


@tg.custom_gradient
def fixed_point(a, x0, *, f, iters=12):
    """autograd's `fixed_points` example with tg.custom_gradient: the fixed point of
    `f(a)` from x0, whose gradient solves the adjoint fixed point by calling
    `fixed_point` itself (on the tuple `(a, x*, g)`)."""
    x = x0
    for _ in range(iters):
        x = f(a)(x)

    def grad(g):
        _, vjp_a = tg.vjp(lambda a: f(a)(x), a)

        def rev_iter(params):
            a, x_star, x_star_bar = params
            _, vjp_x = tg.vjp(f(a), x_star)
            return lambda u: vjp_x(u)[0] + x_star_bar

        u = fixed_point((a, x, g), tnp.zeros_like(g), f=rev_iter, iters=iters)
        return vjp_a(u)[0], None

    return x, grad


def _newton_sqrt(a):
    return fixed_point(a, a, f=lambda a: lambda x: 0.5 * (x + a / x))


def test_autograds_fixed_points_example_first_and_second_derivatives():
    a = 2.0
    assert tg.function(_newton_sqrt)(a) == pytest.approx(np.sqrt(a), rel=1e-15)
    assert tg.grad(_newton_sqrt)(a) == pytest.approx(0.5 * a ** -0.5, rel=1e-13)
    assert tg.grad(tg.grad(_newton_sqrt))(a) == pytest.approx(-0.25 * a ** -1.5, rel=1e-10)
    fd = central_difference(lambda v: tg.grad(_newton_sqrt)(float(v)), a)
    assert tg.grad(tg.grad(_newton_sqrt))(a) == pytest.approx(float(fd), rel=1e-7)


def test_a_traced_function_differentiated_later_runs_the_deferred_rule():
    traced = tg.function(lambda x: tnp.sum(doubling_sin(x)))
    x = np.array([0.2, 0.9])
    np.testing.assert_allclose(traced(x), np.sum(np.sin(x)), rtol=1e-15)  # forward only
    np.testing.assert_allclose(tg.grad(traced)(x), 2 * np.sin(x), rtol=1e-14)
    np.testing.assert_allclose(tg.hessian(traced)(x), np.diag(4 * np.sin(x)), rtol=1e-14)
    # eagerly on tapes, the compiled call's gradient graph copies the deferred op
    v = tg.Variable(x)
    with tg.GradientTape() as outer:
        with tg.GradientTape() as inner:
            y = traced(v)
        g = inner.gradient(y, v)
        s = tnp.sum(g)
    np.testing.assert_allclose(g.numpy(), 2 * np.sin(x), rtol=1e-14)
    np.testing.assert_allclose(outer.gradient(s, v).numpy(), 4 * np.sin(x), rtol=1e-14)


def test_gradients_and_hessians_inside_a_trace():
    @tg.function
    def both(x):
        y = doubling_sin(x)
        (g,) = tg.gradients(y, [x])
        (h,) = tg.hessians(y, [x])
        return g, h

    g, h = both(np.array([0.5, 1.5]))
    np.testing.assert_allclose(g, 2 * np.sin([0.5, 1.5]), rtol=1e-14)
    np.testing.assert_allclose(h, np.diag(4 * np.sin([0.5, 1.5])), rtol=1e-14)


def test_vmap_jacobian_and_gradients_of_batched_deferred_rules():
    x = np.array([0.1, 0.6, 1.1])
    np.testing.assert_allclose(tg.vmap(tg.grad(doubling_sin))(x), 2 * np.sin(x), rtol=1e-14)
    # the gradient of a batched call: the rule traced for one example, then batched
    np.testing.assert_allclose(tg.grad(lambda x: tnp.sum(tg.vmap(doubling_sin)(x)))(x),
                               2 * np.sin(x), rtol=1e-14)
    np.testing.assert_allclose(
        tg.grad(lambda x: tnp.sum(tg.vmap(tg.grad(doubling_sin))(x)))(x), 4 * np.sin(x),
        rtol=1e-14)
    np.testing.assert_allclose(tg.jacobian(doubling_sin)(x), np.diag(2 * np.sin(x)),
                               rtol=1e-14)
    np.testing.assert_allclose(tg.jacobian(doubling_sin, mode="fwd")(x),
                               np.diag(2 * np.sin(x)), rtol=1e-14)
    np.testing.assert_allclose(tg.vmap(tg.grad(_newton_sqrt))(np.array([2.0, 9.0])),
                               0.5 / np.sqrt([2.0, 9.0]), rtol=1e-13)


def test_deferred_rules_inside_cond_and_while_loop_bodies():
    def branchy(x):
        return tg.cond(x > 0, lambda: doubling_sin(x) * 3.0, lambda: x)

    assert tg.grad(branchy)(0.5) == pytest.approx(6 * np.sin(0.5), rel=1e-14)
    assert tg.grad(tg.grad(branchy))(0.5) == pytest.approx(12 * np.sin(0.5), rel=1e-14)

    def twice(x):
        _, y = tg.while_loop(lambda i, y: i < 2, lambda i, y: (i + 1, doubling_sin(y)), (0, x))
        return y

    assert tg.grad(twice)(0.5) == pytest.approx(4 * np.sin(np.sin(0.5)) * np.sin(0.5),
                                                rel=1e-14)


def test_a_rule_is_traced_only_when_a_gradient_is_asked_for():
    calls = []

    @tg.custom_gradient
    def counted(x):
        def grad(dy):
            calls.append(1)
            return dy * 3.0

        return x * 2.0, grad

    f = tg.function(lambda x: counted(x) + 1.0)
    assert f(1.0) == 3.0 and calls == []
    assert tg.grad(f)(1.0) == 3.0 and calls


def test_the_numba_backend_runs_the_gradient_of_a_deferred_rule():
    x = np.array([0.3, 1.3])
    for backend in ("numpy", "numba"):
        got = tg.function(tg.grad(lambda x: tnp.sum(doubling_sin(x))), backend=backend)(x)
        np.testing.assert_allclose(got, 2 * np.sin(x), rtol=1e-14)


# -- the same programs as tg.custom_vjp / tg.custom_jvp (test_custom_rules.py) ---------------


@tg.custom_gradient
def _log1pexp(x):
    def grad(dy):
        return dy * (1 - 1 / (1 + tnp.exp(x)))

    return tnp.log1p(tnp.exp(x)), grad


@tg.custom_gradient
def _clip_gradient(x, *, lo, hi):
    return x, lambda g: tnp.clip(g, lo, hi)


def test_the_jax_examples_agree_with_their_custom_gradient_forms():
    from tests.transforms.test_custom_rules import clip_gradient, log1pexp, newton_sqrt

    x = np.array([-3.0, 0.0, 2.0, 40.0, 1000.0])
    for order in (1, 2):
        np.testing.assert_allclose(tg.vmap(_nth(_log1pexp, order))(x[:4]),
                                   tg.vmap(_nth(log1pexp, order))(x[:4]), rtol=1e-14)
    assert tg.grad(_log1pexp)(1000.0) == tg.grad(log1pexp)(1000.0) == 1.0

    def clipped(f):
        return tg.grad(lambda x: tnp.sum(tnp.sin(f(x))))

    ours = clipped(lambda x: _clip_gradient(x, lo=-0.75, hi=0.75))(x)
    np.testing.assert_array_equal(ours, clipped(lambda x: clip_gradient(-0.75, 0.75, x))(x))
    np.testing.assert_array_equal(ours, np.clip(np.cos(x), -0.75, 0.75))
    a = np.array([2.0, 9.0])
    for order in (1, 2):
        np.testing.assert_allclose(tg.vmap(_nth(_newton_sqrt, order))(a),
                                   tg.vmap(_nth(newton_sqrt, order))(a), rtol=1e-9)
