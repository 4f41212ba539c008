"""tg.custom_vjp and tg.custom_jvp with JAX's documented examples (a stable log1pexp, a
clipped gradient, a fixed-point solver with implicit gradients), under every transform."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tests.finite_diff import central_difference
from tracegrad.errors import InvalidArgumentError, NotDifferentiableError, UsageError


@tg.custom_jvp
def log1pexp(x):
    return tnp.log1p(tnp.exp(x))


@log1pexp.defjvp
def _log1pexp_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return log1pexp(x), t * (1 - 1 / (1 + tnp.exp(x)))  # calls itself, as JAX's example


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def test_custom_jvp_gives_a_stable_gradient_where_autodiff_gives_nan():
    plain = tg.grad(lambda x: tnp.log1p(tnp.exp(x)))(1000.0)
    assert np.isnan(plain)  # exp(1000) overflows
    assert tg.grad(log1pexp)(1000.0) == 1.0
    x = np.array([-3.0, 0.0, 2.0, 100.0])
    np.testing.assert_allclose(tg.vmap(tg.grad(log1pexp))(x), _sigmoid(x), rtol=1e-14)
    np.testing.assert_allclose(tg.grad(lambda v: tnp.sum(log1pexp(v)))(x), _sigmoid(x),
                               rtol=1e-14)


def test_custom_jvp_in_forward_mode_and_higher_order():
    value, tangent = tg.jvp(log1pexp, (3.0,), (2.0,))
    assert value == pytest.approx(np.log1p(np.exp(3.0)))
    assert tangent == pytest.approx(2.0 * _sigmoid(3.0), rel=1e-15)
    second = tg.grad(tg.grad(log1pexp))(3.0)
    assert second == pytest.approx(_sigmoid(3.0) * (1 - _sigmoid(3.0)), rel=1e-12)
    x = np.array([0.5, -1.0, 2.0])
    jac = tg.jacobian(log1pexp)(x)
    np.testing.assert_allclose(jac, np.diag(_sigmoid(x)), rtol=1e-15)


def test_custom_jvp_eagerly_on_a_tape():
    x = tg.Variable(100.0)
    with tg.GradientTape() as tape:
        y = log1pexp(x)
    assert tape.gradient(y, x).numpy() == 1.0
    assert log1pexp(np.float64(1.0)) == pytest.approx(np.log1p(np.e))


def test_the_rule_is_used_not_the_function():
    @tg.custom_jvp
    def straight_through_round(x):
        return tnp.round(x)

    @straight_through_round.defjvp
    def _(primals, tangents):
        return straight_through_round(*primals), tangents[0]

    x = np.array([0.2, 1.7, -2.4])
    np.testing.assert_array_equal(tg.grad(lambda v: tnp.sum(straight_through_round(v)))(x),
                                  np.ones(3))
    np.testing.assert_array_equal(tg.jvp(straight_through_round, (x,), (x,))[1], x)
    np.testing.assert_array_equal(tg.function(straight_through_round)(x), np.round(x))


def test_defjvps_sums_one_rule_per_argument():
    @tg.custom_jvp
    def f(x, y):
        return tnp.sin(x) * y

    f.defjvps(lambda x_dot, ans, x, y: tnp.cos(x) * x_dot * y,
              lambda y_dot, ans, x, y: tnp.sin(x) * y_dot)
    gx, gy = tg.grad(f, argnums=(0, 1))(0.5, 2.0)
    assert gx == pytest.approx(np.cos(0.5) * 2.0) and gy == pytest.approx(np.sin(0.5))
    assert tg.jvp(f, (0.5, 2.0), (1.0, 1.0))[1] == pytest.approx(np.cos(0.5) * 2 + np.sin(0.5))


@tg.custom_vjp
def clip_gradient(lo, hi, x):
    return x


def _clip_fwd(lo, hi, x):
    return x, (lo, hi)


def _clip_bwd(res, g):
    lo, hi = res
    return (None, None, tnp.clip(g, lo, hi))


clip_gradient.defvjp(_clip_fwd, _clip_bwd)


def test_custom_vjp_clips_the_gradient():
    def f(x):
        return tnp.sin(clip_gradient(-0.75, 0.75, x))

    assert tg.grad(f)(0.1) == 0.75  # cos(0.1) clipped
    assert tg.grad(f)(2.0) == pytest.approx(np.cos(2.0))  # within the bounds
    x = np.array([0.1, 2.0, 3.0])
    np.testing.assert_allclose(tg.vmap(tg.grad(f))(x), np.clip(np.cos(x), -0.75, 0.75))
    np.testing.assert_allclose(tg.function(f)(x), np.sin(x))


def test_custom_vjp_on_tapes_and_tg_gradients():
    v = tg.Variable(0.1)
    with tg.GradientTape() as tape:
        y = 3.0 * clip_gradient(-0.75, 0.75, v)
    assert tape.gradient(y, v).numpy() == 0.75

    @tg.function
    def graph_mode(x):
        y = 3.0 * clip_gradient(-0.75, 0.75, x)
        return tg.gradients(y, x)[0]

    assert graph_mode(0.1) == 0.75


def test_custom_vjp_with_trees_in_and_out_and_residuals():
    @tg.custom_vjp
    def scaled(params, x):
        return {"y": params["w"] * x, "z": params["b"] + x}

    def fwd(params, x):
        return scaled(params, x), (params["w"], x)

    def bwd(res, ct):
        w, x = res
        return {"w": ct["y"] * x, "b": ct["z"]}, ct["y"] * w + ct["z"]

    scaled.defvjp(fwd, bwd)

    def loss(params, x):
        out = scaled(params, x)
        return tnp.sum(out["y"] ** 2 + tnp.sin(out["z"]))

    params = {"w": np.array([1.5, -0.5]), "b": np.array([0.25, 2.0])}
    x = np.array([0.3, 1.1])
    g_params, g_x = tg.grad(loss, argnums=(0, 1))(params, x)

    def plain(w, b, x):
        return np.sum((w * x) ** 2 + np.sin(b + x))

    np.testing.assert_allclose(
        g_params["w"], central_difference(lambda w: plain(w, params["b"], x), params["w"]),
        rtol=1e-7)
    np.testing.assert_allclose(
        g_params["b"], central_difference(lambda b: plain(params["w"], b, x), params["b"]),
        rtol=1e-7)
    np.testing.assert_allclose(
        g_x, central_difference(lambda v: plain(params["w"], params["b"], v), x), rtol=1e-7)


@functools.partial(tg.custom_vjp, nondiff_argnums=(0,))
def fixed_point(f, a, x_guess):
    def unconverged(x_prev, x):
        return tnp.any(tnp.abs(x_prev - x) > 1e-12)

    def step(_, x):
        return x, f(a, x)

    _, x_star = tg.while_loop(unconverged, step, (x_guess, f(a, x_guess)))
    return x_star


def _fixed_point_fwd(f, a, x_init):
    x_star = fixed_point(f, a, x_init)
    return x_star, (a, x_star)


def _rev_iter(f, packed, u):
    a, x_star, x_star_bar = packed
    _, vjp_x = tg.vjp(functools.partial(f, a), x_star)
    return x_star_bar + vjp_x(u)[0]


def _fixed_point_rev(f, res, x_star_bar):
    a, x_star = res
    _, vjp_a = tg.vjp(lambda a: f(a, x_star), a)
    (a_bar,) = vjp_a(fixed_point(functools.partial(_rev_iter, f), (a, x_star, x_star_bar),
                                 x_star_bar))
    return a_bar, tnp.zeros_like(x_star)


fixed_point.defvjp(_fixed_point_fwd, _fixed_point_rev)


def newton_sqrt(a):
    return fixed_point(lambda a, x: 0.5 * (x + a / x), a, a)


def test_fixed_point_with_implicit_gradients():
    assert tg.function(newton_sqrt)(2.0) == pytest.approx(np.sqrt(2.0), rel=1e-15)
    assert tg.grad(newton_sqrt)(2.0) == pytest.approx(0.5 / np.sqrt(2.0), rel=1e-12)
    assert tg.grad(tg.grad(newton_sqrt))(2.0) == pytest.approx(-0.25 * 2.0 ** -1.5, rel=1e-9)
    a = np.array([2.0, 4.0, 9.0])
    np.testing.assert_allclose(tg.vmap(tg.grad(newton_sqrt))(a), 0.5 / np.sqrt(a), rtol=1e-12)


def test_forward_mode_of_a_custom_vjp_function_is_refused_as_in_jax():
    with pytest.raises(NotDifferentiableError, match="forward-mode differentiation .* of a "
                                                     "custom_vjp function is not defined"):
        tg.jvp(lambda x: 3.0 * clip_gradient(-0.75, 0.75, x), (0.1,), (1.0,))
    # reverse over reverse differentiates bwd in its cotangent: d/dx of clip(3 x**2) is
    # 6 x through the clipping bwd again, so clipped to 0.75 at x = 0.2, as in JAX
    x = np.array([0.1, 0.2])
    hessian = tg.hessian(lambda x: tnp.sum(clip_gradient(-0.75, 0.75, x) ** 3))(x)
    np.testing.assert_allclose(hessian, np.diag([0.6, 0.75]), rtol=1e-15)


def test_misuse_is_a_clear_error():
    @tg.custom_vjp
    def f(x):
        return x

    with pytest.raises(UsageError, match=r"f has no rule: call f\.defvjp"):
        tg.grad(f)(1.0)
    f.defvjp(lambda x: (x, None), lambda res, g: (g, g))
    with pytest.raises(InvalidArgumentError, match="bwd must return a tuple of 1 cotangents"):
        tg.grad(f)(1.0)
    f.defvjp(lambda x: x, lambda res, g: (g,))
    with pytest.raises(InvalidArgumentError, match=r"fwd must return a pair"):
        tg.grad(f)(1.0)

    @tg.custom_jvp
    def h(x):
        return x

    with pytest.raises(UsageError, match=r"h has no rule: call h\.defjvp"):
        tg.grad(h)(1.0)


def test_extending_doc_examples_run():
    import pathlib
    import re

    doc = pathlib.Path(__file__).resolve().parents[2] / "docs" / "extending.md"
    blocks = re.findall(r"```python\n(.*?)```", doc.read_text(), flags=re.S)
    namespace = {}
    for i, block in enumerate(blocks):
        exec(compile(block, f"{doc}:block{i}", "exec"), namespace)  # noqa: S102
    assert len(blocks) == 5 and "log1pexp_jvp" in namespace


def test_custom_vjp_arguments_with_none_leaves():
    @tg.custom_vjp
    def scale(p):
        return p["a"] * 2.0

    scale.defvjp(lambda p: (p["a"] * 2.0, None), lambda res, g: ({"a": g * 2.0, "c": None},))
    g = tg.grad(lambda a: tnp.sum(scale({"a": a, "c": None})))(np.ones(3))
    np.testing.assert_array_equal(g, np.full(3, 2.0))


def test_jacobian_picks_reverse_mode_for_a_custom_vjp_function():
    # fewer inputs than outputs would pick forward mode, which a custom_vjp does not have
    jac = tg.jacobian(lambda x: clip_gradient(-0.75, 0.75, x) * np.arange(3.0))(2.0)
    np.testing.assert_array_equal(jac, [0.0, 0.75, 0.75])  # each row clipped by bwd
    with pytest.raises(NotDifferentiableError, match="forward-mode"):
        tg.jacobian(lambda x: clip_gradient(-0.75, 0.75, x) * np.arange(3.0), mode="fwd")(2.0)


@tg.custom_jvp
def _doubling_jvp(x):
    return tnp.sin(x)


@_doubling_jvp.defjvp
def _doubling_rule(primals, tangents):
    (x,), (t,) = primals, tangents
    return _doubling_jvp(x), 2.0 * _doubling_jvp(x) * t  # deliberately f' = 2 f


@tg.custom_vjp
def _doubling_vjp(x):
    return tnp.sin(x)


_doubling_vjp.defvjp(lambda x: (tnp.sin(x), x), lambda x, g: (2.0 * g * _doubling_vjp(x),))


@pytest.mark.parametrize("f", [_doubling_jvp, _doubling_vjp], ids=["custom_jvp", "custom_vjp"])
def test_a_rule_calling_its_function_is_the_rule_at_every_order(f, numpy_backend):
    x = 0.8  # through the plain function the second derivative would be 2 cos(x)
    assert tg.grad(tg.grad(f))(x) == pytest.approx(4 * np.sin(x), rel=1e-14)
    assert tg.grad(tg.grad(tg.grad(f)))(x) == pytest.approx(8 * np.sin(x), rel=1e-14)
    traced = tg.function(lambda v: tnp.sum(f(v)))
    v = np.array([0.2, 1.2])
    traced(v)  # traced without a gradient first
    np.testing.assert_allclose(tg.hessian(traced)(v), np.diag(4 * np.sin(v)), rtol=1e-14)


# -- Variables ---------------------------------------------------------------------------------


@tg.custom_vjp
def _scaled_sin(w, x):
    return w * tnp.sin(x)


def _scaled_sin_fwd(w, x):
    return w * tnp.sin(x), (w, x)


def _scaled_sin_bwd(res, g):
    w, x = res
    return tnp.sum(g * tnp.sin(x)), g * w * tnp.cos(x)


_scaled_sin.defvjp(_scaled_sin_fwd, _scaled_sin_bwd)


@tg.custom_jvp
def _scaled_cos(w, x):
    return w * tnp.cos(x)


_scaled_cos.defjvps(lambda t, out, w, x: t * tnp.cos(x),
                    lambda t, out, w, x: -w * tnp.sin(x) * t)


@pytest.mark.parametrize("f, np_f", [(_scaled_sin, np.sin), (_scaled_cos, np.cos)],
                         ids=["custom_vjp", "custom_jvp"])
def test_a_variable_argument_gets_its_gradient_on_tapes_and_tg_gradients(f, np_f, numpy_backend):
    x = np.array([0.3, 0.5, 1.1])
    expected = central_difference(lambda w: np.sum(w * np_f(x)), np.array(1.5))
    w = tg.Variable(1.5, name="w")
    with tg.GradientTape() as tape:  # eagerly
        y = tnp.sum(f(w, tg.constant(x)))
    assert tape.gradient(y, w).numpy() == pytest.approx(float(expected), rel=1e-8)

    @tg.function
    def in_trace(x):
        y = tnp.sum(f(w, x))
        with tg.GradientTape() as inner:
            z = tnp.sum(f(w, x))
        return tg.gradients(y, [w])[0], inner.gradient(z, w)

    for g in in_trace(x):
        assert g == pytest.approx(float(expected), rel=1e-8)
    with tg.GradientTape() as tape:  # a compiled call recorded on an eager tape
        y = tg.function(lambda x: tnp.sum(f(w, x)))(x)
    assert tape.gradient(y, w).numpy() == pytest.approx(float(expected), rel=1e-8)


def test_a_variable_the_rule_closes_over_is_refused_only_when_differentiated(numpy_backend):
    w = tg.Variable(2.0, name="w_closed")

    @tg.custom_vjp
    def closes(x):
        return w * x

    closes.defvjp(lambda x: (w * x, None), lambda _, g: (g * w,))
    x = tg.constant([1.0, 3.0])
    with tg.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = closes(x)
    np.testing.assert_array_equal(tape.gradient(y, x).numpy(), [2.0, 2.0])
    with pytest.raises(NotDifferentiableError, match=r"custom_vjp function closes reads "
                                                     r"trainable Variables \['w_closed'\]"):
        tape.gradient(y, w)

    @tg.function
    def wrt_w(x):
        return tg.gradients(tnp.sum(closes(x)), [w])

    with pytest.raises(NotDifferentiableError, match="pass them as arguments"):
        wrt_w(np.array([1.0, 3.0]))
