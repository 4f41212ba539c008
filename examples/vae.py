"""Train a variational autoencoder with reparameterized `tracegrad.random.normal` samples.

The data are noisy points on a curved 2-D surface embedded in 32 dimensions (NumPy makes
them). An MLP encoder gives each point a Gaussian over a 2-D latent code (its mean and
log-variance from one output layer); the latent sample is
`mu + exp(logvar / 2) * normal(key)`, a smooth function of the encoder's outputs at a fixed
key, so autodiff differentiates through it; an MLP decoder maps it back, with a learned
noise scale. The loss is the negative ELBO: the Gaussian log-likelihood of the point
(`tracegrad.scipy.stats.norm.logpdf`) minus the KL divergence of the code's Gaussian from
the standard normal prior.

One `tg.function` holds the whole step (sample, ELBO, its gradient and Adam's update) and
is traced once: the key is an ordinary argument, and each step gets a fresh one from
`tg.random.split`, so the samples change without a retrace.

Run: python examples/vae.py
"""

import os
import time

import numpy as np

import tracegrad as tg
import tracegrad.numpy as tnp
from tracegrad import random as tr
from tracegrad.scipy import stats

DIM, LATENT, HIDDEN = 32, 2, 64


def make_data(rng, n):
    """`n` points of a curved 2-D surface in `DIM` dimensions, with noise of scale 0.05."""
    z = rng.standard_normal((n, LATENT))
    a = rng.standard_normal((LATENT, DIM))
    b = rng.uniform(0, 2 * np.pi, DIM)
    return np.sin(z @ a + b) + 0.05 * rng.standard_normal((n, DIM))


def init(rng):
    def dense(n_in, n_out):
        return {"w": rng.standard_normal((n_in, n_out)) / np.sqrt(n_in), "b": np.zeros(n_out)}

    return {"enc": dense(DIM, HIDDEN), "code": dense(HIDDEN, 2 * LATENT),
            "dec": dense(LATENT, HIDDEN),
            "out": dense(HIDDEN, DIM), "log_sigma": np.zeros(())}


def neg_elbo(params, x, key):
    """The negative ELBO per data point, averaged over the batch `x`, one sample per point."""
    h = tnp.tanh(x @ params["enc"]["w"] + params["enc"]["b"])
    code = h @ params["code"]["w"] + params["code"]["b"]
    mu, logvar = code[:, :LATENT], code[:, LATENT:]
    z = mu + tnp.exp(0.5 * logvar) * tr.normal(key, mu.shape)
    g = tnp.tanh(z @ params["dec"]["w"] + params["dec"]["b"])
    x_hat = g @ params["out"]["w"] + params["out"]["b"]
    log_likelihood = tnp.sum(stats.norm.logpdf(x, x_hat, tnp.exp(params["log_sigma"])), axis=1)
    kl = 0.5 * tnp.sum(tnp.exp(logvar) + mu**2 - 1.0 - logvar, axis=1)
    return tnp.mean(kl - log_likelihood)


optimizer = tg.optimizers.adam(3e-3)


@tg.function
def step(params, state, x, key):
    value, grads = tg.value_and_grad(neg_elbo)(params, x, key)
    params, state = optimizer.update(grads, state, params)
    return params, state, value


def main():
    rng = np.random.default_rng(0)
    data = make_data(rng, 2048)
    params = init(rng)
    state = optimizer.init(params)
    key = tr.key(0)
    batch = 256
    steps = int(os.environ.get("VAE_STEPS", "3000"))
    start = time.perf_counter()
    for i in range(steps + 1):
        key, sub = tr.split(key)
        rows = rng.choice(len(data), batch, replace=False)
        params, state, value = step(params, state, data[rows], sub)
        if i == 0:
            first_s = time.perf_counter() - start
            tg.wait_for_compiles()  # the native kernel, compiled in the background meanwhile
            start = time.perf_counter()
        if i % 500 == 0 or i == steps:
            print(f"step {i:5d}  ELBO {-float(value):9.3f}")
    elapsed = time.perf_counter() - start
    print(f"noise scale learned {np.exp(params['log_sigma']):.3f} (data's 0.05)")
    print(f"first step (trace + compile) {first_s:.2f} s; then {elapsed / steps * 1e6:.0f} us "
          f"per step; traced {step.tracing_count} time(s)")


if __name__ == "__main__":
    main()
