"""Control flow compiled inside the Numba kernel (control.py): values and gradients against
the numpy backend and finite differences, loop histories that outgrow their first buffer,
`maximum_iterations`, nesting, errors raised in a loop body, and the graphs that fall back
to kernels between control-flow ops (segments.py)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tracegrad.backends.numba import SegmentedExecutor, compile_graph
from tracegrad.backends.numba import control
from tracegrad.backends.numba.control import COPY_BACK_ELEMENTS, HISTORY_ROWS
from tracegrad.function import compiled_source
from tracegrad.passes import optimize
from tests.finite_diff import central_difference


def _executor(fn, *args):
    return compile_graph(optimize(tg.trace(fn)(*args)))


def _both(fn, *args):
    got = tg.function(fn, backend="numba")(*args)
    want = tg.function(fn, backend="numpy")(*args)
    return got, want


def damped(x, n):
    """A loop whose trip count is data: shrink until the norm is below 1/n."""
    def body(k, v):
        return k + 1, v * 0.95 + 0.01 * tnp.sin(v)
    return tg.while_loop(lambda k, v: tnp.sum(v * v) * n * n > 1.0, body, (0, x))


def damped_np(x, n):
    k = 0
    while np.sum(x * x) * n * n > 1.0:
        x, k = x * 0.95 + 0.01 * np.sin(x), k + 1
    return k, x


def test_a_loop_is_one_kernel_with_no_python_between_iterations():
    ex = _executor(lambda x: tg.fori_loop(0, 10, lambda i, v: v * 1.5, x), np.ones(3))
    assert not isinstance(ex, SegmentedExecutor)
    np.testing.assert_array_equal(ex([np.ones(3)])[0], np.full(3, 1.5 ** 10))


def test_dynamic_trip_count_values_and_gradients_with_a_history_past_its_first_buffer():
    x = np.array([300.0, -200.0, 100.0])
    k, v = tg.function(damped, backend="numba")(x, 3.0)
    kn, vn = damped_np(x, 3.0)
    assert k == kn > 2 * HISTORY_ROWS
    np.testing.assert_allclose(v, vn, rtol=1e-14)
    g = tg.function(tg.grad(lambda x: tnp.sum(damped(x, 3.0)[1] * W3)), backend="numba")
    # the trip count is locally constant: central differences see the same iterations
    np.testing.assert_allclose(g(x), central_difference(lambda v: np.sum(damped_np(v, 3.0)[1] * W3), x),
                               rtol=1e-6)
    assert not isinstance(_executor(tg.grad(lambda x: tnp.sum(damped(x, 3.0)[1])), x),
                          SegmentedExecutor)


W3 = np.array([1.0, -2.0, 0.5])


def test_maximum_iterations_bounds_the_loop_and_its_history():
    def f(x):
        return tg.while_loop(lambda v: tnp.sum(v) > -1.0, lambda v: (v * 1.1 + 0.3,),
                             (x,), maximum_iterations=200)[0]

    x = np.array([0.5, 0.25])
    got, want = _both(f, x)
    np.testing.assert_array_equal(got, want)
    g = tg.grad(lambda v: tnp.sum(f(v)))
    got, want = _both(g, x)
    np.testing.assert_allclose(got, want, rtol=1e-14)
    np.testing.assert_allclose(got, np.full(2, 1.1 ** 200), rtol=1e-12)


@pytest.mark.parametrize("bounded_rows", [control.HISTORY_ROWS_BOUNDED, 8])
def test_a_history_of_maximum_iterations_rows_has_no_growth_code(monkeypatch, bounded_rows):
    """Histories start at `maximum_iterations` rows when that is at most
    HISTORY_ROWS_BOUNDED, so the loop has no code growing them; past it they start smaller
    and grow (here 8 rows for a loop of up to 200 steps running 95)."""
    monkeypatch.setattr(control, "HISTORY_ROWS_BOUNDED", bounded_rows)

    def f(x):
        return tg.while_loop(lambda v: tnp.sum(v) < 40.0,
                             lambda v: (v * 1.05 + 0.2 * tnp.sin(v),), (x,),
                             maximum_iterations=200)[0]

    loss = tg.grad(lambda x: tnp.sum(f(x) ** 2))
    x = np.array([0.5, 0.25, -0.1])
    src = compiled_source(tg.trace(loss)(x))
    grows = bool(re.search(r"w\d+_g = np\.empty", src))
    assert grows == (bounded_rows < 200)
    # carries and their history rows are copied whole, not by generated loops
    assert re.search(r"_crow\(w\d+_h\d+, w\d+_it, w\d+_c\d+\)", src) or \
        re.search(r"_crow\(h\d+, loop_it, a\d+\)", src)
    got, want = _both(loss, x)
    np.testing.assert_allclose(got, want, rtol=1e-13)

    def f_np(v):
        k = 0
        while np.sum(v) < 40.0:
            v, k = v * 1.05 + 0.2 * np.sin(v), k + 1
        assert 8 < k < 200
        return v

    np.testing.assert_allclose(got, central_difference(lambda v: np.sum(f_np(v) ** 2), x),
                               rtol=1e-6)


def test_scan_values_and_gradients_match_the_numpy_backend():
    rng = np.random.default_rng(0)
    w, u = rng.standard_normal((4, 4)) / 2, rng.standard_normal((4, 2))
    xs = rng.standard_normal((150, 2))

    def rnn(w, h0):
        return tg.scan(lambda h, x: (tnp.tanh(w @ h + u @ x),) * 2, h0, xs)

    h0 = np.zeros(4)
    (c, ys), (cn, ysn) = _both(rnn, w, h0)
    np.testing.assert_allclose(ys, ysn, rtol=1e-13)
    np.testing.assert_allclose(c, ys[-1], rtol=0)
    assert not isinstance(_executor(rnn, w, h0), SegmentedExecutor)
    loss = tg.grad(lambda w: tnp.sum(rnn(w, h0)[1] ** 2))
    got, want = _both(loss, w)
    np.testing.assert_allclose(got, want, rtol=1e-12)

    def loss_np(wf):
        h, total = h0, 0.0
        for x in xs:
            h = np.tanh(wf.reshape(4, 4) @ h + u @ x)
            total += np.sum(h ** 2)
        return total

    np.testing.assert_allclose(got.ravel(), central_difference(loss_np, w.ravel()), rtol=1e-6)


def test_nested_loops_and_conds_inside_one_kernel():
    def f(x):
        def outer(i, v):
            v = tg.cond(tnp.sum(v) > 0, lambda: v * 0.9, lambda: v + 1.0)
            return tg.fori_loop(0, 3, lambda j, w: w + 0.01 * tnp.cos(w), v)
        return tg.fori_loop(0, 20, outer, x)

    x = np.array([0.3, -0.2, 0.9])
    ex = _executor(f, x)
    assert not isinstance(ex, SegmentedExecutor)
    assert len(re.findall(r"def while_step\d+\(", ex.source)) == 2
    got, want = _both(f, x)
    np.testing.assert_allclose(got, want, rtol=1e-14)
    got, want = _both(tg.grad(lambda v: tnp.sum(f(v))), x)
    np.testing.assert_allclose(got, want, rtol=1e-13)
    np.testing.assert_allclose(got, central_difference(lambda v: np.sum(
        tg.function(f, backend="numpy")(v)), x), rtol=1e-6)


def test_an_index_error_in_a_loop_body_names_the_op_and_line():
    def f(x, n):
        return tg.fori_loop(0, n, lambda i, s: s + tnp.take(x, i), 0.0)  # this line

    g = tg.function(f, backend="numba")
    assert g(np.arange(4.0), 4) == 6.0
    with pytest.raises(tg.errors.TracegradIndexError,
                       match=r"gather: index 4 .*test_numba_control_flow.py:"):
        g(np.arange(4.0), 6)


def test_rank0_carries_and_outputs_and_a_cond_result_that_is_a_graph_output():
    def f(x, t):
        y = tg.cond(t > 0.0, lambda: (x * t, t + 1.0), lambda: (x - t, t * 2.0))
        s = tg.fori_loop(0, 5, lambda i, s: s * 0.5 + y[1], t)
        return y[0], y[1], s

    for t in (1.5, -1.5):
        got, want = _both(f, np.arange(3.0), t)
        for a, b in zip(got, want, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-15)


def test_graphs_the_kernel_cannot_size_fall_back_to_segments():
    # a cond whose result's size is unknown until a branch runs
    f = tg.function(lambda x: tg.cond(tnp.sum(x) > 0, lambda: x * 2.0, lambda: -x),
                    backend="numba", input_signature=[tg.TensorSpec([None])])
    x = np.array([1.0, 2.0, -0.5])
    np.testing.assert_array_equal(f(x), x * 2.0)
    np.testing.assert_array_equal(f(-x[:2]), x[:2])
    g = f.get_concrete_function(x).graph
    assert isinstance(compile_graph(optimize(g)), SegmentedExecutor)


def _loop_buffers(fn, *args):
    """The history buffers a loop of `fn`'s kernel allocates, and whether it swaps its
    carry buffers after each step (rather than copying them back)."""
    src = compiled_source(tg.trace(fn)(*args))
    swaps = re.search(r"(w\d+_c0|a\d+), .* = (w\d+_n0|out0), ", src)
    return re.findall(r"(w\d+_h\d+) = np\.empty", src), bool(swaps)


def test_a_loop_keeps_only_the_histories_that_are_read():
    rng = np.random.default_rng(3)
    w, xs = rng.standard_normal((5, 5)) / 3, rng.standard_normal((40, 5))

    def rnn(h0):
        return tg.scan(lambda h, x: (tnp.tanh(w @ h + x), tnp.sum(h)), h0, xs)

    # the counter's and the state's histories are not read: only the ys' is kept
    assert len(_loop_buffers(rnn, np.zeros(5))[0]) == 1
    (c, ys), (cn, ysn) = _both(rnn, np.zeros(5))
    np.testing.assert_allclose(ys, ysn, rtol=1e-13)
    np.testing.assert_allclose(c, cn, rtol=1e-13)
    # its gradient reads the state's history too
    loss = tg.grad(lambda h0: tnp.sum(rnn(h0)[1] ** 2) + tnp.sum(rnn(h0)[0]))
    got, want = _both(loss, np.full(5, 0.1))
    np.testing.assert_allclose(got, want, rtol=1e-12)


@pytest.mark.parametrize("n", [10, COPY_BACK_ELEMENTS + 1])
def test_small_carries_are_copied_back_and_large_ones_swapped(n):
    def f(x):
        return tg.fori_loop(0, 7, lambda i, v: v[::-1] * 0.5 + tnp.sin(v), x)

    assert _loop_buffers(f, np.ones(n))[1] == (n > COPY_BACK_ELEMENTS)
    x = np.linspace(-2.0, 2.0, n)
    got, want = _both(f, x)
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-15)


def test_a_loop_step_allocates_nothing_its_temporaries_come_from_before_the_loop():
    rng = np.random.default_rng(4)
    w, u, xs = rng.standard_normal((20, 20)) / 6, rng.standard_normal((20, 3)), \
        rng.standard_normal((50, 3))

    def rnn(h0):  # w @ h (20 terms: BLAS, not fused into its consumer) is a temporary
        return tg.scan(lambda h, x: (tnp.tanh(w @ h + u @ x),) * 2, h0, xs)

    src = compiled_source(tg.trace(rnn)(np.zeros(20)))
    step = re.search(r"\ndef (while_step\d+)\(.*?\n(.*?)\n\n", src, re.S)
    assert "np.empty" not in step.group(2)
    assert re.search(rf"(w\d+_s\d+, )+= {step.group(1)}_ws\(", src)
    (c, ys), (cn, ysn) = _both(rnn, np.full(20, 0.2))
    np.testing.assert_allclose(ys, ysn, rtol=1e-13)
    got, want = _both(tg.grad(lambda h0: tnp.sum(rnn(h0)[1] ** 2)), np.full(20, 0.2))
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_functions_load_only_the_sizes_they_read():
    # the LSTM's `_ws` loaded all of its step's 100 sizes and offsets (1.2 s of Numba's
    # compile) to allocate 30 buffers of 3 sizes
    rng = np.random.default_rng(5)
    w, xs = rng.standard_normal((6, 16)) / 4, rng.standard_normal((40, 16))

    def loss(h0):
        def step(h, x):
            a = tnp.tanh(h * w[0] + x * w[1] + w[2])
            return tnp.tanh(a * w[3] + w[4]) * tnp.exp(-h * w[5]), tnp.sum(a * a)

        return tnp.sum(tg.scan(step, h0, xs)[1])

    src = compiled_source(tg.trace(tg.grad(loss))(np.zeros(16)))
    workspaces = re.findall(r"\ndef (while_step\d+_ws)\(.*?\n(.*?)\n\n", src, re.S)
    assert workspaces
    for name, body in workspaces:
        *loads, ret = body.strip().split("\n")
        assert ret.strip().startswith("return ("), (name, ret)
        for line in loads:
            loaded = line.split("=")[0].strip()
            assert re.search(rf"\b{loaded}\b", ret), (name, line)
    got, want = _both(tg.grad(loss), np.full(16, 0.1))
    np.testing.assert_allclose(got, want, rtol=1e-12)
    # no function of the module loads a size or scalar it does not read (a loop's
    # condition loaded all 47 of its operands' sizes to read one)
    for function in re.split(r"\n(?=@njit)", src):
        for line in re.findall(r"\n    (\w+) = (?:I|F)\[\d+\]|\n    (\w+) = a\d+\.shape",
                               function):
            name = line[0] or line[1]
            assert len(re.findall(rf"\b{name}\b", function)) > 1, (function[:200], name)


def test_a_step_temporary_sized_by_a_loop_inside_the_step_is_allocated_in_the_step():
    # under vmap, the inner scan's history is transposed into a temporary whose size is
    # the inner trip count, set only when the inner loop has run: it cannot come from
    # before the outer loop
    def f(x):
        def body(k, s):
            c, ys = tg.scan(lambda c, xi: (c * 0.9 + xi, c * xi), s, x)
            return k + 1, c + tnp.sum(ys) * 0.01
        return tg.while_loop(lambda k, s: k < 2, body, (0, 0.5))[1]

    xs = np.stack([np.linspace(-1.0, 1.0, 6), np.linspace(0.0, 2.0, 6), np.ones(6)])
    got, want = _both(tg.vmap(f), xs)
    np.testing.assert_allclose(got, want, rtol=1e-14)
    np.testing.assert_allclose(got, [tg.function(f, backend="numpy")(x) for x in xs],
                               rtol=1e-14)


def test_a_loop_step_past_the_outline_size_keeps_its_temporaries_in_the_step():
    # a step large enough for its loop nests to be outlined functions, with a temporary
    # (the product) taken from the loop's workspace
    def chain(x):
        for k in range(150):
            x = tnp.sin(x) * 0.9 + x * 0.1 if k % 2 == 0 else tnp.tanh(x) * 0.8 - x * 0.05
        return x

    def f(x, w):
        return tg.fori_loop(0, 3, lambda i, v: chain(w @ v), x)

    x, w = np.linspace(-1.0, 1.0, 8), np.eye(8) * 0.9 + 0.01
    src = compiled_source(tg.trace(f)(x, w))
    assert "def nest" in src and "_ws(" in src
    got, want = _both(f, x, w)
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-300)


def _gated_cells(params, xs):
    """Two LSTM layers of 14 cells (GradBench's objective): the weights and biases are rows
    of `params`, the states are stacked; each step stores five vectors (the two layers'
    new states and the prediction) and reads some twenty-five (the weights and biases of
    each gate, the states, the sequence's rows), then a log-sum-exp over the prediction."""
    def sigmoid(v):
        return 1.0 / (1.0 + tnp.exp(-v))

    weight, bias = params[0:4:2].reshape(2, 4, 14), params[1:4:2].reshape(2, 4, 14)

    def step(carry, pair):
        (hidden, cell), (x, gold) = carry, pair
        hs, cs = [], []
        for i in range(2):
            forget = sigmoid(x * weight[i, 0] + bias[i, 0])
            ingate = sigmoid(hidden[i] * weight[i, 1] + bias[i, 1])
            outgate = sigmoid(x * weight[i, 2] + bias[i, 2])
            c = cell[i] * forget + ingate * tnp.tanh(hidden[i] * weight[i, 3] + bias[i, 3])
            x = outgate * tnp.tanh(c)
            hs.append(x)
            cs.append(c)
        pred = x * params[4, :14] + params[5, :14]
        norm = pred - tnp.log(tnp.sum(tnp.exp(pred)) + 2.0)
        return (tnp.stack(hs), tnp.stack(cs)), tnp.sum(gold * norm)

    state = tnp.zeros((2, 14))
    return tnp.sum(tg.scan(step, (state, state), (xs[:-1], xs[1:]))[1])


def _step_llvm(dispatcher) -> str:
    """The optimized LLVM IR of a step function: translated (llvmgen.py) or Numba's."""
    from tracegrad.backends.numba import llvmgen

    return llvmgen.inspect_llvm(dispatcher) or "\n".join(dispatcher.inspect_llvm().values())


@pytest.mark.parametrize("translated", [True, False])
def test_a_step_loop_reading_many_arrays_vectorizes_and_its_sums_allocate_nothing(
        tmp_path, monkeypatch, translated):
    from tests.backends._codegen_probe import kernel_module
    from tracegrad.backends import numba as nb
    from tracegrad.backends.numba import llvmgen

    monkeypatch.setattr(llvmgen, "ENABLED", translated)
    rng = np.random.default_rng(7)
    weights, xs = rng.uniform(-1, 1, (6, 56)), rng.uniform(0, 1, (40, 14))
    # compiled here (cached machine code has no text to inspect)
    monkeypatch.setenv("TRACEGRAD_CACHE_DIR", str(tmp_path))
    nb.clear_memory_cache()
    graph = optimize(tg.trace(_gated_cells)(weights, xs))
    src = nb.generate_source(graph)
    step = re.search(r"\ndef (while_step\d+)\(.*?\n(.*?)\n\n", src, re.S)
    assert "np.empty" not in step.group(2)  # the sums' block buffers too: from the workspace
    nb.compile_graph(graph)
    llvm = _step_llvm(getattr(kernel_module(src), step.group(1)))
    # exp's reduction constant (1/ln 2) multiplies vectors: the step's loop, which stores
    # five arrays and reads twenty, is vectorized (it needed more run-time alias checks
    # than LLVM allows by default, and ran scalar), translated to LLVM IR or not
    assert re.search(r"fmul (fast )?<\d+ x double> [^\n]*0x3FF71547652B82FE", llvm)
    got, want = _both(_gated_cells, weights, xs)
    np.testing.assert_allclose(got, want, rtol=1e-13)


def test_a_loop_runs_in_its_step_function_compiled_once(tmp_path, monkeypatch):
    """The step function of a loop with a bounded history runs the whole loop; the kernel
    calls it once and holds none of its code (LLVM compiled it once, not again there)."""
    from tests.backends._codegen_probe import kernel_module
    from tracegrad.backends import numba as nb

    rng = np.random.default_rng(8)
    w, xs = rng.standard_normal((4, 4)) / 3, rng.standard_normal((30, 4))

    def loss(h0):
        hs = tg.scan(lambda h, x: (tnp.tanh(w @ h + x),) * 2, h0, xs)[1]
        return tnp.sum(hs ** 2)

    monkeypatch.setenv("TRACEGRAD_CACHE_DIR", str(tmp_path))
    nb.clear_memory_cache()
    graph = optimize(tg.trace(tg.grad(loss))(np.full(4, 0.1)))
    src = nb.generate_source(graph)
    steps = re.findall(r"^def (while_step\d+)\(", src, re.M)
    kernel = src[src.index("def kernel("):]
    assert len(steps) == 2  # the forward and backward loops
    assert not re.search(r"^ +while ", kernel, re.M)
    assert all(kernel.count(f"_direct_step({s}, ") == 1 for s in steps)
    nb.compile_graph(graph)
    module = kernel_module(src)
    llvm = "\n".join(module.kernel.inspect_llvm().values())
    defined = [line for line in llvm.splitlines() if line.startswith("define")]
    assert not any("while_step" in line or "tg_direct." in line for line in defined)
    assert len(re.findall(r"^declare .*tg_direct\.", llvm, re.M)) == 2  # the steps, called
    for s in steps:
        assert any(line.startswith("define") and (s in line or "tg_direct." in line)
                   for line in _step_llvm(getattr(module, s)).splitlines())
    got, want = _both(tg.grad(loss), np.full(4, 0.1))
    np.testing.assert_allclose(got, want, rtol=1e-13)

    def loss_np(h):
        total = 0.0
        for x in xs:
            h = np.tanh(w @ h + x)
            total += np.sum(h ** 2)
        return total

    np.testing.assert_allclose(got, central_difference(loss_np, np.full(4, 0.1)), rtol=1e-6)
