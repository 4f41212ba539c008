"""The kernel cache: generated modules in memory and on disk, compiled once per signature.

Each generated module is written to `<cache dir>/tg_<hash>.py`, where the hash covers
its source, the kernel signature (ranks, dtypes), the Numba, NumPy, Python and
tracegrad versions. A file is written once (temp file, then an atomic link) and never
rewritten, so Numba's `cache=True` (which keys its machine code on the file's path and
content) can never pair a file with stale code; it is loaded by compiling its text
directly (no .pyc is read or written). Modules are self-contained: every helper they call
is in them, so the hash covers all the code.

The cache holds code that is run and Numba files that Numba unpickles, so whoever can
write it can run code as the user. Its directories are created private (0700), and one of
this user's that others may read is made private; a directory owned by another user or
writable by group or others is refused with a warning (kernels then go to a private
temporary directory), and a Numba file owned by another user is deleted. A module file is
run only when its code is, line for line, the code generated in this process (only
comments may differ: they name concrete shapes); anything else is deleted and rebuilt with
a warning, as is a Numba cache entry that fails to load. An unwritable cache directory is
replaced by a private temporary one, and one where writing fails (a full disk) by
compiling in memory, each with a warning. Two processes filling one entry at once both
succeed (the first link wins; the text is identical).

`TRACEGRAD_CACHE_DIR` sets the directory (default `$XDG_CACHE_HOME/tracegrad` or
`~/.cache/tracegrad`); kernels live in its `numba/` sub-directory. docs/reliability.md
lists what is read from it and how each file is checked.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import glob
import hashlib
import os
import shutil
import stat
import sys
import tempfile
import threading
import time
import types
import warnings

from tracegrad.backends.numba import child, forks, llvmgen

STATS = {"compiled": 0, "compiled_in_child": 0, "callees_compiled_apart": 0, "disk_hits": 0,
         "memory_hits": 0, "rebuilt": 0}
_MEMORY: dict = {}
_LOCK = threading.RLock()
_FALLBACK: dict = {}  # a refused or unwritable cache directory -> the private one used instead
_SWEPT: set = set()  # directories whose stale temporary files this process removed
_STALE_SECONDS = 3600  # a temporary file this old was left by a process that died writing it
_PRIVATE = 0o700
_CACHED_DECORATOR = "@njit(cache=True"
# LLVM options set while a kernel compiles, and the values they go back to (LLVM's
# defaults) after it: the loop vectorizer gives up on a loop that needs more than 128
# run-time alias checks (a loop storing several arrays and reading many, like a recurrent
# step's gates: 5 stores, 25 arrays read), which left such loops scalar; a check is two
# compares once per loop entry, a scalar loop of transcendentals costs 4-8x more per element
# (docs/numba.md, "Loops reading many arrays vectorize").
LLVM_OPTIONS = {"-vectorize-memory-check-threshold": ("4096", "128")}


def cache_dir() -> str:
    """The directory kernels are written to (created on demand)."""
    base = os.environ.get("TRACEGRAD_CACHE_DIR")
    if not base:
        root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"),
                                                                ".cache")
        base = os.path.join(root, "tracegrad")
    return os.path.join(base, "numba")


@functools.cache
def _versions() -> str:
    """What a kernel's cache key depends on besides its code (read once per process)."""
    import numba
    import numpy

    try:
        from importlib.metadata import version

        tg = version("tracegrad")
    except Exception:  # noqa: BLE001 - not installed as a distribution
        tg = "source"
    options = ",".join(f"{k}={v[0]}" for k, v in sorted(LLVM_OPTIONS.items()))
    return f"numba={numba.__version__};numpy={numpy.__version__};tracegrad={tg};" \
           f"python={sys.version_info[:3]};{sys.platform};llvm={options}"


def _lock_index_saves() -> None:
    """Make Numba's save of a cache entry hold a lock on the function's index file: the
    save reads the index, picks a data file name not in it and writes both, so two
    processes saving different signatures of one function at once (compile processes
    forked side by side: forks.py) could pick the same name, and the index would pair one
    signature with the other's machine code."""
    try:
        import fcntl

        from numba.core import caching
    except ImportError:  # not POSIX: entries are then saved unlocked, as Numba does
        return
    cls = caching.IndexDataCacheFile
    if getattr(cls.save, "_tg_locked", False):
        return
    original = cls.save

    def save(self, key, data):
        with open(self._index_path + ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                return original(self, key, data)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    save._tg_locked = True
    cls.save = save


@contextlib.contextmanager
def _llvm_options():
    """`LLVM_OPTIONS` set for the compiles inside (and only those: Numba's compiler lock
    is held, so no other Numba compile of the process runs meanwhile)."""
    import llvmlite.binding as llvm
    from numba.core.compiler_lock import global_compiler_lock

    with global_compiler_lock:
        for name, (value, _) in LLVM_OPTIONS.items():
            llvm.set_option("tracegrad", f"{name}={value}")
        try:
            yield
        finally:
            for name, (_, default) in LLVM_OPTIONS.items():
                llvm.set_option("tracegrad", f"{name}={default}")


def _code(source: str) -> str:
    """`source` without its comment lines (what runs)."""
    return "\n".join(line for line in source.splitlines() if not line.lstrip().startswith("#"))


def kernel_key(source: str, signature: str) -> str:
    """The cache key: the code without its comments (IR lines name concrete shapes), the
    signature and the versions."""
    h = hashlib.sha256()
    for part in (_code(source), signature, _versions()):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


def _source_digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _header(key: str, text: str) -> str:
    return f"# tracegrad kernel {key} text-digest {_source_digest(text)}\n"


# -- the directory: private, trusted, writable -------------------------------------------------


def _unsafe(path: str, st=None, *, files: bool = False) -> str | None:
    """Why `path` cannot be trusted to hold code run as this user, or None: it is owned by
    another user (root excepted) or, a directory, writable by group or others (the modes of
    files do not matter: they sit in directories only this user can enter)."""
    if not hasattr(os, "geteuid"):  # no POSIX owners and modes (Windows)
        return None
    st = st if st is not None else os.stat(path)
    if st.st_uid not in (os.geteuid(), 0):
        return f"it is owned by uid {st.st_uid}, not by this user"
    if not files and st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"it is writable by {'others' if st.st_mode & stat.S_IWOTH else 'its group'} " \
               f"(mode {stat.S_IMODE(st.st_mode):o})"
    return None


def _make_private(path: str) -> None:
    """Make a directory of this user that others may read or enter (an older tracegrad
    made them 0755) mode 0700."""
    st = os.stat(path)
    if hasattr(os, "geteuid") and st.st_uid == os.geteuid() and st.st_mode & 0o077:
        os.chmod(path, _PRIVATE)


def _private_dir(path: str) -> None:
    """Create `path` (and missing parents) mode 0700, unless it exists."""
    if os.path.isdir(path):
        return
    parent = os.path.dirname(path)
    if parent and parent != path:
        _private_dir(parent)
    try:
        os.mkdir(path, _PRIVATE)
    except FileExistsError:
        pass


def _fallback(d: str, why: str) -> str:
    """A private temporary directory replacing `d` for this process, with a warning."""
    tmp = tempfile.mkdtemp(prefix="tracegrad-kernels-")  # mode 0700
    os.mkdir(os.path.join(tmp, "__pycache__"), _PRIVATE)
    atexit.register(shutil.rmtree, tmp, True)
    warnings.warn(
        f"tracegrad: the kernel cache directory {d} {why}; compiled kernels go to the "
        f"private directory {tmp} and will not persist across processes (set "
        "TRACEGRAD_CACHE_DIR to a private, writable directory)",
        RuntimeWarning,
        stacklevel=5,
    )
    _FALLBACK[d] = tmp
    return tmp


def _writable_dir() -> str:
    """The cache directory, or a private temporary one (with a warning) when it or its
    `__pycache__` (where Numba keeps its files) could be changed by another user, or is not
    writable."""
    d = cache_dir()
    found = _FALLBACK.get(d)
    if found is not None:
        return found
    pycache = os.path.join(d, "__pycache__")
    try:
        _private_dir(pycache)
        for path in (d, pycache):
            why = _unsafe(path)
            if why is not None:
                return _fallback(d, f"is refused: {path} could be changed by another user "
                                    f"({why})")
        for path in (d, pycache):
            _make_private(path)
        with tempfile.NamedTemporaryFile(dir=d, prefix=".probe-"):
            pass
    except OSError as e:
        return _fallback(d, f"is not writable ({e})")
    if d not in _SWEPT:
        _SWEPT.add(d)
        _sweep(d)
    return d


def _sweep(d: str) -> None:
    """Remove the temporary files of writers that died (SIGKILL, power loss) long ago."""
    now = time.time()
    for pattern in (".tmp-*.py", os.path.join("__pycache__", "*.tmp.*")):
        for f in glob.glob(os.path.join(d, pattern)):
            try:
                if now - os.stat(f).st_mtime > _STALE_SECONDS:
                    os.unlink(f)
            except OSError:
                pass


# -- files ----------------------------------------------------------------------------------


def _write_once(path: str, text: str) -> None:
    """Create `path` with `text` atomically unless it exists; never rewrite it."""
    d = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-", suffix=".py")  # mode 0600
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
        except OSError:  # no hard links here: a replace is still atomic
            if not os.path.exists(path):
                os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _numba_cache_files(path: str) -> list:
    stem = os.path.splitext(os.path.basename(path))[0]
    return glob.glob(os.path.join(os.path.dirname(path), "__pycache__", stem + ".*"))


def _purge(path: str) -> None:
    """Remove a module file and every Numba cache file made from it."""
    for f in [path] + _numba_cache_files(path):
        try:
            os.unlink(f)
        except OSError:
            pass


def _module_text(path: str, key: str, source: str):
    """The file's text if it is intact (its first line names `key` and the digest of the
    rest) and its code is, line for line, the code of `source` (only comments, which name
    concrete shapes, may differ); `MISSING` when there is no file; else None."""
    try:
        with open(path) as f:
            text = f.read()
    except FileNotFoundError:  # a dangling link is not missing: it is removed
        return None if os.path.islink(path) else MISSING
    except (OSError, UnicodeDecodeError):
        return None
    first, _, rest = text.partition("\n")
    if first + "\n" != _header(key, rest) or _code(rest) != _code(source):
        return None
    return text


MISSING = ""  # `_module_text` of a file that does not exist (yet)


def _check_numba_files(path: str) -> None:
    """Delete (with a warning) the Numba cache files of `path` that another user could have
    written: Numba unpickles them."""
    for f in _numba_cache_files(path):
        try:
            why = _unsafe(f, os.lstat(f), files=True)
        except OSError:
            continue
        if why is not None:
            warnings.warn(f"tracegrad: the Numba cache file {f} is not trusted ({why}); "
                          "deleting it", RuntimeWarning, stacklevel=5)
            STATS["rebuilt"] += 1
            for g in _numba_cache_files(path):  # the module file stays: it was checked
                try:
                    os.unlink(g)
                except OSError:
                    pass
            return


def _exec_module(path: str, text: str, name: str, cached: bool = True):
    """Run `text` as module `name` (registered in `sys.modules`: Numba's cache looks the
    defining module up). Not `cached`: Numba keeps its code in memory only."""
    if not cached:
        text = text.replace(_CACHED_DECORATOR, "@njit(cache=False")
    module = types.ModuleType(name)
    module.__file__ = path
    sys.modules[name] = module
    exec(compile(text, path, "exec"), module.__dict__)  # noqa: S102 - our generated module
    return module


def _in_memory(module_name: str) -> None:
    """Stop the dispatchers of a loaded module from reading or writing Numba's cache."""
    from numba.core.dispatcher import Dispatcher

    module = sys.modules.get(module_name)
    for obj in vars(module).values() if module is not None else ():
        if isinstance(obj, Dispatcher):
            obj._cache.disable()


def _load_file(d: str, name: str, key: str, source: str, cached: bool):
    """Module `name` from `<d>/<name>.py`, written there first (header `key`, then `source`)
    when missing; a file that is not `source` up to comments is deleted and rebuilt."""
    path = os.path.join(d, name + ".py")
    text = _header(key, source) + source
    if not cached:
        return _exec_module(path, text, name, cached=False)
    found = _module_text(path, key, source)
    if found is None:  # read and not right (a file missing when read is not: another
        # process may have written it since, and other processes may be loading it)
        warnings.warn(f"tracegrad: kernel cache file {path} is corrupt or not "
                      "tracegrad's own code; rebuilding it", RuntimeWarning, stacklevel=5)
        STATS["rebuilt"] += 1
        _purge(path)
    if not found:
        _write_once(path, text)
        found = _module_text(path, key, source) or text
    _check_numba_files(path)
    try:
        return _exec_module(path, found, name)
    except RuntimeError as e:  # another process purged the file while Numba looked for it
        if "no locator available" not in str(e):
            raise
        _write_once(path, text)
        return _exec_module(path, text, name)


def _ensure_helpers(d: str, cached: bool) -> None:
    """Load the shared helper module (written to `d` once) under its digest name."""
    from tracegrad.backends.numba import helpers

    _lock_index_saves()
    if helpers.MODULE in sys.modules:
        if not cached:
            _in_memory(helpers.MODULE)
        return
    _load_file(d, helpers.MODULE, helpers.MODULE, helpers.SOURCE, cached)


def load_kernel(source: str, signature, entry: str):
    """The compiled entry point of `source`'s function `entry` for Numba `signature`."""
    key = kernel_key(source, str(signature))
    with _LOCK:
        found = _MEMORY.get(key)
        if found is not None:
            STATS["memory_hits"] += 1
            return found
        d = _writable_dir()
        try:
            _ensure_helpers(d, True)
            in_child = child.wanted(source.count("\n")) and not _on_disk(d, key)
            if in_child:
                _compile_in_child(d, key, source, signature, entry)
            hits = STATS["disk_hits"]
            result = _load_from_disk(d, key, source, signature, entry, True)
            if in_child and STATS["disk_hits"] > hits:  # compiled by the child
                STATS["disk_hits"] -= 1
                STATS["compiled"] += 1
                STATS["compiled_in_child"] += 1
        except OSError as e:  # the disk is full, or the directory stopped being writable
            warnings.warn(f"tracegrad: cannot write to the kernel cache directory {d} ({e}); "
                          "compiling this kernel in memory", RuntimeWarning, stacklevel=3)
            _ensure_helpers(d, False)
            result = _load_from_disk(d, key, source, signature, entry, False)
        _MEMORY[key] = result
        return result


# The generic kernels (every slice start read from `I`) whose specialization (its starts
# constants written in) was loaded: generic key -> specialized key (backends/numba's
# `_kernel_source`).
SPECIALIZED: dict[str, str] = {}


def has_kernel(key: str) -> bool:
    """Whether `load_kernel` of the kernel `key` (`kernel_key`) would load machine code
    (from memory or the disk cache) rather than compile."""
    if key in _MEMORY:
        return True
    try:
        return _on_disk(_writable_dir(), key)
    except OSError:
        return False


def _on_disk(d: str, key: str) -> bool:
    """Whether Numba's cache in `d` has files of the kernel `key`'s module."""
    return bool(_numba_cache_files(os.path.join(d, f"tg_{key}.py")))


def _compile_in_child(d, key, source, signature, entry) -> None:
    """Compile the kernel into the cache in a forked child (child.py), for `_load_from_disk`
    to load. A child that could not write the cache raises OSError here (load_kernel then
    compiles in memory)."""
    llvmgen.numba_contexts()  # made once, before the fork, for the child and for the load
    try:
        STATS["callees_compiled_apart"] += child.run(_compile_with_forks, d, key, source,
                                                     signature, entry)
    except child.ChildError as e:
        if e.kind == "oserror":
            raise OSError(str(e)) from None
        from tracegrad.errors import CompileMemoryError

        memory = e.kind == "memory"
        if str(e).startswith("tracegrad: "):  # the child's own _out_of_memory or _failed
            raise (CompileMemoryError if memory else RuntimeError)(str(e)) from None
        raise (_out_of_memory if memory else _failed)(os.path.join(d, f"tg_{key}.py"),
                                                      str(e)) from None


def _compile_with_forks(d, key, source, signature, entry) -> int:  # pragma: no cover
    """In a compile child: compile the kernel into the cache, its large callees in
    processes of their own (forks.py); how many were."""
    forks.enable()
    try:
        _load_from_disk(d, key, source, signature, entry, True)
        forks.finish()
        return forks.STATS["compiled"]
    finally:
        forks.abandon()


def _load_from_disk(d, key, source, signature, entry, cached):
    from numba.core.errors import NumbaError, NumbaPerformanceWarning

    from tracegrad.backends.numba import helpers

    name = f"tg_{key}"
    path = os.path.join(d, name + ".py")
    for attempt in range(2):
        module = _load_file(d, name, key, source, cached)
        try:
            dispatcher = getattr(module, entry)
            with warnings.catch_warnings():
                # e.g. "prange loop will not run in parallel" for a loop that may raise
                warnings.simplefilter("ignore", NumbaPerformanceWarning)
                with _llvm_options():
                    if cached:
                        _load_callees(module, source, path)
                    dispatcher.compile(signature)
        except OSError:
            raise  # Numba could not write its cache: load_kernel compiles in memory
        except MemoryError as e:  # the compile, not the cache: keep every file
            raise _out_of_memory(path, f"{type(e).__name__}: {e}") from e
        except NumbaError as e:
            if isinstance(e.__cause__ or e.__context__, MemoryError):
                raise _out_of_memory(path, f"{type(e).__name__}: {e}") from e
            raise _failed(path, str(e)) from e
        except Exception as e:  # a Numba cache file that cannot be loaded
            if attempt or not cached or not (_numba_cache_files(path) or _numba_cache_files(
                    os.path.join(d, helpers.MODULE + ".py"))):
                raise _failed(path, f"{type(e).__name__}: {e}") from e
            warnings.warn(f"tracegrad: the compiled-kernel cache of {path} could not be "
                          f"loaded ({type(e).__name__}: {e}); rebuilding it",
                          RuntimeWarning, stacklevel=4)
            STATS["rebuilt"] += 1
            _purge(path)
            for f in _numba_cache_files(os.path.join(d, helpers.MODULE + ".py")):
                os.unlink(f)  # the helpers' compiled code is part of the kernel's
            continue
        hits = sum(dispatcher.stats.cache_hits.values())
        STATS["disk_hits" if hits else "compiled"] += 1
        cres = dispatcher.overloads[dispatcher.signatures[0]]
        return cres.entry_point
    raise AssertionError("unreachable")


def _load_callees(module, source: str, path: str) -> None:
    """Load, callees first, the cached machine code of every function the module calls by
    `_direct`: a caller's cached code calls theirs by a symbol they define when loaded.
    When one of them has no cached code, every Numba file of the module is deleted first
    (all of it compiles anew: a compile finds its callees by typing its calls)."""
    from tracegrad.backends.numba import helpers

    names = forks.direct_callees(source)
    found = [(getattr(module, name), forks.cached_signatures(getattr(module, name)))
             for name in names or ()]
    if names is None or not all(sigs for _, sigs in found):
        for f in _numba_cache_files(path):
            with contextlib.suppress(OSError):
                os.unlink(f)
        llvmgen.forget(module.__name__)  # (loaded by this process, from another directory)
        return
    direct = sys.modules[helpers.MODULE]._direct_compile
    for dispatcher, sigs in found:
        for sig in sigs:
            direct(dispatcher, sig)


def _out_of_memory(path: str, why: str):
    """The `CompileMemoryError` of the compile of `path`, out of memory for `why`."""
    from tracegrad.errors import CompileMemoryError

    return CompileMemoryError(f"tracegrad: the numba compile of {path} ran out of memory "
                              f"({why})")


def _failed(path: str, why: str) -> RuntimeError:
    """The error of a compile of `path` that failed for `why` (a tracegrad bug)."""
    return RuntimeError(f"tracegrad: Numba failed to compile the generated kernel {path} (a "
                        f"tracegrad bug; the numpy backend runs this graph): {why}")


def cache_info() -> dict:
    """Counters of this process: kernels `compiled` (of them, `compiled_in_child` by a
    child process: child.py), the functions of their modules compiled by processes of their
    own beside their callers (`callees_compiled_apart`: forks.py), kernels loaded from disk
    (`disk_hits`), found in memory (`memory_hits`), and cache entries `rebuilt` after
    corruption."""
    return dict(STATS)


def clear_memory_cache() -> None:
    """Forget the kernels loaded in this process (the disk cache stays)."""
    with _LOCK:
        _MEMORY.clear()
        SPECIALIZED.clear()
