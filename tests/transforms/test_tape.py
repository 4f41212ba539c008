"""GradientTape, eagerly: the examples of the seeds' docstrings and their error conditions."""

import warnings

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tracegrad.errors import ShapeError


def value(t):
    return np.asarray(t.numpy())


# -- the seeds' docstring examples -----------------------------------------------------------


def test_gradient_of_square_at_3_is_6():
    x = tg.constant(3.0)
    with tg.GradientTape() as g:
        g.watch(x)
        y = x * x
    dy_dx = g.gradient(y, x)
    assert isinstance(dy_dx, tg.Tensor)
    assert dy_dx.dtype == np.float64
    assert dy_dx.numpy() == 6.0


def test_nested_tapes_give_second_derivative_at_5():
    x = tg.constant(5.0)
    with tg.GradientTape() as g:
        g.watch(x)
        with tg.GradientTape() as gg:
            gg.watch(x)
            y = x * x
        dy_dx = gg.gradient(y, x)
    d2y_dx2 = g.gradient(dy_dx, x)
    assert dy_dx.numpy() == 10.0
    assert d2y_dx2.numpy() == 2.0


def test_watch_is_local_to_its_tape_as_in_the_seed():
    # Only the inner tape watches x: the outer one records nothing on x's path, so it has
    # no second derivative (the 2018 seed watched on every tape; the recent one does not).
    x = tg.constant(3.0)
    with tg.GradientTape() as g:
        with tg.GradientTape() as gg:
            gg.watch(x)
            y = x * x
        dy_dx = gg.gradient(y, x)
    assert dy_dx.numpy() == 6.0
    assert g.gradient(dy_dx, x) is None


def test_a_tape_does_not_see_what_only_a_sibling_or_inner_tape_watched():
    x = tg.constant(2.0)
    with tg.GradientTape(persistent=True) as tape1, tg.GradientTape() as tape2:
        tape2.watch(x)
        y = x ** 3
    assert tape2.gradient(y, x).numpy() == 12.0
    assert tape1.gradient(y, x) is None
    assert tape1.gradient(y, x, unconnected_gradients="zero").numpy() == 0.0


def test_outer_tape_that_watches_x_gives_the_second_derivative():
    x = tg.constant(3.0)
    with tg.GradientTape() as g:
        g.watch(x)
        with tg.GradientTape() as gg:
            gg.watch(x)
            y = x * x * x
        dy_dx = gg.gradient(y, x)
    assert dy_dx.numpy() == 27.0
    assert g.gradient(dy_dx, x).numpy() == 18.0


def test_persistent_tape_gives_108_and_6():
    x = tg.constant(3.0)
    with tg.GradientTape(persistent=True) as g:
        g.watch(x)
        y = x * x
        z = y * y
    assert g.gradient(z, x).numpy() == 108.0  # 4 x^3
    assert g.gradient(y, x).numpy() == 6.0


def test_watch_accessed_variables_false_example():
    x = tg.Variable(2.0)
    w = tg.Variable(5.0)
    with tg.GradientTape(watch_accessed_variables=False, persistent=True) as tape:
        tape.watch(x)
        y = x ** 2
        z = w ** 3
    assert tape.gradient(y, x).numpy() == 4.0
    assert tape.gradient(z, w) is None
    assert tape.watched_variables() == (x,)


def test_stop_recording_example_gives_none():
    x = tg.constant(4.0)
    with tg.GradientTape() as tape, tape.stop_recording():
        y = x ** 2
    assert tape.gradient(y, x) is None


def test_stop_recording_around_gradient_of_persistent_tape_does_not_warn():
    v = tg.Variable(2.0)
    with tg.GradientTape(persistent=True) as t:
        loss = v * v * v
        with t.stop_recording(), warnings.catch_warnings():
            warnings.simplefilter("error")
            (grad,) = t.gradient(loss, [v])
        after = len(t._tape.records)
    assert grad.numpy() == 12.0
    assert after == 2  # the gradient ops were not recorded


def test_stop_recording_still_watches_for_ops_after_it():
    x = tg.constant(2.0)
    with tg.GradientTape() as tape:
        tape.watch(x)
        with tape.stop_recording():
            a = x * 10.0
        y = a * x
    assert tape.gradient(y, x).numpy() == 20.0  # `a` is a constant to the tape


def test_reset_forgets_what_was_recorded_before():
    x = tg.Variable(3.0)
    with tg.GradientTape() as t:
        loss = x * x
        t.reset()
        loss = loss + x * 10.0
    assert t.gradient(loss, x).numpy() == 10.0


@pytest.mark.parametrize("pfor", [False, True], ids=["loop", "pfor"])
def test_jacobian_example(pfor):
    x = tg.constant([1.0, 2.0])
    with tg.GradientTape(persistent=True) as g:
        g.watch(x)
        y = x * x
    jac = g.jacobian(y, x, experimental_use_pfor=pfor)
    np.testing.assert_array_equal(value(jac), [[2.0, 0.0], [0.0, 4.0]])


@pytest.mark.parametrize("pfor", [False, True], ids=["loop", "pfor"])
def test_batch_jacobian_example(pfor):
    x = tg.constant([[1.0, 2.0], [3.0, 4.0]])
    with tg.GradientTape(persistent=True) as g:
        g.watch(x)
        y = x * x
    bj = g.batch_jacobian(y, x, experimental_use_pfor=pfor)
    np.testing.assert_array_equal(value(bj), [[[2, 0], [0, 4]], [[6, 0], [0, 8]]])


# -- the error conditions ----------------------------------------------------------------------


def test_non_persistent_tape_used_twice_raises_runtime_error():
    x = tg.constant(3.0)
    with tg.GradientTape() as g:
        g.watch(x)
        y = x * x
    g.gradient(y, x)
    with pytest.raises(RuntimeError, match="non-persistent"):
        g.gradient(y, x)
    with pytest.raises(RuntimeError, match="non-persistent"):
        g.jacobian(y, x, experimental_use_pfor=False)


def test_reentering_a_recording_tape_raises_value_error():
    with tg.GradientTape() as g, pytest.raises(ValueError, match="re-enter"), g:
        pass


def test_target_none_raises_type_error():
    x = tg.constant(1.0)
    with tg.GradientTape() as g:
        g.watch(x)
    with pytest.raises(TypeError, match="received None"):
        g.gradient(None, x)


def test_unknown_unconnected_gradients_raises_value_error():
    x = tg.constant(1.0)
    with tg.GradientTape() as g:
        g.watch(x)
        y = x * 2.0
    with pytest.raises(ValueError, match="unconnected_gradients"):
        g.gradient(y, x, unconnected_gradients="nan")


def test_watch_of_a_non_tensor_raises_value_error():
    with tg.GradientTape() as g:
        for bad in (1.0, np.ones(2), None, [tg.constant(1.0), "x"]):
            with pytest.raises(ValueError, match="not tg.Tensor"):
                g.watch(bad)


def test_watch_of_an_integer_tensor_warns_and_its_gradient_is_none():
    i = tg.constant([1, 2])
    with tg.GradientTape() as g:
        with pytest.warns(UserWarning, match="must be floating"):
            g.watch(i)
        y = i * 3
    assert g.gradient(y, i) is None


def test_gradient_inside_persistent_context_warns_once_and_records():
    x = tg.constant(3.0)
    with tg.GradientTape(persistent=True) as g:
        g.watch(x)
        y = x * x * x
        with pytest.warns(UserWarning, match="inside its context"):
            dy = g.gradient(y, x)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            dy_again = g.gradient(y, x)
    assert dy.numpy() == dy_again.numpy() == 27.0
    assert g.gradient(dy, x).numpy() == 18.0  # the gradient ops were recorded: 6x


def test_gradient_inside_non_persistent_context_stops_recording():
    x = tg.constant(3.0)
    with tg.GradientTape() as g:
        g.watch(x)
        y = x * x
        dy = g.gradient(y, x)
        z = dy * x  # not recorded any more
    assert dy.numpy() == 6.0
    assert z.numpy() == 18.0
    with pytest.raises(RuntimeError):
        g.gradient(z, x)


def test_stop_recording_of_a_tape_not_recording_raises_as_the_seed():
    # No recording at all: RuntimeError; a recording that is paused (after the context
    # exited): the ValueError of popping a tape that is not recording.
    g = tg.GradientTape()
    with pytest.raises(RuntimeError, match="not recording"), g.stop_recording():
        pass
    with g:
        pass
    with pytest.raises(ValueError, match="Tape is not recording"), g.stop_recording():
        pass


def test_watch_on_a_tape_with_no_recording_raises_runtime_error():
    x = tg.constant(1.0)
    g = tg.GradientTape()
    with pytest.raises(RuntimeError, match="inside `with tape:`"):
        g.watch(x)
    with pytest.raises(ValueError, match="not tg.Tensor"):  # leaves are checked first
        g.watch("x")
    with g:
        g.watch(x)
        y = x * x
    assert g.gradient(y, x).numpy() == 2.0
    with pytest.raises(RuntimeError, match="used up"):
        g.watch(x)  # a used non-persistent tape: no way around "used twice"


def test_reset_of_a_tape_not_recording_raises_value_error():
    g = tg.GradientTape()
    with pytest.raises(ValueError, match="not recording"):
        g.reset()


def test_sequential_jacobians_need_a_persistent_tape_eagerly():
    x = tg.constant([[1.0, 2.0]])
    with tg.GradientTape() as g:
        g.watch(x)
        y = x * x
    with pytest.raises(RuntimeError, match="persistent=True to compute the jacobian"):
        g.jacobian(y, x, experimental_use_pfor=False)
    with tg.GradientTape() as g:
        g.watch(x)
        y = x * x
    with pytest.raises(RuntimeError, match="persistent=True to compute the batch_jacobian"):
        g.batch_jacobian(y, x, experimental_use_pfor=False)


@pytest.mark.parametrize("tshape,sshape,message", [
    ((3,), (3, 2), "at least rank 2 .* target shape"),
    ((3, 2), (3,), "at least rank 2 .* source shape"),
    ((3, 2), (4, 2), "Need first dimension of target shape"),
])
@pytest.mark.parametrize("pfor", [False, True], ids=["loop", "pfor"])
def test_batch_jacobian_rejects_mismatched_batch_dims(tshape, sshape, message, pfor):
    # The seed's checks in its order: ranks first, then the batch dims.
    x = tg.constant(np.ones(sshape))
    t = tg.constant(np.ones(tshape))
    with tg.GradientTape(persistent=True) as g:
        g.watch(x)
    with pytest.raises(ShapeError, match=message) as info:
        g.batch_jacobian(t, x, experimental_use_pfor=pfor)
    assert isinstance(info.value, ValueError)


# -- structures, variables, dtypes ---------------------------------------------------------------


def test_gradient_mirrors_the_structure_of_sources_and_sums_structured_targets():
    x = tg.constant([1.0, 2.0])
    y = tg.constant(3.0)
    v = tg.Variable([0.5, -1.0])
    with tg.GradientTape() as g:
        g.watch([x, y])
        out = {"a": x * y, "b": (tnp.sum(x * v), y * y)}
    grads = g.gradient(out, {"x": x, "rest": [y, (v,)]})
    assert set(grads) == {"x", "rest"}
    np.testing.assert_allclose(value(grads["x"]), [3.0 + 0.5, 3.0 - 1.0])
    assert grads["rest"][1][0] is not None
    np.testing.assert_allclose(value(grads["rest"][0]), 1.0 + 2.0 + 6.0)
    np.testing.assert_allclose(value(grads["rest"][1][0]), [1.0, 2.0])


def test_output_gradients_weight_the_targets():
    x = tg.constant([1.0, 2.0, 3.0])
    with tg.GradientTape() as g:
        g.watch(x)
        y = x * x
    dx = g.gradient(y, x, output_gradients=tg.constant([1.0, 0.0, -2.0]))
    np.testing.assert_allclose(value(dx), [2.0, 0.0, -12.0])


def test_variables_are_watched_when_read_and_reads_add_up():
    v = tg.Variable(3.0)
    frozen = tg.Variable(2.0, trainable=False)
    with tg.GradientTape() as g:
        y = v * v + v * frozen
    dv, dfrozen = g.gradient(y, [v, frozen])
    assert dv.numpy() == 2 * 3.0 + 2.0
    assert dfrozen is None


def test_a_variable_may_be_the_target():
    v = tg.Variable([1.0, 2.0])
    with tg.GradientTape() as g:
        pass
    np.testing.assert_array_equal(value(g.gradient(v, v)), [1.0, 1.0])


def test_watched_variables_are_in_creation_order():
    a, b, c = tg.Variable(1.0), tg.Variable(2.0), tg.Variable(3.0, trainable=False)
    with tg.GradientTape() as g:
        _ = c * b * a
    assert g.watched_variables() == (a, b)
    with tg.GradientTape() as g2:
        g2.watch(c)
        _ = b * 2.0
    assert g2.watched_variables() == (b, c)
    g2.gradient(_, b)
    assert g2.watched_variables() == (b, c)  # still known after the tape was used


def test_integer_sources_give_none_and_unconnected_give_none_or_zeros():
    x = tg.constant(2.0)
    unused = tg.constant([1.0, 1.0])
    k = tg.constant(3)
    with tg.GradientTape(persistent=True) as g:
        with pytest.warns(UserWarning, match="got int64"):
            g.watch([x, unused, k])
        y = x * tnp.astype(k, "float64")
    assert g.gradient(y, k) is None
    assert g.gradient(y, unused) is None
    zeros = g.gradient(y, [unused, x], unconnected_gradients=tg.UnconnectedGradients.ZERO)
    np.testing.assert_array_equal(value(zeros[0]), [0.0, 0.0])
    assert zeros[1].numpy() == 3.0


def test_only_ops_on_watched_tensors_are_recorded():
    x = tg.constant(2.0)
    c = tg.constant(5.0)
    with tg.GradientTape() as g:
        g.watch(x)
        _ = c * c + c  # nothing watched: not recorded
        y = x * c
    assert len(g._tape.records) == 1
    assert g.gradient(y, x).numpy() == 5.0


def test_same_tensor_twice_as_source_gets_its_gradient_twice():
    x = tg.constant(2.0)
    with tg.GradientTape() as g:
        g.watch(x)
        y = x * x
    a, b = g.gradient(y, [x, x])
    assert a.numpy() == b.numpy() == 4.0


def test_tape_reused_after_gradient_starts_a_new_recording():
    x = tg.constant(2.0)
    g = tg.GradientTape()
    with g:
        g.watch(x)
        y = x * x
    assert g.gradient(y, x).numpy() == 4.0
    with g:
        g.watch(x)
        z = x * x * x
    assert g.gradient(z, x).numpy() == 12.0


@pytest.mark.parametrize("pfor", [False, True], ids=["loop", "pfor"])
def test_jacobian_of_structured_sources_and_unconnected(pfor):
    x = tg.constant([1.0, 2.0, 3.0])
    w = tg.constant([[1.0, 2.0], [3.0, 4.0]])
    u = tg.constant(7.0)
    with tg.GradientTape(persistent=True) as g:
        g.watch([x, w, u])
        y = tnp.reshape(x[:2] * x[1:], (2, 1)) * w  # [2, 2]
    jx, jw, ju = g.jacobian(y, [x, w, u], experimental_use_pfor=pfor)
    assert ju is None
    assert value(jx).shape == (2, 2, 3) and value(jw).shape == (2, 2, 2, 2)
    p = np.array([1.0 * 2.0, 2.0 * 3.0])
    expect_x = np.zeros((2, 2, 3))
    for i in range(2):
        for j in range(2):
            expect_x[i, j, i] = x.numpy()[i + 1] * w.numpy()[i, j]
            expect_x[i, j, i + 1] = x.numpy()[i] * w.numpy()[i, j]
    np.testing.assert_allclose(value(jx), expect_x)
    expect_w = np.zeros((2, 2, 2, 2))
    for i in range(2):
        for j in range(2):
            expect_w[i, j, i, j] = p[i]
    np.testing.assert_allclose(value(jw), expect_w)
    zu = g.jacobian(y, u, unconnected_gradients="zero", experimental_use_pfor=pfor)
    np.testing.assert_array_equal(value(zu), np.zeros((2, 2)))


@pytest.mark.parametrize("pfor", [False, True], ids=["loop", "pfor"])
def test_batch_jacobian_of_a_map_with_matrix_rows(pfor):
    rng = np.random.default_rng(1)
    a = rng.normal(size=(3, 4))
    m = rng.normal(size=(4, 2))
    x = tg.constant(a)
    with tg.GradientTape(persistent=True) as g:
        g.watch(x)
        y = tnp.sin(x) @ m  # [3, 2]
    bj = value(g.batch_jacobian(y, x, experimental_use_pfor=pfor))
    expect = np.stack([m.T * np.cos(a[b]) for b in range(3)])
    np.testing.assert_allclose(bj, expect, rtol=1e-12)
    with tg.GradientTape(persistent=True) as g:
        g.watch(x)
        unrelated = tg.constant(np.ones((3, 5)))
    np.testing.assert_array_equal(
        value(g.batch_jacobian(unrelated, x, experimental_use_pfor=pfor)),
        np.zeros((3, 5, 4)))


@pytest.mark.parametrize("pfor", [False, True], ids=["loop", "pfor"])
def test_hessian_with_nested_persistent_tapes_and_jacobian(pfor):
    x = tg.constant([1.0, 2.0])
    with tg.GradientTape(persistent=True) as outer:
        outer.watch(x)
        with tg.GradientTape() as inner:
            inner.watch(x)
            y = tnp.sum(x * x * x) + x[0] * x[1]
        g = inner.gradient(y, x)
    h = outer.jacobian(g, x, experimental_use_pfor=pfor)
    np.testing.assert_allclose(value(h), [[6.0, 1.0], [1.0, 12.0]])


def test_a_refused_jacobian_leaves_the_tape_recording_and_usable():
    x = tg.constant([1.0, 2.0])
    with tg.GradientTape() as g:
        g.watch(x)
        y = x * x
        with pytest.raises(RuntimeError, match="persistent=True"):
            g.jacobian(y, x, experimental_use_pfor=False)
        z = y * x
    np.testing.assert_array_equal(value(g.gradient(z, x)), [3.0, 12.0])


def test_output_gradients_may_be_numbers_and_lists_of_the_targets_dtype():
    x = tg.constant([1.0, 2.0])
    with tg.GradientTape(persistent=True) as g:
        g.watch(x)
        y = x * x
        s = tnp.sum(x)
    np.testing.assert_array_equal(value(g.gradient(y, x, output_gradients=np.array([3, -1]))), [6.0, -4.0])
    np.testing.assert_array_equal(value(g.gradient([y, s], x, output_gradients=[None, 2])),
                                  [4.0, 6.0])


def test_a_watched_tensor_that_is_dropped_leaves_no_id_for_new_tensors_to_reuse():
    # The tape tracks tensors by id(); it keeps watched tensors alive so that no tensor
    # made later inherits a watched id (and a gradient it should not have).
    with tg.GradientTape(persistent=True) as tape:
        for _ in range(50):
            tape.watch(tg.constant([1.0]))
        xs = [tg.constant([2.0]) for _ in range(50)]
        ys = [x * 3.0 for x in xs]
        v = tg.Variable([1.0])
        z = v * 2.0
    assert all(tape.gradient(y, x) is None for y, x in zip(ys, xs, strict=True))
    for _ in range(3):  # each call reads the variable as a fresh tensor
        np.testing.assert_array_equal(tape.gradient(z, v).numpy(), [2.0])
    fresh = [tg.constant([2.0]) for _ in range(50)]
    assert all(tape.gradient(z, t) is None for t in fresh)


@pytest.mark.parametrize("where", ["target", "source"])
def test_a_leaked_traced_tensor_is_refused_by_gradient(where):
    leaked = []

    @tg.function(backend="numpy")
    def f(x):
        leaked.append(x * 2.0)
        return x

    f(tg.constant(1.0))
    x = tg.constant(1.0)
    with tg.GradientTape() as tape:
        tape.watch(x)
        y = x * 3.0
    with pytest.raises(tg.errors.TracegradError, match="leaked tracer") as info:
        if where == "target":
            tape.gradient(leaked[0], x)
        else:
            tape.gradient(y, [x, leaked[0]])
    assert "test_tape.py" in str(info.value)


def test_a_tape_inside_a_trace_differentiates_the_trace_s_tensors():
    @tg.function(backend="numpy")
    def f(x):
        with tg.GradientTape() as tape:
            tape.watch(x)
            y = tnp.sin(x) * x
        return tape.gradient(y, x)

    v = 0.7
    np.testing.assert_allclose(float(f(tg.constant(v))), np.cos(v) * v + np.sin(v), rtol=1e-12)
