"""The kernel cache: generated modules in memory and on disk, compiled once per signature.

Each generated module is written to `<cache dir>/tg_<hash>.py`, where the hash covers
its source, the kernel signature (ranks, dtypes), the Numba, NumPy, Python and
tracegrad versions. A file is written once (temp file, then an atomic link) and never
rewritten, so Numba's `cache=True` (which keys its machine code on the file's path and
time stamp) can never pair a file with stale code; it is loaded by compiling its text
directly (no .pyc is read or written). Modules are self-contained: every helper they call
is in them, so the hash covers all the code.

A file whose text does not match its hash, or a Numba cache entry that fails to load, is
rebuilt with a warning; an unwritable cache directory is replaced by a temporary one
with a warning. Two processes filling one entry at once both succeed (the first link
wins; the text is identical).

`TRACEGRAD_CACHE_DIR` sets the directory (default `$XDG_CACHE_HOME/tracegrad` or
`~/.cache/tracegrad`); kernels live in its `numba/` sub-directory.
"""

from __future__ import annotations

import atexit
import glob
import hashlib
import os
import shutil
import sys
import tempfile
import threading
import types
import warnings

STATS = {"compiled": 0, "disk_hits": 0, "memory_hits": 0, "rebuilt": 0}
_MEMORY: dict = {}
_LOCK = threading.RLock()
_FALLBACK_DIR: list = []


def cache_dir() -> str:
    """The directory kernels are written to (created on demand)."""
    base = os.environ.get("TRACEGRAD_CACHE_DIR")
    if not base:
        root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"),
                                                                ".cache")
        base = os.path.join(root, "tracegrad")
    return os.path.join(base, "numba")


def _versions() -> str:
    import numba
    import numpy

    try:
        from importlib.metadata import version

        tg = version("tracegrad")
    except Exception:  # noqa: BLE001 - not installed as a distribution
        tg = "source"
    return f"numba={numba.__version__};numpy={numpy.__version__};tracegrad={tg};" \
           f"python={sys.version_info[:3]};{sys.platform}"


def kernel_key(source: str, signature: str) -> str:
    """The cache key: the code without its comments (IR lines name concrete shapes), the
    signature and the versions."""
    code = "\n".join(line for line in source.splitlines()
                     if not line.lstrip().startswith("#"))
    h = hashlib.sha256()
    for part in (code, signature, _versions()):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


def _source_digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _header(key: str, text: str) -> str:
    return f"# tracegrad kernel {key} text-digest {_source_digest(text)}\n"


def _writable_dir() -> str:
    """The cache directory, or a temporary one (with a warning) when it is not writable."""
    if _FALLBACK_DIR:
        return _FALLBACK_DIR[0]
    d = cache_dir()
    try:
        os.makedirs(d, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=d, prefix=".probe-"):
            return d
    except OSError as e:
        tmp = tempfile.mkdtemp(prefix="tracegrad-kernels-")
        atexit.register(shutil.rmtree, tmp, True)
        warnings.warn(
            f"tracegrad: the kernel cache directory {d} is not writable ({e}); compiled "
            f"kernels go to {tmp} and will not persist across processes (set "
            "TRACEGRAD_CACHE_DIR to a writable directory)",
            RuntimeWarning,
            stacklevel=4,
        )
        _FALLBACK_DIR.append(tmp)
        return tmp


def _write_once(path: str, text: str) -> None:
    """Create `path` with `text` atomically unless it exists; never rewrite it."""
    d = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-", suffix=".py")
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


def _module_text(path: str, key: str):
    """The file's text if it is intact (its first line names `key` and the digest of the
    rest), else None."""
    try:
        with open(path) as f:
            text = f.read()
    except (OSError, UnicodeDecodeError):
        return None
    first, _, rest = text.partition("\n")
    return text if first + "\n" == _header(key, rest) else None


def _exec_module(path: str, text: str, name: str):
    module = types.ModuleType(name)
    module.__file__ = path
    sys.modules[name] = module  # Numba's cache looks the defining module up
    exec(compile(text, path, "exec"), module.__dict__)  # noqa: S102 - our generated module
    return module


def _ensure_helpers(d: str) -> None:
    """Load the shared helper module (written to `d` once) under its digest name."""
    from tracegrad.backends.numba import helpers

    if helpers.MODULE in sys.modules:
        return
    path = os.path.join(d, helpers.MODULE + ".py")
    text = _header(helpers.MODULE, helpers.SOURCE) + helpers.SOURCE
    if _module_text(path, helpers.MODULE) is None:
        if os.path.exists(path):
            warnings.warn(f"tracegrad: kernel cache file {path} is corrupt; rebuilding it",
                          RuntimeWarning, stacklevel=5)
            STATS["rebuilt"] += 1
            _purge(path)
        _write_once(path, text)
    _exec_module(path, _module_text(path, helpers.MODULE) or text, helpers.MODULE)


def load_kernel(source: str, signature, entry: str):
    """The compiled entry point of `source`'s function `entry` for Numba `signature`."""
    key = kernel_key(source, str(signature))
    with _LOCK:
        found = _MEMORY.get(key)
        if found is not None:
            STATS["memory_hits"] += 1
            return found
        _ensure_helpers(_writable_dir())
        result = _load_from_disk(key, source, signature, entry)
        _MEMORY[key] = result
        return result


def _load_from_disk(key, source, signature, entry):
    from numba.core.errors import NumbaError, NumbaPerformanceWarning

    from tracegrad.backends.numba import helpers

    d = _writable_dir()
    name = f"tg_{key}"
    path = os.path.join(d, name + ".py")
    text = _header(key, source) + source
    for attempt in range(2):
        if _module_text(path, key) is None:
            if os.path.exists(path):
                warnings.warn(f"tracegrad: kernel cache file {path} is corrupt; rebuilding it",
                              RuntimeWarning, stacklevel=4)
                STATS["rebuilt"] += 1
                _purge(path)
            try:
                _write_once(path, text)
            except OSError as e:
                raise RuntimeError(f"tracegrad: cannot write kernel {path}: {e}") from e
        try:
            module = _exec_module(path, _module_text(path, key) or text, name)
            dispatcher = getattr(module, entry)
            with warnings.catch_warnings():
                # e.g. "prange loop will not run in parallel" for a loop that may raise
                warnings.simplefilter("ignore", NumbaPerformanceWarning)
                dispatcher.compile(signature)
        except NumbaError as e:
            raise RuntimeError(
                f"tracegrad: Numba failed to compile the generated kernel {path} "
                f"(a tracegrad bug; the numpy backend runs this graph): {e}"
            ) from e
        except Exception as e:  # a Numba cache file that cannot be loaded
            if attempt or not (_numba_cache_files(path) or _numba_cache_files(
                    os.path.join(d, helpers.MODULE + ".py"))):
                raise RuntimeError(
                    f"tracegrad: Numba failed to compile the generated kernel {path} "
                    f"(a tracegrad bug; the numpy backend runs this graph): "
                    f"{type(e).__name__}: {e}"
                ) from e
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


def cache_info() -> dict:
    """Counters of this process: kernels `compiled`, loaded from disk (`disk_hits`), found
    in memory (`memory_hits`), and cache entries `rebuilt` after corruption."""
    return dict(STATS)


def clear_memory_cache() -> None:
    """Forget the kernels loaded in this process (the disk cache stays)."""
    with _LOCK:
        _MEMORY.clear()
