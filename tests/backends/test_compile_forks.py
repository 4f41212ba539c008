"""In a compile child, large functions a module calls by `_direct` are compiled by processes
forked for them while their caller compiles (forks.py): the kernel computes the same values,
comes back through the cache, and a callee whose process fails or is killed is compiled by
the child instead."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tracegrad import backends

nb = pytest.importorskip("tracegrad.backends.numba")
from tests.backends.test_compile_child import in_child  # noqa: E402, F401 (a fixture)
from tracegrad.backends.numba import cache, child, forks, fusion, llvmgen, split  # noqa: E402

pytestmark = pytest.mark.skipif(not child.available(), reason="child compiles need Linux")


@pytest.fixture
def forking(in_child, monkeypatch):
    """`in_child`, and every `_direct` callee forked (two cores, whatever the machine has),
    the loop nests of large steps outlined into callees too, none translated to LLVM IR
    (llvmgen.py: those are not forked)."""
    monkeypatch.setattr(forks, "MIN_LINES", 1)
    monkeypatch.setattr(forks, "_cores", lambda: 2)
    monkeypatch.setattr(fusion, "OUTLINE_OPS", 0)
    monkeypatch.setattr(llvmgen, "ENABLED", False)  # every callee compiled by Numba


def rnn_loss(w, xs):
    def step(h, x):
        h = tnp.tanh(h * w[0] + x * w[1] + w[2])
        return h, tnp.sum(tnp.exp(-h * h)) + tnp.sum(tnp.sin(h) * x)
    _, ys = tg.scan(step, tnp.zeros(w.shape[1]), xs)
    return tnp.sum(ys)


RNG = np.random.default_rng(7)
W = RNG.standard_normal((3, 6)) * 0.5
XS = RNG.standard_normal((9, 6))
LOSS = tg.value_and_grad(rnn_loss)


def _want():
    value, grad = tg.function(LOSS, backend="numpy")(W, XS)
    return float(value), np.asarray(grad)


def _check(out):
    value, grad = _want()
    assert float(out[0]) == pytest.approx(value, rel=1e-13)
    np.testing.assert_allclose(np.asarray(out[1]), grad, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("parts", [False, True])
def test_callees_compile_in_processes_of_their_own_and_come_back_through_the_cache(
        forking, monkeypatch, parts):
    if parts:  # the entry cut into parts, whose code calls the steps' (forked before them)
        monkeypatch.setattr(split, "SPLIT_LINES", 12)
        monkeypatch.setattr(split, "SPLIT_ABOVE", 0)
        monkeypatch.setattr(split, "SPLIT_LOOPS", 0)
    # a process for each large callee, however many still run (else the next compiles in
    # the child, and how many do depends on the machine's load)
    monkeypatch.setattr(forks, "_cores", lambda: 64)
    monkeypatch.setattr(forks, "MAX_PROCESSES", 64)
    before = nb.cache_info()
    f = tg.function(LOSS, backend="numba")
    _check(f(W, XS))
    after = nb.cache_info()
    assert after["compiled_in_child"] - before["compiled_in_child"] == 1
    # every function the module calls by `_direct` (the parts, the forward and backward
    # steps, the loop nests outlined from them) came from a forked process: the large
    # ones forked, those they call typed in the child and compiled by their caller's
    source = tg.compiled_source(f.get_concrete_function(W, XS).graph)
    callees = forks.direct_callees(source)
    assert len(callees) >= 3 + 2 * parts, source
    assert after["callees_compiled_apart"] - before["callees_compiled_apart"] == len(callees)
    nb.clear_memory_cache()
    _check(tg.function(LOSS, backend="numba")(W, XS))
    assert nb.cache_info()["disk_hits"] - after["disk_hits"] == 1
    assert nb.cache_info()["compiled"] == after["compiled"]


@pytest.mark.parametrize("how", ["fails", "is killed"])
def test_a_callee_whose_process_fails_is_compiled_by_the_child(forking, monkeypatch, how):
    def fail(*args):
        if how == "fails":
            os._exit(1)
        os.kill(os.getpid(), signal.SIGKILL)

    monkeypatch.setattr(forks, "_compile_and_exit", fail)
    before = nb.cache_info()
    _check(tg.function(LOSS, backend="numba")(W, XS))
    after = nb.cache_info()
    assert after["compiled_in_child"] - before["compiled_in_child"] == 1
    assert after["callees_compiled_apart"] == before["callees_compiled_apart"]


@pytest.mark.parametrize("why", ["one core", "a memory limit"])
def test_nothing_is_forked_on_one_core_or_under_a_memory_limit(forking, monkeypatch, why):
    if why == "one core":
        monkeypatch.setattr(forks, "_cores", lambda: 1)
    else:  # the memory one compile may add: each process would have it
        monkeypatch.setattr(backends, "compile_memory_limit", 8 << 30)
    before = nb.cache_info()
    _check(tg.function(LOSS, backend="numba")(W, XS))
    after = nb.cache_info()
    assert after["compiled_in_child"] - before["compiled_in_child"] == 1
    assert after["callees_compiled_apart"] == before["callees_compiled_apart"]


def test_the_return_type_typed_alone_is_the_compiled_ones():
    from numba import njit, types

    @njit(cache=False)
    def f(a, n):
        s = a[:n].sum()
        return (s, a[1:], n * 2, s > 0.0)

    argtys = (types.float64[::1], types.int64)
    typed = forks._type_only(f, argtys)
    f.compile(argtys)
    assert typed == f.overloads[argtys].signature.return_type
    assert isinstance(typed, types.BaseTuple) and len(typed) == 4


def test_a_loops_step_is_forked_at_once_its_return_type_declared(forking, monkeypatch,
                                                                  tmp_path):
    # a step returns its carries and the iteration count: its caller knows the type, so
    # the step's process starts when the call is typed, and the step is typed only there
    log = tmp_path / "typed.txt"
    real = forks._type_only

    def logged(dispatcher, argtys):
        with open(log, "a") as f:
            f.write(dispatcher.py_func.__name__ + "\n")
        return real(dispatcher, argtys)

    monkeypatch.setattr(forks, "_type_only", logged)
    before = nb.cache_info()
    _check(tg.function(LOSS, backend="numba")(W, XS))
    after = nb.cache_info()
    assert after["callees_compiled_apart"] - before["callees_compiled_apart"] >= 2
    typed = log.read_text().split() if log.exists() else []
    assert not [name for name in typed if name.startswith("while_step")], typed


@pytest.fixture
def translating(in_child, monkeypatch):
    """`in_child`, a process for every function translated to LLVM IR (llvmgen.py), however
    many still run: the steps, their loop nests (outlined) and the entry (one part)."""
    monkeypatch.setattr(forks, "_cores", lambda: 64)
    monkeypatch.setattr(forks, "MAX_PROCESSES", 64)
    monkeypatch.setattr(fusion, "OUTLINE_OPS", 0)
    monkeypatch.setattr(split, "ENTRY_LINES", 1)
    monkeypatch.setattr(llvmgen, "ENABLED", True)
    monkeypatch.setattr(llvmgen, "FORK_CHARS", 1)


def _translated_entries() -> list:
    root = os.path.join(os.environ["TRACEGRAD_CACHE_DIR"], "numba")
    return [name for name in os.listdir(root) if name.endswith(".tgll")]


def test_translated_functions_compile_in_processes_of_their_own(translating):
    before = nb.cache_info()
    _check(tg.function(LOSS, backend="numba")(W, XS))
    after = nb.cache_info()
    assert after["compiled_in_child"] - before["compiled_in_child"] == 1
    entries = _translated_entries()
    assert len(entries) >= 4, entries  # two steps, a loop nest, the entry's part
    assert any("kernel_part0" in name for name in entries), entries
    assert after["callees_compiled_apart"] - before["callees_compiled_apart"] == len(entries)
    nb.clear_memory_cache()  # and they load back from the cache, callees first
    _check(tg.function(LOSS, backend="numba")(W, XS))
    assert nb.cache_info()["compiled"] == after["compiled"]


@pytest.mark.parametrize("how", ["fails", "is killed"])
def test_a_translated_function_whose_process_fails_is_compiled_by_the_child(
        translating, monkeypatch, how):
    def fail(*args):
        if how == "fails":
            raise RuntimeError("no machine code")
        os.kill(os.getpid(), signal.SIGKILL)

    monkeypatch.setattr(llvmgen, "_object_code", fail)
    before = nb.cache_info()
    _check(tg.function(LOSS, backend="numba")(W, XS))
    after = nb.cache_info()
    assert after["compiled_in_child"] - before["compiled_in_child"] == 1, str(after)
    assert after["compiled_in_child"] - before["compiled_in_child"] == 1
    assert after["callees_compiled_apart"] == before["callees_compiled_apart"]
    assert len(_translated_entries()) >= 4  # saved by the child


def test_work_waits_for_a_free_core_the_largest_first(monkeypatch, tmp_path):
    # one core to spare: "a" starts at once; "b" and "c" wait, and when "a" ends the larger
    # one ("c") takes its core; "b", waited for before any core freed again, is done here
    # (its work, then its load)
    monkeypatch.setitem(forks._STATE, "slots", 1)
    loaded = []

    def job(name):
        def work():
            (tmp_path / name).write_text(str(os.getpid()))

        def load():
            loaded.append((name, (tmp_path / name).exists()))
            return (tmp_path / name).exists()
        return work, load

    for name, size in (("a", 1), ("b", 20), ("c", 30)):
        assert forks.start(name, *job(name), size)
    assert forks._PENDING["a"].pid is not None
    assert forks._PENDING["b"].work is not None and forks._PENDING["c"].work is not None
    forks._wait("a")
    assert forks._PENDING["c"].pid is not None and forks._PENDING["b"].work is not None
    forks._wait("b")
    forks._wait("c")
    assert loaded == [("a", True), ("b", True), ("c", True)]
    assert int((tmp_path / "b").read_text()) == os.getpid()
    assert int((tmp_path / "c").read_text()) != os.getpid()
    assert not forks._PENDING


def test_a_numba_callee_is_loaded_after_the_translated_functions_started_before_it(
        monkeypatch):
    # a Numba-compiled callee's machine code is linked as Numba's cache loads it, so what
    # it may call (a translated function whose process started earlier) is loaded first
    waited = []
    monkeypatch.setattr(forks, "_wait_one", lambda name: waited.append(name))
    monkeypatch.setattr(forks, "_PENDING", {
        "translated": forks._Pending(None, None, None, None, None, (), lambda: True),
        "numba": forks._Pending(None, None, "dispatcher", (), None, ()),
        "later": forks._Pending(None, None, "dispatcher", (), None, ())})
    forks._wait("numba")
    assert waited == ["translated", "numba"]
    waited.clear()
    forks._wait("translated")  # its own loading loads what it calls
    assert waited == ["translated"]
