"""The numpy backend's interpreter holds the values still to be read, not every value a run
computed: an unrolled chain's peak memory does not grow with its length (issue 30)."""

import tracemalloc

import numpy as np

import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tracegrad.transforms import evaluate
from tracegrad.transforms.evaluate import Interpreter

SIZE = 20_000  # float64 elements: 160 kB an array


def _chain(steps):
    def f(x):
        for _ in range(steps):
            x = tnp.sin(x) * 1.5 + x
        return tnp.sum(x)

    return f


def _peak_arrays(steps):
    """Peak traced memory of one run of the chain's value and gradient, in arrays of SIZE."""
    graph = tg.function(tg.value_and_grad(_chain(steps))).get_concrete_function(
        np.ones(SIZE)).graph
    run = Interpreter(graph)
    run([np.zeros(SIZE)])  # (code mode: the code is generated before memory is traced)
    x = np.linspace(0.0, 1.0, SIZE)
    tracemalloc.start()
    try:
        value, gradient = run([x])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return peak / (8 * SIZE), value, gradient


@pytest.fixture(params=["walked", "code"])
def how(request, monkeypatch):
    """The interpreter walks its plan op by op, or runs it as generated code."""
    if request.param == "code":
        monkeypatch.setattr(evaluate, "_WALKS_BEFORE_CODE", 0)
    return request.param


@pytest.mark.usefixtures("how")
def test_peak_memory_is_the_live_values():
    # the backward pass needs one array a step from the forward pass (the step's input);
    # every other value (7 arrays a step, 279 arrays at 40 steps when all were kept) dies
    # once read
    short, long_ = 10, 40
    peak_short, value, gradient = _peak_arrays(short)
    peak_long, _, _ = _peak_arrays(long_)
    assert peak_short < 1.5 * short + 4, peak_short
    assert peak_long < 1.5 * long_ + 4, peak_long
    x = np.linspace(0.0, 1.0, SIZE)
    want, d = x.copy(), np.ones(SIZE)
    for _ in range(short):
        want, d = np.sin(want) * 1.5 + want, d * (np.cos(want) * 1.5 + 1)
    np.testing.assert_allclose(value, np.sum(want), rtol=1e-12)
    np.testing.assert_allclose(gradient, d, rtol=1e-12)


@pytest.mark.usefixtures("how")
def test_forward_chain_holds_a_few_arrays():
    # no gradient: each step's values die at the next step, whatever the length
    graph = tg.function(_chain(60)).get_concrete_function(np.ones(SIZE)).graph
    run = Interpreter(graph)
    run([np.zeros(SIZE)])  # (code mode: the code is generated before memory is traced)
    x = np.linspace(0.0, 1.0, SIZE)
    tracemalloc.start()
    try:
        (value,) = run([x])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 * (8 * SIZE), peak / (8 * SIZE)  # 60 steps, 180 values: 8 arrays at most
    want = x.copy()
    for _ in range(60):
        want = np.sin(want) * 1.5 + want
    np.testing.assert_allclose(value, np.sum(want), rtol=1e-12)
