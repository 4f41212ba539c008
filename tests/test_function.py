"""tg.function: the trace cache (what retraces and what does not) and input signatures."""

import warnings

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tracegrad.errors import DTypeError, RetracingWarning, ShapeError


def counted(fn=None, **options):
    """`tg.function(fn, **options)`; also usable as a decorator factory."""
    if fn is None:
        return lambda f: tg.function(f, **options)
    return tg.function(fn, **options)


# -- same signature, new signature -----------------------------------------------------------


def test_same_signature_traces_once(backend):
    f = tg.function(lambda x, y: tnp.sin(x) * y + x)
    x, y = np.linspace(0, 1, 4), np.arange(4.0)
    for _ in range(3):
        np.testing.assert_allclose(f(x, y), np.sin(x) * y + x)
    assert f.tracing_count == 1
    np.testing.assert_allclose(f(x + 1, y * 2), np.sin(x + 1) * y * 2 + x + 1)
    assert f.tracing_count == 1


def test_new_shape_or_dtype_retraces(backend):
    f = tg.function(lambda x: x * 2)
    f(np.ones(3))
    f(np.ones(4))
    assert f.tracing_count == 2
    out = f(np.ones(4, np.float32))
    assert out.dtype == np.float32 and f.tracing_count == 3
    f(np.ones((2, 2)))
    assert f.tracing_count == 4
    f(np.ones(3))
    assert f.tracing_count == 4


def test_python_scalars_are_weak_and_do_not_retrace_on_a_new_value(backend):
    f = tg.function(lambda x, s: x * s)
    x = np.arange(3, dtype=np.float32)
    out = f(x, 2.5)
    assert out.dtype == np.float32  # weak: the float32 array decides
    np.testing.assert_allclose(f(x, -1.5), x * -1.5)
    assert f.tracing_count == 1
    graph = f.get_concrete_function(x, 1.0).graph
    assert str(graph.inputs[1].type) == "~f64[]"


def test_python_int_and_float_scalars_trace_separately(backend):
    f = tg.function(lambda s: s * 3)
    a, b = f(2), f(2.0)
    assert f.tracing_count == 2
    assert a == 6 and a.dtype == np.int64
    assert b == 6.0 and b.dtype == np.float64
    assert f(True).dtype == np.int64 and f.tracing_count == 3  # bool * 3 -> int, as NumPy


def test_eager_tensor_and_ndarray_share_a_trace(backend):
    f = tg.function(lambda x: x + 1)
    f(np.ones(3))
    f(tg.constant(np.ones(3)))
    assert f.tracing_count == 1


# -- static arguments ------------------------------------------------------------------------


def test_static_argnums_are_part_of_the_key(backend):
    @counted(static_argnums=1)
    def f(x, n):
        for _ in range(n):
            x = x * 2
        return x

    x = np.ones(3)
    np.testing.assert_allclose(f(x, 3), 8 * x)
    np.testing.assert_allclose(f(x, 3), 8 * x)
    assert f.tracing_count == 1
    np.testing.assert_allclose(f(x, 1), 2 * x)
    assert f.tracing_count == 2
    np.testing.assert_allclose(f(x, n=3), 8 * x)  # by keyword: the same trace
    assert f.tracing_count == 2


def test_negative_static_argnums_and_names_of_positional_params(backend):
    def f(x, scale, power):
        return x * scale if power == 1 else x * x * scale

    by_neg = tg.function(f, static_argnums=-1)
    by_name = tg.function(f, static_argnames="power")
    x = np.arange(3.0)
    for g in (by_neg, by_name):
        np.testing.assert_allclose(g(x, 2.0, 1), 2 * x)
        np.testing.assert_allclose(g(x, 2.0, power=2), 2 * x * x)
        np.testing.assert_allclose(g(x, scale=3.0, power=2), 3 * x * x)
        assert g.tracing_count == 2


def test_static_argnames_for_keyword_only_params(backend):
    @counted(static_argnames=("mode",))
    def f(x, *, mode="double"):
        return x * 2 if mode == "double" else x * 3

    x = np.ones(2)
    np.testing.assert_allclose(f(x), 2 * x)
    np.testing.assert_allclose(f(x, mode="triple"), 3 * x)
    np.testing.assert_allclose(f(x, mode="triple"), 3 * x)
    assert f.tracing_count == 2


def test_static_values_of_different_types_do_not_share_a_trace(backend):
    @counted(static_argnums=1)
    def f(x, k):
        return x * k

    x = np.ones(2, np.int64)
    assert f(x, 1).dtype == np.int64
    assert f(x, 1.0).dtype == np.float64
    assert f(x, True).dtype == np.int64
    assert f.tracing_count == 3


def test_unhashable_static_argument_is_a_clear_error():
    f = tg.function(lambda x, k: x * k[0], static_argnums=1)
    with pytest.raises(TypeError, match="hashable"):
        f(np.ones(2), [2.0])


def test_bad_static_argnums_are_refused_at_decoration():
    with pytest.raises(ValueError, match="out of range"):
        tg.function(lambda x: x, static_argnums=3)
    with pytest.raises(ValueError, match="names no parameter"):
        tg.function(lambda x: x, static_argnames="y")


def test_string_and_none_arguments_are_baked_in(backend):
    @tg.function
    def f(x, how, extra):
        assert extra is None
        return tnp.sin(x) if how == "sin" else tnp.cos(x)

    x = np.linspace(0, 1, 3)
    np.testing.assert_allclose(f(x, "sin", None), np.sin(x))
    np.testing.assert_allclose(f(x, "cos", None), np.cos(x))
    np.testing.assert_allclose(f(x, "sin", None), np.sin(x))
    assert f.tracing_count == 2


# -- input_signature -------------------------------------------------------------------------


def test_input_signature_with_none_dims_traces_once_for_many_sizes(backend):
    f = tg.function(lambda x: tnp.sum(x * x, axis=1),
                    input_signature=[tg.TensorSpec([None, 3])])
    for n in (1, 4, 7):
        x = np.arange(3.0 * n).reshape(n, 3)
        np.testing.assert_allclose(f(x), np.sum(x * x, axis=1))
    assert f.tracing_count == 1
    assert f.get_concrete_function().graph.inputs[0].shape == (None, 3)


def test_input_signature_shape_mismatch_is_a_shape_error_naming_both():
    f = tg.function(lambda x: x, input_signature=[tg.TensorSpec([None, 3], name="points")])
    with pytest.raises(ShapeError, match=r"points.*\(2, 4\).*f64\[\?,3\].*test_function\.py"):
        f(np.ones((2, 4)))
    with pytest.raises(ShapeError):
        f(np.ones(3))


def test_input_signature_dtype_mismatch_is_a_dtype_error():
    f = tg.function(lambda x: x, input_signature=[tg.TensorSpec([None], "float32")])
    with pytest.raises(DTypeError, match="float64.*f32"):
        f(np.ones(2))
    with pytest.raises(DTypeError, match="int64"):
        f(np.ones(2, np.int64))
    assert f(np.ones(2, np.float32)).dtype == np.float32


def test_input_signature_accepts_python_scalars_of_a_promotable_kind(backend):
    f = tg.function(lambda s: s * 2, input_signature=[tg.TensorSpec([], "float32")])
    out = f(3)
    assert out == 6 and out.dtype == np.float32
    with pytest.raises(DTypeError):
        tg.function(lambda s: s, input_signature=[tg.TensorSpec([], "int64")])(1.5)


def test_input_signature_structure_mismatch_is_a_type_error():
    f = tg.function(lambda a, b: a + b, input_signature=[tg.TensorSpec([3]), tg.TensorSpec([3])])
    with pytest.raises(TypeError, match="input_signature"):
        f(np.ones(3), (np.ones(3), np.ones(3)))


def test_input_signature_with_nested_structure(backend):
    sig = [(tg.TensorSpec([None]), {"w": tg.TensorSpec([None])})]
    f = tg.function(lambda p: p[0] * p[1]["w"], input_signature=sig)
    np.testing.assert_allclose(f((np.arange(3.0), {"w": np.ones(3) * 2})), np.arange(3.0) * 2)
    np.testing.assert_allclose(f((np.arange(5.0), {"w": np.ones(5)})), np.arange(5.0))
    assert f.tracing_count == 1


# -- reduce_retracing ------------------------------------------------------------------------


def test_reduce_retracing_relaxes_differing_dims_to_none(backend):
    f = tg.function(lambda x: x * 2 + 1, reduce_retracing=True)
    f(np.ones((2, 3)))
    f(np.ones((4, 3)))
    assert f.tracing_count == 2
    for n in (5, 6, 9):
        np.testing.assert_allclose(f(np.ones((n, 3))), np.full((n, 3), 3.0))
    assert f.tracing_count == 2
    relaxed = f.get_concrete_function(np.ones((7, 3))).graph
    assert relaxed.inputs[0].shape == (None, 3)
    f(np.ones((2, 5)))  # another dim differs: relaxed once more
    f(np.ones((3, 8)))
    assert f.tracing_count == 3


def test_reduce_retracing_keeps_dtypes_and_ranks_apart(backend):
    f = tg.function(lambda x: x + x, reduce_retracing=True)
    f(np.ones(2))
    f(np.ones(3))
    f(np.ones(3, np.float32))
    f(np.ones((3, 3)))
    assert f.tracing_count == 4
    assert f(np.ones(3, np.float32)).dtype == np.float32


# -- get_concrete_function -------------------------------------------------------------------


def test_get_concrete_function_from_specs_and_from_arrays(backend):
    f = tg.function(lambda x, y: x * y)
    concrete = f.get_concrete_function(tg.TensorSpec([None], name="a"), np.ones(3))
    assert isinstance(concrete, tg.ConcreteFunction)
    assert isinstance(concrete.graph, tg.FuncGraph)
    args, kwargs = concrete.structured_input_signature
    assert kwargs == {}
    assert args[0].shape == (None,) and args[1].shape == (3,)
    np.testing.assert_allclose(concrete(np.arange(3.0), np.full(3, 2.0)), np.arange(3.0) * 2)
    f(np.ones(3), np.ones(3))  # fits the trace with the None dim
    assert f.tracing_count == 1
    assert f.get_concrete_function(np.ones(2), np.ones(3)) is concrete
    with pytest.raises(ShapeError, match=r"\(4,\)"):
        concrete(np.ones(3), np.ones(4))


def test_most_specific_trace_serves_a_call(backend):
    f = tg.function(lambda x: x - 1)
    rows = f.get_concrete_function(tg.TensorSpec([None, 2]))
    generic = f.get_concrete_function(tg.TensorSpec([None, None]))
    assert generic is not rows
    assert f.get_concrete_function(tg.TensorSpec([None, 2])) is rows
    assert f.get_concrete_function(np.ones((3, 2))) is rows
    assert f.get_concrete_function(np.ones((3, 4))) is generic
    assert f.tracing_count == 2


def test_concrete_function_checks_static_values_and_structure(backend):
    f = tg.function(lambda x, mode: x * 2 if mode == "a" else x)
    concrete = f.get_concrete_function(np.ones(2), "a")
    np.testing.assert_allclose(concrete(np.ones(2), "a"), [2.0, 2.0])
    with pytest.raises(TypeError, match="traced with 'a'"):
        concrete(np.ones(2), "b")
    with pytest.raises(TypeError, match="structured"):
        concrete((np.ones(2),), "a")


def test_concrete_function_called_inside_a_trace_is_a_call_of_its_graph(backend):
    inner = tg.function(lambda x: tnp.exp(x)).get_concrete_function(tg.TensorSpec([3]))
    outer = tg.function(lambda x: inner(x) + 1)
    x = np.linspace(0, 1, 3)
    np.testing.assert_allclose(outer(x), np.exp(x) + 1)
    call, = [op for op in outer.get_concrete_function(x).graph.operations if op.name == "call"]
    assert call.attrs["callee"] is inner.callee and call.attrs["callee"].graph is inner.graph


def test_trace_returns_the_graph_without_compiling():
    graph = tg.trace(lambda x, n: x * n, static_argnums=1)(tg.TensorSpec([2, 2]), 3)
    assert isinstance(graph, tg.FuncGraph)
    assert [t.shape for t in graph.inputs] == [(2, 2)]
    assert graph.outputs[0].shape == (2, 2)


# -- retracing warning -----------------------------------------------------------------------


def test_retracing_warning_after_more_than_ten_shapes():
    f = tg.function(lambda x: x + 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RetracingWarning)
        for n in range(1, 11):
            f(np.ones(n))
    with pytest.warns(RetracingWarning, match="reduce_retracing=True.*input_signature") as rec:
        f(np.ones(11))
    assert rec[0].filename == __file__
    assert f.tracing_count == 11


def test_no_retracing_warning_for_new_static_values():
    f = tg.function(lambda x, k: x * k, static_argnums=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RetracingWarning)
        for k in range(15):
            f(np.ones(2), k)
    assert f.tracing_count == 15


# -- backends and verification ---------------------------------------------------------------


def test_unknown_backend_is_refused():
    with pytest.raises(ValueError, match="unknown backend"):
        tg.function(lambda x: x, backend="cuda")


def test_backend_none_uses_config_backend_when_first_run(monkeypatch):
    f = tg.function(lambda x: x + 1)
    monkeypatch.setattr(tg.config, "backend", "no-such-backend")
    with pytest.raises(ValueError, match="no-such-backend"):
        f(np.ones(2))
    monkeypatch.setattr(tg.config, "backend", "numpy")
    np.testing.assert_allclose(f(np.ones(2)), [2.0, 2.0])


def test_explicit_numpy_backend_runs_the_reference(monkeypatch):
    monkeypatch.setattr(tg.config, "backend", "no-such-backend")
    f = tg.function(lambda x: tnp.cos(x), backend="numpy")
    np.testing.assert_allclose(f(np.zeros(2)), [1.0, 1.0])


def test_verify_checks_every_traced_graph(monkeypatch, backend):
    import tracegrad.core.verify as verify_module

    seen = []
    monkeypatch.setattr(verify_module, "verify", lambda g: seen.append(g) or g)
    monkeypatch.setattr(tg.config, "verify", True)
    f = tg.function(lambda x: x * 3)
    f(np.ones(2))
    f(np.ones(3))
    shapes = [g.inputs[0].shape for g in seen]
    # numba also verifies the optimized graph it compiles
    assert shapes == ([(2,), (3,)] if backend == "numpy" else [(2,), (2,), (3,), (3,)])


# -- public helpers --------------------------------------------------------------------------


def test_optimize_and_compiled_source_are_public():
    from tracegrad.backends.numba import generate_source

    graph = tg.trace(lambda x: tnp.sin(x) * 1.0 + 0.0)(tg.TensorSpec([None]))
    optimized = tg.optimize(graph)
    assert [op.name for op in optimized.operations] == ["sin"]
    assert len(graph.operations) > 1  # the traced graph is untouched
    source = tg.compiled_source(graph)
    assert source == generate_source(optimized)
    assert "def " in source


def test_input_signature_skips_static_arguments_and_names_the_right_parameter():
    @counted(static_argnums=0, input_signature=[tg.TensorSpec([None])])
    def f(mode, values):
        return values * 2 if mode == "double" else values

    np.testing.assert_allclose(f("double", np.ones(3)), [2.0, 2.0, 2.0])
    np.testing.assert_allclose(f("double", np.ones(5)), np.full(5, 2.0))
    assert f.tracing_count == 1
    with pytest.raises(ShapeError, match="argument values"):
        f("double", np.ones((2, 2)))
