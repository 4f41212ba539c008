"""tg.cond, tg.while_loop, tg.fori_loop, tg.scan: eager and traced values on both backends,
the cond gradient (the seed's rule), batching (a select for a batched predicate, masked
lanes for a batched loop condition), closures, errors, and the IR forms."""

from __future__ import annotations

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tracegrad.core.verify import verify
from tests.finite_diff import central_difference

RNG = np.random.default_rng(2)
W = np.array([0.5, -1.5, 2.0])


def piecewise(x):
    return tg.cond(tnp.sum(x) > 0, lambda v: tnp.sin(v) * W, lambda v: v * v, operands=(x,))


def piecewise_np(x):
    return np.sin(x) * W if np.sum(x) > 0 else x * x


def euler(x, steps=50):
    return tg.fori_loop(0, steps, lambda i, v: v + 0.01 * tnp.sin(v), x)


def euler_np(x, steps=50):
    for _ in range(steps):
        x = x + 0.01 * np.sin(x)
    return x


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_cond_values_eager_and_traced(sign, backend):
    x = sign * np.array([0.3, 0.2, 0.9])
    np.testing.assert_allclose(tg.function(piecewise)(x), piecewise_np(x), rtol=1e-15)
    np.testing.assert_allclose(piecewise(x), piecewise_np(x), rtol=1e-15)  # NumPy, eagerly
    np.testing.assert_allclose(np.asarray(piecewise(tg.constant(x))), piecewise_np(x))


def test_only_the_taken_branch_runs(backend):
    # an out-of-bounds gather raises IndexError where it runs: the untaken branch must not
    g = tg.function(lambda x, i: tg.cond(i < 3, lambda: tnp.take(x, i), lambda: x[0] * 0.0))
    assert g(np.arange(3.0), np.int64(2)) == 2.0
    assert g(np.arange(3.0), np.int64(7)) == 0.0
    with pytest.raises(IndexError):
        tg.function(lambda x, i: tnp.take(x, i))(np.arange(3.0), np.int64(7))


def test_cond_gradient_is_the_taken_branchs(backend):
    for x in (np.array([0.3, 0.2, 0.9]), np.array([-0.3, 0.2, -0.9])):
        g = tg.grad(lambda v: tnp.sum(piecewise(v)))(x)
        want = np.cos(x) * W if np.sum(x) > 0 else 2 * x
        np.testing.assert_allclose(g, want, rtol=1e-14)
        h = tg.hessian(lambda v: tnp.sum(piecewise(v)))(x)
        np.testing.assert_allclose(h, np.diag(-np.sin(x) * W if np.sum(x) > 0 else 2.0 + 0 * x),
                                   rtol=1e-14, atol=1e-15)


def test_cond_gradient_reaches_closed_over_values_with_zeros_where_unused():
    y = np.array([2.0, 3.0])

    def f(x, y):
        return tnp.sum(tg.cond(x[0] > 0, lambda: x * y, lambda: x + 1.0))

    gx, gy = tg.grad(f, argnums=(0, 1))(np.array([1.0, 1.0]), y)
    np.testing.assert_array_equal(gx, y)
    np.testing.assert_array_equal(gy, [1.0, 1.0])
    gx, gy = tg.grad(f, argnums=(0, 1))(np.array([-1.0, 1.0]), y)
    np.testing.assert_array_equal(gx, [1.0, 1.0])
    np.testing.assert_array_equal(gy, [0.0, 0.0])


def test_cond_under_a_tape_eagerly_and_traced():
    x = tg.constant([0.3, 0.2, 0.9])
    with tg.GradientTape() as t:
        t.watch(x)
        y = tnp.sum(piecewise(x))
    np.testing.assert_allclose(np.asarray(t.gradient(y, x)), np.cos(x.numpy()) * W)

    @tg.function
    def traced(x):
        with tg.GradientTape() as t:
            t.watch(x)
            y = tnp.sum(piecewise(x))
        return t.gradient(y, x)

    np.testing.assert_allclose(traced(-x.numpy()), -2 * x.numpy())


def test_vmap_of_cond_with_a_batched_predicate_selects(backend):
    xs = RNG.normal(size=(6, 3))
    np.testing.assert_allclose(tg.vmap(piecewise)(xs),
                               np.stack([piecewise_np(x) for x in xs]), rtol=1e-15)
    per_example = tg.vmap(tg.grad(lambda v: tnp.sum(piecewise(v))))(xs)
    np.testing.assert_allclose(per_example, np.stack(
        [np.cos(x) * W if x.sum() > 0 else 2 * x for x in xs]), rtol=1e-14)
    graph = tg.trace(tg.vmap(piecewise))(xs)
    assert not [op for op in graph.operations if op.primitive.name == "cond"]  # a select


def test_vmap_of_cond_with_a_shared_predicate_keeps_the_cond(backend):
    xs = RNG.normal(size=(4, 3))
    f = tg.vmap(lambda x, flag: tg.cond(flag > 0, lambda: x * 2.0, lambda: -x),
                in_axes=(0, None))
    np.testing.assert_array_equal(f(xs, 1.0), 2 * xs)
    np.testing.assert_array_equal(f(xs, -1.0), -xs)
    assert [op for op in tg.trace(f)(xs, 1.0).operations if op.primitive.name == "cond"]


def test_while_fori_and_scan_values(backend):
    x = RNG.normal(size=5)
    np.testing.assert_allclose(tg.function(euler)(x), euler_np(x), rtol=1e-13)
    n, s = tg.function(lambda x: tg.while_loop(lambda i, s: tnp.sum(s) < 100.0,
                                               lambda i, s: (i + 1, s * 2.0),
                                               (0, tnp.abs(x) + 1.0)))(x)
    k, v = 0, np.abs(x) + 1.0
    while v.sum() < 100.0:
        k, v = k + 1, v * 2.0
    assert n == k
    np.testing.assert_allclose(s, v)
    carry, ys = tg.function(lambda xs: tg.scan(lambda c, x: (c + x, c * x), 0.0, xs))(x)
    cs = np.concatenate([[0.0], np.cumsum(x)[:-1]])
    np.testing.assert_allclose(carry, x.sum(), rtol=1e-14)
    np.testing.assert_allclose(ys, cs * x, rtol=1e-14)
    rc, rys = tg.scan(lambda c, x: (c + x, c * x), 0.0, x, reverse=True)
    rcs = np.concatenate([np.cumsum(x[::-1])[:-1][::-1], [0.0]])
    np.testing.assert_allclose(rys, rcs * x, rtol=1e-14)
    traced = tg.function(lambda xs: tg.scan(lambda c, x: (c + x, c * x), 0.0, xs,
                                            reverse=True))(x)
    np.testing.assert_allclose(traced[1], rys, rtol=1e-14)


def test_a_scan_of_no_steps_gives_empty_ys_of_the_steps_types(backend):
    def f(xs):
        return tg.scan(lambda c, x: (c + tnp.sum(x), (c * x, x[None] > 0)), 1.5, xs)

    for run in (f, tg.function(f)):  # eagerly and traced
        c, (a, b) = run(np.zeros((0, 3)))
        assert c == 1.5
        assert a.shape == (0, 3) and a.dtype == np.float64
        assert b.shape == (0, 1, 3) and b.dtype == np.bool_


@pytest.mark.parametrize("rows", [3, 0])
@pytest.mark.parametrize("reverse", [False, True])
def test_a_scan_whose_ys_have_unknown_dims(backend, rows, reverse):
    # found by the fuzzer: ys with a TensorSpec's None dims crashed the trace (a zeros buffer
    # of shape [?]; np.zeros((0, None)) for no steps)
    def f(x):
        return tg.scan(lambda c, r: (c + r, (c * r, tnp.sum(r))), x, tnp.stack([x, -x])[:rows],
                       reverse=reverse)

    traced = tg.function(f, input_signature=[tg.TensorSpec([None, 2])])
    for n in (3, 1, 0):
        x = RNG.normal(size=(n, 2))
        (c, (a, b)), (want_c, (want_a, want_b)) = traced(x), f(tg.constant(x))
        np.testing.assert_array_equal(c, want_c)
        np.testing.assert_array_equal(a, want_a)
        np.testing.assert_array_equal(b, want_b)
        assert a.shape == (min(rows, 2), n, 2) and b.shape == (min(rows, 2),)
    assert traced.tracing_count == 1


def test_maximum_iterations_and_dynamic_trip_counts(backend):
    f = tg.function(lambda n: tg.while_loop(lambda i: i < n, lambda i: i + 1, (0,),
                                            maximum_iterations=7))
    assert f(np.int64(3))[0] == 3 and f(np.int64(100))[0] == 7
    g = tg.function(lambda lo, hi, x: tg.fori_loop(lo, hi, lambda i, v: v + i, x))
    assert g(np.int64(2), np.int64(5), 0) == 2 + 3 + 4
    assert g(np.int64(5), np.int64(2), 0) == 0
    assert g.tracing_count == 1


def test_vmap_of_a_loop_with_a_batched_condition_masks_finished_lanes(backend):
    def newton_sqrt(a):
        return tg.while_loop(lambda x, k: (tnp.abs(x * x - a) > 1e-12 * a) & (k < 60),
                             lambda x, k: (0.5 * (x + a / x), k + 1), (a, 0))

    a = np.array([2.0, 9.0, 1.0, 1e6])
    x, k = tg.vmap(newton_sqrt)(a)
    np.testing.assert_allclose(x, np.sqrt(a), rtol=1e-12)
    np.testing.assert_array_equal(k, [newton_sqrt(v)[1] for v in a])  # each lane's own count
    xs = RNG.normal(size=(3, 2))
    np.testing.assert_allclose(tg.vmap(euler)(xs), euler_np(xs), rtol=1e-13)


def test_loop_gradients_eagerly_and_traced_match_finite_differences(backend):
    x0 = RNG.normal(size=3)
    x = tg.constant(x0)
    with tg.GradientTape() as t:
        t.watch(x)
        y = tnp.sum(euler(x, steps=10))
    fd = central_difference(lambda v: euler_np(v, 10).sum(), x0)
    np.testing.assert_allclose(np.asarray(t.gradient(y, x)), fd, rtol=1e-8)
    np.testing.assert_allclose(tg.grad(lambda v: tnp.sum(euler(v, 10)))(x0), fd, rtol=1e-8)


def test_gradients_w_r_t_closed_over_parameters_and_the_initial_state(backend):
    def final(x, a):
        return tnp.sum(tg.fori_loop(0, 20, lambda i, v: v + a * tnp.sin(v), x))

    def final_np(x, a):
        for _ in range(20):
            x = x + a * np.sin(x)
        return x.sum()

    x, a = RNG.normal(size=3), 0.05
    gx, ga = tg.grad(final, argnums=(0, 1))(x, a)
    np.testing.assert_allclose(gx, central_difference(lambda v: final_np(v, a), x), rtol=1e-8)
    np.testing.assert_allclose(ga, (final_np(x, a + 1e-6) - final_np(x, a - 1e-6)) / 2e-6,
                               rtol=1e-7)


def test_a_dynamic_trip_count_is_differentiated_and_batched(backend):
    def newton_sqrt(a):  # how many iterations run depends on a
        x, _ = tg.while_loop(lambda x, k: tnp.abs(x * x - a) > 1e-10 * a,
                             lambda x, k: (0.5 * (x + a / x), k + 1), (a, 0))
        return x

    np.testing.assert_allclose(tg.grad(newton_sqrt)(9.0), 1 / 6, rtol=1e-9)
    a = np.array([4.0, 9.0, 100.0, 2.0])
    np.testing.assert_allclose(tg.vmap(tg.grad(newton_sqrt))(a), 0.5 / np.sqrt(a), rtol=1e-9)


def test_second_derivatives_through_a_loop():
    x = RNG.normal(size=3)
    h = tg.hessian(lambda v: tnp.sum(euler(v, 5)))(x)
    grad = lambda v: central_difference(lambda u: euler_np(u, 5).sum(), v, 1e-5)  # noqa: E731
    fd = np.array([(grad(x + 1e-4 * e) - grad(x - 1e-4 * e)) / 2e-4 for e in np.eye(3)])
    np.testing.assert_allclose(h, fd, rtol=1e-5, atol=1e-6)
    _, jt = tg.jvp(lambda v: euler(v, 5), (x,), (np.ones(3),))  # forward mode, transposed
    fd = (euler_np(x + 1e-6, 5) - euler_np(x - 1e-6, 5)) / 2e-6
    np.testing.assert_allclose(jt, fd, rtol=1e-8)


def test_branch_mismatches_are_clear_errors():
    with pytest.raises(tg.errors.ArgumentTypeError,
                       match=r"false_fn's result must have the structure of true_fn's result; "
                             r"true_fn's result is \(\*, \*\), false_fn's result is \*") as e:
        tg.function(lambda x: tg.cond(x[0] > 0, lambda: (x, x), lambda: x))(np.ones(2))
    assert "test_control_flow.py" in str(e.value)
    with pytest.raises(tg.errors.ShapeError, match=r"false_fn's result has shape \[2\] where "
                                                   r"true_fn's result has \[3\]"):
        tg.function(lambda x: tg.cond(x[0] > 0, lambda: x, lambda: x[:2]))(np.ones(3))
    with pytest.raises(tg.errors.ArgumentTypeError,
                       match=r"body_fn's result must have the structure of loop_vars"):
        tg.function(lambda x: tg.while_loop(lambda v: v[0] < 3, lambda v: (v, v), (x,)))(
            np.ones(2))
    with pytest.raises(tg.errors.ShapeError, match="predicate must be a scalar"):
        tg.function(lambda x: tg.cond(x > 0, lambda: x, lambda: -x))(np.ones(2))
    with pytest.raises(tg.errors.InvalidArgumentError, match="maximum_iterations"):
        tg.while_loop(lambda v: v < 3, lambda v: (v + 1,), (0,), maximum_iterations=-1)
    with pytest.raises(tg.errors.ArgumentTypeError, match="loop_vars must be a tuple"):
        tg.while_loop(lambda v: v < 3, lambda v: v + 1, 0)
    with pytest.raises(tg.errors.DTypeError,
                       match=r"tg.scan: fn's new carry has dtype float64 where init has float32 "
                             r"\(f64\[\] against f32\[\]\)"):
        tg.function(lambda xs: tg.scan(lambda c, x: (c + x, c), np.float32(0), xs))(np.ones(3))
    with pytest.raises(tg.errors.ArgumentTypeError, match=r"fn's new carry is \(\*, \*\)"):
        tg.function(lambda xs: tg.scan(lambda c, x: ((c, c), c), 0.0, xs))(np.ones(3))
    with pytest.raises(tg.errors.InvalidArgumentError, match="leading sizes"):
        tg.scan(lambda c, x: (c, x), 0.0, np.ones(3), length=4)
    with pytest.raises(tg.errors.ShapeError, match="predicate must be a scalar"):
        tg.function(lambda x: tg.cond(x > 0, lambda: x, lambda: -x))(np.ones(2))
    # a weak Python scalar takes the other branch's dtype
    out = tg.function(lambda x: tg.cond(x[0] > 0, lambda: x[0], lambda: 0.0))(
        np.ones(2, np.float32))
    assert out.dtype == np.float32


def test_sub_graphs_print_parse_serialize_and_verify():
    def f(x, n):
        y = piecewise(x)
        return tg.while_loop(lambda i, s: i < n, lambda i, s: (i + 1, s * 1.5 + y), (0, x))

    g = tg.trace(f)(tg.TensorSpec([3]), tg.TensorSpec([], "int64"))
    verify(g)
    text = str(g)
    assert "cond %" in text and "while %" in text and "body_graph=func @body_fn" in text
    assert str(tg.FuncGraph.parse(text)) == text
    assert str(tg.FuncGraph.from_json(g.to_json())) == text
    assert "cluster" in g.to_dot()


def test_compiled_source_holds_the_branches_and_loops():
    source = tg.compiled_source(tg.trace(lambda x: euler(piecewise(x)))(np.ones(3)))
    kernel = source[source.index("def kernel("):]
    step = source[source.index("def while_step"):]
    # the loop runs in its step's function, called once
    assert "\n    if " in kernel and "= _direct_step(while_step" in kernel
    assert "\n    while " in step[:step.index("\n\n")]
    for sub in ("def true_branch", "def false_branch", "def while_cond", "def while_step"):
        assert sub in source


def test_a_predicate_known_while_tracing_traces_only_the_chosen_branch():
    def f(x, flag):
        return tg.cond(flag, lambda: x * 2.0, lambda: x[:1])  # the other branch's shape differs

    g = tg.trace(f, static_argnums=(1,))(np.ones(3), True)
    assert not [op for op in g.operations if op.primitive.name == "cond"]
    np.testing.assert_array_equal(tg.function(f, static_argnums=(1,))(np.ones(3), False), [1.0])
    v = tg.Variable(True)  # a Variable is read at run time: a real cond
    h = tg.trace(lambda x: tg.cond(v, lambda: x * 2.0, lambda: -x))(np.ones(3))
    assert [op for op in h.operations if op.primitive.name == "cond"]


def _nested(x, a):
    """A scan whose step holds a cond and a fori_loop, inside a while."""
    def step(c, xi):
        c = tg.cond(xi > 0, lambda: c * a + xi, lambda: c - a * xi * xi)
        c = tg.fori_loop(0, 3, lambda i, v: v + 0.1 * tnp.sin(v), c)
        return c, c * xi

    def body(k, s):
        carry, ys = tg.scan(step, s, x)
        return k + 1, carry + tnp.sum(ys) * 0.01

    return tg.while_loop(lambda k, s: k < 2, body, (0, 0.5))[1]


def _nested_np(x, a):
    s = 0.5
    for _ in range(2):
        c, ys = s, []
        for xi in x:
            c = c * a + xi if xi > 0 else c - a * xi * xi
            for _ in range(3):
                c = c + 0.1 * np.sin(c)
            ys.append(c * xi)
        s = c + np.sum(ys) * 0.01
    return s


def test_nested_control_flow_values_gradients_and_batches(backend):
    x, a = np.array([0.4, -0.3, 0.8, -1.1]), 0.7
    np.testing.assert_allclose(tg.function(_nested)(x, a), _nested_np(x, a), rtol=1e-13)
    np.testing.assert_allclose(_nested(x, a), _nested_np(x, a), rtol=1e-13)  # eagerly
    gx, ga = tg.grad(_nested, argnums=(0, 1))(x, a)
    np.testing.assert_allclose(gx, central_difference(lambda v: _nested_np(v, a), x), rtol=1e-6)
    np.testing.assert_allclose(ga, (_nested_np(x, a + 1e-6) - _nested_np(x, a - 1e-6)) / 2e-6,
                               rtol=1e-6)
    xs = np.stack([x, -x, x * 0.5])
    np.testing.assert_allclose(tg.vmap(_nested, in_axes=(0, None))(xs, a),
                               [_nested_np(v, a) for v in xs], rtol=1e-13)
    jac = tg.jacobian(lambda v: tnp.stack([_nested(v, a), _nested(v * 2.0, a)]))(x)
    np.testing.assert_allclose(jac[0], gx, rtol=1e-12)
    t = tg.constant(x)
    with tg.GradientTape() as tape:
        tape.watch(t)
        y = _nested(t, a)
    np.testing.assert_allclose(np.asarray(tape.gradient(y, t)), gx, rtol=1e-12)


def test_lanes_a_batched_branch_or_loop_discards_cannot_raise(backend):
    x = np.arange(4.0)

    def walk(i0, n):  # a finished lane's body would read x[4]
        return tg.while_loop(lambda i, s: i < n, lambda i, s: (i + 1, s + tnp.take(x, i)),
                             (i0, 0.0))[1]

    np.testing.assert_array_equal(tg.vmap(walk, in_axes=(0, None))(np.array([2, 0, 4]), 4),
                                  [walk(i, 4) for i in (2, 0, 4)])
    pick = tg.vmap(lambda i: tg.cond(i < 4, lambda: tnp.take(x, i), lambda: -1.0))
    np.testing.assert_array_equal(pick(np.array([1, 7, 3])), [1.0, -1.0, 3.0])
    # an index a lane really uses still raises
    with pytest.raises(IndexError):
        tg.vmap(lambda i: tg.cond(i < 9, lambda: tnp.take(x, i), lambda: -1.0))(
            np.array([1, 7]))
    with pytest.raises(IndexError):
        tg.vmap(lambda i: tnp.take(x, i))(np.array([1, 7]))


def test_fori_loop_counts_in_the_bounds_dtype():
    seen = []

    def body(i, v):
        seen.append(i.dtype)
        return v + 1.0

    tg.function(lambda n: tg.fori_loop(0, n, body, 0.0))(np.int32(3))
    assert seen == [np.dtype(np.int32)]


def test_a_loop_gradient_reads_the_next_carry_from_the_history(backend):
    # tanh's gradient needs tanh's output: the carry after the step, which the history
    # holds; the backward loop does not compute the step again
    rng = np.random.default_rng(11)  # its own: the values do not depend on test order
    w = rng.normal(size=(4, 4)) / 2
    xs = rng.normal(size=(30, 4))

    def loss(w, h):
        return tnp.sum(tg.scan(lambda h, x: (tnp.tanh(w @ h + x),) * 2, h, xs)[1] ** 2)

    g = tg.optimize(tg.trace(tg.grad(loss))(w, np.zeros(4)))
    back = [op for op in g.operations if op.primitive.name == "while"][-1]
    assert {"tanh", "dot_general"} & {o.primitive.name for o in
                                      back.attrs["body_graph"].operations} == {"dot_general"}
    assert sum(o.primitive.name == "dot_general"
               for o in back.attrs["body_graph"].operations) == 2  # W^T g and g h^T only

    def loss_np(wf):
        h, total = np.zeros(4), 0.0
        for x in xs:
            h = np.tanh(wf.reshape(4, 4) @ h + x)
            total += np.sum(h ** 2)
        return total

    want = central_difference(loss_np, w.ravel())  # differences of a 30-step sum: ~1e-8 noise
    np.testing.assert_allclose(tg.grad(loss)(w, np.zeros(4)).ravel(), want, rtol=1e-6,
                               atol=1e-7 * np.abs(want).max())


def _while_carries(fn, *args):
    (loop,) = [op for op in tg.trace(fn)(*args).operations if op.primitive.name == "while"]
    return len(loop.inputs) - loop.attrs["num_consts"]


def test_a_scan_y_that_is_the_new_carry_is_read_from_the_carrys_history(backend):
    rng = np.random.default_rng(5)
    w, xs = rng.standard_normal((3, 3)) / 2, rng.standard_normal((9, 3))

    def rnn(h0, same):  # ys: the state itself and twice the state; the carry a pair
        def step(c, x):
            h = tnp.tanh(w @ c[0] + x)
            return (h, c[1] + 1.0), (h if same else h * 1.0, h * 2.0)
        return tg.scan(step, (h0, 0.0), xs)

    def rnn_np(h0):
        h, hs = h0, []
        for x in xs:
            h = np.tanh(w @ h + x)
            hs.append(h)
        return h, np.stack(hs)

    h0 = np.full(3, 0.1)
    # the counter, two carry leaves, a carry per y not aliased
    assert _while_carries(lambda h: rnn(h, True), h0) == 4
    assert _while_carries(lambda h: rnn(h, False), h0) == 5
    for same in (True, False):
        (h, k), (a, b) = tg.function(lambda h, same=same: rnn(h, same))(h0)
        want_h, want_hs = rnn_np(h0)
        np.testing.assert_allclose(a, want_hs, rtol=1e-13)
        np.testing.assert_allclose(b, 2 * want_hs, rtol=1e-13)
        np.testing.assert_allclose(h, want_h, rtol=1e-13)
        assert k == 9.0
    g = tg.grad(lambda h: tnp.sum(rnn(h, True)[1][0] ** 2))(h0)
    np.testing.assert_allclose(g, central_difference(
        lambda v: np.sum(rnn_np(v)[1] ** 2), h0), rtol=1e-6)


def test_a_scan_step_traced_otherwise_the_second_time_still_stacks_its_ys(backend):
    calls = []

    def step(c, x):  # the probe trace returns the carry as y, the loop's trace a new value
        calls.append(None)
        h = c * 0.5 + x
        return h, (h if len(calls) == 1 else h + 0.0)

    xs = np.arange(5.0)
    c, ys = tg.function(lambda c: tg.scan(step, c, xs))(1.0)
    want, h = [], 1.0
    for x in xs:
        h = h * 0.5 + x
        want.append(h)
    np.testing.assert_allclose(ys, want, rtol=1e-15)
    assert c == want[-1]


def test_the_residuals_of_a_step_are_its_own_tensors_when_inlining_adds_an_op():
    # a captured eager value is embedded as a constant op ahead of the step's copied ops:
    # the stored tensors are still the step's exp and log, not the ops before them
    from tracegrad.core.ir import EagerTensor, FuncGraph
    from tracegrad.core.types import TensorType
    from tracegrad.transforms.control_flow import vjp_graph_with_residuals

    step = FuncGraph("step")
    with step.as_default():
        (x,) = [step.add_input(TensorType((3,), np.dtype("float64")), "x")]
        c = step.capture(EagerTensor(np.array([0.5, 1.0, 2.0])), x.type)
        e = tnp.exp(x * c)
        lg = tnp.log(e + x * x)
        step.outputs = [e * lg]
    grad, stored = vjp_graph_with_residuals(step, [0])
    assert stored == [e, lg]
    assert [t.type for t in grad.inputs[-2:]] == [e.type, lg.type]
