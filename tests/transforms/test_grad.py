"""tg.grad, tg.value_and_grad, tg.vjp, tg.hvp: values against analytic derivatives and
finite differences, structures and argnums, has_aux, composition with each other and with
tg.function, one trace per input signature, output types, errors."""

from __future__ import annotations

import collections

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tracegrad.errors import DTypeError, ShapeError


def loss(x, y):
    return tnp.sum(tnp.sin(x) * y)


X = np.array([0.1, -0.7, 1.3])
Y = np.array([2.0, 0.5, -1.0])


def numeric_grad(f, x, h=1e-3):
    """Richardson-extrapolated central differences of scalar f at float64 array x."""
    x = np.asarray(x, dtype=np.float64)
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = 1.0

        def central(step, e=e):
            return (f(x + step * e) - f(x - step * e)) / (2 * step)

        g[i] = (4 * central(h / 2) - central(h)) / 3
    return g


# -- values ---------------------------------------------------------------------------------


def test_grad_matches_the_analytic_gradient(backend):
    np.testing.assert_allclose(tg.grad(loss)(X, Y), np.cos(X) * Y, rtol=1e-14)
    np.testing.assert_allclose(tg.grad(loss, argnums=1)(X, Y), np.sin(X), rtol=1e-14)


def test_value_and_grad_returns_value_and_gradients(backend):
    value, (gx, gy) = tg.value_and_grad(loss, argnums=(0, 1))(X, Y)
    assert value == pytest.approx(np.sum(np.sin(X) * Y), rel=1e-14)
    np.testing.assert_allclose(gx, np.cos(X) * Y, rtol=1e-14)
    np.testing.assert_allclose(gy, np.sin(X), rtol=1e-14)


def test_grad_of_a_composite_matches_finite_differences(backend):
    def f(w):
        h = tnp.tanh(tnp.dot(w, X)) + tnp.sum(tnp.exp(w) / (1.0 + w * w))
        return tnp.sum(h * h) + tnp.prod(tnp.cos(w))

    w = np.array([[0.3, -0.2, 0.5], [1.1, 0.4, -0.9]])
    expected = numeric_grad(lambda v: float(f(v)), w)
    np.testing.assert_allclose(tg.grad(f)(w), expected, rtol=1e-9, atol=1e-10)


def test_python_scalars_are_differentiable_and_give_numpy_scalars(backend):
    g = tg.grad(lambda x: x ** 3 + 2.0 * x)(2.0)
    assert isinstance(g, np.float64)
    assert g == 14.0


def test_eager_tensors_in_tensors_out(backend):
    g = tg.grad(loss)(tg.constant(X), tg.constant(Y))
    assert isinstance(g, tg.Tensor)
    np.testing.assert_allclose(g.numpy(), np.cos(X) * Y, rtol=1e-14)


def test_float32_gradients_keep_their_dtype(backend):
    x = X.astype(np.float32)
    g = tg.grad(lambda x: tnp.sum(tnp.exp(x) * 2.0))(x)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, 2 * np.exp(x), rtol=1e-6)


def test_unconnected_arguments_get_zeros(backend):
    g = tg.grad(lambda x, y: tnp.sum(y * 2.0), argnums=(0, 1))(X, Y)
    np.testing.assert_array_equal(g[0], np.zeros(3))
    np.testing.assert_array_equal(g[1], np.full(3, 2.0))


# -- argnums and structures ------------------------------------------------------------------


def test_argnums_tuple_and_negative():
    gx, gy = tg.grad(loss, argnums=(0, -1))(X, Y)
    np.testing.assert_allclose(gx, np.cos(X) * Y)
    np.testing.assert_allclose(gy, np.sin(X))
    (only,) = tg.grad(loss, argnums=(1,))(X, Y)
    np.testing.assert_allclose(only, np.sin(X))


Params = collections.namedtuple("Params", ["w", "b"])


def test_gradients_mirror_structured_arguments():
    def f(params, data):
        return tnp.sum(params["w"] * data[0]) + params["b"][1] * data[1]

    params = {"w": np.array([1.0, 2.0]), "b": [np.array(0.5), np.array(3.0)]}
    data = (np.array([4.0, -1.0]), np.array(2.0))
    g = tg.grad(f)(params, data)
    assert set(g) == {"w", "b"} and isinstance(g["b"], list)
    np.testing.assert_array_equal(g["w"], data[0])
    assert g["b"][0] == 0.0 and g["b"][1] == 2.0
    gp = tg.grad(lambda p: tnp.sum(p.w * p.w) + p.b)(Params(np.array([1.0, 3.0]), 2.0))
    assert isinstance(gp, Params)
    np.testing.assert_array_equal(gp.w, [2.0, 6.0])
    assert gp.b == 1.0


def test_keyword_arguments_are_not_differentiated():
    g = tg.grad(lambda x, scale=1.0: tnp.sum(x * scale))(X, scale=3.0)
    np.testing.assert_array_equal(g, np.full(3, 3.0))


def test_has_aux():
    def f(x):
        return tnp.sum(x * x), {"norm": tnp.sqrt(tnp.sum(x * x)), "n": x.shape[0]}

    g, aux = tg.grad(f, has_aux=True)(X)
    np.testing.assert_allclose(g, 2 * X)
    assert aux["norm"] == pytest.approx(np.linalg.norm(X))
    (value, aux2), g2 = tg.value_and_grad(f, has_aux=True)(X)
    assert value == pytest.approx(np.sum(X * X))
    np.testing.assert_allclose(g2, 2 * X)
    assert aux2["norm"] == pytest.approx(np.linalg.norm(X))


# -- vjp -------------------------------------------------------------------------------------


def test_vjp_of_a_structured_function():
    def f(x, y):
        return {"a": tnp.sin(x) * y, "b": tnp.sum(x)}

    out, vjp_fn = tg.vjp(f, X, Y)
    np.testing.assert_allclose(out["a"], np.sin(X) * Y)
    ct = {"a": np.array([1.0, 2.0, 3.0]), "b": np.array(10.0)}
    gx, gy = vjp_fn(ct)
    np.testing.assert_allclose(gx, np.cos(X) * Y * ct["a"] + 10.0)
    np.testing.assert_allclose(gy, np.sin(X) * ct["a"])
    gx2, _ = vjp_fn({"a": np.zeros(3), "b": np.array(1.0)})  # a second pullback
    np.testing.assert_allclose(gx2, np.ones(3))


def test_vjp_with_aux_and_inside_a_trace():
    out, vjp_fn, aux = tg.vjp(lambda x: (x * x, x.sum()), X, has_aux=True)
    np.testing.assert_allclose(out, X * X)
    assert aux == pytest.approx(X.sum())
    (g,) = vjp_fn(np.ones(3))
    np.testing.assert_allclose(g, 2 * X)

    @tg.function
    def pulled(x, ct):
        y, f_vjp = tg.vjp(tnp.exp, x)
        return y, f_vjp(ct)[0]

    y, g = pulled(X, Y)
    np.testing.assert_allclose(y, np.exp(X))
    np.testing.assert_allclose(g, np.exp(X) * Y)


def test_vjp_rejects_mismatched_cotangents():
    _, vjp_fn = tg.vjp(lambda x: x * 2.0, X)
    with pytest.raises(ShapeError, match="cotangent"):
        vjp_fn(np.ones(4))
    with pytest.raises(ValueError, match="structured"):
        vjp_fn((np.ones(3), np.ones(3)))


# -- composition and caching -----------------------------------------------------------------


def cube(x):
    return x * x * x


def test_grad_of_grad_of_grad():
    assert tg.grad(cube)(2.0) == 12.0
    assert tg.grad(tg.grad(cube))(2.0) == 12.0
    assert tg.grad(tg.grad(tg.grad(cube)))(2.0) == 6.0


def test_function_of_grad_and_grad_of_function(backend):
    f = tg.function(loss)
    np.testing.assert_allclose(tg.grad(f)(X, Y), np.cos(X) * Y)
    np.testing.assert_allclose(tg.function(tg.grad(loss))(X, Y), np.cos(X) * Y)
    np.testing.assert_allclose(tg.function(tg.grad(f))(X, Y), np.cos(X) * Y)


def test_grad_uses_the_backend_of_the_function_it_wraps():
    f = tg.function(loss, backend="numpy")
    assert tg.grad(f)._backend == "numpy"


def test_grad_traces_once_per_input_signature():
    calls = []

    def f(x):
        calls.append(1)
        return tnp.sum(x * x)

    g = tg.grad(f)
    for _ in range(3):
        np.testing.assert_allclose(g(X), 2 * X)
    assert len(calls) == 1 and g.tracing_count == 1
    g(np.ones(5))
    assert len(calls) == 2
    g(X.astype(np.float32))
    assert len(calls) == 3
    g(X + 1.0)
    assert len(calls) == 3


def test_closed_over_values_are_constants_of_the_inner_transform():
    @tg.function
    def f(x):
        # d/da (a * x) at a = x is x, not 2x: x inside the lambda is a constant.
        return tg.grad(lambda a: a * x)(x), tg.grad(lambda a, b: a * b, argnums=(0, 1))(x, x)

    d, (da, db) = f(3.0)
    assert (d, da, db) == (3.0, 3.0, 3.0)


def test_variables_read_inside_are_constants_of_grad():
    v = tg.Variable(np.array([1.0, 2.0, 3.0]))
    g = tg.grad(lambda x: tnp.sum(x * v))
    np.testing.assert_array_equal(g(X), [1.0, 2.0, 3.0])
    v.assign([4.0, 5.0, 6.0])
    np.testing.assert_array_equal(g(X), [4.0, 5.0, 6.0])


def test_grad_under_a_gradient_tape_is_differentiable():
    x = tg.constant(X)
    with tg.GradientTape() as tape:
        tape.watch(x)
        g = tg.grad(lambda z: tnp.sum(z * z * z))(x)
        s = tnp.sum(g)
    np.testing.assert_allclose(tape.gradient(s, x).numpy(), 6 * X)


# -- the printed graph -----------------------------------------------------------------------


def test_gradient_graph_is_short_and_readable():
    graph = tg.grad(loss).get_concrete_function(X, Y).graph
    lines = str(graph).splitlines()[1:-2]
    assert [line.split("=")[1].split()[0] for line in lines] == ["cos", "mul"]
    both = tg.grad(loss, argnums=(0, 1)).get_concrete_function(X, Y).graph
    assert sorted(op.primitive.name for op in both.operations) == ["cos", "mul", "sin"]


# -- hvp -------------------------------------------------------------------------------------


def test_hvp_of_a_quadratic_form():
    a = np.array([[2.0, 1.0, 0.0], [0.5, 3.0, -1.0], [0.0, 4.0, 1.0]])
    v = np.array([1.0, -2.0, 0.5])
    (hv,) = tg.hvp(lambda x: tnp.dot(x, tnp.dot(a, x)), (X,), (v,))
    np.testing.assert_allclose(hv, (a + a.T) @ v, rtol=1e-14)


def test_hvp_mirrors_primals_and_matches_finite_differences():
    def f(x, p):
        return tnp.sum(tnp.sin(x) * p["w"]) + tnp.sum(x * x) * p["w"][0]

    p = {"w": np.array([0.4, -1.2, 2.0])}
    tx, tp = np.array([1.0, 0.5, -0.3]), {"w": np.array([0.2, 0.1, -1.0])}
    hx, hp = tg.hvp(f, (X, p), (tx, tp))
    assert set(hp) == {"w"}
    grad_f = tg.grad(f, argnums=(0, 1))
    h = 1e-5
    plus = grad_f(X + h * tx, {"w": p["w"] + h * tp["w"]})
    minus = grad_f(X - h * tx, {"w": p["w"] - h * tp["w"]})
    np.testing.assert_allclose(hx, (plus[0] - minus[0]) / (2 * h), rtol=1e-7)
    np.testing.assert_allclose(hp["w"], (plus[1]["w"] - minus[1]["w"]) / (2 * h), rtol=1e-7)


# -- errors ----------------------------------------------------------------------------------


def test_grad_of_a_non_scalar_output_is_a_shape_error():
    with pytest.raises(ShapeError, match="scalar"):
        tg.grad(lambda x: x * 2.0)(X)


def test_grad_with_respect_to_an_integer_argument_is_a_dtype_error():
    with pytest.raises(DTypeError, match="int64"):
        tg.grad(lambda x: tnp.sum(x * 2.0))(np.array([1, 2]))
    with pytest.raises(DTypeError):
        tg.grad(lambda x, y: x * y, argnums=1)(2.0, True)
    with pytest.raises(DTypeError, match=f"at {__file__}:"):
        tg.vjp(lambda x: x, np.array([1, 2]))
    with pytest.raises(DTypeError, match=f"at {__file__}:"):
        tg.hvp(lambda x: x, (np.array([1, 2]),), (np.ones(2),))


def test_has_aux_needs_a_pair():
    with pytest.raises(TypeError, match="pair"):
        tg.grad(lambda x: tnp.sum(x), has_aux=True)(X)
    with pytest.raises(TypeError, match="pair"):
        tg.vjp(lambda x: (x, x, x), X, has_aux=True)


def test_bad_argnums():
    with pytest.raises(TypeError, match="argnums"):
        tg.grad(loss, argnums=2)(X, Y)
    with pytest.raises(ValueError, match="repeats"):
        tg.grad(loss, argnums=(0, 0))(X, Y)


# -- unknown dims ----------------------------------------------------------------------------

UNKNOWN_DIM_CASES = {
    "broadcast": lambda x: tnp.sum(x * tnp.sin(x) + tnp.ones(3)),
    "mean": lambda x: tnp.sum(tnp.mean(x, axis=0) ** 2),
    "max": lambda x: tnp.sum(tnp.max(x, axis=1)),
    "prod over the unknown dim": lambda x: tnp.sum(tnp.prod(x, axis=0)),
    "prod": lambda x: tnp.sum(tnp.prod(x, axis=1)),
    "reshape": lambda x: tnp.sum(tnp.reshape(x, (-1,)) ** 2),
    "slice": lambda x: tnp.sum(x[1:, 1:] ** 2),
    "matmul": lambda x: tnp.sum(x @ np.arange(6.0).reshape(3, 2)),
    "take": lambda x: tnp.sum(tnp.take(x, np.array([0, 0, 2]), axis=1) ** 2),
    "cumsum": lambda x: tnp.sum(tnp.cumsum(x, axis=0) ** 2),
    "pad": lambda x: tnp.sum(tnp.pad(x, 1) ** 2),
}


@pytest.mark.parametrize("name", sorted(UNKNOWN_DIM_CASES))
def test_gradients_of_functions_traced_with_unknown_dims(name):
    f = UNKNOWN_DIM_CASES[name]
    g = tg.function(tg.grad(f), input_signature=[tg.TensorSpec([None, 3])])
    for rows in (4, 2):
        x = np.random.default_rng(rows).uniform(0.5, 2.0, (rows, 3))
        np.testing.assert_allclose(g(x), tg.grad(f)(x), rtol=1e-13)
    assert g.tracing_count == 1


def test_unsupported_gradients_with_unknown_dims_say_so():
    spec = [tg.TensorSpec([None, 3])]
    with pytest.raises(tg.errors.NotDifferentiableError, match="sort.*unknown dims"):
        tg.function(tg.grad(lambda x: tnp.sum(tnp.sort(x, axis=1) * 1.5)),
                    input_signature=spec)(np.ones((2, 3)))
    with pytest.raises(tg.errors.NotDifferentiableError, match="slice.*unknown dim"):
        tg.function(tg.grad(lambda x: tnp.sum(x[::2])), input_signature=spec)(np.ones((2, 3)))
