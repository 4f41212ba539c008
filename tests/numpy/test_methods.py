"""ndarray methods and attributes on tensors and Variables, against NumPy's: eager, traced,
and the in-place ones (`sort`, `fill`, `put`) that immutable tensors cannot follow."""

from __future__ import annotations

import numpy as np
import pytest

import tracegrad as tg
from tests.finite_diff import central_difference
from tracegrad.errors import ArgumentTypeError, TracerBoolError

X = np.array([[3.0, -1.0, 2.0, 2.0], [0.5, 7.0, -4.0, 0.0]])

# name -> the method call, on a tensor and on a NumPy array
CALLS = {
    "sort": lambda a: a.sort(),
    "sort_axis0": lambda a: a.sort(axis=0),
    "argsort": lambda a: a.argsort(),
    "argsort_none": lambda a: a.argsort(axis=None),
    "ptp": lambda a: a.ptp(axis=1) if isinstance(a, tg.Tensor) else np.ptp(a, axis=1),
    "searchsorted": lambda a: a[0].sort().searchsorted(np.array([0.0, 2.0, 9.0]))
    if isinstance(a, tg.Tensor) else np.sort(a[0]).searchsorted(np.array([0.0, 2.0, 9.0])),
    "compress": lambda a: a.compress([True, False, True, True], axis=1),
    "choose": lambda a: (a[0] > 0).astype("int64").choose([a[0], a[1]]),
    "copy": lambda a: a.copy(),
    "conj": lambda a: a.conj(),
    "flat": lambda a: a.flat[5] if isinstance(a, tg.Tensor) else a.flat[5],
    "flat_slice": lambda a: a.flat[1:6] if isinstance(a, tg.Tensor) else a.flat[1:6],
}


def _numpy(name):
    if name.startswith("sort"):
        return np.sort(X, axis=0 if name == "sort_axis0" else -1)
    return np.asarray(CALLS[name](X.copy()))


@pytest.mark.parametrize("name", sorted(CALLS))
def test_methods_match_numpy_eagerly_and_traced(name):
    expected = _numpy(name)
    eager = CALLS[name](tg.constant(X))
    assert eager.dtype == expected.dtype
    np.testing.assert_array_equal(eager.numpy(), expected)
    traced = tg.function(CALLS[name], backend="numpy")(X)
    np.testing.assert_array_equal(traced, expected)


def test_nonzero_method_takes_size_when_traced():
    a = np.array([0.0, 3.0, 0.0, 5.0])
    (eager,) = tg.constant(a).nonzero()
    np.testing.assert_array_equal(eager.numpy(), a.nonzero()[0])
    (traced,) = tg.function(lambda t: t.nonzero(size=3, fill_value=-1))(a)
    np.testing.assert_array_equal(traced, [1, 3, -1])


def test_sort_method_has_sorts_gradient():
    x = X + np.array([0.0, 0.0, 0.0, 0.25])  # no ties: away from sort's kinks
    g = tg.grad(lambda a: (a.sort(axis=1) * np.arange(4.0)).sum())(x)
    expected = central_difference(lambda a: (np.sort(a, axis=1) * np.arange(4.0)).sum(), x)
    np.testing.assert_allclose(g, expected, rtol=1e-7, atol=1e-8)


def test_sort_as_a_statement_on_a_tensor_is_refused():
    t = tg.constant(X)
    with pytest.raises(ArgumentTypeError, match=r"x\.sort\(\) changes x in place.*np\.sort"):
        t.sort()

    def f(a):
        a.sort()
        return a

    with pytest.raises(ArgumentTypeError, match="immutable"):
        tg.function(f)(X)


def test_in_place_methods_of_a_variable_assign_it():
    v = tg.Variable(X.copy())
    assert v.sort(axis=0) is None
    np.testing.assert_array_equal(v.numpy(), np.sort(X, axis=0))
    v.fill(2.5)
    np.testing.assert_array_equal(v.numpy(), np.full_like(X, 2.5))

    w = tg.Variable(X.copy())

    @tg.function
    def step():
        w.sort()
        return w.value().sum()

    assert step() == pytest.approx(X.sum())
    np.testing.assert_array_equal(w.numpy(), np.sort(X))


def test_fill_and_put_on_a_tensor_are_refused():
    t = tg.constant(X)
    with pytest.raises(ArgumentTypeError, match=r"x\.fill\(\).*full_like"):
        t.fill(0.0)
    with pytest.raises(ArgumentTypeError, match=r"x\.put\(\).*tnp\.at"):
        t.put([0], [1.0])
    with pytest.raises(ArgumentTypeError, match=r"x\.fill\(\)"):
        tg.function(lambda a: a.fill(0.0))(X)


def test_python_value_methods_eagerly():
    t = tg.constant(X)
    assert t.tolist() == X.tolist()
    assert t.item(1, 2) == -4.0 and type(t.item(1, 2)) is float
    assert tg.constant(np.int32(7)).item() == 7
    assert t.tobytes() == X.tobytes()
    assert (t.itemsize, t.nbytes) == (8, X.nbytes)
    v = tg.Variable(X)
    assert v.tolist() == X.tolist() and v.item(0) == 3.0


@pytest.mark.parametrize("call", [lambda a: a.tolist(), lambda a: a.item(),
                                  lambda a: a.tobytes()])
def test_python_value_methods_in_a_trace_name_the_method(call):
    with pytest.raises(TracerBoolError, match=r"(tolist|item|tobytes)\(\) of a traced"):
        tg.function(call)(X)
