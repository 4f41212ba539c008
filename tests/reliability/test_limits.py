"""Limits: a 10^5-op graph, 6 nested `grad`s, a 50-deep pytree and a function of 1,000
arguments work (values and gradients checked), and what is beyond Python's own limits (a
pytree nested thousands deep) is a clear `InvalidArgumentError`, never a `RecursionError`.

The 10^5-op graph runs on the numpy backend (traced, run, printed, verified, serialized;
its gradient on 2 x 10^4 ops); `TRACEGRAD_SLOW=1` differentiates all 10^5 ops, optimizes
them and generates their Numba source, and compiles a 10^4-op graph with Numba (about a
minute: Numba's compile time grows with the code, docs/reliability.md).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tracegrad.core import tree as tg_tree
from tracegrad.core.verify import verify
from tracegrad.errors import InvalidArgumentError

SLOW = os.environ.get("TRACEGRAD_SLOW", "") not in ("", "0")
C = np.float64(1.000001)


def chain(n_ops: int):
    """`x * C * C ...`: `n_ops` ops (each step a constant and a multiply)."""
    def f(x):
        for _ in range(n_ops // 2):
            x = x * C
        return tnp.sum(x)
    return f


def test_a_graph_of_1e5_ops_traces_runs_and_serializes(numpy_backend):
    n = 100_000
    x = np.linspace(0, 1, 4)
    f = tg.function(chain(n))
    np.testing.assert_allclose(f(x), np.sum(x) * C ** (n // 2), rtol=1e-9)
    graph = f.get_concrete_function(x).graph
    assert len(graph.operations) >= n
    verify(graph)
    text = str(graph)
    assert text.count("\n") >= n
    again = tg.FuncGraph.from_json(graph.to_json())
    assert len(again.operations) == len(graph.operations)


@pytest.mark.parametrize("n", [100_000] if SLOW else [20_000])
def test_the_gradient_of_a_long_graph(numpy_backend, n):
    x = np.linspace(0, 1, 4)
    np.testing.assert_allclose(tg.grad(chain(n))(x), np.full(4, C ** (n // 2)), rtol=1e-9)
    with tg.GradientTape() as tape:  # the eager tape: n recorded ops, one backward pass
        t = tg.constant(x)
        tape.watch(t)
        y = chain(n)(t)
    np.testing.assert_allclose(tape.gradient(y, t).numpy(), np.full(4, C ** (n // 2)),
                               rtol=1e-9)


@pytest.mark.skipif(not SLOW, reason="minutes of Numba compile: TRACEGRAD_SLOW=1")
def test_numba_generates_a_1e5_op_graph_and_compiles_a_1e4_op_one():
    nb = pytest.importorskip("tracegrad.backends.numba")
    x = np.linspace(0, 1, 4)
    graph = tg.optimize(tg.trace(chain(100_000))(x))
    assert len(graph.operations) >= 50_000
    assert "def kernel(" in nb.generate_source(graph)
    f = tg.function(chain(10_000), backend="numba")
    np.testing.assert_allclose(f(x), np.sum(x) * C ** 5_000, rtol=1e-9)


def test_six_nested_grads(backend):
    f = lambda x: tnp.sin(x) * x  # noqa: E731
    x = 0.7
    d = f
    for order in range(1, 7):
        d = tg.grad(d)
        # d^n/dx^n (x sin x) = x sin(x + n pi/2) + n sin(x + (n - 1) pi/2)
        want = x * np.sin(x + order * np.pi / 2) + order * np.sin(x + (order - 1) * np.pi / 2)
        np.testing.assert_allclose(d(x), want, rtol=1e-12, err_msg=f"order {order}")


def nested(depth: int):
    """A pytree `depth` containers deep (lists, dicts and tuples in turn), a leaf of
    `[k, k]` beside each level k; its leaves' sum of squares and that sum's gradient."""
    tree = np.array([0.5, -0.5])
    for k in range(1, depth + 1):
        leaf = np.full(2, float(k))
        tree = [tree, leaf] if k % 3 == 0 else {"in": tree, "x": leaf} if k % 3 == 1 \
            else (leaf, tree)
    return tree


def test_a_50_deep_pytree(backend):
    # Numba compiles one kernel per function here, each with 51 inputs (a few seconds
    # each): the CI run checks the value on numba, TRACEGRAD_SLOW=1 the rest too.
    tree = nested(50)
    leaves, treedef = tg_tree.flatten(tree)
    assert len(leaves) == 51

    def loss(t):
        return sum(tnp.sum(leaf * leaf) for leaf in tg_tree.flatten(t)[0])

    want = sum(float(np.sum(leaf * leaf)) for leaf in leaves)
    np.testing.assert_allclose(tg.function(loss)(tree), want, rtol=1e-12)
    if backend == "numba" and not SLOW:
        return
    echoed = tg.function(lambda t: t)(tree)  # the same structure comes back
    assert tg_tree.flatten(echoed)[1] == treedef
    grads = tg.grad(loss)(tree)
    g_leaves, g_def = tg_tree.flatten(grads)
    assert g_def == treedef
    for g, leaf in zip(g_leaves, leaves, strict=True):
        np.testing.assert_allclose(g, 2 * leaf, rtol=1e-12)


def test_a_pytree_deeper_than_python_allows_is_a_clear_error(numpy_backend):
    f = tg.function(lambda t: t)
    with pytest.raises(InvalidArgumentError, match="nested too deeply"):
        f(nested(5000))


@pytest.mark.parametrize("backend_name", ["numpy", "numba"])
def test_a_function_of_1000_arguments(backend_name):
    # Numba's compile time grows with a kernel's arguments (1,000 inputs: ~35 s, its
    # gradient's 1,000 outputs: minutes; docs/reliability.md): 50 of them on numba in
    # the CI run, 1,000 with TRACEGRAD_SLOW=1.
    n = 50 if backend_name == "numba" and not SLOW else 1000
    args = [np.full(3, float(i)) for i in range(n)]

    def weighted(*xs):
        total = xs[0] * 0.0
        for i, x in enumerate(xs):
            total = total + x * (i % 7)
        return tnp.sum(total)

    want = sum(3.0 * i * (i % 7) for i in range(n))
    np.testing.assert_allclose(tg.function(weighted, backend=backend_name)(*args), want,
                               rtol=1e-12)
    saved, tg.config.backend = tg.config.backend, backend_name
    try:
        grads = tg.grad(weighted, argnums=tuple(range(n)))(*args)
    finally:
        tg.config.backend = saved
    assert len(grads) == n
    for i, g in enumerate(grads):
        np.testing.assert_array_equal(g, np.full(3, float(i % 7)))
