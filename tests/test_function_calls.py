"""tg.function calls: structures in and out, output types, closures, nesting, methods."""

import gc
import importlib
import weakref
from collections import namedtuple

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tracegrad.core.ir import EagerTensor
from tracegrad.core.state import state
from tracegrad.errors import UsageError

function_module = importlib.import_module("tracegrad.function")
Pair = namedtuple("Pair", ["first", "second"])


# -- structures ------------------------------------------------------------------------------


def test_nested_structures_in_and_out(backend):
    @tg.function
    def f(params, batch):
        w, (b, extra) = params["w"], params["rest"]
        assert extra is None
        y = batch.first * w + b
        return {"y": y, "parts": [y, Pair(batch.second, None)], "n": (tnp.sum(y),)}

    w, b = np.array([1.0, 2.0]), np.array([0.5, -0.5])
    batch = Pair(np.array([3.0, 4.0]), np.array([5.0, 6.0]))
    out = f({"w": w, "rest": (b, None)}, batch)
    y = batch.first * w + b
    assert set(out) == {"y", "parts", "n"}
    np.testing.assert_allclose(out["y"], y)
    assert isinstance(out["parts"], list) and isinstance(out["parts"][1], Pair)
    np.testing.assert_allclose(out["parts"][1].first, batch.second)
    assert out["parts"][1].second is None
    assert isinstance(out["n"], tuple) and out["n"][0] == pytest.approx(y.sum())


def test_dict_key_order_does_not_matter(backend):
    f = tg.function(lambda d: d["a"] - d["b"])
    np.testing.assert_allclose(f({"a": np.ones(2), "b": np.zeros(2)}), np.ones(2))
    np.testing.assert_allclose(f({"b": np.zeros(2), "a": np.ones(2)}), np.ones(2))
    assert f.tracing_count == 1


def test_structure_changes_retrace(backend):
    f = tg.function(lambda xs: sum(xs[1:], xs[0]))
    f([np.ones(2), np.ones(2)])
    f([np.ones(2), np.ones(2), np.ones(2)])
    f((np.ones(2), np.ones(2)))
    assert f.tracing_count == 3


def test_keyword_arguments_bind_to_parameters(backend):
    f = tg.function(lambda x, y: x - y)
    a, b = np.arange(3.0), np.ones(3)
    np.testing.assert_allclose(f(a, b), a - b)
    np.testing.assert_allclose(f(y=b, x=a), a - b)
    np.testing.assert_allclose(f(a, y=b), a - b)
    assert f.tracing_count == 1
    with pytest.raises(TypeError, match="<lambda>"):
        f(a, b, b)


def test_returning_inputs_constants_and_python_numbers(backend):
    f = tg.function(lambda x: (x, np.arange(2.0), 3, None))
    x = np.ones(2)
    same, const, three, nothing = f(x)
    np.testing.assert_allclose(same, x)
    assert same is not x  # results never alias arguments
    np.testing.assert_allclose(const, [0.0, 1.0])
    assert three == 3 and nothing is None


def test_returning_an_unsupported_object_is_a_clear_error():
    f = tg.function(lambda x: (x, "text"))
    with pytest.raises(tg.errors.TracegradError, match="returned a str"):
        f(np.ones(2))


# -- output types ----------------------------------------------------------------------------


def test_numpy_in_numpy_out_and_rank_zero_is_a_numpy_scalar(backend):
    f = tg.function(lambda x: (x * 2, tnp.sum(x)))
    vec, total = f(np.arange(3.0))
    assert type(vec) is np.ndarray
    assert isinstance(total, np.float64) and not isinstance(total, np.ndarray)
    assert total == 3.0
    assert isinstance(f(np.float32(1.5))[1], np.float32)
    scalar = tg.function(lambda a, b: a * b)(2.0, 3.0)
    assert isinstance(scalar, np.float64) and scalar == 6.0


def test_tensor_in_tensor_out(backend):
    f = tg.function(lambda x, y: (x + y, tnp.sum(y)))
    a, s = f(tg.constant([1.0, 2.0]), np.ones(2))
    assert isinstance(a, tg.Tensor) and isinstance(s, tg.Tensor)
    np.testing.assert_allclose(a.numpy(), [2.0, 3.0])
    assert s.numpy() == 2.0 and s.shape == ()
    b, _ = f(np.ones(2), tg.constant([1.0, 1.0]))  # any tensor argument makes Tensors
    assert isinstance(b, tg.Tensor)
    c, _ = f(np.ones(2), np.ones(2))
    assert type(c) is np.ndarray


def test_variable_argument_gives_tensors(backend):
    v = tg.Variable([1.0, 2.0])
    f = tg.function(lambda x: x * 2)
    out = f(v)
    assert isinstance(out, tg.Tensor)
    np.testing.assert_allclose(out.numpy(), [2.0, 4.0])
    v.assign([3.0, 4.0])
    np.testing.assert_allclose(f(v).numpy(), [6.0, 8.0])
    assert f.tracing_count == 1


# -- closures and nesting --------------------------------------------------------------------


def test_closure_over_numpy_array_is_a_constant(backend):
    table = np.array([1.0, 2.0, 3.0])
    f = tg.function(lambda x: x * table)
    np.testing.assert_allclose(f(np.ones(3)), table)
    graph = f.get_concrete_function(np.ones(3)).graph
    assert "constant" in [op.name for op in graph.operations]
    assert not graph.captures
    table[0] = 100.0  # the trace holds a copy, as JAX and TensorFlow do
    np.testing.assert_allclose(f(np.ones(3)), [1.0, 2.0, 3.0])


def test_nested_function_is_a_call_of_its_own_trace(backend):
    inner = tg.function(lambda x: tnp.sin(x) * 2)
    outer = tg.function(lambda x: inner(x) + inner(x * 0.5))
    x = np.linspace(0, 1, 4)
    np.testing.assert_allclose(outer(x), np.sin(x) * 2 + np.sin(x * 0.5) * 2)
    assert inner.tracing_count == 1 and outer.tracing_count == 1
    names = [op.name for op in outer.get_concrete_function(x).graph.operations]
    assert names.count("call") == 2 and "sin" not in names
    # (tests/test_function_nested.py covers nesting in depth)


def test_function_of_a_function(backend):
    inner = tg.function(lambda x: x + 1)
    outer = tg.function(inner)
    np.testing.assert_allclose(outer(np.zeros(2)), [1.0, 1.0])
    assert outer.tracing_count == 1 and inner.tracing_count == 1


# -- methods ---------------------------------------------------------------------------------


class Scaler:
    def __init__(self, scale):
        self.scale = np.asarray(scale)

    @tg.function
    def apply(self, x):
        return x * self.scale

    @tg.function(static_argnums=2)
    def power(self, x, n):
        out = x
        for _ in range(n - 1):
            out = out * x
        return out * self.scale


def test_decorated_methods_bind_self(backend):
    a, b = Scaler(2.0), Scaler(3.0)
    x = np.arange(3.0)
    np.testing.assert_allclose(a.apply(x), 2 * x)
    np.testing.assert_allclose(b.apply(x), 3 * x)
    np.testing.assert_allclose(a.apply(x), 2 * x)
    assert a.apply is a.apply  # one Function (and one trace cache) per instance
    assert a.apply.tracing_count == 1 and b.apply.tracing_count == 1
    np.testing.assert_allclose(a.power(x, 3), 2 * x**3)
    np.testing.assert_allclose(a.power(x, n=2), 2 * x**2)
    assert a.power.tracing_count == 2
    assert isinstance(Scaler.apply, tg.Function)


def test_an_instance_and_the_traces_of_its_methods_are_freed_with_it(backend):
    # The class's table of per-instance Functions held each instance (through the bound
    # Function's partial) and so every trace of every instance (issue 13, point 4).
    a = Scaler(2.0)
    x = np.arange(3.0)
    np.testing.assert_allclose(a.apply(x), 2 * x)
    np.testing.assert_allclose(a.power(x, 3), 2 * x**3)
    refs = [weakref.ref(a), weakref.ref(a.apply), weakref.ref(a.apply.get_concrete_function(x)),
            weakref.ref(a.power)]
    assert len(Scaler.apply._bound) >= 1
    del a
    gc.collect()
    assert [r() for r in refs] == [None] * 4
    assert all(r[0]() is not None for r in Scaler.apply._bound.values())


def test_a_kept_method_function_outlives_its_instance_with_a_clear_error(backend):
    a = Scaler(2.0)
    apply = a.apply
    np.testing.assert_allclose(apply(np.ones(2)), [2.0, 2.0])
    del a
    gc.collect()
    np.testing.assert_allclose(apply(np.ones(2)), [2.0, 2.0])  # its traces stay with it
    with pytest.raises(UsageError, match="Scaler.apply: the instance this method was bound "
                                         "to no longer exists"):
        apply(np.ones(3))  # a new trace needs the instance


def test_methods_of_unhashable_instances(backend):
    class Model:
        __hash__ = None

        def __init__(self):
            self.w = np.array([1.0, -1.0])

        @tg.function
        def __call__(self, x):
            return x * self.w

    m = Model()
    np.testing.assert_allclose(m(np.ones(2)), [1.0, -1.0])
    np.testing.assert_allclose(m(np.ones(2)), [1.0, -1.0])
    assert Model.__call__.__get__(m).tracing_count == 1


# -- recording on tapes ----------------------------------------------------------------------


class RecordingTape:
    """Stands in for a GradientTape: collects what the call path reports."""

    def __init__(self):
        self.accessed = []

    def variable_accessed(self, variable, tensor):
        self.accessed.append((variable, tensor))

    def record(self, op):
        pass


def test_eager_calls_are_reported_to_the_call_recorder(monkeypatch, backend):
    calls = []
    monkeypatch.setattr(function_module._call_recorder, "fn",
                        lambda concrete, inputs, results: calls.append((concrete, inputs, results)))
    v = tg.Variable([1.0, 2.0], name="v")
    f = tg.function(lambda x, y, s: x * y * v + s)
    tape = RecordingTape()
    monkeypatch.setattr(state, "tapes", [tape])
    x = tg.constant([3.0, 4.0])
    out = f(x, np.array([1.0, 0.5]), 2.0)
    assert isinstance(out, tg.Tensor)
    np.testing.assert_allclose(out.numpy(), [5.0, 6.0])
    (concrete, inputs, results), = calls
    assert len(inputs) == len(concrete.graph.all_inputs) == 4
    assert inputs[0] is x and all(isinstance(t, EagerTensor) for t in inputs)
    np.testing.assert_allclose(inputs[1].numpy(), [1.0, 0.5])
    assert [var for var, _ in tape.accessed] == [v]
    assert inputs[3] is tape.accessed[0][1]  # the snapshot the tape was told about
    assert results == [out]


def test_numpy_call_under_a_tape_with_captured_variables_returns_tensors(monkeypatch, backend):
    v = tg.Variable(2.0)
    f = tg.function(lambda x: x * v)
    assert type(f(np.ones(2))) is np.ndarray
    monkeypatch.setattr(state, "tapes", [RecordingTape()])
    assert isinstance(f(np.ones(2)), tg.Tensor)
    assert f.tracing_count == 1
