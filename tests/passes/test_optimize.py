"""The pass pipeline: a fixed point, pure, type- and value-preserving on traced graphs."""

import pytest
from passgraphs import build, check_equivalent, const, names

import tracegrad as tg
import tracegrad.numpy as tnp
from tracegrad import ops, passes


def test_rewrites_feed_each_other_to_a_fixed_point():
    def body(g, x):
        one = ops.add(const(g, 0.5), const(g, 0.5))  # folds to 1
        scale = ops.broadcast_in_dim(one, shape=(3,), broadcast_dimensions=())
        y = ops.neg(ops.neg(ops.mul(x, scale)))  # x*1 once folded, then --x
        return ops.add(ops.sin(y), ops.sin(x))  # sin(y) is sin(x) once y is x

    g = build(["f64[3]"], body)
    out = passes.optimize(g)
    assert names(out) == ["sin", "add"]
    add = out.operations[1]
    assert add.inputs[0] is add.inputs[1] is out.operations[0].outputs[0]
    check_equivalent(g, out)


def test_optimize_is_idempotent_and_pure():
    g = build(["f64[2,3]"], lambda g, x: ops.transpose(ops.transpose(
        ops.mul(x, ops.broadcast_in_dim(const(g, 2.0), shape=(2, 3), broadcast_dimensions=())),
        permutation=(1, 0)), permutation=(1, 0)))
    text = str(g)
    once = passes.optimize(g)
    assert str(g) == text
    twice = passes.optimize(once)
    assert str(twice) == str(once)
    assert names(once) == ["constant", "broadcast_in_dim", "mul"]


def test_optimize_keeps_captures_and_their_order():
    a, b = tg.Variable(1.0, name="a"), tg.Variable([2.0, 3.0], name="b")
    graph = tg.trace(lambda x: (x * b) * a + 0.0 * a)(tg.TensorSpec([2]))
    out = passes.optimize(graph)
    assert len(graph.captures) == len(out.captures) == 2
    assert all(e is f for (e, _), (f, _) in zip(out.captures, graph.captures))
    check_equivalent(graph, out)


def test_the_pipeline_stops_within_its_bound(monkeypatch):
    calls = []
    real = passes.run_pass

    def counting(graph, make_rule=None):
        calls.append(make_rule)
        return real(graph, make_rule)

    monkeypatch.setattr(passes, "run_pass", counting)
    g = build(["f64[3]"], lambda g, x: ops.sin(x))
    passes.optimize(g)
    assert len(calls) == 1 + len(passes._PIPELINE)  # nothing to do: one round


SAMPLES = [
    (lambda x, y: tnp.sin(x) * y + tnp.sin(x) * 1.0, ["f64[3]", "f64[3]"]),
    (lambda x, y: (x + 0.0) / 1.0 - (y - 0.0) * 0.0, ["f64[4]", "f64[4]"]),
    (lambda x: tnp.transpose(tnp.transpose(x)) + x.T.T, ["f64[2,3]"]),
    (lambda x: tnp.reshape(tnp.reshape(x, (6,)), (3, 2)) * 2, ["f64[2,3]"]),
    (lambda x: tnp.sum(x * x, axis=0) + tnp.exp(tnp.log(2.0)), ["f64[3,2]"]),
    (lambda x, y: x * y + y * x, ["i64[3]", "i64[3]"]),
    (lambda x, y: x * 0 + y, ["i32[3]", "i32[3]"]),
    (lambda x: tnp.negative(-x) * 1 + tnp.sum(x * 0.0), ["f32[?,2]"]),
    (lambda x, y: x * y + x * 1.0, ["f64[?]", "~f64[]"]),
    (lambda x: tnp.stack([x, x * 1.0, x + 0.0]), ["f64[2]"]),
]


@pytest.mark.parametrize("fn,types", SAMPLES)
def test_optimized_graphs_verify_and_compute_the_same_values(fn, types):
    specs = []
    for t in types:
        parsed = tg.core.TensorType.parse(t)
        specs.append(1.5 if parsed.weak else tg.TensorSpec(parsed.shape, parsed.dtype))
    graph = tg.trace(fn)(*specs)
    out = passes.optimize(graph)
    assert len(out.operations) <= len(graph.operations)
    check_equivalent(graph, out, seed=len(types))
