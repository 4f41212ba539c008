"""tracegrad.numpy: NumPy-compatible functions built from tracegrad primitives.

Called on tensors (traced or eager) they build or run ops; called on plain NumPy input
with nothing recording they return NumPy (rank 0 as a NumPy scalar). See docs/numpy.md.
"""

from tracegrad.numpy._creation import (
    arange,
    asarray,
    astype,
    eye,
    full,
    full_like,
    identity,
    linspace,
    ones,
    ones_like,
    zeros,
    zeros_like,
)
from tracegrad.numpy._einsum import einsum
from tracegrad.numpy._indexing import at, nonzero, take, take_along_axis
from tracegrad.numpy._matrix import diag, diagonal, trace, tril, triu
from tracegrad.numpy._pad import pad
from tracegrad.numpy._products import dot, inner, matmul, outer, tensordot, vdot
from tracegrad.numpy._reductions import (
    all,
    amax,
    amin,
    any,
    argmax,
    argmin,
    argsort,
    cumprod,
    cumsum,
    max,
    mean,
    min,
    prod,
    sort,
    std,
    sum,
    var,
)
from tracegrad.numpy._shape import (
    atleast_1d,
    atleast_2d,
    broadcast_to,
    concatenate,
    expand_dims,
    flip,
    hstack,
    moveaxis,
    ndim,
    ravel,
    repeat,
    reshape,
    shape,
    size,
    split,
    squeeze,
    stack,
    swapaxes,
    tile,
    transpose,
    vstack,
)
from tracegrad.numpy._ufuncs import (
    abs,
    absolute,
    add,
    arccos,
    arccosh,
    arcsin,
    arcsinh,
    arctan,
    arctan2,
    arctanh,
    around,
    bitwise_and,
    bitwise_not,
    bitwise_or,
    bitwise_xor,
    ceil,
    clip,
    cos,
    cosh,
    divide,
    equal,
    exp,
    exp2,
    expm1,
    floor,
    floor_divide,
    fmax,
    fmin,
    greater,
    greater_equal,
    invert,
    isfinite,
    isinf,
    isnan,
    less,
    less_equal,
    log,
    log1p,
    log2,
    log10,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    maximum,
    minimum,
    mod,
    multiply,
    negative,
    not_equal,
    positive,
    power,
    reciprocal,
    remainder,
    rint,
    round,
    sign,
    sin,
    sinh,
    sqrt,
    square,
    subtract,
    tan,
    tanh,
    true_divide,
    where,
)
from tracegrad.numpy import linalg  # noqa: E402
from tracegrad.core.dtypes import bool_, float32, float64, int32, int64  # noqa: E402

pi = 3.141592653589793
e = 2.718281828459045
inf = float("inf")
nan = float("nan")
newaxis = None

from tracegrad.numpy import _dispatch, _methods  # noqa: E402

_methods.install()
_dispatch.install()
