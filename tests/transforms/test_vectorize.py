"""tg.vmap, tg.pfor and tg.for_loop: values against Python loops, axes and structures,
composition with grad, tg.function and each other, and the errors."""

from __future__ import annotations

import collections

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tracegrad import ops
from tracegrad.core.op import REGISTRY, Primitive
from tracegrad.core.types import TensorType
from tracegrad.errors import ShapeError, UnsupportedOpError

RNG = np.random.default_rng(7)
W = RNG.normal(size=(4, 3))
B = RNG.normal(size=4)


def mlp(x):
    return tnp.sum(tnp.tanh(W @ x + B) ** 2)


def loop(fn, *args, axis=0):
    return np.stack([np.asarray(fn(*a)) for a in zip(*[np.moveaxis(x, axis, 0) for x in args])])


def test_vmap_matches_a_loop(backend):
    x = RNG.normal(size=(5, 3))
    np.testing.assert_allclose(tg.vmap(mlp)(x), loop(mlp, x), rtol=1e-13)


def test_per_example_gradients_are_vmap_of_grad(backend):
    x = RNG.normal(size=(6, 3))
    got = tg.vmap(tg.grad(mlp))(x)
    want = loop(tg.grad(mlp), x)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    s = 1 - np.tanh(x @ W.T + B) ** 2
    analytic = (2 * np.tanh(x @ W.T + B) * s) @ W
    np.testing.assert_allclose(got, analytic, rtol=1e-12)


def test_grad_of_vmap_and_vmap_of_vmap(backend):
    x = RNG.normal(size=(4, 3))
    total = tg.grad(lambda x: tnp.sum(tg.vmap(mlp)(x)))(x)
    np.testing.assert_allclose(total, loop(tg.grad(mlp), x), rtol=1e-12)
    y = RNG.normal(size=(2, 5, 3))
    np.testing.assert_allclose(tg.vmap(tg.vmap(mlp))(y), np.vectorize(
        lambda i, j: mlp(y[i, j]))(*np.indices((2, 5))), rtol=1e-13)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_in_axes_and_out_axes(axis, backend):
    x = RNG.normal(size=(3, 5)) if axis else RNG.normal(size=(5, 3))
    got = tg.vmap(lambda v: tnp.sin(v) * tnp.sum(v), in_axes=axis, out_axes=1)(x)
    want = loop(lambda v: np.sin(v) * np.sum(v), x, axis=axis).T
    np.testing.assert_allclose(got, want, rtol=1e-13)


def test_none_axes_and_structures(backend):
    Point = collections.namedtuple("Point", "a b")
    xs = {"u": RNG.normal(size=(4, 2)), "v": RNG.normal(size=(4,))}
    w = RNG.normal(size=2)

    def f(d, w, p):
        return Point(d["u"] * w + d["v"] * p.a, tnp.sum(w) * p.b)

    p = Point(np.float64(2.0), np.array([1.0, 3.0]))
    out = tg.vmap(f, in_axes=({"u": 0, "v": 0}, None, None), out_axes=(0, None))(xs, w, p)
    assert isinstance(out, Point)
    np.testing.assert_allclose(out.a, xs["u"] * w + xs["v"][:, None] * 2.0, rtol=1e-14)
    np.testing.assert_allclose(out.b, np.sum(w) * p.b, rtol=1e-14)


def test_invariant_outputs_are_broadcast(backend):
    out = tg.vmap(lambda x, y: (x * 2.0, y + 1.0), in_axes=(0, None))(np.ones((3, 2)),
                                                                         np.arange(2.0))
    np.testing.assert_array_equal(out[1], np.tile(np.arange(2.0) + 1, (3, 1)))


def test_vmap_inside_function_with_unknown_batch_size():
    @tg.function(input_signature=[tg.TensorSpec([None, 3])])
    def f(x):
        return tg.vmap(tg.grad(mlp))(x)

    for n in (2, 7):
        x = RNG.normal(size=(n, 3))
        want = loop(tg.grad(mlp), x)
        # a gradient entry may be a near-cancelled sum of O(1) terms: a few ulps of the largest
        np.testing.assert_allclose(f(x), want, rtol=1e-12, atol=4e-16 * np.max(np.abs(want)))
    assert f.tracing_count == 1


def test_batched_matmul_gather_and_reductions(backend):
    x = RNG.normal(size=(5, 4, 3))
    idx = np.array([[2, 0], [1, 1], [0, 3], [3, 2], [1, 0]])

    def f(m, i):
        return tnp.take(m @ W.T, i, axis=0).max(axis=-1) - tnp.mean(m, axis=0)[:2]

    np.testing.assert_allclose(tg.vmap(f)(x, idx), loop(
        lambda m, i: np.take(m @ W.T, i, axis=0).max(axis=-1) - m.mean(0)[:2], x, idx),
        rtol=1e-13)


def test_pfor_and_for_loop_agree(backend):
    x = RNG.normal(size=(4, 3))

    def body(i):
        row = tnp.take(x, i, axis=0)
        return row * tnp.asarray(i, dtype=float), tnp.sum(row)

    a = tg.pfor(body, 4)
    b = tg.for_loop(body, 4)
    for got, other in zip(a, b, strict=True):
        np.testing.assert_allclose(got, other, rtol=1e-15)
    np.testing.assert_allclose(a[0], x * np.arange(4.0)[:, None], rtol=1e-15)
    np.testing.assert_allclose(a[1], x.sum(1), rtol=1e-15)


def test_pfor_graph_holds_no_loop():
    x = RNG.normal(size=(50, 3))
    graph = tg.trace(lambda: tg.pfor(lambda i: tnp.sin(tnp.take(x, i, axis=0)), 50))()
    assert len(graph.operations) < 10  # not 50 copies of the body


def test_vmap_errors():
    with pytest.raises(ValueError, match="maps no argument"):
        tg.vmap(mlp, in_axes=None)(np.ones(3))
    with pytest.raises(ShapeError, match="different sizes"):
        tg.vmap(lambda a, b: a + b)(np.ones((2, 3)), np.ones((3, 3)))
    with pytest.raises(ValueError, match="out_axes None"):
        tg.vmap(lambda a: a * 2, out_axes=None)(np.ones((2, 3)))
    with pytest.raises(ValueError, match="out of range"):
        tg.vmap(mlp, in_axes=2)(np.ones((2, 3)))
    with pytest.raises(ValueError, match="iters must be >= 0"):
        tg.pfor(lambda i: i, -1)


@pytest.fixture
def nobatch_p():
    """A primitive with no batch rule, registered for one test only."""
    prim = Primitive("test_vectorize_nobatch")
    prim.def_abstract_eval(lambda x: TensorType(x.shape, x.dtype))
    prim.def_impl(lambda x: x)
    yield prim
    del REGISTRY[prim.name]


def test_an_op_without_a_batch_rule_names_itself_and_the_line(nobatch_p):
    def f(x):
        return nobatch_p.bind(x * 2.0)  # THE LINE

    with pytest.raises(UnsupportedOpError) as e:
        tg.vmap(f)(np.ones((2, 3)))
    message = str(e.value)
    assert "test_vectorize_nobatch" in message and "use_pfor=False" in message
    assert f"test_vectorize.py:{f.__code__.co_firstlineno + 1}" in message
    # invariant uses are copied, never batched
    g = tg.function(lambda x, y: x + nobatch_p.bind(y), backend="numpy")
    out = tg.vmap(g, in_axes=(0, None))(np.ones((2, 3)), np.ones(3))
    np.testing.assert_array_equal(out, np.full((2, 3), 2.0))


def test_batched_ops_keep_the_users_lines():
    def f(x):
        return tnp.sin(x)

    graph = tg.trace(tg.vmap(f))(np.ones((2, 3)))
    (sin,) = [op for op in graph.operations if op.primitive is ops.sin_p]
    assert sin.source.endswith(f"test_vectorize.py:{f.__code__.co_firstlineno + 1}")


@tg.custom_gradient
def _clipped_sin(x):
    def grad_fn(dy):
        return tnp.clip(dy * tnp.cos(x), -0.1, 0.1)

    return tnp.sin(x), grad_fn


def test_custom_gradients_are_batched_per_example(backend):
    x = np.linspace(-1.0, 1.0, 6).reshape(2, 3)

    def f(w, v):
        return tnp.sum(_clipped_sin(w) * v)

    got = tg.vmap(tg.grad(f), in_axes=(0, 0))(x, 3.0 * x + 1.0)
    want = np.stack([tg.grad(f)(w, 3.0 * w + 1.0) for w in x])
    np.testing.assert_allclose(got, want, rtol=1e-15)
    assert np.any(np.abs(got) == 0.1)  # the clipping happened per example
    shared = tg.vmap(tg.grad(f), in_axes=(None, 0))(x[0], x)  # w invariant, v batched
    np.testing.assert_allclose(shared, np.stack([tg.grad(f)(x[0], v) for v in x]), rtol=1e-15)
    jac = tg.jacobian(lambda w: _clipped_sin(w) * 3.0)(x[0])
    np.testing.assert_allclose(jac, np.diag(np.clip(3.0 * np.cos(x[0]), -0.1, 0.1)))


def test_calls_of_compiled_functions_recorded_on_a_tape_are_batched():
    inner = tg.function(lambda a: tnp.tanh(a) * a)
    x = tg.constant(np.array([0.3, -0.7, 1.1]))
    with tg.GradientTape(persistent=True) as g:
        g.watch(x)
        y = inner(x) * 2.0  # one `call` op on the tape
    assert any(r.primitive.name == "call" for r in g._tape.records)
    np.testing.assert_allclose(np.asarray(g.jacobian(y, x)),
                               np.asarray(g.jacobian(y, x, experimental_use_pfor=False)),
                               rtol=1e-15)


def test_matrix_times_batched_vector_is_batch_major_without_transposes():
    graph = tg.optimize(tg.trace(tg.vmap(lambda x: tnp.tanh(W @ x)))(np.ones((7, 3))))
    assert not [op for op in graph.operations if op.primitive is ops.transpose_p]
    (dot,) = [op for op in graph.operations if op.primitive is ops.dot_general_p]
    assert dot.outputs[0].shape == (7, 4)
    x = RNG.normal(size=(7, 3))
    np.testing.assert_allclose(tg.vmap(lambda x: tnp.tanh(W @ x))(x), np.tanh(x @ W.T),
                               rtol=1e-14)


def test_the_vectorize_doc_examples_run():
    import pathlib
    import re

    doc = pathlib.Path(__file__).resolve().parents[2] / "docs" / "vectorize.md"
    blocks = re.findall(r"```python\n(.*?)```", doc.read_text(), re.DOTALL)
    assert blocks
    for block in blocks:
        exec(compile(block, str(doc), "exec"), {})  # noqa: S102
