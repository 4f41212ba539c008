"""The op table's forward-mode column: for every row with `grad_argnums`, `tg.jvp` (numpy
backend) along random tangents agrees with float64 central finite differences of the
row's NumPy reference, and is the transpose of `tg.vjp`: <J t, c> == <t, J^T c> for random
tangents t and cotangents c. The primal results `tg.jvp` returns pass the row's value check.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest

import tracegrad as tg
from tests.ops.test_op_grads import (
    GRAD_CASES, _directional, _random_cotangents, _vjp_traced, inner, random_like,
)
from tracegrad.core import tree

# <J t, c> and <t, J^T c> are the same sums of products taken in another order: they agree
# within this many ulps of the sizes of their terms.
TRANSPOSE_ULPS = 16


pytestmark = pytest.mark.usefixtures("numpy_backend")


def _leaves(out) -> list:
    return [np.asarray(x) for x in tree.flatten(out)[0]]


def _rng(case):
    return np.random.default_rng(zlib.crc32(case.name.encode()))


def _eps(case) -> float:
    """The machine epsilon of the row's least precise differentiated argument."""
    return max(float(np.finfo(np.asarray(case.args[i]).dtype).eps) for i in case.grad_argnums)


def _jvp(case, tangents) -> tuple[list, list]:
    """(results, tangent results) of `tg.jvp` of the row's function of its grad_argnums."""
    args = list(case.args)
    primals = tuple(args[i] for i in case.grad_argnums)

    def fn(*diff):
        full = list(args)
        for i, d in zip(case.grad_argnums, diff, strict=True):
            full[i] = d
        return case.fn(*full)

    tangents = tuple(t.astype(np.asarray(p).dtype) for t, p in zip(tangents, primals,
                                                                     strict=True))
    with np.errstate(all="ignore"):
        out, tangent_out = tg.jvp(fn, primals, tangents)
    return _leaves(out), _leaves(tangent_out)


def _tangents(case, rng) -> list:
    return [random_like(case.args[i], rng) for i in case.grad_argnums]


def _inner(xs, ys) -> float:
    return sum(inner(np.asarray(x), y) for x, y in zip(xs, ys, strict=True))


def _bound(xs, ys) -> float:
    return sum(float(np.linalg.norm(np.asarray(x).ravel()) * np.linalg.norm(np.ravel(y)))
               for x, y in zip(xs, ys, strict=True))


def _check_types(case, out, tangent_out):
    assert len(tangent_out) == len(out), f"{len(tangent_out)} tangents for {len(out)} results"
    for k, (y, t) in enumerate(zip(out, tangent_out, strict=True)):
        assert t.shape == y.shape, f"tangent {k}: shape {t.shape}, the result's {y.shape}"
        assert t.dtype == y.dtype, f"tangent {k}: dtype {t.dtype}, the result's {y.dtype}"
        if y.dtype.kind in "fc":
            assert np.all(np.isfinite(t)), f"tangent {k} is not finite: {t}"
        else:
            assert not np.any(t), f"tangent {k} of an integer or bool result is not zero"


@pytest.mark.parametrize("case", GRAD_CASES, ids=lambda c: c.name)
def test_jvp_matches_finite_differences(case):
    rng = _rng(case)
    with np.errstate(all="ignore"):
        expected = _leaves(case.reference(*case.args))
    rtol = max(case.grad_rtol, 100 * _eps(case))
    for _ in range(3):
        tangents = _tangents(case, rng)
        out, tangent_out = _jvp(case, tangents)
        _check_types(case, out, tangent_out)
        cotangents = _random_cotangents(out, rng)
        analytic = _inner(tangent_out, cotangents)
        numeric = _directional(case.reference, case.args, case.grad_argnums, tangents,
                               cotangents)
        bound = _bound(tangent_out, cotangents)
        assert abs(analytic - numeric) <= rtol * bound + 1e-10, (
            f"{case.name}: <jvp(t), c> = {analytic!r}, finite differences {numeric!r}")
    for y, e in zip(out, expected, strict=True):
        assert y.shape == e.shape and y.dtype == e.dtype, f"result {y.dtype}{y.shape}"
        np.testing.assert_allclose(y, e, rtol=case.rtol, atol=case.atol, equal_nan=True,
                                   err_msg=f"the results of jvp ({case.why})")


@pytest.mark.parametrize("case", GRAD_CASES, ids=lambda c: c.name)
def test_jvp_is_the_transpose_of_vjp(case):
    rng = _rng(case)
    for _ in range(3):
        tangents = _tangents(case, rng)
        out, tangent_out = _jvp(case, tangents)
        cotangents = _random_cotangents(out, rng)
        grads = _vjp_traced(case, cotangents)
        forward, reverse = _inner(tangent_out, cotangents), _inner(grads, tangents)
        bound = _bound(tangent_out, cotangents) + _bound(grads, tangents)
        assert abs(forward - reverse) <= TRANSPOSE_ULPS * _eps(case) * bound, (
            f"{case.name}: <jvp(t), c> = {forward!r}, <t, vjp(c)> = {reverse!r}")
