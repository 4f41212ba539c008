"""tg.config.num_threads: its default follows affinity and cgroup quotas."""

import os

import pytest

import tracegrad as tg
from tracegrad.backends import threads


def _affinity() -> int:
    """The cores this process may run on, as threads.py reads them."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else \
        os.cpu_count() or 1


def test_default_is_the_available_cores():
    assert threads.available_cores() <= _affinity()
    assert threads.available_cores() >= 1


def test_cgroup_quota_caps_the_cores(tmp_path, monkeypatch):
    cpu_max = tmp_path / "cpu.max"
    cpu_max.write_text("150000 100000\n")
    monkeypatch.setattr(threads, "_CGROUP_V2", str(cpu_max))
    assert threads.cgroup_cpus() == 1.5
    assert threads.available_cores() == 1
    cpu_max.write_text("max 100000\n")
    assert threads.cgroup_cpus() is None
    assert threads.available_cores() == _affinity()


def test_cgroup_v1_quota(tmp_path, monkeypatch):
    quota, period = tmp_path / "q", tmp_path / "p"
    quota.write_text("300000")
    period.write_text("100000")
    monkeypatch.setattr(threads, "_CGROUP_V2", str(tmp_path / "absent"))
    monkeypatch.setattr(threads, "_CGROUP_V1", (str(quota), str(period)))
    assert threads.cgroup_cpus() == 3.0
    quota.write_text("-1")
    assert threads.cgroup_cpus() is None


def test_environment_variable(monkeypatch):
    monkeypatch.setenv("TRACEGRAD_NUM_THREADS", "3")
    assert threads._from_environment() == 3
    monkeypatch.setenv("TRACEGRAD_NUM_THREADS", "zero")
    assert threads._from_environment() == threads.available_cores()


def test_config_setter_checks_its_value():
    old = tg.config.num_threads
    try:
        tg.config.num_threads = 1
        assert threads.num_threads == 1
        for bad in (0, -2, 1.5, True, "2"):
            with pytest.raises(tg.errors.InvalidArgumentError, match="num_threads"):
                tg.config.num_threads = bad
    finally:
        tg.config.num_threads = old
