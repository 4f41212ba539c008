"""Train a small MLP classifier with a compiled value-and-gradient step.

`tg.value_and_grad` differentiates the loss; `tg.function` compiles the whole update
(forward, backward and the SGD step) into one kernel, traced once.

Run: python examples/train_mlp.py
"""

import os
import time

import numpy as np

import tracegrad as tg
import tracegrad.nn as nn
import tracegrad.numpy as tnp
from spirals import spirals


def init(rng, sizes):
    params = []
    for n_in, n_out in zip(sizes[:-1], sizes[1:]):
        params.append({"w": rng.standard_normal((n_in, n_out)) / np.sqrt(n_in),
                       "b": np.zeros(n_out)})
    return params


def loss(params, x, labels):
    h = x
    for layer in params[:-1]:
        h = tnp.tanh(h @ layer["w"] + layer["b"])
    logits = h @ params[-1]["w"] + params[-1]["b"]
    onehot = nn.one_hot(labels, logits.shape[-1])
    return -tnp.mean(tnp.sum(nn.log_softmax(logits) * onehot, axis=-1))


@tg.function
def step(params, x, labels, lr):
    value, grads = tg.value_and_grad(loss)(params, x, labels)
    new = [{k: p[k] - lr * g[k] for k in p} for p, g in zip(params, grads)]
    return new, value


def accuracy(params, x, labels):
    h = x
    for layer in params[:-1]:
        h = np.tanh(h @ layer["w"] + layer["b"])
    return np.mean(np.argmax(h @ params[-1]["w"] + params[-1]["b"], axis=1) == labels)


rng = np.random.default_rng(0)
x, labels = spirals(rng)

params = init(rng, [2, 32, 32, 2])
start = time.perf_counter()
params, value = step(params, x, labels, 0.5)  # traces and compiles once
compile_s = time.perf_counter() - start

steps = int(os.environ.get("TRAIN_STEPS", "3000"))
start = time.perf_counter()
for i in range(steps):
    params, value = step(params, x, labels, 0.5)
    if i % 1000 == 0:
        print(f"step {i:5d}  loss {value:.4f}  accuracy {accuracy(params, x, labels):.3f}")
elapsed = time.perf_counter() - start
print(f"step {i:5d}  loss {value:.4f}  accuracy {accuracy(params, x, labels):.3f}")
print(f"first step (trace + compile) {compile_s:.2f} s; then {elapsed / steps * 1e6:.0f} us per step;"
      f" traced {step.tracing_count} time(s)")
