"""unique and its array-API forms, the set operations, trim_zeros, bincount and the
histograms without `size=`/`length=`: NumPy's exact result on concrete data (a tensor for
tensor input, with the gradient of the gathered values and of the weights), a clear error
naming the function and `size=` (`length=`, the bin count) inside a trace, and NumPy's
errors as `InvalidArgumentError`. The traced forms are op-table rows
(tests/ops/optable_sets.py)."""

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tracegrad.core.ir import EagerTensor
from tracegrad.errors import InvalidArgumentError

X = np.array([3.0, 1.0, np.nan, 3.0, -0.0, 2.0, np.nan, 1.0, 1.0, 0.0])
M = np.array([[1, 2, 1, 0], [0, 5, 0, 1], [1, 2, 1, 0]])
A = np.array([5.0, 1.0, 3.0, 3.0, 7.0, 1.0, np.nan, -2.0])
B = np.array([[3.0, 1.0, 1.0], [8.0, np.nan, 7.0]])
IDX = np.array([0, 3, 1, 1, 5, 3, 3])
W = np.linspace(-1.0, 2.0, 7)
H = np.random.default_rng(5).normal(size=60)

EAGER = {
    "unique": lambda np_, x: np_.unique(x, True, True, True),
    "unique[equal_nan=False]": lambda np_, x: np_.unique(x, True, True, True,
                                                         equal_nan=False),
    "unique[sorted=False]": lambda np_, x: np_.unique(x, sorted=False),
    "unique[axis=1]": lambda np_, x: np_.unique(M if x is X else _like(x, M), True, True,
                                                True, axis=1),
    "unique[axis=0]": lambda np_, x: np_.unique(M if x is X else _like(x, M), axis=0,
                                                return_counts=True),
    "unique_all": lambda np_, x: tuple(np_.unique_all(x)),
    "unique_counts": lambda np_, x: tuple(np_.unique_counts(x)),
    "unique_inverse": lambda np_, x: tuple(np_.unique_inverse(x)),
    "unique_values": lambda np_, x: np_.sort(np_.unique_values(x)),
    "intersect1d": lambda np_, x: np_.intersect1d(_a(np_, x), B, return_indices=True),
    "setdiff1d": lambda np_, x: np_.setdiff1d(_a(np_, x), B),
    "setdiff1d[assume_unique]": lambda np_, x: np_.setdiff1d(_a(np_, x), [3.0, -2.0], True),
    "union1d": lambda np_, x: np_.union1d(_a(np_, x), B),
    "setxor1d": lambda np_, x: np_.setxor1d(_a(np_, x), B),
    "trim_zeros": lambda np_, x: np_.trim_zeros(_like(x, np.array([0.0, 0, 1, 0, 2, 0]))),
    "trim_zeros[f]": lambda np_, x: np_.trim_zeros(_like(x, np.array([0.0, 0, 1, 0])), "f"),
    "trim_zeros[b]": lambda np_, x: np_.trim_zeros(_like(x, np.array([0.0, 0, 1, 0])), "b"),
    "trim_zeros[all zero]": lambda np_, x: np_.trim_zeros(_like(x, np.zeros(3)), "f"),
    "trim_zeros[2-D]": lambda np_, x: np_.trim_zeros(_like(x, np.pad(M, 1))),
    "trim_zeros[2-D,axis=0]": lambda np_, x: np_.trim_zeros(_like(x, np.pad(M, 1)), axis=0),
    "bincount": lambda np_, x: np_.bincount(_like(x, IDX)),
    "bincount[weights,minlength]": lambda np_, x: np_.bincount(_like(x, IDX), _like(x, W), 9),
    "bincount[empty]": lambda np_, x: np_.bincount(_like(x, np.zeros(0, np.int64))),
    "histogram[auto]": lambda np_, x: np_.histogram(_like(x, H), "auto"),
    "histogram[fd,range]": lambda np_, x: np_.histogram(_like(x, H), "fd", range=(-1, 1)),
    "histogram_bin_edges[sturges]": lambda np_, x: np_.histogram_bin_edges(_like(x, H),
                                                                           "sturges"),
}


def _like(x, value):
    """`value` as the kind of input `x` is (a tensor or NumPy)."""
    return tg.constant(value) if isinstance(x, EagerTensor) else value


def _a(np_, x):
    return _like(x, A)


def _leaves(x):
    return list(x) if isinstance(x, tuple) else [x]


@pytest.mark.parametrize("name", EAGER)
@pytest.mark.parametrize("kind", ["numpy", "tensor"])
def test_concrete_input_gives_numpys_exact_result(name, kind):
    fn = EAGER[name]
    got = fn(tnp, X if kind == "numpy" else tg.constant(X))
    want = fn(np, X)
    for g, w in zip(_leaves(got), _leaves(want), strict=True):
        assert isinstance(g, EagerTensor if kind == "tensor" else np.ndarray), type(g)
        g = np.asarray(g)
        assert g.dtype == w.dtype and g.shape == w.shape, (g, w)
        np.testing.assert_array_equal(g, w)


def test_unique_all_forms_are_numpys_named_tuples():
    for name in ("unique_all", "unique_counts", "unique_inverse"):
        got, want = getattr(tnp, name)(tg.constant(X)), getattr(np, name)(X)
        assert type(got).__name__ == type(want).__name__ and got._fields == want._fields


def test_numpy_dispatch_on_tensors():
    t = tg.constant(X)
    np.testing.assert_array_equal(np.asarray(np.unique(t)), np.unique(X))
    np.testing.assert_array_equal(np.asarray(np.union1d(t, B)), np.union1d(X, B))
    counts, edges = np.histogram(tg.constant(H), bins=4)
    np.testing.assert_array_equal(np.asarray(counts), np.histogram(H, bins=4)[0])
    np.testing.assert_array_equal(np.asarray(np.bincount(tg.constant(IDX))), np.bincount(IDX))


# -- gradients ----------------------------------------------------------------------------------


def test_unique_values_pass_the_gradient_to_the_first_occurrence():
    x = np.array([3.0, 1.0, 3.0, 2.0, 1.0])
    def f(t):
        return tnp.sum(tnp.unique(t, size=4, fill_value=0.0) * np.array([1.0, 2, 3, 4]))

    np.testing.assert_array_equal(tg.grad(f)(x), [3.0, 1.0, 0.0, 2.0, 0.0])
    v = tg.Variable(x)
    with tg.GradientTape() as tape:
        y = tnp.sum(tnp.unique(v) * np.array([1.0, 2, 3]))
    np.testing.assert_array_equal(np.asarray(tape.gradient(y, v)), [3.0, 1.0, 0.0, 2.0, 0.0])


def test_intersect1d_values_are_gathered_from_ar1():
    def f(a, b):
        return tnp.sum(tnp.intersect1d(a, b, size=3, fill_value=0.0) * np.array([1.0, 2, 3]))

    a, b = np.array([4.0, 2.0, 2.0, 7.0]), np.array([7.0, 2.0])
    ga, gb = tg.grad(f, argnums=(0, 1))(a, b)
    np.testing.assert_array_equal(ga, [0.0, 1.0, 0.0, 2.0])
    np.testing.assert_array_equal(gb, [0.0, 0.0])


def test_the_default_fill_is_the_smallest_value_and_passes_its_gradient():
    def f(t):
        return tnp.sum(tnp.unique(t, size=3))

    x = np.array([2.0, 1.0, 2.0])
    np.testing.assert_array_equal(tnp.unique(x, size=3), [1.0, 2.0, 1.0])
    np.testing.assert_array_equal(tg.grad(f)(x), [1.0, 2.0, 0.0])


def test_counts_have_zero_gradient_in_a_sum_with_values():
    def f(x):
        values, counts = tnp.unique(x, return_counts=True, size=3, fill_value=0.0)
        hist, _ = tnp.histogram(x, bins=2)
        return tnp.sum(values) + tnp.sum(counts) + tnp.sum(hist)

    np.testing.assert_array_equal(tg.grad(f)(np.array([2.0, 1.0, 2.0])), [1.0, 1.0, 0.0])


def test_eager_histogram_weights_keep_the_gradient():
    w = tg.Variable(np.ones(H.size))
    with tg.GradientTape() as tape:
        hist, edges = tnp.histogram(tg.constant(H), bins=5, weights=w)
        y = tnp.sum(hist * np.arange(5.0))
    bins = np.minimum(np.searchsorted(np.asarray(edges), H, side="right") - 1, 4)
    np.testing.assert_array_equal(np.asarray(tape.gradient(y, w)), bins.astype(float))


# -- errors -------------------------------------------------------------------------------------

TRACED = {
    "unique": (lambda x: tnp.unique(x), "size="),
    "np.unique": (lambda x: np.unique(x), "size="),
    "unique_all": (lambda x: tnp.unique_all(x), "size="),
    "unique_values": (lambda x: tnp.unique_values(x), "size="),
    "intersect1d": (lambda x: tnp.intersect1d(x, x), "size="),
    "setdiff1d": (lambda x: tnp.setdiff1d(x, [1.0]), "size="),
    "union1d": (lambda x: tnp.union1d(x, x), "size="),
    "setxor1d": (lambda x: tnp.setxor1d([1.0], x), "size="),
    "trim_zeros": (lambda x: tnp.trim_zeros(x), "concrete data"),
    "bincount": (lambda x: tnp.bincount(x.astype(np.int64)), "length="),
    "histogram": (lambda x: tnp.histogram(x, "auto"), "int number of bins"),
    "histogram_bin_edges": (lambda x: tnp.histogram_bin_edges(x, "fd"), "int number of bins"),
}


@pytest.mark.parametrize("name", TRACED)
def test_traced_without_a_static_size_names_the_function_and_the_fix(name):
    fn, fix = TRACED[name]
    function = name.removeprefix("np.")
    with pytest.raises(InvalidArgumentError, match=rf"^{function}\b.*{fix}"):
        tg.function(fn, backend="numpy")(np.abs(H[:6]).round())


@pytest.mark.parametrize("call,match", [
    (lambda: tnp.bincount(tg.constant(np.array([1, -1]))), "non-negative"),
    (lambda: tnp.bincount(tg.constant(np.array([1.0]))), "integers"),
    (lambda: tnp.histogram(tg.constant(H), bins=0), "positive"),
    (lambda: tnp.histogram(tg.constant(H), bins=[1.0, 0.0, 2.0]), "monotonically"),
    (lambda: tnp.histogram(tg.constant(H), range=(1.0, 0.0)), "max must be larger"),
    (lambda: tnp.histogram(tg.constant(np.array([1.0, np.nan]))), "not finite"),
    (lambda: tnp.histogram(H, bins="nonsense"), "estimator"),
    (lambda: tnp.histogramdd(tg.constant(H.reshape(-1, 2)), bins=(2, 3, 4)), "dimension"),
    (lambda: tnp.unique(tg.constant(X), size=-1), "size="),
    (lambda: tnp.trim_zeros(tg.constant(X), trim="x"), "trim"),
])
def test_bad_input_raises_invalid_argument_naming_the_function(call, match):
    with pytest.raises((InvalidArgumentError, tg.errors.DTypeError), match=match):
        call()


def test_traced_bincount_drops_values_outside_its_length():
    f = tg.function(lambda x: tnp.bincount(x, length=3), backend="numpy")
    np.testing.assert_array_equal(f(np.array([-1, 0, 2, 3, 2])), [1, 0, 2])


def test_vmap_with_size_batches():
    xs = np.array([[3.0, 1.0, 3.0, 2.0], [1.0, 1.0, 1.0, 1.0]])
    values, counts = tg.vmap(lambda t: tnp.unique(t, return_counts=True, size=3))(xs)
    np.testing.assert_array_equal(values, [[1.0, 2.0, 3.0], [1.0, 1.0, 1.0]])
    np.testing.assert_array_equal(counts, [[1, 1, 2], [4, 0, 0]])
