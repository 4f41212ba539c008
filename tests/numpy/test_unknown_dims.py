"""tracegrad.numpy on dims unknown while tracing (`TensorSpec([None, 3])`): one trace serves
every size; sizes are read at run time; functions needing a static size say so."""

from __future__ import annotations

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tracegrad import nn
from tracegrad.errors import ShapeError

SPEC = [tg.TensorSpec([None, 3])]

FUNCTIONS = {
    "mean": (lambda x: tnp.mean(x, axis=0), lambda x: np.mean(x, axis=0)),
    "mean all": (lambda x: tnp.mean(x), lambda x: np.mean(x)),
    "var ddof": (lambda x: tnp.var(x, axis=0, ddof=1), lambda x: np.var(x, axis=0, ddof=1)),
    "std": (lambda x: tnp.std(x), lambda x: np.std(x)),
    "sum": (lambda x: tnp.sum(x, axis=0), lambda x: np.sum(x, axis=0)),
    "broadcast row": (lambda x: x + np.arange(3.0), lambda x: x + np.arange(3.0)),
    "broadcast column": (lambda x: x * x[:, :1], lambda x: x * x[:, :1]),
    "outer broadcast": (lambda x: x[:, None, :] - x[None, :, :],
                        lambda x: x[:, None, :] - x[None, :, :]),
    "scalar": (lambda x: x * 2.0 + 1, lambda x: x * 2.0 + 1),
    "reshape": (lambda x: tnp.reshape(x, (-1,)), lambda x: np.reshape(x, (-1,))),
    "ravel": (lambda x: x.ravel(), lambda x: x.ravel()),
    "transpose": (lambda x: x.T, lambda x: x.T),
    "matmul": (lambda x: x @ x.T, lambda x: x @ x.T),
    "concatenate": (lambda x: tnp.concatenate([x, x * 2], 0), lambda x: np.concatenate([x, x * 2], 0)),
    "stack": (lambda x: tnp.stack([x, x], -1), lambda x: np.stack([x, x], -1)),
    "expand_dims": (lambda x: tnp.expand_dims(x, (0, 2)), lambda x: np.expand_dims(x, (0, 2))),
    "argmax all": (lambda x: tnp.argmax(x), lambda x: np.argmax(x)),
    "cumsum flat": (lambda x: tnp.cumsum(x), lambda x: np.cumsum(x)),
    "sort": (lambda x: tnp.sort(x, axis=0), lambda x: np.sort(x, axis=0)),
    "zeros_like": (lambda x: tnp.zeros_like(x) + 1, lambda x: np.zeros_like(x) + 1),
    "full_like": (lambda x: tnp.full_like(x, 7.0), lambda x: np.full_like(x, 7.0)),
    "where": (lambda x: tnp.where(x > 2, x, 0.0), lambda x: np.where(x > 2, x, 0.0)),
    "tril": (lambda x: tnp.tril(x @ x.T), lambda x: np.tril(x @ x.T)),
    "softmax": (lambda x: nn.softmax(x, axis=0),
                lambda x: np.exp(x - x.max(0)) / np.exp(x - x.max(0)).sum(0)),
    "logsumexp": (lambda x: nn.logsumexp(x, axis=0),
                  lambda x: np.log(np.exp(x).sum(0))),
    "take": (lambda x: tnp.take(x, [0, -1], axis=0), lambda x: np.take(x, [0, -1], axis=0)),
    "take wrap": (lambda x: tnp.take(x, [5, -7], axis=0, mode="wrap"),
                  lambda x: np.take(x, [5, -7], axis=0, mode="wrap")),
    "take_along_axis": (lambda x: tnp.take_along_axis(x, tnp.argsort(x, 0), 0),
                        lambda x: np.take_along_axis(x, np.argsort(x, 0, kind="stable"), 0)),
    "norm": (lambda x: tnp.linalg.norm(x, axis=1), lambda x: np.linalg.norm(x, axis=1)),
    "einsum": (lambda x: tnp.einsum("ij,ij->i", x, x), lambda x: np.einsum("ij,ij->i", x, x)),
    "pad constant": (lambda x: tnp.pad(x, 1), lambda x: np.pad(x, 1)),
}


@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_one_trace_serves_every_size(name):
    fn, ref = FUNCTIONS[name]
    f = tg.function(fn, backend="numpy", input_signature=SPEC)
    for n in (1, 4, 7):
        x = np.arange(n * 3.0).reshape(n, 3) / 5.0
        np.testing.assert_allclose(f(x), ref(x), rtol=1e-14, atol=1e-15)
    assert f.tracing_count == 1


def test_mean_divides_by_the_run_time_count():
    graph = tg.trace(lambda x: tnp.mean(x, axis=0))(tg.TensorSpec([None, 3]))
    assert "dim_size" in [op.primitive.name for op in graph.operations]


def test_several_unknown_dims_broadcast():
    f = tg.function(lambda a, b: a + b, backend="numpy",
                    input_signature=[tg.TensorSpec([None, 1]), tg.TensorSpec([None])])
    a, b = np.arange(3.0)[:, None], np.arange(4.0)
    np.testing.assert_array_equal(f(a, b), a + b)
    with pytest.raises(ValueError):
        f(np.ones((3, 2)), np.ones(4))  # 2 vs 4 do not broadcast: caught when it runs


@pytest.mark.parametrize("backend_name", ["numpy", "numba"])
def test_unknown_dims_that_do_not_fit_at_run_time_are_a_shape_error(backend_name):
    # found by the fuzzer: on the numpy backend a broadcast_in_dim whose unknown dims do not
    # fit when it runs raised NumPy's ValueError, not a tracegrad ShapeError (numba did)
    f = tg.function(lambda a, b: a // b, backend=backend_name,
                    input_signature=[tg.TensorSpec([0, None, None]), tg.TensorSpec([0, None])])
    assert f(np.ones((0, 0, 3)), np.ones((0, 3))).shape == (0, 0, 3)
    with pytest.raises(ShapeError, match="broadcast_in_dim.*at run time"):
        f(np.ones((0, 0, 1)), np.ones((0, 3)))  # a 1 meeting an unknown 3 does not stretch


@pytest.mark.parametrize("backend_name", ["numpy", "numba"])
def test_new_axes_beside_a_zero_dim_and_an_unknown_one(backend_name):
    # found by the fuzzer: expand_dims, stack and x[None] of an f64[?,0,2] reshaped with a
    # -1 for the unknown dim, which a size-0 array cannot infer (a ShapeError at run time);
    # the gradients of a reshape and of a product over axes did the same
    spec = [tg.TensorSpec([None, 0, 2])]
    fns = [lambda x: tnp.expand_dims(x, 0), lambda x: tnp.stack([x, -x], axis=1),
           lambda x: x[None, :, None], lambda x: tnp.squeeze(x[:, None], axis=1)]
    grads = [tg.grad(lambda x: tnp.sum(tnp.prod(x, axis=(1, 2)))),
             tg.grad(lambda x: tnp.sum(tnp.reshape(x, (-1, 2, 0)) ** 2))]
    for n in (0, 1, 3):
        x = np.ones((n, 0, 2))
        for fn in fns:
            got = tg.function(fn, input_signature=spec, backend=backend_name)(x)
            want = fn(tg.constant(x))
            assert got.shape == want.shape and got.shape[0] in (1, n) and got.size == 0
        for g in grads:
            got = tg.function(g, input_signature=spec, backend=backend_name)(x)
            assert got.shape == (n, 0, 2) and got.dtype == np.float64


@pytest.mark.parametrize("fn, needs", [
    (lambda x: tnp.split(x, 2), "split"),
    (lambda x: tnp.tile(x, 2), "tile"),
    (lambda x: tnp.repeat(x, 2, axis=0), "repeat"),
    (lambda x: tnp.diagonal(x), "diagonal"),
    (lambda x: tnp.pad(x, 1, mode="reflect"), "pad"),
    (lambda x: tnp.diag(x[:, 0]), "diag"),
])
def test_functions_needing_a_static_size_say_so(fn, needs):
    with pytest.raises(ShapeError, match=needs) as info:
        tg.function(fn, backend="numpy", input_signature=SPEC)(np.ones((2, 3)))
    assert "unknown" in str(info.value)


def test_static_shapes_are_read_as_none():
    seen = {}

    def f(x):
        seen["shape"], seen["size"] = tnp.shape(x), tnp.size(x)
        return x

    tg.function(f, backend="numpy", input_signature=SPEC)(np.ones((2, 3)))
    assert seen == {"shape": (None, 3), "size": None}
