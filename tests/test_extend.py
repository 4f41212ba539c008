"""tracegrad.extend: Python functions of NumPy arrays as primitives with gradients of
their own, on both backends, eagerly, on tapes, batched, and differentiated twice."""

from __future__ import annotations

import pathlib
import sys

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tests.finite_diff import central_difference
from tracegrad.errors import InvalidArgumentError, NotDifferentiableError, TracegradError

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "examples"))
import rkhs  # noqa: E402  (the example's kernel primitive and loss)

CALLS = []


@tg.extend.primitive
def logsumexp(x):
    CALLS.append(np.shape(x))
    m = np.max(x)
    return m + np.log(np.sum(np.exp(x - m)))


tg.extend.defvjp(logsumexp, lambda ans, x: lambda g: g * tnp.exp(x - ans))
X = np.array([1.0, 2.0, 3.0, -0.5])


def _softmax(x):
    e = np.exp(x - x.max())
    return e / e.sum()


def test_on_numpy_input_it_is_the_function():
    CALLS.clear()
    out = logsumexp(X)
    assert type(out) is np.float64 and out == pytest.approx(np.log(np.exp(X).sum()))
    assert CALLS == [(4,)]


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_traced_value_and_gradient_on_both_backends(backend):
    value = tg.function(logsumexp, backend=backend)(X)
    assert value == pytest.approx(np.log(np.exp(X).sum()), rel=1e-15)
    g = tg.function(tg.grad(lambda x: tnp.sin(logsumexp(2.0 * x))), backend=backend)(X)
    expected = central_difference(lambda x: np.sin(np.log(np.exp(2 * x).sum())), X)
    np.testing.assert_allclose(g, expected, rtol=1e-7, atol=1e-9)


def test_eagerly_on_a_tape_and_twice_differentiated():
    v = tg.Variable(X)
    with tg.GradientTape() as tape:
        y = logsumexp(v)
    np.testing.assert_allclose(tape.gradient(y, v).numpy(), _softmax(X), rtol=1e-15)
    s = _softmax(X)
    np.testing.assert_allclose(tg.hessian(logsumexp)(X), np.diag(s) - np.outer(s, s),
                               atol=1e-15)


def test_vmap_runs_it_once_per_example_unless_given_a_batch_rule():
    xs = np.stack([X, 2 * X, X[::-1]])
    logsumexp(tg.constant(X))  # its result type, found once per shape by a run on zeros
    CALLS.clear()
    out = tg.function(tg.vmap(logsumexp), backend="numpy")(xs)
    np.testing.assert_allclose(out, [np.log(np.exp(r).sum()) for r in xs], rtol=1e-15)
    assert CALLS.count((4,)) == 3
    np.testing.assert_allclose(tg.vmap(tg.grad(logsumexp))(xs),
                               [_softmax(r) for r in xs], rtol=1e-14)

    @tg.extend.primitive(result=lambda x: tg.TensorSpec(x.shape[:-1], x.dtype))
    def row_sums(x):
        CALLS.append(("row_sums", np.shape(x)))
        return np.sum(x, axis=-1)

    def batch_rule(args, dims):
        (x,), (d,) = args, dims
        return [row_sums(tnp.moveaxis(x, d, 0))], [0]

    tg.extend.defbatch(row_sums, batch_rule)
    CALLS.clear()
    m = np.arange(24.0).reshape(2, 3, 4)
    np.testing.assert_array_equal(tg.vmap(row_sums)(m), m.sum(-1))
    assert CALLS == [("row_sums", (2, 3, 4))]  # one call for the whole batch (and no
    # inference run: the result rule gives the types)


def test_gradients_of_the_per_example_loop_are_the_loop_of_the_gradients(numpy_backend):
    xs = np.stack([X, 2 * X, X[::-1]])

    def loss(x):
        return tnp.sum(tnp.sin(tg.vmap(logsumexp)(x)))

    expected = central_difference(
        lambda x: np.sin([np.log(np.exp(r).sum()) for r in x]), xs)
    for backend in ("numpy", "numba"):
        got = tg.function(tg.grad(loss), backend=backend)(xs)
        np.testing.assert_allclose(got, expected, rtol=1e-7, atol=1e-9)
    # second order: the batched vjp is differentiable again (block-diagonal Hessian)
    h = tg.hessian(lambda x: tnp.sum(tg.vmap(logsumexp)(x)))(xs[:2])
    for i in range(2):
        s = _softmax(xs[i])
        np.testing.assert_allclose(h[i, :, i], np.diag(s) - np.outer(s, s), atol=1e-15)
        np.testing.assert_array_equal(h[i, :, 1 - i], 0.0)


def test_an_operand_every_example_shares_gets_the_sum_of_their_gradients(numpy_backend):
    @tg.extend.primitive
    def scaled_sin(x, c):
        return c * np.sin(x)

    tg.extend.defvjp(scaled_sin, lambda ans, x, c: lambda g: g * c * tnp.cos(x),
                     lambda ans, x, c: lambda g: tnp.sum(g * tnp.sin(x)))
    m = np.arange(6.0).reshape(2, 3)
    batched = tg.vmap(scaled_sin, in_axes=(1, None))  # columns are the examples
    gx, gc = tg.grad(lambda x, c: tnp.sum(batched(x, c) ** 2), argnums=(0, 1))(m, 1.5)
    np.testing.assert_allclose(gx, central_difference(lambda x: (1.5 * np.sin(x)) ** 2, m),
                               rtol=1e-7)
    assert gc == pytest.approx(float(central_difference(
        lambda c: np.sum((c * np.sin(m)) ** 2), np.array(1.5))), rel=1e-7)


def test_a_user_batch_rule_is_differentiated_as_its_own_code(numpy_backend):
    @tg.extend.primitive(result=lambda x: tg.TensorSpec(x.shape[:-1], x.dtype))
    def row_norms(x):
        return np.sqrt(np.sum(x * x, axis=-1))

    tg.extend.defvjp(row_norms, lambda ans, x: lambda g: (g / ans)[..., None] * x)
    tg.extend.defbatch(row_norms, lambda args, dims: (
        [row_norms(tnp.moveaxis(args[0], dims[0], 0))], [0]))
    m = np.arange(1.0, 7.0).reshape(2, 3)
    g = tg.grad(lambda x: tnp.sum(tg.vmap(row_norms)(x) ** 3))(m)
    np.testing.assert_allclose(
        g, central_difference(lambda x: np.sqrt(np.sum(x * x, -1)) ** 3, m), rtol=1e-7)


def test_defjvp_rules_are_transposed_for_reverse_mode():
    @tg.extend.primitive
    def scaled_cube(x, c):
        return c * x ** 3

    tg.extend.defjvp(scaled_cube, lambda t, ans, x, c: 3 * c * x ** 2 * t,
                     lambda t, ans, x, c: x ** 3 * t)
    gx, gc = tg.grad(lambda x, c: tnp.sum(scaled_cube(x, c)), argnums=(0, 1))(X, 2.0)
    np.testing.assert_allclose(gx, 6 * X ** 2)
    assert gc == pytest.approx(np.sum(X ** 3))


def test_several_results_and_a_result_rule():
    @tg.extend.primitive(result=lambda x: (x, x))
    def split_signs(x):
        return np.maximum(x, 0.0), np.minimum(x, 0.0)

    tg.extend.defvjp(split_signs, lambda ans, x: lambda g: g[0] * (x > 0) + g[1] * (x <= 0))
    pos, neg = tg.function(split_signs)(X)
    np.testing.assert_array_equal(pos, np.maximum(X, 0)), np.testing.assert_array_equal(
        neg, np.minimum(X, 0))
    g = tg.grad(lambda x: tnp.sum(split_signs(x)[0] * 3.0 + split_signs(x)[1]))(X)
    np.testing.assert_array_equal(g, np.where(X > 0, 3.0, 1.0))


def test_errors_name_the_primitive():
    @tg.extend.primitive
    def no_gradient(x):
        return x * 2

    with pytest.raises(NotDifferentiableError, match="python primitive no_gradient .* has no "
                                                     "gradient"):
        tg.grad(lambda x: tnp.sum(no_gradient(x)))(X)

    @tg.extend.primitive
    def picky(x):
        if not np.all(x):
            raise ValueError("zeros")
        return x

    with pytest.raises(InvalidArgumentError, match="picky: .* raised ValueError: zeros; give "
                                                   "the primitive a result= rule"):
        tg.function(picky)(X)
    with pytest.raises(InvalidArgumentError, match="keyword arguments are static"):
        tg.function(lambda x: logsumexp(x, weights=np.ones(4)))(X)
    with pytest.raises(InvalidArgumentError, match="made by tracegrad.extend.primitive"):
        tg.extend.defvjp(np.sum, None)


def test_rkhs_regression_gradients_match_finite_differences():
    rng = np.random.default_rng(1)
    params = {"alpha": rng.normal(size=len(rkhs.inputs) // 2), "log_scale": np.float64(-0.3)}
    vector, unravel = tg.tree.ravel(params)
    for backend in ("numpy", "numba"):
        g = tg.function(tg.grad(lambda v: rkhs.loss(unravel(v), rkhs.inputs, rkhs.targets)),
                        backend=backend)(vector)
        fd = central_difference(
            lambda v: float(rkhs.loss(unravel(v), rkhs.inputs, rkhs.targets)), vector)
        np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)


def test_kernel_primitive_vjps_match_finite_differences():
    rng = np.random.default_rng(2)
    x, y, s = rng.normal(size=(4, 2)), rng.normal(size=(3, 2)), np.float64(0.2)
    w = rng.normal(size=(4, 3))

    def numpy_kernel(x, y, s):
        d2 = np.sum((x[:, None, :] - y[None, :, :]) ** 2, axis=-1)
        return np.sum(w * np.exp(-0.5 * d2 * np.exp(-2 * s)))

    gx, gy, gs = tg.grad(lambda x, y, s: tnp.sum(w * rkhs.gaussian_kernel(x, y, s)),
                         argnums=(0, 1, 2))(x, y, s)
    np.testing.assert_allclose(gx, central_difference(lambda v: numpy_kernel(v, y, s), x),
                               rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(gy, central_difference(lambda v: numpy_kernel(x, v, s), y),
                               rtol=1e-7, atol=1e-9)
    assert gs == pytest.approx(float(central_difference(lambda v: numpy_kernel(x, y, v), s)),
                               rel=1e-7)


def test_a_result_of_another_shape_than_inferred_is_an_error():
    @tg.extend.primitive
    def positives(x):
        return x[x > 0]

    tg.extend.defvjp(positives, lambda ans, x: lambda g: g)
    with pytest.raises(TracegradError, match=r"positives returned an array of shape \(3,\) "
                                              r"where its result types say \(0,\)"):
        tg.function(positives, backend="numpy")(X)
