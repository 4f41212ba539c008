"""Logistic regression trained by gradient descent, the program of Numba's parallel
test suite, run by tracegrad: `lr_impl` of `numba/tests/test_parfors.py` (Numba 0.68.1),
a Python loop of `w -= np.dot(...)` updates, loaded from the installed package with only
`np` rebound to `tracegrad.numpy`. Differentiating its result differentiates through the
whole training loop: how the trained weights move with the data and the start point.

    python examples/logistic_descent.py
"""

import numpy as np
from _program_check import check
from numba.tests.test_parfors import lr_impl
from with_numpy import with_numpy

import tracegrad.numpy as tnp

train = with_numpy(lr_impl, tnp)


def data(rows=40, features=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(rows, features)) / np.sqrt(rows)
    w_true = rng.normal(size=features)
    Y = np.where(X @ w_true + 0.1 * rng.normal(size=rows) > 0, 1.0, -1.0)
    return Y, X, np.zeros(features), 20


def main():
    Y, X, w0, iterations = data()
    # lr_impl updates `w` in place in NumPy: the reference gets a copy
    check("lr_impl (20 steps of gradient descent, 40x4 data); d w / d (X, w0)", train,
          lambda Y, X, w, n: lr_impl(Y, X, np.array(w), n), (Y, X, w0, iterations),
          argnums=(1, 2), static_argnums=(3,))


if __name__ == "__main__":
    main()
