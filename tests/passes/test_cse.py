"""Common-subexpression elimination."""

import numpy as np
from passgraphs import build, check_equivalent, const, names

from tracegrad import ops
from tracegrad.passes import cse


def test_same_op_same_operands_is_computed_once():
    g = build(["f64[3]"], lambda g, x: ops.add(ops.sin(x), ops.sin(x)))
    out = cse(g)
    assert names(out) == ["sin", "add"]
    add = out.operations[1]
    assert add.inputs[0] is add.inputs[1]
    check_equivalent(g, out)


def test_commutative_operands_in_either_order():
    def body(g, x, y):
        return ops.sub(ops.mul(x, y), ops.mul(y, x)), ops.add(x, y), ops.add(y, x)

    out = cse(build(["f64[3]", "f64[3]"], body))
    assert names(out) == ["mul", "sub", "add"]
    assert out.outputs[1] is out.outputs[2]


def test_non_commutative_operands_in_the_other_order_differ():
    g = build(["f64[3]", "f64[3]"], lambda g, x, y: ops.add(ops.sub(x, y), ops.sub(y, x)))
    out = cse(g)
    assert names(out) == ["sub", "sub", "add"]
    check_equivalent(g, out)


def test_different_attributes_differ():
    def body(g, x):
        return (ops.reduce_sum(x, axes=(0,)), ops.reduce_sum(x, axes=(1,)),
                ops.reduce_sum(x, axes=(0,)))

    out = cse(build(["f64[2,2]"], body))
    assert names(out) == ["reduce_sum", "reduce_sum"]
    assert out.outputs[0] is out.outputs[2]


def test_equal_constants_merge_and_merges_cascade():
    def body(g, x):
        big_a = g.constant(np.arange(20.0))  # too big for the graph's constant sharing
        big_b = g.constant(np.arange(20.0))
        return ops.mul(ops.exp(x), big_a), ops.mul(ops.exp(x), big_b)

    g = build(["f64[20]"], body)
    assert names(g).count("constant") == 2
    out = cse(g)
    assert names(out) == ["constant", "exp", "mul"]
    assert out.outputs[0] is out.outputs[1]
    check_equivalent(g, out)


def test_constants_of_other_dtype_or_weakness_do_not_merge():
    def body(g, x):
        return (ops.add(x, const(g, 1.0)), ops.add(x, const(g, 1.0, weak=True)))

    out = cse(build(["f64[]"], body))
    assert names(out).count("constant") == 2


def test_ops_with_different_gradient_overrides_stay_apart():
    g = build(["f64[3]"], lambda g, x: ops.add(ops.sin(x), ops.sin(x)))
    g.operations[1].grad_override = "MySin"
    assert names(cse(g)) == ["sin", "sin", "add"]
