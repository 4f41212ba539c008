"""Every primitive, defined once with all its rules, and thin `bind` wrappers over them.

The wrappers (`ops.add(x, y)`, `ops.reduce_sum(x, axes=(0,))`) take arrays positionally and
static attributes as keywords; they do no broadcasting or promotion (that is
`tracegrad.numpy`'s job). Gradient rules are written with them.
"""

from tracegrad.core.op import REGISTRY, Primitive, get_primitive
from tracegrad.ops._families import (
    ALIGNED,
    BINARY,
    COMMUTATIVE,
    COMPARISONS,
    ELEMENTWISE,
    NONDIFFERENTIABLE,
    REDUCTIONS,
    UNARY,
)
from tracegrad.ops.api import *  # noqa: F403
from tracegrad.ops.api import __all__ as _api_all

__all__ = [
    "REGISTRY", "Primitive", "get_primitive", "ALIGNED", "BINARY", "COMMUTATIVE", "COMPARISONS",
    "ELEMENTWISE", "NONDIFFERENTIABLE", "REDUCTIONS", "UNARY", *_api_all,
]
