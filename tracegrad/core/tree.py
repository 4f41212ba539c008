"""Nested structures ("trees") of tuples, lists, dicts, namedtuples and None.

`flatten(tree) -> (leaves, treedef)` and `unflatten(treedef, leaves)` are inverses.
A treedef is a hashable nested tuple, so it can be part of a cache key. Dict keys are
sorted (as JAX and `tf.nest` do), so `{"b": 1, "a": 2}` and `{"a": 2, "b": 1}` share
a treedef.
"""

from __future__ import annotations

import sys
from typing import Any

from tracegrad.errors import InvalidArgumentError

LEAF = "*"
_NONE = ("None",)


def _is_namedtuple(x) -> bool:
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def _sorted_keys(d: dict) -> tuple:
    try:
        return tuple(sorted(d))
    except TypeError:
        return tuple(d)


def flatten(tree: Any, is_leaf=None) -> tuple[list, Any]:
    """The leaves of `tree` in order, and its treedef."""
    leaves: list = []
    try:
        return leaves, _flatten(tree, leaves, is_leaf)
    except RecursionError:
        raise _too_deep("flatten") from None


def _too_deep(what: str) -> InvalidArgumentError:
    return InvalidArgumentError(
        f"{what}: the structure is nested too deeply for Python's recursion limit "
        f"({sys.getrecursionlimit()} frames; a few hundred levels of lists, tuples and "
        "dicts); pass fewer levels (a list of arrays, a stacked array) or raise the limit "
        "with sys.setrecursionlimit")


def _flatten(x, leaves, is_leaf):
    if is_leaf is not None and is_leaf(x):
        leaves.append(x)
        return LEAF
    t = type(x)
    if t is tuple or t is list:
        return (t, None, tuple([_flatten(c, leaves, is_leaf) for c in x]))
    if x is None:
        return _NONE
    if t is dict:
        keys = _sorted_keys(x)
        return (dict, keys, tuple([_flatten(x[k], leaves, is_leaf) for k in keys]))
    if _is_namedtuple(x):
        return (t, None, tuple([_flatten(c, leaves, is_leaf) for c in x]))
    leaves.append(x)
    return LEAF


def unflatten(treedef, leaves) -> Any:
    """The structure `treedef` filled with `leaves` (an iterable)."""
    it = iter(leaves)
    try:
        out = _unflatten(treedef, it)
    except RecursionError:
        raise _too_deep("unflatten") from None
    for _ in it:
        raise InvalidArgumentError("unflatten: more leaves than the structure holds")
    return out


def _unflatten(d, it):
    if d is LEAF:
        try:
            return next(it)
        except StopIteration:
            raise InvalidArgumentError("unflatten: fewer leaves than the structure holds") from None
    if d is _NONE or d == _NONE:
        return None
    t, aux, children = d
    values = [_unflatten(c, it) for c in children]
    if t is tuple:
        return tuple(values)
    if t is list:
        return values
    if t is dict:
        return dict(zip(aux, values, strict=True))
    return t(*values)


def num_leaves(treedef) -> int:
    if treedef is LEAF:
        return 1
    if treedef == _NONE:
        return 0
    return sum(num_leaves(c) for c in treedef[2])


def treedef_str(treedef) -> str:
    if treedef is LEAF:
        return "*"
    if treedef == _NONE:
        return "None"
    t, aux, children = treedef
    inner = ", ".join(treedef_str(c) for c in children)
    if t is tuple:
        return f"({inner}{',' if len(children) == 1 else ''})"
    if t is list:
        return f"[{inner}]"
    if t is dict:
        pairs = zip(aux, children, strict=True)
        return "{" + ", ".join(f"{k!r}: {treedef_str(c)}" for k, c in pairs) + "}"
    return f"{t.__name__}({inner})"


def _loose(treedef):
    if treedef is LEAF or treedef == _NONE:
        return treedef
    t, aux, children = treedef
    return (tuple if t is list else t, aux, tuple(_loose(c) for c in children))


def same_structure(a, b) -> bool:
    """Whether treedefs `a` and `b` match where lists and tuples are alike (TF's
    `nest.assert_same_structure(check_types=False)`): `[x, y]` for `(x, y)`."""
    return a == b or _loose(a) == _loose(b)


def leaf_paths(treedef) -> list[str]:
    """A path for each leaf of `treedef`, as it would be indexed: `"[1]['w']"` (`""` for a
    bare leaf)."""
    if treedef is LEAF:
        return [""]
    if treedef == _NONE:
        return []
    t, aux, children = treedef
    keys = aux if t is dict else range(len(children))
    return [f"[{k!r}]{p}" for k, c in zip(keys, children, strict=True) for p in leaf_paths(c)]
