"""Adding a primitive is a short path (docs/architecture.md, "Adding a primitive"): a new
elementwise primitive defined here, in the test alone — its definition with its rules and its
Numba lowering record — runs eagerly and traced, differentiates, batches and compiles on both
backends without a change to any other file."""

from __future__ import annotations

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tests.finite_diff import central_difference
from tracegrad.backends.numba import lowering as lw
from tracegrad.backends.numba.scalars import typed
from tracegrad.core.op import REGISTRY
from tracegrad.ops import _families, elementwise


def _softsign(x):
    return x / (1.0 + np.abs(x))


@pytest.fixture(scope="module")
def softsign():
    """`softsign(x) = x / (1 + |x|)` as a new primitive, removed again afterwards (so the
    op table's completeness tests never see it)."""
    prim = _families.unary("test_softsign", _softsign)  # abstract_eval, impl, batch rule
    # the gradient, built from primitives (so it is differentiable again): g / (1 + |x|)^2
    elementwise.defrecip(prim, lambda x, y: elementwise.integer_pow_p.bind(
        elementwise.add_p.bind(elementwise.abs_p.bind(x), tnp.ones_like(x)), y=2))
    # the Numba lowering: a scalar expression of the operand's element
    lw.register(prim, lw.Lowering(lw.ELEMENTWISE, cost=lw.COSTLY, scalar=(
        lambda args, x, out, attrs, helpers: typed(f"({args[0]} / (1.0 + np.abs({args[0]})))",
                                                   out))))

    def fn(x):
        return prim.bind(tnp.asarray(x))

    yield prim, fn
    del REGISTRY[prim.name]
    lw._RECORDS.pop(prim)
    _families.ELEMENTWISE.discard(prim)
    _families.ALIGNED.discard(prim)
    _families.UNARY.discard(prim)


X = np.array([[-2.5, -0.5, 0.0], [0.25, 1.0, 4.0]])


def test_it_runs_eagerly_and_traced(softsign):
    prim, fn = softsign
    np.testing.assert_array_equal(fn(X), _softsign(X))  # NumPy in, NumPy out
    eager = fn(tg.constant(X))
    assert isinstance(eager, tg.Tensor)
    np.testing.assert_array_equal(eager.numpy(), _softsign(X))
    for backend in ("numpy", "numba"):
        got = tg.function(lambda x: fn(x) * 2.0, backend=backend)(X)
        np.testing.assert_allclose(got, 2 * _softsign(X), rtol=1e-15)
    graph = tg.trace(fn)(X)
    assert [op.primitive for op in graph.operations] == [prim]


def test_its_kernel_is_one_fused_loop(softsign):
    _, fn = softsign
    source = tg.compiled_source(tg.trace(lambda x: tnp.sum(fn(x) + x))(X))
    assert source.count("/ (1.0 + np.abs(") == 1
    assert source.count("for ") == 2  # one blocked loop over the elements, summing as it goes


def test_it_differentiates_on_both_backends(softsign):
    _, fn = softsign
    loss = lambda x: tnp.sum(fn(x) * x)
    fd = central_difference(lambda x: np.sum(_softsign(x) * x), X)
    analytic = _softsign(X) + X / (1.0 + np.abs(X)) ** 2
    for backend in ("numpy", "numba"):
        g = tg.function(tg.grad(loss), backend=backend)(X)
        np.testing.assert_allclose(g, analytic, rtol=1e-14)
        np.testing.assert_allclose(g, fd, rtol=1e-7, atol=1e-9)
    x = tg.constant(X)
    with tg.GradientTape() as tape:
        tape.watch(x)
        y = loss(x)
    np.testing.assert_allclose(tape.gradient(y, x).numpy(), analytic, rtol=1e-14)
    # second order through the gradient's own primitives
    h = tg.hessian(lambda v: tnp.sum(fn(v)))(X[1])
    d2 = -2 * np.sign(X[1]) / (1.0 + np.abs(X[1])) ** 3
    np.testing.assert_allclose(h, np.diag(d2), rtol=1e-12)
    _, tangent = tg.jvp(fn, (X,), (np.ones_like(X),))
    np.testing.assert_allclose(tangent, 1.0 / (1.0 + np.abs(X)) ** 2, rtol=1e-14)


def test_it_batches(softsign):
    _, fn = softsign
    for backend in ("numpy", "numba"):
        got = tg.function(tg.vmap(lambda row: tnp.sum(fn(row) ** 2)), backend=backend)(X)
        np.testing.assert_allclose(got, [np.sum(_softsign(r) ** 2) for r in X], rtol=1e-15)
    jac = tg.jacobian(fn)(X[0])
    np.testing.assert_allclose(jac, np.diag(1.0 / (1.0 + np.abs(X[0])) ** 2), rtol=1e-14)
