"""Compile time and peak memory of Python loops unrolled into large graphs (issue 30).

    python benchmarks/compile_scaling.py                      # both programs, N = 5 10 20 40
    python benchmarks/compile_scaling.py --program hmm 10 20 40 80
    python benchmarks/compile_scaling.py --program fluid 2 4 8

Two programs, each differentiated (`tg.value_and_grad`) through a Python loop of N steps:

- `hmm`: an HMM forward pass over N symbols in log space (each step a broadcast add, a
  `logsumexp` over the previous state and a gathered emission column), 8 states, 5 symbols;
- `fluid`: a stencil time loop on a 32x32 grid in the manner of a smoke simulation (each
  step a diffusion of the velocity by `roll`s, 4 Jacobi sweeps of a pressure solve, the
  pressure gradient subtracted).

Each (program, N) runs in a fresh Python process with an empty kernel cache; the shared
helper module is compiled first by a small function (its CPU time is reported apart).
`compile` is the CPU time (and wall time) of the first call with
`tg.config.background_compile = False` (trace, transform, optimize, generate, Numba +
LLVM), `ops` the optimized graph's op count, `RSS` the process's peak resident memory after
the call and its growth over the call; `run` the best of 20 later calls.
Values are checked against the numpy backend. Not a test: nothing here asserts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

K, M = 8, 5
GRID = 32


def hmm(n):
    import tracegrad.numpy as tnp
    from tracegrad.scipy.special import logsumexp

    obs = [(3 * t + 1) % M for t in range(n)]

    def loglik(log_a, log_b, log_pi):
        alpha = log_pi + log_b[:, obs[0]]
        for t in range(1, n):
            alpha = logsumexp(alpha[:, None] + log_a, axis=0) + log_b[:, obs[t]]
        return logsumexp(alpha) + 0.0 * tnp.sum(log_a)

    import numpy as np

    rng = np.random.default_rng(0)
    args = (np.log(rng.dirichlet(np.ones(K), K)), np.log(rng.dirichlet(np.ones(M), K)),
            np.log(np.full(K, 1.0 / K)))
    return loglik, args


def fluid(n):
    import tracegrad.numpy as tnp

    def lap(f):
        return (tnp.roll(f, 1, 0) + tnp.roll(f, -1, 0) + tnp.roll(f, 1, 1)
                + tnp.roll(f, -1, 1) - 4.0 * f)

    def simulate(vx, vy, smoke):
        for _ in range(n):
            vx, vy = vx + 0.1 * lap(vx), vy + 0.1 * lap(vy)
            div = -0.5 * (tnp.roll(vx, -1, 1) - tnp.roll(vx, 1, 1)
                          + tnp.roll(vy, -1, 0) - tnp.roll(vy, 1, 0))
            p = tnp.zeros_like(div)
            for _ in range(4):
                p = (div + tnp.roll(p, 1, 0) + tnp.roll(p, -1, 0) + tnp.roll(p, 1, 1)
                     + tnp.roll(p, -1, 1)) / 4.0
            vx = vx - 0.5 * (tnp.roll(p, -1, 1) - tnp.roll(p, 1, 1))
            vy = vy - 0.5 * (tnp.roll(p, -1, 0) - tnp.roll(p, 1, 0))
            smoke = smoke + 0.05 * lap(smoke) - 0.1 * (vx * smoke)
        return tnp.sum(smoke ** 2)

    import numpy as np

    rng = np.random.default_rng(0)
    return simulate, tuple(rng.standard_normal((GRID, GRID)) for _ in range(3))


PROGRAMS = {"hmm": hmm, "fluid": fluid}


def child(program: str, n: int) -> dict:
    import resource

    import numpy as np

    import tracegrad as tg
    import tracegrad.numpy as tnp

    tg.config.background_compile = False
    t = time.process_time()
    tg.function(lambda x: tnp.sin(x) * 2.0 + tnp.tanh(x) + tnp.exp(x) + tnp.log1p(x * x),
                backend="numba")(np.ones(4))
    helpers = time.process_time() - t
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    fn, args = PROGRAMS[program](n)
    f = tg.function(tg.value_and_grad(fn, argnums=tuple(range(len(args)))), backend="numba")
    t, c = time.perf_counter(), time.process_time()
    got = f(*args)
    first, first_cpu = time.perf_counter() - t, time.process_time() - c
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    want = tg.function(tg.value_and_grad(fn, argnums=tuple(range(len(args)))),
                       backend="numpy")(*args)
    err = max(float(np.max(np.abs(np.asarray(a) - np.asarray(b))))
              for a, b in zip([got[0], *got[1]], [want[0], *want[1]], strict=True))
    ops = len(tg.optimize(f.get_concrete_function(*args).graph).operations)
    run = float("inf")
    for _ in range(20):
        t = time.perf_counter()
        f(*args)
        run = min(run, time.perf_counter() - t)
    return {"program": program, "n": n, "ops": ops, "compile": first_cpu, "wall": first,
            "helpers": helpers,
            "rss_mb": rss / 1024, "rss_growth_mb": (rss - rss0) / 1024, "run_ms": run * 1e3,
            "err": err}


def main(argv):
    if argv[:1] == ["--child"]:
        print(json.dumps(child(argv[1], int(argv[2]))))
        return
    programs = list(PROGRAMS)
    if argv[:1] == ["--program"]:
        programs, argv = [argv[1]], argv[2:]
    ns = [int(a) for a in argv] or [5, 10, 20, 40]
    with open("/proc/cpuinfo") if os.path.exists("/proc/cpuinfo") else open(os.devnull) as f:
        cpu = next((line.split(":", 1)[1].strip() for line in f
                    if line.startswith("model name")), "unknown CPU")
    print(f"{cpu}; each row a fresh process with an empty kernel cache", flush=True)
    print("| program | N | ops | compile, CPU (wall) | per op | helpers | peak RSS (growth) "
          "| run |")
    print("|---|---|---|---|---|---|---|---|", flush=True)
    for program in programs:
        for n in ns:
            env = dict(os.environ, TRACEGRAD_CACHE_DIR=tempfile.mkdtemp(prefix="tg-scaling-"))
            out = subprocess.run([sys.executable, __file__, "--child", program, str(n)],
                                 env=env, capture_output=True, text=True)
            if out.returncode:
                print(f"| {program} | {n} | failed: {out.stderr.strip().splitlines()[-1:]} |")
                continue
            r = json.loads(out.stdout.strip().splitlines()[-1])
            print(f"| {program} | {n} | {r['ops']} | {r['compile']:.2f} s ({r['wall']:.1f} s) | "
                  f"{r['compile'] / r['ops'] * 1e3:.1f} ms | {r['helpers']:.2f} s | "
                  f"{r['rss_mb']:.0f} MB (+{r['rss_growth_mb']:.0f}) | {r['run_ms']:.3f} ms "
                  f"(err {r['err']:.0e}) |", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
