"""`x[...]` against NumPy: every form, traced, eager (through the recorded ops and through the
fast path), with unknown dims, and the errors."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tests.ops.optable import recording
from tracegrad.errors import ShapeError, TracegradError, UnsupportedOpError


def eager_recorded(fn, *args):
    """`fn` on eager tensors with a tape recording (the path that builds primitives)."""
    with recording():
        return fn(*[tg.constant(a) for a in args])


def check(fn, *args):
    expected = fn(*args)
    traced = tg.function(fn, backend="numpy")(*args)
    recorded = eager_recorded(fn, *args)
    fast = fn(*[tg.constant(a) for a in args])
    for got in (traced, np.asarray(recorded), np.asarray(fast)):
        assert got.shape == expected.shape and got.dtype == expected.dtype
        np.testing.assert_array_equal(got, expected)


X = np.arange(60.0).reshape(3, 4, 5)

BASIC = [
    0, -1, 2, slice(None), slice(1, 3), slice(None, None, -1), slice(None, None, -2),
    slice(3, 0, -1), slice(-1, -4, -2), slice(10, None, -1), slice(None, -10, -1),
    slice(5, 1), slice(-100, 100, 3), (1, 2), (-1, -2, -3), (Ellipsis, 0), (0, Ellipsis),
    (None,), (None, 1, None), (slice(None), None, 2), (Ellipsis, None), (1, Ellipsis, None, 2),
    (), (slice(None, None, -1), 1, slice(1, None, 2)),
]
ADVANCED = [
    [0, 2], [[0], [1]], [-1, -3, 0], np.array([], np.int64), ([0, 1], [1, 2]),
    ([0, 1], slice(None), [1, 2]), (slice(None), [0, 1], [1, 2]),
    ([0, 1], None, [1, 2]), (0, slice(None), [1, 2]), (slice(None), 0, [1, 2]),
    ([[0], [2]], [[1, -1]], 0), (Ellipsis, [4, 0]), ([2], Ellipsis, slice(1, 3)),
    (slice(None, None, -1), [3, 1]), ([1, 2], slice(None, None, -2)),
    (np.array(1), slice(None), [0, 1]), ([-1, 0], [1, 2], [4, 0]),
    (slice(1, None), None, [0, 3], slice(None, None, 2)),
    np.array([True, False, True]), (slice(None), np.array([True, False, False, True])),
    np.arange(60).reshape(3, 4, 5) % 3 == 0, (1, np.array([[True] * 5] * 3 + [[False] * 5])),
    True, False, (Ellipsis, True),
]


@pytest.mark.parametrize("key", BASIC + ADVANCED, ids=repr)
def test_indexing_matches_numpy(key):
    check(lambda x: x[key], X)


@pytest.mark.parametrize("n", [0, 1, 5])
def test_every_slice_of_a_dim_matches_numpy(n):
    bounds = [None, -7, -5, -2, -1, 0, 1, 3, 5, 7]
    steps = [None, 1, 2, 3, -1, -2, -3]
    x = np.arange(float(n))

    def all_slices(a):
        return [a[slice(s, e, st)] for s, e, st in itertools.product(bounds, bounds, steps)]

    expected = all_slices(x)
    for got in (tg.function(all_slices, backend="numpy")(x), eager_recorded(all_slices, x)):
        for g, e in zip(got, expected, strict=True):
            np.testing.assert_array_equal(np.asarray(g), e)


def test_slices_of_an_unknown_dim_follow_python_rules():
    bounds = [None, -7, -2, -1, 0, 1, 3, 7]
    steps = [None, 2, -1, -3]
    keys = list(itertools.product(bounds, bounds, steps))
    f = tg.function(lambda a: [a[slice(*k)] for k in keys], backend="numpy",
                    input_signature=[tg.TensorSpec([None])])
    for n in (0, 1, 4, 6):
        x = np.arange(float(n))
        for got, k in zip(f(x), keys, strict=True):
            np.testing.assert_array_equal(got, x[slice(*k)], err_msg=repr(k))
    assert f.tracing_count == 1


@pytest.mark.parametrize("key", [
    0, -1, (slice(None), 2), slice(1, None), slice(None, None, -1), slice(-2, None),
    ([0, -1],), (slice(None), [0, 2]), (Ellipsis, 1), (None, -1, None), ([0, 1], [2, 0]),
    (slice(None, None, -2), 1),
], ids=repr)
def test_indexing_with_an_unknown_leading_dim(key):
    f = tg.function(lambda a: a[key], backend="numpy", input_signature=[tg.TensorSpec([None, 3])])
    for n in (2, 5):
        x = np.arange(n * 3.0).reshape(n, 3)
        np.testing.assert_array_equal(f(x), x[key])
    assert f.tracing_count == 1


def test_traced_index_arrays_broadcast_and_wrap_negative():
    x = np.arange(60.0).reshape(3, 4, 5)

    def f(a, i, j):
        return a[i, :, j], a[:, i[:, None], j], a[i]

    i, j = np.array([2, -1]), np.array([[0], [-5]])
    for got, want in zip(tg.function(f, backend="numpy")(x, i, j),
                         (x[i, :, j], x[:, i[:, None], j], x[i]), strict=True):
        np.testing.assert_array_equal(got, want)


def test_traced_out_of_bounds_index_raises_when_it_runs():
    f = tg.function(lambda a, i: a[i], backend="numpy")
    with pytest.raises(IndexError, match="out of bounds"):
        f(np.ones(3), np.array([0, 3]))
    g = tg.function(lambda a, i, j: a[i, j], backend="numpy")
    with pytest.raises(IndexError):
        g(np.ones((2, 3)), np.array([1]), np.array([3]))
    with pytest.raises(IndexError):
        g(np.ones((2, 3)), np.array([-3]), np.array([0]))


@pytest.mark.parametrize("key", [3, -4, (0, 5), [0, 3], ([0], [7])], ids=repr)
def test_static_out_of_bounds_index_raises_index_error(key):
    x = np.ones((3, 5))
    with pytest.raises(IndexError):
        tg.function(lambda a: a[key], backend="numpy")(x)
    with pytest.raises(IndexError):
        eager_recorded(lambda a: a[key], x)


def test_bad_keys():
    x = tg.constant(np.ones((2, 3)))
    with pytest.raises(IndexError, match="too many indices"):
        x[0, 0, 0]
    with pytest.raises(IndexError, match="integers"):
        eager_recorded(lambda a: a[np.array([0.5])], np.ones(3))
    with pytest.raises(IndexError, match="single ellipsis"):
        eager_recorded(lambda a: a[..., ...], np.ones(3))
    with pytest.raises(IndexError, match="boolean index did not match"):
        eager_recorded(lambda a: a[np.array([True, False])], np.ones(3))
    with pytest.raises(ValueError, match="step cannot be zero"):
        eager_recorded(lambda a: a[::0], np.ones(3))


def test_boolean_mask_inside_a_trace_suggests_where():
    f = tg.function(lambda a: a[a > 0], backend="numpy")
    with pytest.raises(UnsupportedOpError, match="tnp.where") as info:
        f(np.array([1.0, -1.0]))
    assert "test_indexing.py" in str(info.value)


def test_constant_mask_inside_a_trace_works():
    mask = np.array([True, False, True])
    f = tg.function(lambda a: a[mask] * 2.0, backend="numpy")
    np.testing.assert_array_equal(f(np.array([1.0, 2.0, 3.0])), [2.0, 6.0])


def test_eager_mask_from_a_comparison():
    x = tg.constant([3.0, -1.0, 2.0])
    np.testing.assert_array_equal(x[x > 0].numpy(), [3.0, 2.0])
    np.testing.assert_array_equal(eager_recorded(lambda a: a[a > 0], x.numpy()).numpy(),
                                  [3.0, 2.0])


def test_tensors_are_immutable():
    x = tg.constant([1.0, 2.0])
    with pytest.raises(TypeError, match="tnp.at"):
        x[0] = 3.0


def test_numpy_array_cannot_be_indexed_by_a_traced_tensor_but_take_can():
    table = np.array([10.0, 20.0, 30.0])

    def bad(i):
        return table[i]

    with pytest.raises(TracegradError):
        tg.function(bad, backend="numpy")(np.array([0, 2]))
    good = tg.function(lambda i: tnp.take(table, i), backend="numpy")
    np.testing.assert_array_equal(good(np.array([0, 2])), [10.0, 30.0])
    conv = tg.function(lambda i: tg.convert_to_tensor(table)[i], backend="numpy")
    np.testing.assert_array_equal(conv(np.array([2, -1])), [30.0, 30.0])


def test_several_unknown_dims_in_a_multi_index_are_a_clear_error():
    f = tg.function(lambda a, i: a[i, i], backend="numpy",
                    input_signature=[tg.TensorSpec([None, 3, None]), tg.TensorSpec([2], "int64")])
    with pytest.raises(ShapeError, match="unknown"):
        f(np.ones((2, 3, 2)), np.array([0, 1]))


def test_iterating_a_tensor_yields_its_rows():
    x = tg.constant(np.arange(6.0).reshape(3, 2))
    rows = list(x)
    assert len(rows) == 3
    np.testing.assert_array_equal(rows[2].numpy(), [4.0, 5.0])
