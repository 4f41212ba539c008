"""Parallel kernels: each row at 1 thread (the serial kernel) and at N threads (the parallel
kernel), their ratio, and the first call of each (docs/numba.md, "Parallel loops").

    python benchmarks/parallel_scaling.py [--threads N] [--only w2,w5,w5sizes,crossover,...]

- W2: `value_and_grad(lambda x: sum(tanh(x) * sin(x) + x ** 2))`, x of 10**7 float64;
- W5: per-example Jacobians of `tanh(W2 @ tanh(W1 @ x_i))`, x [1024, 16], hidden 32
  (BLAS keeps its own thread setting: OPENBLAS_NUM_THREADS et al. as the environment has them);
- elementwise: `sin(x) * cos(x) + exp(-x*x) * 0.5 - tanh(0.3 x) / (1 + x*x)`, 10**7;
- reduction: `sum(exp(m / 2), axis=1)` and `sum(m * m)` of m [2000, 5000];
- crossover: the elementwise row from 10**3 to 10**6 elements, to place
  `parallel.PARALLEL_MIN_ELEMENTS` (TRACEGRAD_PARALLEL_MIN);
- launch: the per-call cost of a parallel kernel of 4 elements over the serial one, and of
  two calls of a nogil kernel handed to a 2-thread Python pool.

- w5sizes: W5 from 64 to 4096 examples, to place the crossover of its row-split kernel.

Each row compiles its function without `parallel` (the serial kernel) and with it at N
threads (large fixed shapes: the parallel kernel alone), and times, taking turns in each of
7 rounds, the serial kernel, the parallel one at N threads and the parallel one at 1
thread (what splitting the loops costs a thread): the medians of the wall time and of the
process's CPU time (all its threads) per call, each of 15 calls after a warm-up, and the
CPU time of the parallel kernel's busiest thread per call (/proc/self/task). A scaling
near N with a CPU ratio near 1 means the threads split the work without waste; on a
loaded machine the wall time also holds the waits for a core, which the CPU times do not:
there the busiest thread's CPU time against the serial kernel's is what N cores of its own
would give at best.
Each row prints the load average (`os.getloadavg`). The kernels start from an empty cache
(a temporary directory), so "first call" is the compile of each kernel. Not a test: it
asserts only that the parallel kernel gives the same bits at N threads and at 1, and
prints whether they are the serial kernel's (a row-split kernel's may not be:
docs/numba.md, "Parallel loops").
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


def first_call(n: int, fn, args):
    """(seconds, result) of the first call of `fn(*args)` at `n` threads (its compile)."""
    threads.num_threads = n
    start = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - start, out


def thread_ticks() -> dict:
    """CPU time (user + system, in clock ticks) of each of this process's threads."""
    ticks = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks[tid] = int(fields[11]) + int(fields[12])
    return ticks


def thread_turns(runs, args, rounds: int, calls: int = 15):
    """Per (fn, threads) of `runs`: the median over `rounds` of the wall and the process CPU
    time (every thread's) per call, and the CPU time of its busiest thread per call over
    all rounds (clock ticks of /proc/self/task), the runs taking turns in each round."""
    spans = [[] for _ in runs]
    busy = [{} for _ in runs]
    for _ in range(rounds):
        for k, (fn, n) in enumerate(runs):
            threads.num_threads = n
            fn(*args)
            before = thread_ticks()
            wall, cpu_ = time.perf_counter(), time.process_time()
            for _ in range(calls):
                fn(*args)
            spans[k].append(((time.perf_counter() - wall) / calls,
                             (time.process_time() - cpu_) / calls))
            for tid, t in thread_ticks().items():
                busy[k][tid] = busy[k].get(tid, 0) + t - before.get(tid, 0)
    tick = os.sysconf("SC_CLK_TCK")
    return [(*(float(np.median([s[i] for s in ss])) for i in (0, 1)),
             max(b.values(), default=0) / tick / (rounds * calls))
            for ss, b in zip(spans, busy, strict=True)]


def same_bits(a, b) -> bool:
    a = a if isinstance(a, (list, tuple)) else [a]
    b = b if isinstance(b, (list, tuple)) else [b]
    return all(np.asarray(x).tobytes() == np.asarray(y).tobytes()
               for x, y in zip(a, b, strict=True))


def row(label: str, fn, args, n: int, rounds: int = 7):
    """`fn` compiled without `parallel` (the serial kernel) and with it at `n` threads (large
    fixed shapes: the parallel kernel alone), timed in turns: serial, parallel at `n`
    threads, parallel at 1 (what splitting the loops costs one thread). Wall and CPU (all
    threads) per call, medians over `rounds`."""
    threads.num_threads = 1
    serial = tg.function(fn, parallel=False)
    one = first_call(1, serial, args)
    threads.num_threads = n
    f = tg.function(fn, parallel=True)
    many = first_call(n, f, args)
    alone = first_call(1, f, args)
    assert same_bits(many[1], alone[1]), label  # every thread count: the same bits
    (w1, c1, _), (wn, cn, bn), (wa, ca, _) = thread_turns([(serial, 1), (f, n), (f, 1)], args,
                                                           rounds)
    print(f"{label:40s} serial {us(w1)} (cpu {us(c1)}) | {n} threads {us(wn)} "
          f"(cpu {us(cn)}, busiest thread {us(bn)}) | scaling {w1 / wn:4.2f}x, "
          f"cpu {cn / c1:4.2f}x | parallel kernel "
          f"on 1 thread {w1 / wa:4.2f}x (cpu {us(ca)}) | bits = serial's: "
          f"{'yes' if same_bits(one[1], many[1]) else 'no'} | first call {one[0]:.2f} s / "
          f"{many[0]:.2f} s | {load()}", flush=True)


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
        row(f"crossover: elementwise [{size}]", elementwise, [rng.standard_normal(size)], n)


def w5_sizes(n: int):
    rng = np.random.default_rng(2)
    w1, w2 = rng.standard_normal((32, 16)) / 4, rng.standard_normal((16, 32)) / 6
    for batch in (64, 128, 256, 512, 1024, 4096):
        parallel.PARALLEL_MIN_ELEMENTS = 0
        row(f"w5sizes: [{batch},16,16]", w5, [w1, w2, rng.standard_normal((batch, 16))], n)


def launch(n: int):
    from concurrent.futures import ThreadPoolExecutor

    parallel.PARALLEL_MIN_ELEMENTS = 0
    def tiny(a):
        return a * 2.0 + 1.0

    row("launch: a * 2 + 1 [4]", tiny, [np.ones(4)], n)
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
    p.add_argument("--only", default="w2,w5,w5sizes,elementwise,reduction,crossover,launch")
    a = p.parse_args(argv)
    import numba

    only = set(a.only.split(","))
    n = a.threads
    print(f"cpu: {cpu()}; {threads.available_cores()} cores available; threads {n}; "
          f"numba {numba.__version__}, threading layer after the first parallel call below")
    rng = np.random.default_rng(0)
    default_min = parallel.PARALLEL_MIN_ELEMENTS
    if "w2" in only:
        row("W2 value_and_grad [10^7]", tg.value_and_grad(w2), [rng.standard_normal(10**7)], n)
        print(f"threading layer: {numba.threading_layer()}")
    if "w5" in only:
        args = [rng.standard_normal((32, 16)) / 4, rng.standard_normal((16, 32)) / 6,
                rng.standard_normal((1024, 16))]
        row("W5 per-example jacobians [1024,16,16]", w5, args, n)
    if "elementwise" in only:
        row("elementwise chain [10^7]", elementwise, [rng.standard_normal(10**7)], n)
    if "reduction" in only:
        row("row sums + sum of squares [2000x5000]", reduction,
            [rng.standard_normal((2000, 5000))], n)
    if "w5sizes" in only:
        w5_sizes(n)
    if "crossover" in only:
        crossover(n)
    if "launch" in only:
        launch(n)
    parallel.PARALLEL_MIN_ELEMENTS = default_min


if __name__ == "__main__":
    main()
