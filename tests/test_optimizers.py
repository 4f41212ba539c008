"""tracegrad.optimizers against optax: the first 10 steps of each configuration on the
reference problem (tests/optimizer_problem.py) equal optax's trajectory, recorded in
tests/data/optax_reference.json by tests/data/make_optax_reference.py, to 1e-12 — in the
functional form eagerly and inside tg.function, and on Variables inside tg.function."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tests import optimizer_problem as problem
from tracegrad.errors import InvalidArgumentError

REFERENCE = json.loads(
    (pathlib.Path(__file__).parent / "data" / "optax_reference.json").read_text())
CONFIGS = sorted(problem.CONFIGS)


def _check(trajectory, name):
    expected = REFERENCE["trajectories"][name]
    assert len(trajectory) == len(expected) == problem.STEPS
    for step, (got, want) in enumerate(zip(trajectory, expected, strict=True)):
        for key in ("w", "m"):
            np.testing.assert_allclose(np.asarray(got[key]), want[key], rtol=1e-12,
                                       atol=1e-14, err_msg=f"{name}: step {step}, {key}")


@pytest.mark.parametrize("name", CONFIGS)
def test_functional_form_follows_optax_eagerly(name):
    opt = problem.make(tg.optimizers, name)
    params = problem.initial_params()
    state = opt.init(params)
    trajectory = []
    for _ in range(problem.STEPS):
        params, state = opt.update(problem.gradient(params), state, params)
        trajectory.append(params)
    assert int(state.count) == problem.STEPS
    _check(trajectory, name)


@pytest.mark.parametrize("name", CONFIGS)
def test_functional_form_follows_optax_in_one_compiled_step(name):
    opt = problem.make(tg.optimizers, name)

    @tg.function
    def step(params, state, grads):
        return opt.update(grads, state, params)

    params = problem.initial_params()
    state = opt.init(params)
    trajectory = []
    for _ in range(problem.STEPS):
        params, state = step(params, state, problem.gradient(params))
        trajectory.append(params)
    assert step.tracing_count == 1
    _check(trajectory, name)


@pytest.mark.parametrize("name", CONFIGS)
def test_variable_form_follows_optax_inside_tg_function(name):
    opt = problem.make(tg.optimizers, name)
    start = problem.initial_params()
    w, m = tg.Variable(start["w"], name="w"), tg.Variable(start["m"], name="m")

    @tg.function
    def step(g_w, g_m):
        opt.apply([g_w, g_m], [w, m])

    trajectory = []
    for _ in range(problem.STEPS):
        g = problem.gradient({"w": w.numpy(), "m": m.numpy()})
        step(g["w"], g["m"])
        trajectory.append({"w": w.numpy(), "m": m.numpy()})
    _check(trajectory, name)
    assert int(opt.variables()[0].numpy()) == problem.STEPS


def test_variable_form_eagerly_with_a_tape():
    opt = tg.optimizers.adam(0.05)
    start = problem.initial_params()
    w, m = tg.Variable(start["w"]), tg.Variable(start["m"])
    trajectory = []
    for _ in range(problem.STEPS):
        with tg.GradientTape() as tape:
            loss = (0.5 * tnp.sum((problem.A @ w - problem.B) ** 2) + 0.1 * tnp.sum(w ** 4)
                    + tnp.sum(tnp.sin(m) * m))
        opt.apply(tape.gradient(loss, [w, m]), [w, m])
        trajectory.append({"w": w.numpy(), "m": m.numpy()})
    _check(trajectory, "adam")


def test_none_gradients_leave_their_parameters():
    opt = tg.optimizers.sgd(0.1, momentum=0.9)
    params = {"a": np.ones(2), "b": np.ones(3), "c": None}
    state = opt.init(params)
    new, state = opt.update({"a": np.ones(2), "b": None, "c": None}, state, params)
    np.testing.assert_array_equal(new["a"], [0.9, 0.9])
    assert new["b"] is params["b"] and new["c"] is None
    np.testing.assert_array_equal(state.slots["trace"]["b"], np.zeros(3))

    v, u = tg.Variable(np.ones(2)), tg.Variable(np.ones(2))
    opt.apply([np.ones(2), None], [v, u])
    np.testing.assert_array_equal(v.numpy(), [0.9, 0.9])
    np.testing.assert_array_equal(u.numpy(), [1.0, 1.0])


def test_float32_parameters_stay_float32():
    opt = tg.optimizers.adam(lambda count: 0.1 / (1.0 + count))
    params = {"w": np.ones(3, np.float32)}
    state = opt.init(params)

    @tg.function
    def step(params, state):
        grads = tg.grad(lambda p: tnp.sum(p["w"] ** 2))(params)
        return opt.update(grads, state, params)

    params, state = step(params, state)
    assert params["w"].dtype == np.float32 and state.slots["mu"]["w"].dtype == np.float32
    np.testing.assert_allclose(params["w"], np.full(3, 0.9, np.float32), rtol=1e-6)


def test_training_reduces_the_loss():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 3))
    y = x @ np.array([1.0, -2.0, 0.5]) + 0.3

    def loss(p):
        return tnp.mean((x @ p["w"] + p["b"] - y) ** 2)

    for opt in (tg.optimizers.sgd(0.1, momentum=0.9), tg.optimizers.adam(0.1),
                tg.optimizers.adamw(0.1, weight_decay=0.0), tg.optimizers.rmsprop(0.01),
                tg.optimizers.adagrad(0.5)):
        @tg.function
        def step(params, state, opt=opt):
            value, grads = tg.value_and_grad(loss)(params)
            params, state = opt.update(grads, state, params)
            return params, state, value

        params = {"w": np.zeros(3), "b": 0.0}
        state = opt.init(params)
        first = None
        for _ in range(200):
            params, state, value = step(params, state)
            first = value if first is None else first
        assert value < 1e-2 * first, opt


def test_mismatched_structures_are_clear_errors():
    opt = tg.optimizers.adam(0.1)
    state = opt.init({"w": np.ones(2)})
    with pytest.raises(InvalidArgumentError, match=r"adam\.update: grads has structure"):
        opt.update({"v": np.ones(2)}, state, {"w": np.ones(2)})
    with pytest.raises(InvalidArgumentError, match="2 gradients for 1 variables"):
        opt.apply([np.ones(2), np.ones(2)], [tg.Variable(np.ones(2))])
    with pytest.raises(InvalidArgumentError, match="learning_rate must be a number"):
        tg.optimizers.sgd("0.1")


def test_a_schedule_keeps_float32_parameters_float32_eagerly():
    opt = tg.optimizers.sgd(lambda step: 0.1 * 0.5 ** step)
    params = np.ones(2, np.float32)
    state = opt.init(params)
    for _ in range(2):
        params, state = opt.update(np.ones(2, np.float32), state, params)
    assert params.dtype == np.float32
    np.testing.assert_allclose(params, [0.85, 0.85], rtol=1e-6)
