"""Nested structures of arrays ("trees"): tuples, lists, dicts, namedtuples and None, with
anything else a leaf — the structures tracegrad's transforms take and return.

    leaves, structure = tg.tree.flatten({"w": w, "b": (b1, b2)})
    tg.tree.unflatten(structure, leaves)              # the same dict again
    tg.tree.map(lambda p, g: p - 0.1 * g, params, grads)
    vector, unravel = tg.tree.ravel(params)           # one 1-D array, and its inverse

Dict keys are visited in sorted order, so two dicts with the same keys have one structure.
"""

from __future__ import annotations

import builtins
import math
from typing import Any, NamedTuple

import numpy as np

from tracegrad.core import dtypes
from tracegrad.core import tree as _tree
from tracegrad.errors import InvalidArgumentError, ShapeError

__all__ = ["Structure", "flatten", "unflatten", "leaves", "structure", "map", "ravel"]


class Structure:
    """The nesting of a tree without its leaves: hashable, comparable, and able to rebuild
    the tree from a list of leaves (`structure.unflatten(leaves)`)."""

    __slots__ = ("_def",)

    def __init__(self, treedef):
        self._def = treedef

    @property
    def num_leaves(self) -> int:
        return _tree.num_leaves(self._def)

    def unflatten(self, leaves) -> Any:
        """This structure with `leaves` in order at its leaf positions."""
        return _tree.unflatten(self._def, leaves)

    def __eq__(self, other):
        return isinstance(other, Structure) and other._def == self._def

    def __hash__(self):
        return hash(self._def)

    def __repr__(self):
        return f"Structure({_tree.treedef_str(self._def)})"


def flatten(tree: Any, is_leaf=None) -> tuple[list, Structure]:
    """`(leaves, structure)`: the leaves of `tree` in order and its nesting. `is_leaf(x)`
    True stops the descent at `x`."""
    leaves, treedef = _tree.flatten(tree, is_leaf)
    return leaves, Structure(treedef)


def unflatten(structure: Structure, leaves) -> Any:
    """The tree of `structure` holding `leaves` (inverse of `flatten`)."""
    if not isinstance(structure, Structure):
        raise InvalidArgumentError(
            f"tree.unflatten: expects a Structure (from tree.flatten or tree.structure), got "
            f"{type(structure).__name__}")
    return structure.unflatten(leaves)


def leaves(tree: Any, is_leaf=None) -> list:
    """The leaves of `tree` in order."""
    return _tree.flatten(tree, is_leaf)[0]


def structure(tree: Any, is_leaf=None) -> Structure:
    """The nesting of `tree`."""
    return Structure(_tree.flatten(tree, is_leaf)[1])


def map(fn, tree: Any, *rest: Any, is_leaf=None) -> Any:  # noqa: A001 (as jax.tree.map)
    """The tree of `fn(leaf, *matching leaves of rest)`; every tree in `rest` must have
    `tree`'s structure."""
    leaves_, treedef = _tree.flatten(tree, is_leaf)
    columns = [leaves_]
    for i, other in enumerate(rest, 1):
        other_leaves, other_def = _tree.flatten(other, is_leaf)
        if other_def != treedef:
            raise InvalidArgumentError(
                f"tree.map: tree {i} has structure {_tree.treedef_str(other_def)}, not the "
                f"first tree's {_tree.treedef_str(treedef)}")
        columns.append(other_leaves)
    return _tree.unflatten(treedef, [fn(*xs) for xs in zip(*columns, strict=True)])


class _Leaf(NamedTuple):
    shape: tuple
    dtype: np.dtype


class Unravel:
    """The inverse of `ravel`: a 1-D array of the raveled length back to the tree, each leaf
    with its shape and dtype (differentiable: the gradient of a function of the tree with
    respect to the vector is a vector)."""

    __slots__ = ("_structure", "_leaves", "size", "dtype", "__weakref__")

    def __init__(self, structure_, leaves_, dtype):
        self._structure = structure_
        self._leaves = leaves_
        self.size = builtins.sum(math.prod(leaf.shape) for leaf in leaves_)
        self.dtype = dtype

    @property
    def signature(self) -> tuple:
        """What the unravel depends on: the structure, and each leaf's shape and dtype
        (hashable; equal for trees that ravel alike)."""
        return self._structure, tuple(self._leaves)

    def __call__(self, vector) -> Any:
        import tracegrad.numpy as tnp

        shape = getattr(vector, "shape", None)
        if shape is None:
            vector = np.asarray(vector)
            shape = vector.shape
        if tuple(shape) != (self.size,):
            raise ShapeError(
                f"tree.ravel's unravel: expects a vector of shape ({self.size},), got "
                f"{tuple(shape)}")
        out, start = [], 0
        for leaf in self._leaves:
            n = math.prod(leaf.shape)
            piece = tnp.reshape(vector[start:start + n], leaf.shape)
            if piece.dtype != leaf.dtype:
                piece = tnp.astype(piece, leaf.dtype)
            out.append(piece)
            start += n
        return self._structure.unflatten(out)

    def __repr__(self):
        return f"<unravel to {self._structure!r}, {self.size} elements>"


def ravel(tree: Any) -> tuple[Any, Unravel]:
    """`(vector, unravel)`: every leaf of `tree` flattened and joined into one 1-D array of
    their promoted dtype (NumPy's rules, Python scalars weak), and the function that turns
    such a vector back into the tree. Traced, eager and on NumPy leaves alike; NumPy
    leaves give a NumPy vector."""
    import tracegrad.numpy as tnp
    from tracegrad.numpy._core import dtype_of, read

    leaves_, structure_ = flatten(tree)
    values = [read(x) for x in leaves_]
    if not values:
        return np.zeros((0,)), Unravel(structure_, [], dtypes.float64)
    kinds, info = [], []
    for value in values:
        dtype, weak = dtype_of(value)
        kinds.append((dtype, weak))
        shape = tuple(np.shape(value))
        if None in shape:
            raise ShapeError(f"tree.ravel: a leaf of unknown shape {shape} cannot be raveled")
        info.append(_Leaf(shape, dtype))
    dtype, _ = dtypes.result_type(*kinds)
    flat = [tnp.astype(tnp.ravel(v), dtype) for v in values]
    return tnp.concatenate(flat), Unravel(structure_, info, dtype)
