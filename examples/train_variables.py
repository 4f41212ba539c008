"""Train the MLP of train_mlp.py TensorFlow-style: parameters and optimizer state in
`tg.Variable`s, a `GradientTape` inside a `tg.function`, SGD with momentum from
`tg.optimizers` applied to the Variables (Keras's `apply_gradients`).

The whole step (forward, backward, and the updates of the 6 parameters and their 6 momentum
slots) is traced once and compiled into one kernel; each call writes the new values into
the Variables' own buffers when it returns (docs/variables.md).

Run: python examples/train_variables.py
"""

import os
import time

import numpy as np

import tracegrad as tg
import tracegrad.nn as nn
import tracegrad.numpy as tnp
from spirals import spirals


class MLP:
    def __init__(self, rng, sizes):
        self.layers = []
        for n_in, n_out in zip(sizes[:-1], sizes[1:]):
            self.layers.append((tg.Variable(rng.standard_normal((n_in, n_out)) / np.sqrt(n_in)),
                                tg.Variable(np.zeros(n_out))))

    @property
    def variables(self):
        return [v for layer in self.layers for v in layer]

    def __call__(self, x):
        for w, b in self.layers[:-1]:
            x = tnp.tanh(x @ w + b)
        w, b = self.layers[-1]
        return x @ w + b


def cross_entropy(logits, labels):
    onehot = nn.one_hot(labels, logits.shape[-1])
    return -tnp.mean(tnp.sum(nn.log_softmax(logits) * onehot, axis=-1))


rng = np.random.default_rng(0)
x, labels = spirals(rng)

model = MLP(rng, [2, 32, 32, 2])
optimizer = tg.optimizers.sgd(0.1, momentum=0.9)  # slots: a momentum Variable per parameter


@tg.function
def train_step(x, labels):
    with tg.GradientTape() as tape:
        loss = cross_entropy(model(x), labels)
    grads = tape.gradient(loss, model.variables)
    optimizer.apply(grads, model.variables)
    return loss


def accuracy(x, labels):
    return np.mean(np.argmax(model(tg.constant(x)).numpy(), axis=1) == labels)


start = time.perf_counter()
value = train_step(x, labels)  # traces and compiles once
compile_s = time.perf_counter() - start

steps = int(os.environ.get("TRAIN_STEPS", "3000"))
start = time.perf_counter()
for i in range(steps):
    value = train_step(x, labels)
    if i % 1000 == 0:
        print(f"step {i:5d}  loss {value:.4f}  accuracy {accuracy(x, labels):.3f}")
elapsed = time.perf_counter() - start
print(f"step {i:5d}  loss {value:.4f}  accuracy {accuracy(x, labels):.3f}")
graph = train_step.get_concrete_function(x, labels).graph
assigns = sum(op.name == "assign" for op in graph.operations)
source = tg.compiled_source(graph)
kernels = source.count("\ndef ") - source.count("\ndef kernel_part")  # (a body made a part)
updates = int(optimizer.variables()[0].numpy())
print(f"{updates} updates; the traced step has {assigns} assign ops and "
      f"compiles to {kernels} kernel(s)")
print(f"first step (trace + compile) {compile_s:.2f} s; then {elapsed / steps * 1e6:.0f} us per step;"
      f" traced {train_step.tracing_count} time(s)")
