"""tracegrad.nn: activation functions and friends, written to be numerically stable.

Every function is a composite of primitives (`logistic`, `erf`, `log1p`, ...), so it traces,
differentiates and vectorizes like any other code; integer input is computed in float64.
Nothing overflows for |x| ~ 1000: the exponentials only ever see non-positive arguments.
"""

from __future__ import annotations

import math

import numpy as np

import tracegrad.numpy as tnp
from tracegrad import ops
from tracegrad.core import dtypes
from tracegrad.errors import DTypeError
from tracegrad.numpy._core import dtype_of, read, ufunc_operands

__all__ = [
    "elu",
    "gelu",
    "log_sigmoid",
    "log_softmax",
    "logsumexp",
    "one_hot",
    "relu",
    "sigmoid",
    "softmax",
    "softplus",
]


def _float(x):
    """`x` in the float dtype NumPy's `exp` would compute it in (int -> float64)."""
    (x,), _ = ufunc_operands(np.exp, "nn", x)
    return x


def sigmoid(x):
    """`1 / (1 + exp(-x))`, elementwise (the `logistic` primitive: exact in both tails)."""
    return ops.logistic(_float(x))


def relu(x):
    """`max(x, 0)`, elementwise (NaN stays NaN); its derivative at 0 is 0, as in JAX,
    TensorFlow and PyTorch."""
    x = tnp.asarray(x)
    keep = tnp.logical_or(tnp.greater(x, 0), tnp.isnan(x))
    return tnp.where(keep, x, tnp.zeros_like(x))


def softplus(x):
    """`log(1 + exp(x))`, elementwise, without overflow: `x + log1p(exp(-x))` above 0,
    `log1p(exp(x))` elsewhere; each branch reads only its own side of 0, so derivatives of
    every order are exact and finite, at 0 too."""
    x = _float(x)
    positive = tnp.greater(x, 0.0)
    zero = tnp.zeros_like(x)
    above, below = tnp.where(positive, x, zero), tnp.where(positive, zero, x)
    return tnp.where(positive, tnp.add(above, ops.log1p(ops.exp(ops.neg(above)))),
                     ops.log1p(ops.exp(below)))


def log_sigmoid(x):
    """`log(sigmoid(x))`, elementwise, as `-softplus(-x)`."""
    return ops.neg(softplus(ops.neg(_float(x))))


def elu(x, alpha=1.0):
    """`x` where `x > 0`, else `alpha * (exp(x) - 1)`, elementwise."""
    x = _float(x)
    negative = tnp.minimum(x, 0.0)
    return tnp.where(tnp.greater(x, 0.0), x, tnp.multiply(alpha, ops.expm1(negative)))


def gelu(x, approximate=False):
    """The Gaussian error linear unit `x * Phi(x)`: exact with `erf`, or the tanh
    approximation `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x**3)))`."""
    x = _float(x)
    if approximate:
        inner = tnp.multiply(math.sqrt(2.0 / math.pi),
                             tnp.add(x, tnp.multiply(0.044715, tnp.power(x, 3))))
        return tnp.multiply(tnp.multiply(0.5, x), tnp.add(1.0, ops.tanh(inner)))
    cdf = tnp.multiply(0.5, tnp.add(1.0, ops.erf(tnp.multiply(x, 1.0 / math.sqrt(2.0)))))
    return tnp.multiply(x, cdf)


def _shifted(x, axis):
    """`x - max(x, axis)` with the max held constant for gradients (and 0 where it is not
    finite, so all -inf rows stay -inf instead of NaN)."""
    m = ops.stop_gradient(tnp.max(x, axis=axis, keepdims=True))
    m = tnp.where(tnp.isfinite(m), m, tnp.zeros_like(m))
    return tnp.subtract(x, m), m


def softmax(x, axis=-1):
    """`exp(x) / sum(exp(x), axis)`, computed on `x - max(x)`."""
    x = _float(x)
    e = ops.exp(_shifted(x, axis)[0])
    return tnp.true_divide(e, tnp.sum(e, axis=axis, keepdims=True))


def log_softmax(x, axis=-1):
    """`x - logsumexp(x, axis)`, computed on `x - max(x)`."""
    x = _float(x)
    shifted = _shifted(x, axis)[0]
    return tnp.subtract(shifted, ops.log(tnp.sum(ops.exp(shifted), axis=axis, keepdims=True)))


def logsumexp(x, axis=None, keepdims=False):
    """`log(sum(exp(x), axis))`, as `m + log(sum(exp(x - m)))` with `m = max(x)`."""
    x = _float(x)
    shifted, m = _shifted(x, axis)
    out = tnp.add(ops.log(tnp.sum(ops.exp(shifted), axis=axis, keepdims=True)), m)
    if keepdims:
        return out
    return tnp.reshape(out, ()) if axis is None else tnp.squeeze(out, axis=axis)


def one_hot(labels, depth, dtype=dtypes.float64):
    """`labels[..., None] == arange(depth)` as `dtype` (float64 by default): a new last dim
    of size `depth`; labels outside `[0, depth)` give all-zero rows."""
    labels = read(labels)
    if not dtypes.is_int(dtype_of(labels)[0]):
        got = dtype_of(labels)[0].name
        raise DTypeError(f"one_hot: labels must be integers, got {got}")
    classes = tnp.arange(int(depth), dtype=dtype_of(labels)[0])
    return tnp.astype(tnp.equal(tnp.expand_dims(labels, -1), classes), dtype)
