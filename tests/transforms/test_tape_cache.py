"""The cached backward pass of eager tapes (docs/tape.md, "The cached backward pass"): a
replay gives exactly the plain walk's gradients, and whatever it does not cover still
behaves as the walk does."""

import importlib
import itertools

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tracegrad import ops
from tracegrad.errors import InvalidArgumentError, ShapeError
from tracegrad.transforms import tape as tape_module
from tracegrad.transforms import tape_cache

_names = itertools.count()


@pytest.fixture
def replays(monkeypatch):
    """Counts the gradients answered by a replay (the cache starts empty)."""
    monkeypatch.setattr(tape_cache, "_CACHE", {})
    count = {"runs": 0}
    run = tape_cache.Replay.run

    def counted(self, tensors):
        count["runs"] += 1
        return run(self, tensors)

    monkeypatch.setattr(tape_cache.Replay, "run", counted)
    return count


def walk_only(monkeypatch):
    monkeypatch.setattr(tape_module, "cached_gradient", lambda *args: None)


def values(grads):
    return [None if g is None else np.array(g.numpy()) for g in grads]


def assert_identical(got, want):
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        assert (a is None) == (b is None)
        if a is not None:
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_array_equal(a, b)  # bit for bit, not within a tolerance


def mlp_problem(batch=8):
    rng = np.random.default_rng(0)
    params = [rng.standard_normal((5, 7)) * 0.3, np.zeros(7), rng.standard_normal((7, 3)),
              np.full(3, 0.1)]
    x = rng.standard_normal((batch, 5))
    y = np.eye(3)[rng.integers(0, 3, batch)]
    return params, x, y


def mlp_loss(w1, b1, w2, b2, x, y):
    z = tnp.tanh(x @ w1 + b1) @ w2 + b2
    shifted = z - tnp.max(z, axis=1, keepdims=True)
    log_p = shifted - tnp.log(tnp.sum(tnp.exp(shifted), axis=1, keepdims=True))
    return -tnp.sum(y * log_p) / x.shape[0]


def training_run(steps, batch=8):
    """The gradients of `steps` SGD steps of a small MLP on Variables."""
    params, x, y = mlp_problem(batch)
    variables = [tg.Variable(p) for p in params]
    out = []
    for _ in range(steps):
        with tg.GradientTape() as tape:
            loss = mlp_loss(*variables, x, y)
        grads = tape.gradient(loss, variables)
        out.append(values(grads))
        for v, g in zip(variables, grads, strict=True):
            v.assign_sub(0.1 * g)
    return out


def test_training_steps_replay_the_walks_gradients_bit_for_bit(monkeypatch, replays):
    got = training_run(4)
    assert replays["runs"] == 3  # the first sighting walks, the second traces and replays
    walk_only(monkeypatch)
    want = training_run(4)
    for g, w in zip(got, want, strict=True):
        assert_identical(g, w)


def test_a_new_structure_is_walked_then_traced_on_its_own(monkeypatch, replays):
    training_run(3, batch=8)
    assert replays["runs"] == 2
    got = training_run(3, batch=4)  # other shapes: another structure
    assert replays["runs"] == 4
    walk_only(monkeypatch)
    for g, w in zip(got, training_run(3, batch=4), strict=True):
        assert_identical(g, w)


def _persistent_run():
    x = tg.constant(np.array([0.5, -1.5, 2.0]))
    v = tg.Variable(np.array([1.0, 2.0, 3.0]))
    out = []
    for step in range(3):
        with tg.GradientTape(persistent=True) as tape:
            tape.watch(x)
            a = tnp.sin(x) * v
            b = tnp.sum(a * a)
            c = tnp.exp(a)
        out.append(values(tape.gradient(b, [x, v])) + values(tape.gradient(c, [v, x]))
                   + values(tape.gradient([b, c], x)))  # three structures on one tape
        v.assign_add(tg.constant(np.full(3, 0.25 * step)))
    return out


def test_a_persistent_tape_replays_each_gradient_request_of_its_own(monkeypatch, replays):
    got = _persistent_run()
    assert replays["runs"] == 6  # steps 2 and 3, three requests each
    walk_only(monkeypatch)
    for g, w in zip(got, _persistent_run(), strict=True):
        assert_identical(g, w)


def _options_run():
    x = tg.constant(np.array([[0.3, -0.2], [1.1, 0.4]]))
    w = tg.Variable(np.array([[1.0, -1.0], [0.5, 2.0]]))
    unused = tg.Variable(np.array([1.0, 2.0]))
    n = tg.constant(np.array([1, 2]))
    out = []
    for _ in range(3):
        with tg.GradientTape() as tape:
            tape.watch(x)
            y = tnp.tanh(x @ w) * w  # w read twice: its gradient sums over both reads
            w.assign(w.numpy() * 1.5)  # ... and the reads see different values
            y = y + x * w
        out.append(values(tape.gradient(
            y, [x, w, unused, n],
            output_gradients=tg.constant(np.array([[1.0, 2.0], [-3.0, 0.5]])),
            unconnected_gradients="zero")))
        w.assign(np.array([[1.0, -1.0], [0.5, 2.0]]))
    return out


def test_output_gradients_unconnected_zero_and_variable_reads_as_the_walk(monkeypatch,
                                                                          replays):
    got = _options_run()
    assert replays["runs"] == 2
    assert got[0][2].tolist() == [0.0, 0.0] and got[0][3] is None  # zeros; an int source
    walk_only(monkeypatch)
    for g, w in zip(got, _options_run(), strict=True):
        assert_identical(g, w)


def test_the_gradient_of_a_target_by_itself_is_the_output_gradient_itself(replays):
    x = tg.constant(np.array([1.0, 2.0]))
    seed = tg.constant(np.array([3.0, 4.0]))
    for _ in range(3):
        with tg.GradientTape() as tape:
            tape.watch(x)
            y = x * 2.0
        assert tape.gradient([y, x], x, output_gradients=[None, seed]) is not seed
        with tg.GradientTape() as tape:
            tape.watch(x)
        assert tape.gradient(x, x, output_gradients=seed) is seed
    assert replays["runs"] >= 2


def test_replayed_constant_gradients_are_fresh_arrays(replays):
    x = tg.constant(2.0)
    results = []
    for _ in range(3):
        with tg.GradientTape() as tape:
            tape.watch(x)
            y = x + 0.0
        results.append(tape.gradient(y, x))
    assert replays["runs"] == 2
    a, b = np.asarray(results[1]), np.asarray(results[2])
    assert a == 1.0 and b == 1.0 and not np.shares_memory(a, b)


def test_custom_gradients_and_overrides_are_walked(replays):
    @tg.custom_gradient
    def clipped(x):
        def grad(dy):
            return tnp.clip(dy, -0.5, 0.5)
        return tnp.sin(x), grad

    name = f"tape_cache_tripled_{next(_names)}"
    tg.RegisterGradient(name)(lambda op, g: [ops.mul(g, ops.full_like(g, 3.0))])
    x = tg.constant(np.array([0.2, 1.3]))
    for _ in range(3):
        with tg.GradientTape(persistent=True) as tape:
            tape.watch(x)
            y = tnp.sum(clipped(x) * 4.0)
            with tg.gradient_override_map({"exp": name}):
                z = tnp.sum(tnp.exp(x))
        np.testing.assert_array_equal(tape.gradient(y, x).numpy(), [0.5, 0.5])
        np.testing.assert_array_equal(tape.gradient(z, x).numpy(), [3.0, 3.0])
    assert replays["runs"] == 0


def test_nested_tapes_still_record_the_inner_gradient(replays):
    x = tg.constant(np.array([0.5, 1.5]))
    for _ in range(3):
        with tg.GradientTape() as outer:
            outer.watch(x)
            with tg.GradientTape() as inner:
                inner.watch(x)
                y = tnp.sum(x * x * x)
            dy = inner.gradient(y, x)  # the outer tape records: no replay
        d2 = outer.gradient(dy, x)  # replayed from the second step on
        np.testing.assert_allclose(dy.numpy(), 3 * x.numpy() ** 2)
        np.testing.assert_allclose(d2.numpy(), 6 * x.numpy())
    assert replays["runs"] == 2


@pytest.mark.parametrize("seed, error", [
    (tg.constant(np.ones(3)), ShapeError),  # the walk's error, at every repetition
    (np.array([1, 2]), None),  # NumPy output gradients: cast to the target's dtype
])
def test_bad_and_numpy_output_gradients_are_walked(replays, seed, error):
    x = tg.constant(np.array([1.0, 2.0]))
    for _ in range(3):
        with tg.GradientTape() as tape:
            tape.watch(x)
            y = x * x
        if error is None:
            np.testing.assert_array_equal(tape.gradient(y, x, output_gradients=seed).numpy(),
                                          [2.0, 8.0])
        else:
            with pytest.raises(error, match="grad_ys"):
                tape.gradient(y, x, output_gradients=seed)
    assert replays["runs"] == 0


def test_no_output_gradients_and_an_empty_list_of_them_are_told_apart(replays):
    # None means ones for every target; [] gives no gradient for a target: the walk's error
    x = tg.constant(np.array([0.0, 1.0, 2.0]))
    for seeds in (None, None, [], None, []):
        with tg.GradientTape() as tape:
            tape.watch(x)
            y = tnp.sum(x * x)
        if seeds is None:
            np.testing.assert_array_equal(tape.gradient(y, x, output_gradients=seeds).numpy(),
                                          [0.0, 2.0, 4.0])
        else:
            with pytest.raises(InvalidArgumentError, match="grad_ys"):
                tape.gradient(y, x, output_gradients=seeds)
    assert replays["runs"] == 2  # the third and fourth None requests


def _small_steps(n):
    w = tg.Variable(np.array([[0.5, -1.0], [2.0, 0.25]]))
    x = tg.constant(np.array([[1.0, 2.0], [3.0, -1.0]]))
    out = []
    for _ in range(n):
        with tg.GradientTape() as tape:
            loss = tnp.sum(tnp.tanh(x @ w) ** 2)
        out.append(values([tape.gradient(loss, w)])[0])
        tg.wait_for_compiles()
    return out


@pytest.mark.parametrize("kernels", [True, False])
def test_a_hot_structure_runs_as_a_kernel_unless_kernels_are_off(monkeypatch, replays,
                                                                 kernels):
    monkeypatch.setattr(tape_cache, "KERNEL_AFTER_SECONDS", 0.0)
    monkeypatch.setattr(tg.config, "tape_kernels", kernels)
    monkeypatch.setattr(tg.config, "backend", "numba")
    got = _small_steps(5)
    (replay,) = [r for r in tape_cache._CACHE.values() if isinstance(r, tape_cache.Replay)]
    assert replay.compiled is kernels
    walk_only(monkeypatch)
    want = _small_steps(5)
    for g, w in zip(got, want, strict=True):
        if kernels:  # the numba backend's bounds (docs/numba.md)
            np.testing.assert_allclose(g, w, rtol=1e-13, atol=0)
        else:
            np.testing.assert_array_equal(g, w)


def test_a_tape_kernel_compiles_only_once_its_replays_paid_for_it(monkeypatch):
    # the rule of tg.function's deferred compiles: a compile expected to take longer than
    # defer_compile_above starts once the replays have spent as long
    tg_function = importlib.import_module("tracegrad.function")  # (tg.function: the decorator)
    graph = tg.trace(lambda x: tnp.sin(x) * 2.0)(tg.TensorSpec([3]))
    monkeypatch.setattr(tg.config, "backend", "numba")
    monkeypatch.setattr(tg.config, "tape_kernels", True)
    monkeypatch.setattr(tg.config, "defer_compile_above", 0.0)
    expected = tg_function.compile_estimate(graph)
    assert expected > 0
    assert tg_function._tape_kernel(graph, expected / 2) is None  # not yet: asked again later
    monkeypatch.setattr(tg.config, "tape_kernels", False)
    assert tg_function._tape_kernel(graph, 2 * expected) is False  # never
