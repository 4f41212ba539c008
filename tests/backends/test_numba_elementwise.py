"""The numba backend's scalar code matches the NumPy reference on edge values: NaN and
signed zeros, infinities, integer extremes, division by zero, half-way rounding."""

import numpy as np
import pytest

from tests.backends._util import assert_same, graph_of, prim_graph, reference
from tracegrad.core.op import REGISTRY

nb = pytest.importorskip("tracegrad.backends.numba")

FLOATS = [np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 1.0, -1.0,
          3.0, -7.25, 1e300, -1e-300, 0.75, 1e-8, 40.0]
INTS64 = [0, 1, -1, 2, -2, 3, -3, 7, -7, 100, 2**63 - 1, -(2**63)]
INTS32 = [0, 1, -1, 2, -2, 3, -3, 7, -7, 100, 2**31 - 1, -(2**31)]

EXACT_UNARY = ["neg", "abs", "sign", "floor", "ceil", "round", "sqrt", "is_finite", "is_nan",
               "is_inf", "stop_gradient"]
MATH_UNARY = ["exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan",
              "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh",
              "logistic", "erf"]
EXACT_BINARY = ["add", "sub", "mul", "div", "floor_div", "mod", "pow", "max", "min", "eq",
                "ne", "lt", "le", "gt", "ge"]
INT_BINARY = ["add", "sub", "mul", "floor_div", "mod", "max", "min", "and", "or", "xor",
              "eq", "ne", "lt", "le", "gt", "ge"]


def run_both(graph, arrays):
    return nb.compile_graph(graph)(arrays), reference(graph, arrays)


def check_all(names, graph, arrays, rtol=0.0):
    got, want = run_both(graph, arrays)
    for name, g, w in zip(names, got, want, strict=True):
        assert_same(g, w, rtol=rtol, what=name)


def pairs(values, dtype):
    with np.errstate(over="ignore"):  # 1e300 becomes inf in float32
        v = np.array(values, dtype=dtype)
    a, b = np.meshgrid(v, v)
    return a.ravel(), b.ravel()


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_unary_float_ops_match_numpy(dtype):
    with np.errstate(over="ignore"):
        x = np.array(FLOATS, dtype=dtype)
    names = EXACT_UNARY + MATH_UNARY
    graph = graph_of(lambda t: [REGISTRY[n].bind(t) for n in names], x)
    got, want = run_both(graph, [x])
    for name, g, w in zip(names, got, want, strict=True):
        rtol = 0.0 if name in EXACT_UNARY or dtype == "float32" else 1e-13
        assert_same(g, w, rtol=rtol, what=name)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_binary_float_ops_match_numpy(dtype):
    a, b = pairs(FLOATS, dtype)
    names = EXACT_BINARY + ["atan2"]
    graph = graph_of(lambda x, y: [REGISTRY[n].bind(x, y) for n in names], a, b)
    got, want = run_both(graph, [a, b])
    for name, g, w in zip(names, got, want, strict=True):
        # NumPy's SIMD pow and atan2 may differ from libm's in the last bit
        inexact = name in ("atan2", "pow") and dtype == "float64"
        assert_same(g, w, rtol=1e-13 if inexact else 0.0, what=name)


@pytest.mark.parametrize("dtype, values", [("int64", INTS64), ("int32", INTS32)])
def test_integer_ops_match_numpy(dtype, values):
    """Wrap-around, floor division and remainder signs, division by zero gives 0."""
    a, b = pairs(values, dtype)
    names = INT_BINARY
    graph = graph_of(lambda x, y: [REGISTRY[n].bind(x, y) for n in names]
                     + [REGISTRY[n].bind(x) for n in ("neg", "abs", "sign", "not")], a, b)
    got, want = run_both(graph, [a, b])
    for name, g, w in zip(names + ["neg", "abs", "sign", "not"], got, want, strict=True):
        assert_same(g, w, what=name)


def test_integer_power_matches_numpy_and_rejects_negative_exponents():
    a, b = pairs([0, 1, -1, 2, -3, 5, 13], "int64")
    b = np.abs(b)
    graph = prim_graph("pow", a, b)
    check_all(["pow"], graph, [a, b])
    with pytest.raises(ValueError, match="pow: integers to negative integer powers"):
        nb.compile_graph(graph)([a, -b - 1])
    for y in (0, 1, 2, 3, 7):
        for dtype in ("int32", "int64", "float32", "float64"):
            x = np.array([0, 1, -1, 2, -3, 5, 13, 100000], dtype=dtype)
            check_all(["integer_pow"], prim_graph("integer_pow", x, y=y), [x],
                      rtol=1e-13 if dtype == "float64" else 0.0)
    x = np.array(FLOATS)
    check_all(["integer_pow"], prim_graph("integer_pow", x, y=-3), [x], rtol=1e-13)


def test_bool_ops_match_numpy():
    a, b = pairs([True, False], "bool")
    names = ["add", "mul", "max", "min", "and", "or", "xor", "eq", "ne", "lt", "le", "gt",
             "ge"]
    graph = graph_of(lambda x, y: [REGISTRY[n].bind(x, y) for n in names]
                     + [REGISTRY["not"].bind(x)], a, b)
    got, want = run_both(graph, [a, b])
    for name, g, w in zip(names + ["not"], got, want, strict=True):
        assert_same(g, w, what=name)


@pytest.mark.parametrize("src", ["float64", "float32", "int64", "int32", "bool"])
def test_casts_match_numpy(src):
    """float -> int truncates toward zero; NaN -> bool is True."""
    if src.startswith("float"):
        x = np.array([v for v in FLOATS if np.isfinite(v) and abs(v) < 1e9] + [np.nan],
                     dtype=src)
        x_int = x[np.isfinite(x)]
    elif src == "bool":
        x = x_int = np.array([True, False])
    else:
        x = x_int = np.array(INTS32, dtype=src)
    targets = ["float64", "float32", "int64", "int32", "bool"]
    for arr in (x_int,):
        graph = graph_of(lambda t: [REGISTRY["convert_element_type"].bind(
            t, new_dtype=np.dtype(d)) for d in targets], arr)
        check_all(targets, graph, [arr])
    graph = graph_of(lambda t: [REGISTRY["convert_element_type"].bind(
        t, new_dtype=np.dtype(d)) for d in ("float64", "float32", "bool")], x)
    check_all(["f64", "f32", "bool"], graph, [x])


def test_select_chooses_per_element():
    p = np.array([True, False, True, False])
    a = np.array([1.0, np.nan, -0.0, 4.0])
    b = np.array([-1.0, 2.0, 3.0, np.inf])
    check_all(["select"], prim_graph("select", p, a, b), [p, a, b])
