"""Parallel kernels: when a call runs its loops on several threads (docs/numba.md,
"Parallel loops").

A graph compiled with `parallel` has two kernels: the serial one, compiled at once, and a
parallel one (`prange` over the outermost loop of each nest whose iterations are
independent; a nest of one loop is split in blocks of `helpers.SUM_BLOCK` elements, whose
partial sums are combined in a fixed order), compiled the first time a call is large: its
largest tensor has at least `PARALLEL_MIN_ELEMENTS` elements and `threads.num_threads` is
above 1 (a graph of fixed shapes that are large, compiled while `num_threads` is above 1,
has the parallel one alone). Both compute the same bits for every thread count. The thread
count is set per call (`numba.set_num_threads`), so changing `tg.config.num_threads` needs
no recompile.
"""

from __future__ import annotations

import os
import threading

from tracegrad.backends import threads
from tracegrad.core.shapes import size
from tracegrad.ops.linalg import dot_general_p


def _from_environment(name: str, default: int) -> int:
    text = os.environ.get(name, "").strip()
    return int(text) if text.isdigit() else default


# Calls whose largest tensor has fewer elements run the serial kernel on the calling thread
# (measured crossover: docs/performance.md, "Parallel loops"); env TRACEGRAD_PARALLEL_MIN.
# Read when a kernel meets a shape for the first time.
PARALLEL_MIN_ELEMENTS: int = _from_environment("TRACEGRAD_PARALLEL_MIN", 300_000)
# ... unless the graph splits into rows (rows.py) and its matrix products have at least this
# many multiply-adds (W5 with 512 examples has 4.7 million); env TRACEGRAD_PARALLEL_MIN_MADDS.
PARALLEL_MIN_MADDS: int = _from_environment("TRACEGRAD_PARALLEL_MIN_MADDS", 1 << 22)


def largest(shapes) -> int:
    """The element count of the largest of `shapes` (an iterable of shape tuples; a dim
    known only inside the kernel, None, leaves its shape out)."""
    return max((n for shape in shapes if (n := size(shape)) is not None), default=0)


def is_large(shapes, products: int = 0) -> bool:
    """Whether a call of these shapes, whose products have `products` multiply-adds (counted
    for row-split kernels only), runs the parallel kernel."""
    return largest(shapes) >= PARALLEL_MIN_ELEMENTS or products >= PARALLEL_MIN_MADDS


def large_call(graph, shapes: dict, row_split: bool) -> bool:
    """Whether a call of `graph` with `shapes` (tensor id -> shape) runs its parallel kernel
    (`row_split`: a row-split kernel, whose products count too)."""
    return is_large(shapes.values(), multiply_adds(graph, shapes) if row_split else 0)


def multiply_adds(graph, shapes: dict) -> int:
    """The multiply-adds of `graph`'s matrix products (`dot_general`) for `shapes` (tensor
    id -> shape)."""
    total = 0
    for op in graph.operations:
        if op.primitive is dot_general_p:
            (lc, _), _ = op.attrs["dimension_numbers"]
            lhs = shapes[id(op.inputs[0])]
            terms = size([lhs[i] for i in lc]) or 0
            total += (size(shapes[id(op.outputs[0])]) or 0) * terms
    return total


class ParallelRun:
    """Runs the parallel kernel of a graph with `donated` outputs' buffers: the run of
    `executor()`, the graph's one parallel executor (compiled on first use, shared by the
    runs of every donated count; its entry is `with_threads`'s)."""

    def __init__(self, executor, donated: int = 0):
        self._executor = executor
        self._donated = donated
        self._run = None

    def __call__(self, *args):
        run = self._run
        if run is None:
            ex = self._executor()
            run = self._run = ex.donating(self._donated) if self._donated else ex.run
        return run(*args)


_WORKQUEUE_LOCK = threading.Lock()


def passive_omp():
    """Unless the user chose otherwise, OpenMP threads waiting for work sleep instead of
    spinning (read when libgomp loads: Numba's `omp` layer loads it when it compiles the
    first parallel kernel). Spinning threads on a busy machine made each parallel loop wait for a
    descheduled thread: 18-60 ms per launch at load 17 on 2 cores, 13-34 us when passive
    (docs/performance.md, "Parallel loops")."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def with_threads(entry):
    """`entry` (a parallel kernel) called with Numba's parallel loops on
    `threads.num_threads` threads (at most Numba's pool): the count is the calling thread's
    own setting, put back afterwards."""
    import numba

    def call(*args):
        n = min(threads.num_threads, numba.config.NUMBA_NUM_THREADS)
        before = numba.get_num_threads()  # launches the threading layer the first time
        numba.set_num_threads(n)
        try:
            if numba.threading_layer() == "workqueue":  # not safe for concurrent launches
                with _WORKQUEUE_LOCK:
                    return entry(*args)
            return entry(*args)
        finally:
            numba.set_num_threads(before)
    return call
