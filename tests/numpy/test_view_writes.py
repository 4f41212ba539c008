"""In-place operators on views: `u = x[1:-1]; u += 1` changes `x` in NumPy, and tracegrad
tensors are immutable, so on a view (a result of basic indexing) they raise, naming the
functional update; on any other tensor they compute `u = u + 1` as before."""

import re

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tracegrad.errors import ArgumentTypeError, UnsupportedOpError

SYMBOLS = ["+", "-", "*", "/", "//", "%", "**", "&", "|", "^", "<<", ">>"]


def _in_place(symbol):
    namespace = {}
    exec(f"def f(u, v):\n    u {symbol}= v\n    return u", namespace)  # noqa: S102
    return namespace["f"]


def _run(mode, fn, x):
    if mode == "eager":
        return fn(tg.constant(x))
    if mode == "tape":
        with tg.GradientTape():
            return fn(tg.constant(x))
    return tg.function(fn)(x)


@pytest.mark.parametrize("mode", ["eager", "tape", "traced"])
@pytest.mark.parametrize("symbol", SYMBOLS)
def test_in_place_operator_on_a_view_raises_naming_the_update(mode, symbol):
    x = np.arange(1, 13).reshape(3, 4)
    op = _in_place(symbol)
    with pytest.raises(ArgumentTypeError, match=rf"`u {re.escape(symbol)}= \.\.\.` on u = "
                       r"x\[1:-1\], a view of x.*x = tnp\.at\(x\)\[1:-1\]\."):
        _run(mode, lambda a: op(a[1:-1], 2), x)


@pytest.mark.parametrize("mode", ["eager", "tape", "traced"])
@pytest.mark.parametrize("key", [0, (slice(None), 1), (Ellipsis, 2), (None, 0), slice(None),
                                 Ellipsis, (slice(None, None, -1), slice(1, 3))])
def test_every_basic_index_that_numpy_views_is_a_view(mode, key):
    x = np.arange(12.0).reshape(3, 4)
    with pytest.raises(ArgumentTypeError, match="a view of x"):
        _run(mode, lambda a: _in_place("+")(a[key], 1.0), x)


@pytest.mark.parametrize("mode", ["eager", "tape", "traced"])
def test_in_place_operators_on_other_tensors_compute_as_numpy(mode):
    x = np.arange(12.0).reshape(3, 4)

    def fn(a):
        b = a * 1.0
        b += 1.0                       # an ordinary tensor
        s = a[1, 2]                    # one element: a scalar in NumPy, a copy
        s *= 3.0
        c = a[[0, 2]]                  # advanced indexing copies
        c -= 1.0
        d = a[1:].copy()               # explicit copies
        d /= 2.0
        e = tnp.array(a[0])
        e **= 2
        f = a[:, 0].astype("float64")
        f += 5.0
        g = a[:]                       # `a` itself stays an ordinary tensor
        a += 1.0
        return b, s, c, d, e, f, g, a

    got = [np.asarray(v) for v in _run(mode, fn, x)]
    want = [x + 1, x[1, 2] * 3, x[[0, 2]] - 1, x[1:] / 2, x[0] ** 2, x[:, 0] + 5, x, x + 1]
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


def test_item_assignment_on_a_view_names_its_key():
    x = tg.constant(np.zeros((2, 3)))
    u = x[:, 1:]
    with pytest.raises(ArgumentTypeError, match=r"u = x\[:, 1:\], a view of x.*"
                       r"x = tnp\.at\(x\)\[:, 1:\]\.set"):
        u[...] = 1.0
    with pytest.raises(ArgumentTypeError, match="immutable"):
        x[0] = 1.0


def test_a_view_of_a_variable_raises_and_the_variable_is_unchanged():
    v = tg.Variable(np.ones(4))
    u = v[1:]
    with pytest.raises(ArgumentTypeError, match="a view of x"):
        u += 1.0
    np.testing.assert_array_equal(v.numpy(), np.ones(4))


def test_out_argument_on_a_view_raises():
    x = tg.constant(np.zeros(5))
    u = x[1:-1]
    with pytest.raises(UnsupportedOpError, match=r"numpy.add with out=.*tensors are immutable: "
                       r"use the result .*x = tnp\.at\(x\)\[idx\]\.add\(v\)"):
        np.add(u, 1, out=u)
    a = np.zeros(3)
    with pytest.raises(UnsupportedOpError, match="numpy.add with out="):
        a[...] += u  # NumPy's in-place add of a tensor into an ndarray


def test_the_functional_update_gives_numpys_in_place_result():
    x = np.arange(10.0)
    want = x.copy()
    u = want[2:-2]
    u += 1.5
    u *= 2.0
    t = tg.constant(x)
    t = tnp.at(t)[2:-2].add(1.5)
    t = tnp.at(t)[2:-2].set(t[2:-2] * 2.0)
    np.testing.assert_array_equal(t.numpy(), want)


def test_gradients_flow_through_a_full_slice_and_its_copy():
    v = tg.Variable(np.arange(4.0))
    with tg.GradientTape() as tape:
        y = tnp.sum(v[:] * v[...].copy())
    np.testing.assert_array_equal(tape.gradient(y, v).numpy(), 2 * np.arange(4.0))


def test_astype_without_a_copy_keeps_a_view_a_view():
    x = tg.constant(np.zeros((2, 3)))
    u = x[0].astype("float64", copy=False)
    with pytest.raises(ArgumentTypeError, match="a view of x"):
        u += 1.0
    w = x[0].astype("float32", copy=False)  # a new dtype is a copy in NumPy too
    w += 1.0
    np.testing.assert_array_equal(w.numpy(), np.ones(3, np.float32))


def _one_array_results():
    """(name, NumPy's result, tracegrad's eager result) of every tracegrad.numpy function
    that NumPy has and that takes one 1-D or 2-D float array alone."""
    import warnings

    for name in sorted(tnp.__all__):
        ours, theirs = getattr(tnp, name), getattr(np, name, None)
        if theirs is None or not callable(ours) or isinstance(ours, type):
            continue
        for base in (np.arange(1.0, 13.0).reshape(3, 4), np.arange(1.0, 5.0)):
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    want, got = theirs(base), ours(tg.constant(base.copy()))
            except Exception:  # noqa: BLE001 - functions that need more arguments
                continue
            pairs = zip(want, got, strict=False) if isinstance(want, (tuple, list)) else \
                [(want, got)]
            for w, g in pairs:
                yield name, base, w, g


def test_only_results_that_numpy_gives_as_views_are_views():
    results = list(_one_array_results())
    assert len(results) > 150
    wrong = [name for name, base, w, g in results if getattr(g, "_view", None) is not None
             and not (isinstance(w, np.ndarray) and np.shares_memory(w, base))]
    assert not wrong, f"views where NumPy copies (x += 1 on them would raise): {wrong}"
