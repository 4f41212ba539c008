"""tracegrad.numpy: NumPy-compatible functions built from tracegrad primitives.

Called on tensors (traced or eager) they build or run ops; called on plain NumPy input
with nothing recording they return NumPy.
"""

from tracegrad.numpy._math import (
    add,
    cos,
    divide,
    exp,
    log,
    multiply,
    negative,
    sin,
    sqrt,
    subtract,
    tanh,
    true_divide,
)
from tracegrad.numpy._reductions import sum
from tracegrad.numpy._shape import reshape, stack, transpose

from tracegrad.numpy import _dispatch, _methods  # noqa: E402

_methods.install()
_dispatch.install()
