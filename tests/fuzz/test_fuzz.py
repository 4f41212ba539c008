"""The random-program fuzzer (see tests/fuzz/programs.py for the programs, check.py for the
checks). CI runs a fixed (derandomized) sample; `TRACEGRAD_FUZZ_EXAMPLES=N` runs N programs
per test, with numba on every `TRACEGRAD_FUZZ_NUMBA_EVERY`-th (CI: a handful)."""

from __future__ import annotations

import itertools
import os

from hypothesis import HealthCheck, given, settings

from tests.fuzz.check import check_backends, check_gradient
from tests.fuzz.programs import programs

EXAMPLES = int(os.environ.get("TRACEGRAD_FUZZ_EXAMPLES", "0"))
CI = EXAMPLES == 0
NUMBA_EVERY = int(os.environ.get("TRACEGRAD_FUZZ_NUMBA_EVERY", "0")) or (25 if CI else 10)


def _settings(ci_examples):
    return settings(max_examples=EXAMPLES or ci_examples, deadline=None, derandomize=CI,
                    suppress_health_check=list(HealthCheck), print_blob=True)


_counter = itertools.count()


@_settings(150)
@given(programs())
def test_random_programs_agree_across_backends(program):
    check_backends(program, numba=next(_counter) % NUMBA_EVERY == 0)


@_settings(40)
@given(programs(dynamic=True))
def test_random_programs_with_none_dims(program):
    check_backends(program)


@_settings(80)
@given(programs(smooth=True))
def test_random_smooth_programs_gradients(program):
    check_backends(program)
    if program.steps:
        check_gradient(program)
