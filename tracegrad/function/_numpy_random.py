"""The warning for NumPy's random functions called while a function is traced: their numbers
are drawn once, at trace time, and frozen into the graph as constants.

While at least one trace runs (in any thread), the public functions of `np.random` are
wrappers that warn, once per traced function, when called by a thread that is tracing;
outside traces `np.random` holds NumPy's own functions (nothing slows the untraced path).
A `Generator` made before the trace is not seen (its methods cannot be wrapped).
"""

from __future__ import annotations

import contextlib
import functools
import threading
import warnings

import numpy as np

from tracegrad.errors import FrozenRandomWarning

# Not wrapped: the classes (a Generator made in a trace is caught by default_rng).
_CLASSES = {"BitGenerator", "Generator", "MT19937", "PCG64", "PCG64DXSM", "Philox",
            "RandomState", "SFC64", "SeedSequence"}
_NAMES = tuple(n for n in dir(np.random) if not n.startswith("_") and n not in _CLASSES
               and callable(getattr(np.random, n)))

_lock = threading.Lock()
_active = 0  # traces running, in all threads
_originals: dict = {}
_wrappers: dict = {}  # name -> (NumPy's function, its wrapper), made once
_local = threading.local()  # .tracing: the functions this thread is tracing (innermost last)
_warned: set = set()  # the code objects (or names) of functions warned about


def _key(fn):
    return getattr(fn, "__code__", None) or getattr(fn, "__qualname__", None) or id(fn)


def _wrap(name: str, original):
    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        tracing = getattr(_local, "tracing", None)
        if tracing:
            fn, fn_name = tracing[-1]
            if _key(fn) not in _warned:
                _warned.add(_key(fn))
                warnings.warn(
                    f"np.random.{name} called while tracing {fn_name}: its numbers are drawn "
                    "once, when the function is traced, and frozen into the graph (every "
                    "call returns the same numbers). Pass a key and use tracegrad.random "
                    "(tracegrad.random.normal(key, shape)) for new numbers on each call.",
                    FrozenRandomWarning, stacklevel=2)
        return original(*args, **kwargs)
    return wrapper


@contextlib.contextmanager
def watching(fn, name: str):
    """While the block runs, NumPy random calls of this thread warn about `fn` (`name`)."""
    global _active
    stack = _local.__dict__.setdefault("tracing", [])
    stack.append((fn, name))
    with _lock:
        if _active == 0:
            for n in _NAMES:
                original = _originals[n] = getattr(np.random, n)
                if _wrappers.get(n, (None,))[0] is not original:
                    _wrappers[n] = (original, _wrap(n, original))
                setattr(np.random, n, _wrappers[n][1])
        _active += 1
    try:
        yield
    finally:
        stack.pop()
        with _lock:
            _active -= 1
            if _active == 0:
                for n, f in _originals.items():
                    setattr(np.random, n, f)
                _originals.clear()
