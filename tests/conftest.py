"""Shared fixtures: the backend(s) under test and float64 finite-difference helpers."""

import os

import numpy as np
import pytest

# A numba function's first calls wait for its kernel (they would run the numpy reference
# while it compiles in the background): numba tests test numba code from the first call.
# Set in the environment so that examples run as subprocesses inherit it.
os.environ.setdefault("TRACEGRAD_BACKGROUND_COMPILE", "0")

import tracegrad as tg  # noqa: E402

tg.config.background_compile = os.environ["TRACEGRAD_BACKGROUND_COMPILE"] not in ("", "0")

# Every graph traced by a test is checked by the verifier (TRACEGRAD_VERIFY=0 turns it off).
tg.config.verify = os.environ.get("TRACEGRAD_VERIFY", "1") not in ("", "0")

# The backends every backend-parametrised test runs on.
TEST_BACKENDS = os.environ.get("TRACEGRAD_TEST_BACKENDS", "numpy,numba").split(",")


@pytest.fixture(params=TEST_BACKENDS)
def backend(request):
    """Run the test with `tg.config.backend` set to each backend under test."""
    saved = tg.config.backend
    tg.config.backend = request.param
    try:
        yield request.param
    finally:
        tg.config.backend = saved


@pytest.fixture
def numpy_backend():
    """Run the test with `tg.config.backend` set to the numpy backend (the reference)."""
    saved = tg.config.backend
    tg.config.backend = "numpy"
    try:
        yield
    finally:
        tg.config.backend = saved


@pytest.fixture
def rng():
    return np.random.default_rng(0)
