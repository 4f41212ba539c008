"""tracegrad (numba backend) against NumPy, JAX, PyTorch and autograd, in one run.

    python benchmarks/run.py [--quick] [--only NAME[,NAME]] [--json FILE]

Each workload is the same computation written for every library that is installed
(float64 everywhere, CPU). Steady-state times are the best of several batches of calls,
after a warm-up call; compile times are the first call's wall time (tracegrad with an
empty kernel cache, in a fresh directory). Ratios are `library time / tracegrad time`:
above 1 means tracegrad is faster. Not a test: nothing here asserts.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np

os.environ.setdefault("TRACEGRAD_CACHE_DIR", tempfile.mkdtemp(prefix="tg-bench-cache-"))

import tracegrad as tg
import tracegrad.numpy as tnp

tg.config.background_compile = False  # timed calls measure the kernel, not the interim


def _optional(name):
    try:
        return __import__(name)
    except ImportError:
        return None


jax = _optional("jax")
torch = _optional("torch")
autograd = _optional("autograd")
if jax is not None:
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
if autograd is not None:
    import autograd.numpy as anp


def _version(name: str) -> str:
    from importlib.metadata import version

    try:
        return version(name)
    except Exception:  # noqa: BLE001 - any failure means "unknown"
        return "?"


def _calls_per_batch(fn, seconds: float) -> int:
    """After a warm-up call, how many calls (a power of two) fill a batch of `seconds`."""
    fn()
    n = 1
    while n < 1 << 20:
        t = time.perf_counter()
        for _ in range(n):
            fn()
        if time.perf_counter() - t >= seconds:
            break
        n *= 2
    return n


def _per_call(fn, n: int) -> float:
    t = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t) / n


def best_time(fn, *, min_time=0.2, batches=5) -> float:
    """Seconds per call: the best batch average after a warm-up call."""
    n = _calls_per_batch(fn, min_time / batches)
    return min(_per_call(fn, n) for _ in range(batches))


def median_time(fn, *, batch_seconds=0.03, batches=9) -> float:
    """Seconds per call: the median of `batches` batch averages after a warm-up call."""
    n = _calls_per_batch(fn, batch_seconds)
    return float(np.median([_per_call(fn, n) for _ in range(batches)]))


def median_report(argv, *, description: str, default: str, labels: dict, measure,
                  libraries) -> None:
    """The command line of a benchmark script timed by medians: `--only NAMES` (from
    `labels`, `default` when not given) and `--json FILE`; `measure(name, rng)` gives
    `(times, first-call times)` per library, printed as ratios to tracegrad."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--only", default=default)
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)
    versions = {"python": sys.version.split()[0], "numpy": np.__version__,
                "tracegrad": tg.__version__}
    for mod in libraries:
        if mod is not None:
            versions[mod.__name__] = _version(mod.__name__)
    print("versions:", ", ".join(f"{k} {v}" for k, v in versions.items()))
    print("median times per call; (ratio) = library time / tracegrad time (> 1: faster)")
    width = max(len(v) for v in labels.values())
    rng = np.random.default_rng(0)
    results = []
    for name in [w for w in args.only.split(",") if w]:
        times, compile_s = measure(name, rng)
        base = times["tracegrad"]
        cells = " | ".join(f"{k} {v * 1e3:8.3f} ms ({v / base:5.2f}x)" for k, v in times.items())
        print(f"{labels[name]:{width}s} | {cells}", flush=True)
        print(f"{'':{width}s} | first call: " + ", ".join(
            f"{k} {v:.2f} s" for k, v in compile_s.items()), flush=True)
        results.append({"workload": name, "seconds": times, "first_call_seconds": compile_s})
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"versions": versions, "results": results}, f, indent=2)


def first_call(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


# -- workloads: tracegrad / numpy / jax / torch / autograd versions of each ------------------


def tg_elementwise(x):
    return tnp.sin(x) * tnp.cos(x) + tnp.exp(-(x * x)) * 0.5 - tnp.tanh(x * 0.3) / (1.0 + x * x)


def np_elementwise(np_):
    def f(x):
        return np_.sin(x) * np_.cos(x) + np_.exp(-(x * x)) * 0.5 - np_.tanh(x * 0.3) / (
            1.0 + x * x)
    return f


def reductions(np_, logsumexp=None):
    """Row-wise log-sum-exp, column variance and a global mean: reduction-heavy."""
    def f(x):
        m = np_.max(x, axis=1, keepdims=True)
        lse = np_.log(np_.sum(np_.exp(x - m), axis=1)) + m[:, 0]
        mu = np_.mean(x, axis=0)
        var = np_.mean((x - mu) ** 2, axis=0)
        return np_.mean(lse) + np_.sum(var) + np_.max(np_.abs(x))
    return f


def mlp_loss(np_):
    """A 2-layer tanh MLP with a softmax cross-entropy loss (one-hot labels)."""
    def loss(w1, b1, w2, b2, x, y):
        h = np_.tanh(x @ w1 + b1)
        z = h @ w2 + b2
        m = np_.max(z, axis=1, keepdims=True)
        lse = np_.log(np_.sum(np_.exp(z - m), axis=1, keepdims=True)) + m
        return -np_.mean(np_.sum(y * (z - lse), axis=1))
    return loss


def torch_fns():
    def elem(x):
        return torch.sin(x) * torch.cos(x) + torch.exp(-(x * x)) * 0.5 - torch.tanh(
            x * 0.3) / (1.0 + x * x)

    def red(x):
        m = torch.amax(x, dim=1, keepdim=True)
        lse = torch.log(torch.sum(torch.exp(x - m), dim=1)) + m[:, 0]
        mu = torch.mean(x, dim=0)
        var = torch.mean((x - mu) ** 2, dim=0)
        return torch.mean(lse) + torch.sum(var) + torch.amax(torch.abs(x))

    def loss(w1, b1, w2, b2, x, y):
        h = torch.tanh(x @ w1 + b1)
        z = h @ w2 + b2
        m = torch.amax(z, dim=1, keepdim=True)
        lse = torch.log(torch.sum(torch.exp(z - m), dim=1, keepdim=True)) + m
        return -torch.mean(torch.sum(y * (z - lse), dim=1))

    return elem, red, loss


# -- the runner ------------------------------------------------------------------------------


def measure(name, args, *, tracegrad, numpy=None, jax_fn=None, torch_fn=None,
            autograd_fn=None):
    """Time one workload on every installed library (the same arrays, as each wants them);
    returns `(times, first-call times)`."""
    comp = {"tracegrad": first_call(lambda: tracegrad(*args))}
    times = {"tracegrad": best_time(lambda: tracegrad(*args))}
    if numpy is not None:
        times["numpy"] = best_time(lambda: numpy(*args))
    if jax is not None and jax_fn is not None:
        ja = [jnp.asarray(a) for a in args]
        comp["jax"] = first_call(lambda: jax.block_until_ready(jax_fn(*ja)))
        times["jax"] = best_time(lambda: jax.block_until_ready(jax_fn(*ja)))
    if torch is not None and torch_fn is not None:
        ta = [torch.from_numpy(a) for a in args]
        times["torch"] = best_time(lambda: torch_fn(*ta))
    if autograd is not None and autograd_fn is not None:
        times["autograd"] = best_time(lambda: autograd_fn(*args))
    return times, comp


def run(quick: bool, only):
    rng = np.random.default_rng(0)
    n_elem = 200_000 if quick else 1_000_000
    rows = 300 if quick else 1000
    t_elem, t_red, t_loss = torch_fns() if torch is not None else (None, None, None)
    results = []

    def record(name, times, compile_times=None):
        results.append({"workload": name, "seconds": times, "compile_seconds": compile_times or {}})
        base = times["tracegrad"]
        cells = " | ".join(f"{k} {v * 1e6:9.1f} us ({v / base:5.2f}x)" for k, v in times.items())
        print(f"{name:28s} | {cells}", flush=True)
        if compile_times:
            print(f"{'':28s} | first call: " + ", ".join(
                f"{k} {v:.2f} s" for k, v in compile_times.items()), flush=True)

    def jit(f):
        return jax.jit(f) if jax is not None else None

    if not only or "elementwise" in only:
        record(f"elementwise chain [{n_elem}]", *measure(
            "elementwise", [rng.standard_normal(n_elem)],
            tracegrad=tg.function(tg_elementwise, backend="numba"),
            numpy=np_elementwise(np), jax_fn=jit(np_elementwise(jnp)) if jax else None,
            torch_fn=t_elem))

    if not only or "reductions" in only:
        record(f"reductions [{rows}x{rows}]", *measure(
            "reductions", [rng.standard_normal((rows, rows))],
            tracegrad=tg.function(reductions(tnp), backend="numba"),
            numpy=reductions(np), jax_fn=jit(reductions(jnp)) if jax else None,
            torch_fn=t_red))

    if not only or "mlp" in only:
        b, d, h, k = 128, 64, 128, 10
        args = [rng.standard_normal((d, h)) * 0.1, np.zeros(h),
                rng.standard_normal((h, k)) * 0.1, np.zeros(k),
                rng.standard_normal((b, d)), np.eye(k)[rng.integers(0, k, b)]]
        record(f"MLP loss [{b}x{d}x{h}x{k}]", *measure(
            "mlp", args, tracegrad=tg.function(mlp_loss(tnp), backend="numba"),
            numpy=mlp_loss(np), jax_fn=jit(mlp_loss(jnp)) if jax else None,
            torch_fn=t_loss, autograd_fn=mlp_loss(anp) if autograd else None))

        def torch_grad(*ta):
            ps = [a.clone().requires_grad_(True) for a in ta[:4]]
            return torch.autograd.grad(t_loss(*ps, *ta[4:]), ps)

        params = (0, 1, 2, 3)
        record(f"MLP gradient [{b}x{d}x{h}x{k}]", *measure(
            "mlp-grad", args,
            tracegrad=tg.function(tg.grad(mlp_loss(tnp), argnums=params), backend="numba"),
            jax_fn=jit(jax.grad(mlp_loss(jnp), argnums=params)) if jax else None,
            torch_fn=torch_grad if torch else None,
            autograd_fn=autograd.grad(mlp_loss(anp), argnum=params) if autograd else None))

    if not only or "overhead" in only:
        def tiny(a, c):
            return a * c + 1.0

        times, _ = measure("overhead", [np.ones(4), np.ones(4)],
                           tracegrad=tg.function(tiny, backend="numba"), numpy=tiny,
                           jax_fn=jit(tiny), torch_fn=tiny if torch else None)
        record("call overhead [4]", times)
    return results


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, shorter runs")
    parser.add_argument("--only", default="", help="comma-separated workloads: elementwise, "
                        "reductions, mlp, overhead")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)
    versions = {"python": sys.version.split()[0], "numpy": np.__version__,
                "tracegrad": tg.__version__}
    for mod in (jax, torch, autograd):
        if mod is not None:
            versions[mod.__name__] = _version(mod.__name__)
    import numba

    versions["numba"] = numba.__version__
    print("versions:", ", ".join(f"{k} {v}" for k, v in versions.items()))
    print("times per call; (ratio) = library time / tracegrad time (> 1: tracegrad faster)")
    results = run(args.quick, [w for w in args.only.split(",") if w])
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"versions": versions, "results": results}, f, indent=2)


if __name__ == "__main__":
    main()
