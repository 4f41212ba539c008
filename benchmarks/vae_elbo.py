"""One ELBO step of examples/vae.py: the negative ELBO of a batch of 256 points and its
gradient in every parameter, one reparameterized normal sample per point drawn from a key
inside the step, tracegrad against NumPy and JAX in one run:

    python benchmarks/vae_elbo.py [--json FILE]

tracegrad is the example's own `neg_elbo` under `tg.function(tg.value_and_grad(...))` on the
numba backend; JAX is the same model under `jax.jit(jax.value_and_grad(...))` with
`jax.random.normal`; NumPy computes the value and the gradient written by hand, drawing the
sample with `Generator.standard_normal`. Float64, CPU, one thread each (set before the
libraries load). The key is fixed across calls (a new key would not change the work).
Steady-state times are the median of 9 batches of calls after a warm-up; the first call
(trace + transform + compile) is timed separately. Ratios are `library time / tracegrad
time`: above 1 means tracegrad is faster. Values and gradients are checked against the
hand-written NumPy ones at tracegrad's sample first. Not a test: nothing here asserts.
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from one_thread import jax, jnp  # noqa: E402, I001  (before NumPy: one thread each)

import numpy as np  # noqa: E402
from run import first_call, median_report, median_time  # noqa: E402

import tracegrad as tg  # noqa: E402
from tracegrad import random as tr  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples"))
import vae  # noqa: E402

tg.config.background_compile = False  # timed calls measure the kernel, not the interim

BATCH = 256
LOG_2PI = float(np.log(2 * np.pi))


def forward(np_, p, x, eps):
    """The example's negative ELBO at a given standard normal sample `eps`, and what the
    hand-written gradient needs."""
    h = np_.tanh(x @ p["enc"]["w"] + p["enc"]["b"])
    code = h @ p["code"]["w"] + p["code"]["b"]
    mu, logvar = code[:, :vae.LATENT], code[:, vae.LATENT:]
    s = np_.exp(0.5 * logvar)
    z = mu + s * eps
    g = np_.tanh(z @ p["dec"]["w"] + p["dec"]["b"])
    x_hat = g @ p["out"]["w"] + p["out"]["b"]
    r = (x - x_hat) * np_.exp(-p["log_sigma"])
    neg_ll = np_.sum(0.5 * r**2 + p["log_sigma"] + 0.5 * LOG_2PI, axis=1)
    kl = 0.5 * np_.sum(s**2 + mu**2 - 1.0 - logvar, axis=1)
    return np_.mean(kl + neg_ll), (h, mu, logvar, s, z, g, r)


def numpy_value_and_grad(p, x, eps):
    value, (h, mu, logvar, s, z, g, r) = forward(np, p, x, eps)
    n = x.shape[0]
    d_xhat = -r * np.exp(-p["log_sigma"]) / n
    d_g = (d_xhat @ p["out"]["w"].T) * (1 - g**2)
    d_z = d_g @ p["dec"]["w"].T
    d_mu = d_z + mu / n
    d_logvar = 0.5 * (d_z * eps * s + (s**2 - 1) / n)
    d_code = np.concatenate([d_mu, d_logvar], axis=1)
    d_h = (d_code @ p["code"]["w"].T) * (1 - h**2)

    def dense(inputs, d_out):
        return {"w": inputs.T @ d_out, "b": d_out.sum(0)}

    grads = {"enc": dense(x, d_h), "code": dense(h, d_code), "dec": dense(z, d_g),
             "out": dense(g, d_xhat), "log_sigma": np.float64(np.sum(1 - r**2) / n)}
    return value, grads


LABELS = {"elbo": f"negative ELBO and gradient, batch {BATCH}, {vae.DIM}-{vae.HIDDEN}-"
                  f"{vae.LATENT}-{vae.HIDDEN}-{vae.DIM}"}


def measure(name, rng):
    x = vae.make_data(rng, BATCH)
    params = vae.init(rng)
    key = tr.key(0)
    eps = np.asarray(tr.normal(key, (BATCH, vae.LATENT)))
    want = numpy_value_and_grad(params, x, eps)

    def same(got):
        np.testing.assert_allclose(float(got[0]), want[0], rtol=1e-10)
        flat = tg.tree.ravel(want[1])[0]
        np.testing.assert_allclose(tg.tree.ravel(tg.tree.map(np.asarray, got[1]))[0], flat,
                                   rtol=1e-8, atol=1e-12)

    ours = tg.function(tg.value_and_grad(vae.neg_elbo), backend="numba")
    first = {"tracegrad": first_call(lambda: ours(params, x, key))}
    tg.wait_for_compiles()
    same(ours(params, x, key))
    times = {"tracegrad": median_time(lambda: ours(params, x, key))}
    draw = np.random.default_rng(0)
    times["numpy (hand)"] = median_time(
        lambda: numpy_value_and_grad(params, x, draw.standard_normal((BATCH, vae.LATENT))))
    if jax is not None:
        def jax_loss(p, x, key):
            eps = jax.random.normal(key, (x.shape[0], vae.LATENT), dtype=jnp.float64)
            return forward(jnp, p, x, eps)[0]

        def jax_loss_at(p, x, eps):
            return forward(jnp, p, x, eps)[0]

        same(jax.jit(jax.value_and_grad(jax_loss_at))(params, x, eps))
        step = jax.jit(jax.value_and_grad(jax_loss))
        jp, jx, jkey = (jax.tree_util.tree_map(jnp.asarray, a) for a in (params, x, key))
        jkey = jax.random.wrap_key_data(jkey, impl="threefry2x32")
        first["jax"] = first_call(lambda: jax.block_until_ready(step(jp, jx, jkey)))
        times["jax"] = median_time(lambda: jax.block_until_ready(step(jp, jx, jkey)))
    return times, first


def main(argv=None):
    from one_pass import cpu

    print("cpu:", cpu())
    median_report(argv, description=__doc__.splitlines()[0], default="elbo", labels=LABELS,
                  measure=measure, libraries=(jax,))


if __name__ == "__main__":
    main()
