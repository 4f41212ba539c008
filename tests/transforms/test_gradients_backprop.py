"""The reverse-accumulation routine itself, over eager records and graph ops: which records
it visits, aggregation, stop tensors, unconnected sources, what rules are told, and the
errors it raises."""

from __future__ import annotations

import numpy as np
import pytest

import tracegrad as tg
from tracegrad import ops
from tracegrad.core.ir import EagerTensor, FuncGraph
from tracegrad.core.state import state
from tracegrad.core.types import TensorType
from tracegrad.errors import DTypeError, ShapeError
from tracegrad.transforms.backprop import GRADIENT_REGISTRY, backprop
from tracegrad.transforms.evaluate import evaluate


class Recorder:
    def __init__(self):
        self.records = []

    def record(self, op):
        self.records.append(op)

    def variable_accessed(self, variable, tensor):
        pass

    def __enter__(self):
        state.tapes.append(self)
        return self

    def __exit__(self, *exc):
        state.tapes.remove(self)


def t(value):
    return EagerTensor(np.asarray(value, dtype=np.float64))


def test_diamond_gradients_are_summed_before_the_shared_producer_runs():
    x = t([1.0, 2.0])
    with Recorder() as rec:
        a = ops.sin(x)
        y = ops.add(ops.mul(a, a), ops.exp(a))  # dy/da = 2a + e^a
    (g,) = backprop(rec.records, [y], [x])
    a = np.sin([1.0, 2.0])
    np.testing.assert_allclose(g.numpy(), (2 * a + np.exp(a)) * np.cos([1.0, 2.0]))


def test_records_off_the_path_are_not_differentiated():
    calls = []
    name = "test_backprop_counting_rule"
    GRADIENT_REGISTRY[name] = lambda op, g: calls.append(op) or [ops.neg(g)]
    x, z = t(1.0), t(2.0)
    with Recorder() as rec:
        with tg.gradient_override_map({"neg": name}):
            unrelated = ops.neg(z)       # not on a path from x
            y = ops.mul(ops.neg(x), unrelated)
            ops.neg(y)                   # after y: not on a path to y
    (g,) = backprop(rec.records, [y], [x])
    assert g.numpy() == 2.0 and len(calls) == 1


def test_rules_are_told_which_inputs_need_no_gradient():
    seen = []
    name = "test_backprop_skip_rule"
    GRADIENT_REGISTRY[name] = lambda op, g: seen.append(op.skip_input_indices) or [g, g]
    x, c = t(1.0), t(5.0)
    with Recorder() as rec:
        with tg.gradient_override_map({"add": name}):
            y = ops.add(c, x)
    backprop(rec.records, [y], [x])
    assert seen == [(0,)]


def test_stop_tensors_receive_but_do_not_pass_gradients():
    x = t(3.0)
    with Recorder() as rec:
        h = ops.mul(x, x)
        y = ops.mul(h, x)
    gx, gh = backprop(rec.records, [y], [x, h], stop_gradients=[h])
    assert gx.numpy() == 9.0 and gh.numpy() == 3.0
    gx, gh = backprop(rec.records, [y], [x, h])
    assert gx.numpy() == 27.0 and gh.numpy() == 3.0


def test_unconnected_and_integer_sources():
    x, z, n = t(1.0), t(2.0), EagerTensor(np.asarray(3))
    with Recorder() as rec:
        y = ops.mul(x, ops.convert_element_type(n, new_dtype=np.dtype("float64")))
    assert backprop(rec.records, [y], [z, n]) == [None, None]
    gz, gn = backprop(rec.records, [y], [z, n], unconnected_gradients="zero")
    assert gz.numpy() == 0.0 and gn is None


def test_grad_ys_weight_the_targets_and_are_checked():
    x = t([1.0, 2.0])
    with Recorder() as rec:
        y1 = ops.mul(x, x)
        y2 = ops.sin(x)
        k = ops.argmax(x, axis=0)
    (g,) = backprop(rec.records, [y1, y2, k], [x], [t([1.0, -1.0]), None, np.asarray(7)])
    np.testing.assert_allclose(g.numpy(), [2.0, -4.0] + np.cos([1.0, 2.0]))
    with pytest.raises(ShapeError, match=r"grad_ys\[0\]"):
        backprop(rec.records, [y1], [x], [t([1.0, 2.0, 3.0])])
    with pytest.raises(DTypeError, match=r"grad_ys\[0\]"):
        backprop(rec.records, [y1], [x], [EagerTensor(np.ones(2, np.float32))])
    with pytest.raises(ValueError, match="grad_ys"):
        backprop(rec.records, [y1], [x], [None, None])


def test_a_rule_returning_the_wrong_number_of_gradients():
    name = "test_backprop_bad_count"
    GRADIENT_REGISTRY[name] = lambda op, g: [g, g]
    x = t(1.0)
    with Recorder() as rec:
        with tg.gradient_override_map({"sin": name}):
            y = ops.sin(x)
    with pytest.raises(ValueError, match="returned 2 gradients for 1 inputs"):
        backprop(rec.records, [y], [x])


def test_graph_operations_with_a_custom_key():
    graph = FuncGraph("f")
    with graph.as_default():
        x = graph.add_input(TensorType((2,), np.dtype("float64")))
        y = ops.reduce_sum(ops.mul(x, x), axes=(0,))
        (g,) = backprop(list(graph.operations), [y], [x], key=lambda tensor: ("k", id(tensor)))
        graph.outputs = [g]
    (out,) = evaluate(graph, np.array([3.0, -1.0]))
    np.testing.assert_array_equal(out, [6.0, -2.0])
