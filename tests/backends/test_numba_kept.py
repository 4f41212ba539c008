"""The numba backend's speed paths of linear algebra: the executor's kept temporaries
(re-used between calls, never shared by concurrent calls, never aliased by a result),
BLAS's triangular product for a Cholesky factor times a matrix, LAPACK's potrf for
cholesky, and outer products as elementwise products."""

import re
import threading

import numpy as np
import pytest
import scipy.linalg

import tracegrad as tg
import tracegrad.numpy as tnp
import tracegrad.scipy.linalg as tsl
from tests.backends._util import graph_of
from tests.finite_diff import central_difference
from tracegrad.core.op import REGISTRY
from tracegrad.passes.simplify import simplify

nb = pytest.importorskip("tracegrad.backends.numba")

N = 96  # 96 x 96 float64 temporaries: 72 KiB, above codegen.KEEP_MIN_BYTES


def _spd(rng, n=N, dtype=np.float64):
    a = rng.standard_normal((n, n))
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal((n, n))
    return (a @ a.conj().T + n * np.eye(n)).astype(dtype)


def _chain(a, b):
    """Large temporaries between the inputs and the output: `exp(a) @ b` and `b * 2`."""
    e = tnp.exp(a / N)
    return tnp.sum((e @ b) * (b * 2.0), axis=0)


def _chain_numpy(a, b):
    return np.sum((np.exp(a / N) @ b) * (b * 2.0), axis=0)


def test_large_temporaries_are_kept_between_calls_and_results_are_fresh():
    rng = np.random.default_rng(0)
    f = tg.function(_chain, backend="numba")
    a, b = rng.standard_normal((N, N)), rng.standard_normal((N, N))
    source = tg.compiled_source(f.get_concrete_function(a, b).graph)
    assert "= {ws" not in source and "= ws0" in source  # the temporaries are arguments
    first = f(a, b)
    kept = np.copy(first)
    for seed in (1, 2, 3):  # other inputs through the same kept buffers
        a2, b2 = (np.random.default_rng(seed).standard_normal((N, N)) for _ in range(2))
        np.testing.assert_allclose(f(a2, b2), _chain_numpy(a2, b2), rtol=1e-12)
    np.testing.assert_array_equal(first, kept)  # a result is never a kept buffer
    np.testing.assert_allclose(f(a, b), _chain_numpy(a, b), rtol=1e-12)


def test_the_histories_a_gradient_keeps_of_a_scan_are_kept_between_calls():
    """A scan's gradient keeps the history of each carry for its backward loop: arrays of
    the loop's length, kept by the executor (the graph has unknown dims: the histories'
    lengths), not allocated and faulted in again at every call."""
    rng = np.random.default_rng(4)
    w, xs = rng.standard_normal((64, 64)) / 8, rng.standard_normal((300, 64))

    def loss(w, xs):
        hs = tg.scan(lambda h, x: (tnp.tanh(w @ h + x),) * 2, tnp.zeros(64), xs)[1]
        return tnp.sum(hs ** 2)

    f = tg.function(tg.value_and_grad(loss), backend="numba")
    graph = f.get_concrete_function(w, xs).graph
    source = tg.compiled_source(graph)
    assert re.search(r"_h\d+ = ws\d+", source)  # a history is a kept argument
    ex = nb.compile_graph(graph)
    assert any(shape[0] > 1 and np.prod(shape) >= 300 * 64 for shape, _ in ex._kept)

    def numpy_loss(w, xs):
        h, total = np.zeros(64), 0.0
        for x in xs:
            h = np.tanh(w @ h + x)
            total += np.sum(h ** 2)
        return total

    reference = tg.function(tg.value_and_grad(loss), backend="numpy")
    for seed in (5, 6):  # the kept histories of one call do not leak into the next
        w2 = np.random.default_rng(seed).standard_normal((64, 64)) / 8
        value, grad = f(w2, xs)
        np.testing.assert_allclose(value, numpy_loss(w2, xs), rtol=1e-12)
        np.testing.assert_allclose(grad, reference(w2, xs)[1], rtol=1e-10, atol=1e-12)
        for i, j in ((0, 0), (7, 40), (63, 5)):  # central differences of a few entries
            step = np.zeros_like(w2)
            step[i, j] = 1e-4
            fd = (numpy_loss(w2 + step, xs) - numpy_loss(w2 - step, xs)) / 2e-4
            np.testing.assert_allclose(grad[i, j], fd, rtol=1e-6, atol=1e-8)


def test_concurrent_calls_do_not_share_temporaries():
    f = tg.function(_chain, backend="numba")
    inputs = [tuple(np.random.default_rng(s).standard_normal((N, N)) for _ in range(2))
              for s in range(4)]
    f(*inputs[0])  # compiled before the threads start
    errors = []

    def work(k):
        a, b = inputs[k]
        want = _chain_numpy(a, b)
        for _ in range(30):
            got = f(a, b)
            if not np.allclose(got, want, rtol=1e-12):
                errors.append(k)
                return

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
def test_a_cholesky_factor_times_a_matrix_is_blas_triangular_product(dtype):
    rng = np.random.default_rng(1)
    spd = _spd(rng, 7, dtype)
    b = rng.standard_normal((7, 7)).astype(dtype)
    c = REGISTRY["cholesky"]
    dot = REGISTRY["dot_general"]

    def fn(spd, b):
        factor = c.bind(spd)
        return [dot.bind(factor, b, dimension_numbers=(((1,), (0,)), ((), ()))),  # L @ b
                dot.bind(factor, b, dimension_numbers=(((0,), (0,)), ((), ()))),  # L.T @ b
                dot.bind(b, factor, dimension_numbers=(((1,), (0,)), ((), ()))),  # b @ L
                dot.bind(b, factor, dimension_numbers=(((1,), (1,)), ((), ()))),  # b @ L.T
                dot.bind(factor, b, dimension_numbers=(((1,), (1,)), ((), ())))]  # L @ b.T

    graph = graph_of(fn, spd, b)
    assert nb.generate_source(graph).count("_trmm_") >= 4 + 1  # four calls and the import
    got = nb.compile_graph(graph)([spd, b])
    low = np.linalg.cholesky(spd)
    want = [low @ b, low.T @ b, b @ low, b @ low.T, low @ b.T]
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)


def test_cholesky_by_potrf_zeroes_the_upper_triangle_and_rejects_indefinite_matrices():
    rng = np.random.default_rng(2)
    spd = np.stack([_spd(rng, 5), _spd(rng, 5)])
    f = tg.function(tnp.linalg.cholesky, backend="numba")
    got = f(spd)
    np.testing.assert_allclose(got, np.linalg.cholesky(spd), rtol=1e-13, atol=1e-15)
    assert not np.triu(got, 1).any()
    bad = spd.copy()
    bad[1] = -bad[1]
    with pytest.raises(np.linalg.LinAlgError, match="not positive definite.*cholesky"):
        f(bad)


def test_outer_product_dot_becomes_an_elementwise_product():
    def fn(u, v):
        return tnp.matmul(u, tnp.swapaxes(v, 0, 1)) + 1.0  # (n, 1) @ (1, m)

    graph = tg.trace(fn)(tg.TensorSpec([4, 1]), tg.TensorSpec([3, 1]))
    out = simplify(graph)
    names = [op.primitive.name for op in out.operations]
    assert "dot_general" in [op.primitive.name for op in graph.operations]
    assert "dot_general" not in names and "mul" in names
    rng = np.random.default_rng(3)
    u, v = rng.standard_normal((4, 1)), rng.standard_normal((3, 1))
    for backend in ("numpy", "numba"):
        np.testing.assert_array_equal(tg.function(fn, backend=backend)(u, v), u @ v.T + 1.0)


def test_gp_gradient_through_cholesky_matches_finite_differences():
    rng = np.random.default_rng(4)
    x = np.sort(rng.uniform(-3, 3, 60))
    y = np.sin(x) + 0.1 * rng.standard_normal(60)

    def nll(theta, np_=tnp):
        d2 = (x[:, None] - x[None, :]) ** 2
        k = np_.exp(2 * theta[1] - 0.5 * d2 * np_.exp(-2 * theta[0]))
        c = np_.linalg.cholesky(k + np_.exp(2 * theta[2]) * np_.eye(60))
        alpha = (tsl if np_ is tnp else scipy.linalg).cho_solve((c, True), y)
        return 0.5 * y @ alpha + np_.sum(np_.log(np_.diagonal(c)))

    theta = np.array([0.1, 0.2, -1.0])
    value, grad = tg.function(tg.value_and_grad(nll), backend="numba")(theta)
    want_value, want_grad = tg.function(tg.value_and_grad(nll), backend="numpy")(theta)
    np.testing.assert_allclose(value, want_value, rtol=1e-12)
    np.testing.assert_allclose(grad, want_grad, rtol=1e-9)
    numeric = central_difference(lambda t: nll(t, np), theta)
    np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-8)
