"""Plain NumPy code, traced unchanged: NumPy calls on tg.Tensors dispatch to tracegrad.

The function below is ordinary NumPy (a softmax regression loss). tg.function traces it
into a graph, tg.grad differentiates it, and the same function still runs on NumPy arrays.
"""

import numpy as np

import tracegrad as tg
import tracegrad.numpy as tnp


def loss(w, x, labels):
    logits = x @ w                                          # np.matmul dispatches
    logits = logits - np.max(logits, axis=1, keepdims=True)
    log_probs = logits - np.log(np.sum(np.exp(logits), axis=1, keepdims=True))
    picked = np.take_along_axis(log_probs, labels[:, None], axis=1)
    return -np.mean(picked)


rng = np.random.default_rng(0)
x = rng.standard_normal((8, 3))
w = rng.standard_normal((3, 4))
labels = rng.integers(0, 4, size=8)

print("NumPy:     ", loss(w, x, labels))
print("tg.function:", tg.function(loss)(w, x, labels))
print(tg.trace(loss)(w, x, labels))

grad_w = tg.grad(loss)(w, x, labels)
step = 1e-6
e = np.zeros_like(w)
e[0, 0] = step
print("d loss / d w[0, 0]:", grad_w[0, 0],
      "(finite difference:", (loss(w + e, x, labels) - loss(w - e, x, labels)) / (2 * step), ")")

# Functional updates and indexing work on tensors in NumPy style too.
w_t = tg.constant(w)
print(tnp.at(w_t)[0, ::2].set(0.0)[0])
