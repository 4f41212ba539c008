"""tracegrad.scipy.linalg beyond the op table: argument errors, second derivatives of expm,
unknown dims, and pivots that do not fit."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg

import tracegrad as tg
import tracegrad.numpy as tnp
import tracegrad.scipy.linalg as tsl
from tracegrad import ops
from tracegrad.errors import (
    DTypeError,
    InvalidArgumentError,
    NotDifferentiableError,
    ShapeError,
    UnsupportedOpError,
)


def test_argument_errors_name_the_function():
    a, b = np.eye(3) * 2, np.ones(3)
    with pytest.raises(InvalidArgumentError, match="solve: 'banana' is not a recognized"):
        tsl.solve(a, b, assume_a="banana")
    with pytest.raises(InvalidArgumentError, match="lu_solve: incorrect trans"):
        tsl.lu_solve(tsl.lu_factor(a), b, trans="T")
    with pytest.raises(DTypeError, match="lu_solve: piv must be integers"):
        tsl.lu_solve((a, np.zeros(3)), b)
    with pytest.raises(UnsupportedOpError, match="eigh: subset_by_value"):
        tsl.eigh(a, subset_by_value=(0.0, 1.0))
    with pytest.raises(InvalidArgumentError, match="eigh: unknown type 4"):
        tsl.eigh(a, a, type=4)
    with pytest.raises(InvalidArgumentError, match="eigh: requested eigenvalue indices"):
        tsl.eigh(a, subset_by_index=(1, 3))
    with pytest.raises(ShapeError, match="expm: last 2 dimensions"):
        tsl.expm(np.ones((2, 3)))
    with pytest.raises(ShapeError, match="lu_factor: 1-dimensional"):
        tsl.lu_factor(np.ones(3))


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_pivots_out_of_range_are_an_index_error(backend):
    f = tg.function(lambda p: ops.lu_pivots_to_permutation(p, permutation_size=3),
                    backend=backend)
    np.testing.assert_array_equal(f(np.array([2, 2, 2], np.int32)), [2, 0, 1])
    with pytest.raises(IndexError, match="lu_pivots_to_permutation"):
        f(np.array([0, 3, 2], np.int32))


def test_expm_second_derivatives_match_finite_differences(numpy_backend):
    # the rule's mathematics (the op tables compile expm on numba)
    rng = np.random.default_rng(0)
    a, w, v = (rng.standard_normal((3, 3)) * 0.7 for _ in range(3))

    def grad_np(x, h=1e-6):  # central differences of sum(w * expm(x))
        g = np.zeros_like(x)
        for i in np.ndindex(x.shape):
            d = np.zeros_like(x)
            d[i] = h
            g[i] = np.sum(w * (scipy.linalg.expm(x + d) - scipy.linalg.expm(x - d))) / (2 * h)
        return g

    grad = tg.grad(lambda x: tnp.sum(w * tsl.expm(x)))
    np.testing.assert_allclose(grad(a), grad_np(a), rtol=1e-7, atol=1e-8)
    # d/dt grad(a + t v) at 0: the Hessian along v, through expm's gradient rule
    _, hv = tg.jvp(grad, (a,), (v,))
    want = (grad_np(a + 1e-4 * v) - grad_np(a - 1e-4 * v)) / 2e-4
    np.testing.assert_allclose(hv, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_unknown_dims_take_one_graph_for_every_size(backend):
    spec = [tg.TensorSpec([None, None])]
    factor = tg.function(tsl.lu_factor, input_signature=spec, backend=backend)
    expm = tg.function(tsl.expm, input_signature=spec, backend=backend)
    rng = np.random.default_rng(1)
    for shape in ((3, 3), (5, 2), (2, 4)):
        a = rng.standard_normal(shape)
        got, want = factor(a), scipy.linalg.lu_factor(a)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-14)
        np.testing.assert_array_equal(got[1], want[1])
    for n in (2, 6):
        a = rng.standard_normal((n, n))
        np.testing.assert_allclose(expm(a), scipy.linalg.expm(a), rtol=1e-13)


def test_expm_gradient_needs_static_dims():
    f = tg.function(tg.grad(lambda x: tnp.sum(tsl.expm(x))),
                    input_signature=[tg.TensorSpec([None, None])], backend="numpy")
    with pytest.raises(NotDifferentiableError, match="expm"):
        f(np.eye(2))
