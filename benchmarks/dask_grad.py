"""The gradient of a logistic loss over a large dataset three ways, in the same run:

1. one process: `tg.value_and_grad(loss)` on the whole NumPy array (one compiled kernel);
2. `tracegrad.dask.value_and_grad` on a `LocalCluster` of 2 worker processes (1 thread
   each), the data a dask array held by the workers, at two chunk sizes;
3. dask.array with the NumPy gradient written by hand, on the same cluster and chunks.

    python benchmarks/dask_grad.py [--rows 10000000] [--features 32] [--repeats 5]

Times are medians of `--repeats` calls after one warm-up call (which traces and compiles);
scaling = one-process time / cluster time; the overhead per chunk is the extra time of the
run with 4x more chunks, divided by the extra chunks. Values are checked against each
other. Not a test (docs/performance.md, "Scale-out on Dask").
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

# timed calls measure kernels; the workers (child processes) inherit the setting
os.environ["TRACEGRAD_BACKGROUND_COMPILE"] = "0"

import dask  # noqa: E402
import dask.array as da
import numpy as np
from dask.distributed import Client, LocalCluster

import tracegrad as tg
import tracegrad.dask as tgd
import tracegrad.numpy as tnp


def loss(w, x, y):
    z = x @ w
    return tnp.sum(tg.nn.softplus(z) - y * z)


def numpy_value_and_grad(w, x, y):
    """The hand-written loss and gradient with dask.array's NumPy API, computed together."""
    z = x @ w
    value = da.sum(da.logaddexp(0.0, z) - y * z)
    grad = x.T @ (1 / (1 + da.exp(-z)) - y)
    return dask.compute(value, grad)


def median_seconds(fn, repeats: int) -> tuple[float, object]:
    out = fn()  # warm-up: traces, compiles (or loads kernels), fills caches
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--features", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    rows, d = args.rows, args.features
    big, small = rows // 10, rows // 40  # 10 and 40 chunks
    w = np.linspace(-0.5, 0.5, d)
    results = {}
    distributed_vg = tgd.value_and_grad(loss)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        rng = da.random.default_rng(0)
        x = rng.standard_normal((rows, d), chunks=(big, d))
        y = (rng.random(rows, chunks=big) < 0.5).astype(np.float64)
        x, y = client.persist([x, y])
        dask.distributed.wait([x, y])
        for chunk in (big, small):
            xc, yc = client.persist([x.rechunk((chunk, d)), y.rechunk(chunk)])
            dask.distributed.wait([xc, yc])
            n = xc.numblocks[0]
            results[f"tracegrad.dask, {n} chunks"] = median_seconds(
                lambda xc=xc, yc=yc: distributed_vg(w, xc, yc), args.repeats)
            results[f"dask.array NumPy, {n} chunks"] = median_seconds(
                lambda xc=xc, yc=yc: numpy_value_and_grad(w, xc, yc), args.repeats)
            del xc, yc
        x_local, y_local = dask.compute(x, y)
    vg = tg.value_and_grad(loss)
    results["one process, tracegrad"] = median_seconds(lambda: vg(w, x_local, y_local),
                                                       args.repeats)

    ref_value, ref_grad = results["one process, tracegrad"][1]
    print(f"{rows} x {d} float64 rows ({rows * d * 8 / 1e9:.2f} GB); {os.cpu_count()} cores, "
          f"{platform.processor() or platform.machine()}; tracegrad {tg.__version__}, "
          f"dask {dask.__version__}")
    one = results["one process, tracegrad"][0]
    print(f"{'':32s} {'ms':>9s} {'vs one process':>15s} {'max rel. diff':>14s}")
    for name, (seconds, (value, grad)) in results.items():
        diff = max(abs(value - ref_value) / abs(ref_value),
                   np.max(np.abs(grad - ref_grad)) / np.max(np.abs(ref_grad)))
        print(f"{name:32s} {seconds * 1e3:9.1f} {one / seconds:14.2f}x {diff:14.1e}")
    t10 = results["tracegrad.dask, 10 chunks"][0]
    t40 = results["tracegrad.dask, 40 chunks"][0]
    print(f"overhead per chunk (40 vs 10 chunks): {(t40 - t10) / 30 * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
