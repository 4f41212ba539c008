"""Model functions with no side effects on import, for `tracegrad dump` and the benchmarks.

    tracegrad dump examples/models.py:mlp_loss --arg f64[4,8] --arg f64[8] --arg f64[8,3] \
        --arg f64[16,4] --arg f64[16,3] --transform grad --argnums 0,1,2 --stage optimized
"""

import tracegrad.nn as nn
import tracegrad.numpy as tnp


def mlp_loss(w1, b1, w2, x, onehot):
    """Mean softmax cross-entropy of a one-hidden-layer tanh network."""
    h = tnp.tanh(x @ w1 + b1)
    return -tnp.mean(tnp.sum(nn.log_softmax(h @ w2) * onehot, axis=1))


def rosenbrock(x):
    """The Rosenbrock function of a vector."""
    return tnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)
