"""`tnp.at(x)[idx].set(v)` / `.add(v)`: new arrays, NumPy assignment / `np.add.at` values."""

from __future__ import annotations

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp

X = np.arange(20.0).reshape(4, 5)

KEYS = [
    1, -1, (2, 3), (slice(None), 0), (slice(1, None), slice(None, None, 2)), [0, 2, 0],
    ([0, 1], [4, 4]), (Ellipsis, [1, 3]), (slice(None, None, -1), [0]), X > 10,
    (slice(None), np.array([True, False, True, False, False])), (None, 1),
]


def _set(x, key, v):
    out = x.copy()
    out[key] = v
    return out


def _add(x, key, v):
    out = x.copy()
    np.add.at(out, key, v)
    return out


@pytest.mark.parametrize("key", KEYS, ids=repr)
@pytest.mark.parametrize("how", ["set", "add"])
def test_at_matches_numpy(key, how):
    value = -1.5
    want = (_set if how == "set" else _add)(X, key, value)

    def f(x):
        return getattr(tnp.at(x)[key], how)(value)

    np.testing.assert_array_equal(tg.function(f, backend="numpy")(X), want)
    eager_x = tg.constant(X)
    got = f(eager_x)
    assert isinstance(got, tg.Tensor)
    np.testing.assert_array_equal(got.numpy(), want)
    np.testing.assert_array_equal(eager_x.numpy(), X)  # unchanged
    np.testing.assert_array_equal(f(X), want)  # NumPy in, NumPy out


def test_repeated_indices_accumulate_with_add_and_last_wins_with_set():
    x = np.zeros(3)
    idx = np.array([0, 2, 0, 0])
    v = np.array([1.0, 2.0, 3.0, 4.0])
    f_add = tg.function(lambda a, i, u: tnp.at(a)[i].add(u), backend="numpy")
    np.testing.assert_array_equal(f_add(x, idx, v), [8.0, 0.0, 2.0])
    f_set = tg.function(lambda a, i, u: tnp.at(a)[i].set(u), backend="numpy")
    np.testing.assert_array_equal(f_set(x, idx, v), [4.0, 0.0, 2.0])


def test_values_broadcast_and_cast_to_the_array_dtype():
    x = np.zeros((3, 4), np.int32)
    got = tnp.at(tg.constant(x))[:, 1].set(2.7)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got.numpy()[:, 1], [2, 2, 2])
    rows = tnp.at(tg.constant(np.zeros((3, 4))))[[0, 2]].add(np.arange(4.0))
    np.testing.assert_array_equal(rows.numpy()[2], np.arange(4.0))


def test_at_get_is_indexing():
    x = tg.constant(X)
    np.testing.assert_array_equal(tnp.at(x)[1, ::2].get().numpy(), X[1, ::2])


def test_at_with_an_unknown_dim():
    f = tg.function(lambda a, i: tnp.at(a)[i].add(1.0), backend="numpy",
                    input_signature=[tg.TensorSpec([None, 2]), tg.TensorSpec([2], "int64")])
    for n in (3, 5):
        x = np.zeros((n, 2))
        np.testing.assert_array_equal(f(x, np.array([0, -1])), _add(x, np.array([0, -1]), 1.0))
    g = tg.function(lambda a: tnp.at(a)[::2, 1].set(7.0), backend="numpy",
                    input_signature=[tg.TensorSpec([None, 2])])
    np.testing.assert_array_equal(g(np.zeros((5, 2))), _set(np.zeros((5, 2)), (slice(None, None, 2), 1), 7.0))


def test_at_out_of_bounds():
    with pytest.raises(IndexError):
        tnp.at(tg.constant(np.zeros(3)))[3].set(1.0)
    f = tg.function(lambda a, i: tnp.at(a)[i].add(1.0), backend="numpy")
    with pytest.raises(IndexError):
        f(np.zeros(3), np.array([5]))


def test_gradient_flows_through_at_add_to_array_and_values():
    def loss(x, v):
        return tnp.sum(tnp.at(x)[[0, 0, 2]].add(v) ** 2)

    x = np.array([1.0, 2.0, 3.0])
    v = np.array([0.5, -1.0, 2.0])
    gx, gv = tg.grad(loss, argnums=(0, 1))(x, v)
    updated = _add(x, [0, 0, 2], v)
    np.testing.assert_allclose(gx, 2 * updated)
    np.testing.assert_allclose(gv, 2 * updated[[0, 0, 2]])
