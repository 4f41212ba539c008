"""The BLAS thread policy of numba kernels: small products on one BLAS thread, the library
at most at `tg.config.num_threads`, results unchanged (tracegrad/backends/blas_threads.py)."""

import sys

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tracegrad.backends import blas_threads
from tracegrad.backends.numba import helpers

pytestmark = pytest.mark.skipif(blas_threads.library() is None,
                                reason="SciPy's BLAS is not OpenBLAS or MKL: no policy to test")


@pytest.fixture
def threads_2():
    """The library at 2 threads, whatever the environment gave it; restored after."""
    _, get, set_ = blas_threads._library
    old, old_config = get(), tg.config.num_threads
    tg.config.num_threads = 2
    set_(2)
    yield
    tg.config.num_threads = old_config
    set_(old)


def _compiled(fn, *args):
    """`fn(*args)` through a numba kernel (not the numpy interim)."""
    old, tg.config.background_compile = tg.config.background_compile, False
    try:
        return tg.function(fn, backend="numba")(*args)
    finally:
        tg.config.background_compile = old


def _helper_module():
    _compiled(lambda a, b: a @ b, np.ones((3, 3)), np.ones((3, 3)))
    return sys.modules[helpers.MODULE]


def test_the_library_is_the_one_scipy_cython_blas_calls():
    import scipy

    assert blas_threads.library().user_api == "blas"
    # SciPy's wheels bundle their own OpenBLAS next to the package, NumPy's another
    if "scipy.libs" in blas_threads.library().filepath:
        assert blas_threads.library().filepath.startswith(
            scipy.__file__.rsplit("scipy", 1)[0])


def test_a_small_product_runs_on_one_thread_and_the_count_is_restored(threads_2):
    mod = _helper_module()
    _, get, _ = blas_threads._library
    saved = mod._blas_one(64 * 64 * 64)
    assert (saved, get()) == (2, 1)
    mod._blas_restore(saved)
    assert get() == 2
    # a large product keeps the library's count
    assert mod._blas_one(blas_threads.SMALL_PRODUCT) == 0 and get() == 2
    # a library already on one thread is left alone
    blas_threads._library[2](1)
    assert mod._blas_one(10) == 0 and get() == 1


def test_num_threads_caps_the_library(threads_2):
    _helper_module()
    tg.config.num_threads = 1
    assert blas_threads.library_threads() == 1
    tg.config.num_threads = 2
    assert blas_threads.library_threads() == 2


@pytest.mark.parametrize("shapes", [((40, 30), (30, 20)), ((300, 300), (300, 300)),
                                    ((7, 50, 40), (7, 40, 30))])
def test_kernels_give_the_same_values_at_any_count_and_leave_it(threads_2, shapes):
    rng = np.random.default_rng(3)
    a, b = (rng.standard_normal(s) for s in shapes)
    got = _compiled(lambda a, b: tnp.tanh(a @ b), a, b)
    np.testing.assert_allclose(got, np.tanh(a @ b), rtol=1e-13, atol=1e-13)
    assert blas_threads.library_threads() == 2
    tg.config.num_threads = 1  # every product on one thread
    again = _compiled(lambda a, b: tnp.tanh(a @ b), a, b)
    if a.size * b.shape[-1] < blas_threads.SMALL_PRODUCT:  # on one thread both times
        np.testing.assert_array_equal(again, got)
    else:  # OpenBLAS splits a product's sums differently on 2 threads
        np.testing.assert_allclose(again, got, rtol=1e-10, atol=1e-13)
    assert blas_threads.library_threads() == 1


def test_triangular_solve_restores_the_count(threads_2):
    import scipy.linalg

    import tracegrad.scipy.linalg as tsl

    rng = np.random.default_rng(4)
    a = np.tril(rng.standard_normal((20, 20))) + 20 * np.eye(20)
    b = rng.standard_normal((20, 5))
    got = _compiled(lambda a, b: tsl.solve_triangular(a, b, lower=True), a, b)
    np.testing.assert_allclose(got, scipy.linalg.solve_triangular(a, b, lower=True),
                               rtol=1e-12)
    assert blas_threads.library_threads() == 2


def test_lapack_calls_restore_the_count_also_after_an_error(threads_2):
    rng = np.random.default_rng(5)
    a = rng.standard_normal((30, 30)) + 30 * np.eye(30)
    b = rng.standard_normal((30, 4))
    got = _compiled(lambda a, b: tnp.linalg.solve(a, b) + tnp.linalg.det(a), a, b)
    np.testing.assert_allclose(got, np.linalg.solve(a, b) + np.linalg.det(a), rtol=1e-10)
    assert blas_threads.library_threads() == 2
    with pytest.raises(np.linalg.LinAlgError):
        _compiled(lambda a, b: tnp.linalg.solve(a, b), np.zeros((30, 30)), b)
    assert blas_threads.library_threads() == 2


def test_a_batch_of_small_products_counts_one_products_work(monkeypatch):
    """The policy is per product: `_gemm_` (run in Python, its BLAS call recorded) asks
    `_blas_one` about one product's multiply-adds, not the whole batch's."""
    mod = _helper_module()
    asked, calls = [], []
    glob = mod._gemm_d.py_func.__globals__
    monkeypatch.setitem(glob, "_blas_one", lambda work: asked.append(work) or 0)
    monkeypatch.setitem(glob, "_blas_dgemm", lambda *args: calls.append(args))
    a, b = np.ones((50, 8, 6)), np.ones((50, 6, 7))
    mod._gemm_d.py_func(a, b, np.empty((50, 8, 7)))
    assert asked == [8 * 7 * 6] and len(calls) == 50


@pytest.mark.parametrize("pattern", ["nn", "nt", "tn", "tt"])
def test_a_batched_product_counts_its_terms_for_every_transpose(monkeypatch, pattern):
    """`_bdot_` (run in Python) asks `_blas_one` about one product's multiply-adds, its
    terms read from the operand as stored (`a[k].T`: its rows), and gives NumPy's
    products; an empty batch or no terms asks nothing (zeros for no terms)."""
    mod = _helper_module()
    fn = getattr(mod, f"_bdot_{pattern}_f64").py_func
    asked = []
    monkeypatch.setitem(fn.__globals__, "_blas_one", lambda work: asked.append(work) or 0)
    monkeypatch.setitem(fn.__globals__, "_blas_restore", lambda saved: None)
    monkeypatch.setitem(fn.__globals__, "_no_products", mod._no_products.py_func)
    rng = np.random.default_rng(7)
    nb, m, n, kk = 3, 4, 5, 6
    a = rng.standard_normal((nb, kk, m) if pattern[0] == "t" else (nb, m, kk))
    b = rng.standard_normal((nb, n, kk) if pattern[1] == "t" else (nb, kk, n))
    o = np.empty((nb, m, n))
    fn(a, b, o)
    av = np.swapaxes(a, 1, 2) if pattern[0] == "t" else a
    bv = np.swapaxes(b, 1, 2) if pattern[1] == "t" else b
    np.testing.assert_allclose(o, av @ bv, rtol=1e-13, atol=1e-13)
    assert asked == [m * n * kk]
    o = np.full((nb, m, n), 7.0)
    fn(a[:, :0] if pattern[0] == "t" else a[:, :, :0],
       b[:, :, :0] if pattern[1] == "t" else b[:, :0], o)
    np.testing.assert_array_equal(o, 0.0)
    fn(a[:0], b[:0], np.empty((0, m, n)))
    assert asked == [m * n * kk]
