"""The numba backend's non-elementwise code (reductions, arg-reductions, cumulative ops,
sorting, dot_general, indexing, data movement, linear algebra) matches the NumPy reference."""

import itertools

import numpy as np
import pytest

from tests.backends._util import assert_same, graph_of, prim_graph, reference
from tracegrad.core.op import REGISTRY
from tracegrad.errors import ShapeError

nb = pytest.importorskip("tracegrad.backends.numba")


def check(name, *arrays, rtol=0.0, **attrs):
    """Primitive `name` on `arrays`: numba result == numpy reference."""
    compare(prim_graph(name, *arrays, **attrs), arrays, rtol, f"{name} {attrs}")


def check_variants(name, arrays, variants, rtol=0.0):
    """One kernel computing `name` with each attribute dict of `variants` (compiles once)."""
    prim = REGISTRY[name]
    graph = graph_of(lambda *xs: [prim.bind(*xs, **v) for v in variants], *arrays, name=name)
    compare(graph, arrays, rtol, name)


def compare(graph, arrays, rtol, what):
    arrays = [np.asarray(a) for a in arrays]
    got = nb.compile_graph(graph)(arrays)
    want = reference(graph, arrays)
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        assert_same(g, w, rtol=rtol, what=f"{what} output {k}")


def data(shape, dtype="float64", seed=0, nan=False):
    r = np.random.default_rng(seed)
    if dtype == "bool":
        return r.random(shape) < 0.5
    if np.dtype(dtype).kind == "i":
        return r.integers(-5, 6, size=shape).astype(dtype)
    x = r.standard_normal(shape).astype(dtype)
    if nan and x.size > 3:
        x.flat[[1, x.size // 2]] = np.nan
    return x


REDUCE_AXES = [(0,), (1,), (2,), (0, 1), (0, 2), (1, 2), (0, 1, 2)]


@pytest.mark.parametrize("name", ["reduce_sum", "reduce_prod", "reduce_max", "reduce_min"])
@pytest.mark.parametrize("dtype", ["float64", "float32", "int64", "int32", "bool"])
def test_reductions_over_every_axis_set(name, dtype):
    x = data((3, 4, 5), dtype, nan=True)
    if name == "reduce_prod" and dtype.startswith("float"):
        x = np.where(np.isnan(x), x, 1 + x / 10).astype(dtype)
    variants = [{"axes": a, "keepdims": k} for a, k in itertools.product(REDUCE_AXES, (0, 1))]
    prim, cast = REGISTRY[name], REGISTRY["convert_element_type"]

    def fn(t):  # each reduction of the array itself and of a fused (elementwise) operand
        fused = cast.bind(t, new_dtype=t.dtype)
        return [prim.bind(v, **a) for a in variants for v in (t, fused)]

    compare(graph_of(fn, x), [x], 0.0, name)  # the same summation order: exact


def test_reduce_max_propagates_nan_and_handles_infinities():
    x = np.array([[1.0, np.nan, 3.0], [-np.inf, -np.inf, -np.inf], [np.inf, 2.0, np.nan]])
    for name in ("reduce_max", "reduce_min"):
        check(name, x, axes=(1,))
        check(name, x, axes=(0,))
        check(name, x, axes=(0, 1))


@pytest.mark.parametrize("name", ["argmax", "argmin"])
@pytest.mark.parametrize("dtype", ["float64", "float32", "int32", "bool"])
def test_arg_reductions_pick_first_occurrence_and_first_nan(name, dtype):
    x = data((4, 6), dtype)
    if dtype.startswith("float"):
        x[1, [2, 4]] = np.nan
        x[2, :] = 1.0
    variants = [{"axis": a, "keepdims": k} for a, k in itertools.product((0, 1), (0, 1))]
    check_variants(name, [x], [*variants, {"axis": 1, "index_dtype": np.dtype("int32")}])
    check(name, x[0], axis=0)


@pytest.mark.parametrize("name", ["cumsum", "cumprod"])
@pytest.mark.parametrize("dtype", ["float64", "float32", "int32", "bool"])
def test_cumulative_ops_forward_and_reverse(name, dtype):
    x = data((3, 5), dtype)
    variants = [{"axis": a, "reverse": r} for a, r in itertools.product((0, 1), (0, 1))]
    check_variants(name, [x], variants)


@pytest.mark.parametrize("dtype", ["float64", "float32", "int64", "bool"])
def test_sort_and_argsort_are_stable_with_nan_last(dtype):
    x = data((4, 7), dtype)
    if dtype.startswith("float"):
        x[0, [1, 5]] = np.nan
        x[1, :] = [0.0, -0.0, 1.0, 0.0, -0.0, -1.0, 1.0]
        x[2, 3] = np.inf
    graph = graph_of(lambda t: [REGISTRY[n].bind(t, axis=a) for n in ("sort", "argsort")
                                for a in (0, 1)], x)
    compare(graph, [x], 0.0, "sort")


DOTS = [  # (lhs shape, rhs shape, dimension_numbers)
    ((3, 4), (4, 5), (((1,), (0,)), ((), ()))),  # matmul
    ((3, 4), (5, 4), (((1,), (1,)), ((), ()))),  # x @ w.T
    ((4, 3), (4, 5), (((0,), (0,)), ((), ()))),  # x.T @ w
    ((4, 3), (5, 4), (((0,), (1,)), ((), ()))),  # x.T @ w.T
    ((4,), (4,), (((0,), (0,)), ((), ()))),  # inner product
    ((3,), (5,), (((), ()), ((), ()))),  # outer product
    ((3, 4), (4,), (((1,), (0,)), ((), ()))),  # matrix @ vector
    ((1, 4), (4,), (((1,), (0,)), ((), ()))),  # matrix @ vector: rows in blocks of 4
    ((2, 6), (6,), (((1,), (0,)), ((), ()))),  # and 1-3 rows left over
    ((8, 5), (5,), (((1,), (0,)), ((), ()))),
    ((9, 3), (3,), (((1,), (0,)), ((), ()))),
    ((7, 5), (5,), (((1,), (0,)), ((), ()))),
    ((4,), (4, 5), (((0,), (0,)), ((), ()))),  # vector @ matrix
    ((2, 3, 4), (2, 4, 5), (((2,), (1,)), ((0,), (0,)))),  # batched matmul
    ((3, 2, 4), (4, 5, 2), (((2,), (0,)), ((1,), (2,)))),  # batch dims anywhere
    ((2, 3, 4), (3, 4, 6), (((1, 2), (0, 1)), ((), ()))),  # two contracting dims
    ((3, 0), (0, 5), (((1,), (0,)), ((), ()))),  # empty contraction
]


@pytest.mark.parametrize("dtype", ["float64", "float32", "int64", "int32", "bool"])
def test_dot_general_layouts(dtype):
    arrays = []
    for k, (ls, rs, _) in enumerate(DOTS):
        arrays += [data(ls, dtype, seed=k), data(rs, dtype, seed=k + 50)]
    dot = REGISTRY["dot_general"]

    def fn(*xs):
        return [dot.bind(xs[2 * k], xs[2 * k + 1], dimension_numbers=dn)
                for k, (_, _, dn) in enumerate(DOTS)]

    rtol = 1e-12 if dtype == "float64" else (1e-5 if dtype == "float32" else 0.0)
    compare(graph_of(fn, *arrays), arrays, rtol, "dot_general")


def test_dot_general_of_a_scalar():
    check("dot_general", np.array(2.5), data((3, 2)),
          dimension_numbers=(((), ()), ((), ())))


def test_gather_with_negative_indices_and_out_of_bounds_error():
    x = data((5, 3))
    i0, i1, i2 = np.array([[0, -1], [4, 2]]), np.array([2, -3, 0, 0]), np.array(-2)
    gather = REGISTRY["gather"]
    graph = graph_of(lambda t, a, b, c: [gather.bind(t, a, axis=0), gather.bind(t, b, axis=1),
                                         gather.bind(t, c, axis=0)], x, i0, i1, i2)
    compare(graph, [x, i0, i1, i2], 0.0, "gather")
    graph = prim_graph("gather", x, np.array([0, 5]), axis=0)
    with pytest.raises(IndexError, match=r"gather: index 5 is out of bounds for an axis of "
                                         r"size 5 \(op created at"):
        nb.compile_graph(graph)([x, np.array([0, 5])])


def test_a_serial_kernel_raises_through_calls_a_parallel_one_by_statements(monkeypatch):
    """A `raise` statement makes Numba release every array alive at it on its own exit
    path; serial kernels check through helper calls instead, with the same errors."""
    from tracegrad.backends.numba import parallel as par

    monkeypatch.setattr(par, "PARALLEL_MIN_ELEMENTS", 0)
    p = REGISTRY
    x, idx, k = data((6, 4)), np.array([1, -2]), np.array([2, 3, 1, 0])
    graph = graph_of(lambda t, i, j: [p["gather"].bind(t, i, axis=0),
                                      p["scatter_add"].bind(t, i, t[:2] * 2.0, axis=0),
                                      p["pow"].bind(j, j)], x, idx, k)
    serial = nb.generate_source(graph)
    assert "_index(" in serial and "_value_error(" in serial
    assert "raise " not in serial.split("def kernel", 1)[1]
    assert "raise IndexError" in nb.generate_source(graph, parallel=True)
    fn = nb.compile_graph(graph)
    compare(graph, [x, idx, k], 0.0, "gather")
    with pytest.raises(IndexError, match="gather: index -7 is out of bounds"):
        fn([x, np.array([0, -7]), k])
    with pytest.raises(ValueError, match="pow: integers to negative integer powers"):
        fn([x, idx, -k])


def test_a_loop_over_a_dim_of_size_one_is_its_body():
    """A nest's loop over a dim of size 1 is not written: its index is 0."""
    p = REGISTRY
    x = data((1, 1, 5))
    graph = graph_of(lambda t: [p["pad"].bind(t, np.float64(0.0),
                                              padding_config=((2, 1, 0), (0, 3, 0), (1, 0, 0)))
                                + 1.0], x)
    source = nb.generate_source(graph)
    assert "range(1)" not in source
    want = np.ones((4, 4, 6))
    want[2:3, 0:1, 1:] += x
    np.testing.assert_array_equal(nb.compile_graph(graph)([x])[0], want)
    compare(graph, [x], 0.0, "pad")


def test_checks_call_one_compiled_helper_whatever_their_tags():
    """A check's tag is an int64 argument, not a literal: Numba compiles a called function
    again for each literal argument value, once per gather of a kernel."""
    import sys

    from numba.core import types

    from tracegrad.backends.numba import helpers

    p = REGISTRY
    x = data((6, 4))
    graph = graph_of(lambda t, i, j, k: [p["gather"].bind(t, i, axis=0)
                                         + p["gather"].bind(t, j, axis=0)
                                         + p["gather"].bind(t, k, axis=0)],
                     x, np.array([1, 2]), np.array([3, -1]), np.array([0, 5]))
    source = nb.generate_source(graph)
    assert source.count("_index(") == 3 and "np.int64(" in source
    fn = nb.compile_graph(graph)
    out = fn([x, np.array([1, 2]), np.array([3, -1]), np.array([0, 5])])[0]
    np.testing.assert_array_equal(out, x[[1, 2]] + x[[3, -1]] + x[[0, 5]])
    # the kernel above may come from a warm cache, which types no call: a copy compiled in
    # memory types its three calls of `_index` (the shared helper, loaded or compiled)
    from tracegrad.backends.numba import cache

    copy, cg = nb._source(*nb._generate(graph, False))
    module = cache._exec_module("<tags test>", copy, "tg_test_tags", cached=False)
    try:
        module.kernel.compile(nb._signature(graph, cg))
    finally:
        del sys.modules["tg_test_tags"]
    index = sys.modules[helpers.MODULE]._index
    assert index.signatures
    assert not any(isinstance(a, types.Literal) for sig in index.signatures for a in sig)
    with pytest.raises(IndexError, match="gather: index 6 is out of bounds"):
        fn([x, np.array([1, 2]), np.array([3, -1]), np.array([0, 6])])


@pytest.mark.parametrize("name", ["scatter", "scatter_add"])
@pytest.mark.parametrize("dtype", ["float64", "int32", "bool"])
def test_scatter_with_repeated_indices(name, dtype):
    x = data((5, 3), dtype)
    idx = np.array([1, -1, 1, 0])
    args = [x, idx, data((4, 3), dtype, seed=3), np.array([2, 0]), data((5, 2), dtype, seed=4)]
    prim = REGISTRY[name]
    compare(graph_of(lambda t, i, u, j, w: [prim.bind(t, i, u, axis=0), prim.bind(t, j, w, axis=1)],
                     *args), args, 0.0, name)
    graph = prim_graph(name, x, idx, data((4, 3), dtype), axis=0)
    with pytest.raises(IndexError, match=f"{name}: index -6 is out of bounds"):
        nb.compile_graph(graph)([x, np.array([0, -6, 1, 1]), data((4, 3), dtype)])


def test_data_movement_ops():
    p = REGISTRY
    args = [data((3, 4, 2)), np.array(-1.0), np.arange(3, dtype=np.int32),
            np.array(7, dtype=np.int32), data((3, 1, 2)), data((3, 2, 2)), data((4, 1)),
            np.array(2.0), data((1, 1))]

    def fn(x, pv, xi, pvi, c1, c2, b, s, one):
        return [
            p["pad"].bind(x, pv, padding_config=((1, 2, 0), (0, 1, 2), (2, 0, 1))),
            p["pad"].bind(xi, pvi, padding_config=((0, 0, 3),)),
            p["concatenate"].bind(x, c1, c2, dimension=1),
            p["concatenate"].bind(xi, xi, dimension=0),
            p["slice"].bind(x, start_indices=(1, 0, 0), limit_indices=(3, 4, 2),
                            strides=(1, 3, 2)),
            p["rev"].bind(x, dimensions=(0, 2)),
            p["transpose"].bind(x, permutation=(2, 0, 1)),
            p["broadcast_in_dim"].bind(b, shape=(3, 4, 5), broadcast_dimensions=(1, 2)),
            p["broadcast_in_dim"].bind(s, shape=(2, 3), broadcast_dimensions=()),
            p["reshape"].bind(x, new_sizes=(6, 4)),
            p["reshape"].bind(x, new_sizes=(3, 1, 4, 2)),
            p["reshape"].bind(one, new_sizes=()),
            p["iota"].bind(dtype=np.dtype("float32"), shape=(3, 4), dimension=1),
            p["iota"].bind(dtype=np.dtype("int32"), shape=(3, 4), dimension=0),
            p["dim_size"].bind(x, axis=1),
        ]

    compare(graph_of(fn, *args), args, 0.0, "data movement")


def test_linear_algebra_ops():
    r = np.random.default_rng(1)
    a = r.standard_normal((2, 4, 4))
    spd = a @ a.transpose(0, 2, 1) + 4 * np.eye(4)
    b = r.standard_normal((2, 4, 3))
    p = REGISTRY
    tri = np.tril(spd)
    args = [a, spd, b, tri, np.ascontiguousarray(tri.transpose(0, 2, 1)),
            np.ascontiguousarray(b.transpose(0, 2, 1))]

    def fn(a, spd, b, lo, up, bt):
        outs = [p["cholesky"].bind(spd), p["solve"].bind(spd, b), p["det"].bind(a),
                *p["slogdet"].bind(a)]
        for left, lower, trans, unit in itertools.product(*[(True, False)] * 4):
            outs.append(p["triangular_solve"].bind(
                lo if lower else up, b if left else bt, left_side=left, lower=lower,
                transpose_a=trans, unit_diagonal=unit))
        return outs

    compare(graph_of(fn, *args), args, 1e-10, "linalg")
    check("det", a[0], rtol=1e-12)
    check("slogdet", a[1], rtol=1e-12)
    check("cholesky", spd.astype(np.float32), rtol=1e-5)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_linear_algebra_of_matrices_with_nan_and_inf_gives_numpys_results(dtype):
    # found by the fuzzer: Numba's det, slogdet and solve raised LinAlgError ("Array must
    # not contain infs or NaNs") where NumPy's LAPACK returns NaN, inf or finite values
    a = np.array([[[np.nan, 1.0], [1.0, 2.0]], [[np.inf, 1.0], [1.0, 2.0]],
                  [[1.0, 2.0], [3.0, 4.0]]], dtype)
    b = np.array([[[1.0], [2.0]], [[1.0], [-np.inf]], [[1.0], [2.0]]], dtype)
    p = REGISTRY

    def fn(a, b):
        return [p["solve"].bind(a, b), p["det"].bind(a), *p["slogdet"].bind(a)]

    got = nb.compile_graph(graph_of(fn, a, b))([a, b])
    for k, w in enumerate(reference(graph_of(fn, a, b), [a, b])):
        assert_same(got[k], w, what=f"output {k}")
    np.testing.assert_allclose(got[1], np.array([np.nan, np.inf, -2.0], dtype), rtol=1e-6)
    np.testing.assert_allclose(got[0][2], np.array([[0.0], [0.5]], dtype), atol=1e-6)
    for m in a:  # one matrix: the scalar code path
        check("det", m)
        check("slogdet", m)


def test_fused_graph_with_several_regions():
    """Elementwise chains through broadcasts, reductions and a matmul: one kernel."""
    def fn(x, w, b):
        p = REGISTRY
        h = p["dot_general"].bind(x, w, dimension_numbers=(((1,), (0,)), ((), ())))
        h = p["add"].bind(h, p["broadcast_in_dim"].bind(b, shape=(6, 3),
                                                        broadcast_dimensions=(1,)))
        h = p["tanh"].bind(h)
        m = p["reduce_max"].bind(h, axes=(1,), keepdims=True)
        e = p["exp"].bind(p["sub"].bind(h, p["broadcast_in_dim"].bind(
            m, shape=(6, 3), broadcast_dimensions=(0, 1))))
        s = p["reduce_sum"].bind(e, axes=(1,), keepdims=True)
        return [p["div"].bind(e, p["broadcast_in_dim"].bind(s, shape=(6, 3),
                                                            broadcast_dimensions=(0, 1))),
                p["reduce_sum"].bind(h, axes=(0, 1))]

    args = [data((6, 4)), data((4, 3), seed=1), data((3,), seed=2)]
    graph = graph_of(fn, *args)
    got = nb.compile_graph(graph)(args)
    for g, w in zip(got, reference(graph, args), strict=True):
        assert_same(g, w, rtol=1e-13)
    source = nb.generate_source(graph)
    assert source.count("@njit(cache=True") == 1


def test_unknown_dims_are_checked_at_kernel_entry():
    from tracegrad.core.ir import FuncGraph
    from tracegrad.core.types import TensorType

    g = FuncGraph("f")
    with g.as_default():
        x = g.add_input(TensorType((None,), np.dtype("float64")))
        y = g.add_input(TensorType((None,), np.dtype("float64")))
        g.outputs = [REGISTRY["add"].bind(x, y)]
    ex = nb.compile_graph(g)
    np.testing.assert_array_equal(ex([np.ones(3), np.ones(3)])[0], 2 * np.ones(3))
    np.testing.assert_array_equal(ex([np.ones(5), np.ones(5)])[0], 2 * np.ones(5))
    with pytest.raises(ShapeError, match=r"add: operands must have equal shapes.*op created"):
        ex([np.ones(3), np.ones(4)])


def test_parallel_loops_match_serial(monkeypatch):
    """parallel=True runs outer loops with prange: same results, and errors still name the op."""
    from tracegrad.backends import threads
    from tracegrad.backends.numba import parallel

    monkeypatch.setattr(parallel, "PARALLEL_MIN_ELEMENTS", 0)  # every call is large
    monkeypatch.setattr(threads, "num_threads", 2)
    def fn(x, idx):
        p = REGISTRY
        e = p["exp"].bind(x)
        return [p["reduce_sum"].bind(e, axes=(1,)), p["reduce_max"].bind(x, axes=(0,)),
                p["gather"].bind(e, idx, axis=0)]

    args = [data((40, 30)), np.array([3, -1, 0])]
    graph = graph_of(fn, *args)
    serial = nb.compile_graph(graph)(args)
    parallel = nb.compile_graph(graph, parallel=True)
    assert "prange(" in nb.generate_source(graph, parallel=True)
    for s, q in zip(serial, parallel(args), strict=True):
        np.testing.assert_array_equal(s, q)
    assert "prange(" in parallel.source  # every call is large: the parallel kernel alone
    with pytest.raises(IndexError, match="gather: index 40 is out of bounds"):
        parallel([args[0], np.array([0, 40, 1])])
