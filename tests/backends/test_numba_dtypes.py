"""The numba backend against the numpy backend on the rows of tests/ops/optable_dtypes.py
(the narrower integers and float16), compiled in a few large groups: by default (CI) the
float16 functions, the shifts, bit counts and packing, and every fourth other row (about a
minute of compiling on one core, cold); every row with `TRACEGRAD_NUMBA_OPTABLE=full`.

Integers and bools agree exactly. float16 results agree exactly too (the kernel computes
each op in float32 or float64 and rounds its result to float16, as NumPy's float16 loops
do), except on the rows of `F16_ULP`: float16 functions (NumPy's float32 loops against the
backend's float64 vector math), float16 sums and products (NumPy rounds a reduction along
a non-contiguous axis to float16 at every step) and matrix products (BLAS's order): within a
float16 ulp there (two for sums and means)."""

from __future__ import annotations

import os

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tests.backends._util import check_rows_in_groups, graph_and_inputs
from tests.ops.optable_dtypes import F16_ULP, ROWS
from tracegrad.core import tree
from tracegrad.transforms.evaluate import Interpreter

nb = pytest.importorskip("tracegrad.backends.numba")

GROUP_SIZE = 120
FULL = os.environ.get("TRACEGRAD_NUMBA_OPTABLE") == "full"
_ALWAYS = ("shift", "bitwise", "packbits", "unpackbits")
SELECTED = ROWS if FULL else [c for k, c in enumerate(ROWS) if k % 4 == 0 or c.name in F16_ULP
                              or c.name.startswith(_ALWAYS)]
GROUPS = [SELECTED[i:i + GROUP_SIZE] for i in range(0, len(SELECTED), GROUP_SIZE)]


def _assert_close(got, want, ulps, what):
    assert got.dtype == want.dtype and got.shape == want.shape, (
        f"{what}: {got.dtype}{got.shape} vs {want.dtype}{want.shape}")
    if want.dtype.kind != "f" or ulps == 0:
        np.testing.assert_array_equal(got, want, err_msg=what)
        if want.dtype.kind == "f":
            np.testing.assert_array_equal(np.signbit(got), np.signbit(want), err_msg=what)
        return
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=f"{what}: NaNs")
    ok = ~np.isnan(want)
    g, w = got[ok].astype(np.float64), want[ok].astype(np.float64)
    spacing = np.spacing(np.abs(want[ok])).astype(np.float64)
    off = np.abs(g - w) > ulps * spacing
    assert not off.any(), f"{what}: {got[ok][off]} vs {want[ok][off]} (over {ulps} ulp)"


def _check(cases):
    graph, arrays = graph_and_inputs(cases)
    with np.errstate(all="ignore"):
        want = Interpreter(graph)(arrays)
    got = nb.compile_graph(graph)(arrays)
    k = 0
    for c in cases:
        with np.errstate(all="ignore"):
            n = len(tree.flatten(c.fn(*c.args))[0])
        ulps = 0
        if c.name in F16_ULP:
            ulps = 2 if c.name.startswith(("sum", "mean", "cumsum")) else 1
        for g, w in zip(got[k:k + n], want[k:k + n], strict=True):
            _assert_close(np.asarray(g), np.asarray(w), ulps, c.name)
        k += n
    assert k == len(want)


@pytest.mark.parametrize("group", range(len(GROUPS)),
                         ids=[f"{g[0].name}..{g[-1].name}" for g in GROUPS])
def test_numba_matches_numpy_backend_on_narrow_dtypes(group):
    check_rows_in_groups(GROUPS[group], _check)


def _around_every_float16():
    """Every finite float16, the midpoints between neighbours and a float64 ulp either side
    of each (ties to even, subnormals, the overflow threshold 65520), inf and NaN."""
    h = np.arange(2**16, dtype=np.uint16).view(np.float16)
    h = np.sort(h[np.isfinite(h)].astype(np.float64))
    mid = (h[1:] + h[:-1]) / 2
    near = np.concatenate([mid, np.nextafter(mid, np.inf), np.nextafter(mid, -np.inf)])
    return np.concatenate([h, near, [65519.99, 65520.0, 1e6, -1e6, np.inf, -np.inf, np.nan]])


@pytest.mark.parametrize("source", ["float64", "float32"])
def test_casts_to_float16_round_as_numpy(source):
    x = _around_every_float16().astype(source)
    with np.errstate(over="ignore"):
        want = x.astype(np.float16)
    got = tg.function(lambda a: tnp.astype(a, np.float16), backend="numba")(x)
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got.view(np.uint16)[~np.isnan(want)],
                                  want.view(np.uint16)[~np.isnan(want)])
    assert np.isnan(got[np.isnan(want)]).all()
