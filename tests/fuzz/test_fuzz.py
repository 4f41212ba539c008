"""The random-program fuzzer (see tests/fuzz/programs.py for the programs, check.py for the
checks). CI runs a fixed (derandomized) sample; `TRACEGRAD_FUZZ_EXAMPLES=N` runs N programs
per test, with numba on every `TRACEGRAD_FUZZ_NUMBA_EVERY`-th (CI: a handful), whose
parallel kernels run on 2 threads."""

from __future__ import annotations

import itertools
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import tracegrad as tg
import tracegrad.numpy as tnp
from tests.fuzz.check import check_backends, check_gradient, check_ops_alone
from tests.fuzz.programs import programs
from tracegrad.backends import threads
from tracegrad.backends.numba import parallel

EXAMPLES = int(os.environ.get("TRACEGRAD_FUZZ_EXAMPLES", "0"))
CI = EXAMPLES == 0
NUMBA_EVERY = int(os.environ.get("TRACEGRAD_FUZZ_NUMBA_EVERY", "0")) or (25 if CI else 10)


def _settings(ci_examples):
    return settings(max_examples=EXAMPLES or ci_examples, deadline=None, derandomize=CI,
                    suppress_health_check=list(HealthCheck), print_blob=True)


_counter = itertools.count()


@pytest.fixture(autouse=True)
def _parallel_kernels(monkeypatch):
    """The numba programs run their parallel kernels on 2 threads, whatever their size
    (docs/numba.md, "Parallel loops")."""
    monkeypatch.setattr(tg.config, "parallel", True)
    monkeypatch.setattr(threads, "num_threads", 2)
    monkeypatch.setattr(parallel, "PARALLEL_MIN_ELEMENTS", 0)


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


def test_rounding_amplified_by_an_ill_conditioned_op_is_checked_op_by_op():
    # found by the long run: vjp of exp(3 tanh(x)) at x near 15 computes 1 - tanh(x)**2 ~
    # 4e-13, which turns one ulp of tanh into a 1e-11 relative difference of the whole
    # program; each op alone is within its bound
    def f(x):
        out, pullback = tg.vjp(lambda y: tnp.exp(3.0 * tnp.tanh(y)), x)
        return out, pullback(out * 0.5)[0]

    x = np.array([[14.7997317, 1.87658027], [1.78444506, 14.87930192]])
    want = tg.function(f, backend="numpy")(x)
    got = tg.function(f, backend="numba")(x)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-9)
    check_ops_alone(f, [x], want)
