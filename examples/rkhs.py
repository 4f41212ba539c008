"""A kernel regression whose kernel is a primitive of its own (the pattern of autograd's
`rkhs` example): the Gaussian kernel matrix is NumPy code made a tracegrad primitive with
`tracegrad.extend`, with its vector-Jacobian products given by hand; the fit (the
kernel weights and the log length scale) is plain gradient descent on a compiled step.

Run: python examples/rkhs.py
"""

import os

import numpy as np

import tracegrad as tg
import tracegrad.numpy as tnp


@tg.extend.primitive
def gaussian_kernel(x, y, log_scale):
    """k[i, j] = exp(-|x_i - y_j|^2 / (2 exp(2 log_scale))), computed in NumPy."""
    d2 = np.sum((x[:, None, :] - y[None, :, :]) ** 2, axis=-1)
    return np.exp(-0.5 * d2 * np.exp(-2.0 * log_scale))


def _kernel_vjp_x(k, x, y, log_scale):
    def vjp(g):  # d k_ij / d x_i = -k_ij (x_i - y_j) / s^2
        w = g * k * tnp.exp(-2.0 * log_scale)
        return -(tnp.sum(w, axis=1)[:, None] * x - w @ y)
    return vjp


def _kernel_vjp_y(k, x, y, log_scale):
    def vjp(g):
        w = g * k * tnp.exp(-2.0 * log_scale)
        return -(tnp.sum(w, axis=0)[:, None] * y - w.T @ x)
    return vjp


def _kernel_vjp_scale(k, x, y, log_scale):
    def vjp(g):  # d k_ij / d log_scale = k_ij |x_i - y_j|^2 / s^2
        d2 = tnp.sum((x[:, None, :] - y[None, :, :]) ** 2, axis=-1)
        return tnp.sum(g * k * d2) * tnp.exp(-2.0 * log_scale)
    return vjp


tg.extend.defvjp(gaussian_kernel, _kernel_vjp_x, _kernel_vjp_y, _kernel_vjp_scale)

rng = np.random.default_rng(0)
n = int(os.environ.get("RKHS_POINTS", "40"))
inputs = np.sort(rng.uniform(-3.0, 3.0, size=(n, 1)), axis=0)
targets = np.sin(2.0 * inputs[:, 0]) + 0.05 * rng.normal(size=n)


train, held_out = slice(0, None, 2), slice(1, None, 2)


def loss(params, x, t):
    """Squared error on the held-out points of the function fitted to the others, with an
    RKHS-norm penalty: the length scale is chosen by the held-out error."""
    xt, xh = x[train], x[held_out]
    k_train = gaussian_kernel(xt, xt, params["log_scale"])
    predicted = gaussian_kernel(xh, xt, params["log_scale"]) @ params["alpha"]
    fitted = k_train @ params["alpha"]
    return (tnp.mean((predicted - t[held_out]) ** 2) + tnp.mean((fitted - t[train]) ** 2)
            + 1e-3 * params["alpha"] @ k_train @ params["alpha"])


@tg.function
def step(params, x, t):
    value, grads = tg.value_and_grad(loss)(params, x, t)
    return {k: params[k] - 0.2 * grads[k] for k in params}, value


def main():
    params = {"alpha": np.zeros(n // 2), "log_scale": np.float64(0.0)}
    steps = int(os.environ.get("RKHS_STEPS", "500"))
    first = None
    for _ in range(steps):
        params, value = step(params, inputs, targets)
        first = value if first is None else first
    print(f"loss {first:.4f} -> {value:.4f} after {steps} steps; length scale "
          f"{np.exp(params['log_scale']):.3f}; traced {step.tracing_count} time(s)")


if __name__ == "__main__":
    main()
