"""TensorFlow-style eager autodiff: Variables, GradientTape, custom gradients.

Run: python examples/eager_tape.py
"""

import numpy as np

import tracegrad as tg
import tracegrad.numpy as tnp

# A linear model fitted eagerly: operations on trainable Variables are recorded.
rng = np.random.default_rng(0)
x = rng.standard_normal((64, 3))
y = x @ np.array([1.5, -2.0, 0.5]) + 0.3

w = tg.Variable(np.zeros(3), name="w")
b = tg.Variable(0.0, name="b")
for step in range(200):
    with tg.GradientTape() as tape:
        loss = tnp.mean((x @ w + b - y) ** 2)
    gw, gb = tape.gradient(loss, [w, b])
    w.assign_sub(0.1 * gw)
    b.assign_sub(0.1 * gb)
print("w =", w.numpy().round(4), " b =", round(float(b.numpy()), 4), " loss =", float(loss))

# Higher order with nested tapes: at x = 3, d/dx x**3 = 27 and d2/dx2 x**3 = 18.
x0 = tg.constant(3.0)
with tg.GradientTape() as outer:
    outer.watch(x0)
    with tg.GradientTape() as inner:
        inner.watch(x0)
        y0 = x0 ** 3
    dy = inner.gradient(y0, x0)
print("dy/dx =", float(dy), " d2y/dx2 =", float(outer.gradient(dy, x0)))


# A numerically stable gradient for log(1 + exp(x)), as in the seed's example.
@tg.custom_gradient
def log1pexp(v):
    e = tnp.exp(v)

    def grad_fn(upstream):
        return upstream * (1 - 1 / (1 + e))

    return tnp.log(1 + e), grad_fn


v = tg.constant(100.0)
with tg.GradientTape() as tape:
    tape.watch(v)
    out = log1pexp(v)
print("d/dx log1pexp(100) =", float(tape.gradient(out, v)))

# A compiled function under a tape is recorded as one op with a compiled gradient.
fast_loss = tg.function(lambda w_, b_: tnp.mean((x @ w_ + b_ - y) ** 2))
w2 = tg.Variable(np.ones(3), name="w2")
with tg.GradientTape() as tape:
    value = fast_loss(w2, b)
gw2 = tape.gradient(value, w2).numpy()
expected = 2 * x.T @ (x @ w2.numpy() + b.numpy() - y) / len(y)
print("compiled loss", round(float(value), 6), " gradient w.r.t. w2", gw2.round(6),
      " analytic", expected.round(6))
