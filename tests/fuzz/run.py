"""The long fuzzing run: `python -m tests.fuzz.run --programs N --seed S` draws N programs
(a third each raw, with None dims, smooth with gradients), runs the checks of check.py and,
unlike the pytest tests, keeps going after a failure: each one is written to the log (the
program and the traceback) for minimizing by hand. A program that runs longer than
`--hang-seconds` (or whose generation does) is a hang: every thread's traceback goes to
the log and the run stops. Numba kernels compile before their first call (no background
compile) and every traced graph is verified, as in the tests (tests/conftest.py)."""

from __future__ import annotations

import argparse
import collections
import faulthandler
import sys
import time
import traceback

from hypothesis import HealthCheck, given, seed, settings

import tracegrad as tg
from tests.fuzz.check import STATS, check_backends, check_gradient
from tests.fuzz.programs import programs


KINDS = ("raw", "dynamic", "smooth")


def _one(run, kind):
    def check(program):
        run(kind, program)
    return check


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--programs", type=int, default=10_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--numba-every", type=int, default=10)
    p.add_argument("--log", default="fuzz.log")
    p.add_argument("--hang-seconds", type=float, default=300)
    a = p.parse_args(argv)
    tg.config.background_compile, tg.config.verify = False, True
    counts = collections.Counter()
    start = time.time()
    log = open(a.log, "w")

    def run(kind, program):
        counts[kind] += 1
        n = sum(counts[k] for k in KINDS)
        faulthandler.dump_traceback_later(a.hang_seconds, exit=True, file=log)
        try:
            if kind == "smooth":
                check_backends(program)
                if program.steps:
                    check_gradient(program)
            else:
                check_backends(program, numba=kind == "raw" and n % a.numba_every == 0)
                counts["numba"] += kind == "raw" and n % a.numba_every == 0
        except Exception:  # noqa: BLE001 - logged, the run goes on
            counts["failed " + kind] += 1
            print(f"=== {kind} #{n}\n{program!r}\n{traceback.format_exc()}", file=log,
                  flush=True)
        # (re-armed: the next program's generation gets its own hang-seconds)
        faulthandler.dump_traceback_later(a.hang_seconds, exit=True, file=log)
        if n % 100 == 0:
            print(f"{n} programs, {time.time() - start:.0f} s, {dict(counts)}", flush=True)

    per = -(-a.programs // 3)  # (rounded up: at least N in all)
    def on_error(description):
        counts["failed generation"] += 1
        print(f"=== generation\n{description}", file=log, flush=True)

    faulthandler.dump_traceback_later(a.hang_seconds, exit=True, file=log)
    for kind, strategy in (("raw", programs(on_error=on_error)),
                           ("dynamic", programs(dynamic=True, on_error=on_error)),
                           ("smooth", programs(smooth=True, on_error=on_error))):
        test = settings(max_examples=per, deadline=None, database=None,
                        suppress_health_check=list(HealthCheck))(
            seed(a.seed)(given(strategy)(_one(run, kind))))
        try:
            test()
        except Exception:  # noqa: BLE001 - a generation failure (InvalidRejection, a crash)
            counts["failed generation " + kind] += 1
            print(f"=== generation {kind}\n{traceback.format_exc()}", file=log, flush=True)
    faulthandler.cancel_dump_traceback_later()
    print(f"done: {sum(counts[k] for k in KINDS)} "
          f"programs in {time.time() - start:.0f} s, {dict(counts)}, fallbacks {dict(STATS)}",
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
