"""Derivatives of complex code, in the seeds' convention: for a real loss L of z = x + iy the
gradient is dL/dx + i dL/dy (tg.grad, tg.vjp, GradientTape, tg.gradients alike), checked
against central differences in x and y; jvp along complex tangents; the complex derivative
of holomorphic functions (`holomorphic=True`); Jacobians; control flow and vmap."""

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tests.finite_diff import complex_gradient
from tracegrad.errors import DTypeError

RNG = np.random.default_rng(3)
Z = RNG.normal(size=4) + 1j * RNG.normal(size=4)
W = RNG.normal(size=4) + 1j * RNG.normal(size=4)
A = RNG.normal(size=(3, 3)) + 1j * RNG.normal(size=(3, 3))


# Real losses of complex arguments, written once for NumPy and tracegrad.numpy.
LOSSES = {
    "abs2_exp": lambda np, z: np.sum(np.abs(np.exp(z) * W) ** 2),
    "div": lambda np, z: np.real(np.sum(W / (z + 3))),
    "log": lambda np, z: np.imag(np.sum(np.log(z) * W)),
    "sqrt": lambda np, z: np.sum(np.real(np.sqrt(z)) ** 2),
    "conj": lambda np, z: np.real(np.sum(np.conj(z) * W * z)),
    "powers": lambda np, z: np.sum(np.abs(z ** 2.3 + z ** 3 + z ** -2)),
    "complex_power": lambda np, z: np.sum(np.abs((z + 4) ** (0.3 + 0.2j))),
    "trig": lambda np, z: np.real(np.sum(
        np.sin(z) * np.cos(W * z) + np.tan(z / 3) + np.tanh(z) + np.arctan(z / 4)
        + np.arcsinh(z) + np.arccosh(z + 3) + np.arcsin(z / 5) + np.arccos(z / 5)
        + np.arctanh(z / 5) + np.cosh(z) + np.sinh(z))),
    "logs": lambda np, z: np.imag(np.sum(np.expm1(z) * W + np.log1p(z + 3) + np.log2(z)
                                         + np.log10(z) + np.exp2(z))),
    "dot": lambda np, z: np.abs(np.dot(z, W * z)),
    "matmul": lambda np, z: np.real(np.sum(np.outer(z, W) @ z)),
    "angle": lambda np, z: np.sum(np.angle(z) * np.arange(4)),
    "mean_var": lambda np, z: np.abs(np.mean(z * W)) + np.var(z),
    "prod": lambda np, z: np.real(np.prod(z) * W[0]),
    "cumprod": lambda np, z: np.sum(np.abs(np.cumprod(z * W))),
    "parts": lambda np, z: np.sum(np.real(z) ** 3 * np.imag(z)),
    "where": lambda np, z: np.sum(np.abs(np.where(np.abs(z) > 1, z * W, z))),
    "max": lambda np, z: np.sum(np.abs(np.maximum(z, W))),
}


@pytest.mark.parametrize("name", list(LOSSES))
def test_grad_is_dL_dx_plus_i_dL_dy(name, backend):
    loss = LOSSES[name]
    want = complex_gradient(lambda v: loss(np, v), Z)
    got = tg.function(tg.grad(lambda v: loss(tnp, v)))(Z)
    assert got.dtype == np.complex128
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", ["abs2_exp", "trig", "dot", "prod"])
def test_tape_and_gradients_follow_the_same_convention(name):
    loss = LOSSES[name]
    want = complex_gradient(lambda v: loss(np, v), Z)
    v = tg.Variable(Z)
    with tg.GradientTape() as tape:
        out = loss(tnp, v)
    np.testing.assert_allclose(tape.gradient(out, v), want, rtol=1e-6, atol=1e-7)

    @tg.function
    def sym(z):
        return tg.gradients(loss(tnp, z), z)[0]

    np.testing.assert_allclose(sym(Z), want, rtol=1e-6, atol=1e-7)


def test_the_documented_examples():
    assert tg.grad(lambda z: tnp.abs(z) ** 2)(3 + 4j) == 6 + 8j
    np.testing.assert_allclose(tg.grad(lambda z: tnp.real(z * z))(1 + 2j), 2 - 4j)
    # a real input through complex intermediates has a real gradient
    x = RNG.normal(size=5)

    def loss(np, x):
        return np.sum(np.abs(np.exp(1j * x)) ** 2 * x) + np.sum(np.real(np.exp(2j * x)))

    g = tg.grad(lambda v: loss(tnp, v))(x)
    assert g.dtype == np.float64
    want = [(loss(np, x + e) - loss(np, x - e)) / 2e-6 for e in np.eye(5) * 1e-6]
    np.testing.assert_allclose(g, want, rtol=1e-6, atol=1e-8)


def test_gradient_descent_with_the_convention_descends():
    target = np.array([1 - 2j, 0.5j])

    @tg.function
    def step(z):
        loss, g = tg.value_and_grad(lambda v: tnp.sum(tnp.abs(v - target) ** 2))(z)
        return loss, z - 0.1 * g

    z, losses = np.zeros(2, complex), []
    for _ in range(50):
        loss, z = step(z)
        losses.append(float(loss))
    assert losses[-1] < 1e-8 < losses[0]
    np.testing.assert_allclose(z, target, atol=1e-4)


def test_vjp_of_a_complex_output_is_the_gradient_of_re_conj_ct_f():
    def f(np, z):
        return np.exp(z) * W + np.conj(z) ** 2

    ct = RNG.normal(size=4) + 1j * RNG.normal(size=4)
    out, vjp_fn = tg.vjp(lambda z: f(tnp, z), Z)
    np.testing.assert_allclose(out, f(np, Z), rtol=1e-14)
    want = complex_gradient(lambda v: np.real(np.sum(np.conj(ct) * f(np, v))), Z)
    np.testing.assert_allclose(vjp_fn(ct)[0], want, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("fn", [
    lambda np, z: np.exp(z) * W + z ** 3,            # holomorphic
    lambda np, z: np.conj(z) * z + np.abs(z),      # not holomorphic
    lambda np, z: np.real(z) * np.sin(z),
])
def test_jvp_is_the_directional_derivative(fn, backend):
    t = RNG.normal(size=4) + 1j * RNG.normal(size=4)
    out, jt = tg.function(lambda z, t: tg.jvp(lambda v: fn(tnp, v), (z,), (t,)))(Z, t)
    h = 1e-6
    want = (fn(np, Z + h * t) - fn(np, Z - h * t)) / (2 * h)
    np.testing.assert_allclose(out, fn(np, Z), rtol=1e-14)
    np.testing.assert_allclose(jt, want, rtol=1e-6, atol=1e-7)


def test_holomorphic_grad_is_the_complex_derivative():
    z = 0.3 - 1.2j
    assert np.isclose(tg.grad(lambda v: tnp.exp(v) * v, holomorphic=True)(z),
                      np.exp(z) * (1 + z), rtol=1e-14)
    assert np.isclose(tg.grad(lambda v: v ** 3, holomorphic=True)(z), 3 * z ** 2, rtol=1e-14)
    value, g = tg.value_and_grad(tnp.sin, holomorphic=True)(z)
    assert np.isclose(value, np.sin(z)) and np.isclose(g, np.cos(z))
    with pytest.raises(DTypeError, match="complex scalar.*holomorphic=True"):
        tg.grad(tnp.sin)(z)
    with pytest.raises(DTypeError, match="holomorphic=True needs complex"):
        tg.grad(lambda v: tnp.sin(v) * 1j, holomorphic=True)(0.5)


@pytest.mark.parametrize("mode", ["rev", "fwd"])
def test_holomorphic_jacobian_in_both_modes(mode, backend):
    def f(z):
        return tnp.exp(z) * z[::-1] + A[0, :1] * z ** 2

    got = tg.function(tg.jacobian(f, holomorphic=True, mode=mode))(A[1])
    z = A[1]
    want = np.diag(np.exp(z) * z[::-1] + 2 * A[0, 0] * z) + np.fliplr(np.diag(np.exp(z)))
    np.testing.assert_allclose(got, want, rtol=1e-13)


def test_jacobians_of_real_to_complex_and_complex_to_real():
    x = RNG.normal(size=3)

    def f(np, x):
        return np.exp(1j * x) * x.sum()

    jac = tg.jacobian(lambda v: f(tnp, v))(x)  # forward mode: complex columns dy/dx
    want = np.stack([(f(np, x + e) - f(np, x - e)) / 2e-6 for e in np.eye(3) * 1e-6], axis=1)
    np.testing.assert_allclose(jac, want, rtol=1e-6, atol=1e-8)

    def g(np, z):
        return np.abs(z * W[:3]) ** 2

    jac = tg.jacobian(lambda v: g(tnp, v))(Z[:3])  # reverse mode: rows are gradients
    for i in range(3):
        np.testing.assert_allclose(jac[i], complex_gradient(lambda v: g(np, v)[i], Z[:3]), rtol=1e-6,
                                   atol=1e-7)
    with pytest.raises(DTypeError, match="holomorphic=True"):
        tg.jacobian(tnp.conj)(Z)
    with pytest.raises(DTypeError, match="mode='fwd'"):
        tg.jacobian(lambda v: f(tnp, v), mode="rev")(x)


def test_complex_through_control_flow_and_vmap(backend):
    z = Z[:3] * 0.5

    def scan_loss(np_, v):
        if np_ is np:
            c, tot = np.ones(3, complex), 0.0
            for row in np.stack([v, v * 1j, v ** 2]):
                c = c * row + 0.5j
                tot = tot + np.sum(np.abs(c))
            return np.sum(c.real) + tot

        def step(c, row):
            c = c * row + 0.5j
            return c, tnp.sum(tnp.abs(c))

        c, ys = tg.scan(step, tnp.ones(3, dtype=tnp.complex128), tnp.stack([v, v * 1j, v ** 2]))
        return tnp.sum(tnp.real(c)) + tnp.sum(ys)

    got = tg.function(tg.grad(lambda v: scan_loss(tnp, v)))(z)
    np.testing.assert_allclose(got, complex_gradient(lambda v: scan_loss(np, v), z), rtol=1e-6, atol=1e-7)

    for flag in (True, False):
        def cond_loss(v, flag):
            out = tg.cond(flag, lambda u: tnp.exp(u), lambda u: u ** 2, (v,))
            return tnp.abs(tnp.sum(out))

        got = tg.function(tg.grad(cond_loss))(z, np.array(flag))
        want = complex_gradient(lambda v: np.abs(np.sum(np.exp(v) if flag else v ** 2)), z)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)

    def while_loss(v):
        _, c = tg.while_loop(lambda i, c: i < 3, lambda i, c: (i + 1, tnp.sin(c) * v), (0, v))
        return tnp.sum(tnp.abs(c))

    def while_ref(v):
        c = v
        for _ in range(3):
            c = np.sin(c) * v
        return np.sum(np.abs(c))

    got = tg.function(tg.grad(while_loss))(z)
    np.testing.assert_allclose(got, complex_gradient(while_ref, z), rtol=1e-6, atol=1e-7)

    batch = np.stack([Z, W, Z * W])
    got = tg.function(tg.vmap(lambda v: tnp.sum(tnp.exp(v) * tnp.conj(v))))(batch)
    np.testing.assert_allclose(got, [np.sum(np.exp(r) * np.conj(r)) for r in batch], rtol=1e-14)
    got = tg.function(tg.vmap(tg.grad(lambda v: tnp.sum(tnp.abs(tnp.exp(v)) ** 2))))(batch)
    want = [complex_gradient(lambda v: np.sum(np.abs(np.exp(v)) ** 2), r) for r in batch]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


def test_a_complex_layer_trains_inside_tg_function():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 4)) + 1j * rng.normal(size=(64, 4))
    w_true = 0.3 * (rng.normal(size=(4, 2)) + 1j * rng.normal(size=(4, 2)))
    y = np.tanh(x @ w_true + 0.1j)

    def loss(w, b):
        pred = tnp.tanh(x @ w + b)
        return tnp.mean(tnp.abs(pred - y) ** 2)

    @tg.function
    def step(w, b):
        value, (gw, gb) = tg.value_and_grad(loss, argnums=(0, 1))(w, b)
        return value, w - 0.02 * gw, b - 0.02 * gb

    w, b = np.zeros((4, 2), complex), np.zeros(2, complex)
    first, _, _ = step(w, b)
    for _ in range(300):
        value, w, b = step(w, b)
    assert float(value) < 1e-3 * float(first)
