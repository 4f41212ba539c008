"""Short contractions and short rows on the numba backend: a dot_general of at most
SMALL_CONTRACTION terms whose result only feeds loops is evaluated inside them (never
stored), and a float row of at most SHORT_ROW elements is reduced with its loop written
out, a sum in NumPy's pairwise order, and a longer row's max/min is a running value in vector
lanes; values against the numpy backend and NumPy, the
GradBench objectives that need them (kmeans, gmm) against central differences."""

import os
import pathlib
import sys

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tests.backends._util import assert_close_backends, assert_same

nb = pytest.importorskip("tracegrad.backends.numba")
from tracegrad.backends.numba import blocks_linalg, blocks_reduce  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "benchmarks" / "gradbench")]
from finite_diff import central_difference  # noqa: E402
from gradbench_problems import PROBLEMS, kmeans_dir_tracegrad  # noqa: E402


def source_of(fn, *arrays) -> str:
    graph = tg.function(fn, backend="numba").get_concrete_function(*arrays).graph
    return tg.compiled_source(graph)


def both_backends(fn, *arrays):
    got = tg.function(fn, backend="numba")(*arrays)
    want = tg.function(fn, backend="numpy")(*arrays)
    got, want = tg.tree.flatten(got)[0], tg.tree.flatten(want)[0]
    assert_close_backends([np.asarray(g) for g in got], [np.asarray(w) for w in want])


def nearest(points, centroids):
    d = (tnp.sum(points * points, axis=1)[:, None] + tnp.sum(centroids * centroids, axis=1)
         - 2.0 * (points @ centroids.T))
    return tnp.sum(tnp.min(d, axis=1))


def test_a_matrix_vector_product_read_across_rows_is_not_fused():
    """`tanh(u @ x)` with u row-major: the loop over the result would read u across its rows
    and run scalar, tanh too, so the product helper computes it; `x @ v` reads v along its
    rows and is fused."""
    rng = np.random.default_rng(1)
    u, x, v = rng.random((32, 8)), rng.random(8), rng.random((8, 32))
    source = source_of(lambda u, x: tnp.tanh(u @ x), u, x)
    assert "_mv_" in source and "_fma(" not in source
    both_backends(lambda u, x: tnp.tanh(u @ x), u, x)
    source = source_of(lambda x, v: tnp.tanh(x @ v), x, v)
    assert "_vm_" not in source and "_fma(" in source
    both_backends(lambda x, v: tnp.tanh(x @ v), x, v)
    # in an RNN's scan step, with its gradient
    w = rng.random((32, 32)) / 8.0
    xs = rng.random((20, 8))

    def rnn(w, u, xs):
        return tnp.sum(tg.scan(lambda h, x: (tnp.tanh(w @ h + u @ x),) * 2, tnp.zeros(32),
                               xs)[1])

    assert "_fma(" not in source_of(rnn, w, u, xs)
    both_backends(tg.value_and_grad(rnn, argnums=(0, 1)), w, u, xs)
    got = tg.function(tg.grad(rnn, argnums=1), backend="numba")(w, u, xs)
    want = central_difference(lambda a: tg.function(rnn, backend="numpy")(w, a, xs), u)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)  # sum of 640 values: 1e-7


def test_a_short_contraction_is_evaluated_in_its_consumers_loop():
    rng = np.random.default_rng(0)
    p, c = rng.random((300, 16)), rng.random((40, 16))
    source = source_of(nearest, p, c)
    # no product stored (no BLAS call, no 300 x 40 array): the 16 terms in the min's loop,
    # the centroids read from a copy with the coordinate axis first (consecutive in the loop)
    assert "_dot_" not in source and "_bdot_" not in source
    assert "_tview(" in source
    both_backends(nearest, p, c)
    # a longer contraction, or a product that is stored anyway, is BLAS's
    p17, c17 = rng.random((300, 17)), rng.random((40, 17))
    assert "_dot_" in source_of(nearest, p17, c17)
    assert "_dot_" in source_of(lambda p, c: p @ c.T, p, c)
    both_backends(nearest, p17, c17)


def test_rows_reading_a_short_contraction_run_two_at_a_time(monkeypatch):
    # points x centroids: the innermost loop reads the centroids' column, the point's 16
    # coordinates are loaded once per row; two rows share each column loaded (`Nest.jam`),
    # an odd row count leaves one row to the loop after; the terms are fused multiply-adds.
    # Jamming changes no bit: the same kernel with JAM = 1 gives the same values. A nest
    # that stores in its innermost loop (a column sum accumulated in memory) is not jammed.
    rng = np.random.default_rng(6)
    p, c = rng.random((301, 16)), rng.random((40, 16))

    def row_min(p, c):
        d = (tnp.sum(p * p, axis=1)[:, None] + tnp.sum(c * c, axis=1) - 2.0 * (p @ c.T))
        return tnp.min(d, axis=1), tnp.max(d, axis=1)

    def column_sums(p, c):
        return tnp.sum(tnp.exp(-(p @ c.T)), axis=0)

    source = source_of(row_min, p, c)
    assert "% 2, 2):" in source and "_fma(" in source
    both_backends(row_min, p, c)
    jammed = tg.function(row_min, backend="numba")(p, c)
    source = source_of(column_sums, p, c)
    assert "% 2, 2):" not in source and "_fma(" in source
    both_backends(column_sums, p, c)
    monkeypatch.setattr(blocks_linalg, "JAM", 1)
    assert "% 2, 2):" not in source_of(row_min, p, c)
    for got, want in zip(jammed, tg.function(row_min, backend="numba")(p, c), strict=True):
        assert_same(np.asarray(got), np.asarray(want))  # bit for bit
    ref = ((p[:, None, :] - c[None]) ** 2).sum(-1)
    np.testing.assert_allclose(jammed[0], ref.min(1), rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("dims", [
    ((2, 3, 4), (2, 4, 5), (((2,), (1,)), ((0,), (0,)))),  # batched
    ((3, 2, 4), (4, 5, 2), (((2,), (0,)), ((1,), (2,)))),  # batch dims anywhere
    ((2, 3, 4), (3, 4, 6), (((1, 2), (0, 1)), ((), ()))),  # two contracting dims
    ((3,), (5,), (((), ()), ((), ()))),  # outer product
    ((4,), (4,), (((0,), (0,)), ((), ()))),  # inner product: a scalar
])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_fused_contractions_of_every_layout_match_the_numpy_backend(dims, dtype):
    from tracegrad.ops import linalg
    ls, rs, dn = dims
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal(ls).astype(dtype), rng.standard_normal(rs).astype(dtype)

    def fn(a, b):
        d = linalg.dot_general_p.bind(a, b, dimension_numbers=dn)
        return tnp.sum(tnp.exp(d * 0.1)), tnp.max(d, axis=-1) if d.ndim else d

    graph = tg.function(fn, backend="numba").get_concrete_function(a, b).graph
    (op,) = [op for op in graph.operations if op.primitive is linalg.dot_general_p]
    assert blocks_linalg.contraction_terms(op) <= blocks_linalg.SMALL_CONTRACTION
    assert "_dot_" not in tg.compiled_source(graph)
    both_backends(fn, a, b)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_short_rows_are_summed_in_numpys_pairwise_order(dtype):
    rng = np.random.default_rng(2)
    for n in (2, 3, 7, 8, 9, 15, 16, 17):
        x = (rng.standard_normal((50, n)) * 10.0 ** rng.integers(-8, 8, (50, n))).astype(dtype)

        def fn(x):
            y = x * x - 0.5 * x
            return tnp.sum(y, axis=1), tnp.max(y, axis=1), tnp.min(y, axis=1)

        got = tg.function(fn, backend="numba")(x)
        y = x * x - np.asarray(0.5, dtype) * x
        for g, want in zip(got, (y.sum(axis=1), y.max(axis=1), y.min(axis=1)), strict=True):
            assert_same(np.asarray(g), want, what=f"rows of {n}")  # bit for bit
        source = source_of(fn, x)
        assert ("_pairwise_" in source) == (n > blocks_reduce.SHORT_ROW), n


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_long_rows_keep_a_running_max_and_min_in_vector_lanes(dtype):
    # a fused row longer than SHORT_ROW in a nest of two loops: max/min are one running value
    # each (LLVM's maximum/minimum, a reduction its vectorizer keeps in lanes), with no block
    # buffer or row helper; NaN propagates, values are NumPy's
    rng = np.random.default_rng(4)
    for n in (17, 40, 1024, 1025, 3000):
        x = (rng.standard_normal((6, n)) * 10.0 ** rng.integers(-8, 8, (6, n))).astype(dtype)
        x[1, n // 2] = np.nan
        x[2, 0], x[3, -1] = np.inf, -np.inf
        x[4, :] = np.nan

        def fn(x):
            y = x * x - 0.5 * x
            return tnp.max(y, axis=1), tnp.min(y, axis=1)

        got = tg.function(fn, backend="numba")(x)
        with np.errstate(invalid="ignore"):
            y = x * x - np.asarray(0.5, dtype) * x
        for g, want in zip(got, (y.max(axis=1), y.min(axis=1)), strict=True):
            assert_same(np.asarray(g), want, what=f"rows of {n}")  # bit for bit
        source = source_of(fn, x)
        assert "_vmax_" in source and "_vmin_" in source, n
        assert "_rowmax_" not in source and "_rowmin_" not in source and "buf" not in source


def test_a_running_minimum_with_a_huge_trig_argument_reruns_with_the_full_reduction():
    x = np.random.default_rng(5).standard_normal((20, 300))
    x[3, 200] = 1e22  # past the fast reduction: the whole nest runs again with the full one
    fn = lambda x: tnp.min(tnp.sin(x) * x, axis=1)  # noqa: E731
    assert "_vmin_" in source_of(fn, x)
    got = np.asarray(tg.function(fn, backend="numba")(x))
    assert_same(got, (np.sin(x) * x).min(axis=1), rtol=1e-15)


def test_an_unrolled_row_with_a_huge_trig_argument_reruns_with_the_full_reduction():
    x = np.random.default_rng(3).standard_normal((20, 6))
    x[3, 2] = 1e22  # past the fast sin/cos reduction: the nest runs again with the full one
    fn = lambda x: tnp.sum(tnp.sin(x) * x, axis=1)  # noqa: E731
    got = np.asarray(tg.function(fn, backend="numba")(x))
    assert_same(got, (np.sin(x) * x).sum(axis=1), rtol=1e-15)


def _grad_vs_central_differences(name, size):
    problem = PROBLEMS[name]
    args = problem.data(size)
    f = problem.make(tnp, tg.scan, size)
    value, grads = tg.function(tg.value_and_grad(f, argnums=problem.wrt),
                               backend="numba")(*args)
    np.testing.assert_allclose(tg.function(f, backend="numba")(*args),
                               problem.reference(*args, size=size)[0], rtol=1e-12)
    np.testing.assert_allclose(value, problem.reference(*args, size=size)[0], rtol=1e-12)
    for i, g in zip(problem.wrt, grads, strict=True):
        def ref(x, i=i):
            a = list(args)
            a[i] = x
            return problem.reference(*a, size=size)[0]
        np.testing.assert_allclose(g, central_difference(ref, args[i]), rtol=1e-6, atol=1e-6)
    return f, args


def test_gmm_value_and_gradient_on_numba():
    # d = 4 (a short contraction), K = 5 components (short rows), N = 9 points
    f, args = _grad_vs_central_differences("gmm", (4, 5, 9))
    assert "_bdot_" not in source_of(f, *args)


def test_kmeans_value_and_direction_on_numba():
    f, args = _grad_vs_central_differences("kmeans", (4, 30, 3))
    cost, direction = tg.function(kmeans_dir_tracegrad(f), backend="numba")(*args)
    ref_cost, (ref_dir,) = PROBLEMS["kmeans"].reference(*args, size=(4, 30, 3))
    np.testing.assert_allclose(cost, ref_cost, rtol=1e-12)
    np.testing.assert_allclose(direction, ref_dir, rtol=1e-10, atol=1e-14)


def test_a_computed_operand_is_computed_into_the_layout_blas_reads():
    # einsum("kij,njk->nki", q, x - mu) over 20 coordinates (BLAS's): the batch axis k is
    # last in x - mu, so the product copies it to (k, j, n); the copy's loop computes it
    # (Fusion._compute_into_product_copies) instead of reading a stored (n, j, k) array
    rng = np.random.default_rng(4)
    q, mu, x = rng.standard_normal((3, 20, 20)), rng.random((3, 20)), rng.standard_normal((9, 20))

    def fn(q, mu, x):
        y = tnp.einsum("kij,njk->nki", q, x[:, :, None] - mu.T[None, :, :])
        return tnp.sum(y * y)

    source = source_of(fn, q, mu, x)
    assert "_bdot_" in source
    body = [line.strip() for line in source.splitlines() if not line.strip().startswith("#")]
    sub = next(k for k, line in enumerate(body) if " - " in line and line.startswith("v"))
    assert body[sub + 1].startswith("perm"), body[sub - 4:sub + 2]
    both_backends(fn, q, mu, x)
    both_backends(tg.grad(fn, argnums=(0, 1, 2)), q, mu, x)


def test_a_written_out_row_keeps_the_accumulators_of_its_siblings():
    # nanmax's "every element NaN" flag accumulates over the row beside the written-out
    # max (an accumulator set before the loop keeps its name in every copy)
    x = np.random.default_rng(5).standard_normal((30, 5))
    x[2, 1] = x[4] = np.nan

    def fn(x):
        return tnp.nanmax(x, axis=1, keepdims=True), tnp.all(x > -1.0, axis=1), tnp.sum(x, 1)

    got = tg.function(fn, backend="numba")(x)
    with np.errstate(invalid="ignore"), pytest.warns(RuntimeWarning):
        want = (np.nanmax(x, axis=1, keepdims=True), np.all(x > -1.0, axis=1), x.sum(1))
    for g, w in zip(got, want, strict=True):
        assert_same(np.asarray(g), w)


def test_a_fused_contraction_read_from_a_transposed_copy_in_an_outlined_nest(monkeypatch):
    """In a large kernel each elementwise nest is a function of the module (outlined): the
    transposed copy a fused contraction reads is made inside that function, not passed in
    undefined (the value + gradient of a chain of small products: the product's gradient
    reads `w` with its contracted axis last)."""
    from tracegrad.backends.numba import fusion

    monkeypatch.setattr(fusion, "OUTLINE_OPS", 8)

    def f(x, w):
        for k in range(3):
            x = tnp.tanh(x @ w) * 0.5 + tnp.exp(-x * x) * (0.1 * k)
        return tnp.sum(x ** 2)

    x = np.linspace(-1.0, 1.0, 12).reshape(3, 4)
    w = np.eye(4) * 0.7 + 0.01 * np.arange(16.0).reshape(4, 4)
    grad = tg.value_and_grad(f, argnums=(0, 1))
    source = source_of(grad, x, w)
    assert "def nest" in source and "np.ascontiguousarray(_tview(" in source
    both_backends(grad, x, w)


def test_a_written_out_row_reads_its_operands_along_the_loop_that_remains():
    # GMM's squared Mahalanobis distances: sum_i (sum_j q[k,i,j] (x[n,j] - mu[k,j]))^2, the
    # rows over i written out, so the innermost loop walks k: q and mu (re-read for every
    # point) are read from copies with k last, consecutive in that loop (it vectorizes);
    # an operand read once per element (a stored (n, k, j) array) is not copied
    rng = np.random.default_rng(6)
    q, mu, x = rng.standard_normal((7, 5, 5)), rng.random((7, 5)), rng.standard_normal((40, 5))

    def fn(q, mu, x):
        y = tnp.einsum("kij,nkj->nki", q, x[:, None, :] - mu[None, :, :])
        return tnp.sum(tnp.exp(-0.5 * tnp.sum(y * y, axis=2)))

    source = source_of(fn, q, mu, x)
    assert "_tview(a0, (2, 1, 0,))" in source and "_tview(a1, (1, 0,))" in source
    both_backends(fn, q, mu, x)
    both_backends(tg.grad(fn, argnums=(0, 1, 2)), q, mu, x)
    # GMM's gradient (d=10, K=20, N=40) stores x - mu for BLAS (its product with the
    # (n, k, i) cotangent over the points); the forward nest still computes it from x and
    # mu's copy (CodeGen._recomputed), not reading the stored array with a stride along k
    problem = PROBLEMS["gmm"]
    args = problem.data((10, 20, 40))
    grad = tg.value_and_grad(problem.make(tnp, tg.scan, (10, 20, 40)), argnums=problem.wrt)
    source = source_of(grad, *args)
    assert "_gemm_" in source and "_tview(a1, (1, 0,))" in source
    both_backends(grad, *args)

    def stored(q, c):
        y = tnp.einsum("kij,nkj->nki", q, c)
        return tnp.sum(tnp.exp(-0.5 * tnp.sum(y * y, axis=2)))

    c = x[:, None, :] - mu[None, :, :]
    source = source_of(stored, q, c)
    assert "_tview(a0, (2, 1, 0,))" in source and "_tview(a1" not in source
    both_backends(stored, q, c)


TRANSPOSES = """
import json, sys
import numpy as np
import tracegrad as tg, tracegrad.numpy as tnp
from numba.core import event

compiled = []

class Listener(event.Listener):
    def on_start(self, e):
        compiled.append(e.data["dispatcher"].py_func.__qualname__)

    def on_end(self, e):
        pass

event.register("numba:compile", Listener())
tg.config.background_compile = False
rng = np.random.default_rng(6)
q, c = rng.standard_normal((7, 5, 5)), rng.standard_normal((40, 7, 5))
f = tg.function(lambda q, c: tnp.einsum("kij,nkj->nki", q, c), backend="numba")
np.testing.assert_allclose(f(q, c), np.einsum("kij,nkj->nki", q, c), rtol=1e-13)
print(json.dumps(compiled))
"""


def test_kernels_transpose_without_numbas_transpose(tmp_path):
    # Numba's np.transpose compiles a checked permutation whose error messages pull in its
    # string formatting: about 3 s at its first use in each process, never cached on disk
    import json
    import subprocess

    env = dict(os.environ, PYTHONPATH=str(ROOT), TRACEGRAD_CACHE_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", TRANSPOSES], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    compiled = json.loads(out.stdout.strip().splitlines()[-1])
    assert "kernel" in compiled  # the listener saw the compiles
    assert not [name for name in compiled if "transpose" in name or "str" in name], compiled


def test_a_batch_of_products_of_slices_is_gemm_on_the_slices():
    # GMM's gradient of its precision factors: sum_n g[n, k, i] c[n, k, j], a batch over k
    # of products of (n, i) and (n, j) slices of (n, k, .) arrays: BLAS's gemm reads each
    # slice with its leading dimension (no copy to a (k, i, n) layout, no loop over copies)
    rng = np.random.default_rng(8)
    g, c = rng.standard_normal((40, 6, 5)), rng.standard_normal((40, 6, 3))
    for spec, a, b in (("nki,nkj->kij", g, c), ("nki,nkj->kji", g, c),
                       ("kin,nkj->kij", np.ascontiguousarray(g.transpose(1, 2, 0)), c)):
        def fn(a, b, spec=spec):
            return tnp.einsum(spec, a * 0.5, b + 1.0)

        source = source_of(fn, a, b)
        assert "_gemm_" in source and "perm" not in source and "_bdot_" not in source, spec
        both_backends(fn, a, b)
        both_backends(fn, a.astype(np.float32), b.astype(np.float32))
    # with N = 40 points the gradient's sum over the points is such a product
    f, args = _grad_vs_central_differences("gmm", (4, 5, 40))
    source = source_of(tg.value_and_grad(f, argnums=PROBLEMS["gmm"].wrt), *args)
    assert "_gemm_" in source and "perm" not in source
    # the helper on slices of every stride pattern, and on a view with no unit stride
    # (copied for np.dot), against einsum
    import importlib

    gemm = importlib.import_module(nb.helpers.MODULE)._gemm_d
    want = np.einsum("kni,knj->kij", g.transpose(1, 0, 2), c.transpose(1, 0, 2))
    no_unit = np.transpose(np.ascontiguousarray(np.transpose(g, (2, 0, 1))), (1, 2, 0))
    for a in (np.transpose(g, (1, 2, 0)), np.transpose(no_unit, (1, 2, 0)),
              np.ascontiguousarray(np.transpose(g, (1, 2, 0)))):
        for b in (np.transpose(c, (1, 0, 2)), np.ascontiguousarray(np.transpose(c, (1, 0, 2))),
                  np.transpose(np.ascontiguousarray(np.transpose(c, (1, 2, 0))), (0, 2, 1))):
            out = np.empty((6, 5, 3))
            gemm(a, b, out)
            np.testing.assert_allclose(out, want, rtol=1e-13, atol=1e-13)


def test_a_nest_storing_a_row_into_a_buffer_is_not_jammed():
    """A whole-array sum of a fused short contraction writes each row into a buffer whose
    position runs across the loop: jamming two rows would share the position (it left the
    second row's position undefined: Numba's NameError)."""
    rng = np.random.default_rng(3)
    x, w = rng.normal(size=(5, 3)), rng.normal(size=(3, 2))

    def fn(x, w):
        return tnp.sum(tnp.tanh(x @ w) * tnp.exp(-x[:, :1]))

    both_backends(fn, x, w)
    got = tg.function(fn, backend="numba")(x, w)
    np.testing.assert_allclose(got, np.sum(np.tanh(x @ w) * np.exp(-x[:, :1])), rtol=1e-13)
    g = tg.function(tg.grad(fn, argnums=(0, 1)), backend="numba")(x, w)
    np.testing.assert_allclose(g[1], central_difference(lambda b: fn(x, b), w), rtol=1e-7)


def test_a_buffered_row_nest_is_not_jammed_by_a_later_contraction():
    """A sum over a fused operand stored row by row into a buffer, in the nest of a later
    max over a short contraction that asks for a jam: the buffer's store keeps the nest
    unjammed (a jammed copy left the second row's position undefined: Numba's NameError)."""
    rng = np.random.default_rng(4)
    x, w, y = rng.normal(size=(5, 3)), rng.normal(size=(3, 40)), rng.normal(size=(5, 40))

    def fn(x, w, y):
        a = tnp.sum(tnp.exp(y) * tnp.exp(-x[:, :1]))
        c = tnp.max(tnp.tanh(x @ w) + y, axis=1)
        return a, c

    both_backends(fn, x, w, y)
    a, c = tg.function(fn, backend="numba")(x, w, y)
    np.testing.assert_allclose(a, np.sum(np.exp(y) * np.exp(-x[:, :1])), rtol=1e-13)
    np.testing.assert_allclose(c, np.max(np.tanh(x @ w) + y, axis=1), rtol=1e-13)
