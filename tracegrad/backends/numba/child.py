"""Compiles in a forked child process.

LLVM ends the process when an allocation fails (it prints "LLVM ERROR: out of memory" and
aborts), and the system's out-of-memory killer ends it with SIGKILL: neither can be caught
in the process that compiles. A large kernel is therefore compiled by a child forked for
the compile. The child writes the machine code to the kernel cache and exits; the parent
then loads it from there. A child that dies is reported as an exception of the parent
(`CompileMemoryError` when it ran out of memory), the memory the compile took goes back to
the system when the child ends, and the parent holds no lock or GIL while it waits.

Which compiles: those of modules of at least `ABOVE_LINES` lines of generated code, and
every compile once a memory limit is set (it can only be enforced on a child). Only Linux
forks for compiles; elsewhere compiles stay in the process (`available()`).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import faulthandler
import os
import pickle
import signal
import sys
import tempfile
import threading
import traceback
import warnings

from tracegrad import backends

try:
    import resource
except ImportError:  # not POSIX: no child compiles (available())
    resource = None

# Modules of at least this many lines compile in a child (env TRACEGRAD_COMPILE_IN_CHILD: a
# line count, or 0 for never). Such a module takes about 10 s to compile; forking, and
# compiling again in the child the Numba internals the parent had compiled for earlier
# kernels, cost it 2-5% more (docs/numba.md, "Large compiles run in a child process").
ABOVE_LINES: int | None = 1000
_ENV = os.environ.get("TRACEGRAD_COMPILE_IN_CHILD", "").strip()
if _ENV.isdigit():
    ABOVE_LINES = int(_ENV) or None

# How much less priority a background compile's child takes than its parent (os.nice).
NICE = 10

_RUNNING: set = set()  # pids of children compiling now
_RUNNING_LOCK = threading.Lock()
_EXITING = [False]


def available() -> bool:
    return sys.platform.startswith("linux") and hasattr(os, "fork") and resource is not None


def wanted(lines: int) -> bool:
    """Whether a module of `lines` lines compiles in a child."""
    if ABOVE_LINES is None or not available():
        return False
    return backends.compile_memory_limit is not None or lines >= ABOVE_LINES


class ChildError(Exception):
    """What went wrong in the child, as a message (its own exception may not pickle):
    `kind` is "memory", "oserror" or "error"."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def run(fn, *args):
    """Call `fn(*args)` in a forked child, wait for it and return what it returned (which
    must pickle). Raise `ChildError` for what it raised, or when it died by a signal
    ("memory" for LLVM's out-of-memory abort and for SIGKILL). Warnings the child issued
    are issued again here."""
    from numba.core.compiler_lock import global_compiler_lock

    # The child's report and what it prints go to files, not pipes: a pipe's end copied
    # into another process forked meanwhile (multiprocessing's workers) would keep a read
    # to its end waiting for as long as that process lives.
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        # No other thread may be inside Numba or LLVM when the process is copied: the
        # child would find their locks held forever.
        with global_compiler_lock, warnings.catch_warnings():
            # JAX (and Python 3.12+) warn that forking a threaded process may deadlock the
            # child; this child only compiles, under the locks held here.
            warnings.filterwarnings("ignore", message=r".*fork\(\)")
            parent = os.getpid()
            background = threading.current_thread().name == backends.BACKGROUND_THREAD
            pid = os.fork()
            if pid == 0:  # pragma: no cover - the child: never returns
                _child(fn, args, parent, out.fileno(), err.fileno(), background)
            with _RUNNING_LOCK:
                _RUNNING.add(pid)
        try:
            _, status = os.waitpid(pid, 0)  # (the GIL is released meanwhile)
        finally:
            with _RUNNING_LOCK:
                _RUNNING.discard(pid)
        out.seek(0)
        data = out.read()
        err.seek(0)
        printed = err.read().decode(errors="replace")
    try:
        result = _report(data, status, printed)
    except ChildError as e:
        # What a child out of memory printed (tracebacks, LLVM's message) is noise beside
        # the warning that says so; a crash's output is the evidence.
        if e.kind != "memory" and printed and not _EXITING[0]:
            sys.stderr.write(printed)
        raise
    if printed and not _EXITING[0]:
        sys.stderr.write(printed)
    return result


def _report(data: bytes, status: int, printed: str):
    tail = printed.strip()[-2000:]
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        name = signal.Signals(sig).name if sig in set(signal.Signals) else f"signal {sig}"
        if sig == signal.SIGKILL:
            raise ChildError("memory", "the compile process was killed (SIGKILL), as the "
                                       "system's out-of-memory killer does")
        if any(words in printed.lower() for words in _NO_MEMORY_WORDS):
            raise ChildError("memory", f"an allocation failed and LLVM aborted the compile "
                                       f"process ({name})")
        raise ChildError("error", f"the compile process crashed ({name}): "
                                  f"{tail or 'it printed nothing'}")
    try:
        outcome, payload, caught = pickle.loads(data)
    except Exception:  # noqa: BLE001 - a child that exited without its report
        code = os.WEXITSTATUS(status)
        if code == _NO_MEMORY:
            raise ChildError("memory", "the compile process ran out of memory") from None
        raise ChildError("error", f"the compile process ended without a result (exit "
                                  f"status {code}){': ' + tail if tail else ''}") from None
    if outcome != "memory":  # (a child out of memory warns of what failed for lack of it)
        for message, category in caught:
            warnings.warn(message, category, stacklevel=4)
    if outcome != "ok":
        raise ChildError(outcome, payload)
    return payload


_NO_MEMORY = 3  # the child's exit status when it could not even report a MemoryError
# What LLVM and the C++ runtime print when an allocation fails, before they abort.
_NO_MEMORY_WORDS = ("out of memory", "unable to allocate", "allocation failed", "bad_alloc",
                    "cannot allocate memory")


def _child(fn, args, parent: int, out: int, err: int,
           background: bool) -> None:  # pragma: no cover
    """The child's whole life: compile, write its report to `out`, and end without running
    the parent's exit handlers or flushing its buffers. A background compile's child (and
    the processes it forks) yields the cores to the program meanwhile running on the numpy
    backend (`NICE` more than its niceness)."""
    status = 1
    try:
        if background:
            with contextlib.suppress(OSError):
                os.nice(NICE)
        os.dup2(err, 2)
        if faulthandler.is_enabled():  # its dumps go where the child's stderr goes
            faulthandler.enable(file=2)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # an abort leaves no core file
        die_with_parent(parent)
        limit = _set_memory_limit()
        with warnings.catch_warnings(record=True) as caught:
            try:
                report = ("ok", fn(*args))
            except MemoryError as e:
                _unset(limit)
                report = ("memory", _message(e))
            except OSError as e:
                report = ("oserror", f"{type(e).__name__}: {e}")
            except BaseException as e:  # noqa: BLE001 - reported to the parent
                near = _near(limit)
                _unset(limit)
                if near or isinstance(e.__cause__ or e.__context__, MemoryError):
                    report = ("memory", _message(e.__cause__ or e))  # not tracegrad's wrapper
                else:
                    report = ("error", _message(e))
        _unset(limit)
        notes = [(str(w.message), w.category if _picklable(w.category) else RuntimeWarning)
                 for w in caught]
        view = memoryview(pickle.dumps((*report, notes)))
        while view:
            view = view[os.write(out, view):]
        status = 0
    except MemoryError:
        status = _NO_MEMORY
    except BaseException:  # noqa: BLE001, S110 - the parent reports a missing result
        pass
    finally:
        os._exit(status)


def _message(e: BaseException) -> str:
    """`e` as the parent reports it: tracegrad's own messages as they are."""
    if str(e).startswith("tracegrad: "):
        return str(e)
    return "".join(traceback.format_exception_only(e)).strip()


def _picklable(obj) -> bool:
    try:
        pickle.loads(pickle.dumps(obj))
    except Exception:  # noqa: BLE001
        return False
    return True


def _set_memory_limit():  # pragma: no cover - runs in the child
    """Cap the child's address space at its size now plus `tg.config.compile_memory_limit`;
    the limits it had (for `_unset`), or None."""
    extra = backends.compile_memory_limit
    if extra is None:
        return None
    with open("/proc/self/statm") as f:
        size = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    old = resource.getrlimit(resource.RLIMIT_AS)
    soft = size + extra
    if old[1] != resource.RLIM_INFINITY:
        soft = min(soft, old[1])
    resource.setrlimit(resource.RLIMIT_AS, (soft, old[1]))
    return old


def _near(old) -> bool:  # pragma: no cover - runs in the child
    """Whether the child's address space came within an eighth of its memory limit (at
    least 64 MiB) of the limit: C code whose allocation failed does not always raise
    MemoryError (Numba's typing reported "SystemError: error return without exception
    set")."""
    if old is None:
        return False
    soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    with open("/proc/self/status") as f:
        peak = next(int(line.split()[1]) << 10 for line in f if line.startswith("VmPeak:"))
    return soft - peak < max(64 << 20, (backends.compile_memory_limit or 0) // 8)


def _unset(old) -> None:  # pragma: no cover - runs in the child
    """Lift the compile's memory limit, so the child can report (a soft limit may be raised
    back up to the hard one)."""
    if old is not None:
        with contextlib.suppress(Exception):
            resource.setrlimit(resource.RLIMIT_AS, old)


def die_with_parent(parent: int) -> None:  # pragma: no cover - runs in the child
    """SIGKILL this process (forked by `parent`) if the thread that forked it ends (Linux's
    PR_SET_PDEATHSIG), so a killed parent leaves no compile behind."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # it ended before the request
        os._exit(1)


@atexit.register
def _kill_children() -> None:
    """A program that ends does not wait for a compile: its children are stopped."""
    _EXITING[0] = True
    with _RUNNING_LOCK:
        pids = list(_RUNNING)
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
