"""Algebraic simplification: each identity, and the ones that must not be applied."""

import numpy as np
import pytest
from passgraphs import build, check_equivalent, const, names

import tracegrad as tg
import tracegrad.numpy as tnp
from tracegrad import ops
from tracegrad.passes import simplify

I64 = np.dtype("int64")


def ones(g, shape, dtype="float64"):
    return ops.broadcast_in_dim(const(g, 1, dtype), shape=shape, broadcast_dimensions=())


def zeros(g, shape, dtype="float64"):
    return ops.broadcast_in_dim(const(g, 0, dtype), shape=shape, broadcast_dimensions=())


@pytest.mark.parametrize("make", [
    lambda g, x: ops.mul(x, ones(g, (3,))),
    lambda g, x: ops.mul(ones(g, (3,)), x),
    lambda g, x: ops.add(x, zeros(g, (3,))),
    lambda g, x: ops.add(zeros(g, (3,)), x),
    lambda g, x: ops.sub(x, zeros(g, (3,))),
    lambda g, x: ops.div(x, ones(g, (3,))),
    lambda g, x: ops.mul(x, g.constant(np.ones(3))),
    lambda g, x: ops.neg(ops.neg(x)),
    lambda g, x: ops.convert_element_type(x, new_dtype=np.dtype("float64")),
    lambda g, x: ops.reshape(x, new_sizes=(3,)),
    lambda g, x: ops.transpose(x, permutation=(0,)),
    lambda g, x: ops.broadcast_in_dim(x, shape=(3,), broadcast_dimensions=(0,)),
    lambda g, x: ops.reduce_sum(x, axes=()),
    lambda g, x: ops.select(ops.lt(x, x), x, x),
], ids=["x*1", "1*x", "x+0", "0+x", "x-0", "x/1", "x*ones-array", "neg-neg", "convert-same",
        "reshape-same", "transpose-identity", "broadcast-same", "sum-no-axes", "select-same"])
def test_identity_becomes_the_operand(make):
    g = build(["f64[3]"], make)
    out = simplify(g)
    assert out.outputs[0] is out.inputs[0]
    assert names(out) == []
    check_equivalent(g, out)


@pytest.mark.parametrize("make", [
    lambda g, x: ops.sub(zeros(g, (3,)), x),
    lambda g, x: ops.div(ones(g, (3,)), x),
    lambda g, x: ops.mul(x, zeros(g, (3,))),  # inf*0 and nan*0 are nan
    lambda g, x: ops.add(x, ones(g, (3,))),
    lambda g, x: ops.mul(x, g.constant(np.array([1.0, 1.0, 2.0]))),
    lambda g, x: ops.neg(x),
    lambda g, x: ops.convert_element_type(x, new_dtype=np.dtype("float32")),
])
def test_non_identities_are_kept(make):
    g = build(["f64[3]"], make)
    out = simplify(g)
    assert names(out) == names(g)


def test_float_times_zero_keeps_nan_and_inf():
    g = build(["f64[3]"], lambda g, x: ops.mul(x, zeros(g, (3,))))
    from tracegrad.transforms.evaluate import evaluate

    (r,) = evaluate(simplify(g), np.array([np.inf, np.nan, 1.0]))
    assert np.isnan(r[0]) and np.isnan(r[1]) and r[2] == 0.0


@pytest.mark.parametrize("dtype", ["int64", "int32", "bool"])
def test_integer_and_bool_times_zero_is_zero(dtype):
    t = {"int64": "i64[3]", "int32": "i32[3]", "bool": "bool[3]"}[dtype]
    g = build([t], lambda g, x: [ops.mul(x, zeros(g, (3,), dtype)), ops.mul(zeros(g, (3,), dtype), x)])
    out = simplify(g)
    assert "mul" not in names(out)
    check_equivalent(g, out)


def test_weak_operand_is_not_a_replacement_for_a_strong_result():
    # ~f64[] * f64[] is strong f64[]: returning the weak operand would change the type
    g = build(["~f64[]"], lambda g, x: ops.mul(x, const(g, 1.0)))
    assert names(simplify(g)) == ["constant", "mul"]
    weak = build(["~f64[]"], lambda g, x: ops.mul(x, const(g, 1.0, weak=True)))
    out = simplify(weak)
    assert names(out) == [] and out.outputs[0] is out.inputs[0]


def test_transpose_of_transpose_composes():
    g = build(["f64[2,3,4]"], lambda g, x: ops.transpose(
        ops.transpose(x, permutation=(1, 2, 0)), permutation=(0, 2, 1)))
    out = simplify(g)
    assert names(out) == ["transpose"]
    op = out.operations[0]
    assert op.inputs[0] is out.inputs[0]
    assert op.attrs["permutation"] == (1, 0, 2)
    assert op.source == g.operations[1].source
    check_equivalent(g, out)


def test_transpose_and_its_inverse_cancel():
    g = build(["f64[2,3]"], lambda g, x: ops.transpose(ops.transpose(x, permutation=(1, 0)),
                                                       permutation=(1, 0)))
    out = simplify(g)
    assert names(out) == [] and out.outputs[0] is out.inputs[0]


def test_square_transpose_is_not_an_identity():
    g = build(["f64[3,3]"], lambda g, x: ops.transpose(x, permutation=(1, 0)))
    assert names(simplify(g)) == ["transpose"]


def test_reshape_of_reshape_composes_and_round_trips_cancel():
    g = build(["f64[2,6]"], lambda g, x: ops.reshape(ops.reshape(x, new_sizes=(12,)),
                                                     new_sizes=(3, 4)))
    out = simplify(g)
    assert names(out) == ["reshape"]
    assert out.operations[0].inputs[0] is out.inputs[0]
    check_equivalent(g, out)
    back = build(["f64[2,6]"], lambda g, x: ops.reshape(ops.reshape(x, new_sizes=(12,)),
                                                        new_sizes=(2, 6)))
    assert names(simplify(back)) == []


def test_reshape_with_unknown_dim_to_the_same_type_is_an_identity():
    g = build(["f64[?,3]"], lambda g, x: ops.reshape(x, new_sizes=(-1, 3)))
    out = simplify(g)
    assert names(out) == []
    check_equivalent(g, out)


def test_broadcast_of_broadcast_composes():
    def body(g, x):
        y = ops.broadcast_in_dim(x, shape=(4, 3), broadcast_dimensions=(1,))
        return ops.broadcast_in_dim(y, shape=(2, 4, 3), broadcast_dimensions=(1, 2))

    g = build(["f64[3]"], body)
    out = simplify(g)
    assert names(out) == ["broadcast_in_dim"]
    op = out.operations[0]
    assert op.inputs[0] is out.inputs[0]
    assert op.attrs["broadcast_dimensions"] == (2,) and op.attrs["shape"] == (2, 4, 3)
    check_equivalent(g, out)


def test_broadcast_of_an_unknown_dim_is_an_identity_only_when_read_from_itself():
    def same(g, x):
        return ops.broadcast_in_dim(x, ops.dim_size(x, axis=0), shape=(None,),
                                    broadcast_dimensions=(0,))

    g = build(["f64[?]"], same)
    out = simplify(g)
    assert names(out) == []
    check_equivalent(g, out)

    def other(g, x, y):  # x may have size 1 and be stretched to y's size
        return ops.broadcast_in_dim(x, ops.dim_size(y, axis=0), shape=(None,),
                                    broadcast_dimensions=(0,))

    assert "broadcast_in_dim" in names(simplify(build(["f64[?]", "f64[?]"], other)))


def test_zeros_broadcast_added_is_dropped_as_unconnected_gradients_need():
    def body(g, x, gx):
        zero = ops.broadcast_in_dim(ops.convert_element_type(const(g, 0, "int64"),
                                                             new_dtype=np.dtype("float64")),
                                    ops.dim_size(x, axis=0), shape=(None, 2),
                                    broadcast_dimensions=())
        return ops.add(gx, zero)

    g = build(["f64[?,2]", "f64[?,2]"], body)
    out = simplify(g)
    assert out.outputs[0] is out.inputs[1]
    check_equivalent(g, out)


def test_dim_size_of_a_known_dim_is_a_constant():
    g = build(["f64[?,5]"], lambda g, x: ops.dim_size(x, axis=1))
    out = simplify(g)
    assert names(out) == ["constant"]
    assert out.operations[0].attrs["value"].value == 5
    check_equivalent(g, out)


def test_select_with_a_constant_predicate_picks_a_branch():
    def body(g, x, y):
        t = ops.broadcast_in_dim(const(g, True, "bool"), shape=(3,), broadcast_dimensions=())
        f = ops.broadcast_in_dim(const(g, False, "bool"), shape=(3,), broadcast_dimensions=())
        return ops.select(t, x, y), ops.select(f, x, y)

    out = simplify(build(["f64[3]", "f64[3]"], body))
    assert out.outputs[0] is out.inputs[0] and out.outputs[1] is out.inputs[1]


def test_simplify_is_pure():
    g = build(["f64[3]"], lambda g, x: ops.neg(ops.neg(ops.mul(x, ones(g, (3,))))))
    text, operations = str(g), list(g.operations)
    simplify(g)
    assert str(g) == text and g.operations == operations


def test_dim_size_reads_an_unknown_dim_from_further_up():
    def body(g, x, w):
        y = ops.integer_pow(ops.sin(x), y=2)  # computed only for its size
        z = ops.transpose(x, permutation=(1, 0))
        b = ops.broadcast_in_dim(const(g, 1.0), ops.dim_size(w, axis=0),
                                 shape=(2, None), broadcast_dimensions=())
        return ops.dim_size(y, axis=0), ops.dim_size(z, axis=1), ops.dim_size(b, axis=1)

    g = build(["f64[?,2]", "f64[?]"], body)
    out = simplify(simplify(g))
    assert names(out) == ["dim_size", "dim_size", "dim_size"]
    x, w = out.inputs
    reads = [(t.op.inputs[0], t.op.attrs["axis"]) for t in out.outputs]
    assert all(a is b and axis == k for (a, axis), (b, k) in zip(reads, [(x, 0), (x, 0), (w, 0)]))
    check_equivalent(g, out)


def test_dim_size_follows_the_producers_dims_rule():
    """Any primitive's dims rule (Primitive.def_dims) tells where an unknown result dim is
    read from: a reduction's kept dim, a matrix product's free dims, an iota's size operand."""
    def body(g, x, w):
        s = ops.reduce_sum(ops.exp(x), axes=(0,))  # f64[?]: computed only for its size
        m = ops.dot_general(x, w, dimension_numbers=(((1,), (0,)), ((), ())))  # f64[?,?]
        i = ops.iota(ops.dim_size(w, axis=0), dtype="int64", shape=(None,), dimension=0)
        return (ops.dim_size(s, axis=0), ops.dim_size(m, axis=0), ops.dim_size(m, axis=1),
                ops.dim_size(i, axis=0))

    g = build(["f64[?,?]", "f64[?,?]"], body)
    out = simplify(simplify(g))
    x, w = out.inputs
    assert names(out) == ["dim_size"] * 4
    reads = [(t.op.inputs[0], t.op.attrs["axis"]) for t in out.outputs]
    assert all(a is b and axis == k for (a, axis), (b, k) in zip(
        reads, [(x, 1), (x, 0), (w, 1), (w, 0)], strict=True))
    check_equivalent(g, out)


@pytest.mark.parametrize("fn, folded", [
    (lambda a, b: (a * 2) @ tnp.swapaxes(a, -1, -2), True),  # eigh's (V * g) @ V^T
    (lambda a, b: tnp.swapaxes(a, -1, -2) @ b, True),
    (lambda a, b: a[0].T @ b[0], True),
    (lambda a, b: tnp.tensordot(tnp.transpose(a, (1, 0, 2)), b, axes=([0, 1], [1, 0])), True),
    # the transposed operand's free dims would come out permuted: kept
    (lambda a, b: tnp.einsum("ijk,jl->ikl", tnp.transpose(a, (0, 2, 1))[:, :, :], b[0]),
     None),
])
def test_a_transposed_dot_operand_is_read_untransposed(fn, folded):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((5, 4, 4)), rng.standard_normal((5, 4, 3))
    graph = tg.trace(fn)(tg.TensorSpec([5, 4, 4]), tg.TensorSpec([5, 4, 3]))
    out = simplify(graph)
    if folded:
        assert "transpose" not in names(out) and "transpose" in names(graph)
    want = np.asarray(fn(tg.constant(a), tg.constant(b)))  # eager: no passes
    for backend in ("numpy", "numba"):
        got = tg.function(fn, backend=backend)(a, b)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


def test_a_product_whose_other_contracted_dim_is_unknown_stays_a_product():
    """Only a product whose contracted dims are 1 on both sides is an outer product: with
    the right one unknown, a wrong size must still fail as dot_general's misaligned shapes."""
    def product(a, b):
        return ops.dot_general(a, b, dimension_numbers=(((1,), (0,)), ((), ())))

    spec = [tg.TensorSpec([4, 1]), tg.TensorSpec([None, 3])]
    graph = simplify(tg.trace(product)(*spec))
    assert [op.primitive.name for op in graph.operations] == ["dot_general"]
    f = tg.function(product, backend="numba", input_signature=spec)
    np.testing.assert_array_equal(f(np.ones((4, 1)), np.full((1, 3), 2.0)), np.full((4, 3), 2.0))
    with pytest.raises(tg.errors.ShapeError, match="dot_general"):
        f(np.ones((4, 1)), np.ones((2, 3)))
