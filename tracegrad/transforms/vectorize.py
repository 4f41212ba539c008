"""Vectorization (pfor / vmap): a traced graph re-emitted with every value carrying a batch.

A loop body (or a per-example function) is traced once into a `FuncGraph`; `Vectorizer`
then emits it into the graph being built, op by op, tracking for each value the axis its
batch runs along, or None for a loop-invariant value (as TensorFlow's pfor tracks
"stacked" values). An op whose operands are all invariant is copied unchanged; any other
goes through its primitive's batch rule (`Primitive.batch`, see `tracegrad/ops/_batching.py`).
A primitive without a rule, or a case its rule cannot batch, is a `VectorizationError`
(an `UnsupportedOpError` and a `ValueError`) at transform time naming the op and its line —
there is no silent per-iteration loop.

`vmap_inline`, `pfor_inline` and `for_loop_inline` are the transforms' inline forms (they
emit into the current graph); `tracegrad.autodiff` stages them for concrete input.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence

import numpy as np

from tracegrad import ops
from tracegrad.core import dtypes, tree
from tracegrad.core.ir import FuncGraph, GraphTensor, Tensor
from tracegrad.core.state import state
from tracegrad.core.types import TensorType
from tracegrad.core.variables import Variable
from tracegrad.errors import (
    ArgumentTypeError, InvalidArgumentError, ShapeError, TracegradError, VectorizationError,
)
from tracegrad.ops._batching import bdim_at, moveaxis

__all__ = ["Vectorizer", "vmap_inline", "pfor_inline", "for_loop_inline", "batched_type"]


def batched_type(t: TensorType, size, axis: int = 0) -> TensorType:
    """`t` with a batch dim of `size` inserted at `axis`."""
    shape = tuple(t.shape)
    return TensorType(shape[:axis] + (size,) + shape[axis:], t.dtype, t.weak)


class Vectorizer:
    """Emits batched copies of graphs into the current graph; the `ctx` of batch rules.

    `what` names the transform in error messages (`vmap`, `pfor`, `jacobian` ...).
    """

    def __init__(self, what: str):
        self.what = what
        self.op = None
        self.mask = None  # bool [B] (batch on axis 0): the lanes whose results are kept

    @contextlib.contextmanager
    def masked(self, active, *, fresh: bool = False):
        """Within the block, only the lanes where `active` holds keep their results (both
        branches of a batched cond run, a batched loop's body runs on finished lanes too):
        rules that can fail on a value (gathers, scatters) make the other lanes' values
        safe. `fresh`: ignore the enclosing mask (a new sub-graph cannot read it)."""
        saved = self.mask
        if saved is not None and not fresh and active is not None:
            active = ops.and_(state.graph.to_tensor(saved), active)
        self.mask = active if active is not None or fresh else saved
        try:
            yield
        finally:
            self.mask = saved

    def safe_indices(self, indices, axis: int):
        """`indices` (batched on `axis`) with the masked-out lanes' indices replaced by 0."""
        if self.mask is None:
            return indices
        keep = ops.broadcast_like(self.mask, indices, (axis,))
        return ops.select(keep, indices, ops.zeros_like(indices))

    def unsupported(self, why: str) -> VectorizationError:
        """The error for an op of the graph being vectorized that cannot be batched."""
        op = self.op
        switch = ("experimental_use_pfor=False" if self.what.startswith("GradientTape")
                  else "use_pfor=False (or tg.for_loop)")
        return VectorizationError(
            f"{self.what}: cannot vectorize {op.primitive.name}: {why} (op created at "
            f"{op.source}); use {switch} to run the iterations one by one"
        )

    def run(self, graph: FuncGraph, inputs: Sequence, dims: Sequence) -> tuple[list, list]:
        """Emit `graph`'s ops batched into the current graph: `inputs` (current-graph
        tensors) feed `graph.inputs` — or `graph.all_inputs`, captures included, when there
        are as many — batched along `dims` (None: invariant). Returns the outputs and their
        batch dims."""
        target = state.graph
        env: dict[int, tuple] = {}
        fed = graph.inputs if len(inputs) == len(graph.inputs) else graph.all_inputs
        for t, x, d in zip(fed, inputs, dims, strict=True):
            env[id(t)] = (x, d)
        for external, p in graph.captures:
            if id(p) not in env:
                env[id(p)] = (target.to_tensor(external), None)
        saved = state.source
        try:
            for op in graph.operations:
                args = [env[id(t)][0] for t in op.inputs]
                arg_dims = [env[id(t)][1] for t in op.inputs]
                state.source = op.source
                self.op = op
                if all(d is None for d in arg_dims):
                    outs, out_dims = self._copy(op, args), [None] * len(op.outputs)
                else:
                    outs, out_dims = self._batch(op, args, arg_dims)
                for old, new, d in zip(op.outputs, outs, out_dims, strict=True):
                    env[id(old)] = (new, d)
        finally:
            state.source = saved
            self.op = None
        return [env[id(t)][0] for t in graph.outputs], [env[id(t)][1] for t in graph.outputs]

    def vectorize_graph(self, graph: FuncGraph, dims: Sequence, size) -> FuncGraph:
        """A new graph computing `graph` for a batch of `size` (None: unknown): its inputs
        are `graph`'s batched on axis 0 where `dims` says 0 (None: unchanged), its outputs
        batched on axis 0 (invariant ones broadcast)."""
        g = FuncGraph(f"{graph.name}_batched", outer=state.graph)
        with g.as_default(), self.masked(None, fresh=True):
            inputs = [g.add_input(batched_type(t.type, size) if d is not None else t.type,
                                  t.name) for t, d in zip(graph.inputs, dims, strict=True)]
            outs, out_dims = self.run(graph, inputs, dims)
            like = next(x for x, d in zip(inputs, dims, strict=True) if d is not None)
            g.outputs = [bdim_at(x, d, 0, like, 0) for x, d in zip(outs, out_dims, strict=True)]
        return g

    def _copy(self, op, args):
        prim = op.primitive
        out = prim.bind(*args, **op.attrs)
        outs = list(out) if prim.multiple_results else [out]
        if op.grad_override is not None and outs and isinstance(outs[0], GraphTensor):
            outs[0].op.grad_override = op.grad_override
        return outs

    def _batch(self, op, args, dims):
        prim = op.primitive
        if prim.batch is None:
            raise self.unsupported("the primitive has no batch rule")
        outs, out_dims = prim.batch(self, args, dims, **op.attrs)
        if not prim.multiple_results:
            outs, out_dims = [outs], [out_dims]
        for old, new, d in zip(op.outputs, outs, out_dims, strict=True):
            _check_rule(op, old.type, new, d)
        return outs, out_dims


def _check_rule(op, want: TensorType, got, d) -> None:
    """A batch rule's result must be the op's result with a batch dim at `d`."""
    shape = tuple(got.shape)
    if d is not None:
        shape = shape[:d] + shape[d + 1:]
    fits = len(shape) == len(want.shape) and all(
        a is None or b is None or a == b for a, b in zip(shape, want.shape))
    if not fits or got.dtype != want.dtype:
        raise TracegradError(
            f"the batch rule of {op.primitive.name} gave {got.type} batched on {d} for a "
            f"result of type {want} (a tracegrad bug; op created at {op.source})"
        )


# -- the user-facing transforms, inline ---------------------------------------------------------


def _is_array(x) -> bool:
    return isinstance(x, (Tensor, Variable, np.ndarray, np.generic))


def _prefix_axes(what: str, axes, value, where: str) -> list:
    """One axis per leaf of `value`, from `axes`: an int or None for all of them, or a
    structure matching `value`'s top levels (a prefix of it)."""
    if axes is None or isinstance(axes, int):
        return [axes] * len(tree.flatten(value)[0])
    if isinstance(axes, (tuple, list)) and isinstance(value, (tuple, list)):
        if len(axes) != len(value):
            raise InvalidArgumentError(
                f"{what}: {where} has {len(axes)} entries for a structure of {len(value)}"
            )
        return [a for sub, v in zip(axes, value, strict=True)
                for a in _prefix_axes(what, sub, v, where)]
    if isinstance(axes, dict) and isinstance(value, dict):
        if set(axes) != set(value):
            raise InvalidArgumentError(f"{what}: {where} keys {sorted(axes)} differ from the "
                                       f"structure's {sorted(value)}")
        return [a for k in tree.flatten(value)[1][1]
                for a in _prefix_axes(what, axes[k], value[k], where)]
    raise InvalidArgumentError(
        f"{what}: {where} {axes!r} is not an int, None or a structure matching "
        f"{type(value).__name__}"
    )


def _axis(what: str, axis: int, ndim: int, where: str) -> int:
    if not -ndim <= axis < ndim:
        raise InvalidArgumentError(f"{what}: {where} {axis} is out of range for a value of "
                                   f"rank {ndim}")
    return axis % ndim


def vmap_inline(fn: Callable, args: tuple, kwargs: dict, in_axes, out_axes, what="vmap"):
    """`fn` mapped over axis `in_axes` of its arguments, emitted into the current graph;
    results stacked on `out_axes`."""
    outer = state.graph
    leaves, treedef = tree.flatten(args)
    axes = _prefix_axes(what, in_axes, tuple(args), "in_axes")
    call_leaves, batched, dims, sizes = list(leaves), [], [], []
    graph = FuncGraph(f"{what}_{getattr(fn, '__name__', 'fn')}", outer=outer)
    for k, (leaf, a) in enumerate(zip(leaves, axes, strict=True)):
        if a is None:
            continue
        if not _is_array(leaf) and not isinstance(leaf, (bool, int, float, complex)):
            raise ArgumentTypeError(f"{what}: argument leaf {k} ({type(leaf).__name__}) is not "
                                    f"an array; give it in_axes None")
        t = outer.to_tensor(leaf)
        a = _axis(what, a, t.ndim, "in_axes")
        batched.append(moveaxis(t, a, 0) if a else t)
        dims.append(0)
        sizes.append(t.shape[a])
        call_leaves[k] = graph.add_input(TensorType(t.shape[:a] + t.shape[a + 1:], t.dtype,
                                                    t.type.weak))
    if not batched:
        raise InvalidArgumentError(f"{what}: in_axes {in_axes!r} maps no argument; at least "
                                   f"one must have an axis")
    known = {n for n in sizes if n is not None}
    if len(known) > 1:
        raise ShapeError(f"{what}: the mapped axes have different sizes {sizes}")
    with graph.as_default():
        result = fn(*tree.unflatten(treedef, call_leaves), **kwargs)
        out_leaves, out_def = tree.flatten(result)
        graph.outputs = [graph.to_tensor(y) for y in out_leaves]
    outs, out_dims = Vectorizer(what).run(graph, batched, dims)
    oaxes = _prefix_axes(what, out_axes, result, "out_axes")
    final = []
    for y, d, a in zip(outs, out_dims, oaxes, strict=True):
        if a is None:
            if d is not None:
                raise InvalidArgumentError(f"{what}: out_axes None for an output that depends "
                                           f"on the mapped axis")
            final.append(y)
            continue
        a = _axis(what, a, y.ndim + (d is None), "out_axes")
        final.append(bdim_at(y, d, a, batched[0], 0))
    return tree.unflatten(out_def, final)


def _trace_loop_body(loop_fn: Callable, what: str):
    graph = FuncGraph(f"{what}_{getattr(loop_fn, '__name__', 'fn')}", outer=state.graph)
    with graph.as_default():
        i = graph.add_input(TensorType((), dtypes.int64), "i")
        result = loop_fn(i)
        leaves, treedef = tree.flatten(result)
        graph.outputs = [graph.to_tensor(y) for y in leaves]
    return graph, treedef


def _check_iters(what: str, iters) -> int:
    if isinstance(iters, (bool, np.bool_)) or not isinstance(iters, (int, np.integer)):
        raise ArgumentTypeError(f"{what}: iters must be a Python int, got "
                                f"{type(iters).__name__}")
    if iters < 0:
        raise InvalidArgumentError(f"{what}: iters must be >= 0, got {iters}")
    return int(iters)


def pfor_inline(loop_fn: Callable, iters: int, what: str = "pfor"):
    """`loop_fn(i)` for i in range(iters), vectorized, results stacked on a new axis 0."""
    iters = _check_iters(what, iters)
    graph, treedef = _trace_loop_body(loop_fn, what)
    ids = ops.iota(dtype=dtypes.int64, shape=(iters,), dimension=0)
    outs, out_dims = Vectorizer(what).run(graph, [ids], [0])
    return tree.unflatten(treedef, [bdim_at(y, d, 0, ids, 0)
                                    for y, d in zip(outs, out_dims, strict=True)])


def for_loop_inline(loop_fn: Callable, iters: int, what: str = "for_loop"):
    """`loop_fn(i)` for i in range(iters), one iteration after the other (traced once per
    iteration), results stacked on a new axis 0."""
    iters = _check_iters(what, iters)
    graph = state.graph
    rows, treedef = [], None
    for i in range(max(iters, 1)):
        result = loop_fn(graph.constant(np.asarray(i, np.int64)))
        leaves, d = tree.flatten(result)
        if treedef is not None and d != treedef:
            raise InvalidArgumentError(f"{what}: iteration {i} returned {tree.treedef_str(d)}, "
                                       f"the first {tree.treedef_str(treedef)}")
        treedef = d
        rows.append([graph.to_tensor(y) for y in leaves])
    stacked = []
    for column in zip(*rows, strict=True):
        parts = [ops.reshape(y, new_sizes=(1, *(-1 if n is None else n for n in y.shape)))
                 for y in column]
        if iters == 0:
            first = column[0]
            zeros = ops.zeros_like(first)
            stacked.append(ops.slice(ops.reshape(zeros, new_sizes=(1, *first.shape)),
                                     start_indices=(0,) * (first.ndim + 1),
                                     limit_indices=(0, *first.shape),
                                     strides=(1,) * (first.ndim + 1)))
        else:
            stacked.append(ops.concatenate(*parts, dimension=0) if len(parts) > 1
                           else parts[0])
    return tree.unflatten(treedef, stacked)
