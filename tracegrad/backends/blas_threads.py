"""The BLAS thread policy of numba kernels (docs/numba.md, "BLAS threads").

Kernels call BLAS through SciPy's `scipy.linalg.cython_blas` (Numba's `np.dot` and
tracegrad's `_blas_` bindings alike), so the library behind it is the one whose threads
kernels use: the OpenBLAS bundled with SciPy's wheels (NumPy's wheels bundle another, which
this policy never touches), or the one BLAS a conda or system install shares. The policy:

- the library runs on at most `tg.config.num_threads` threads (and at most what it was
  given before tracegrad first used it: `OPENBLAS_NUM_THREADS`, a threadpoolctl limit):
  `sync` sets that when the first kernel's helpers load and whenever `num_threads` changes;
- inside a kernel, a product of fewer than `SMALL_PRODUCT` multiply-adds runs on one
  thread (the kernel lowers the library's count around that call and restores it), where
  OpenBLAS would wake its threads from 2^18 on and pay their synchronisation, and,
  with another process on the other cores, a wait for a thread the OS has not scheduled.

The count is set through the library's own symbol (`openblas_set_num_threads`,
`MKL_Set_Num_Threads`), not threadpoolctl's setter: that one acts only in the first thread
that calls it, and kernels compile and run in other threads too. threadpoolctl finds the
library and reads its count.
"""

from __future__ import annotations

import ctypes
import os
import threading

from tracegrad.backends import threads

# A product of fewer multiply-adds than this (a 256^3 product, ~1.3-1.8 ms on one core of
# the 2-core EPYC) runs its BLAS call on one thread. benchmarks/blas_threads.py measures the
# crossover (docs/performance.md, "BLAS threads and default settings"): on the loaded
# machine a second OpenBLAS thread made every product up to 512^3 4-1000x slower (each call
# waited tens of ms for the thread's time slice); only products that take milliseconds can
# win back such a wait.
SMALL_PRODUCT = 1 << 24

_LOCK = threading.Lock()
_found = False
_library = None  # (controller, get_threads ctypes fn, set_threads ctypes fn) or None
_ceiling = None  # the library's count before tracegrad first set it


class _DlInfo(ctypes.Structure):
    _fields_ = [("fname", ctypes.c_char_p), ("fbase", ctypes.c_void_p),
                ("sname", ctypes.c_char_p), ("saddr", ctypes.c_void_p)]


def _path_of_cython_blas_library() -> str | None:
    """The file of the shared library whose dgemm `scipy.linalg.cython_blas` calls."""
    import scipy.linalg.cython_blas as cython_blas

    handle = ctypes.CDLL(cython_blas.__file__)
    for name in ("scipy_dgemm_", "dgemm_", "scipy_dgemm_64_", "dgemm_64_", "dgemm"):
        try:
            fn = getattr(handle, name)
        except AttributeError:
            continue
        info = _DlInfo()
        try:
            found = ctypes.CDLL(None).dladdr(ctypes.cast(fn, ctypes.c_void_p), ctypes.byref(info))
        except AttributeError:  # pragma: no cover - platforms without dladdr
            return None
        return os.path.realpath(info.fname.decode()) if found and info.fname else None
    return None


def _symbols(controller):
    """`(get, set)` ctypes functions of the library's thread count, or None."""
    lib = controller.dynlib
    if controller.internal_api == "openblas":
        for prefix in ("", "scipy_"):
            for suffix in ("", "64_", "_64"):
                names = (f"{prefix}openblas_get_num_threads{suffix}",
                         f"{prefix}openblas_set_num_threads{suffix}")
                try:  # a ctypes library's symbols, by name
                    get, set_ = lib[names[0]], lib[names[1]]
                except AttributeError:
                    continue
                return _typed(get, set_)
    elif controller.internal_api == "mkl":
        return _typed(lib.MKL_Get_Max_Threads, lib.MKL_Set_Num_Threads)
    return None


def _typed(get, set_):
    get.restype, get.argtypes = ctypes.c_int, []
    set_.restype, set_.argtypes = None, [ctypes.c_int]
    return get, set_


def _find():
    global _found, _library
    _found = True
    try:
        import threadpoolctl

        path = _path_of_cython_blas_library()
        if path is None:
            return
        for controller in threadpoolctl.ThreadpoolController().lib_controllers:
            if os.path.realpath(controller.filepath) == path and controller.user_api == "blas":
                symbols = _symbols(controller)
                if symbols is not None:
                    _library = (controller, *symbols)
                return
    except (ImportError, OSError):  # no SciPy BLAS or no threadpoolctl: nothing to control
        _library = None


def library():
    """threadpoolctl's controller of the BLAS library kernels call, or None when it is not
    one whose thread count the policy can set (OpenBLAS, MKL)."""
    with _LOCK:
        if not _found:
            _find()
    return _library[0] if _library else None


def library_threads() -> int | None:
    """The thread count the kernels' BLAS library uses now (None: not controlled)."""
    library()
    return _library[1]() if _library else None


def addresses() -> tuple[int, int] | None:
    """The C addresses of the library's `int get_num_threads(void)` and
    `void set_num_threads(int)`, for kernels to call (None: not controlled)."""
    library()
    if not _library:
        return None
    return tuple(ctypes.cast(f, ctypes.c_void_p).value for f in _library[1:])


def sync() -> None:
    """Set the library's thread count to `tg.config.num_threads`, capped by the count it
    had before tracegrad first set it."""
    global _ceiling
    library()
    if not _library:
        return
    with _LOCK:
        get, set_ = _library[1:]
        if _ceiling is None:
            _ceiling = get()
        want = max(1, min(_ceiling, threads.num_threads))
        if get() != want:
            set_(want)


def resync() -> None:
    """`sync` if the policy is in use (a kernel's helpers loaded); SciPy is not imported
    otherwise."""
    if _found:
        sync()
