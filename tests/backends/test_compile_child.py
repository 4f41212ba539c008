"""Large compiles run in a forked child process (child.py): the kernel comes back through
the cache; a child that runs out of memory, is killed, crashes or raises is reported and the
function runs on the numpy backend; a memory limit is enforced; a program that ends does not
leave a compile running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tracegrad import backends
from tracegrad.errors import InvalidArgumentError

nb = pytest.importorskip("tracegrad.backends.numba")
from tracegrad.backends.numba import cache, child  # noqa: E402

pytestmark = pytest.mark.skipif(not child.available(), reason="child compiles need Linux")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PARENT = os.getpid()


@pytest.fixture
def in_child(tmp_path, monkeypatch):
    """Every compile in a child, a fresh cache directory, synchronous compiles."""
    monkeypatch.setenv("TRACEGRAD_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(child, "ABOVE_LINES", 1)
    monkeypatch.setattr(tg.config, "background_compile", False)
    nb.clear_memory_cache()
    yield
    nb.clear_memory_cache()


def _model(x, w):
    return tnp.sum(tnp.tanh(x @ w) * tnp.exp(-x[:, :1]), axis=0)


X = np.linspace(-1.0, 1.0, 12).reshape(4, 3)
W = np.arange(9.0).reshape(3, 3) / 10.0
WANT = np.sum(np.tanh(X @ W) * np.exp(-X[:, :1]), axis=0)


def _in_the_child(action):
    """A stand-in for `cache._load_from_disk` that runs `action()` in the child (the
    parent's own load, after the child, runs the real one)."""
    real = cache._load_from_disk

    def load(*args):
        if os.getpid() != PARENT:
            action()
        return real(*args)
    return load


def _run_with_warnings(f, *args):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = f(*args)
    return out, [w for w in caught if issubclass(w.category, RuntimeWarning)]


def test_a_large_kernel_compiles_in_a_child_and_comes_back_through_the_cache(in_child):
    before = nb.cache_info()
    f = tg.function(_model, backend="numba")
    np.testing.assert_allclose(f(X, W), WANT, rtol=1e-13)
    after = nb.cache_info()
    assert after["compiled_in_child"] - before["compiled_in_child"] == 1
    assert after["compiled"] - before["compiled"] == 1
    assert after["disk_hits"] == before["disk_hits"]
    # a new function of the same code finds the child's machine code on disk
    nb.clear_memory_cache()
    g = tg.function(_model, backend="numba")
    np.testing.assert_allclose(g(X, W), WANT, rtol=1e-13)
    assert nb.cache_info()["disk_hits"] - after["disk_hits"] == 1
    assert nb.cache_info()["compiled"] == after["compiled"]


def test_a_small_kernel_compiles_in_the_process(in_child, monkeypatch):
    monkeypatch.setattr(child, "ABOVE_LINES", 10**6)
    before = nb.cache_info()
    np.testing.assert_allclose(tg.function(_model, backend="numba")(X, W), WANT, rtol=1e-13)
    after = nb.cache_info()
    assert after["compiled"] - before["compiled"] == 1
    assert after["compiled_in_child"] == before["compiled_in_child"]


def _fails_like_numpy(f, *args):
    """Run `f`, which must fail to compile: one RuntimeWarning, the numpy backend's value."""
    before = nb.cache_info()
    out, caught = _run_with_warnings(f, *args)
    np.testing.assert_array_equal(out, tg.function(_model, backend="numpy")(*args))
    assert nb.cache_info()["compiled"] == before["compiled"]
    assert len(caught) == 1, [str(w.message) for w in caught]
    return str(caught[0].message)


def test_a_compile_over_the_memory_limit_is_reported_as_such(in_child, monkeypatch):
    # The compile takes 256 MiB more (a deterministic stand-in: how much more a real one
    # takes depends on the memory the process had freed before the fork).
    monkeypatch.setattr(cache, "_load_from_disk", _in_the_child(lambda: bytearray(256 << 20)))
    monkeypatch.setattr(child, "ABOVE_LINES", 10**6)  # the limit alone sends it to a child
    monkeypatch.setattr(backends, "compile_memory_limit", 64 << 20)
    message = _fails_like_numpy(tg.function(_model, backend="numba"), X, W)
    assert "ran out of memory" in message and "numpy backend" in message, message
    assert "corrupt" not in message and message.count("the numba compile of") == 1, message
    # without the limit the same compile succeeds, in the process
    monkeypatch.setattr(backends, "compile_memory_limit", None)
    before = nb.cache_info()
    np.testing.assert_allclose(tg.function(_model, backend="numba")(X, W), WANT, rtol=1e-13)
    assert nb.cache_info()["compiled"] == before["compiled"] + 1


def test_llvms_out_of_memory_abort_is_reported_as_such(in_child, monkeypatch, capfd):
    def llvm_runs_out():  # what LLVM's allocation-failure handler does
        os.write(2, b"LLVM ERROR: out of memory\nAllocation failed\n")
        os.abort()

    monkeypatch.setattr(cache, "_load_from_disk", _in_the_child(llvm_runs_out))
    message = _fails_like_numpy(tg.function(_model, backend="numba"), X, W)
    assert "ran out of memory" in message and "LLVM" in message and "SIGABRT" in message
    assert "Numba failed" not in message and "bug" not in message, message
    assert "LLVM ERROR" not in capfd.readouterr().err  # the warning says it once


def test_a_compile_killed_by_the_system_is_reported_as_out_of_memory(in_child, monkeypatch):
    monkeypatch.setattr(cache, "_load_from_disk",
                        _in_the_child(lambda: os.kill(os.getpid(), signal.SIGKILL)))
    message = _fails_like_numpy(tg.function(_model, backend="numba"), X, W)
    assert "ran out of memory" in message and "SIGKILL" in message, message


def test_a_crashed_compile_raises_a_synchronous_call(in_child, monkeypatch):
    # as any compile that fails for another reason than memory (a tracegrad bug)
    monkeypatch.setattr(cache, "_load_from_disk",
                        _in_the_child(lambda: os.kill(os.getpid(), signal.SIGSEGV)))
    with pytest.raises(RuntimeError, match=r"crashed \(SIGSEGV\)") as info:
        tg.function(_model, backend="numba")(X, W)
    assert "out of memory" not in str(info.value)


def test_an_exception_in_a_background_childs_compile_warns(in_child, monkeypatch):
    def fails():
        raise RuntimeError("tracegrad: the generated code did not type (boom)")

    monkeypatch.setattr(cache, "_load_from_disk", _in_the_child(fails))
    monkeypatch.setattr(tg.config, "background_compile", True)
    monkeypatch.setattr(tg.config, "defer_compile_above", None)
    f = tg.function(_model, backend="numba")
    want = tg.function(_model, backend="numpy")(X, W)
    np.testing.assert_array_equal(f(X, W), want)  # the interim, the compile starts after
    tg.wait_for_compiles()
    out, caught = _run_with_warnings(f, X, W)  # installs the failed compile's fallback
    np.testing.assert_array_equal(out, want)
    assert len(caught) == 1 and "could not compile" in str(caught[0].message)
    assert str(caught[0].message).count("(boom)") == 1, str(caught[0].message)


def test_the_childs_warnings_are_issued_in_the_parent(in_child, monkeypatch):
    def warns():
        warnings.warn("said while compiling", UserWarning, stacklevel=1)

    monkeypatch.setattr(cache, "_load_from_disk", _in_the_child(warns))
    before = nb.cache_info()["compiled_in_child"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = tg.function(_model, backend="numba")(X, W)
    np.testing.assert_allclose(out, WANT, rtol=1e-13)
    assert nb.cache_info()["compiled_in_child"] == before + 1
    assert [str(w.message) for w in caught if w.category is UserWarning] == \
        ["said while compiling"]


PROGRAM = """
import os, sys, time
import numpy as np
import tracegrad as tg, tracegrad.numpy as tnp
from tracegrad.backends.numba import child

f = tg.function(lambda x: tnp.sum(tnp.tanh(x) * tnp.exp(-x)), backend="numba")
print(f(np.linspace(0.0, 1.0, 7)))  # the numpy interim; the kernel compiles after the call
deadline = time.time() + 120
while not child._RUNNING and time.time() < deadline:
    time.sleep(0.005)
print(*child._RUNNING, flush=True)
"""


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")  # a zombie has ended
    except FileNotFoundError:
        return True


@pytest.mark.parametrize("ending", ["", "os._exit(0)"])
def test_a_program_that_ends_leaves_no_compile_running(tmp_path, ending):
    env = dict(os.environ, PYTHONPATH=ROOT, TRACEGRAD_CACHE_DIR=str(tmp_path),
               TRACEGRAD_COMPILE_IN_CHILD="1", TRACEGRAD_BACKGROUND_COMPILE="1")
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(PROGRAM) + ending], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    value, pids = out.stdout.strip().splitlines()
    want = np.sum(np.tanh(np.linspace(0.0, 1.0, 7)) * np.exp(-np.linspace(0.0, 1.0, 7)))
    assert float(value) == pytest.approx(want, rel=1e-14)
    (pid,) = map(int, pids.split())  # a compile was running when the program ended
    deadline = time.time() + 10
    while not _gone(pid) and time.time() < deadline:
        time.sleep(0.01)
    assert _gone(pid), f"the compile process {pid} outlived its program"
    assert "Traceback" not in out.stderr and "Warning" not in out.stderr, out.stderr


@pytest.mark.parametrize(("given", "size"), [
    (None, None), ("", None), ("none", None), (1 << 30, 1 << 30), ("1000000", 1000000),
    ("512M", 512 << 20), ("8G", 8 << 30), ("8gb", 8 << 30), ("1.5T", int(1.5 * (1 << 40))),
    ("64k", 64 << 10)])
def test_memory_sizes(given, size):
    assert backends.parse_bytes(given) == size


@pytest.mark.parametrize("given", ["x", "-1G", "0", 0, True, 1.5, "G"])
def test_a_memory_limit_that_is_not_one_is_refused(given, monkeypatch):
    monkeypatch.setattr(backends, "compile_memory_limit", None)
    with pytest.raises(InvalidArgumentError, match="compile_memory_limit"):
        tg.config.compile_memory_limit = given
    assert tg.config.compile_memory_limit is None
    tg.config.compile_memory_limit = "2G"
    assert backends.compile_memory_limit == 2 << 30


@pytest.mark.parametrize("background", [False, True])
def test_a_background_compiles_child_yields_the_cores(in_child, monkeypatch, tmp_path,
                                                      background):
    """The child of a background compile runs `child.NICE` below its parent's priority, so
    the program it compiles for (on the numpy backend meanwhile) keeps the cores; a
    synchronous compile's child, which the program waits for, does not."""
    seen = tmp_path / "nice"
    monkeypatch.setattr(cache, "_load_from_disk",
                        _in_the_child(lambda: seen.write_text(str(os.nice(0)))))
    monkeypatch.setattr(tg.config, "background_compile", background)
    monkeypatch.setattr(tg.config, "defer_compile_above", None)
    f = tg.function(_model, backend="numba")
    np.testing.assert_allclose(f(X, W), WANT, rtol=1e-13)
    tg.wait_for_compiles()
    np.testing.assert_allclose(f(X, W), WANT, rtol=1e-13)
    assert int(seen.read_text()) == min(os.nice(0) + (child.NICE if background else 0), 19)
