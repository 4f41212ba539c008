"""tnp.ndarray, asanyarray and double: NumPy's names that NumPy programs use."""

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tracegrad.errors import UnsupportedOpError


def test_ndarray_is_the_arrays_tracegrad_numpy_takes():
    arrays = [np.ones(2), np.ones(()), tg.constant([1.0]),
              tg.Variable([1.0])]
    assert all(isinstance(a, tnp.ndarray) for a in arrays)
    assert not any(isinstance(a, tnp.ndarray) for a in (1.0, [1.0], np.float64(1.0), None))
    assert issubclass(np.ndarray, tnp.ndarray) and not issubclass(list, tnp.ndarray)

    @tg.function
    def traced(x):
        assert isinstance(x, tnp.ndarray)
        return x * 2

    np.testing.assert_array_equal(traced(np.ones(2)), [2.0, 2.0])
    with pytest.raises(UnsupportedOpError, match="ndarray"):
        tnp.ndarray((2, 3))


def test_asanyarray_is_asarray_and_double_is_float64():
    t = tg.constant([1, 2])
    assert tnp.asanyarray(t) is t
    assert type(tnp.asanyarray([1.0, 2.0])) is np.ndarray
    assert tnp.asanyarray(t, tnp.double).dtype == np.float64 == tnp.double
