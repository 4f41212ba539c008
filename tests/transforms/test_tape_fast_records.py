"""The eager fast paths record on a tape what the general path records: the same ops,
attributes, shapes, dtypes and wiring as the same code traced (where no fast path runs),
so gradients, the cached backward pass and nested tapes see one structure. Covered here:
bias broadcasts, NumPy operands of a tensor, `mean` of a float tensor and 2-D `matmul`."""

from __future__ import annotations

import contextlib
import importlib.util
import pathlib

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tests.finite_diff import central_difference
from tracegrad.core import dtypes

RNG = np.random.default_rng(3)
W1, B1 = RNG.standard_normal((5, 4)) * 0.5, RNG.standard_normal(4)
W2, B2 = RNG.standard_normal((4, 3)) * 0.5, RNG.standard_normal(3)
X = RNG.standard_normal((6, 5))
Y = np.eye(3)[RNG.integers(0, 3, 6)]



def _benchmark_loss():
    path = pathlib.Path(__file__).parents[2] / "benchmarks" / "run.py"
    spec = importlib.util.spec_from_file_location("_benchmarks_run", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.mlp_loss(tnp)


mlp = _benchmark_loss()  # benchmarks/eager_step.py's loss: every fast path of the step


def mixed(w1, b1, w2, b2, x, y):
    """Operands in the other orders and ranks: NumPy first, a bias first, a row mean, a
    scalar times a matrix product, a NumPy array of another dtype, vector products."""
    a = b1 + (w1.T @ x.T).T  # (4,) + (6, 4)
    c = x[:, :4] * tnp.sin(a) - np.float32(2.0) * a
    r = tnp.mean(c, axis=0) + tnp.mean(c, axis=1, keepdims=True)
    vec = (x[0] @ w1) @ b1 + tnp.sum(w2 @ b2) + tnp.sum(b1 @ w2)  # rank-1 products
    return (tnp.sum(r @ (w2 * 0.5) + b2) + tnp.sum(y.astype(np.float32) * (r[:, :3] ** 2))
            + vec)


def _structure(records) -> list:
    """Each record as (primitive, attributes, input wiring, result types): an input is the
    index of the record making it, or its shape and dtype when no record made it."""
    made = {}
    out = []
    for i, op in enumerate(records):
        ins = [made.get(id(t), (tuple(t.shape), np.dtype(t.dtype))) for t in op.inputs]
        for t in op.outputs:
            made[id(t)] = i
        attrs = {k: v for k, v in op.attrs.items()} if op.attrs else {}
        out.append((op.primitive.name, attrs, ins,
                    [(tuple(t.shape), np.dtype(t.dtype)) for t in op.outputs]))
    return out


def _eager(fn, params, x, y):
    vs = [tg.Variable(p) for p in params]
    with tg.GradientTape() as tape:
        out = fn(*vs, x, y)
    return out, tape, vs


def _traced_structure(fn, params, x, y) -> list:
    vs = [tg.Variable(p) for p in params]
    got = []

    @tg.function(backend="numpy")
    def traced():
        with tg.GradientTape() as tape:
            out = fn(*vs, x, y)
        got[:] = _structure(tape._tape.records)
        return out

    traced()
    return got


@pytest.mark.parametrize("fn", [mlp, mixed], ids=["mlp", "mixed"])
def test_eager_records_are_the_traced_records(fn):
    params = [W1, B1, W2, B2]
    _, tape, _ = _eager(fn, params, X, Y)
    eager = _structure(tape._tape.records)
    assert eager == _traced_structure(fn, params, X, Y)
    names = [r[0] for r in eager]
    assert "broadcast_in_dim" in names and "dot_general" in names


@pytest.mark.parametrize("fn", [mlp, mixed], ids=["mlp", "mixed"])
def test_values_and_gradients_against_numpy_and_central_differences(fn):
    params = [W1, B1, W2, B2]
    out, tape, vs = _eager(fn, params, X, Y)

    def numpy_loss(i):
        def f(p):
            ps = list(params)
            ps[i] = p
            return np.asarray(fn(*ps, X, Y))
        return f

    np.testing.assert_allclose(out.numpy(), numpy_loss(0)(W1), rtol=1e-13)
    assert out.dtype == np.asarray(numpy_loss(0)(W1)).dtype
    grads = tape.gradient(out, vs)
    for i, (g, p) in enumerate(zip(grads, params, strict=True)):
        np.testing.assert_allclose(g.numpy(), central_difference(numpy_loss(i), p),
                                   rtol=1e-6, atol=1e-8, err_msg=f"parameter {i}")


def test_the_cached_backward_pass_gives_the_walks_gradients():
    first = None
    for _ in range(4):  # a walk, then the structure traced and replayed
        out, tape, vs = _eager(mlp, [W1, B1, W2, B2], X, Y)
        grads = [g.numpy() for g in tape.gradient(out, vs)]
        if first is None:
            first = grads
        for a, b in zip(first, grads, strict=True):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex128"])
def test_matmul_and_bias_keep_numpys_dtypes(dtype):
    a = (RNG.standard_normal((3, 4)) + 0.5).astype(dtype)
    w = (RNG.standard_normal((4, 2)) + 0.5).astype(dtype)
    b = np.arange(2.0).astype(dtype)
    for taped in (False, True):
        t, v = tg.constant(a), tg.Variable(w)
        with tg.GradientTape() if taped else contextlib.nullcontext():
            prod = a @ v
            mixed_dtypes = t @ w.real.astype(np.float32)  # two dtypes: NumPy's promotion
            plus = prod + tg.constant(b)
            avg = tnp.mean(plus, axis=0)
        np.testing.assert_array_equal(prod.numpy(), a @ w)
        np.testing.assert_array_equal(plus.numpy(), a @ w + b)
        np.testing.assert_allclose(avg.numpy(), np.mean(a @ w + b, axis=0), rtol=1e-6)
        expected = a @ w.real.astype(np.float32)
        assert mixed_dtypes.dtype == expected.dtype
        np.testing.assert_allclose(mixed_dtypes.numpy(), expected, rtol=1e-6)
        for r, e in ((prod, a @ w), (plus, a @ w + b), (avg, np.mean(a @ w + b, axis=0))):
            assert r.dtype == e.dtype and r.shape == e.shape
    assert tnp.mean(tg.constant(np.arange(4, dtype=np.int32))).dtype == np.float64


@pytest.mark.parametrize("shapes", [((2, 3), (3,)), ((3,), (2, 3)), ((2, 1), (2, 3)),
                                    ((2, 3), (1, 3)), ((1, 3), (2, 1)), ((), (2, 3))])
def test_numpy_operands_broadcast_under_a_tape(shapes):
    sa, sb = shapes
    a = RNG.uniform(0.5, 2.0, sa)
    b = RNG.uniform(0.5, 2.0, sb)
    for a_is_tensor in (True, False):
        t = tg.constant(a if a_is_tensor else b)
        with tg.GradientTape() as tape:
            tape.watch(t)
            out = t * b - t / b if a_is_tensor else a * t - a / t
            loss = tnp.sum(tnp.sin(out))
        want = a * b - a / b if a_is_tensor else a * b - a / b
        np.testing.assert_array_equal(out.numpy(), want)
        x0 = a if a_is_tensor else b

        def f(x, a_is_tensor=a_is_tensor):
            return np.sum(np.sin(x * b - x / b if a_is_tensor else a * x - a / x))

        np.testing.assert_allclose(tape.gradient(loss, t).numpy(), central_difference(f, x0),
                                   rtol=1e-6, atol=1e-9)


def test_nested_tapes_differentiate_the_fast_paths_twice():
    w = tg.Variable(np.array([[0.3, -0.2], [0.1, 0.4]]))
    b = tg.Variable(np.array([0.05, -0.1]))
    x = np.array([[1.0, 2.0], [-1.0, 0.5], [0.3, 0.3]])
    with tg.GradientTape() as outer:
        with tg.GradientTape() as inner:
            loss = tnp.mean(tnp.tanh(x @ w + b) ** 2)
        gw, gb = inner.gradient(loss, [w, b])
        penalty = tnp.sum(gw * gw) + tnp.sum(gb * gb)
    hw, hb = outer.gradient(penalty, [w, b])

    def grads(wv, bv):
        h = np.tanh(x @ wv + bv)
        d = 2 * h * (1 - h * h) / h.size
        return x.T @ d, d.sum(axis=0)

    def pen_w(wv):
        gw_, gb_ = grads(wv, b.numpy())
        return np.sum(gw_ ** 2) + np.sum(gb_ ** 2)

    def pen_b(bv):
        gw_, gb_ = grads(w.numpy(), bv)
        return np.sum(gw_ ** 2) + np.sum(gb_ ** 2)

    np.testing.assert_allclose(gw.numpy(), grads(w.numpy(), b.numpy())[0], rtol=1e-12)
    np.testing.assert_allclose(hw.numpy(), central_difference(pen_w, w.numpy()), rtol=1e-6)
    np.testing.assert_allclose(hb.numpy(), central_difference(pen_b, b.numpy()), rtol=1e-6)


def test_unwatched_and_stopped_fast_paths_record_nothing():
    w = tg.Variable(W1)
    b = tg.constant(B1)
    with tg.GradientTape(watch_accessed_variables=False) as tape:
        out = tnp.sum(X @ w + b)
    assert tape._tape.records == [] and tape.gradient(out, w) is None
    with tg.GradientTape(persistent=True) as tape:
        tape.watch(b)
        with tape.stop_recording():
            hidden = X @ w + b
        seen = tnp.mean(X @ w + b)
    assert tape.gradient(hidden, b) is None
    np.testing.assert_allclose(tape.gradient(seen, b).numpy(), np.full(4, 1 / 4))
    with tg.GradientTape(persistent=True) as tape:
        out = tnp.mean(X @ w + b)
    for _ in range(2):
        np.testing.assert_allclose(tape.gradient(out, w).numpy(),
                                   np.repeat(X.mean(axis=0)[:, None] / 4, 4, axis=1))


def test_matmul_fast_path_leaves_other_ranks_and_dtypes_to_the_general_path():
    a = tg.constant(np.ones((2, 3, 4)))
    b = np.ones((4, 5))
    assert (a @ b).shape == (2, 3, 5)
    i = tg.constant(np.arange(6, dtype=np.int32).reshape(2, 3))
    assert (i @ np.ones((3, 2), np.int32)).dtype == np.int32
    assert np.dtype(dtypes.canonicalize((tg.constant(np.ones((2, 2), np.float16))
                                         @ np.ones((2, 2), np.float16)).dtype)) == np.float16
    with pytest.raises(tg.errors.ShapeError):
        tg.constant(np.ones((2, 3))) @ np.ones((2, 3))


def test_flat_sources_keep_their_container_and_a_used_tape_its_variables():
    b, a = tg.Variable(1.0), tg.Variable(2.0)
    for sources in ([a, b], (b, a), {"a": a, "b": [b]}, a):
        with tg.GradientTape() as tape:
            y = a * b * 3.0
        grads = tape.gradient(y, sources)
        expected = {"a": 3.0, "b": 6.0}
        if isinstance(sources, tg.Variable):
            assert isinstance(grads, tg.Tensor) and float(grads) == 3.0
        elif isinstance(sources, dict):
            assert float(grads["a"]) == 3.0 and [float(g) for g in grads["b"]] == [6.0]
        else:
            assert type(grads) is type(sources)
            assert [float(g) for g in grads] == [expected["a" if s is a else "b"]
                                                for s in sources]
        assert tape.watched_variables() == (b, a)  # creation order, after use too


ALIAS_CASES = {
    "same shape": (np.ones(3), lambda: np.array([1.0, 2.0, 3.0]), "mul"),
    "bias": (np.ones((2, 3)), lambda: np.array([1.0, 2.0, 3.0]), "mul"),
    "broadcast left": (np.ones(3), lambda: np.arange(6.0).reshape(2, 3), "mul"),
    "0-d": (np.ones(3), lambda: np.array(2.0), "mul"),
    "float32 tensor": (np.ones(3, np.float32), lambda: np.array([1.0, 2.0, 3.0]), "mul"),
    "matmul matrix-vector": (np.ones((2, 3)), lambda: np.array([1.0, 2.0, 3.0]), "matmul"),
    "matmul vector-matrix": (np.ones(3), lambda: np.arange(6.0).reshape(3, 2), "matmul"),
    "general op": (np.ones(3), lambda: np.array([1.0, 2.0, 3.0]), "arctan2"),
}


@pytest.mark.parametrize("name", sorted(ALIAS_CASES))
def test_a_numpy_operand_written_after_recording_keeps_its_recorded_value(name):
    """The tape keeps the value a NumPy operand had when the op ran, as TensorFlow's
    conversion to a constant does: writing to the array afterwards changes no gradient."""
    value, make, how = ALIAS_CASES[name]

    def loss(x, a):
        if how == "matmul":
            return tnp.sum(x @ a)
        if how == "arctan2":
            return tnp.sum(tnp.arctan2(x, a))
        return tnp.sum(x * a)

    x = tg.constant(value)
    a = make()
    with tg.GradientTape() as tape:
        tape.watch(x)
        y = loss(x, a)
    expected = make()
    with tg.GradientTape() as fresh:
        fresh.watch(x)
        y_fresh = loss(x, expected)
    a[...] = 100.0
    np.testing.assert_array_equal(np.asarray(tape.gradient(y, x)),
                                  np.asarray(fresh.gradient(y_fresh, x)))
