"""Fitting the hyper-parameters of a Gaussian process by gradient: the negative log
marginal likelihood of noisy observations under a squared-exponential kernel, written with
`tnp.linalg.cholesky`, `tracegrad.scipy.linalg.cho_solve` and `tnp.linalg.slogdet`, is
minimized over the log length scale, log signal amplitude and log noise level by BFGS
(`tracegrad.scipy.optimize.minimize`, which compiles its value and gradient). The gradient
is checked against central differences of the same function in plain NumPy/SciPy, and the
fitted model predicts held-out points.

Run: python examples/gaussian_process.py      (GP_POINTS=... for another data size)
"""

import os

import numpy as np
import scipy.linalg

import tracegrad as tg
import tracegrad.numpy as tnp
import tracegrad.scipy.linalg as tsl
from tracegrad.scipy.optimize import minimize

TRUE = {"log_length": np.log(0.7), "log_amplitude": np.log(1.5), "log_noise": np.log(0.1)}


def kernel(lib, x1, x2, params):
    """The squared-exponential covariance `amplitude^2 exp(-|x1 - x2|^2 / (2 length^2))`."""
    d2 = (x1[:, None] - x2[None, :]) ** 2
    return lib.exp(2 * params["log_amplitude"] - 0.5 * d2 * lib.exp(-2 * params["log_length"]))


def covariance(lib, x, params):
    k = kernel(lib, x, x, params)
    return k + (lib.exp(2 * params["log_noise"]) + 1e-8) * lib.eye(x.shape[0])


def negative_log_likelihood(params, x, y):
    """`y^T K^-1 y / 2 + log det K / 2 + n log(2 pi) / 2`, K the covariance of the
    observations."""
    k = covariance(tnp, x, params)
    factor = tnp.linalg.cholesky(k)
    alpha = tsl.cho_solve((factor, True), y)
    _, logdet = tnp.linalg.slogdet(k)
    return 0.5 * y @ alpha + 0.5 * logdet + 0.5 * x.shape[0] * np.log(2 * np.pi)


def reference_nll(params, x, y):
    """The same function in NumPy and SciPy (the finite-difference oracle)."""
    k = covariance(np, x, params)
    c = scipy.linalg.cho_factor(k, lower=True)
    return (0.5 * y @ scipy.linalg.cho_solve(c, y) + np.sum(np.log(np.diag(c[0])))
            + 0.5 * x.shape[0] * np.log(2 * np.pi))


def predict(params, x, y, x_new):
    """The posterior mean at `x_new`."""
    k = covariance(tnp, x, params)
    alpha = tsl.cho_solve(tsl.cho_factor(k, lower=True), y)
    return kernel(tnp, x_new, x, params) @ alpha


def main():
    rng = np.random.default_rng(0)
    n = int(os.environ.get("GP_POINTS", "200"))
    x_all = np.sort(rng.uniform(-4.0, 4.0, size=2 * n))
    k_true = covariance(np, x_all, TRUE)
    f_all = np.linalg.cholesky(k_true) @ rng.standard_normal(2 * n)
    x, y = x_all[::2], f_all[::2]
    x_test, y_test = x_all[1::2], f_all[1::2]

    start = {"log_length": np.float64(0.0), "log_amplitude": np.float64(0.0),
             "log_noise": np.float64(np.log(0.5))}
    grad = tg.function(tg.grad(negative_log_likelihood))(start, x, y)
    worst = 0.0
    for name in start:
        h = 1e-5
        up, down = dict(start), dict(start)
        up[name], down[name] = start[name] + h, start[name] - h
        numeric = (reference_nll(up, x, y) - reference_nll(down, x, y)) / (2 * h)
        worst = max(worst, abs(float(grad[name]) - numeric) / max(1.0, abs(numeric)))
    print(f"gradient vs central differences: max relative error {worst:.2e}")

    result = minimize(negative_log_likelihood, start, args=(x, y), method="BFGS")
    fitted = result.x
    print(f"negative log likelihood {float(reference_nll(start, x, y)):.4f} -> "
          f"{result.fun:.4f} in {result.nit} BFGS iterations ({result.message})")
    for name in start:
        print(f"  {name[4:]:9s} fitted {np.exp(fitted[name]):.4f}   true {np.exp(TRUE[name]):.4f}")
    mean = tg.function(predict)(fitted, x, y, x_test)
    rmse = float(np.sqrt(np.mean((np.asarray(mean) - y_test) ** 2)))
    start_rmse = float(np.sqrt(np.mean((np.asarray(
        tg.function(predict)(start, x, y, x_test)) - y_test) ** 2)))
    print(f"held-out RMSE {start_rmse:.4f} (start) -> {rmse:.4f} (fitted)")


if __name__ == "__main__":
    main()
