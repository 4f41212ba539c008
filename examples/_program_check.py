"""What the program examples print: a program's values through tracegrad against NumPy's,
and its gradients against float64 central differences of NumPy's own run."""

from __future__ import annotations

import numpy as np

import tracegrad as tg


def central_difference(f, args, argnum, h=1e-6):
    """d sum(f(*args)) / d args[argnum], one coordinate at a time, in float64 NumPy."""
    x = np.array(args[argnum], dtype=np.float64)
    grad = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[i] = h
        hi = [*args[:argnum], x + step, *args[argnum + 1:]]
        lo = [*args[:argnum], x - step, *args[argnum + 1:]]
        grad[i] = (_total(f(*hi)) - _total(f(*lo))) / (2 * h)
    return grad


def _total(out):
    return sum(np.sum(o) for o in out) if isinstance(out, tuple) else np.sum(out)


def check(name, program, reference, args, argnums, static_argnums=(), backend=None):
    """Print and return the largest |tracegrad - NumPy| of the values and the largest
    relative gradient error against central differences."""
    compiled = tg.function(program, static_argnums=static_argnums, backend=backend)
    got, want = compiled(*args), reference(*args)
    got, want = (got, want) if isinstance(want, tuple) else ((got,), (want,))
    value_err = max(float(np.max(np.abs(np.asarray(g) - w))) for g, w in
                    zip(got, want, strict=True))

    def total(*a):
        out = program(*a)
        return sum(tg.numpy.sum(o) for o in out) if isinstance(out, tuple) else \
            tg.numpy.sum(out)

    grads = tg.function(tg.grad(total, argnums=argnums), static_argnums=static_argnums,
                        backend=backend)(*args)
    grads = grads if isinstance(grads, tuple) else (grads,)
    grad_err = 0.0
    for k, g in zip(argnums, grads, strict=True):
        fd = central_difference(reference, args, k)
        grad_err = max(grad_err, float(np.max(np.abs(np.asarray(g) - fd))
                                       / max(1.0, float(np.max(np.abs(fd))))))
    print(f"{name}: max |tracegrad - NumPy| = {value_err:.1e}; "
          f"gradient vs central differences: max rel err {grad_err:.1e}")
    return value_err, grad_err
