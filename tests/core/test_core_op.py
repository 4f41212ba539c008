"""Primitive: the registry refuses duplicates; bind builds ops, runs eagerly or on NumPy."""

import numpy as np
import pytest

import tracegrad as tg
from tracegrad import ops
from tracegrad.core.ir import EagerTensor, FuncGraph
from tracegrad.core.op import REGISTRY, Primitive, get_primitive
from tracegrad.core.types import TensorType
from tracegrad.errors import ShapeError


def test_registry_refuses_duplicate_names():
    before = dict(REGISTRY)
    with pytest.raises(ValueError, match="a primitive named 'add' is already registered"):
        Primitive("add")
    assert REGISTRY == before and REGISTRY["add"] is ops.add_p


def test_new_primitive_is_registered_under_its_name():
    prim = Primitive("test_registry_probe")
    try:
        assert get_primitive("test_registry_probe") is prim
        assert repr(prim) == "<Primitive test_registry_probe>"
    finally:
        del REGISTRY["test_registry_probe"]


def test_unknown_primitive_lookup():
    with pytest.raises(KeyError, match="no primitive named 'nope'"):
        get_primitive("nope")


def test_primitive_names_are_lower_case():
    assert all(name == name.lower() for name in REGISTRY)


def test_bind_in_a_graph_adds_an_operation_with_inferred_types():
    g = FuncGraph("g")
    with g.as_default():
        x = g.add_input(TensorType((2, 3), np.dtype("float64")), "x")
        y = ops.reduce_sum(x, axes=(1,), keepdims=False)
        sign, logdet = ops.slogdet(ops.reshape(ops.slice(
            x, start_indices=(0, 0), limit_indices=(2, 2), strides=(1, 1)), new_sizes=(2, 2)))
    assert [op.primitive.name for op in g.operations] == ["reduce_sum", "slice", "reshape",
                                                          "slogdet"]
    assert y.type == TensorType((2,), np.dtype("float64")) and y.op.graph is g
    assert (sign.index, logdet.index) == (0, 1) and sign.op is logdet.op


def test_bind_errors_name_the_op_and_the_users_line():
    g = FuncGraph("g")
    with g.as_default():
        x = g.add_input(TensorType((3,), np.dtype("float64")))
        with pytest.raises(ShapeError) as info:
            ops.reduce_sum(x, axes=(2,), keepdims=False)
    assert "reduce_sum: bad axes (2,)" in str(info.value) and __file__ in str(info.value)


def test_bind_eagerly_on_tensors_and_on_numpy():
    t = ops.sin(tg.constant([0.0, 1.0]))
    assert isinstance(t, EagerTensor)
    np.testing.assert_array_equal(t.numpy(), np.sin([0.0, 1.0]))
    a = ops.sin(np.array([0.0, 1.0]))
    assert type(a) is np.ndarray and np.array_equal(a, np.sin([0.0, 1.0]))
    s = ops.reduce_sum(np.array([1.0, 2.0]), axes=(0,), keepdims=False)
    assert type(s) is np.float64 and s == 3.0
