"""A benchmark script's rows at one thread and at every library's default thread count, with
the scaling of each (time at 1 thread / time at the default).

    python benchmarks/scaling.py [--busy] [--repeat R] SCRIPT [SCRIPT's arguments]

e.g. `python benchmarks/scaling.py jacobians.py --only w5,w6`. SCRIPT is one of the scripts
that load their peers through one_thread.py (jacobians.py, one_pass.py, control_flow.py,
...) and take `--json`; it runs in a fresh process per setting (thread counts are fixed when
a library loads), R times each (default 3), interleaved in alternating order, and each time
is the median over the runs. `--busy` keeps a busy Python loop running in another process
throughout (another program holding a core). Prints the machine (cores, CPU model and
flags), the load average around each run, and a Markdown table: per row and library, the
time at 1 thread, at the default, and the scaling; the last columns are each peer's time /
tracegrad's at the default (> 1: tracegrad faster).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def machine() -> str:
    # one_pass loads one_thread.py: at its default it would limit this process (and so the
    # runs it starts) to one thread and one core
    os.environ["TRACEGRAD_BENCH_THREADS"] = "default"
    sys.path.insert(0, HERE)
    from one_pass import cpu

    from tracegrad.backends import threads

    return (f"{cpu()}; {threads.available_cores()} cores available to the process; "
            f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def run_once(script: str, args: list[str], setting: str) -> tuple[dict, tuple]:
    """`{workload: {library: seconds}}` of one run of `script` at `setting`, and the 1-minute
    load average before and after it."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "result.json")
        env = dict(os.environ, TRACEGRAD_BENCH_THREADS=setting)
        before = os.getloadavg()[0]
        subprocess.run([sys.executable, os.path.join(HERE, script), *args, "--json", out],
                       env=env, check=True, stdout=subprocess.DEVNULL)
        after = os.getloadavg()[0]
        with open(out) as f:
            results = json.load(f)["results"]
    return {r["workload"]: r["seconds"] for r in results}, (before, after)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--busy", action="store_true",
                        help="a busy loop in another process during the runs")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("script")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    opts = parser.parse_args(argv)
    print("machine:", machine())
    print("command: python benchmarks/scaling.py", " ".join(
        (["--busy"] if opts.busy else []) + [f"--repeat {opts.repeat}", opts.script]
        + opts.args))
    busy = (subprocess.Popen([sys.executable, "-c", "while 1: pass"]) if opts.busy else None)
    runs = {"1": [], "default": []}
    loads = []
    try:
        time.sleep(1.0 if busy else 0.0)
        for i in range(opts.repeat):  # the order alternates: a load that drifts biases neither
            for setting in list(runs)[::1 if i % 2 == 0 else -1]:
                times, load = run_once(opts.script, opts.args, setting)
                runs[setting].append(times)
                loads.append(load)
    finally:
        if busy is not None:
            busy.kill()
    print("load average (1 min) around each run:",
          ", ".join(f"{a:.2f}-{b:.2f}" for a, b in loads))
    median = {s: {w: {lib: statistics.median(r[w][lib] for r in rs) for lib in rs[0][w]}
                  for w in rs[0]} for s, rs in runs.items()}
    libraries = list(next(iter(median["1"].values())))
    peers = [lib for lib in libraries if lib != "tracegrad"]
    print()
    print("| workload | " + " | ".join(f"{lib}: 1 thread / default (scaling)"
                                       for lib in libraries)
          + " | " + " | ".join(f"{p} / tracegrad at default" for p in peers) + " |")
    print("|---" * (1 + len(libraries) + len(peers)) + "|")
    for w in median["1"]:
        one, default = median["1"][w], median["default"][w]
        cells = [f"{one[lib] * 1e3:.3f} / {default[lib] * 1e3:.3f} ms "
                 f"({one[lib] / default[lib]:.2f}x)" for lib in libraries]
        cells += [f"{default[p] / default['tracegrad']:.2f}" for p in peers]
        print(f"| {w} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
