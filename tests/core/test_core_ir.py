"""The IR while tracing: captures, constants, leaked tracers, Python control flow on tracers."""

import inspect

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tracegrad import ops
from tracegrad.core.ir import FuncGraph, GraphTensor, Literal
from tracegrad.core.types import TensorType
from tracegrad.errors import TracegradError, TracerBoolError
from tracegrad.transforms.evaluate import evaluate

SPEC = tg.TensorSpec([3])


def here() -> str:
    """`file:line` of the caller's line."""
    frame = inspect.currentframe().f_back
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"


# -- captures and constants ------------------------------------------------------------------


def test_variable_read_in_a_trace_is_one_capture_fed_at_every_call():
    v = tg.Variable([1.0, 2.0, 3.0], name="v")

    def f(x):
        return ops.add(ops.mul(x, v.value()), v.value())

    g = tg.trace(f)(SPEC)
    (external, placeholder), = g.captures
    assert external is v and placeholder.name == "v" and placeholder.type == TensorType(
        (3,), np.dtype("float64"))
    assert placeholder not in g.inputs and g.all_inputs == g.inputs + [placeholder]
    x = np.array([1.0, 1.0, 2.0])
    np.testing.assert_array_equal(evaluate(g, x, v.numpy())[0], x * v.numpy() + v.numpy())
    compiled = tg.function(f, backend="numpy")
    np.testing.assert_array_equal(compiled(x), [2.0, 4.0, 9.0])
    v.assign([0.0, 1.0, -1.0])
    np.testing.assert_array_equal(compiled(x), [0.0, 2.0, -3.0])
    assert compiled.tracing_count == 1


def test_outer_tensor_used_by_an_inner_trace_is_captured():
    inner_graphs = []

    def outer(x):
        y = ops.sin(x)
        inner_graphs.append(tg.trace(lambda z: ops.mul(z, y))(SPEC))
        return y

    g = tg.trace(outer)(SPEC)
    inner = inner_graphs[0]
    assert inner.outer is g
    (external, placeholder), = inner.captures
    assert external is g.operations[0].outputs[0]
    assert inner.operations[0].inputs[1] is placeholder


def test_capture_is_created_once_per_value():
    g = FuncGraph("g")
    v = object()
    a = g.capture(v, TensorType((), np.dtype("float64")))
    assert g.capture(v, TensorType((), np.dtype("float64"))) is a and len(g.captures) == 1


def test_eager_tensors_and_arrays_become_constants_and_python_scalars_weak_constants():
    c = tg.constant([1.0, 2.0, 3.0])

    def f(x):
        return ops.add(ops.add(x, c), np.ones(3)), ops.mul(tnp.sum(x), 2.0)

    g = tg.trace(f)(SPEC)
    consts = [op for op in g.operations if op.primitive.name == "constant"]
    assert not g.captures and len(consts) == 3
    assert isinstance(consts[0].attrs["value"], Literal)
    assert consts[2].attrs == {"value": Literal(np.array(2.0)), "weak": True}
    assert consts[2].outputs[0].type.weak


def test_small_constants_are_shared():
    g = FuncGraph("g")
    with g.as_default():
        assert g.constant(np.array(1.0)) is g.constant(np.array(1.0))
        assert g.constant(np.array(1.0)) is not g.constant(np.array(1.0), weak=True)
        big = np.arange(100.0)
        assert g.constant(big) is not g.constant(big)


def test_constant_values_are_frozen_copies():
    a = np.arange(3.0)
    g = FuncGraph("g")
    with g.as_default():
        t = g.constant(a)
    a[0] = 99.0
    value = t.op.attrs["value"].value
    assert value[0] == 0.0 and not value.flags.writeable


def test_ops_record_the_users_line():
    def f(x):
        return ops.sin(x)

    g = tg.trace(f)(SPEC)
    line = f.__code__.co_firstlineno + 1
    assert g.operations[0].source == f"{__file__}:{line}"


def test_graph_context_nests_and_restores():
    from tracegrad.core.state import state

    a, b = FuncGraph("a"), FuncGraph("b")
    assert state.graph is None
    with a.as_default():
        with b.as_default():
            assert state.graph is b
        assert state.graph is a
    assert state.graph is None


# -- leaked tracers --------------------------------------------------------------------------


def _leak():
    leaked = []

    def f(x):
        y = ops.sin(x)
        leaked.append(y)
        return y

    tg.trace(f)(SPEC)
    return leaked[0], f"{__file__}:{f.__code__.co_firstlineno + 1}"


def test_leaked_tracer_used_eagerly_names_where_it_was_made():
    leaked, made = _leak()
    with pytest.raises(TracegradError) as info:
        ops.cos(leaked)
    msg = str(info.value)
    assert "leaked tracer" in msg and f"created at {made}" in msg and "return it" in msg


def test_leaked_tracer_used_in_another_trace():
    leaked, made = _leak()
    with pytest.raises(TracegradError, match=r"used at .* outside the function that traced it"
                                             r" \(a leaked tracer\)") as info:
        tg.trace(lambda x: ops.add(x, leaked))(SPEC)
    assert f"created at {made}" in str(info.value)


def test_leaked_tracer_cannot_be_evaluated():
    leaked, _ = _leak()
    with pytest.raises(TracegradError, match=r"\.numpy\(\) of a traced Tensor"):
        leaked.numpy()
    with pytest.raises(TracegradError, match="cannot convert a traced Tensor"):
        np.asarray(leaked)


# -- Python control flow on traced values ----------------------------------------------------


def _trace_raising(body):
    errors = []

    def f(x):
        try:
            body(x)
        except TracerBoolError as e:
            errors.append(e)
            raise
        return x

    with pytest.raises(TracerBoolError):
        tg.trace(f)(SPEC)
    return str(errors[0])


@pytest.mark.parametrize("what,body", [
    ("bool()", lambda x: bool(tnp.sum(x))),
    ("int()", lambda x: int(tnp.sum(x))),
    ("float()", lambda x: float(tnp.sum(x))),
    ("using as an index", lambda x: [1, 2][ops.convert_element_type(
        tnp.sum(x), new_dtype=np.dtype("int64"))]),
])
def test_concretizing_a_tracer_raises_tracer_bool_error(what, body):
    msg = _trace_raising(body)
    assert msg.startswith(what)
    assert f"{__file__}:" in msg
    assert "tg.cond" in msg and "static_argnums" in msg


def test_if_on_a_tracer_names_the_line_of_the_if():
    lines = []

    def f(x):
        lines.append(here()); s = tnp.sum(x)
        if s:
            return x
        return -x

    with pytest.raises(TracerBoolError) as info:
        tg.trace(f)(SPEC)
    if_line = lines[0].rsplit(":", 1)[0] + ":" + str(int(lines[0].rsplit(":", 1)[1]) + 1)
    msg = str(info.value)
    assert f"bool() of a traced Tensor (f64[]) at {if_line}:" in msg
    assert "tg.cond / tg.while_loop / tnp.where" in msg and "static_argnums" in msg


def test_while_on_a_tracer_raises():
    def f(x):
        while tnp.sum(x):
            x = x * 0.5
        return x

    with pytest.raises(TracerBoolError, match="bool"):
        tg.trace(f)(SPEC)


def test_tracer_bool_error_is_a_type_error():
    assert issubclass(TracerBoolError, TypeError) and issubclass(TracerBoolError, TracegradError)


def test_graph_tensor_properties_and_repr():
    g = FuncGraph("g")
    x = g.add_input(TensorType((2, None), np.dtype("float32")), "x")
    assert isinstance(x, GraphTensor) and isinstance(x, tg.Tensor)
    assert x.shape == (2, None) and x.ndim == 2 and x.dtype == np.float32 and x.size is None
    assert x.graph is g and x.op is None and len(x) == 2
    assert repr(x) == "<tg.Tensor f32[2,?] traced: input>"
    assert repr(g) == "<FuncGraph @g: 1 inputs, 0 ops, 0 outputs>"
