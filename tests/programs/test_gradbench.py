"""GradBench's problems as benchmarks/gradbench writes them in tracegrad, at tiny sizes:
values against the separate float64 NumPy references, gradients against central
differences of those references, kmeans' `dir` against its closed form."""

import pathlib
import sys

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "benchmarks" / "gradbench")]
from finite_diff import central_difference  # noqa: E402
from gradbench_problems import PROBLEMS, kmeans_dir_tracegrad  # noqa: E402


def _reference_value(problem, size, args, i):
    def value(x):
        a = list(args)
        a[i] = x
        return problem.reference(*a, size=size)[0]
    return value


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_value_and_gradient_match_numpy_and_central_differences(name):
    problem, backend = PROBLEMS[name], "numpy"  # numba: benchmarks/gradbench/run.py checks it
    size = problem.tiny
    args = problem.data(size)
    f = problem.make(tnp, tg.scan, size)
    ref_value, ref_grads = problem.reference(*args, size=size)
    np.testing.assert_allclose(tg.function(f, backend=backend)(*args), ref_value, rtol=1e-12)
    value, grads = tg.function(tg.value_and_grad(f, argnums=problem.wrt), backend=backend)(*args)
    np.testing.assert_allclose(value, ref_value, rtol=1e-12)
    for i, g in zip(problem.wrt, grads, strict=True):
        fd = central_difference(_reference_value(problem, size, args, i), args[i])
        np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-7)
    if problem.derivative == "dir":
        cost, direction = tg.function(kmeans_dir_tracegrad(f), backend=backend)(*args)
        np.testing.assert_allclose(cost, ref_value, rtol=1e-12)
        np.testing.assert_allclose(direction, ref_grads[0], rtol=1e-12, atol=1e-14)
    elif ref_grads is not None:
        for g, r in zip(grads, ref_grads, strict=True):
            np.testing.assert_allclose(g, r, rtol=1e-10, atol=1e-12)

