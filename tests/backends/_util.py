"""Helpers for the backend tests: one-op graphs, and comparing backends bit for bit."""

from __future__ import annotations

import numpy as np

from tracegrad.core.ir import FuncGraph
from tracegrad.core.op import REGISTRY
from tracegrad.core.types import TensorType
from tracegrad.transforms.evaluate import Interpreter

ULP_F32 = 4


def parts(a) -> np.ndarray:
    """A complex array as its real and imaginary parts (a last axis of 2): comparisons of
    complex values are comparisons of pairs of reals."""
    a = np.asarray(a)
    return np.stack([a.real, a.imag], axis=-1)


def graph_of(fn, *arrays, name="g"):
    """The graph of `fn(*inputs)` for inputs typed like `arrays`; fn returns a tensor or list."""
    g = FuncGraph(name)
    with g.as_default():
        ins = [g.add_input(TensorType(np.shape(a), np.asarray(a).dtype)) for a in arrays]
        out = fn(*ins)
        g.outputs = [g.to_tensor(o) for o in out] if isinstance(out, (list, tuple)) \
            else [g.to_tensor(out)]
    return g


def prim_graph(name, *arrays, **attrs):
    """The graph applying primitive `name` (with `attrs`) to inputs typed like `arrays`."""
    prim = REGISTRY[name]
    return graph_of(lambda *xs: prim.bind(*xs, **attrs), *arrays, name=name)


def reference(graph, arrays):
    return Interpreter(graph)([np.asarray(a) for a in arrays])


def assert_same(got, want, *, rtol=0.0, what=""):
    """`got` equals `want`: dtype and shape, NaN where NaN, signed zeros alike when exact;
    float values within `rtol` (float32: within a few ulp when rtol is 0)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    if want.dtype.kind == "c":
        got, want = parts(got), parts(want)
    if want.dtype.kind != "f":
        np.testing.assert_array_equal(got, want, err_msg=what)
        return
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan, err_msg=f"{what}: NaN positions")
    g, w = got[~nan], want[~nan]
    inf = np.isinf(w)
    np.testing.assert_array_equal(g[inf], w[inf], err_msg=f"{what}: infinities")
    g, w = g[~inf], w[~inf]
    if rtol == 0.0 and want.dtype == np.float64:
        np.testing.assert_array_equal(g, w, err_msg=what)
        np.testing.assert_array_equal(np.signbit(g), np.signbit(w), err_msg=f"{what}: sign")
    elif rtol == 0.0:
        np.testing.assert_array_max_ulp(g, w, maxulp=ULP_F32)
    else:
        np.testing.assert_allclose(g, w, rtol=rtol, atol=0, err_msg=what)


def assert_close_backends(got, want, graph=None, atols=None):
    """Backend results agree: float64 within 1e-12 relative, float32 within 4 ulp or 1e-5
    relative (BLAS and libm may differ in the last bits), everything else exactly; an
    output's entry of `atols` widens its check by that absolute tolerance (results that are
    accurate only in norm, as LAPACK's, whose small entries carry the error of the large)."""
    assert len(got) == len(want)
    atols = [0.0] * len(want) if atols is None else atols
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        what = f"output {k}"
        if graph is not None:
            what += f" ({graph.outputs[k].op.source if graph.outputs[k].op else 'input'})"
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape, f"{what}: {g.dtype}{g.shape} vs " \
                                                          f"{w.dtype}{w.shape}"
        if w.dtype.kind == "c":
            g, w = parts(g), parts(w)
        if w.dtype.kind != "f":
            np.testing.assert_array_equal(g, w, err_msg=what)
            continue
        np.testing.assert_array_equal(np.isnan(g), np.isnan(w), err_msg=f"{what}: NaNs")
        ok = ~np.isnan(w)
        g, w = g[ok], w[ok]
        if w.dtype == np.float64:
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=max(atols[k], 1e-300),
                                       err_msg=what)
        else:
            ulp = np.abs(g.astype(np.float64) - w) / np.maximum(np.spacing(np.abs(w)), 1e-45)
            close = ((ulp <= 4) | np.isclose(g, w, rtol=1e-5, atol=atols[k]) | (g == w))
            assert close.all(), f"{what}: {g[~close]} vs {w[~close]}"


def check_rows_in_groups(cases, check) -> None:
    """`check(cases)` (one compiled graph for the group); when it fails, each row alone, so
    the failure names the rows that fail."""
    import pytest

    try:
        check(cases)
    except Exception:
        failures = []
        for c in cases:
            try:
                check([c])
            except Exception as e:  # noqa: BLE001 - collected and reported below
                failures.append(f"{c.name}: {type(e).__name__}: {str(e)[:400]}")
        if not failures:
            raise
        pytest.fail("\n".join(failures))


def combined(cases):
    """One function computing every row of `cases` on their concatenated arguments."""
    def fn(*flat):
        outs, k = [], 0
        for c in cases:
            outs.append(c.fn(*flat[k:k + len(c.args)]))
            k += len(c.args)
        return outs
    return fn


def graph_and_inputs(cases):
    """The traced graph of `combined(cases)` and its input arrays."""
    import tracegrad as tg
    from tracegrad.core import tree

    args = [a for c in cases for a in c.args]
    graph = tg.trace(combined(cases))(*args)
    leaves = tree.flatten(args)[0]
    arrays = [np.asarray(x, dtype=t.dtype) for x, t in zip(leaves, graph.inputs, strict=True)]
    return graph, arrays
