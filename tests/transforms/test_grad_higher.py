"""Second (and third) derivatives: the gradient graph is itself differentiable. For every
smooth elementwise primitive, Hessian-vector products (grad of grad) are checked against
finite differences of the gradient, and scalar grad(grad) against the analytic value."""

from __future__ import annotations

import numpy as np
import pytest

import tracegrad as tg
from tests.ops.optable import rand
from tests.ops.optable_grad_extra import UNARY
from tracegrad import ops

SMOOTH_UNARY = [name for name in UNARY if name != "neg"]
SMOOTH_BINARY = {
    # name: (low, high) of x, (low, high) of y
    "add": ((-2, 2), (-2, 2)),
    "sub": ((-2, 2), (-2, 2)),
    "mul": ((-2, 2), (-2, 2)),
    "div": ((-2, 2), (0.5, 2)),
    "pow": ((0.3, 2), (-2, 2)),
    "atan2": ((-2, 2), (0.5, 2)),
}
STEP = 1e-3


def check_hvp(f, primals, rtol=1e-7):
    """tg.hvp of scalar f against Richardson central differences of tg.grad."""
    rng = np.random.default_rng(1)
    tangents = tuple(rng.standard_normal(p.shape) for p in primals)
    argnums = tuple(range(len(primals)))
    grad_f = tg.grad(f, argnums=argnums)

    def moved(t):
        return grad_f(*(p + t * v for p, v in zip(primals, tangents, strict=True)))

    def central(h):
        plus, minus = moved(h), moved(-h)
        return [(a - b) / (2 * h) for a, b in zip(plus, minus, strict=True)]

    coarse, fine = central(STEP), central(STEP / 2)
    hv = tg.hvp(f, primals, tangents)
    for got, c, fi in zip(hv, coarse, fine, strict=True):
        expected = (4 * fi - c) / 3
        np.testing.assert_allclose(got, expected, rtol=rtol,
                                   atol=rtol * np.max(np.abs(expected)))


@pytest.mark.parametrize("name", SMOOTH_UNARY)
def test_unary_second_derivatives(name):
    _, low, high = UNARY[name]
    prim = ops.get_primitive(name)
    weights = rand((5,), seed=3)
    check_hvp(lambda x: ops.reduce_sum(ops.mul(prim.bind(x), weights), axes=(0,)),
              (rand((5,), low=low, high=high),))


@pytest.mark.parametrize("name", sorted(SMOOTH_BINARY))
def test_binary_second_derivatives(name):
    (xl, xh), (yl, yh) = SMOOTH_BINARY[name]
    prim = ops.get_primitive(name)
    weights = rand((4,), seed=3)
    check_hvp(lambda x, y: ops.reduce_sum(ops.mul(prim.bind(x, y), weights), axes=(0,)),
              (rand((4,), low=xl, high=xh, seed=1), rand((4,), low=yl, high=yh, seed=2)))


def test_second_derivatives_through_reductions_and_linalg():
    a = rand((3, 3), seed=4) + 3 * np.eye(3)
    b = rand((3, 2), seed=5)
    check_hvp(lambda a, b: ops.reduce_sum(ops.solve(a, b), axes=(0, 1)), (a, b))
    check_hvp(lambda a: ops.det(a), (a,))
    check_hvp(lambda x: ops.reduce_prod(x, axes=(0,)), (rand((5,), seed=6),))
    check_hvp(lambda x: ops.reduce_sum(ops.mul(ops.cumprod(x, axis=0), x), axes=(0,)),
              (rand((6,), seed=7),))


@pytest.mark.parametrize("name,x,second", [
    ("exp", 0.7, np.exp(0.7)),
    ("sin", 0.7, -np.sin(0.7)),
    ("log", 0.7, -1 / 0.7 ** 2),
    ("tanh", 0.7, -2 * np.tanh(0.7) * (1 - np.tanh(0.7) ** 2)),
    ("sqrt", 0.7, -0.25 * 0.7 ** -1.5),
    ("logistic", 0.7, (lambda s: s * (1 - s) * (1 - 2 * s))(1 / (1 + np.exp(-0.7)))),
])
def test_scalar_grad_of_grad(name, x, second):
    prim = ops.get_primitive(name)
    assert tg.grad(tg.grad(prim.bind))(x) == pytest.approx(second, rel=1e-13)


def test_third_derivative():
    f = lambda x: ops.mul(ops.sin(x), ops.exp(x))  # noqa: E731
    # (sin x e^x)''' = 2 e^x (cos x - sin x)
    x = 0.3
    assert tg.grad(tg.grad(tg.grad(f)))(x) == pytest.approx(
        2 * np.exp(x) * (np.cos(x) - np.sin(x)), rel=1e-13)
