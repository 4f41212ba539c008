"""Random graphs full of the patterns the passes rewrite: optimize keeps every value."""

import numpy as np
import pytest
from passgraphs import build, check_equivalent

from tracegrad import ops, passes

F64, I64 = np.dtype("float64"), np.dtype("int64")


def _uniform(g, rng, like):
    """A constant 0, 1 or 2 of `like`'s type, broadcast to its shape."""
    c = g.constant(np.asarray(rng.choice([0, 1, 2]), dtype=like.dtype))
    return ops.broadcast_in_dim(c, shape=tuple(like.shape), broadcast_dimensions=())


def _step(g, rng, pool):
    """One random op on tensors of `pool` (all of shape [2,2]); returns its result."""
    x, y = pool[rng.integers(len(pool))], pool[rng.integers(len(pool))]
    if x.dtype != y.dtype:
        y = ops.convert_element_type(y, new_dtype=x.dtype)
    choice = rng.integers(12)
    if choice == 0:
        return ops.add(x, _uniform(g, rng, x))
    if choice == 1:
        return ops.mul(_uniform(g, rng, x), x)
    if choice == 2:
        return ops.sub(x, y)
    if choice == 3:
        return ops.neg(ops.neg(x)) if rng.random() < 0.5 else ops.neg(x)
    if choice == 4:
        return ops.transpose(ops.transpose(x, permutation=(1, 0)),
                             permutation=(1, 0) if rng.random() < 0.5 else (0, 1))
    if choice == 5:
        return ops.reshape(ops.reshape(x, new_sizes=(4,)), new_sizes=(2, 2))
    if choice == 6:
        row = ops.reduce_sum(x, axes=(0,))
        return ops.broadcast_in_dim(row, shape=(2, 2), broadcast_dimensions=(1,))
    if choice == 7:
        return ops.mul(x, y) if rng.random() < 0.5 else ops.mul(y, x)
    if choice == 8:
        return ops.convert_element_type(x, new_dtype=x.dtype)
    if choice == 9:
        return ops.add(x, y)
    if choice == 10 and x.dtype == F64:
        return ops.sin(x)
    return ops.max_(x, y)


@pytest.mark.parametrize("seed", range(40))
def test_optimize_preserves_values_of_random_graphs(seed):
    rng = np.random.default_rng(seed)
    types = [rng.choice(["f64[2,2]", "i64[2,2]"]) for _ in range(2)]

    def body(g, *xs):
        pool = list(xs)
        for _ in range(12):
            pool.append(_step(g, rng, pool))
        return pool[-3:]

    graph = build(types, body)
    out = passes.optimize(graph)
    assert len(out.operations) <= len(graph.operations)
    check_equivalent(graph, out, seed=seed)
    assert str(passes.optimize(out)) == str(out)
