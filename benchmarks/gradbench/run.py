"""GradBench's problems (gmm, lstm, lse, llsq, kmeans, det; gradbench_problems.py) in
tracegrad beside JAX `jit`, PyTorch eager and `torch.compile`, in one run.

    python benchmarks/gradbench/run.py [--only gmm,lstm,...] [--sizes default|all]
                                       [--no-first] [--cpu] [--json FILE]

For each problem and size: the objective alone ("value") and the value with its gradient
("value+grad"; kmeans: GradBench's `dir`, the gradient divided by the Hessian's diagonal,
from a forward-over-reverse product with ones). Before timing, every library's value is
checked against a float64 NumPy reference written separately (gradbench_problems.py) and
every gradient against JAX's (and the closed-form gradient where there is one). Steady-state
times are medians of 9 batches after a warm-up (benchmarks/run.py's `median_time`; 3 for a
call of more than half a second), kernels compiled first. The first call of value+grad is
timed in a fresh process per library at every library's default settings (tracegrad with
an empty kernel cache and the background compile on; JAX's jit; torch.compile; all of the
machine's cores: `TRACEGRAD_BENCH_THREADS=default`, which a compile of either library may
use). The steady state: float64, one thread for every library (benchmarks/one_thread.py).
Sizes: GradBench's standard ones (`--sizes all`), by default the largest or the ones of the
issue. Not a test: it asserts only that every library computes the same values.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(HERE), HERE]  # benchmarks/ first: its run.py, not this one
from one_thread import jax, jnp, torch  # noqa: E402, I001  (before NumPy: one thread each)

import numpy as np  # noqa: E402
from gradbench_problems import PROBLEMS, kmeans_dir_tracegrad  # noqa: E402
from one_pass import cpu  # noqa: E402
from run import _version, median_time  # noqa: E402

import tracegrad as tg  # noqa: E402
import tracegrad.numpy as tnp  # noqa: E402

LIBRARIES = ("tracegrad", "jax", "torch", "torch.compile")
_MAX = 10 ** 9


# -- the callables of each library: value and value+grad -------------------------------------


def tracegrad_fns(problem, size):
    f = problem.make(tnp, tg.scan, size)
    if problem.derivative == "dir":
        return tg.function(f), tg.function(kmeans_dir_tracegrad(f))
    return tg.function(f), tg.function(tg.value_and_grad(f, argnums=problem.wrt))


def jax_fns(problem, size):
    f = problem.make(jnp, lambda body, init, xs: jax.lax.scan(body, init, xs), size)
    if problem.derivative == "dir":
        def direction(c, p):
            gradient = jax.grad(lambda cc: f(cc, p))
            j, h = jax.jvp(gradient, (c,), (jnp.ones_like(c),))
            return f(c, p), j / h
        return jax.jit(f), jax.jit(direction)
    return jax.jit(f), jax.jit(jax.value_and_grad(f, argnums=problem.wrt))


def torch_fns(problem, size, compiled: bool):
    f = problem.make_torch(torch, size)
    value = torch.compile(f) if compiled else f

    if problem.derivative == "dir":
        if compiled:
            def direction_fn(c, p):
                gradient = torch.func.grad(lambda cc: f(cc, p))
                j, h = torch.func.jvp(gradient, (c,), (torch.ones_like(c),))
                return f(c, p), j / h
            return value, torch.compile(direction_fn)

        def direction(c, p):
            c = c.detach().requires_grad_()
            out = f(c, p)
            (j,) = torch.autograd.grad(out, (c,), create_graph=True)
            (h,) = torch.autograd.grad(j.sum(), (c,))  # H is diagonal: H @ 1
            return out.detach(), j.detach() / h
        return value, direction

    def value_and_grad(*args):
        args = [a.detach().requires_grad_() if i in problem.wrt else a
                for i, a in enumerate(args)]
        out = value(*args)
        grads = torch.autograd.grad(out, [args[i] for i in problem.wrt])
        return out.detach(), grads
    return value, value_and_grad


def library_fns(lib, problem, size):
    if lib == "tracegrad":
        return tracegrad_fns(problem, size)
    if lib == "jax":
        return jax_fns(problem, size)
    return torch_fns(problem, size, compiled=lib == "torch.compile")


def convert(lib, args):
    if lib == "tracegrad":
        return list(args)
    if lib == "jax":
        return [jnp.asarray(a) for a in args]
    return [torch.from_numpy(np.ascontiguousarray(a)) for a in args]


def block(lib, out):
    if lib == "jax":
        jax.block_until_ready(out)
    return out


def as_numpy(out):
    if isinstance(out, (tuple, list)):
        return [as_numpy(o) for o in out]
    if torch is not None and isinstance(out, torch.Tensor):
        return out.detach().numpy()
    return np.asarray(out)


# -- checks --------------------------------------------------------------------------------------


def _close(a, b, what, rtol=1e-8):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    scale = max(np.max(np.abs(b)), 1e-300)
    err = np.max(np.abs(a - b)) / scale if a.size else 0.0
    if not err <= rtol:
        raise SystemExit(f"{what}: relative difference {err:.2e} > {rtol:g}")


def check(name, problem, size, lib, value_out, deriv_out, reference, jax_deriv):
    ref_value, ref_grads = reference
    _close(value_out, ref_value, f"{name} {size} {lib} value vs NumPy", 1e-10)
    _close(deriv_out[0], ref_value, f"{name} {size} {lib} value+grad's value vs NumPy", 1e-10)
    grads = deriv_out[1]
    grads = grads if isinstance(grads, (tuple, list)) else [grads]
    if ref_grads is not None:
        for i, (g, r) in enumerate(zip(grads, ref_grads, strict=True)):
            _close(g, r, f"{name} {size} {lib} gradient {i} vs closed form", 1e-8)
    if jax_deriv is not None:
        for i, (g, r) in enumerate(zip(grads, jax_deriv, strict=True)):
            _close(g, r, f"{name} {size} {lib} gradient {i} vs JAX", 1e-8)


# -- one process per first call ------------------------------------------------------------------


def first_call_child(lib, name, size):
    # the default settings (benchmarks/run.py, imported above, turns the background compile
    # off for timed calls); TRACEGRAD_BACKGROUND_COMPILE=0 measures the synchronous compile
    tg.config.background_compile = os.environ.get("TRACEGRAD_BACKGROUND_COMPILE", "1") not in (
        "", "0")
    problem = PROBLEMS[name]
    args = convert(lib, problem.data(size))
    _, deriv = library_fns(lib, problem, size)
    t = time.perf_counter()
    block(lib, deriv(*args))
    print(json.dumps(time.perf_counter() - t), flush=True)
    os._exit(0)  # the result is out: not waiting for a background compile it will not use


def first_call(lib, name, size):
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, TRACEGRAD_CACHE_DIR=cache, TRACEGRAD_BENCH_THREADS="default")
        out = subprocess.run([sys.executable, __file__, "--child", lib, name, json.dumps(size)],
                             env=env, capture_output=True, text=True, timeout=3600)
    if out.returncode:
        return f"failed: {out.stderr.strip().splitlines()[-1:]}"
    return json.loads(out.stdout.strip().splitlines()[-1])


# -- the run --------------------------------------------------------------------------------------


def available():
    libs = ["tracegrad"]
    if jax is not None:
        libs.append("jax")
    if torch is not None:
        libs += ["torch", "torch.compile"]
    return libs


def measure(name, size, libs):
    problem = PROBLEMS[name]
    args = problem.data(size)
    reference = problem.reference(*args, size=size)
    rows = {"value": {}, "value+grad": {}}
    jax_deriv = None
    for lib in sorted(libs, key=lambda x: x != "jax"):  # JAX first: the others' gradients
        la = convert(lib, args)
        try:
            value, deriv = library_fns(lib, problem, size)
            v = as_numpy(block(lib, value(*la)))
            d = as_numpy(block(lib, deriv(*la)))
        except Exception as e:  # noqa: BLE001 - a peer that cannot run this is reported
            print(f"  {name} {size} {lib}: {type(e).__name__}: {str(e)[:200]}", flush=True)
            continue
        if lib == "jax":
            jax_deriv = d[1] if isinstance(d[1], list) else [d[1]]
        check(name, problem, size, lib, v, d, reference, jax_deriv)
        rows["value"][lib] = timed(lambda f=value, a=la, lib=lib: block(lib, f(*a)))
        rows["value+grad"][lib] = timed(lambda f=deriv, a=la, lib=lib: block(lib, f(*a)))
        print(f"  {name} {problem.label(size)} {lib}: value {rows['value'][lib] * 1e3:.3f} ms, "
              f"value+grad {rows['value+grad'][lib] * 1e3:.3f} ms", flush=True)
    return rows


CPU_TIME = False  # --cpu: the process's CPU time per call instead of wall time


def timed(fn) -> float:
    """`median_time`, with 3 batches instead of 9 for a call of more than half a second
    (with `CPU_TIME`, the same medians of the process's CPU time)."""
    t = time.perf_counter()
    fn()
    slow = time.perf_counter() - t > 0.5
    if CPU_TIME:
        return _cpu_median(fn, 3 if slow else 9)
    return median_time(fn, batches=3) if slow else median_time(fn)


def _cpu_median(fn, batches: int, batch_seconds: float = 0.05) -> float:
    """The median over `batches` batches of the process's CPU seconds per call (a shared,
    loaded machine stretches wall times; every library runs on one thread)."""
    start = time.process_time()
    fn()
    n = max(1, round(batch_seconds / max(time.process_time() - start, 1e-6)))
    per_call = []
    for _ in range(batches):
        start = time.process_time()
        for _ in range(n):
            fn()
        per_call.append((time.process_time() - start) / n)
    return float(np.median(per_call))


def _ms(t):
    if t is None:
        return "-"
    if isinstance(t, str):
        return t
    return f"{t * 1e3:.3g} ms" if t < 1 else f"{t:.3g} s"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(PROBLEMS))
    parser.add_argument("--sizes", choices=("default", "all"), default="default")
    parser.add_argument("--no-first", action="store_true", help="skip the fresh-process calls")
    parser.add_argument("--libraries", default=",".join(LIBRARIES))
    parser.add_argument("--cpu", action="store_true",
                        help="CPU time of the process per call instead of wall time")
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        lib, name, size = args.child
        return first_call_child(lib, name, tuple(json.loads(size)))
    tg.config.background_compile = False  # timed calls measure the kernel, not the interim
    global CPU_TIME
    CPU_TIME = args.cpu
    libs = [lib for lib in available() if lib in args.libraries.split(",")]
    versions = {"python": sys.version.split()[0], "numpy": np.__version__,
                "tracegrad": tg.__version__}
    for mod in ("numba", "jax", "torch"):
        versions[mod] = _version(mod)
    print("versions:", ", ".join(f"{k} {v}" for k, v in versions.items()))
    print("cpu:", cpu())
    table, firsts = [], []
    for name in args.only.split(","):
        problem = PROBLEMS[name]
        sizes = problem.sizes if args.sizes == "all" else problem.default
        for size in sizes:
            rows = measure(name, size, libs)
            for mode, times in rows.items():
                table.append((name, problem.label(size), mode, times))
        if not args.no_first:
            size = problem.default[-1]
            times = {lib: first_call(lib, name, size)
                     for lib in libs if lib != "torch"}
            print(f"  {name} first call: " + ", ".join(f"{k} {_ms(v)}" for k, v in times.items()),
                  flush=True)
            firsts.append((name, problem.label(size), times))
    head = ["problem", "size", "what", *libs, "tracegrad / JAX"]
    print("\n| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    for name, label, mode, times in table:
        ratio = (f"{times['tracegrad'] / times['jax']:.2f}x"
                 if "jax" in times and "tracegrad" in times else "-")
        print(f"| {name} | {label} | {mode} | "
              + " | ".join(_ms(times.get(lib)) for lib in libs) + f" | {ratio} |")
    if firsts:
        head = ["problem", "size", *[lib for lib in libs if lib != "torch"]]
        print("\nfirst call of value+grad in a fresh process (tracegrad: empty kernel cache, "
              "default settings)\n| " + " | ".join(head) + " |\n|" + "---|" * len(head))
        for name, label, times in firsts:
            print(f"| {name} | {label} | " + " | ".join(_ms(times.get(lib)) for lib in head[2:])
                  + " |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"versions": versions, "cpu": cpu(), "table": table, "first": firsts}, f,
                      indent=1, default=str)


if __name__ == "__main__":
    main()
