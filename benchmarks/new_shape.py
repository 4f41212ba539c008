"""One compile per function, not per shape: the first call of five small numba functions
with an empty kernel cache, with the cache that run filled (a new process), and the
first call at a new input shape (a retrace that finds the same kernel).

    python benchmarks/new_shape.py

Inputs are 64x32 float64, then 80x40. Each cache temperature is a fresh Python process
with the same new TRACEGRAD_CACHE_DIR; the compile waits (`background_compile = False`).
The shared helper module is part of the first function's cold time. Not a test: it
asserts only that the kernel runs the new shape without compiling again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from one_pass import cpu  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SCRIPT = """
import json, time
import numpy as np
import tracegrad as tg
import tracegrad.numpy as tnp
from tracegrad import nn
tg.config.background_compile = False
FUNCTIONS = {
    "a * 2 + 1": lambda a: a * 2 + 1,
    "nn.softmax(a)": lambda a: nn.softmax(a),
    "sum(tanh(a) ** 2)": lambda a: tnp.sum(tnp.tanh(a) ** 2),
    "a @ a.T + 1": lambda a: a @ a.T + 1,
    "grad(sum(sin(a) * a))": tg.grad(lambda a: tnp.sum(tnp.sin(a) * a)),
}
rng = np.random.default_rng(0)
a, b = rng.standard_normal((64, 32)), rng.standard_normal((80, 40))
out = {}
for name, fn in FUNCTIONS.items():
    f = tg.function(fn, backend="numba")
    t = time.perf_counter(); f(a); first = time.perf_counter() - t
    t = time.perf_counter(); f(b); shape = time.perf_counter() - t
    assert f.tracing_count == 2, f.tracing_count
    out[name] = (first, shape)
print(json.dumps(out))
"""


def main() -> None:
    print(cpu())
    cache = tempfile.mkdtemp(prefix="tg-shape-")
    runs = []
    for _ in ("cold", "warm"):
        result = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                                env={**os.environ, "TRACEGRAD_CACHE_DIR": cache}, cwd=ROOT,
                                check=True)
        runs.append(json.loads(result.stdout.strip().splitlines()[-1]))
    print(f"{'function':24} {'first, empty cache':>19} {'first, warm cache':>18} "
          f"{'new shape':>10}")
    for name, (cold, shape) in runs[0].items():
        warm = runs[1][name][0]
        print(f"{name:24} {cold:17.2f} s {warm:16.3f} s {shape * 1e3:7.1f} ms")


if __name__ == "__main__":
    main()
