"""Eager tensors: tg.constant / tg.convert_to_tensor, repr, results recorded on tapes, and the
eager fast paths giving the same values as the recorded paths."""

from __future__ import annotations

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tracegrad.errors import DTypeError, ShapeError


def test_constant_dtypes_and_shapes():
    assert tg.constant(1.5).dtype == np.float64
    assert tg.constant(3).dtype == np.int64
    assert tg.constant(True).dtype == np.bool_
    assert tg.constant([1, 2], dtype="float32").dtype == np.float32
    assert tg.constant(np.float32(2)).dtype == np.float32
    assert tg.constant(0.0, shape=(2, 3)).shape == (2, 3)
    np.testing.assert_array_equal(tg.constant([1, 2, 3, 4], shape=(2, 2)).numpy(),
                                  [[1, 2], [3, 4]])
    with pytest.raises(ShapeError):
        tg.constant([1, 2, 3], shape=(2, 2))
    with pytest.raises(DTypeError):
        tg.constant(np.ones(2, np.longdouble))
    with pytest.raises(DTypeError):
        tg.constant([1], dtype="clongdouble")


def test_constant_copies_its_value():
    a = np.ones(3)
    t = tg.constant(a)
    a[0] = 5.0
    assert t.numpy()[0] == 1.0


def test_convert_to_tensor():
    t = tg.constant([1.0])
    assert tg.convert_to_tensor(t) is t
    assert tg.convert_to_tensor(t, dtype="int32").dtype == np.int32
    v = tg.Variable([2.0])
    assert isinstance(tg.convert_to_tensor(v), tg.Tensor)
    assert tg.convert_to_tensor([[1, 2]]).shape == (1, 2)


def test_repr_shows_values():
    text = repr(tg.constant([1.0, 2.0]))
    assert "shape=(2,)" in text and "float64" in text and "1., 2." in text
    assert str(tg.constant(3.0)) == "3.0"
    assert f"{tg.constant(2.5):.1f}" == "2.5"


def test_numpy_returns_array_or_scalar():
    assert type(tg.constant(2.0).numpy()) is np.float64
    assert isinstance(tg.constant([2.0]).numpy(), np.ndarray)
    assert float(tg.constant(2.0)) == 2.0
    assert np.asarray(tg.constant([1, 2])).dtype == np.int64


def test_eager_ops_are_recorded_on_a_gradient_tape():
    x = tg.constant([1.0, 2.0, 3.0])
    with tg.GradientTape() as tape:
        tape.watch(x)
        y = tnp.sum(tnp.sin(x) * x + x[::-1] ** 2)
    (g,) = [tape.gradient(y, x)]
    xv = x.numpy()
    np.testing.assert_allclose(g.numpy(), np.cos(xv) * xv + np.sin(xv) + 2 * xv, rtol=1e-14)


@pytest.mark.parametrize("fn", [
    lambda x, y: x + y, lambda x, y: x * 2.0, lambda x, y: 3 - x, lambda x, y: x / y,
    lambda x, y: tnp.sin(x), lambda x, y: np.exp(y), lambda x, y: x[1:, ::-1],
    lambda x, y: x[[0, 1], [2, 0]], lambda x, y: x > y, lambda x, y: x.astype("int32") // 2,
])
def test_fast_paths_match_the_recorded_paths(fn):
    x = tg.constant(np.arange(6.0).reshape(2, 3) - 2)
    y = tg.constant(np.linspace(0.5, 2.0, 3))
    fast = fn(x, y)
    with tg.GradientTape(persistent=True) as tape:
        tape.watch(x)
        recorded = fn(x, y)
    assert fast.dtype == recorded.dtype and fast.shape == recorded.shape
    np.testing.assert_array_equal(fast.numpy(), recorded.numpy())


def test_fast_path_errors_are_tracegrad_errors():
    with pytest.raises(ShapeError, match="add"):
        tg.constant(np.ones(3)) + tg.constant(np.ones(4))
    with pytest.raises(DTypeError, match="bitwise_and"):
        tg.constant([1.5]) & tg.constant([2.5])
