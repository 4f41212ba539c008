"""Variables in compiled functions: captured, read fresh at every call, never retraced."""

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tracegrad.errors import ShapeError, UnsupportedOpError


def test_captured_variable_reads_the_current_value_at_every_call(backend):
    v = tg.Variable([1.0, 2.0, 3.0])
    f = tg.function(lambda x: x * v)
    x = np.ones(3)
    np.testing.assert_allclose(f(x), [1.0, 2.0, 3.0])
    v.assign([4.0, 5.0, 6.0])
    np.testing.assert_allclose(f(x), [4.0, 5.0, 6.0])
    v.assign_add([1.0, 1.0, 1.0])
    np.testing.assert_allclose(f(x), [5.0, 6.0, 7.0])
    v.assign_sub([5.0, 6.0, 7.0])
    np.testing.assert_allclose(f(x), [0.0, 0.0, 0.0])
    assert f.tracing_count == 1


def test_captured_variable_is_a_capture_not_a_constant():
    v = tg.Variable(2.0, name="scale")
    graph = tg.trace(lambda x: x * v)(tg.TensorSpec([2]))
    assert [ext for ext, _ in graph.captures] == [v]
    assert "constant" not in [op.name for op in graph.operations]
    assert graph.captures[0][1].name == "scale"


def test_variable_read_twice_is_captured_once(backend):
    v = tg.Variable(3.0)
    f = tg.function(lambda x: x * v + v)
    np.testing.assert_allclose(f(np.ones(2)), [6.0, 6.0])
    assert len(f.get_concrete_function(np.ones(2)).graph.captures) == 1


def test_several_variables_and_an_argument(backend):
    w = tg.Variable([[1.0, 0.0], [0.0, 2.0]])
    b = tg.Variable([0.5, -0.5])
    f = tg.function(lambda x: tnp.sum(w * x, axis=1) + b)
    x = np.array([3.0, 4.0])
    np.testing.assert_allclose(f(x), np.sum(w.numpy() * x, axis=1) + b.numpy())
    w.assign(np.eye(2) * 3)
    b.assign([1.0, 1.0])
    np.testing.assert_allclose(f(x), [10.0, 13.0])
    assert f.tracing_count == 1


def test_variable_in_a_method_closure(backend):
    class Dense:
        def __init__(self):
            self.w = tg.Variable(np.array([2.0, 3.0]))

        @tg.function
        def __call__(self, x):
            return x * self.w

    layer = Dense()
    np.testing.assert_allclose(layer(np.ones(2)), [2.0, 3.0])
    layer.w.assign([0.0, 1.0])
    np.testing.assert_allclose(layer(np.ones(2)), [0.0, 1.0])


def test_variable_dtype_decides_the_graph_type():
    v = tg.Variable(np.arange(3, dtype=np.float32))
    f = tg.function(lambda x: x + v)
    assert f(np.ones(3, np.float32)).dtype == np.float32
    assert f.get_concrete_function(np.ones(3, np.float32)).graph.captures[0][1].type.dtype \
        == np.float32


def test_assign_inside_a_loop_body_is_refused():
    v = tg.Variable(1.0)

    @tg.function
    def f(x):
        return tg.while_loop(lambda c: c < 3.0, lambda c: (v.assign(c) * 0.0 + c + 1.0,), (x,))

    with pytest.raises(UnsupportedOpError, match="assign"):
        f(np.float64(2.0))
    assert v.numpy() == 1.0  # assignments in a tg.function body: tests/test_function_variables.py


def test_assigning_another_shape_is_refused():
    v = tg.Variable([1.0, 2.0])
    with pytest.raises(ShapeError):
        v.assign([1.0, 2.0, 3.0])


def test_variable_argument_reads_fresh_values(backend):
    v = tg.Variable([1.0, 2.0])
    f = tg.function(lambda a: tnp.sum(a * a))
    assert f(v).numpy() == 5.0
    v.assign([3.0, 0.0])
    assert f(v).numpy() == 9.0
    assert f.tracing_count == 1


@pytest.mark.parametrize("dtype", ["float64", "float32", "int64"])
def test_rank0_assign_add_and_sub_keep_an_array_of_the_variable_dtype(dtype, backend):
    v = tg.Variable(np.array(1, dtype=dtype))
    v.assign_add(2).assign_sub(1)
    assert np.asarray(v).shape == () and np.asarray(v).dtype == dtype
    assert np.asarray(v) == 2
    assert v.value().numpy() == 2 and v.value().dtype == dtype
    np.testing.assert_array_equal(tg.function(lambda x: x * v)(np.ones(2, dtype)), [2, 2])
