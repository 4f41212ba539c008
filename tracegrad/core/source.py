"""Where in the user's code an op was created: the first frame outside tracegrad."""

from __future__ import annotations

import os
import sys

import numpy as np

from tracegrad.core.state import state
from tracegrad.errors import TracegradError

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_SKIP_DIRS = (_PACKAGE_DIR, os.path.dirname(np.__file__) + os.sep)
_SKIP_FILES = ("contextlib.py", "functools.py")


def _skipped(filename: str) -> bool:
    return (
        filename.startswith(_SKIP_DIRS)
        or filename.startswith("<frozen")
        or filename.endswith(_SKIP_FILES)
    )


def user_frame():
    """The innermost frame that is not tracegrad's (nor NumPy's dispatch), or None."""
    f = sys._getframe(1)
    while f is not None and _skipped(f.f_code.co_filename):
        f = f.f_back
    return f


def user_location() -> str:
    """`"file.py:LINE"` of the user's code that is running, or `"<unknown>"`; while a
    transform re-emits a traced op (`state.source`), the line that created that op."""
    if state.source is not None:
        return state.source
    f = user_frame()
    if f is None:
        return "<unknown>"
    return f"{f.f_code.co_filename}:{f.f_lineno}"


TracegradError.locate = staticmethod(user_location)


def short_location(location: str) -> str:
    """`location` with the directory shortened to the file's base name."""
    path, _, line = location.rpartition(":")
    if not path:
        return location
    return f"{os.path.basename(path)}:{line}"
