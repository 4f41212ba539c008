"""Full-batch gradient descent of a logistic regression over a dataset held as a dask array,
on a Dask `LocalCluster` of worker processes.

`tracegrad.dask.value_and_grad` computes the loss and its gradient chunk by chunk on the
workers (one compiled kernel per chunk, shipped as its IR and compiled once per worker) and
Dask sums the partials in a tree; the parameters stay NumPy on this process. The data is
generated on the workers and never comes back here.

Run: python examples/dask_logistic_regression.py
Size: DASK_LR_ROWS (default 200000; the issue's dataset is 10000000), DASK_LR_FEATURES (32),
DASK_LR_CHUNK (rows a chunk, default 50000), DASK_LR_STEPS (25), DASK_LR_WORKERS (2).
"""

import os
import time

import dask.array as da
import numpy as np
from dask.distributed import Client, LocalCluster

import tracegrad as tg
import tracegrad.dask as tgd
import tracegrad.numpy as tnp


def logistic_loss(w, x, y):
    """The negative log-likelihood, summed over the rows of `x` [n, d] and `y` [n]."""
    z = x @ w
    return tnp.sum(tg.nn.softplus(z) - y * z)


def numpy_gradient(w, x, y):
    """The same gradient written by hand with dask.array's NumPy API: x.T (sigmoid(xw) - y)."""
    return (x.T @ (1 / (1 + da.exp(-(x @ w))) - y)).compute()


def make_data(rows: int, features: int, chunk: int):
    """Rows of standard normal features labelled by a noisy linear rule, made on the workers."""
    rng = da.random.default_rng(0)
    x = rng.standard_normal((rows, features), chunks=(chunk, features))
    w_true = np.linspace(-1.0, 1.0, features)
    y = ((x @ w_true + rng.standard_normal(rows, chunks=chunk)) > 0).astype(np.float64)
    return x, y


def main():
    rows = int(os.environ.get("DASK_LR_ROWS", "200000"))
    features = int(os.environ.get("DASK_LR_FEATURES", "32"))
    chunk = int(os.environ.get("DASK_LR_CHUNK", "50000"))
    steps = int(os.environ.get("DASK_LR_STEPS", "25"))
    workers = int(os.environ.get("DASK_LR_WORKERS", "2"))
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        x, y = make_data(rows, features, chunk)
        x, y = client.persist([x, y])  # generated once, held by the workers
        print(f"{rows} rows x {features} features in {x.numblocks[0]} chunks "
              f"on {workers} worker processes")

        value_and_grad = tgd.value_and_grad(logistic_loss)
        w = np.zeros(features)
        start = time.perf_counter()
        value, grad = value_and_grad(w, x, y)  # traces here, compiles once per worker
        first_s = time.perf_counter() - start
        diff = np.max(np.abs(grad - numpy_gradient(w, x, y)))
        print(f"first gradient {first_s:.2f} s; max |tracegrad - dask.array NumPy| = {diff:.2e}")

        lr = 4.0 / rows  # the loss is a sum over rows: scale the step by 1/n
        start = time.perf_counter()
        for i in range(steps):
            value, grad = value_and_grad(w, x, y)
            if i % 5 == 0 or i == steps - 1:
                print(f"step {i:3d}  mean loss {value / rows:.6f}")
            w = w - lr * grad
        per_step = (time.perf_counter() - start) / max(steps, 1)
        accuracy = float((((x @ w) > 0) == (y > 0.5)).mean().compute())
        print(f"{per_step * 1e3:.1f} ms a step; accuracy {accuracy:.3f}")


if __name__ == "__main__":
    main()
