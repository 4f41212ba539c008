"""Parallel kernels: each row at 1 thread (the serial kernel) and at N threads (the parallel
kernel), their ratio, and the first call of each (docs/numba.md, "Parallel loops").

    python benchmarks/parallel_scaling.py [--threads N] [--only w2,w5,crossover,...]

- W2: `value_and_grad(lambda x: sum(tanh(x) * sin(x) + x ** 2))`, x of 10**7 float64;
- W5: per-example Jacobians of `tanh(W2 @ tanh(W1 @ x_i))`, x [1024, 16], hidden 32
  (BLAS keeps its own thread setting: OPENBLAS_NUM_THREADS et al. as the environment has them);
- elementwise: `sin(x) * cos(x) + exp(-x*x) * 0.5 - tanh(0.3 x) / (1 + x*x)`, 10**7;
- reduction: `sum(exp(m / 2), axis=1)` and `sum(m * m)` of m [2000, 5000];
- crossover: the elementwise row from 10**3 to 10**6 elements, to place
  `parallel.PARALLEL_MIN_ELEMENTS` (TRACEGRAD_PARALLEL_MIN);
- launch: the per-call cost of a parallel kernel of 4 elements over the serial one, and of
  two calls of a nogil kernel handed to a 2-thread Python pool.

Each row compiles its function at 1 thread (the serial kernel) and at N threads (large
fixed shapes: the parallel kernel alone), and times the parallel kernel at 1 thread too
(what splitting the loops costs a thread). Times are the best and the median of 15 calls
after a warm-up; each row prints the load
average (`os.getloadavg`) with its figures, since other processes on the machine take
cores from the threads. The kernels start from an empty cache (a temporary directory), so
"first call" is the compile of each kernel. Not a test: it asserts only that both kernels
give the same bits.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

os.environ.setdefault("TRACEGRAD_CACHE_DIR", tempfile.mkdtemp(prefix="tg-parallel-"))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
from machine import best_and_median, cpu  # noqa: E402

import tracegrad as tg  # noqa: E402
import tracegrad.numpy as tnp  # noqa: E402
from tracegrad.backends import threads  # noqa: E402
from tracegrad.backends.numba import parallel  # noqa: E402

tg.config.background_compile = False


def us(seconds: float) -> str:
    return f"{seconds * 1e6:10.1f} us"


def load() -> str:
    return "load " + " ".join(f"{v:.2f}" for v in os.getloadavg())


def at_threads(n: int, fn, args):
    """(first call seconds, best, median, result) of `fn(*args)` at `n` threads."""
    threads.num_threads = n
    start = time.perf_counter()
    out = fn(*args)
    first = time.perf_counter() - start
    best, median = best_and_median(lambda: fn(*args), 15)
    return first, best, median, out


def same_bits(a, b) -> bool:
    a = a if isinstance(a, (list, tuple)) else [a]
    b = b if isinstance(b, (list, tuple)) else [b]
    return all(np.asarray(x).tobytes() == np.asarray(y).tobytes()
               for x, y in zip(a, b, strict=True))


def row(label: str, make, args, n: int):
    """`make()`'s function compiled and timed at 1 thread (the serial kernel), compiled at
    `n` threads (large fixed shapes: the parallel kernel alone) and timed at `n` and at 1
    (what splitting the loops costs one thread)."""
    threads.num_threads = 1
    one = at_threads(1, make(), args)
    threads.num_threads = n
    f = make()
    many = at_threads(n, f, args)
    alone = at_threads(1, f, args)
    assert same_bits(one[3], many[3]) and same_bits(one[3], alone[3]), label
    print(f"{label:40s} 1 thread {us(one[1])} (median {us(one[2])}) | "
          f"{n} threads {us(many[1])} (median {us(many[2])}) | "
          f"scaling {one[1] / many[1]:4.2f}x (medians {one[2] / many[2]:4.2f}x) | "
          f"parallel kernel on 1 thread {one[1] / alone[1]:4.2f}x | "
          f"first call {one[0]:.2f} s / {many[0]:.2f} s | {load()}", flush=True)


def w2(x):
    return tnp.sum(tnp.tanh(x) * tnp.sin(x) + x ** 2)


def elementwise(x):
    return tnp.sin(x) * tnp.cos(x) + tnp.exp(-(x * x)) * 0.5 - tnp.tanh(x * 0.3) / (1.0 + x * x)


def w5(w1, w2, x):
    def net(v):
        return tnp.tanh(w2 @ tnp.tanh(w1 @ v))
    return tg.vmap(tg.jacobian(net))(x)


def reduction(m):
    return tnp.sum(tnp.exp(m * 0.5), axis=1), tnp.sum(m * m)


def crossover(n: int):
    rng = np.random.default_rng(1)
    for size in (1_000, 10_000, 30_000, 100_000, 300_000, 1_000_000):
        parallel.PARALLEL_MIN_ELEMENTS = 0
        row(f"crossover: elementwise [{size}]", lambda: tg.function(elementwise, parallel=True),
            [rng.standard_normal(size)], n)


def launch(n: int):
    from concurrent.futures import ThreadPoolExecutor

    parallel.PARALLEL_MIN_ELEMENTS = 0
    def tiny(a):
        return a * 2.0 + 1.0

    row("launch: a * 2 + 1 [4]", lambda: tg.function(tiny, parallel=True), [np.ones(4)], n)
    f = tg.function(tiny)
    threads.num_threads = 1
    pool = ThreadPoolExecutor(2)
    x = np.ones(4)

    def two():
        for fut in [pool.submit(f, x), pool.submit(f, x)]:
            fut.result()
    best, median = best_and_median(two, 200)
    print(f"{'launch: two calls on a 2-thread Python pool':44s} {us(best)} "
          f"(median {us(median)}) | {load()}", flush=True)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=threads.available_cores())
    p.add_argument("--only", default="w2,w5,elementwise,reduction,crossover,launch")
    a = p.parse_args(argv)
    import numba

    only = set(a.only.split(","))
    n = a.threads
    print(f"cpu: {cpu()}; {threads.available_cores()} cores available; threads {n}; "
          f"numba {numba.__version__}, threading layer after the first parallel call below")
    rng = np.random.default_rng(0)
    default_min = parallel.PARALLEL_MIN_ELEMENTS
    if "w2" in only:
        row("W2 value_and_grad [10^7]", lambda: tg.function(tg.value_and_grad(w2), parallel=True),
            [rng.standard_normal(10**7)], n)
        print(f"threading layer: {numba.threading_layer()}")
    if "w5" in only:
        args = [rng.standard_normal((32, 16)) / 4, rng.standard_normal((16, 32)) / 6,
                rng.standard_normal((1024, 16))]
        row("W5 per-example jacobians [1024,16,16]", lambda: tg.function(w5, parallel=True),
            args, n)
    if "elementwise" in only:
        row("elementwise chain [10^7]", lambda: tg.function(elementwise, parallel=True),
            [rng.standard_normal(10**7)], n)
    if "reduction" in only:
        row("row sums + sum of squares [2000x5000]",
            lambda: tg.function(reduction, parallel=True), [rng.standard_normal((2000, 5000))], n)
    if "crossover" in only:
        crossover(n)
    if "launch" in only:
        launch(n)
    parallel.PARALLEL_MIN_ELEMENTS = default_min


if __name__ == "__main__":
    main()
