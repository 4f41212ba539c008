"""NumPy protocol dispatch: plain NumPy calls on traced and eager tensors run tracegrad ops;
what tracegrad lacks raises UnsupportedOpError (test_dispatch_unsupported.py: eagerly and
under tapes too)."""

from __future__ import annotations

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tracegrad.errors import UnsupportedOpError

A = np.arange(1.0, 7.0).reshape(2, 3)
B = np.arange(6.0).reshape(3, 2) / 7

CALLS = {
    "np.sin": lambda t: np.sin(t),
    "np.exp(-t)": lambda t: np.exp(-t),
    "np.sum axis=1": lambda t: np.sum(t, axis=1),
    "np.mean keepdims": lambda t: np.mean(t, axis=0, keepdims=True),
    "t.sum()": lambda t: t.sum(),
    "t.mean(1)": lambda t: t.mean(1),
    "t.max(axis=0)": lambda t: t.max(axis=0),
    "t.std(ddof=1)": lambda t: t.std(ddof=1),
    "t.argmax()": lambda t: t.argmax(),
    "t.cumsum(0)": lambda t: t.cumsum(0),
    "t.clip(2, 4)": lambda t: t.clip(2, 4),
    "np.dot(a, t.T)": lambda t: np.dot(B.T, t.T),
    "np.dot(t, b)": lambda t: np.dot(t, B),
    "np.matmul(b, t)": lambda t: np.matmul(B, t),
    "b @ t": lambda t: B @ t,
    "t @ b": lambda t: t @ B,
    "t.T": lambda t: t.T,
    "t.mT": lambda t: t.mT,
    "t.reshape(3, 2)": lambda t: t.reshape(3, 2),
    "t.reshape((-1,))": lambda t: t.reshape((-1,)),
    "t.transpose()": lambda t: t.transpose(),
    "t.transpose(1, 0)": lambda t: t.transpose(1, 0),
    "t.ravel()": lambda t: t.ravel(),
    "t.flatten()": lambda t: t.flatten(),
    "t.squeeze()": lambda t: t[None].squeeze(),
    "t.astype('float32')": lambda t: t.astype("float32"),
    "t.astype(np.int32)": lambda t: t.astype(np.int32),
    "t.dot(b)": lambda t: t.dot(B),
    "t.prod(1)": lambda t: t.prod(1),
    "t.min()": lambda t: t.min(),
    "t.any()": lambda t: (t > 5).any(),
    "t.all(0)": lambda t: (t > 1).all(0),
    "t.round(1)": lambda t: (t / 3).round(1),
    "np.concatenate([t, a])": lambda t: np.concatenate([t, A]),
    "np.stack((a, t), -1)": lambda t: np.stack((A, t), -1),
    "np.linalg.norm": lambda t: np.linalg.norm(t),
    "np.linalg.norm axis": lambda t: np.linalg.norm(t, ord=1, axis=0),
    "np.where": lambda t: np.where(t > 3, t, 0.0),
    "np.clip": lambda t: np.clip(t, 2, 5),
    "np.reshape": lambda t: np.reshape(t, (3, 2)),
    "np.transpose": lambda t: np.transpose(t),
    "np.add.reduce": lambda t: np.add.reduce(t),
    "np.maximum.reduce axis=1": lambda t: np.maximum.reduce(t, axis=1),
    "np.multiply.accumulate": lambda t: np.multiply.accumulate(t, axis=1),
    "np.add.accumulate": lambda t: np.add.accumulate(t),
    "np.logical_or.reduce": lambda t: np.logical_or.reduce(t > 4, axis=0),
    "np.einsum": lambda t: np.einsum("ij,jk->ik", t, B),
    "np.trace": lambda t: np.trace(t),
    "np.take": lambda t: np.take(t, [0, 2], axis=1),
    "np.square + np.sqrt": lambda t: np.sqrt(np.square(t)),
    "np.abs(neg)": lambda t: np.abs(-t),
    "np.maximum(a, t)": lambda t: np.maximum(A[::-1], t),
    "np.power(t, 2)": lambda t: np.power(t, 2),
    "np.zeros_like": lambda t: np.zeros_like(t) + t,
    "np.sort": lambda t: np.sort(-t, axis=1),
    "np.cumsum": lambda t: np.cumsum(t),
    "np.expand_dims": lambda t: np.expand_dims(t, 0),
    "np.pad": lambda t: np.pad(t, 1, mode="edge"),
    "np.isnan": lambda t: np.isnan(t),
    "np.shape / np.ndim / np.size": lambda t: t * (np.ndim(t) + np.size(t) + np.shape(t)[0]),
    "np.sum(t, dtype=float32)": lambda t: np.sum(t, dtype=np.float32),
    "a + t": lambda t: A + t,
    "t - a": lambda t: t - A,
    "np.linspace(t[0], t[1])": lambda t: np.linspace(t[0], t[1], 4),
}


@pytest.mark.parametrize("name", list(CALLS))
def test_numpy_calls_on_tensors_match_numpy(name):
    fn = CALLS[name]
    expected = fn(A)
    traced = tg.function(fn, backend="numpy")
    got = traced(A)
    np.testing.assert_allclose(got, expected, rtol=1e-15)
    assert np.asarray(got).dtype == np.asarray(expected).dtype
    graph = traced.get_concrete_function(A).graph
    assert graph.operations, "the NumPy call became tracegrad ops"
    eager = fn(tg.constant(A))
    assert isinstance(eager, tg.Tensor), type(eager)
    np.testing.assert_allclose(eager.numpy(), expected, rtol=1e-15)
    assert eager.dtype == np.asarray(expected).dtype


def test_variables_dispatch_too():
    v = tg.Variable(A)
    np.testing.assert_array_equal(np.sum(v, axis=1).numpy(), A.sum(axis=1))
    np.testing.assert_array_equal((v * 2 + 1).numpy(), A * 2 + 1)
    np.testing.assert_array_equal(v[1].numpy(), A[1])
    f = tg.function(lambda x: np.sin(v) * x, backend="numpy")
    np.testing.assert_array_equal(f(A), np.sin(A) * A)


def test_missing_numpy_function_inside_a_trace_names_it_and_the_line():
    def f(x):
        return np.busday_count(x, x)

    with pytest.raises(UnsupportedOpError) as info:
        tg.function(f, backend="numpy")(A)
    message = str(info.value)
    assert "numpy.busday_count" in message
    assert "test_dispatch.py" in message


@pytest.mark.parametrize("call, named", [
    (lambda t: np.sum(t, out=np.empty(3)), "out="),
    (lambda t: np.sum(t, where=np.ones((2, 3), bool)), "where="),
    (lambda t: np.max(t, initial=0.0), "initial="),
    (lambda t: np.sin(t, where=t > 2), "where="),
    (lambda t: np.add(t, 1.0, out=np.empty((2, 3))), "out="),
    (lambda t: np.add.reduceat(t, [0, 1]), "numpy.add.reduceat"),
    (lambda t: np.isnat(t), "numpy.isnat"),
    (lambda t: np.sort_complex(t), "numpy.sort_complex"),
    (lambda t: np.busday_count(t, t), "numpy.busday_count"),
], ids=["sum out", "sum where", "max initial", "sin where", "add out", "reduceat", "isnat",
        "sort_complex", "busday_count"])
def test_unsupported_arguments_and_functions_inside_a_trace(call, named):
    with pytest.raises(UnsupportedOpError, match=named.replace(".", r"\.")):
        tg.function(call, backend="numpy")(A)


def test_tnp_on_numpy_input_returns_numpy_and_numpy_scalars():
    assert type(tnp.sum(A)) is np.float64
    assert isinstance(tnp.sin(A), np.ndarray)
    assert type(tnp.dot(A[0], A[1])) is np.float64
    assert isinstance(tnp.arange(3), np.ndarray)
    assert type(tnp.linalg.det(np.eye(2))) is np.float64
