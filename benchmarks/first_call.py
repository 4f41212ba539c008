"""The first call of a new function, each in a fresh process: import, trace, compile, run.

    python benchmarks/first_call.py [--only mlp,small,chain,gmm] [--json FILE]

Workloads (float64, one thread):
- mlp: the gradient of a 784-256-10 MLP's softmax cross-entropy, batch 128;
- small: `grad(lambda w, x: mean(tanh(x @ w) ** 2))`, w 64x32, x 128x64;
- chain: 500 steps alternating `sin(x) * 0.9 + x * 0.1` and `tanh(x) * 0.8 - x * 0.05` on
  1000 elements (about 2000 ops), its value;
- gmm: the value and gradient (means, weights and inverse covariance factors) of a Gaussian
  mixture's log-likelihood with a Wishart prior, as in ADBench's GMM (d 64, K 50, 1000
  points; lower-triangular factors unpacked by a gather, the constant terms left out).

Each row is one fresh Python process: `import` is the library's import time, `first` the first
call after it (trace + transform + compile + run), `ready` (tracegrad only) the time from the
start of the first call until the compiled kernel is installed. tracegrad runs in four ways:
with its kernel cache empty (`cold`: a new TRACEGRAD_CACHE_DIR) and filled by the cold
process (`warm`), each with the first calls running the numpy reference while the kernel
compiles in the background (`tg.config.background_compile`, the default) and waiting for it
(`sync`). JAX runs twice in fresh processes (its second run finds the OS's file caches warm;
it keeps no compiled code between processes by default). The CPU model and its vector flags
are printed first. Not a test: it asserts only that every run computes the same values.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from one_pass import cpu  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

COMMON = """
import os, sys, time, json
for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[v] = "1"
os.environ["XLA_FLAGS"] = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
t0 = time.perf_counter()
def leaves(out):
    return [a for o in out for a in leaves(o)] if isinstance(out, (tuple, list)) else [out]
"""

DATA = """
import numpy as np
rng = np.random.default_rng(0)
if WORK == "mlp":
    args = [rng.standard_normal((784, 256)) * 0.05, np.zeros(256),
            rng.standard_normal((256, 10)) * 0.05, np.zeros(10),
            rng.standard_normal((128, 784)), np.eye(10)[rng.integers(0, 10, 128)]]
elif WORK == "small":
    args = [rng.standard_normal((64, 32)), rng.standard_normal((128, 64))]
elif WORK == "gmm":
    N, K, D = 1000, 50, 64
    TRI = np.zeros((D, D), np.int64)  # lower triangle -> 1 + its index in icf[:, D:]
    TRI[np.tril_indices(D, -1)] = 1 + np.arange(D * (D - 1) // 2)
    args = [rng.standard_normal(K), rng.standard_normal((K, D)),
            rng.standard_normal((K, D + D * (D - 1) // 2)) * 0.1, rng.standard_normal((N, D))]
else:
    args = [np.linspace(-2.0, 2.0, 1000)]
"""

WORKLOADS = """
def mlp(w1, b1, w2, b2, x, y):
    h = np_.tanh(x @ w1 + b1)
    return -np_.mean(np_.sum(nn.log_softmax(h @ w2 + b2) * y, axis=1))
def small(w, x):
    return np_.mean(np_.tanh(x @ w) ** 2)
def chain(x):
    for k in range(500):
        x = np_.sin(x) * 0.9 + x * 0.1 if k % 2 == 0 else np_.tanh(x) * 0.8 - x * 0.05
    return x
def logsumexp(a, axis=None):
    m = np_.max(a, axis=axis, keepdims=True)
    return np_.squeeze(m, axis=axis) + np_.log(np_.sum(np_.exp(a - m), axis=axis))
def gmm(alphas, means, icf, x):
    qd = np_.exp(icf[:, :D])
    sum_qs = np_.sum(icf[:, :D], axis=1)
    ls = np_.take(np_.concatenate([np_.zeros((K, 1)), icf[:, D:]], axis=1), TRI, axis=1)
    xc = x[:, None, :] - means[None, :, :]
    lx = qd[None] * xc + np_.einsum("kij,nkj->nki", ls, xc)
    inner = alphas + sum_qs - 0.5 * np_.sum(lx ** 2, axis=2)
    return (np_.sum(logsumexp(inner, axis=1)) - N * logsumexp(alphas)
            + 0.5 * (np_.sum(qd ** 2) + np_.sum(icf[:, D:] ** 2)) - 2.0 * np_.sum(sum_qs))
"""

TRACEGRAD = COMMON + """
import tracegrad as tg
import tracegrad.numpy as np_
import tracegrad.nn as nn
t_import = time.perf_counter() - t0
tg.config.background_compile = MODE == "background"
""" + DATA + WORKLOADS + """
fn = {"mlp": tg.grad(mlp, argnums=(0, 1, 2, 3)), "small": tg.grad(small), "chain": chain,
      "gmm": tg.value_and_grad(gmm, argnums=(0, 1, 2))}[WORK]
f = tg.function(fn)
t1 = time.perf_counter()
out = f(*args)
t_first = time.perf_counter() - t1
tg.wait_for_compiles()
out2 = f(*args)  # installs the kernel
t_ready = time.perf_counter() - t1
flat = [float(np.sum(np.asarray(o))) for o in leaves(out2)]
print(json.dumps(dict(import_s=t_import, first_s=t_first, ready_s=t_ready, check=flat)))
"""

JAX = COMMON + """
import jax
jax.config.update("jax_enable_x64", True)
import jax.numpy as np_
nn = jax.nn
t_import = time.perf_counter() - t0
""" + DATA + WORKLOADS + """
fn = {"mlp": jax.grad(mlp, argnums=(0, 1, 2, 3)), "small": jax.grad(small), "chain": chain,
      "gmm": jax.value_and_grad(gmm, argnums=(0, 1, 2))}[WORK]
f = jax.jit(fn)
t1 = time.perf_counter()
out = jax.block_until_ready(f(*args))
t_first = time.perf_counter() - t1
flat = [float(np.sum(np.asarray(o))) for o in leaves(out)]
print(json.dumps(dict(import_s=t_import, first_s=t_first, ready_s=t_first, check=flat)))
"""


def run(script: str, work: str, env: dict, mode: str = "") -> dict:
    code = f"WORK = {work!r}\nMODE = {mode!r}\n" + script
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env={**os.environ, **env}, cwd=ROOT, check=False)
    if result.returncode:
        raise RuntimeError(result.stderr[-2000:])
    return json.loads(result.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="mlp,small,chain")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    print(cpu())
    try:
        import jax  # noqa: F401
        has_jax = True
    except ImportError:
        has_jax = False
    results = {}
    print(f"{'workload':8} {'run':22} {'import s':>9} {'first s':>9} {'ready s':>9}")
    for work in args.only.split(","):
        rows = {}
        for mode in ("background", "sync"):
            cache = tempfile.mkdtemp(prefix="tg-first-")
            for temp in ("cold", "warm"):
                rows[f"tracegrad {mode} {temp}"] = run(
                    TRACEGRAD, work, {"TRACEGRAD_CACHE_DIR": cache}, mode)
        if has_jax:
            rows["jax 1st process"] = run(JAX, work, {})
            rows["jax 2nd process"] = run(JAX, work, {})
        checks = [r["check"] for r in rows.values()]
        for c in checks[1:]:
            assert all(abs(a - b) <= 1e-9 * max(1.0, abs(b)) for a, b in zip(c, checks[0])), \
                (work, checks)
        for name, r in rows.items():
            print(f"{work:8} {name:22} {r['import_s']:9.3f} {r['first_s']:9.3f} "
                  f"{r['ready_s']:9.3f}")
        results[work] = rows
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"cpu": cpu(), "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
