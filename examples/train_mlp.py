"""Train a small MLP classifier with a compiled value-and-gradient step.

`tg.value_and_grad` differentiates the loss; `tg.optimizers.sgd` updates the tree of
parameters (functionally: the optimizer's state is an argument and a result);
`tg.function` compiles the whole update (forward, backward and the SGD step) into one
kernel, traced once.

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


optimizer = tg.optimizers.sgd(0.5)


@tg.function
def step(params, state, x, labels):
    value, grads = tg.value_and_grad(loss)(params, x, labels)
    params, state = optimizer.update(grads, state, params)
    return params, state, value


def accuracy(params, x, labels):
    h = x
    for layer in params[:-1]:
        h = np.tanh(h @ layer["w"] + layer["b"])
    return np.mean(np.argmax(h @ params[-1]["w"] + params[-1]["b"], axis=1) == labels)


rng = np.random.default_rng(0)
x, labels = spirals(rng)

params = init(rng, [2, 32, 32, 2])
state = optimizer.init(params)
start = time.perf_counter()
params, state, value = step(params, state, x, labels)  # traces and compiles once
compile_s = time.perf_counter() - start

steps = int(os.environ.get("TRAIN_STEPS", "3000"))
start = time.perf_counter()
for i in range(steps):
    params, state, value = step(params, state, x, labels)
    if i % 1000 == 0:
        print(f"step {i:5d}  loss {value:.4f}  accuracy {accuracy(params, x, labels):.3f}")
elapsed = time.perf_counter() - start
print(f"step {i:5d}  loss {value:.4f}  accuracy {accuracy(params, x, labels):.3f}")
print(f"first step (trace + compile) {compile_s:.2f} s; then {elapsed / steps * 1e6:.0f} us per step;"
      f" traced {step.tracing_count} time(s)")
