"""Newton's method with `tg.hessian` and `tg.grad` on L2-regularised logistic regression.

Each step solves H dw = g with the exact Hessian and gradient of the loss, so the gradient
norm falls quadratically below 1e-10 in a handful of steps. A second Newton iteration in
plain NumPy, with the gradient and Hessian derived by hand, runs alongside as the check.

Run: python examples/newton.py
"""

import numpy as np

import tracegrad as tg
import tracegrad.numpy as tnp

LAM = 0.1


def loss(w, x, y):
    z = x @ w
    return tnp.mean(tnp.log1p(tnp.exp(z)) - y * z) + 0.5 * LAM * tnp.sum(w * w)


def numpy_grad(w, x, y):
    p = 1.0 / (1.0 + np.exp(-(x @ w)))
    return x.T @ (p - y) / len(y) + LAM * w


def numpy_hessian(w, x, y):
    p = 1.0 / (1.0 + np.exp(-(x @ w)))
    return (x.T * (p * (1.0 - p))) @ x / len(y) + LAM * np.eye(len(w))


rng = np.random.default_rng(0)
n, d = 200, 5
x = rng.standard_normal((n, d))
true_w = rng.standard_normal(d)
y = (rng.uniform(size=n) < 1.0 / (1.0 + np.exp(-(x @ true_w)))).astype(np.float64)

grad = tg.grad(loss)
hessian = tg.hessian(loss)

print(f"logistic regression, {n} samples x {d} features, lambda = {LAM}")
w = w_np = np.zeros(d)
for step in range(20):
    g, h = grad(w, x, y), hessian(w, x, y)
    np.testing.assert_allclose(g, numpy_grad(w_np, x, y), rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(h, numpy_hessian(w_np, x, y), rtol=1e-10, atol=1e-13)
    gnorm = np.linalg.norm(g)
    print(f"step {step}  loss {float(loss(w, x, y)):.15f}  |grad| {gnorm:.3e}")
    if gnorm < 1e-10:
        break
    w = w - tnp.linalg.solve(h, g)
    w_np = w_np - np.linalg.solve(numpy_hessian(w_np, x, y), numpy_grad(w_np, x, y))
assert gnorm < 1e-10, f"no convergence in {step} steps"

# The loss is LAM-strongly convex, so |w - w*| <= |grad| / LAM.
assert np.linalg.norm(numpy_grad(w, x, y)) < 1e-10
print(f"converged in {step} Newton steps: w = {np.array2string(w, precision=6)}")
print(f"NumPy Newton with hand-derived derivatives: max |w - w_numpy| = "
      f"{np.max(np.abs(w - w_np)):.1e}, hand-derived |grad| at w = "
      f"{np.linalg.norm(numpy_grad(w, x, y)):.1e}")
