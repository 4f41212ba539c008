"""tracegrad.tree: flatten/unflatten/map/leaves/structure, and ravel's vector and its inverse
on nested structures of mixed dtypes, eager, traced and differentiated."""

from __future__ import annotations

import collections

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tests.finite_diff import central_difference
from tracegrad.errors import InvalidArgumentError, ShapeError

Layer = collections.namedtuple("Layer", "w b")


def _params():
    rng = np.random.default_rng(0)
    return {
        "layers": [Layer(rng.normal(size=(3, 2)), rng.normal(size=2)),
                   Layer(rng.normal(size=(2, 1)).astype(np.float32), np.zeros(1, np.float32))],
        "scale": np.float64(1.5),
        "steps": np.arange(3, dtype=np.int32),
        "unused": None,
    }


def test_flatten_and_unflatten_are_inverses():
    params = _params()
    leaves, structure = tg.tree.flatten(params)
    assert len(leaves) == structure.num_leaves == 6
    assert leaves[-1] is params["steps"] and leaves[0] is params["layers"][0].w
    back = tg.tree.unflatten(structure, leaves)
    assert type(back["layers"][1]) is Layer and back["unused"] is None
    assert back["layers"][1].w is params["layers"][1].w
    assert structure.unflatten(leaves).keys() == params.keys()


def test_structure_is_hashable_and_ignores_dict_order():
    a = tg.tree.structure({"b": 1, "a": (2, 3)})
    b = tg.tree.structure({"a": (5, 6), "b": 4})
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a != tg.tree.structure({"a": [5, 6], "b": 4})
    assert repr(a) == "Structure({'a': (*, *), 'b': *})"
    assert tg.tree.leaves({"b": 1, "a": (2, 3)}) == [2, 3, 1]


def test_is_leaf_stops_the_descent():
    tree = {"pair": (1, 2), "x": 3}
    leaves = tg.tree.leaves(tree, is_leaf=lambda x: isinstance(x, tuple))
    assert leaves == [(1, 2), 3]


def test_map_over_several_trees():
    p = {"w": np.ones(2), "b": (np.zeros(1), 2.0)}
    g = {"w": np.full(2, 4.0), "b": (np.ones(1), 1.0)}
    out = tg.tree.map(lambda x, y: x - 0.5 * y, p, g)
    np.testing.assert_array_equal(out["w"], [-1.0, -1.0])
    np.testing.assert_array_equal(out["b"][0], [-0.5])
    assert out["b"][1] == 1.5
    with pytest.raises(InvalidArgumentError, match=r"tree 1 has structure \{'b': \[\*, \*\]"):
        tg.tree.map(lambda x, y: x, p, {"w": 1, "b": [1, 2]})
    with pytest.raises(InvalidArgumentError, match="expects a Structure"):
        tg.tree.unflatten((1, 2), [1, 2])


def test_ravel_round_trips_mixed_dtypes():
    params = _params()
    vector, unravel = tg.tree.ravel(params)
    assert type(vector) is np.ndarray and vector.dtype == np.float64
    assert vector.shape == (6 + 2 + 2 + 1 + 1 + 3,) == (unravel.size,)
    expected = np.concatenate([params["layers"][0].w.ravel(), params["layers"][0].b,
                               params["layers"][1].w.ravel(), params["layers"][1].b,
                               [params["scale"]], params["steps"]])
    np.testing.assert_array_equal(vector, expected)
    back = unravel(vector)
    for got, want in zip(tg.tree.leaves(back), tg.tree.leaves(params), strict=True):
        assert np.asarray(got).dtype == np.asarray(want).dtype
        np.testing.assert_array_equal(got, want)
    assert back["unused"] is None and type(back["layers"][0]) is Layer


def test_ravel_promotes_as_numpy_with_python_scalars_weak():
    vector, unravel = tg.tree.ravel((np.ones(2, np.float32), 3, 0.5))
    assert vector.dtype == np.float32
    np.testing.assert_array_equal(vector, [1.0, 1.0, 3.0, 0.5])
    vector, _ = tg.tree.ravel((np.ones(2, np.int32), 3))
    assert vector.dtype == np.int32
    vector, unravel = tg.tree.ravel([])
    assert vector.shape == (0,) and unravel(vector) == []


def test_ravel_and_unravel_of_tensors_eager_and_traced():
    params = tg.tree.map(tg.constant, _params())
    assert params["unused"] is None
    vector, unravel = tg.tree.ravel(params)
    assert isinstance(vector, tg.Tensor)
    expected, _ = tg.tree.ravel(_params())
    np.testing.assert_array_equal(vector.numpy(), expected)

    @tg.function
    def round_trip(p):
        v, unr = tg.tree.ravel(p)
        return v * 2.0, unr(v * 2.0)

    v2, back = round_trip(_params())
    np.testing.assert_array_equal(v2, 2.0 * expected)
    np.testing.assert_array_equal(back["layers"][0].w, 2.0 * _params()["layers"][0].w)
    assert back["steps"].dtype == np.int32


def _loss(p):
    (l0, l1) = p["layers"]
    h = tnp.tanh(np.ones((4, 3)) @ l0.w + l0.b)
    return tnp.sum((h @ l1.w.astype(np.float64) + p["scale"]) ** 2)


def test_gradient_through_unravel_is_a_vector():
    vector, unravel = tg.tree.ravel(_params())
    g = tg.function(tg.grad(lambda v: _loss(unravel(v))))(vector)
    assert g.shape == vector.shape and g.dtype == np.float64

    def numpy_loss(v):
        return float(_loss(unravel(v)))

    # the float64 leaves against central differences; the float32 ones (rounded on the way
    # in) against the gradient with respect to the tree; the int32 steps get none
    f64 = np.r_[0:8, 11]
    fd = central_difference(numpy_loss, vector)
    np.testing.assert_allclose(g[f64], fd[f64], rtol=1e-6, atol=1e-8)
    p = unravel(vector)
    l0, l1 = p["layers"]
    g_w = tg.grad(lambda w: _loss({**p, "layers": [l0, Layer(w, l1.b)]}))(l1.w)
    np.testing.assert_allclose(g[8:10], g_w.ravel(), rtol=1e-6)
    assert np.abs(g[8:10]).min() > 0.1
    np.testing.assert_array_equal(g[12:], 0.0)


def test_gradient_through_ravel_reaches_each_leaf():
    def f(p):
        v, _ = tg.tree.ravel(p)
        return tnp.sum(v ** 2)

    p = {"a": np.arange(3.0), "b": (np.ones((2, 2)),)}
    g = tg.grad(f)(p)
    np.testing.assert_array_equal(g["a"], 2 * np.arange(3.0))
    np.testing.assert_array_equal(g["b"][0], 2 * np.ones((2, 2)))


def test_unravel_checks_the_vector_shape():
    _, unravel = tg.tree.ravel({"a": np.ones(3)})
    with pytest.raises(ShapeError, match=r"expects a vector of shape \(3,\), got \(4,\)"):
        unravel(np.ones(4))
