"""What a benchmark script prints about the machine, and its simplest timer. Imports nothing
that limits or starts threads (parallel_scaling.py must not load one_thread.py)."""

from __future__ import annotations

import os
import time

import numpy as np


def cpu() -> str:
    """The CPU model and its x86 vector-unit flags (Linux's /proc/cpuinfo), and the ISA the
    code is generated for (TRACEGRAD_BENCH_ISA, see one_thread.py)."""
    model, flags = "?", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name":
                    model = value.strip()
                elif key.strip() == "flags":
                    flags = set(value.split())
                    break
    except OSError:
        pass
    vec = [f for f in ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512dq", "avx512vl")
           if f in flags]
    isa = os.environ.get("TRACEGRAD_BENCH_ISA", "").lower()
    code = f"; code: {isa} only (TRACEGRAD_BENCH_ISA)" if isa else "; code: the host's"
    return f"{model}; {os.cpu_count()} CPUs; flags: {' '.join(vec) or '?'}{code}"


def best_and_median(fn, calls: int) -> tuple[float, float]:
    """(best, median) seconds of `calls` calls of `fn` after a warm-up call."""
    fn()
    spans = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        spans.append(time.perf_counter() - start)
    return min(spans), float(np.median(spans))


def interleaved(calls: dict, rounds: int, seconds: float = 0.02) -> dict:
    """`{name: (CPU seconds, wall seconds)}` per call of each callable in `calls`: medians
    over `rounds` rounds in which every callable, in turn, runs about `seconds` of calls.
    The CPU time is the process's (all its threads), which a loaded machine's other jobs do
    not inflate as they do wall time."""
    counts = {}
    for name, fn in calls.items():
        fn()
        start = time.perf_counter()
        fn()
        counts[name] = max(1, int(seconds / max(time.perf_counter() - start, 1e-6)))
    cpu_s: dict = {name: [] for name in calls}
    wall_s: dict = {name: [] for name in calls}
    for _ in range(rounds):
        for name, fn in calls.items():
            c, w = time.process_time(), time.perf_counter()
            for _ in range(counts[name]):
                fn()
            cpu_s[name].append((time.process_time() - c) / counts[name])
            wall_s[name].append((time.perf_counter() - w) / counts[name])
    return {name: (float(np.median(cpu_s[name])), float(np.median(wall_s[name])))
            for name in calls}
