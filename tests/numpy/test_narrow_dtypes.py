"""The narrower dtypes outside the op table: the dtype objects tracegrad.numpy exports,
Python ints out of range of the integer dtype they meet (NumPy's OverflowError is a
DTypeError here, eagerly, traced and as a function argument), and float16 variables
trained by gradients on both backends."""

from __future__ import annotations

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tracegrad.errors import DTypeError

NAMES = ("int8", "int16", "uint8", "uint16", "uint32", "uint64", "float16")


@pytest.mark.parametrize("name", NAMES)
def test_tnp_exports_each_dtype_as_numpy_dtype(name):
    assert getattr(tnp, name) == np.dtype(name)
    x = tnp.zeros(3, dtype=getattr(tnp, name))
    assert x.dtype == np.dtype(name)


@pytest.mark.parametrize("dtype,value", [("uint8", 300), ("uint8", -1), ("int8", 128),
                                         ("uint64", -1), ("int16", -40000)])
def test_python_int_out_of_range_is_a_dtype_error_like_numpy(dtype, value, backend):
    x = np.arange(3, dtype=dtype)
    with pytest.raises(OverflowError):
        np.add(x, value)  # NumPy refuses it
    with pytest.raises(DTypeError, match=f"{value} does not fit {dtype}"):
        tg.constant(x) + value
    with pytest.raises(DTypeError, match=f"{value} does not fit {dtype}"):
        tg.function(lambda a: a + value)(x)
    f = tg.function(lambda a, n: a + n)
    np.testing.assert_array_equal(f(x, 2), x + 2)
    with pytest.raises(DTypeError, match=f"{value} passed as n does not fit {dtype}"):
        f(x, value)


def test_python_int_in_range_of_uint64_past_int64_is_kept():
    x = np.array([1, 2], np.uint64)
    np.testing.assert_array_equal(tnp.add(tg.constant(x), 2**63).numpy(), x + 2**63)


def test_float16_variable_trains_on_both_backends(backend):
    w = tg.Variable(np.array([0.5, -1.0, 2.0], np.float16))
    target = np.array([1.0, 0.25, -0.5], np.float16)

    @tg.function
    def step():
        with tg.GradientTape() as tape:
            loss = tnp.sum((w - target) ** 2)
        g = tape.gradient(loss, w)
        w.assign(w - np.float16(0.25) * g)
        return loss, g

    losses = []
    for _ in range(12):
        loss, g = step()
        assert loss.dtype == np.float16 and g.dtype == np.float16
        losses.append(float(loss))
    assert losses[-1] < 1e-4 * losses[0]
    np.testing.assert_allclose(w.numpy(), target, atol=0.01)
