"""Shared fixtures: the backend(s) under test and float64 finite-difference helpers."""

import os

import numpy as np
import pytest

import tracegrad as tg

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
