"""Building small graphs by hand and checking a pass's result against the reference."""

import numpy as np

from tracegrad.core.ir import FuncGraph
from tracegrad.core.types import TensorType
from tracegrad.core.verify import verify
from tracegrad.transforms.evaluate import evaluate


def build(types, body, name="g"):
    """A graph with inputs of `types` ("f64[3]"...) and the outputs `body(graph, *inputs)`."""
    graph = FuncGraph(name)
    inputs = [graph.add_input(TensorType.parse(t), f"x{i}") for i, t in enumerate(types)]
    with graph.as_default():
        outs = body(graph, *inputs)
    graph.outputs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    return graph


def const(graph, value, dtype="float64", weak=False):
    return graph.constant(np.asarray(value, dtype=dtype), weak=weak)


def names(graph):
    return [op.name for op in graph.operations]


def sample(t, rng, size=3):
    """A random array of type `t` (unknown dims become `size`)."""
    shape = tuple(size if d is None else d for d in t.shape)
    if t.dtype.kind == "f":
        return rng.normal(size=shape).astype(t.dtype)
    if t.dtype.kind == "b":
        return rng.random(shape) < 0.5
    return rng.integers(-5, 6, size=shape).astype(t.dtype)


def check_equivalent(before, after, seed=0, trials=3):
    """`after` verifies, keeps the signature and types, and computes what `before` does."""
    verify(after)
    assert [t.type for t in after.inputs] == [t.type for t in before.inputs]
    assert [t.name for t in after.inputs] == [t.name for t in before.inputs]
    assert [t.type for t in after.outputs] == [t.type for t in before.outputs]
    assert len(after.captures) == len(before.captures)
    for (e, p), (f, q) in zip(after.captures, before.captures):
        assert e is f and p.type == q.type
    rng = np.random.default_rng(seed)
    for _ in range(trials):
        args = [sample(t.type, rng) for t in before.inputs]
        args += [np.asarray(e) for e, _ in before.captures]
        want = evaluate(before, *args)
        got = evaluate(after, *args)
        for w, g in zip(want, got, strict=True):
            assert w.dtype == g.dtype
            np.testing.assert_array_equal(g, w)
