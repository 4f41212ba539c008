"""Float64 central differences, the reference the gradient tests check against."""

import numpy as np


def central_difference(f, x, h=1e-6):
    """d sum(f(x)) / dx at float64 array `x`, one coordinate at a time."""
    x = np.array(x, dtype=np.float64)
    grad = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[i] = h
        grad[i] = (np.sum(f(x + step)) - np.sum(f(x - step))) / (2 * h)
    return grad


def central_jacobian(f, x, h=1e-6):
    """d f(x) / dx at float64 array `x`, one coordinate at a time: `f(x).shape + x.shape`."""
    x = np.array(x, dtype=np.float64)
    y = np.asarray(f(x))
    jac = np.zeros(y.shape + x.shape)
    for i in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[i] = h
        jac[(...,) + i] = (np.asarray(f(x + step)) - np.asarray(f(x - step))) / (2 * h)
    return jac


def complex_gradient(loss, z, h=1e-6):
    """dL/dx + i dL/dy of a real `loss` at complex array `z` (z = x + iy), by central
    differences in the real and imaginary directions."""
    z = np.array(z, dtype=np.complex128)
    grad = np.zeros_like(z)
    for i in np.ndindex(z.shape):
        step = np.zeros_like(z)
        step[i] = h
        dx = (loss(z + step) - loss(z - step)) / (2 * h)
        dy = (loss(z + 1j * step) - loss(z - 1j * step)) / (2 * h)
        grad[i] = dx + 1j * dy
    return grad
