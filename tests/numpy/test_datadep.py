"""nonzero, argwhere, flatnonzero, one-argument where, extract and compress without
`size=`: NumPy's exact result on concrete data (a tensor for tensor input, with the
gradient of the gathered values), and a clear error naming `size=` inside a trace. The
`size=` forms are op-table rows (tests/ops/optable_datadep.py)."""

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tracegrad.core.ir import EagerTensor
from tracegrad.errors import InvalidArgumentError

M = np.array([[0.0, 1.5, 0.0, -2.0], [3.0, 0.0, 0.0, 4.0], [0.0, 0.0, 0.0, 0.0]])
COND = np.array([True, False, True, False])

EAGER = {
    "nonzero": (lambda x: tnp.nonzero(x), lambda x: np.nonzero(x)),
    "where": (lambda x: tnp.where(x), lambda x: np.where(x)),
    "argwhere": (lambda x: tnp.argwhere(x), lambda x: np.argwhere(x)),
    "flatnonzero": (lambda x: tnp.flatnonzero(x), lambda x: np.flatnonzero(x)),
    "extract": (lambda x: tnp.extract(x > 0, x), lambda x: np.extract(x > 0, x)),
    "compress": (lambda x: tnp.compress(COND, x, axis=1), lambda x: np.compress(COND, x, 1)),
    "compress[axis=None]": (lambda x: tnp.compress(np.tile(COND, 3), x),
                            lambda x: np.compress(np.tile(COND, 3), x)),
}


def _leaves(x):
    return list(x) if isinstance(x, tuple) else [x]


@pytest.mark.parametrize("name", EAGER)
@pytest.mark.parametrize("kind", ["numpy", "tensor"])
def test_concrete_input_gives_numpys_exact_result(name, kind):
    fn, reference = EAGER[name]
    got = fn(M if kind == "numpy" else tg.constant(M))
    want = reference(M)
    for g, w in zip(_leaves(got), _leaves(want), strict=True):
        assert isinstance(g, EagerTensor if kind == "tensor" else np.ndarray)
        g = np.asarray(g)
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("name", ["extract", "compress"])
def test_eager_values_keep_the_gradient(name):
    fn = EAGER[name][0]
    x = tg.Variable(M) if hasattr(tg, "Variable") else tg.constant(M)
    with tg.GradientTape() as tape:
        y = tnp.sum(fn(x) * 2.0)
    (g,) = tape.gradient(y, [x])
    mask = (M > 0) if name == "extract" else np.broadcast_to(COND, M.shape)
    np.testing.assert_array_equal(np.asarray(g), np.where(mask, 2.0, 0.0))


TRACED = {
    "nonzero": lambda x: tnp.nonzero(x),
    "where": lambda x: tnp.where(x > 0),
    "np.where": lambda x: np.where(x),
    "np.nonzero": lambda x: np.nonzero(x),
    "argwhere": lambda x: tnp.argwhere(x),
    "flatnonzero": lambda x: tnp.flatnonzero(x),
    "extract": lambda x: tnp.extract(x > 0, x),
    "compress": lambda x: tnp.compress(x[0] > 0, x, axis=1),
}


@pytest.mark.parametrize("name", TRACED)
def test_traced_without_size_names_the_function_and_size(name):
    with pytest.raises(InvalidArgumentError, match=r"size="):
        tg.function(TRACED[name], backend="numpy")(M)
    function = {"np.where": "where", "np.nonzero": "nonzero"}.get(name, name)
    with pytest.raises(InvalidArgumentError, match=rf"^{function}\b"):
        tg.function(TRACED[name], backend="numpy")(M)


def test_traced_with_a_static_condition_needs_no_size():
    f = tg.function(lambda x: (tnp.extract(M > 0, x), tnp.compress(COND, x, axis=1)),
                    backend="numpy")
    a, b = f(M)
    np.testing.assert_array_equal(a, np.extract(M > 0, M))
    np.testing.assert_array_equal(b, np.compress(COND, M, axis=1))


def test_size_must_be_a_non_negative_int():
    with pytest.raises(InvalidArgumentError, match="size="):
        tnp.nonzero(M, size=-1)
    with pytest.raises(InvalidArgumentError, match="size="):
        tnp.nonzero(M, size=2.5)


def test_numpy_dispatch_on_tensors():
    t = tg.constant(M)
    np.testing.assert_array_equal(np.asarray(np.argwhere(t)), np.argwhere(M))
    np.testing.assert_array_equal(np.asarray(np.flatnonzero(t)), np.flatnonzero(M))
    np.testing.assert_array_equal(np.asarray(np.extract(M > 0, t)), np.extract(M > 0, M))
    np.testing.assert_array_equal(np.asarray(np.compress(COND, t, axis=1)),
                                  np.compress(COND, M, axis=1))
