"""Elementwise math with NumPy names and semantics (broadcasting, NEP 50 promotion)."""

from __future__ import annotations

from tracegrad import ops
from tracegrad.numpy._core import elementwise, read, unary_float


def add(x1, x2):
    """Elementwise `x1 + x2` (NumPy broadcasting and promotion)."""
    return elementwise(ops.add_p, x1, x2)


def subtract(x1, x2):
    """Elementwise `x1 - x2`."""
    return elementwise(ops.sub_p, x1, x2)


def multiply(x1, x2):
    """Elementwise `x1 * x2`."""
    return elementwise(ops.mul_p, x1, x2)


def true_divide(x1, x2):
    """Elementwise `x1 / x2`; integer operands give float64."""
    return elementwise(ops.div_p, x1, x2, min_kind="float")


divide = true_divide


def negative(x):
    """Elementwise `-x`."""
    return ops.neg(read(x))


def sin(x):
    """Elementwise sine (radians); integer input gives float64."""
    return unary_float(ops.sin_p, x)


def cos(x):
    """Elementwise cosine."""
    return unary_float(ops.cos_p, x)


def exp(x):
    """Elementwise `e ** x`."""
    return unary_float(ops.exp_p, x)


def log(x):
    """Elementwise natural logarithm."""
    return unary_float(ops.log_p, x)


def tanh(x):
    """Elementwise hyperbolic tangent."""
    return unary_float(ops.tanh_p, x)


def sqrt(x):
    """Elementwise non-negative square root."""
    return unary_float(ops.sqrt_p, x)
