"""autograd's `autograd.scipy.signal.convolve(A, B, axes, dot_axes, mode)` (not SciPy's
API: it contracts `dot_axes` and convolves over `axes`) written over an engine's own n-d
convolution, the same code for every engine: `convolve = make(tnp, tracegrad.ops.conv)`,
or `make(jnp, conv)` with JAX's `lax.conv_general_dilated` (`jax_conv` below).

Result dims: A's other dims, then B's other dims, then the convolved dims, each of size
`full` A + B - 1, `same` A's, `valid` |A - B| + 1 (autograd's order and sizes)."""

from __future__ import annotations

import math


def _windows(s1, s2, mode):
    """(start, size) per convolved dim within the full convolution of sizes s1, s2."""
    if mode == "full":
        return [(0, a + b - 1) for a, b in zip(s1, s2, strict=True)]
    if mode == "same":
        return [((b - 1) // 2, a) for a, b in zip(s1, s2, strict=True)]
    if mode == "valid":
        return [(min(a, b) - 1, abs(a - b) + 1) for a, b in zip(s1, s2, strict=True)]
    raise ValueError(f"Mode {mode} undefined, it can be one of 'valid', 'full', and 'same'")


def make(np, conv):
    """autograd's convolve over `conv(lhs, rhs, padding)`: the correlation of images
    `lhs` (N, C_in, *spatial) with kernels `rhs` (C_out, C_in, *kernel) zero-padded by
    one (low, high) pair per spatial dim; `np` is the engine's NumPy."""

    def convolve(A, B, axes=None, dot_axes=((), ()), mode="full"):
        if axes is None:
            axes = [list(range(A.ndim)), list(range(A.ndim))]
        (conv_a, conv_b), (dot_a, dot_b) = axes, dot_axes
        other_a = [i for i in range(A.ndim) if i not in conv_a and i not in dot_a]
        other_b = [i for i in range(B.ndim) if i not in conv_b and i not in dot_b]
        s1 = [A.shape[i] for i in conv_a]
        s2 = [B.shape[i] for i in conv_b]
        lhs = np.transpose(A, other_a + list(dot_a) + list(conv_a))
        rhs = np.transpose(B, other_b + list(dot_b) + list(conv_b))
        n, co = math.prod(A.shape[i] for i in other_a), math.prod(B.shape[i] for i in other_b)
        ci = math.prod(A.shape[i] for i in dot_a)
        lhs = np.reshape(lhs, (n, ci, *s1))
        spatial = tuple(range(2, 2 + len(s2)))
        rhs = np.flip(np.reshape(rhs, (co, ci, *s2)), axis=spatial)  # a convolution
        windows = _windows(s1, s2, mode)
        padding = tuple((b - 1 - start, start + size - a) for a, b, (start, size) in
                        zip(s1, s2, windows, strict=True))
        out = conv(lhs, rhs, padding)
        shape = [A.shape[i] for i in other_a] + [B.shape[i] for i in other_b]
        return np.reshape(out, (*shape, *(size for _, size in windows)))

    return convolve


def tracegrad_conv(lhs, rhs, padding):
    import tracegrad

    return tracegrad.ops.conv(lhs, rhs, padding=padding)


def jax_conv(lhs, rhs, padding):
    from jax import lax

    return lax.conv_general_dilated(lhs, rhs, (1,) * len(padding), padding)
