"""tree: flatten/unflatten of nested tuples, lists, dicts, namedtuples and None."""

import collections

import pytest

from tracegrad.core import tree

Point = collections.namedtuple("Point", "x y")
Other = collections.namedtuple("Other", "x y")

TREES = [
    1,
    None,
    (),
    [],
    {},
    (1, 2),
    [1, [2, (3,)]],
    {"b": 1, "a": (2, 3)},
    Point(1, (2, None)),
    {"p": Point([1], {"z": 2}), "n": None, "t": ((), [4])},
    (None, None),
    [{"k": [Point(1, 2)]}],
]


@pytest.mark.parametrize("t", TREES, ids=repr)
def test_flatten_unflatten_round_trip(t):
    leaves, treedef = tree.flatten(t)
    back = tree.unflatten(treedef, leaves)
    assert back == t and type(back) is type(t)
    assert tree.num_leaves(treedef) == len(leaves)


def test_leaf_order_and_sorted_dict_keys():
    leaves, _ = tree.flatten({"b": 1, "a": (2, [3, None, 4])})
    assert leaves == [2, 3, 4, 1]
    _, d1 = tree.flatten({"b": 1, "a": 2})
    _, d2 = tree.flatten({"a": 2, "b": 1})
    assert d1 == d2 and hash(d1) == hash(d2)


def test_unsortable_dict_keys_keep_insertion_order():
    leaves, treedef = tree.flatten({1: "one", "a": "A"})
    assert leaves == ["one", "A"]
    assert tree.unflatten(treedef, leaves) == {1: "one", "a": "A"}


def test_none_is_an_empty_node_not_a_leaf():
    leaves, treedef = tree.flatten((None, 1))
    assert leaves == [1]
    assert tree.unflatten(treedef, [5]) == (None, 5)


@pytest.mark.parametrize("a,b", [
    ((1, 2), [1, 2]),
    (Point(1, 2), (1, 2)),
    (Point(1, 2), Other(1, 2)),
    ({"a": 1}, {"b": 1}),
    ((1, (2,)), (1, 2)),
    ((None,), (1,)),
])
def test_different_structures_have_different_treedefs(a, b):
    assert tree.flatten(a)[1] != tree.flatten(b)[1]


def test_treedefs_are_hashable_and_equal_by_structure():
    defs = {tree.flatten(t)[1] for t in TREES}
    assert len(defs) == len(TREES)  # every tree in TREES has its own structure
    assert tree.flatten((7, [8]))[1] == tree.flatten(("a", ["b"]))[1]


def test_is_leaf_stops_descent():
    leaves, treedef = tree.flatten([(1, 2), (3, 4)], is_leaf=lambda x: isinstance(x, tuple))
    assert leaves == [(1, 2), (3, 4)]
    assert tree.unflatten(treedef, ["a", "b"]) == ["a", "b"]


def test_unflatten_with_wrong_leaf_count():
    _, treedef = tree.flatten((1, [2, 3]))
    with pytest.raises(ValueError, match="fewer leaves"):
        tree.unflatten(treedef, [1, 2])
    with pytest.raises(ValueError, match="more leaves"):
        tree.unflatten(treedef, [1, 2, 3, 4])


def test_treedef_str():
    _, treedef = tree.flatten({"a": (1,), "b": [Point(1, None)]})
    assert tree.treedef_str(treedef) == "{'a': (*,), 'b': [Point(*, None)]}"
