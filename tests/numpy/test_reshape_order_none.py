"""`reshape(..., order=None)` is row-major, as in NumPy (autograd's `flatten_func` passes it
through `np.reshape` to a tensor)."""

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tracegrad.errors import InvalidArgumentError


def test_order_none_is_row_major():
    x = np.asfortranarray(np.arange(12.0).reshape(3, 4))
    want = np.reshape(x, (2, 6), order=None)
    np.testing.assert_array_equal(tnp.reshape(x, (2, 6), order=None), want)
    traced = tg.function(lambda a: np.reshape(a, (2, 6), order=None))(x)
    np.testing.assert_array_equal(traced, want)
    g = tg.grad(lambda a: tnp.sum(np.reshape(a, (12,), order=None) * np.arange(12.0)))(x)
    np.testing.assert_array_equal(g, np.arange(12.0).reshape(3, 4))


def test_order_f_still_refused():
    with pytest.raises(InvalidArgumentError, match="reshape"):
        tnp.reshape(np.ones(4), (2, 2), order="F")
