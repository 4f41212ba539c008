"""tracegrad.dask on a real `dask.distributed.LocalCluster` of two worker processes: values
equal NumPy's, gradients central differences and the single-machine tracegrad results,
workers compile a kernel once, and errors raised on a worker reach the caller unchanged."""

from __future__ import annotations

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tests.finite_diff import central_difference
from tracegrad.errors import ArgumentTypeError, ShapeError

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("dask.distributed")
tgd = pytest.importorskip("tracegrad.dask")

ROWS, FEATURES = 50, 3
CHUNKS = 16  # four chunks of 16, 16, 16 and 2 rows: two chunk shapes


@pytest.fixture(scope="module")
def client():
    """A cluster of 2 worker processes with one thread each, the default scheduler while
    the module's tests run."""
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as c:
        yield c


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(14)
    x = rng.normal(size=(ROWS, FEATURES))
    y = (rng.random(ROWS) < 0.5).astype(np.float64)
    w = rng.normal(size=FEATURES)
    return x, y, w


def logistic_loss(w, x, y):
    z = x @ w
    return tnp.sum(tg.nn.softplus(z) - y * z)


def logistic_loss_numpy(w, x, y):
    z = x @ w
    return np.sum(np.logaddexp(0.0, z) - y * z)


def chunked(a):
    return da.from_array(a, chunks=(CHUNKS,) + a.shape[1:])


def test_map_blocks_of_a_compiled_function_equals_numpy(client, data):
    x, _, w = data
    f = tg.function(lambda x, w, c: tnp.tanh(x @ w) * c)
    out = tgd.map_blocks(f, chunked(x), w, 2.0)
    assert out.shape == (ROWS,) and out.chunks == ((16, 16, 16, 2),)
    np.testing.assert_allclose(out.compute(), np.tanh(x @ w) * 2.0, rtol=1e-14)


def test_map_blocks_of_a_vmapped_function_splits_the_batch_axis(client, data):
    x, y, w = data
    outer = tg.vmap(lambda xi, yi: tnp.outer(xi, xi) * yi)
    got = tgd.map_blocks(outer, chunked(x), chunked(y)).compute()
    np.testing.assert_allclose(got, x[:, :, None] * x[:, None, :] * y[:, None, None],
                               rtol=1e-15)


def test_value_and_grad_tree_reduces_chunk_partials(client, data):
    x, y, w = data
    value, grad = tgd.value_and_grad(logistic_loss)(w, chunked(x), chunked(y))
    assert isinstance(grad, np.ndarray) and grad.shape == (FEATURES,)
    np.testing.assert_allclose(value, logistic_loss_numpy(w, x, y), rtol=1e-13)
    np.testing.assert_allclose(grad, central_difference(
        lambda w: logistic_loss_numpy(w, x, y), w), rtol=1e-6)
    # the single-machine result, to summation-order rounding
    local_value, local_grad = tg.value_and_grad(logistic_loss)(w, x, y)
    np.testing.assert_allclose(value, local_value, rtol=1e-13)
    np.testing.assert_allclose(grad, local_grad, rtol=1e-12)


def test_value_and_grad_of_structured_parameters_and_several_argnums(client, data):
    x, y, w = data

    def loss(params, scale, x, y):
        return scale * logistic_loss(params["w"], x, y) + tnp.sum(params["b"] * y)

    params = {"w": w, "b": np.array(0.5)}
    value, (grads, gscale) = tgd.value_and_grad(loss, argnums=(0, 1))(
        params, np.array(2.0), chunked(x), chunked(y))
    np.testing.assert_allclose(value, 2 * logistic_loss_numpy(w, x, y) + 0.5 * y.sum(),
                               rtol=1e-13)
    np.testing.assert_allclose(grads["w"], 2 * central_difference(
        lambda w: logistic_loss_numpy(w, x, y), w), rtol=1e-6)
    np.testing.assert_allclose(grads["b"], y.sum(), rtol=1e-15)
    np.testing.assert_allclose(gscale, logistic_loss_numpy(w, x, y), rtol=1e-13)


def test_per_example_grads_are_a_dask_array_of_row_gradients(client, data):
    x, y, w = data
    pe = tgd.per_example_grads(logistic_loss)(w, chunked(x), chunked(y))
    assert pe.shape == (ROWS, FEATURES) and pe.chunks[0] == (16, 16, 16, 2)
    got = pe.compute()
    for i in (0, 17, ROWS - 1):
        np.testing.assert_allclose(got[i], central_difference(
            lambda w, i=i: logistic_loss_numpy(w, x[i:i + 1], y[i:i + 1]), w), rtol=1e-6)
    np.testing.assert_allclose(got.sum(axis=0), tg.grad(logistic_loss)(w, x, y), rtol=1e-12)


def test_batch_jacobian_over_chunks_equals_the_local_one(client, data):
    x, _, _ = data

    def f(x):
        return tnp.tanh(x) * tnp.sum(x, axis=1, keepdims=True)

    got = tgd.batch_jacobian(f)(chunked(x))
    assert got.shape == (ROWS, FEATURES, FEATURES)
    np.testing.assert_allclose(got.compute(), tg.batch_jacobian(f)(x), rtol=1e-15)


def test_a_worker_compiles_a_kernel_once_not_per_task(client, data):
    from tracegrad.backends import numba as nb

    x, y, w = data

    def scaled_loss(w, x, y):  # a kernel no other test builds
        return 3.0 * logistic_loss(w, x, y)

    def loads():
        return client.run(lambda: sum(v for k, v in nb.cache_info().items()
                                      if k in ("compiled", "disk_hits")))

    before = loads()
    for _ in range(3):
        tgd.value_and_grad(scaled_loss)(w, chunked(x), chunked(y))
    after = loads()
    # one kernel serves both chunk shapes; each worker that ran a chunk built or loaded it once
    assert all(after[k] - before[k] <= 1 for k in after)
    assert sum(after[k] - before[k] for k in after) >= 1


def test_error_on_a_worker_reaches_the_caller_with_its_type_and_message(client, data):
    x, y, w = data
    concrete = tg.function(logistic_loss).get_concrete_function(w, x, y)
    bad = np.zeros((ROWS, FEATURES + 1))
    with pytest.raises(ShapeError) as local:
        concrete(w, bad, y)
    with pytest.raises(ShapeError) as remote:
        client.submit(concrete, w, bad, y).result()
    assert str(remote.value).split(" (at ")[0] == str(local.value).split(" (at ")[0]


def test_parameters_must_be_numpy(client, data):
    x, y, w = data
    with pytest.raises(ArgumentTypeError, match="argument 0 is differentiated"):
        tgd.value_and_grad(logistic_loss)(chunked(np.tile(w, (ROWS, 1))), chunked(x), y)


def test_a_worker_killed_mid_computation_is_retried_and_the_result_unchanged(client, data):
    import os
    import signal
    import threading
    import time

    x, y, w = data
    # inputs made by slow tasks (0.2 s a chunk), so the kill lands while the graph runs
    slow = chunked(x).map_blocks(lambda b: time.sleep(0.2) or b, dtype=x.dtype)
    pids = client.run(os.getpid)
    victim = sorted(pids)[0]
    killed = []

    def kill_when_busy():
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if client.processing().get(victim):
                os.kill(pids[victim], signal.SIGKILL)
                killed.append(victim)
                return
            time.sleep(0.01)

    killer = threading.Thread(target=kill_when_busy)
    killer.start()
    value, grad = tgd.value_and_grad(logistic_loss)(w, slow, chunked(y))
    killer.join()
    assert killed
    np.testing.assert_allclose(value, logistic_loss_numpy(w, x, y), rtol=1e-13)
    np.testing.assert_allclose(grad, tg.grad(logistic_loss)(w, x, y), rtol=1e-12)
    client.wait_for_workers(2, timeout=30)  # the nanny restarts the killed worker


def test_random_numbers_are_the_same_on_every_worker(client, data):
    # a key is an ordinary argument: each chunk draws the numbers of its shape from it
    from tracegrad import random as tr

    x, _, _ = data
    key = tr.key(27)
    f = tg.function(lambda x, k: x + tr.normal(k, x.shape))
    out = np.asarray(tgd.map_blocks(f, chunked(x), key).compute())
    want = [f(x[i:i + CHUNKS], key) for i in range(0, ROWS, CHUNKS)]  # in this process
    np.testing.assert_array_equal(out, np.concatenate(want))
    np.testing.assert_allclose(want[0], x[:CHUNKS] + tr.normal(key, (CHUNKS, FEATURES)),
                               rtol=1e-15)


def test_kernels_on_a_worker_use_at_most_its_threads(client, data):
    from tracegrad.backends import blas_threads

    x, y, w = data
    tgd.value_and_grad(logistic_loss)(w, chunked(x), chunked(y))  # a task on each worker
    # threads_per_worker=1: the workers' processes may use 2 cores, their kernels use 1
    counts = client.run(lambda: (tg.config.num_threads, blas_threads.library_threads()))
    assert all(n == 1 and blas in (1, None) for n, blas in counts.values()), counts
