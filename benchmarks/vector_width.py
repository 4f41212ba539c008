"""The numba kernels' loops at LLVM's default vector width against `tg.config.vector_width
= 512` (docs/numba.md, "Vector width"): each setting in its own fresh process, alternately.

    python benchmarks/vector_width.py [--rounds 2]

Workloads: W2's value and gradient, `exp(x) * tanh(x)` and `log1p(exp(x))` on 1e6
float64; a softmax and a column sum of 2000x500; W7 and the RNN scan with their gradients
(benchmarks/control_flow.py); W4-W6 (benchmarks/jacobians.py). Median of 9 calls after
a warm-up, one thread, ms. On an AVX2 machine both settings give the same code. Not a
test: nothing here asserts.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

SCRIPT = """
import json, os, sys, time
sys.path.insert(0, HERE)
import control_flow as cf, jacobians as jb  # one thread for every library
import numpy as np
import tracegrad as tg
import tracegrad.numpy as tnp
from tracegrad import nn
tg.config.background_compile = False
def med(f, *a):
    f(*a)
    ts = []
    for _ in range(9):
        t = time.perf_counter(); f(*a); ts.append(time.perf_counter() - t)
    return sorted(ts)[4] * 1e3
rng = np.random.default_rng(0)
res = {}
x = rng.uniform(-3, 3, 10**6)
fn = lambda f: tg.function(f, backend="numba")
res["W2 value_and_grad, 1e6"] = med(fn(tg.value_and_grad(
    lambda x: tnp.sum(tnp.tanh(x) * tnp.sin(x) + x ** 2))), x)
res["exp(x) * tanh(x), 1e6"] = med(fn(lambda x: tnp.exp(x) * tnp.tanh(x)), x)
res["log1p(exp(x)), 1e6"] = med(fn(lambda x: tnp.log1p(tnp.exp(x))), x)
m = rng.standard_normal((2000, 500))
res["softmax 2000x500"] = med(fn(lambda m: nn.softmax(m)), m)
res["sum(m * m + 1, axis=0)"] = med(fn(lambda m: tnp.sum(m * m + 1.0, axis=0)), m)
for name in ["w7", "w7-grad", "w8", "w8-grad"]:
    res[cf.LABELS[name]] = med(cf.tracegrad_fn(name), *cf._problem(name, rng))
for name in ["w4", "w5", "w6"]:
    res[jb.LABELS[name]] = med(jb.tracegrad_fn(name), *jb._problem(name, rng))
print(json.dumps(res))
"""


def main(argv=None) -> None:
    from one_pass import cpu

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    print(cpu())
    runs: dict = {"default": [], "512": []}
    caches = {k: tempfile.mkdtemp(prefix=f"tg-width-{k}-") for k in runs}
    for _ in range(args.rounds):
        for setting in runs:
            env = dict(os.environ, TRACEGRAD_CACHE_DIR=caches[setting],
                       TRACEGRAD_VECTOR_WIDTH="" if setting == "default" else setting)
            out = subprocess.run([sys.executable, "-c", f"HERE = {HERE!r}\n" + SCRIPT],
                                 env=env, capture_output=True, text=True, check=True)
            runs[setting].append(json.loads(out.stdout.strip().splitlines()[-1]))
    width = max(len(k) for k in runs["default"][0])
    print(f"{'workload':{width}} | default (LLVM's) ms | vector_width = 512 ms | ratio")
    for key in runs["default"][0]:
        d = [r[key] for r in runs["default"]]
        w = [r[key] for r in runs["512"]]
        print(f"{key:{width}} | {min(d):8.3f}-{max(d):8.3f} | {min(w):8.3f}-{max(w):8.3f} | "
              f"{min(d) / min(w):5.2f}x")


if __name__ == "__main__":
    main()
