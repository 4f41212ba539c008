"""tracegrad on Dask: compiled functions, gradients and per-example transforms over dask
arrays chunked along their first axis (rows), run by Dask's schedulers (docs/dask.md).

Every task ships a `ConcreteFunction` (its graph's JSON, not the Python function), traced
here for the chunk's shapes; a worker process compiles it once, or loads the kernel from its
disk cache. NumPy arguments are the same for every chunk and travel once per worker.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import numpy as np

try:
    import dask
    import dask.array as da
except ModuleNotFoundError as e:  # pragma: no cover - depends on the environment
    raise ImportError(
        "tracegrad.dask needs Dask: install the extra with `pip install -e \".[dask]\"` "
        "(or `pip install \"dask[distributed]\"`)") from e

import tracegrad as tg
from tracegrad.core import tree
from tracegrad.errors import ArgumentTypeError, ShapeError

__all__ = ["map_blocks", "value_and_grad", "per_example_grads", "batch_jacobian"]

SPLIT_EVERY = 8  # partial results summed per task of the reduction tree


def map_blocks(fn: Callable, *args) -> da.Array:
    """`fn(*args)` computed chunk by chunk as a dask array: `fn` maps arrays of `r` rows to
    an array of `r` rows, row i depending only on row i (a `tg.function`, a transform such
    as `tg.vmap(f)` or `tg.batch_jacobian(f)`, or a Python function, compiled with
    `tg.function`).

    Dask arrays among `args` are split along axis 0 into the chunks of the first one (all
    need the same number of rows; their other axes are one chunk each); NumPy arrays and
    Python scalars are given whole to every chunk.

    >>> x = da.from_array(np.arange(6.0).reshape(3, 2), chunks=(2, 2))
    >>> map_blocks(tnp.tanh, x).compute().shape
    (3, 2)
    """
    fn = _compiled(fn)
    blocks = []
    for size, block_args, specs in _split_rows("map_blocks", args):
        concrete = fn.get_concrete_function(*specs)
        out = concrete.structured_outputs
        if not isinstance(out, tg.TensorSpec) or out.shape[:1] != (size,):
            raise ShapeError(
                f"tracegrad.dask.map_blocks: {fn.__name__} must return one array with a row "
                f"per input row ({size} rows), returned {out}")
        blocks.append(da.from_delayed(_call(concrete, block_args), out.shape, dtype=out.dtype))
    return blocks[0] if len(blocks) == 1 else da.concatenate(blocks, axis=0)


def value_and_grad(loss: Callable, argnums=0) -> Callable:
    """`value_and_grad(loss, argnums)(*args) -> (value, grads)` as NumPy, like
    `tg.value_and_grad`, for a `loss` that is a sum over the rows of its dask array
    arguments: each chunk's value and gradient are computed in one compiled kernel, and
    Dask sums the partials in a tree (`SPLIT_EVERY` per task). The arguments at `argnums`
    (the parameters) must be NumPy arrays or structures of them; they travel once per worker.

    The result equals the single-machine computation up to the order of summation. A mean
    over rows is the sum divided by the number of rows: write the loss as a sum and scale.

    >>> x = da.from_array(np.ones((4, 2)), chunks=(2, 2))
    >>> value_and_grad(lambda w, x: tnp.sum((x @ w) ** 2))(np.ones(2), x)
    (np.float64(16.0), array([16., 16.]))
    """
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    step = tg.value_and_grad(loss, argnums=argnums)

    def distributed_value_and_grad(*args):
        for i in nums:
            if _is_dask(args[i]) or any(_is_dask(x) for x in _leaves(args[i])):
                raise ArgumentTypeError(
                    f"tracegrad.dask.value_and_grad: argument {i} is differentiated, so it "
                    f"must be NumPy (the parameters); it is a dask array")
        partials = [_call(step.get_concrete_function(*specs), block_args)
                    for _, block_args, specs in _split_rows("value_and_grad", args)]
        while len(partials) > 1:
            partials = [dask.delayed(_sum_partials)(*partials[i:i + SPLIT_EVERY])
                        for i in range(0, len(partials), SPLIT_EVERY)]
        (value, grads), = dask.compute(partials[0])
        return value, grads

    distributed_value_and_grad.__name__ = f"value_and_grad_{getattr(loss, '__name__', 'fn')}"
    return distributed_value_and_grad


def per_example_grads(loss: Callable, argnum: int = 0) -> Callable:
    """`per_example_grads(loss, argnum)(*args)`: a dask array whose row i is the gradient of
    `loss` w.r.t. argument `argnum` (a NumPy array) on row i of the dask arrays alone, shaped
    `[rows, *param.shape]` and chunked like the rows (computed with `tg.vmap(tg.grad(...))`
    over each chunk).

    >>> x = da.from_array(np.arange(4.0).reshape(2, 2), chunks=(1, 2))
    >>> per_example_grads(lambda w, x: tnp.sum((x @ w) ** 2))(np.ones(2), x).compute()
    array([[ 0.,  2.],
           [20., 30.]])
    """

    def per_example(*args):
        in_axes = tuple(0 if _is_dask(x) else None for x in args)
        if in_axes[argnum] is not None:
            raise ArgumentTypeError(
                f"tracegrad.dask.per_example_grads: argument {argnum} is differentiated, so "
                f"it must be NumPy; it is a dask array")
        # each row as a one-row array: the loss sees the shapes it sees on a whole dataset
        args = [x[:, None] if _is_dask(x) else x for x in args]
        return map_blocks(tg.vmap(tg.grad(loss, argnums=argnum), in_axes=in_axes), *args)

    return per_example


def batch_jacobian(fn: Callable, argnum: int = 0) -> Callable:
    """`batch_jacobian(fn, argnum)(*args)`: `tg.batch_jacobian(fn, argnum)` over the chunks
    of the dask arrays among `args`, a dask array `[rows, y..., x...]` chunked like the rows.

    >>> x = da.from_array(np.arange(4.0).reshape(2, 2), chunks=(1, 2))
    >>> batch_jacobian(lambda x: x * x)(x).compute()[1]
    array([[4., 0.],
           [0., 6.]])
    """
    return lambda *args: map_blocks(tg.batch_jacobian(fn, argnum), *args)


# -- helpers -----------------------------------------------------------------------------------


def _is_dask(x) -> bool:
    return isinstance(x, da.Array)


def _leaves(x) -> list:
    return tree.flatten(x)[0]


def _compiled(fn: Callable) -> tg.Function:
    return fn if isinstance(fn, tg.Function) else tg.function(fn)


def _split_rows(what: str, args) -> list:
    """`[(rows, chunk args, specs), ...]`, one per row chunk: the dask arrays among `args`
    cut into the row chunks of the first one (delayed chunks, and TensorSpecs to trace
    with), the other arguments shared (NumPy arrays as one delayed value each, so a worker
    fetches them once)."""
    arrays = [x for x in args if _is_dask(x)]
    if not arrays:
        raise ArgumentTypeError(f"tracegrad.dask.{what}: no argument is a dask array")
    rows, row_chunks = arrays[0].shape[0], arrays[0].chunks[0]
    columns, specs = [], []
    for x in args:
        if _is_dask(x):
            if x.ndim == 0 or x.shape[0] != rows:
                raise ShapeError(
                    f"tracegrad.dask.{what}: the dask arrays need the same number of rows; "
                    f"shapes {arrays[0].shape} and {x.shape}")
            x = x.rechunk((row_chunks,) + tuple((d,) for d in x.shape[1:]))
            columns.append(list(x.to_delayed().ravel()))
            specs.append([tg.TensorSpec((n,) + x.shape[1:], x.dtype) for n in row_chunks])
        else:
            shared = dask.delayed(x, pure=True) if any(
                isinstance(v, np.ndarray) for v in _leaves(x)) else x
            columns.append([shared] * len(row_chunks))
            specs.append([x] * len(row_chunks))
    return [(n, [c[i] for c in columns], [s[i] for s in specs])
            for i, n in enumerate(row_chunks)]


def _call(concrete, block_args):
    # Keys unique to the call (not pure): a call repeated with the same arguments must not
    # ask the cluster for the keys the previous one is releasing.
    return dask.delayed(_run)(concrete, *block_args)


def _run(concrete, *args):
    _worker_threads()
    return concrete(*args)


def _worker_threads() -> None:
    """In a `dask.distributed` worker, kernels use at most its threads (`nthreads`, the
    cluster's `threads_per_worker`): `tg.config.num_threads` is capped at that."""
    distributed = sys.modules.get("distributed")
    if distributed is None:  # not imported: no worker in this process
        return
    try:
        worker = distributed.get_worker()
    except ValueError:  # not inside a worker's task
        return
    nthreads = worker.state.nthreads
    if tg.config.num_threads > nthreads:
        tg.config.num_threads = nthreads


def _sum_partials(*partials):
    """The sum of `(value, grads)` pairs, grads structured alike."""
    leaves = [tree.flatten(p)[0] for p in partials]
    summed = [sum(column[1:], start=column[0]) for column in zip(*leaves, strict=True)]
    return tree.unflatten(tree.flatten(partials[0])[1], summed)
