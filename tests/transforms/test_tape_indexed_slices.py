"""tg.IndexedSlices: the sparse gradient tapes return for take/gather along axis 0."""

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp

TABLE = np.arange(12.0).reshape(4, 3)


def dense_rows(indices, values, shape=TABLE.shape):
    out = np.zeros(shape)
    np.add.at(out, np.asarray(indices), np.asarray(values))
    return out


def test_gradient_of_take_is_indexed_slices():
    p = tg.Variable(TABLE)
    idx = np.array([0, 2, 0])
    with tg.GradientTape() as g:
        y = tnp.take(p, idx, axis=0)
        z = tnp.sum(y * tg.constant([1.0, 2.0, 3.0]))
    d = g.gradient(z, p)
    assert isinstance(d, tg.IndexedSlices)
    assert d.dense_shape == (4, 3) and d.shape == (4, 3) and d.dtype == np.float64
    np.testing.assert_array_equal(d.indices.numpy(), idx)
    np.testing.assert_array_equal(d.values.numpy(), np.ones((3, 3)) * [1.0, 2.0, 3.0])
    dense = tg.convert_to_tensor(d)
    assert isinstance(dense, tg.Tensor)
    np.testing.assert_array_equal(dense.numpy(), dense_rows(idx, d.values.numpy()))
    np.testing.assert_array_equal(np.asarray(d), dense.numpy())


def test_two_lookups_are_aggregated_by_concatenation():
    p = tg.constant(TABLE)
    with tg.GradientTape() as g:
        g.watch(p)
        a = tnp.take(p, np.array([1, 3]), axis=0)
        b = tnp.take(p, np.array([3]), axis=0)
        z = tnp.sum(a) + tnp.sum(b * 10.0)
    d = g.gradient(z, p)
    assert isinstance(d, tg.IndexedSlices)
    assert sorted(d.indices.numpy().tolist()) == [1, 3, 3]
    assert d.indices.dtype == np.int64
    np.testing.assert_array_equal(np.asarray(d), dense_rows([1, 3, 3], [[1.0] * 3, [1.0] * 3,
                                                                        [10.0] * 3]))


def test_a_dense_use_makes_the_sum_dense():
    p = tg.constant(TABLE)
    with tg.GradientTape() as g:
        g.watch(p)
        z = tnp.sum(tnp.take(p, np.array([2]), axis=0)) + tnp.sum(p * 2.0)
    d = g.gradient(z, p)
    assert isinstance(d, tg.Tensor)
    np.testing.assert_array_equal(d.numpy(), 2.0 + dense_rows([2], [[1.0] * 3]))


def test_indexed_slices_through_an_op_before_the_lookup_is_densified():
    w = tg.constant(TABLE)
    with tg.GradientTape() as g:
        g.watch(w)
        p = w * 3.0
        z = tnp.sum(tnp.take(p, np.array([0, 0]), axis=0))
    d = g.gradient(z, w)
    assert isinstance(d, tg.Tensor)
    np.testing.assert_array_equal(d.numpy(), dense_rows([0, 0], np.full((2, 3), 3.0)))


def test_multidimensional_indices_and_nested_lookups():
    p = tg.constant(TABLE)
    idx = np.array([[0, 1], [1, 3]])
    with tg.GradientTape(persistent=True) as g:
        g.watch(p)
        y = tnp.take(p, idx, axis=0)  # [2, 2, 3]
        z = tnp.sum(y * np.arange(12.0).reshape(2, 2, 3))
        rows = tnp.take(tnp.take(p, np.array([3, 2, 1]), axis=0), np.array([0, 0]), axis=0)
        w = tnp.sum(rows)
    d = g.gradient(z, p)
    assert d.values.numpy().shape == (4, 3)
    np.testing.assert_array_equal(d.indices.numpy(), [0, 1, 1, 3])
    np.testing.assert_array_equal(np.asarray(d), dense_rows(idx.ravel(), np.arange(12.0)
                                                            .reshape(4, 3)))
    nested = g.gradient(w, p)
    assert isinstance(nested, tg.IndexedSlices)
    np.testing.assert_array_equal(nested.indices.numpy(), [3, 3])


def test_take_along_another_axis_and_graph_mode_stay_dense(backend):
    p = tg.constant(TABLE)
    with tg.GradientTape() as g:
        g.watch(p)
        z = tnp.sum(tnp.take(p, np.array([2, 2]), axis=1))
    d = g.gradient(z, p)
    assert isinstance(d, tg.Tensor)
    expect = np.zeros((4, 3))
    expect[:, 2] = 2.0
    np.testing.assert_array_equal(d.numpy(), expect)

    @tg.function
    def traced(p):
        with tg.GradientTape() as g:
            g.watch(p)
            z = tnp.sum(tnp.take(p, np.array([1, 1]), axis=0))
        return g.gradient(z, p), tg.gradients(z, p)[0]

    for out in traced(TABLE):
        assert isinstance(out, np.ndarray)
        np.testing.assert_array_equal(out, dense_rows([1, 1], np.ones((2, 3))))


def test_arithmetic_densifies():
    s = tg.IndexedSlices(tg.constant([[1.0, 2.0]]), tg.constant([1]), (2, 2))
    t = tg.constant([[10.0, 10.0], [10.0, 10.0]])
    expect = np.array([[0.0, 0.0], [1.0, 2.0]])
    for result, want in [(s + t, expect + 10), (t + s, expect + 10), (s - t, expect - 10),
                         (t - s, 10 - expect), (s * 2.0, expect * 2), (2.0 * s, expect * 2),
                         (s / 2.0, expect / 2), (-s, -expect), (tnp.add(t, s), expect + 10),
                         (np.add(s, t.numpy()), expect + 10)]:
        assert isinstance(result, (tg.Tensor, np.ndarray))
        np.testing.assert_array_equal(np.asarray(result), want)


def test_densifying_is_recorded_for_higher_order():
    p = tg.constant(np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]))
    with tg.GradientTape() as outer:
        outer.watch(p)
        with tg.GradientTape() as inner:
            inner.watch(p)
            y = tnp.sum(tnp.take(p, np.array([2, 0, 2]), axis=0) ** 2)
        d = inner.gradient(y, p)
        assert isinstance(d, tg.IndexedSlices)
        total = tnp.sum(tg.convert_to_tensor(d) * p)
    # total = sum over the gathered rows of 2 p[i]^2 -> d total / dp = 4 p * count(i)
    np.testing.assert_allclose(outer.gradient(total, p).numpy(),
                               4.0 * p.numpy() * np.array([[1.0], [0.0], [2.0]]))


@pytest.mark.parametrize("pfor", [False, True], ids=["loop", "pfor"])
def test_jacobian_densifies_indexed_slices(pfor):
    p = tg.constant(np.array([1.0, 2.0, 3.0]))
    with tg.GradientTape(persistent=True) as g:
        g.watch(p)
        y = tnp.take(p, np.array([2, 0]), axis=0)
    jac = g.jacobian(y, p, experimental_use_pfor=pfor)
    np.testing.assert_array_equal(jac.numpy(), [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])


def test_dense_shape_is_required_to_densify():
    s = tg.IndexedSlices(tg.constant([[1.0]]), tg.constant([0]), None)
    with pytest.raises(ValueError, match="dense_shape"):
        tg.convert_to_tensor(s)
