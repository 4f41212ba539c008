"""tg.gradients / tg.hessians with the seeds' documented semantics and examples, gradient
overrides, stop_gradient, and the documented choices of the gradient rules (ties,
subgradients, zeros in products, repeated scatter indices)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tracegrad import ops
from tracegrad.core.op import REGISTRY, Primitive
from tracegrad.core.types import TensorType
from tracegrad.errors import DTypeError, NotDifferentiableError, ShapeError

_names = itertools.count()


def unique(name):
    return f"{name}_{next(_names)}"


# -- the seed's examples (gradients_impl.py) --------------------------------------------------


def test_stop_gradients_give_partial_derivatives():
    @tg.function
    def partial():
        a = tg.constant(0.0)
        b = 2 * a
        return tg.gradients(a + b, [a, b], stop_gradients=[a, b])

    @tg.function
    def total():
        a = tg.constant(0.0)
        b = 2 * a
        return tg.gradients(a + b, [a, b])

    assert partial() == [1.0, 1.0]
    assert total() == [3.0, 1.0]


def test_stop_gradient_ops_are_equivalent_to_stop_gradients():
    @tg.function
    def example():
        a = tg.stop_gradient(tg.constant(0.0))
        b = tg.stop_gradient(2 * a)
        return tg.gradients(a + b, [a, b])

    assert example() == [1.0, 1.0]


def test_unconnected_gradients_none_or_zero():
    def example(use_zero):
        a = tnp.ones([1, 2])
        b = tnp.ones([3, 1])
        mode = "zero" if use_zero else "none"
        return tg.gradients([b], [a], unconnected_gradients=mode)

    f = tg.function(example, static_argnums=0)
    assert f(False) == [None]
    (g,) = f(True)
    np.testing.assert_array_equal(g, np.zeros((1, 2)))
    (g,) = tg.function(lambda: tg.gradients(
        [tnp.ones([3, 1])], [tnp.ones([1, 2])],
        unconnected_gradients=tg.UnconnectedGradients.ZERO))()
    assert g.shape == (1, 2)


def test_weights_and_biases_example():
    @tg.function
    def example():
        ws = tg.constant(0.0)
        bs = 2 * ws
        cost = ws + bs
        d_cost_d_w, d_cost_d_b = tg.gradients(cost, [ws, bs])
        return d_cost_d_w, d_cost_d_b

    assert example() == (3.0, 1.0)


def test_second_gradients_with_respect_to_a_constant_of_value_one():
    # the gradient's seed is a constant 1 too: it must not be taken for x
    @tg.function
    def f():
        x = tg.constant(1.0)
        g = tg.gradients(x * x * x, x)[0]
        return g, tg.gradients(g, x)[0]

    assert f() == (3.0, 6.0)


def test_gradients_is_a_runtime_error_eagerly():
    with pytest.raises(RuntimeError, match="GradientTape"):
        tg.gradients(tg.constant(1.0), [tg.constant(2.0)])
    with pytest.raises(RuntimeError):
        tg.hessians(tg.constant(1.0), [tg.constant(2.0)])


# -- tg.gradients ----------------------------------------------------------------------------


def test_gradients_sums_over_ys_and_weights_by_grad_ys():
    @tg.function
    def f(x):
        y1, y2 = x * x, tnp.sin(x)
        plain = tg.gradients([y1, y2], x)
        weighted = tg.gradients([y1, y2], [x], grad_ys=[np.array([1.0, 2.0]), None])
        return plain[0], weighted[0]

    x = np.array([0.5, -1.5])
    plain, weighted = f(x)
    np.testing.assert_allclose(plain, 2 * x + np.cos(x))
    np.testing.assert_allclose(weighted, 2 * x * [1.0, 2.0] + np.cos(x))


def test_grad_ys_of_the_wrong_shape_or_dtype():
    def bad_shape(x):
        return tg.gradients(x * 2.0, [x], grad_ys=[np.ones(3)])

    with pytest.raises(ShapeError, match="grad_ys"):
        tg.function(bad_shape)(np.ones(2))

    def bad_dtype(x):
        return tg.gradients(x * 2.0, [x], grad_ys=[tnp.ones(2, dtype="float32")])

    with pytest.raises(DTypeError, match="grad_ys"):
        tg.function(bad_dtype)(np.ones(2))


def test_integer_sources_and_targets_get_none():
    @tg.function
    def f(x, n):
        y = x * tnp.astype(n, "float64")
        return tg.gradients(y, [x, n]), tg.gradients(n * 2, [n], unconnected_gradients="zero")

    (gx, gn), (gn2,) = f(np.array([1.0, 2.0]), np.array([3, 4]))
    np.testing.assert_array_equal(gx, [3.0, 4.0])
    assert gn is None and gn2 is None


def test_gradients_with_respect_to_an_intermediate_and_a_variable():
    v = tg.Variable(np.array([2.0, 3.0]))

    @tg.function
    def f(x):
        h = x * v
        y = tnp.sum(h * h)
        return tg.gradients(y, [h, v, x])

    gh, gv, gx = f(np.array([1.0, -1.0]))
    np.testing.assert_allclose(gh, 2 * np.array([2.0, -3.0]))
    np.testing.assert_allclose(gv, 2 * np.array([2.0, -3.0]) * [1.0, -1.0])
    np.testing.assert_allclose(gx, 2 * np.array([2.0, -3.0]) * [2.0, 3.0])


def test_unconnected_mode_is_validated():
    with pytest.raises(ValueError, match="unconnected_gradients"):
        tg.function(lambda x: tg.gradients(x, [x], unconnected_gradients="zeros"))(1.0)


def test_no_ops_are_emitted_for_unconnected_paths():
    @tg.function
    def f(x, y):
        big = tnp.exp(tnp.dot(tnp.reshape(y, (2, 2)), tnp.reshape(y, (2, 2))))
        return tg.gradients(tnp.sum(x * tnp.sum(big)), [x])[0]

    graph = f.get_concrete_function(np.ones(3), np.ones(4)).graph
    names = [op.primitive.name for op in graph.operations]
    # y's forward ops once each, and no gradient ops for y's path (no transposes)
    assert names.count("dot_general") == 1 and names.count("exp") == 1
    assert "transpose" not in names


def test_rule_told_which_inputs_need_no_gradient():
    @tg.function
    def f(a, b):
        return tg.gradients(tnp.sum(tnp.dot(a, b)), [a])[0]

    graph = f.get_concrete_function(np.ones((2, 3)), np.ones((3, 4))).graph
    # one dot_general forward, one for a's gradient: none for b's
    assert sum(op.primitive.name == "dot_general" for op in graph.operations) == 2


# -- tg.hessians -----------------------------------------------------------------------------


def test_hessians_of_quadratic_and_cubic_forms():
    a = np.array([[2.0, 1.0], [0.5, 3.0]])

    @tg.function
    def f(x, z):
        quad = tnp.dot(x, tnp.dot(a, x))
        return tg.hessians([quad, tnp.sum(z ** 3)], [x, z])

    z = np.array([[1.0, -2.0, 0.5]])
    hx, hz = f(np.array([0.3, -0.4]), z)
    np.testing.assert_allclose(hx, a + a.T)
    assert hz.shape == (1, 3, 1, 3)
    np.testing.assert_allclose(hz.reshape(3, 3), np.diag(6 * z.ravel()))


def test_hessian_vector_product_of_the_seed():
    # y = x^T A x: the Hessian-vector product is (A + A^T) v.
    a = np.array([[1.0, 2.0, 0.0], [-1.0, 0.5, 3.0], [0.0, 1.0, 2.0]])
    v = np.array([0.3, -1.0, 2.0])
    (hv,) = tg.hvp(lambda x: tnp.dot(x, tnp.dot(a, x)), (np.ones(3),), (v,))
    np.testing.assert_allclose(hv, (a + a.T) @ v)


# -- stop_gradient ---------------------------------------------------------------------------


def test_stop_gradient_blocks_gradients_everywhere():
    f = lambda x: x * tg.stop_gradient(x)  # noqa: E731
    assert tg.grad(f)(3.0) == 3.0
    x = tg.constant(3.0)
    with tg.GradientTape() as tape:
        tape.watch(x)
        y = f(x)
    assert tape.gradient(y, x).numpy() == 3.0
    assert tg.function(lambda x: tg.gradients(f(x), [x])[0])(3.0) == 3.0


# -- RegisterGradient and gradient_override_map ----------------------------------------------


def test_override_map_applies_to_ops_created_inside_traced_and_eager():
    name = unique("doubled_sin")

    @tg.RegisterGradient(name)
    def _doubled(op, g):
        return [ops.mul(ops.full_like(g, 2.0), ops.mul(g, ops.cos(op.inputs[0])))]

    def f(x):
        with tg.gradient_override_map({"sin": name}):
            inside = tnp.sin(x)
        return tnp.sum(inside + tnp.sin(x))

    x = np.array([0.2, 0.9])
    np.testing.assert_allclose(tg.grad(f)(x), 3 * np.cos(x))
    np.testing.assert_allclose(tg.function(lambda x: tg.gradients(f(x), [x])[0])(x),
                               3 * np.cos(x))
    xt = tg.constant(x)
    with tg.GradientTape() as tape:
        tape.watch(xt)
        y = f(xt)
    np.testing.assert_allclose(tape.gradient(y, xt).numpy(), 3 * np.cos(x))


def test_override_maps_nest_and_restore():
    outer, inner = unique("outer"), unique("inner")
    tg.RegisterGradient(outer)(lambda op, g: [ops.full_like(g, 10.0)])
    tg.RegisterGradient(inner)(lambda op, g: [ops.full_like(g, 100.0)])

    def f(x):
        with tg.gradient_override_map({"exp": outer}):
            a = tnp.exp(x)
            with tg.gradient_override_map({"exp": inner, "log": inner}):
                b = tnp.exp(x)
            c = tnp.exp(x)
        return a + b + c + tnp.exp(x)

    assert tg.grad(f)(0.0) == 10.0 + 100.0 + 10.0 + 1.0


def test_register_gradient_refuses_duplicates_and_map_checks_names():
    name = unique("once")
    tg.RegisterGradient(name)(lambda op, g: [g])
    with pytest.raises(KeyError, match=name):
        tg.RegisterGradient(name)(lambda op, g: [g])
    with pytest.raises(ValueError, match="Sin"):
        with tg.gradient_override_map({"Sin": name}):
            pass
    with pytest.raises(TypeError):
        with tg.gradient_override_map({"sin": len}):
            pass


def test_override_with_an_unregistered_name_fails_when_differentiating():
    def f(x):
        with tg.gradient_override_map({"sin": unique("missing")}):
            return tnp.sin(x)

    with pytest.raises(NotDifferentiableError, match="missing"):
        tg.grad(f)(1.0)


def test_a_rule_returning_the_wrong_shape_is_named():
    name = unique("wrong_shape")
    tg.RegisterGradient(name)(lambda op, g: [ops.reduce_sum(g, axes=(0,))])

    def f(x):
        with tg.gradient_override_map({"tanh": name}):
            return tnp.sum(tnp.tanh(x))

    with pytest.raises(ShapeError, match=r"tanh .*test_gradients\.py:\d+.*shape \[\]"):
        tg.grad(f)(np.ones(3))


# -- primitives without a gradient -----------------------------------------------------------

@pytest.fixture
def opaque_p():
    """A primitive without a gradient rule (removed from the registry afterwards)."""
    prim = Primitive("test_opaque_op")
    prim.def_abstract_eval(lambda x: TensorType(x.shape, x.dtype))
    prim.def_impl(lambda x: x.copy())
    yield prim
    del REGISTRY[prim.name]


def test_an_op_without_a_rule_names_itself_and_the_users_line(opaque_p):
    with pytest.raises(NotDifferentiableError, match=r"test_opaque_op.*test_gradients\.py:\d+"):
        tg.grad(lambda x: opaque_p.bind(x) * 2.0)(1.0)
    # not on a path between x and y: no error
    assert tg.grad(lambda x: x * 2.0 + tg.stop_gradient(opaque_p.bind(x)))(1.0) == 2.0


# -- documented choices of the rules ----------------------------------------------------------


def test_elementwise_max_and_min_split_ties_evenly():
    gx, gy = tg.grad(lambda x, y: tnp.sum(tnp.maximum(x, y)), argnums=(0, 1))(
        np.array([1.0, 2.0, 3.0]), np.array([1.0, 5.0, 0.0]))
    np.testing.assert_array_equal(gx, [0.5, 0.0, 1.0])
    np.testing.assert_array_equal(gy, [0.5, 1.0, 0.0])
    gx, gy = tg.grad(lambda x, y: tnp.sum(tnp.minimum(x, y)), argnums=(0, 1))(
        np.array([2.0, 2.0]), np.array([2.0, 1.0]))
    np.testing.assert_array_equal(gx, [0.5, 0.0])
    np.testing.assert_array_equal(gy, [0.5, 1.0])


def test_reduce_max_and_min_split_ties_evenly():
    x = np.array([[1.0, 3.0, 3.0], [2.0, -1.0, 2.0]])
    np.testing.assert_array_equal(tg.grad(lambda x: tnp.sum(tnp.max(x, axis=1)))(x),
                                  [[0, 0.5, 0.5], [0.5, 0, 0.5]])
    np.testing.assert_array_equal(tg.grad(lambda x: tnp.min(x))(x),
                                  [[0, 0, 0], [0, 1, 0]])
    np.testing.assert_array_equal(tg.grad(lambda x: tnp.max(x))(np.full((2, 2), 7.0)),
                                  np.full((2, 2), 0.25))


def test_abs_has_the_subgradient_zero_at_zero():
    np.testing.assert_array_equal(tg.grad(lambda x: tnp.sum(tnp.abs(x)))(
        np.array([-2.0, 0.0, 3.0])), [-1.0, 0.0, 1.0])


def test_pow_gradients_stay_finite_at_the_edges():
    # only the base needs a gradient: no NaN from log(x) at negative x
    np.testing.assert_array_equal(tg.grad(lambda x: tnp.sum(x ** 2.0))(np.array([-3.0, 0.0])),
                                  [-6.0, 0.0])
    gx, gy = tg.grad(lambda x, y: tnp.sum(x ** y), argnums=(0, 1))(
        np.array([0.0, 0.0, -2.0]), np.array([2.0, 0.0, 3.0]))
    np.testing.assert_array_equal(gx, [0.0, 0.0, 12.0])
    np.testing.assert_array_equal(gy, [0.0, 0.0, 0.0])


def test_prod_and_cumprod_gradients_are_exact_with_zeros():
    x = np.array([2.0, 0.0, 3.0, 4.0])
    np.testing.assert_array_equal(tg.grad(lambda x: tnp.prod(x))(x), [0.0, 24.0, 0.0, 0.0])
    two = np.array([2.0, 0.0, 3.0, 0.0])
    np.testing.assert_array_equal(tg.grad(lambda x: tnp.prod(x))(two), [0.0, 0.0, 0.0, 0.0])
    # d/dx of sum(cumprod(x)) = sum over i >= k of prod_{j <= i, j != k} x_j
    np.testing.assert_array_equal(tg.grad(lambda x: tnp.sum(tnp.cumprod(x)))(x),
                                  [1.0, 2.0 + 6.0 + 24.0, 0.0, 0.0])
    # second derivatives through the zero: d2 prod / dx1 dx0 = x2 * x3
    hess = tg.function(lambda x: tg.hessians(tnp.prod(x), [x])[0])(x)
    assert hess[0, 1] == 12.0 and hess[1, 1] == 0.0 and hess[2, 3] == 0.0


def test_sort_gradient_goes_back_through_the_permutation():
    x = np.array([[3.0, 1.0], [0.5, 2.0], [1.0, 4.0]])
    w = np.array([[1.0, 10.0], [100.0, 1000.0], [1e4, 1e5]])
    g = tg.grad(lambda x: tnp.sum(tnp.sort(x, axis=0) * w))(x)
    np.testing.assert_array_equal(g, [[1e4, 10.0], [1.0, 1e3], [100.0, 1e5]])


def test_scatter_gives_repeated_indices_gradient_only_for_the_update_written_last():
    def f(x, u):
        return tnp.sum(ops.scatter(x, np.array([1, 3, 1]), u, axis=0) * np.arange(1.0, 5.0))

    gx, gu = tg.grad(f, argnums=(0, 1))(np.zeros(4), np.array([5.0, 6.0, 7.0]))
    np.testing.assert_array_equal(gx, [1.0, 0.0, 3.0, 0.0])
    np.testing.assert_array_equal(gu, [0.0, 4.0, 2.0])
