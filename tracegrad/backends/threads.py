"""The number of threads tracegrad's kernels may use (`tg.config.num_threads`)."""

import math
import os

_CGROUP_V2 = "/sys/fs/cgroup/cpu.max"
_CGROUP_V1 = ("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "/sys/fs/cgroup/cpu/cpu.cfs_period_us")


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def cgroup_cpus() -> float | None:
    """The CPU quota of this process's cgroup in cores, or None when it has none."""
    text = _read(_CGROUP_V2)
    if text is not None:
        quota, _, period = text.partition(" ")
        if quota != "max" and period:
            return int(quota) / int(period)
        return None
    quota, period = (_read(p) for p in _CGROUP_V1)
    if quota and period and int(quota) > 0:
        return int(quota) / int(period)
    return None


def available_cores() -> int:
    """The cores this process may run on: its CPU affinity, capped by a cgroup quota
    (rounded down, at least 1)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - platforms without affinity
        cores = os.cpu_count() or 1
    quota = cgroup_cpus()
    if quota is not None:
        cores = min(cores, max(1, math.floor(quota)))
    return max(1, cores)


def _from_environment() -> int:
    text = os.environ.get("TRACEGRAD_NUM_THREADS", "").strip()
    if text.isdigit() and int(text) > 0:
        return int(text)
    return available_cores()


# Threads a kernel's loops (and the BLAS calls inside it) may use; set through
# `tg.config.num_threads`.
num_threads: int = _from_environment()
