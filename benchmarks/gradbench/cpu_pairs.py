"""tracegrad beside JAX on one GradBench problem, in one process, their calls interleaved:
medians of the process CPU time per call (and of the wall time), for a machine too loaded
for wall times to compare (docs/performance.md, GradBench section).

    python benchmarks/gradbench/cpu_pairs.py PROBLEM SIZE   # e.g. gmm 10,25,1000

ROUNDS (environment, default 15) rounds of about 20 ms of calls for each of the four
callables (value and value+grad of each library); float64, one thread each.
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(HERE), HERE]
from one_thread import jax, jnp  # noqa: E402, I001  (before NumPy: one thread each)

from gradbench_problems import PROBLEMS, kmeans_dir_tracegrad  # noqa: E402

import tracegrad as tg  # noqa: E402
import tracegrad.numpy as tnp  # noqa: E402
from machine import interleaved  # noqa: E402


def callables(name, size):
    problem = PROBLEMS[name]
    args = problem.data(size)
    f = problem.make(tnp, tg.scan, size)
    value = tg.function(f)
    deriv = tg.function(kmeans_dir_tracegrad(f) if problem.derivative == "dir"
                        else tg.value_and_grad(f, argnums=problem.wrt))
    fj = problem.make(jnp, lambda body, init, xs: jax.lax.scan(body, init, xs), size)
    if problem.derivative == "dir":
        def direction(c, p):
            j, h = jax.jvp(jax.grad(lambda cc: fj(cc, p)), (c,), (jnp.ones_like(c),))
            return fj(c, p), j / h
        jderiv = jax.jit(direction)
    else:
        jderiv = jax.jit(jax.value_and_grad(fj, argnums=problem.wrt))
    jvalue, ja = jax.jit(fj), [jnp.asarray(a) for a in args]
    return {"tracegrad value": lambda: value(*args),
            "jax value": lambda: jax.block_until_ready(jvalue(*ja)),
            "tracegrad value+grad": lambda: deriv(*args),
            "jax value+grad": lambda: jax.block_until_ready(jderiv(*ja))}


def main(argv=None):
    name, size = (argv or sys.argv[1:])[:2]
    size = tuple(int(s) for s in size.split(","))
    tg.config.background_compile = False
    fns = callables(name, size)
    times = interleaved(fns, int(os.environ.get("ROUNDS", "15")))
    load = os.getloadavg()[0]
    for what in ("value", "value+grad"):
        (tc, tw), (jc, jw) = ((c * 1e3, w * 1e3) for c, w in
                              (times[f"{lib} {what}"] for lib in ("tracegrad", "jax")))
        print(f"{name} {size} {what}: CPU tracegrad {tc:.3f} ms, JAX {jc:.3f} ms "
              f"({tc / jc:.2f}x); wall {tw:.3f} / {jw:.3f} ms; load {load:.1f}")


if __name__ == "__main__":
    main()
