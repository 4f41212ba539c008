"""Jacobians by vectorization: `jacobian_inline`, `batch_jacobian_inline`, `hessian_inline`.

- Reverse mode: the pullback of each output, with its cotangent as an input, vectorized
  over the rows of an identity — one batched backward pass, not one pass per row.
- Forward mode: `jvp_inline` vectorized over the rows of an identity of the input's size.
- `use_pfor=False` runs the same rows one after the other (one pass each, same results);
  `parallel_iterations=k` vectorizes k rows at a time, bounding the batch's memory.
- The identity is built from `iota`s (`eq(iota_0, iota_1)`), never a constant array, so
  `passes/simplify` sees it and turns products with it into row scalings or copies.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tracegrad import ops
from tracegrad.core import dtypes, tree
from tracegrad.core.shapes import shape_str
from tracegrad.core.state import state
from tracegrad.errors import ArgumentTypeError, DTypeError, InvalidArgumentError, ShapeError
from tracegrad.transforms.autodiff import (
    Linearization, normalize_argnums,
)
from tracegrad.transforms.forward import jvp_inline
from tracegrad.transforms.vectorize import vmap_inline

__all__ = ["jacobian_inline", "batch_jacobian_inline", "hessian_inline", "identity_rows"]

MODES = (None, "rev", "fwd")


def _size(what: str, shape, role: str) -> int:
    if None in shape:
        raise ShapeError(
            f"{what}: the {role} has unknown dims {shape_str(shape)}; a Jacobian needs its "
            f"size (give the function an input_signature with known dims)"
        )
    return int(np.prod(shape, dtype=np.int64))


def identity_rows(n: int, shape: tuple, dtype, start: int = 0, stop: int | None = None):
    """Rows `start:stop` of the n x n identity, each reshaped to `shape` (size n): a
    `[stop - start, *shape]` tensor built from iotas (`passes/simplify` recognizes it)."""
    stop = n if stop is None else stop
    rows = ops.iota(dtype=dtypes.int64, shape=(stop - start, n), dimension=0)
    if start:
        rows = ops.add(rows, ops.full_like(rows, start))
    cols = ops.iota(dtype=dtypes.int64, shape=(stop - start, n), dimension=1)
    eye = ops.convert_element_type(ops.eq(rows, cols), new_dtype=dtype)
    return eye if tuple(shape) == (n,) else ops.reshape(eye, new_sizes=(stop - start, *shape))


def _chunks(n: int, parallel_iterations) -> list[tuple[int, int]]:
    if parallel_iterations is None:
        return [(0, n)]
    if not isinstance(parallel_iterations, int) or parallel_iterations < 1:
        raise InvalidArgumentError(f"parallel_iterations must be a positive int, got "
                                   f"{parallel_iterations!r}")
    return [(i, min(i + parallel_iterations, n)) for i in range(0, n, parallel_iterations)]


def stacked_rows(what: str, row: Callable, n: int, shape: tuple, dtype, use_pfor: bool,
                 parallel_iterations=None) -> list:
    """`row(seed)` for the n rows of an identity (each shaped `shape`), stacked on a new axis
    0: vectorized (in chunks of `parallel_iterations`) or one row after the other. `row`
    returns a list of tensors; the result is a list of `[n, ...]` tensors."""
    if use_pfor:
        parts = [vmap_inline(row, (identity_rows(n, shape, dtype, a, b),), {}, 0, 0, what)
                 for a, b in _chunks(n, parallel_iterations)]
    else:
        parts = []
        for j in range(n):
            seed = ops.reshape(identity_rows(n, shape, dtype, j, j + 1), new_sizes=shape)
            parts.append([ops.reshape(y, new_sizes=(1, *y.shape)) for y in row(seed)])
    if len(parts) == 1:
        return list(parts[0])
    return [ops.concatenate(*column, dimension=0) for column in zip(*parts, strict=True)]


def _check_mode(what: str, mode):
    if mode not in MODES:
        raise InvalidArgumentError(f"{what}: mode must be None, 'rev' or 'fwd', got {mode!r}")


def jacobian_inline(fn: Callable, args: tuple, kwargs: dict, argnums, *, use_pfor=True,
                    parallel_iterations=None, mode=None, what="jacobian", holomorphic=False):
    """The Jacobian of `fn(*args)` w.r.t. the arguments at `argnums`, emitted inline: for
    each output leaf `y` and argument leaf `x`, a `y.shape + x.shape` tensor; results mirror
    the output structure, each leaf holding the arguments' structure (a tuple for a tuple
    `argnums`). Complex values: see `complex_mode`."""
    _check_mode(what, mode)
    nums = normalize_argnums(argnums, len(args), what)
    lin = Linearization(fn, args, kwargs, nums, what)
    out_leaves, out_def = tree.flatten(lin.result)
    ys = [lin.to_tensor(y) for y in out_leaves]
    for y in ys:
        if not dtypes.is_differentiable(y.dtype):
            raise DTypeError(f"{what}: the function returns a {y.dtype.name} output; only "
                             f"float outputs have a Jacobian")
    xs = lin.inputs
    n_out = sum(_size(what, y.shape, "output") for y in ys)
    n_in = sum(_size(what, x.shape, "argument") for x in xs)
    mode = complex_mode(what, xs, ys, mode, holomorphic)
    if mode is None:
        mode = "fwd" if n_in < n_out and not _has_reverse_only_rule(lin.graph) else "rev"
    if mode == "rev":
        blocks = [_reverse_block(what, lin, y, use_pfor, parallel_iterations) for y in ys]
        if holomorphic:  # the rows are gradients of the real parts, conj(dy/dz)
            blocks = [[ops.conj(b) for b in row] for row in blocks]
    else:
        blocks = _forward_blocks(what, fn, args, kwargs, nums, lin, ys, use_pfor,
                                 parallel_iterations)
    single = isinstance(argnums, int)
    per_output = []
    for row in blocks:
        k, grouped = 0, []
        for treedef in lin.arg_treedefs:
            count = tree.num_leaves(treedef)
            grouped.append(tree.unflatten(treedef, row[k:k + count]))
            k += count
        per_output.append(grouped[0] if single else tuple(grouped))
    return tree.unflatten(out_def, per_output)


def complex_mode(what: str, xs, ys, mode, holomorphic: bool):
    """The mode a Jacobian with complex arguments or outputs takes (None: either).

    With `holomorphic=True` (every argument and output complex) it is the complex
    derivative dy/dz. Otherwise, as JAX's: complex outputs of real arguments need forward
    mode (columns dy/dx), complex arguments of real outputs reverse mode (rows: gradients in
    the dL/dx + i dL/dy convention), and complex arguments with complex outputs have no
    complex Jacobian unless the function is holomorphic (DTypeError)."""
    cin = [x for x in xs if dtypes.is_complex(x.dtype)]
    cout = [y for y in ys if dtypes.is_complex(y.dtype)]
    if holomorphic:
        if len(cin) < len(xs) or len(cout) < len(ys):
            raise DTypeError(f"{what} with holomorphic=True needs complex arguments and "
                             "outputs; got " + ", ".join(sorted({t.dtype.name for t in xs + ys})))
        return mode
    if cin and cout:
        raise DTypeError(
            f"{what}: the function has complex arguments and complex outputs, which have no "
            "complex Jacobian unless it is holomorphic: pass holomorphic=True for dy/dz, or "
            "differentiate tnp.real and tnp.imag of the outputs")
    need = "fwd" if cout else "rev" if cin else None
    if need is not None and mode not in (None, need):
        kind = "outputs of real arguments" if cout else "arguments of real outputs"
        raise DTypeError(f"{what}: complex {kind} need mode={need!r} (mode={mode!r} loses "
                         "the imaginary parts)")
    return need or mode


def _has_reverse_only_rule(graph) -> bool:
    """Whether `graph` calls a `tg.custom_vjp` function, which has no forward mode (its
    deferred gradient rule says so): `mode=None` then picks reverse mode, as `jax.jacobian`
    does."""
    return any(getattr(op.grad_override, "reverse_only", False) for op in graph.operations)


def _reverse_block(what, lin, y, use_pfor, parallel_iterations) -> list:
    """d y / d x for every differentiated leaf x: the pullback of y vectorized over the
    rows of an identity of y's size, `[m, *x.shape]` reshaped to `y.shape + x.shape`; for
    a rank-0 y the one pullback, the gradient."""
    if y.shape == ():
        return lin.emit(lin.pullback([y]))
    m = _size(what, y.shape, "output")

    def row(seed):
        return lin.emit(lin.pullback([y], [seed]))

    rows = stacked_rows(what, row, m, tuple(y.shape), y.dtype, use_pfor, parallel_iterations)
    return [ops.reshape(r, new_sizes=(*y.shape, *x.shape)) for r, x in zip(rows, lin.inputs,
                                                                          strict=True)]


def _forward_blocks(what, fn, args, kwargs, nums, lin, ys, use_pfor, parallel_iterations):
    """The blocks of every output, one differentiated leaf at a time: `jvp` vectorized over
    the rows of an identity of the leaf's size, its result moved to the end."""
    outer = state.graph
    leaves = [(i, leaf) for i in nums for leaf in tree.flatten(args[i])[0]]
    primals = [outer.to_tensor(leaf) for _, leaf in leaves]
    columns = []  # per differentiated leaf: one [n, *y.shape] tensor per output
    for k, x in enumerate(primals):
        n = _size(what, x.shape, "argument")

        def row(seed, k=k):
            tangents = [seed if j == k else ops.zeros_like(p) for j, p in enumerate(primals)]
            call = _with_leaves(fn, args, kwargs, nums)
            _, out_tangents = jvp_inline(call, primals, tangents, what)
            return tree.flatten(out_tangents)[0]

        columns.append(stacked_rows(what, row, n, tuple(x.shape), x.dtype, use_pfor,
                                    parallel_iterations))
    blocks = []
    for j, y in enumerate(ys):
        row = []
        for k, x in enumerate(primals):
            t = columns[k][j]  # [n, *y.shape]
            t = ops.transpose(t, permutation=(*range(1, t.ndim), 0)) if t.ndim > 1 else t
            row.append(ops.reshape(t, new_sizes=(*y.shape, *x.shape)))
        blocks.append(row)
    return blocks


def _with_leaves(fn, args, kwargs, nums):
    """`fn` as a function of the flat leaves of the arguments at `nums`."""
    defs = [(i, tree.flatten(args[i])[1]) for i in nums]

    def call(*flat):
        call_args, k = list(args), 0
        for i, treedef in defs:
            count = tree.num_leaves(treedef)
            call_args[i] = tree.unflatten(treedef, flat[k:k + count])
            k += count
        return fn(*call_args, **kwargs)

    return call


def batch_jacobian_inline(fn: Callable, args: tuple, kwargs: dict, argnum: int, *,
                          use_pfor=True, parallel_iterations=None, what="batch_jacobian"):
    """Per-example Jacobians of `fn`, which maps `x` `[b, x...]` (argument `argnum`) to
    `[b, y...]` with row i depending only on row i of x: a `[b, y..., x...]` tensor."""
    (num,) = normalize_argnums(argnum, len(args), what)
    lin = Linearization(fn, args, kwargs, (num,), what)
    (x,) = lin.inputs if len(lin.inputs) == 1 else (None,)
    if x is None:
        raise ArgumentTypeError(f"{what}: argument {num} must be one array, not a "
                                f"structure")
    y = lin.to_tensor(lin.result)
    check_batch_shapes(tuple(y.shape), tuple(x.shape))
    if not dtypes.is_differentiable(y.dtype):
        raise DTypeError(f"{what}: the function returns a {y.dtype.name} output; only float "
                         f"outputs have a Jacobian")
    b = y.shape[0] if y.shape[0] is not None else x.shape[0]
    m = _size(what, y.shape[1:], "output row")
    rows = y.shape[1:]

    def row(seed):  # seed: one row of the identity, broadcast over the batch
        return lin.emit(lin.pullback([y], [seed]))

    def broadcast_row(seed):  # [y...] -> [b, y...]
        like = lin.emit([y])[0]
        return row(ops.broadcast_like(seed, like, tuple(range(1, len(y.shape)))))

    (cols,) = stacked_rows(what, broadcast_row, m, rows, y.dtype, use_pfor,
                           parallel_iterations)  # [m, b, x...]
    perm = (1, 0, *range(2, cols.ndim))
    out = ops.transpose(cols, permutation=perm)
    return ops.reshape(out, new_sizes=(-1 if b is None else b, *rows, *x.shape[1:]))


def check_batch_shapes(target, source) -> None:
    """The seed's checks of batch_jacobian, in its order: both of rank at least 2, then
    equal first dims (ShapeError, a ValueError as in the seed)."""
    for name, shape in (("target", target), ("source", source)):
        if len(shape) < 2:
            raise ShapeError(f"Shape must be at least rank 2 but is rank {len(shape)}: the "
                             f"{name} shape {shape}")
    if target[0] is not None and source[0] is not None and target[0] != source[0]:
        raise ShapeError(f"Need first dimension of target shape ({target}) and source shape "
                         f"({source}) to match.")


def hessian_inline(fn: Callable, args: tuple, kwargs: dict, argnums, what="hessian"):
    """The Hessian of `fn`, emitted inline: the Jacobian of its Jacobian (of its gradient
    for a scalar output), reverse over reverse. Each output leaf `y` and pair of argument
    leaves `x1`, `x2` give a `y.shape + x1.shape + x2.shape` block, structured as JAX's
    `jacfwd(jacrev(fn))`: the output structure, then `argnums`' twice."""
    def jacobian(*a, **k):
        return jacobian_inline(fn, a, k, argnums, mode="rev", what=what)

    return jacobian_inline(jacobian, args, kwargs, argnums, mode="rev", what=what)
