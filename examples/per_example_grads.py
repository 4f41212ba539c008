"""Per-example gradients of an MLP's loss with `tg.vmap(tg.grad(loss))`, against a loop.

`tg.vmap(tg.grad(loss), in_axes=(None, 0, 0))` shares the parameters and maps the data:
one batched gradient graph, compiled once, instead of one `tg.grad` call per example.

Run: python examples/per_example_grads.py
"""

import time

import numpy as np

import tracegrad as tg
import tracegrad.numpy as tnp


def loss(params, x, y):
    """The logistic loss of a 2-layer tanh MLP on one example `x` [d] with label y = +-1."""
    h = tnp.tanh(params["w1"] @ x + params["b1"])
    logit = tnp.dot(params["w2"], h) + params["b2"]
    return tnp.log1p(tnp.exp(-y * logit))


def median_time(f, repeats=7):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        f()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


rng = np.random.default_rng(0)
batch, d, hidden = 256, 8, 16
params = {"w1": rng.standard_normal((hidden, d)) / np.sqrt(d), "b1": np.zeros(hidden),
          "w2": rng.standard_normal(hidden) / np.sqrt(hidden), "b2": np.float64(0.0)}
x = rng.standard_normal((batch, d))
y = np.sign(x[:, 0] + 0.5 * rng.standard_normal(batch))

grad = tg.grad(loss)
per_example = tg.vmap(grad, in_axes=(None, 0, 0))


def loop():
    grads = [grad(params, x[i], y[i]) for i in range(batch)]
    return {k: np.stack([g[k] for g in grads]) for k in params}


start = time.perf_counter()
vmapped = per_example(params, x, y)
first_s = time.perf_counter() - start
looped = loop()

print(f"per-example gradients of a {d}-{hidden}-1 tanh MLP's loss, batch {batch}, float64")
for k in params:
    assert vmapped[k].shape == (batch,) + np.shape(params[k])
    assert np.allclose(vmapped[k], looped[k], rtol=1e-12, atol=1e-15), k
    err = np.max(np.abs(vmapped[k] - looped[k]))
    print(f"  d loss / d {k:2s} {str(vmapped[k].shape):13s} max |vmap - loop| = {err:.1e}")
total = tg.grad(lambda p: tnp.sum(tg.vmap(loss, in_axes=(None, 0, 0))(p, x, y)))(params)
assert all(np.allclose(total[k], vmapped[k].sum(0), rtol=1e-12, atol=1e-15) for k in params)
print("  summed over the batch they equal the gradient of the summed loss")

vmap_s = median_time(lambda: per_example(params, x, y))
loop_s = median_time(loop)
print(f"first vmap call (trace + compile, or load from the disk cache) {first_s:.2f} s")
print(f"vmap(grad) {vmap_s * 1e3:.3f} ms, Python loop of grad {loop_s * 1e3:.2f} ms"
      f" (median of 7): {loop_s / vmap_s:.0f}x speed-up")
