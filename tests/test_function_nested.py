"""Nested tg.functions: a function called inside another's trace is one `call` op of its own
trace (one trace per signature, however many call sites and enclosing traces), with values
and gradients on both backends, and graphs holding calls printed, dumped and serialized."""

import json
import sys

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tracegrad.cli import main
from tracegrad.transforms.evaluate import evaluate
from tests.finite_diff import central_difference

BACKENDS = ("numpy", "numba")
X = np.array([0.3, -1.2, 2.0])
W = np.array([1.5, 0.5, -0.7])





def calls_of(graph):
    return [op for op in graph.operations if op.name == "call"]


# -- one trace per signature -----------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_one_trace_per_signature_across_call_sites_and_outer_retraces(backend):
    traces = []

    @tg.function(backend=backend)
    def inner(x):
        traces.append(x.shape)  # a Python side effect: runs once per trace
        return tnp.sin(x) * 2.0

    @tg.function(backend=backend, static_argnums=1)
    def outer(x, n):
        total = x
        for i in range(n):  # n call sites of the same signature
            total = total + inner(x * (i + 1.0))
        return tnp.sum(total)

    def expected(x, n):
        return np.sum(x + sum(np.sin(x * (i + 1.0)) * 2.0 for i in range(n)))

    np.testing.assert_allclose(outer(X, 10), expected(X, 10), rtol=1e-13)
    assert traces == [(3,)] and outer.tracing_count == 1
    graph = outer.get_concrete_function(X, 10).graph
    calls = calls_of(graph)
    assert len(calls) == 10 and "sin" not in [op.name for op in graph.operations]
    assert all(op.attrs["callee"] is calls[0].attrs["callee"] for op in calls)
    # outer retraced (a new static value, a new dtype elsewhere): inner is not
    np.testing.assert_allclose(outer(X, 4), expected(X, 4), rtol=1e-13)
    np.testing.assert_allclose(outer(X.astype(np.float32), 2), expected(X, 2), rtol=1e-5)
    assert outer.tracing_count == 3 and traces == [(3,), (3,)]  # f32 is a new signature
    # another enclosing function, and a call from outside any trace, share the trace too
    other = tg.function(lambda x: inner(x) * inner(x), backend=backend)
    np.testing.assert_allclose(other(X), (np.sin(X) * 2.0) ** 2, rtol=1e-13)
    np.testing.assert_allclose(inner(X), np.sin(X) * 2.0, rtol=1e-13)
    assert traces == [(3,), (3,)] and inner.tracing_count == 2
    # a new shape is a new signature: one more trace, shared by every call site
    np.testing.assert_allclose(outer(np.ones(5), 10), expected(np.ones(5), 10), rtol=1e-13)
    assert traces == [(3,), (3,), (5,)]


def test_python_scalars_and_structures_are_part_of_the_signature(numpy_backend):
    traces = []

    @tg.function
    def inner(pair, scale, mode):
        traces.append(mode)
        a, b = pair
        return (a * scale, b - scale) if mode == "split" else a * b * scale

    @tg.function
    def outer(x, s):
        first = inner((x, x), s, "split")  # s: a weakly typed tensor of the outer trace
        second = inner((x, x), 2.0, "split")  # a Python float: the same signature
        return first[0] + first[1] + second[0] + inner((x, x), s, "product")

    expected = X * 3.0 + X - 3.0 + X * 2.0 + X * X * 3.0
    np.testing.assert_allclose(outer(X, 3.0), expected, rtol=1e-13)
    assert traces == ["split", "product"]
    assert inner.get_concrete_function((X, X), 2.0, "split").graph.inputs[2].type.weak


def test_a_function_reading_a_tensor_of_the_enclosing_trace_is_inlined(backend):
    @tg.function
    def outer(x):
        y = tnp.exp(x)
        add_y = tg.function(lambda z: z + y)  # its trace depends on this trace
        return add_y(x) + add_y(2.0 * x)

    np.testing.assert_allclose(outer(X), 3 * X + 2 * np.exp(X), rtol=1e-13)
    names = [op.name for op in outer.get_concrete_function(X).graph.operations]
    assert "call" not in names and names.count("add") >= 3


def test_a_trace_with_unknown_dims_is_specialized_to_the_known_dims_of_a_call(backend):
    inner = tg.function(lambda x: x * 2, input_signature=[tg.TensorSpec([None], "float32")])
    outer = tg.function(lambda x: inner(x) + tnp.sum(inner(x[:2])))
    x = np.arange(3, dtype=np.float32)
    for _ in range(2):
        out = outer(x)
        assert out.dtype == np.float32
        np.testing.assert_array_equal(out, x * 2 + np.sum(x[:2] * 2))
    # the signature's trace (f32[?]), then one per known size a call site has
    assert inner.tracing_count == 3
    for op in calls_of(outer.get_concrete_function(x).graph):
        assert [t.type for t in op.inputs] == [t.type for t in op.attrs["callee"].graph.inputs]
    with pytest.raises(tg.errors.DTypeError, match="input_signature"):
        tg.function(lambda x: inner(x))(np.ones(3))  # still checked against the signature


# -- values and gradients --------------------------------------------------------------------


def _functions(backend):
    """inner (reads a Variable) <- middle (calls inner twice) <- outer (calls both)."""
    v = tg.Variable(np.array([0.5, -1.0, 2.0]), name="v")

    @tg.function(backend=backend)
    def inner(x, w):
        return tnp.tanh(x * w) + tnp.sin(x) * v

    @tg.function(backend=backend)
    def middle(x, w):
        return inner(x, w) * inner(x * 0.5, w + 1.0)

    @tg.function(backend=backend)
    def outer(x, w):
        return tnp.sum(middle(x, w) + inner(w, x) ** 2)

    def reference(x, w, vv):
        def inner_np(a, b):
            return np.tanh(a * b) + np.sin(a) * vv

        return np.sum(inner_np(x, w) * inner_np(x * 0.5, w + 1.0) + inner_np(w, x) ** 2)

    return v, inner, outer, reference


@pytest.mark.parametrize("backend", BACKENDS)
def test_values_and_gradients_through_nested_functions(backend):
    v, inner, outer, reference = _functions(backend)
    vv = v.numpy()
    np.testing.assert_allclose(outer(X, W), reference(X, W, vv), rtol=1e-13)
    dx = central_difference(lambda x: reference(x, W, vv), X)
    dw = central_difference(lambda w: reference(X, w, vv), W)
    dv = central_difference(lambda u: reference(X, W, u), vv)
    assert 'call' in [op.name for op in outer.get_concrete_function(X, W).graph.operations]

    # tg.grad of the outer function, and of a function calling it
    gx, gw = tg.grad(outer, argnums=(0, 1))(X, W)
    np.testing.assert_allclose(gx, dx, rtol=1e-7, atol=1e-8)
    np.testing.assert_allclose(gw, dw, rtol=1e-7, atol=1e-8)
    np.testing.assert_allclose(tg.grad(lambda x: outer(x, W) * 2.0)(X), 2 * dx, rtol=1e-7,
                               atol=1e-8)

    # a GradientTape outside: the eager call is one op, differentiated through the calls
    xt, wt = tg.constant(X), tg.constant(W)
    with tg.GradientTape() as tape:
        tape.watch([xt, wt])
        y = outer(xt, wt)
    gx, gw, gv = tape.gradient(y, [xt, wt, v])
    np.testing.assert_allclose(gx.numpy(), dx, rtol=1e-7, atol=1e-8)
    np.testing.assert_allclose(gw.numpy(), dw, rtol=1e-7, atol=1e-8)
    np.testing.assert_allclose(gv.numpy(), dv, rtol=1e-7, atol=1e-8)

    # a GradientTape inside a tg.function, over the nested calls
    @tg.function(backend=backend)
    def taped(x, w):
        with tg.GradientTape() as tape:
            tape.watch(x)
            y = outer(x, w)
        return tape.gradient(y, [x, v])

    gx, gv = taped(X, W)
    np.testing.assert_allclose(gx, dx, rtol=1e-7, atol=1e-8)
    np.testing.assert_allclose(gv, dv, rtol=1e-7, atol=1e-8)
    assert "call" in [op.name for op in taped.get_concrete_function(X, W).graph.operations]

    # second order: the Hessian against differences of the gradient
    hess = tg.hessian(lambda x: outer(x, W))(X)
    fd = np.stack([central_difference(lambda x: tg.grad(lambda u: outer(u, W))(x)[i], X)
                   for i in range(3)])
    np.testing.assert_allclose(hess, fd, rtol=1e-6, atol=1e-7)
    assert inner.tracing_count == 1  # inner(x, w) and inner(w, x): one signature


@pytest.mark.parametrize("backend", BACKENDS)
def test_nested_functions_in_branches_loops_and_vmap(backend):
    inner = tg.function(lambda x: tnp.sin(x) * 2.0, backend=backend)

    @tg.function(backend=backend)
    def outer(x):
        y = tg.cond(tnp.sum(x) > 0, lambda v: inner(v), lambda v: -v, (x,))
        return tnp.sum(tg.fori_loop(0, 3, lambda i, v: inner(v) * 0.5, y))

    def reference(x):
        y = np.sin(x) * 2.0 if np.sum(x) > 0 else -x
        for _ in range(3):
            y = np.sin(y)
        return np.sum(y)

    np.testing.assert_allclose(outer(X), reference(X), rtol=1e-13)
    np.testing.assert_allclose(tg.grad(outer)(X), central_difference(reference, X),
                               rtol=1e-7, atol=1e-8)
    batch = np.stack([X, -X, X * 0.5])
    np.testing.assert_allclose(tg.vmap(lambda x: inner(x) + 1.0)(batch),
                               np.sin(batch) * 2.0 + 1.0, rtol=1e-13)
    np.testing.assert_allclose(tg.jacobian(inner)(X), np.diag(2.0 * np.cos(X)), rtol=1e-13)
    assert inner.tracing_count == 1


# -- the written forms -----------------------------------------------------------------------


def test_json_round_trip_of_a_graph_with_calls():
    _, inner, outer, reference = _functions("numpy")
    graph = outer.get_concrete_function(X, W).graph
    text = graph.to_json()
    doc = json.loads(text)
    assert doc["version"] == 2
    assert sorted(f["name"] for f in doc["functions"]) == ["inner", "middle"]  # each once
    attrs = [op["attrs"] for op in doc["graph"]["operations"] if op["primitive"] == "call"]
    assert {"callee": {"function": "middle"}} in attrs
    assert {"callee": {"function": "inner"}} in attrs
    loaded = tg.FuncGraph.from_json(text)
    assert str(loaded) == str(graph)
    assert loaded.to_json() == text
    (middle_call,) = [op for op in loaded.operations if op.name == "call"
                      and op.attrs["callee"].graph.name == "middle"]
    (inner_call,) = [op for op in middle_call.attrs["callee"].graph.operations
                     if op.name == "call"][:1]
    # the callee graph is read once, and shared by every call that names it
    outer_inner = [op for op in loaded.operations if op.name == "call"
                   and op.attrs["callee"].graph.name == "inner"]
    assert outer_inner[0].attrs["callee"] is inner_call.attrs["callee"]
    v = np.array([0.5, -1.0, 2.0])  # the Variable, a capture fed explicitly
    (value,) = evaluate(loaded, X, W, v)
    np.testing.assert_allclose(value, reference(X, W, v), rtol=1e-13)
    # the loaded graph differentiates and compiles like the traced one
    from tracegrad.transforms.custom import vjp_graph

    backward, wrt, _ = vjp_graph(loaded)
    assert wrt == [0, 1, 2]
    gx, gw, gv = evaluate(backward, X, W, v, np.ones(()))
    np.testing.assert_allclose(gx, central_difference(lambda x: reference(x, W, v), X),
                               rtol=1e-7, atol=1e-8)
    np.testing.assert_allclose(gv, central_difference(lambda u: reference(X, W, u), v),
                               rtol=1e-7, atol=1e-8)
    from tracegrad.function import compile_graph

    (numba_value,) = compile_graph(loaded, "numba")([X, W, v])
    np.testing.assert_allclose(numba_value, reference(X, W, v), rtol=1e-13)


def test_text_round_trip_prints_each_callee_once_after_its_callers():
    _, _, outer, _ = _functions("numpy")
    graph = outer.get_concrete_function(X, W).graph
    text = str(graph)
    assert text.count("func @inner(") == 1 and text.count("func @middle(") == 1
    assert text.index("func @outer(") < text.index("func @middle(") < text.index("func @inner(")
    assert "callee=@middle" in text and "callee=@inner" in text
    assert str(tg.FuncGraph.parse(text)) == text


def test_callees_of_the_same_name_get_distinct_names():
    first = tg.function(lambda x: x + 1.0)
    second = tg.function(lambda x: x * 2.0)  # also named <lambda>
    graph = tg.trace(lambda x: first(x) + second(x) + first(x[:2]).sum())(tg.TensorSpec([3]))
    text = str(graph)
    assert "callee=@<lambda>_1" in text and "callee=@<lambda>_2" in text
    assert "callee=@<lambda>_3" in text  # first, traced for f64[2]
    assert str(tg.FuncGraph.parse(text)) == text
    loaded = tg.FuncGraph.from_json(graph.to_json())
    (value,) = evaluate(loaded, X)
    np.testing.assert_allclose(value, X + 1.0 + X * 2.0 + np.sum(X[:2] + 1.0), rtol=1e-13)


def test_dump_shows_the_call_and_the_callee(tmp_path, monkeypatch, capsys):
    (tmp_path / "nested_model.py").write_text(
        "import tracegrad as tg\n"
        "import tracegrad.numpy as tnp\n\n\n"
        "@tg.function\n"
        "def inner(x):\n"
        "    return tnp.sin(x) * 2.0\n\n\n"
        "def loss(x):\n"
        "    return tnp.sum(inner(x) + inner(x * 0.5))\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    try:
        assert main(["dump", "nested_model.py:loss", "--arg", "f64[3]"]) == 0
        out = capsys.readouterr().out
        assert out.count("= call %") == 2 and out.count("{callee=@inner}") == 2
        assert out.count("func @inner(%x: f64[3]) -> (f64[3]) {") == 1
        assert "sin %x" in out.split("func @inner")[1]
        assert main(["dump", "nested_model.py:loss", "--arg", "f64[3]", "--transform",
                     "grad"]) == 0
        grad_text = capsys.readouterr().out
        assert "{callee=@inner_vjp}" in grad_text and "func @inner_vjp(" in grad_text
        assert main(["dump", "nested_model.py:loss", "--arg", "f64[3]", "--format",
                     "json"]) == 0
        loaded = tg.FuncGraph.from_json(capsys.readouterr().out)
        (value,) = evaluate(loaded, X)
        np.testing.assert_allclose(value, np.sum(np.sin(X) * 2 + np.sin(X * 0.5) * 2),
                                   rtol=1e-13)
        assert main(["dump", "nested_model.py:loss", "--arg", "f64[3]", "--stage",
                     "optimized"]) == 0
        assert "call" not in capsys.readouterr().out  # optimized: the callee inlined
    finally:
        sys.modules.pop("nested_model", None)
