"""Dead-code elimination, and the sweep every pass ends with."""

from passgraphs import build, check_equivalent, const, names

from tracegrad import ops
from tracegrad.core.ir import FuncGraph
from tracegrad.core.op import REGISTRY, Primitive
from tracegrad.core.types import TensorType
from tracegrad.passes import dce, simplify


def test_unused_ops_are_removed_inputs_stay():
    def body(g, x, unused):
        ops.exp(x)  # dead
        y = ops.sin(x)
        ops.cos(ops.mul(y, y))  # dead chain
        return ops.neg(y)

    g = build(["f64[3]", "f64[2]"], body)
    out = dce(g)
    assert names(out) == ["sin", "neg"]
    assert len(out.inputs) == 2
    check_equivalent(g, out)


def test_dce_is_pure():
    g = build(["f64[3]"], lambda g, x: (ops.exp(x), ops.sin(x))[1])
    before, ops_before = str(g), list(g.operations)
    out = dce(g)
    assert out is not g and str(g) == before
    assert g.operations == ops_before and len(g.operations) == 2
    assert all(op.graph is out for op in out.operations)


def test_sources_and_names_are_kept():
    g = build(["f64[3]"], lambda g, x: ops.sin(x))
    g.outputs[0].name = "result"
    out = dce(g)
    assert out.operations[0].source == g.operations[0].source
    assert out.outputs[0].name == "result"
    assert out.name == g.name and out.inputs[0].name == "x0"


def test_output_used_twice_and_input_as_output():
    g = build(["f64[3]"], lambda g, x: [x, ops.sin(x), ops.sin(x)])
    out = dce(g)
    assert names(out) == ["sin", "sin"]
    assert out.outputs[0] is out.inputs[0]
    check_equivalent(g, out)


def test_every_pass_sweeps_what_its_rewrites_leave_dead():
    g = build(["f64[3]"], lambda g, x: ops.mul(ops.sin(x), ops.broadcast_in_dim(
        const(g, 1.0), shape=(3,), broadcast_dimensions=())))
    assert names(simplify(g)) == ["sin"]


def _subgraph_primitive():
    """An op holding a sub-graph in an attribute (as cond / while do); not registered."""
    prim = Primitive("test_holds_subgraph")
    del REGISTRY[prim.name]
    prim.def_abstract_eval(lambda x, *, body: body.outputs[0].type)
    return prim


def test_subgraphs_are_rewritten_and_their_captures_remapped():
    holds = _subgraph_primitive()
    outer = FuncGraph("outer")
    x = outer.add_input(TensorType.parse("f64[3]"), "x")
    with outer.as_default():
        ops.exp(x)  # dead in the outer graph
        y = ops.sin(x)
        body = FuncGraph("body", outer=outer)
        z = body.add_input(TensorType.parse("f64[3]"), "z")
        with body.as_default():
            ops.cos(z)  # dead in the body
            body.outputs = [ops.mul(z, y)]  # y is captured from the outer graph
        r = holds.bind_in_graph(outer, (x,), {"body": body})
    outer.outputs = [r]
    out = dce(outer)
    assert names(out) == ["sin", "test_holds_subgraph"]  # sin lives: the body captures it
    new_body = out.operations[-1].attrs["body"]
    assert new_body is not body and new_body.outer is out
    assert names(new_body) == ["mul"]
    (external, placeholder), = new_body.captures
    assert external is out.operations[0].outputs[0]
    assert new_body.operations[0].inputs[1] is placeholder
    assert names(body) == ["cos", "mul"]  # the source sub-graph is untouched
