"""GradientTape.jacobian / batch_jacobian on the vectorized path (experimental_use_pfor=True,
the default): equal to the sequential path, eagerly and traced, with Variables, chunking,
outer tapes (higher order) and the seed's persistence rules."""

from __future__ import annotations

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp

RNG = np.random.default_rng(11)


def value(t):
    return np.asarray(t)


def test_eager_pfor_needs_no_persistent_tape_and_uses_it_up():
    x = tg.constant([1.0, 2.0, 3.0])
    with tg.GradientTape() as g:
        g.watch(x)
        y = tnp.sin(x) * x[0]
    jac = g.jacobian(y, x)
    assert isinstance(jac, tg.Tensor)
    want = np.diag(np.cos(x.numpy()) * 1.0)
    want[:, 0] += np.sin(x.numpy())
    np.testing.assert_allclose(value(jac), want, rtol=1e-15)
    with pytest.raises(RuntimeError, match="non-persistent"):
        g.jacobian(y, x)


def test_outer_tape_differentiates_through_a_vectorized_jacobian():
    x = tg.constant([0.5, 1.5, -1.0])

    def hess_trace(pfor):
        with tg.GradientTape() as outer:
            outer.watch(x)
            with tg.GradientTape(persistent=True) as inner:
                inner.watch(x)
                y = tnp.sin(x) * x[0] + x * x * x
            s = tnp.sum(inner.jacobian(y, x, experimental_use_pfor=pfor) ** 2)
        return value(outer.gradient(s, x))

    np.testing.assert_allclose(hess_trace(True), hess_trace(False), rtol=1e-14)


@pytest.mark.parametrize("parallel_iterations", [None, 1, 2, 5])
def test_chunks_give_identical_results(parallel_iterations):
    a = RNG.normal(size=(5, 3))
    x = tg.constant(RNG.normal(size=3))
    with tg.GradientTape(persistent=True) as g:
        g.watch(x)
        y = tnp.tanh(a @ x)
    whole = value(g.jacobian(y, x, experimental_use_pfor=False))
    np.testing.assert_allclose(value(g.jacobian(y, x, parallel_iterations=parallel_iterations)),
                               whole, rtol=1e-15)


def test_variables_eagerly_and_traced():
    v = tg.Variable([1.0, 2.0])
    with tg.GradientTape() as g:
        y = v * v * 3.0
    np.testing.assert_array_equal(value(g.jacobian(y, v)), [[6.0, 0.0], [0.0, 12.0]])

    @tg.function
    def f(x):
        with tg.GradientTape() as g:
            g.watch(x)
            y = v * v * x
        return g.jacobian(y, [v, x])

    jv, jx = f(np.array([3.0, 4.0]))
    np.testing.assert_array_equal(jv, [[6.0, 0.0], [0.0, 16.0]])
    np.testing.assert_array_equal(jx, [[1.0, 0.0], [0.0, 4.0]])


def test_traced_batch_jacobian_matches_the_loop(backend):
    m = RNG.normal(size=(4, 2))

    @tg.function(static_argnums=1)
    def f(x, pfor):
        with tg.GradientTape() as g:
            g.watch(x)
            y = tnp.sin(x) @ m
        return g.batch_jacobian(y, x, experimental_use_pfor=pfor)

    x = RNG.normal(size=(3, 4))
    got = tg.function(lambda x: f(x, True))(x)
    np.testing.assert_allclose(got, np.stack([m.T * np.cos(r) for r in x]), rtol=1e-12,
                               atol=1e-15)


def test_non_persistent_batch_jacobian_with_parallel_iterations_is_refused():
    x = tg.constant(np.ones((2, 3)))
    with tg.GradientTape() as g:
        g.watch(x)
        y = x * 2.0
    with pytest.raises(RuntimeError, match="persistent=True to compute the batch_jacobian "
                                           "with parallel_iterations"):
        g.batch_jacobian(y, x, parallel_iterations=2)
    with pytest.raises(RuntimeError, match="only be used to compute one set"):
        g.batch_jacobian(y, x)  # as in the seed, whose first chunk used the tape up
    with tg.GradientTape(persistent=True) as g:
        g.watch(x)
        y = x * 2.0
    bj = g.batch_jacobian(y, x, parallel_iterations=2)
    np.testing.assert_array_equal(value(bj), np.broadcast_to(2 * np.eye(3), (2, 3, 3)))
