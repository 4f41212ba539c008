"""Variable updates inside tg.function: `assign` ops in program order, written back when the
call succeeds (in the Variable's own buffers), equal to eager execution step by step."""

import sys

import numpy as np
import pytest
from finite_diff import central_difference

import tracegrad as tg
import tracegrad.numpy as tnp
from tracegrad.errors import (
    DTypeError, ShapeError, TracegradIndexError, UnsupportedOpError,
)


def test_a_read_after_a_write_sees_it_and_a_read_before_does_not(backend):
    v = tg.Variable([1.0, 2.0, 3.0], name="v")

    @tg.function
    def f(x):
        before = v * 1.0
        v.assign_add(x)
        after = v * 1.0
        v.assign(after * 2.0)
        v.assign_sub(x)
        return before, after, v.value()

    before, after, last = f(np.array([1.0, 10.0, 100.0]))
    np.testing.assert_array_equal(before, [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(after, [2.0, 12.0, 103.0])
    np.testing.assert_array_equal(last, [3.0, 14.0, 106.0])
    np.testing.assert_array_equal(v.numpy(), [3.0, 14.0, 106.0])
    f(np.zeros(3))
    np.testing.assert_array_equal(v.numpy(), [6.0, 28.0, 212.0])
    assert f.tracing_count == 1


def test_assign_methods_return_the_variable_and_returning_it_gives_its_value(backend):
    v = tg.Variable(np.float32(2.0))
    f = tg.function(lambda x: v.assign_add(x).assign_sub(1.0))
    out = f(np.float32(3.0))
    assert out == np.float32(4.0) and out.dtype == np.float32
    assert v.numpy() == np.float32(4.0)


def test_the_graph_shows_the_effects_and_returns_the_final_values():
    w = tg.Variable([1.0, 2.0], name="w")
    n = tg.Variable(0, name="n", trainable=False)

    def f(x):
        w.assign_sub(x * 0.5)
        n.assign_add(1)
        w.assign(w * 2.0)
        return tnp.sum(x)

    graph = tg.trace(f)(tg.TensorSpec([2]))
    text = str(graph)
    assert text.count("assign %") == 3, text
    assert "{variable='w'}" in text and "{variable='n'}" in text
    assert [str(t.type) for t in graph.outputs] == ["f64[]", "f64[2]", "i64[]"]
    last_w = [op for op in graph.operations if op.name == "assign"][-1]
    assert graph.outputs[1] is last_w.outputs[0]  # w, then n: the order of first writes
    assert tg.FuncGraph.parse(text).pretty() == text
    assert str(tg.FuncGraph.from_json(graph.to_json())) == text
    # the chain of w's writes: each assign's first operand is the previous value
    assigns = [op for op in graph.operations if op.name == "assign"
               and op.attrs["variable"] == "w"]
    assert assigns[1].inputs[0].op is not None
    assert [c for c, _ in graph.captures] == [w, n]


def test_optimize_keeps_the_effects():
    v = tg.Variable([1.0, 2.0], name="v")

    def f(x):
        v.assign(x)
        v.assign(x * 3.0)  # the first write is dead, the last one is an output
        return x

    graph = tg.trace(f)(tg.TensorSpec([2]))
    assert str(tg.optimize(graph)).count(" = assign ") == 2  # an order chain: none is dropped
    assert "assign" not in tg.compiled_source(graph)  # the numba backend lowers it


def test_a_tf_style_training_step_matches_eager_execution_step_by_step(backend):
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((16, 3)), rng.standard_normal((16, 2))
    w0, b0 = rng.standard_normal((3, 2)), rng.standard_normal(2)

    def make():
        params = [tg.Variable(w0, name="w"), tg.Variable(b0, name="b")]
        slots = [tg.Variable(np.zeros_like(w0), trainable=False),
                 tg.Variable(np.zeros_like(b0), trainable=False)]
        count = tg.Variable(0, trainable=False)

        def step(x, y, lr):
            with tg.GradientTape() as tape:
                pred = tnp.tanh(x @ params[0] + params[1])
                loss = tnp.mean((pred - y) ** 2)
            grads = tape.gradient(loss, params)
            for p, m, g in zip(params, slots, grads):
                m.assign(0.9 * m + g)
                p.assign_sub(lr * m)
            count.assign_add(1)
            return loss

        return step, params, slots, count

    eager, e_params, e_slots, e_count = make()
    compiled, c_params, c_slots, c_count = make()
    compiled = tg.function(compiled)
    # the numpy backend runs the eager ops' own impls: equal bits; the numba kernel sums in
    # its own order: equal to rounding, over 100 steps
    tol = {"rtol": 0, "atol": 0} if backend == "numpy" else {"rtol": 1e-10, "atol": 1e-13}
    for i in range(100):
        want = eager(x, y, 0.05)
        got = compiled(x, y, 0.05)
        np.testing.assert_allclose(got, want.numpy(), err_msg=f"step {i}", **tol)
        for c, e in zip(c_params + c_slots + [c_count], e_params + e_slots + [e_count]):
            np.testing.assert_allclose(c.numpy(), e.numpy(), err_msg=f"step {i} {c.name}",
                                       **tol)
    assert c_count.numpy() == e_count.numpy() == 100
    assert compiled.tracing_count == 1


def test_gradients_flow_through_reads_after_a_write(backend):
    v = tg.Variable([0.5, -1.0, 2.0], name="v")

    @tg.function
    def f(x):
        v.assign(x * x)
        with tg.GradientTape() as tape:
            tape.watch(x)
            loss = tnp.sum(tnp.sin(v) * x)
        return tape.gradient(loss, [v, x])

    x = np.array([0.3, -0.7, 1.1])
    dv, dx = f(x)
    np.testing.assert_allclose(dv, np.cos(x * x) * x, rtol=1e-12)
    # the write is not recorded, as eagerly: x reaches the loss only as the factor
    np.testing.assert_allclose(dx, central_difference(lambda z: np.sin(x * x) * z, x),
                               rtol=1e-8)


def test_gradient_of_a_function_that_reads_a_variable_it_does_not_write(backend):
    w = tg.Variable([1.0, 2.0], name="w")
    f = tg.function(lambda x: tnp.sum(tnp.exp(w * x)))
    x = np.array([0.2, -0.4])
    np.testing.assert_allclose(tg.grad(f)(x),
                               central_difference(lambda z: np.exp(w.numpy() * z), x),
                               rtol=1e-8)


def test_a_call_that_raises_midway_leaves_every_variable_unchanged(backend):
    a = tg.Variable([1.0, 2.0], name="a")
    b = tg.Variable([3.0, 4.0], name="b")

    @tg.function
    def f(x, i):
        a.assign_add(x)
        picked = tnp.take(x, i)  # out of bounds at run time: raises after a's update
        b.assign(a * 2.0)
        return picked

    with pytest.raises(TracegradIndexError):
        f(np.ones(2), np.array([5]))
    np.testing.assert_array_equal(a.numpy(), [1.0, 2.0])
    np.testing.assert_array_equal(b.numpy(), [3.0, 4.0])
    np.testing.assert_array_equal(f(np.ones(2), np.array([1])), [1.0])
    np.testing.assert_array_equal(a.numpy(), [2.0, 3.0])
    np.testing.assert_array_equal(b.numpy(), [4.0, 6.0])


def test_a_trace_that_raises_leaves_every_variable_unchanged(backend):
    v = tg.Variable([1.0, 2.0])

    @tg.function
    def f(x):
        v.assign(x)
        raise KeyError("user error")

    with pytest.raises(KeyError):
        f(np.zeros(2))
    np.testing.assert_array_equal(v.numpy(), [1.0, 2.0])
    assert v * 1.0 is not None and (v * 2.0).numpy().tolist() == [2.0, 4.0]  # eager again


def test_shape_and_dtype_mismatches_name_the_users_line(backend):
    v = tg.Variable(np.zeros(3, np.float32), name="v32")
    line = sys._getframe().f_lineno + 1
    shape = tg.function(lambda x: v.assign(x).value())
    with pytest.raises(ShapeError, match=rf"v32.*test_function_variables.py:{line}"):
        shape(np.zeros(2, np.float32))
    line = sys._getframe().f_lineno + 1
    dtype = tg.function(lambda x: v.assign_add(x).value())
    with pytest.raises(DTypeError, match=rf"float64.*v32.*float32.*test_function_variables.py:{line}"):  # noqa: E501
        dtype(np.zeros(3))
    tg.function(lambda x: v.assign_add(x * 2.0).value())(np.ones(3, np.float32))  # weak 2.0
    np.testing.assert_array_equal(v.numpy(), [2.0, 2.0, 2.0])
    assert v.dtype == np.float32


def test_eager_assignment_follows_the_same_dtype_rule():
    v = tg.Variable(np.zeros(2, np.float32))
    v.assign([0.5, 1.5])  # Python numbers are weak: they take the Variable's dtype
    v.assign_add(np.ones(2, np.int64) > 0)  # bool promotes to anything
    np.testing.assert_array_equal(v.numpy(), [1.5, 2.5])
    with pytest.raises(DTypeError):
        v.assign(np.ones(2))  # a float64 array
    with pytest.raises(DTypeError):
        tg.Variable(3).assign_add(0.5)


def test_assignments_inside_branches_loops_and_transforms_are_refused(backend):
    v = tg.Variable(1.0)
    in_cond = tg.function(lambda x: tg.cond(x > 0, lambda: v.assign(x) * 1.0, lambda: x))
    with pytest.raises(UnsupportedOpError, match="cond branch, a loop body or a transform"):
        in_cond(2.0)
    in_loop = tg.function(lambda x: tg.fori_loop(0, 3, lambda i, c: v.assign(c) * 2.0, x))
    with pytest.raises(UnsupportedOpError):
        in_loop(2.0)
    with pytest.raises(UnsupportedOpError):
        tg.grad(lambda x: v.assign(x) * x)(2.0)
    assert v.numpy() == 1.0


def test_reads_inside_branches_and_transforms_see_earlier_writes(backend):
    v = tg.Variable([1.0, 2.0])

    @tg.function
    def f(x):
        v.assign(x)
        branch = tg.cond(tnp.sum(x) > 0, lambda: v * 2.0, lambda: v * 3.0)
        slope = tg.grad(lambda z: tnp.sum(v * z * z))(x)
        return branch, slope

    branch, slope = f(np.array([3.0, 4.0]))
    np.testing.assert_array_equal(branch, [6.0, 8.0])
    np.testing.assert_array_equal(slope, 2.0 * np.array([3.0, 4.0]) ** 2)


def test_a_nested_function_that_assigns_is_one_call_then_the_assignment(backend):
    v = tg.Variable([1.0, 2.0], name="v")

    @tg.function
    def inner(x):
        v.assign_add(x)
        return tnp.sum(v * 1.0)

    @tg.function
    def outer(x):
        first = inner(x)
        second = inner(x)
        return first, second, v * 1.0

    first, second, last = outer(np.ones(2))
    assert (first, second) == (5.0, 7.0)
    np.testing.assert_array_equal(last, [3.0, 4.0])
    np.testing.assert_array_equal(v.numpy(), [3.0, 4.0])
    assert inner.tracing_count == 1
    text = str(outer.get_concrete_function(np.ones(2)).graph)
    assert text.count("= call ") == 2 and text.count("assign %") == 3  # 2 in outer, 1 in inner
    inner(np.ones(2))  # called alone, it writes too
    np.testing.assert_array_equal(v.numpy(), [4.0, 5.0])


def test_eager_calls_under_a_tape_record_and_write(backend):
    w = tg.Variable([1.0, 2.0], name="w")
    seen = tg.Variable([0.0, 0.0], trainable=False)

    @tg.function
    def loss(x):
        seen.assign(x)
        return tnp.sum(w * w * x)

    x = np.array([3.0, 5.0])
    with tg.GradientTape() as tape:
        value = loss(x)
    np.testing.assert_allclose(tape.gradient(value, w), 2 * w.numpy() * x)
    np.testing.assert_array_equal(seen.numpy(), x)


def test_the_compiled_step_writes_the_variables_own_buffers(backend):
    w = tg.Variable(np.zeros((256, 256)))
    step = tg.function(lambda g: [w.assign_sub(0.5 * g)] and None)
    g = np.ones((256, 256))
    buffers = set()
    for _ in range(6):
        step(g)
        buffers.add(w._value.ctypes.data)
    np.testing.assert_array_equal(w.numpy(), np.full((256, 256), -3.0))
    if backend == "numba":  # two buffers, swapped: no allocation, no copy per step
        assert len(buffers) == 2
    snapshot = w.value()  # a snapshot keeps its value: its buffer is not reused
    kept = snapshot.numpy().copy()
    step(g)
    step(g)
    np.testing.assert_array_equal(snapshot.numpy(), kept)
    np.testing.assert_array_equal(w.numpy(), np.full((256, 256), -4.0))


def test_assigning_an_argument_copies_it(backend):
    v = tg.Variable([0.0, 0.0])
    f = tg.function(lambda x: [v.assign(x)] and None)
    x = np.array([1.0, 2.0])
    f(x)
    x[0] = 99.0
    np.testing.assert_array_equal(v.numpy(), [1.0, 2.0])


def test_the_variables_doc_example_runs():
    import pathlib
    import re

    doc = pathlib.Path(__file__).resolve().parents[1] / "docs" / "variables.md"
    (block,) = re.findall(r"^```python\n(.*?)^```", doc.read_text(), re.DOTALL | re.MULTILINE)
    namespace = {}
    exec(compile(block, str(doc), "exec"), namespace)  # noqa: S102 (the doc's example)
    w, m = namespace["w"], namespace["m"]
    assert namespace["train_step"].tracing_count == 1
    x, y, want_w, want_m = np.ones((4, 3)), np.ones(4), np.zeros(3), np.zeros(3)
    for _ in range(100):  # the same steps in NumPy
        want_m = 0.9 * want_m + 2.0 * x.T @ (x @ want_w - y) / 4
        want_w = want_w - 0.1 * want_m
    np.testing.assert_allclose(w.numpy(), want_w, rtol=1e-12)
    np.testing.assert_allclose(m.numpy(), want_m, rtol=1e-9, atol=1e-15)
    graph = namespace["train_step"].get_concrete_function(np.ones((4, 3)), np.ones(4), 0.1).graph
    text = str(graph)
    assert "assign %m, " in text and "{variable='w'}" in text
