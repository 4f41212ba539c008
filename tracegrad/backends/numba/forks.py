"""Large callees compiled by processes of their own, beside their caller's compile.

A function that calls another by `_direct` (helpers.py) needs of it only its return type
while it is typed and lowered, and its machine code only when its own is linked. In a
compile child (child.py) on a machine with more than one core, a callee of at least
`MIN_LINES` lines is therefore only typed where it is called (Numba's untyped passes and
type inference: no lowering, no LLVM), and a process forked for it compiles it into the
kernel cache meanwhile. A loop's step is not even typed there: it returns its carries and
the iteration count, whose types its caller knows (`_direct_step`, helpers.py), so its
process starts as soon as its call is typed, and compiles the step's own callees, which
the caller then loads from the cache. Just before a caller's machine code is linked, the
processes of the callees it calls are waited for and those callees loaded from the cache;
a callee whose process failed is compiled there instead, so its error is reported as usual. A
scan's forward and backward steps, and the parts of a split entry (split.py), compile
side by side, each on a core.

The processes end when their compile does: each holds the write end of a pipe whose read
end every later process inherits, so any of them can wait for it (the read ends at the
end of the writer's life). A forked process forks no further; at most as many run at once
as the process may use cores (and `MAX_PROCESSES`).
"""

from __future__ import annotations

import contextlib
import inspect
import os
import re
import select
import signal
import sys

from tracegrad import backends
from tracegrad.backends.numba import child

# The fewest lines of a callee that is compiled by a process of its own (env
# TRACEGRAD_COMPILE_FORK_LINES; 0: none is). A callee forked is typed twice and its
# machine code loaded back; the LSTM l=4 gradient's first call took as long with its
# 20-80-line loop nests forked (a bound of 40) as without (150: docs/performance.md).
MIN_LINES = int(os.environ.get("TRACEGRAD_COMPILE_FORK_LINES", "150"))


# The most forked processes compiling at once (each holds its own copy of the memory its
# compile changes: one compiling an LSTM l=4 step peaked at 299 MB resident).
MAX_PROCESSES = 8


class _Pending:
    __slots__ = ("pid", "read", "dispatcher", "argtys", "restype", "inner", "mine", "load",
                 "work", "size")

    def __init__(self, pid, read, dispatcher, argtys, restype, inner, load=None):
        self.pid, self.read = pid, read
        self.dispatcher, self.argtys, self.restype = dispatcher, argtys, restype
        self.inner = inner  # (dispatcher, argtys) of the callees it calls by `_direct`, in
        # an order that puts a callee before its callers: its process compiles them too
        # (None: not typed here; its process compiles its callees as it meets them)
        self.mine = True  # forked by this process (so it reaps it)
        self.load = load  # of a translated function (llvmgen.py): loads what it compiled
        self.work = None  # what a process is to do once a core is free (none started yet)
        self.size = 0  # of that work: the largest starts first


_PENDING: dict = {}  # symbol -> _Pending, of the callees compiled elsewhere
STATS = {"compiled": 0}  # functions whose machine code came from a forked process
# `slots`: how many forked processes may compile at once (0: none); `typing`: the depth of
# `_type_only` calls running; `inner`: for each callee being typed to be forked, the
# callees typed inside it
_STATE = {"slots": 0, "typing": 0, "inner": []}


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def enable() -> None:
    """Let this process (a compile child) fork processes for large callees: not on one
    core, nor under `tg.config.compile_memory_limit` (the memory one compile may add: each
    process would have it)."""
    cores = _cores()
    if MIN_LINES <= 0 or cores < 2 or backends.compile_memory_limit is not None:
        return
    _STATE["slots"] = min(cores, MAX_PROCESSES)
    from numba.core import codegen

    from tracegrad.backends.numba import llvmgen

    llvmgen.use_processes(start, _wait)

    cls = codegen.CPUCodeLibrary
    if not getattr(cls._finalize_final_module, "_tg_waits", False):
        original = cls._finalize_final_module

        def _finalize_final_module(self):  # before the module goes to the JIT engine
            if _PENDING:
                _collect(self._final_module)
            return original(self)

        _finalize_final_module._tg_waits = True
        cls._finalize_final_module = _finalize_final_module


def typed_elsewhere(dispatcher, argtys: tuple, declared=None):
    """`(return type, symbol)` of `dispatcher`'s function for `argtys` when its machine
    code comes from another process (forked now, or earlier), else None (compile it
    here). `declared`: its return type, when its caller knows it (a loop's step): then it
    is not typed here, and its process starts at once."""
    if not _PENDING and not _STATE["slots"]:
        return None
    from tracegrad.backends.numba import helpers

    symbol = sys.modules[helpers.MODULE]._direct_symbol(dispatcher, argtys)
    found = _PENDING.get(symbol)
    if found is not None:
        return found.restype, symbol
    if not _STATE["slots"] or argtys in dispatcher.overloads:
        return None
    if _STATE["typing"]:  # called by one typed for a fork: that fork compiles this one too
        try:
            restype = _type_only(dispatcher, argtys)
        except Exception:  # noqa: BLE001 - the compile there (or here) reports it
            return None
        _STATE["inner"][-1].append((dispatcher, argtys))
        return restype, symbol
    if _lines(dispatcher) < MIN_LINES or _running() >= _STATE["slots"]:
        return None
    if declared is not None:
        restype, inner = declared, None  # its callees: those it left in the cache
    else:
        _STATE["inner"].append([])
        try:
            restype = _type_only(dispatcher, argtys)
        except Exception:  # noqa: BLE001 - the compile here reports it
            return None
        finally:
            inner = _STATE["inner"].pop()
    parent = os.getpid()
    read, write = os.pipe()
    try:
        pid = os.fork()
    except OSError:  # no process to be had: compile it here
        os.close(read)
        os.close(write)
        return None
    if pid == 0:  # pragma: no cover - the forked process: never returns
        _compile_and_exit(dispatcher, argtys, inner, parent, read)
    os.close(write)
    _PENDING[symbol] = _Pending(pid, read, dispatcher, argtys, restype, inner)
    return restype, symbol


def start(symbol: str, work, load, size: int = 0) -> bool:
    """Run `work()` in a process of its own, at once when a core is free, else when one
    is, the largest `size` first (or here, when it is waited for first); False when this
    process may not fork.
    `load()` is called once that process has ended, before machine code that calls
    `symbol` is linked, and says whether the machine code came from there (a `work` that
    failed, or never ran, is for `load` to see, and do here)."""
    if not _STATE["slots"]:
        return False
    found = _Pending(None, None, None, None, None, (), load)
    found.work, found.size = work, size
    _PENDING[symbol] = found
    _fill()
    return True


def _fill() -> None:
    """Start the work waiting for a core while there are free ones."""
    free = _STATE["slots"] - _running()
    queued = sorted((p for p in _PENDING.values() if p.work is not None),
                    key=lambda p: -p.size)
    for found in queued[:max(free, 0)]:
        parent = os.getpid()
        read, write = os.pipe()
        try:
            pid = os.fork()
        except OSError:  # no process to be had: done here when waited for
            os.close(read)
            os.close(write)
            return
        if pid == 0:  # pragma: no cover - the forked process: never returns
            _run_and_exit(found.work, parent, read)
        os.close(write)
        found.pid, found.read, found.work = pid, read, None


def typed_only(dispatcher, argtys: tuple) -> bool:
    """Whether a `_direct` call being lowered calls a function that was only typed here
    and is compiled by no process: Numba remembers the types of an intrinsic's call, so a
    call typed once in `_type_only` is not typed (nor its callee compiled) again."""
    if argtys in dispatcher.overloads or not (_PENDING or _STATE["slots"]):
        return False
    from tracegrad.backends.numba import helpers

    return sys.modules[helpers.MODULE]._direct_symbol(dispatcher, argtys) not in _PENDING


def _running() -> int:
    """How many of the processes this one forked still compile."""
    mine = [p.read for p in _PENDING.values() if p.mine and p.read is not None]
    ended = select.select(mine, [], [], 0)[0] if mine else []
    return len(mine) - len(ended)


def _lines(dispatcher) -> int:
    try:
        return len(inspect.getsourcelines(dispatcher.py_func)[0])
    except (OSError, TypeError):
        return 0


def _compile_and_exit(dispatcher, argtys, inner, parent: int, read: int) -> None:  # pragma: no cover
    """The forked process's life: compile into the cache the function and the callees
    typed inside it (`inner`: their calls' types are remembered from that typing, so its
    compile would not compile them)."""
    def work():
        from tracegrad.backends.numba import helpers

        direct = sys.modules[helpers.MODULE]._direct_compile
        for d, a in inner or ():
            direct(d, a)
        dispatcher.compile(argtys)

    _run_and_exit(work, parent, read)


def _run_and_exit(work, parent: int, read: int) -> None:  # pragma: no cover
    """A forked process's life: `work()`, then exit 0 (1 when it failed: the process that
    forked it then compiles itself what it should have, and reports what fails)."""
    status = 1
    try:
        os.close(read)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)  # (what failed here fails again there, where it is reported)
        os.close(devnull)
        child.die_with_parent(parent)
        for p in _PENDING.values():
            p.mine = False  # the processes forked before this one are its siblings
        _STATE["slots"] = _STATE["typing"] = 0
        work()
        status = 0
    except BaseException:  # noqa: BLE001, S110 - see above
        pass
    finally:
        os._exit(status)


def _type_only(dispatcher, argtys: tuple):
    """The return type Numba infers for `dispatcher`'s function called with `argtys`."""
    from numba.core import compiler

    c = dispatcher._compiler
    flags = compiler.Flags()
    c.targetdescr.options.parse_as_flags(flags, c.targetoptions)
    flags = c._customize_flags(flags)
    _STATE["typing"] += 1
    try:
        return compiler.compile_extra(c.targetdescr.typing_context,
                                      c.targetdescr.target_context, c.py_func, args=argtys,
                                      return_type=None, flags=flags, locals=c.locals,
                                      pipeline_class=_typing_pipeline())
    finally:
        _STATE["typing"] -= 1


_PIPELINE: list = []


def _typing_pipeline():
    """A Numba compiler class whose pipeline ends after type inference with the return type
    (built once: Numba registers its passes by class)."""
    if _PIPELINE:
        return _PIPELINE[0]
    from numba.core import compiler
    from numba.core.compiler_machinery import FunctionPass, PassManager, register_pass
    from numba.core.typed_passes import NopythonTypeInference

    @register_pass(mutates_CFG=False, analysis_only=True)
    class TgTyped(FunctionPass):
        _name = "tg_typed"

        def __init__(self):
            FunctionPass.__init__(self)

        def run_pass(self, state):
            raise compiler._EarlyPipelineCompletion(state.return_type)

    class TgTypeOnly(compiler.CompilerBase):
        def define_pipelines(self):
            pm = PassManager("tg_type_only")
            pm.passes.extend(compiler.DefaultPassBuilder.define_untyped_pipeline(
                self.state).passes)
            pm.add_pass(NopythonTypeInference, "nopython frontend")
            pm.add_pass(TgTyped, "return type")
            pm.finalize()
            return [pm]

    _PIPELINE.append(TgTypeOnly)
    return TgTypeOnly


def _collect(module) -> None:
    """Wait for the processes compiling the callees `module` declares, and load their
    machine code (compiled here when a process failed)."""
    names = [f.name for f in module.functions if f.is_declaration and f.name in _PENDING]
    for name in names:
        _wait(name)


def _wait(name: str) -> None:
    """Wait for the process compiling callee `name` and load its machine code, after
    those of the processes forked before it: its code may call theirs (a callee typed
    while it was typed, or before it and called by a function it calls directly)."""
    found = _PENDING.get(name)
    if found is None:
        return
    if found.load is not None:  # translated: its loading loads what it calls (llvmgen.py)
        _wait_one(name)
        return
    # translated ones too: a Numba-compiled callee's machine code comes from Numba's cache,
    # linked as it loads, so every symbol it may call must be defined by then
    for other in list(_PENDING):
        if other == name:
            break
        _wait_one(other)
    _wait_one(name)


def _wait_one(name: str) -> None:
    from tracegrad.backends.numba import helpers

    found = _PENDING.pop(name, None)
    if found is None:
        return
    if found.read is None:  # never started: done here, where it would only be waited for
        _fill()  # (the cores that freed meanwhile take the next)
        try:  # (its machine code made before what it calls is waited for)
            found.work()
        except Exception:  # noqa: BLE001 - `load` compiles it again, reporting what fails
            pass
        found.load()
        return
    try:
        _await(found.read)
        while os.read(found.read, 1):  # the pipe reads as closed once the process has ended
            pass
    finally:
        os.close(found.read)
        if found.mine:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(found.pid, 0)
    _fill()  # its core is free
    if found.load is not None:
        came = found.load()  # (it may load others first, and count them)
        STATS["compiled"] += bool(came)
        return
    direct = sys.modules[helpers.MODULE]._direct_compile
    inner = found.inner if found.inner is not None else _cached_callees(found.dispatcher)
    for dispatcher, argtys in [*inner, (found.dispatcher, found.argtys)]:  # callees first
        hits = dispatcher.stats.cache_hits.get(argtys, 0)
        direct(dispatcher, argtys)
        STATS["compiled"] += dispatcher.stats.cache_hits.get(argtys, 0) > hits


def _await(read: int) -> None:
    """Wait until the process whose pipe end is `read` has ended, starting the work that
    waits for a core whenever another of this process's ends."""
    ended: set = set()
    while any(p.work is not None for p in _PENDING.values()):
        others = [p.read for p in _PENDING.values()
                  if p.mine and p.read is not None and p.read not in ended]
        ready = select.select([read, *others], [], [])[0]
        if read in ready:
            return
        ended.update(ready)
        _fill()


def _cached_callees(dispatcher) -> list:
    """`(dispatcher, argtys)` of the functions of `dispatcher`'s module defined before it
    and called by `_direct` that have machine code in the cache and are not loaded yet nor
    compiling elsewhere, callees first: those a process compiling `dispatcher` left."""
    from tracegrad.backends.numba import helpers

    module = sys.modules[dispatcher.py_func.__module__]
    try:
        with open(module.__file__, encoding="utf-8") as f:
            names = direct_callees(f.read()) or ()
    except (OSError, AttributeError, TypeError):
        return []
    symbol = sys.modules[helpers.MODULE]._direct_symbol
    found = []
    for name in names:
        d = getattr(module, name, None)
        if d is dispatcher:
            break
        if d is None:
            continue
        found += [(d, a) for a in cached_signatures(d)
                  if a not in d.overloads and symbol(d, a) not in _PENDING]
    return found


_DIRECT_CALL = re.compile(r"\b_direct(?:_step)?\((\w+), ")
_DEF = re.compile(r"^def (\w+)\(", re.M)


def direct_callees(source: str) -> list | None:
    """The functions `source` calls by `_direct` (helpers.py), each after those it calls;
    None when a call comes before its callee's definition."""
    defs = {m.group(1): m.start() for m in _DEF.finditer(source)}
    found = {}
    for m in _DIRECT_CALL.finditer(source):
        at = defs.get(m.group(1))
        if at is None or at > m.start():
            return None
        found[m.group(1)] = at
    return sorted(found, key=found.get)


def cached_signatures(dispatcher) -> list:
    """The argument types `dispatcher` has machine code for in Numba's cache (or
    translated, in the kernel cache: llvmgen.py)."""
    from tracegrad.backends.numba import llvmgen

    translated = llvmgen.cached_argtys(dispatcher)
    if translated:
        return translated
    cache = dispatcher._cache
    index_file = getattr(cache, "_cache_file", None)
    if index_file is None:
        return []
    codegen = dispatcher.targetctx.codegen()
    try:
        index = index_file._load_index()
    except Exception:  # noqa: BLE001 - an unreadable index is no index
        return []
    return [key[0] for key in index if key == cache._index_key(key[0], codegen)]


def finish() -> None:
    """Wait for every process still compiling, and load what they compiled."""
    for name in list(_PENDING):
        _wait(name)


def abandon() -> None:
    """Stop every process still compiling (the compile they served failed)."""
    for name, found in list(_PENDING.items()):
        _PENDING.pop(name, None)
        if found.read is None:  # never started
            continue
        if found.mine:
            with contextlib.suppress(OSError):
                os.kill(found.pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(found.pid, 0)
        with contextlib.suppress(OSError):
            os.close(found.read)
