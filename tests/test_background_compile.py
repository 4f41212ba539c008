"""A numba function's first calls run the numpy reference while its kernel compiles in a
background thread (`tg.config.background_compile`), then switch to the kernel."""

from __future__ import annotations

import importlib
import threading

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp

pytest.importorskip("numba")
tg_function = importlib.import_module("tracegrad.function")


@pytest.fixture
def gated(monkeypatch):
    """Background compiling on, with numba compiles held until the returned event is set;
    yields (event, backends compiled so far)."""
    monkeypatch.setattr(tg.config, "background_compile", True)
    # Earlier tests' compiles end first: held by this gate, they would run beside the test,
    # and Numba's `warnings.catch_warnings` in the compile thread can swap out the test's
    # `pytest.warns` recorder (the module's warning state is process-wide).
    if tg_function._COMPILER:
        tg_function._COMPILER[0].submit(int).result()
    gate, compiled = threading.Event(), []
    real = tg_function.compile_graph

    def held(graph, backend=None, parallel=None, **kw):
        if backend == "numba":
            assert gate.wait(60), "the test never released the compile"
            compiled.append(backend)
        return real(graph, backend, parallel, **kw)

    monkeypatch.setattr(tg_function, "compile_graph", held)
    yield gate, compiled
    gate.set()


def loss(w, x):
    return tnp.mean(tnp.tanh(x @ w) ** 2)


def reference(w, x):
    return tg.function(tg.value_and_grad(loss), backend="numpy")(w, x)


def test_the_first_call_does_not_wait_for_the_kernel(gated):
    gate, compiled = gated
    rng = np.random.default_rng(0)
    w, x = rng.standard_normal((6, 3)), rng.standard_normal((10, 6))
    f = tg.function(tg.value_and_grad(loss), backend="numba")
    want = reference(w, x)
    for _ in range(3):  # the kernel is held: these run the numpy reference, bit for bit
        got = f(w, x)
        assert compiled == []
        for g, r in zip(got, want):
            np.testing.assert_array_equal(g, r)
    concrete = f.get_concrete_function(w, x)
    interim = concrete._executor
    assert isinstance(interim, tg_function._Interim)
    gate.set()
    kernel = interim.wait()
    assert compiled == ["numba"] and concrete._executor is kernel
    assert type(kernel).__module__.startswith("tracegrad.backends.numba")
    got = f(w, x)  # the kernel now, through the call's short path
    for g, r in zip(got, want):
        np.testing.assert_allclose(g, r, rtol=1e-13)
    assert f.tracing_count == 1


def test_variable_updates_run_in_both_phases(gated):
    gate, _ = gated
    v = tg.Variable(np.zeros(4))

    @tg.function(backend="numba")
    def step(x):
        v.assign_add(tnp.sin(x))
        return v.read_value() * 2.0

    x = np.linspace(0, 1, 4)
    np.testing.assert_allclose(step(x), 2 * np.sin(x), rtol=1e-15)
    gate.set()
    step.get_concrete_function(x)._executor.wait()
    for k in (2, 3):
        np.testing.assert_allclose(step(x), 2 * k * np.sin(x), rtol=1e-14)
    np.testing.assert_allclose(v.numpy(), 3 * np.sin(x), rtol=1e-14)


def test_a_kernel_that_fails_to_compile_keeps_the_reference_with_a_warning(monkeypatch):
    monkeypatch.setattr(tg.config, "background_compile", True)
    real = tg_function.compile_graph

    def broken(graph, backend=None, parallel=None, **kw):
        if backend == "numba":
            raise RuntimeError("no kernel today")
        return real(graph, backend, parallel, **kw)

    monkeypatch.setattr(tg_function, "compile_graph", broken)
    f = tg.function(lambda x: tnp.exp(x) + 1.0, backend="numba")
    x = np.arange(3.0)
    f(x)
    with pytest.warns(RuntimeWarning, match="no kernel today"):
        f.get_concrete_function(x)._executor.wait()
    np.testing.assert_array_equal(f(x), np.exp(x) + 1.0)


def test_off_the_first_call_runs_the_kernel(monkeypatch):
    monkeypatch.setattr(tg.config, "background_compile", False)
    f = tg.function(lambda x: tnp.cos(x) * 3.0, backend="numba")
    x = np.arange(5.0)
    np.testing.assert_allclose(f(x), np.cos(x) * 3.0, rtol=1e-15)
    executor = f.get_concrete_function(x)._executor
    assert not isinstance(executor, tg_function._Interim)
    assert type(executor).__module__.startswith("tracegrad.backends.numba")


def test_wait_for_compiles_makes_the_next_call_run_the_kernel(gated):
    gate, compiled = gated
    w, x = np.ones((4, 2)), np.ones((5, 4))
    f = tg.function(tg.value_and_grad(loss), backend="numba")
    f(w, x)
    concrete = f.get_concrete_function(w, x)
    assert isinstance(concrete._executor, tg_function._Interim)
    threading.Timer(0.2, gate.set).start()  # the compile is released while we wait
    tg.wait_for_compiles()
    assert compiled == ["numba"]
    got = f(w, x)  # installs the kernel
    assert not isinstance(concrete._executor, tg_function._Interim)
    for g, r in zip(got, reference(w, x)):
        np.testing.assert_allclose(g, r, rtol=1e-14)


def _decay_sum(xs):
    def step(c, x):
        c = c * 0.5 + x
        return c, c * c
    return tnp.sum(tg.scan(step, 0.0, xs)[1])


def test_a_loop_of_many_steps_waits_for_its_kernel_a_short_one_does_not(gated, monkeypatch):
    gate, compiled = gated
    # the assumed costs (not this process's measured ones): numpy runs each op of each
    # step in Python for ~5 us, a compile costs ~0.03 s per op of the graph and its body
    monkeypatch.setattr(tg_function, "_COMPILE_COST", [0.0, 0])
    monkeypatch.setattr(tg_function, "_INTERIM_COST", [0.0, 0.0])
    f = tg.function(_decay_sum, backend="numba")
    want = tg.function(_decay_sum, backend="numpy")
    short, long = np.linspace(0.0, 1.0, 10), np.linspace(0.0, 1.0, 200_000)

    concrete = f.get_concrete_function(short)
    interim = concrete.executor
    graph = concrete.graph
    assert tg_function.interim_estimate(graph) < tg_function.compile_estimate(graph)
    assert not interim.waits
    assert interim._kernel is None  # its compile starts when the first call ends
    np.testing.assert_array_equal(f(short), want(short))  # the numpy interim: compile held
    assert compiled == [] and concrete._executor is interim and interim._spent > 0
    assert interim._kernel is not None

    concrete = f.get_concrete_function(long)
    interim = concrete.executor
    graph = concrete.graph
    # 200000 steps of the body in Python against one compile of the graph and the body
    assert tg_function.interim_estimate(graph) > tg_function.compile_estimate(graph) > 0.1
    assert interim.waits
    threading.Timer(0.3, gate.set).start()  # released while the first call waits
    got = f(long)
    assert compiled == ["numba", "numba"]  # the short graph's kernel, then this one's
    assert interim._spent == 0.0  # the numpy interim never ran
    assert not isinstance(concrete._executor, tg_function._Interim)
    np.testing.assert_allclose(got, want(long), rtol=1e-12)


def test_the_interim_estimate_scales_with_what_interim_calls_took(monkeypatch):
    graph = tg.trace(_decay_sum)(np.linspace(0.0, 1.0, 100))
    monkeypatch.setattr(tg_function, "_INTERIM_COST", [0.0, 0.0])
    model = tg_function.interim_estimate(graph)
    # 100 iterations of the body: at least 100 op runs at the assumed cost each
    assert model > 100 * tg_function.INTERIM_SECONDS_PER_OP
    monkeypatch.setattr(tg_function, "_INTERIM_COST", [3.0, 1.0])  # calls took 3x the model
    assert tg_function.interim_estimate(graph) == pytest.approx(3.0 * model)


def _gated_scan(w, xs):
    def step(c, x):
        gate = 1.0 / (1.0 + tnp.exp(-(c * w[0] + x)))
        c = gate * c + (1.0 - gate) * tnp.tanh(c * w[1] + x)
        return c, tnp.sum(c)
    c, ys = tg.scan(step, w[2], xs)
    return tnp.sum(ys) + tnp.sum(c * c)


def _gated_scan_case(seed):
    """Arguments of `_gated_scan` (3000 steps), the numba function of its value and gradient,
    and that function on the numpy backend."""
    rng = np.random.default_rng(seed)
    w, xs = rng.standard_normal((3, 4)) * 0.5, rng.standard_normal((3000, 4))
    vg = tg.value_and_grad(_gated_scan)
    return (w, xs), tg.function(vg, backend="numba"), tg.function(vg, backend="numpy")


def test_a_loops_interim_runs_the_optimized_graph_a_straight_ones_the_traced(gated,
                                                                               monkeypatch):
    """The interim of a loop of many steps runs `tg.optimize(graph)` (its gradient's
    forward loop once, not again as the replay that stores the step's values); that of a
    graph whose ops run once runs the traced graph (optimizing costs more than it saves)."""
    gate, _ = gated
    ran = []
    held = tg_function.compile_graph

    def recorded(graph, backend=None, parallel=None, **kw):
        if backend == "numpy":
            ran.append(graph)
        return held(graph, backend, parallel, **kw)

    monkeypatch.setattr(tg_function, "compile_graph", recorded)
    monkeypatch.setattr(tg_function, "_INTERIM_COST", [0.0, 0.0])
    (w, xs), f, reference = _gated_scan_case(1)
    concrete = f.get_concrete_function(w, xs)
    assert isinstance(concrete.executor, tg_function._Interim) and not concrete.executor.waits

    def loops(graph):
        return sum(op.name == "while" for op in graph.operations)

    assert loops(concrete.graph) == 3  # the forward loop, the replay, the backward loop
    assert len(ran) == 1 and loops(ran[0]) == 2
    got, want = f(w, xs), reference(w, xs)
    for g, r in zip(got, want, strict=True):
        np.testing.assert_allclose(g, r, rtol=1e-13)

    x = np.random.default_rng(1).standard_normal((10, 6))
    straight = tg.function(loss, backend="numba").get_concrete_function(w[:, :3].T @ w[:, :3],
                                                                       x[:, :3])
    assert isinstance(straight.executor, tg_function._Interim)
    assert len(ran) == 3 and ran[-1] is straight.graph  # the reference of `want`, then this
    gate.set()


@pytest.fixture
def optimizes(monkeypatch):
    """The graphs `tg.optimize` is run on for a compile or an interim, in order."""
    seen, real = [], tg_function._optimized

    def counted(graph):
        seen.append(graph)
        return real(graph)

    monkeypatch.setattr(tg_function, "_optimized", counted)
    return seen


def test_a_loops_graph_is_optimized_once_for_its_interim_and_its_kernel(gated, optimizes,
                                                                        monkeypatch):
    gate, compiled = gated
    gate.set()
    if tg_function._COMPILER:  # the earlier tests' compiles end before the costs are reset
        tg_function._COMPILER[0].submit(int).result()
    gate.clear()
    monkeypatch.setattr(tg_function, "_INTERIM_COST", [0.0, 0.0])
    monkeypatch.setattr(tg_function, "_COMPILE_COST", [0.0, 0])
    (w, xs), f, reference = _gated_scan_case(2)
    concrete = f.get_concrete_function(w, xs)
    interim = concrete.executor
    assert not interim.waits and optimizes == [concrete.graph]
    want = reference(w, xs)
    gate.set()
    for g, r in zip(interim.wait()([w, xs]),
                    want, strict=True):
        np.testing.assert_allclose(g, r, rtol=1e-13)
    assert compiled == ["numba"] and optimizes == [concrete.graph]  # not again for the kernel
    # the compile's cost is per op of the traced graph, as `compile_estimate` counts them
    assert tg_function._COMPILE_COST[1] == tg_function._op_count(concrete.graph) >= 100


def test_a_call_that_waits_for_its_kernel_optimizes_only_for_the_kernel(gated, optimizes,
                                                                        monkeypatch):
    gate, _ = gated
    monkeypatch.setattr(tg_function, "_COMPILE_COST", [0.0, 0])
    monkeypatch.setattr(tg_function, "_INTERIM_COST", [0.0, 0.0])
    long = np.linspace(0.0, 1.0, 200_000)
    concrete = tg.function(_decay_sum, backend="numba").get_concrete_function(long)
    assert concrete.executor.waits and optimizes == []  # the interim never runs
    gate.set()
    np.testing.assert_allclose(concrete.executor.wait()([long])[0],
                               tg.function(_decay_sum, backend="numpy")(long), rtol=1e-12)
    assert optimizes == [concrete.graph]


def test_a_pass_that_fails_leaves_the_interim_the_traced_graph_and_the_compile_reports_it(
        gated, monkeypatch):
    gate, _ = gated
    monkeypatch.setattr(tg_function, "_INTERIM_COST", [0.0, 0.0])
    monkeypatch.setattr(tg_function, "_COMPILE_COST", [0.0, 0])  # the interim runs

    def broken(graph):
        raise RuntimeError("no pass today")

    monkeypatch.setattr(tg_function, "_optimized", broken)
    (w, xs), f, reference = _gated_scan_case(3)
    want = reference(w, xs)
    for g, r in zip(f(w, xs), want, strict=True):  # the interim, on the traced graph
        np.testing.assert_array_equal(g, r)
    interim = f.get_concrete_function(w, xs)._executor
    assert isinstance(interim, tg_function._Interim)
    gate.set()
    with pytest.warns(RuntimeWarning, match="no pass today"):
        interim.wait()
    for g, r in zip(f(w, xs), want, strict=True):
        np.testing.assert_array_equal(g, r)
