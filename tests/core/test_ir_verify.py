"""`verify(graph)` accepts every well-formed graph and names the op of a malformed one."""

import pytest
from ir_corpus import TRACED, T, call_primitive, example_graphs, nested_graph

import tracegrad as tg
from tracegrad import ops
from tracegrad.core.ir import FuncGraph, GraphTensor
from tracegrad.core.verify import verify
from tracegrad.errors import GraphVerificationError, TracegradError


def chain():
    """`@f(x) = cos(sin(x)) * x`: ops #0 sin, #1 cos, #2 mul."""
    g = FuncGraph("f")
    with g.as_default():
        x = g.add_input(T("f64[3]"), "x")
        g.outputs = [ops.mul(ops.cos(ops.sin(x)), x)]
    return g


def rejects(graph, *fragments):
    with pytest.raises(GraphVerificationError) as info:
        verify(graph)
    for f in fragments:
        assert f in str(info.value)
    return str(info.value)


def test_verification_error_is_a_tracegrad_error():
    assert issubclass(GraphVerificationError, TracegradError)


def test_well_formed_example_graphs_pass():
    for _, graph in example_graphs():
        assert verify(graph) is graph


@pytest.mark.parametrize("name", sorted(TRACED))
def test_well_formed_traced_graphs_pass(name):
    graph = TRACED[name]()
    assert verify(graph) is graph


def test_well_formed_nested_graphs_pass():
    with call_primitive() as call:
        verify(nested_graph(call))
    verify(chain())


def test_operand_used_before_it_is_defined():
    g = chain()
    g.operations[0], g.operations[1] = g.operations[1], g.operations[0]
    msg = rejects(g, "verify @f: op #0 cos (created at ", "operand 0 (f64[3], result of sin")
    assert "is not defined before the op in this graph" in msg


def test_operand_of_another_graph():
    g, other = chain(), chain()
    op = g.operations[2]
    op.inputs = (op.inputs[0], other.inputs[0])
    rejects(g, "op #2 mul", "operand 1 (f64[3], an input of @f)", "not defined before")


def test_operand_that_is_not_a_graph_tensor():
    g = chain()
    g.operations[1].inputs = (tg.constant([1.0, 2.0, 3.0]),)
    rejects(g, "op #1 cos", "operand 0 (EagerTensor)")


def test_tensor_assigned_twice():
    g = chain()
    g.operations[1].outputs = g.operations[0].outputs
    rejects(g, "op #1 cos", "result 0 (f64[3]) is assigned twice")


def test_input_listed_twice():
    g = chain()
    g.inputs.append(g.inputs[0])
    rejects(g, "input 1 (f64[3]) is assigned twice")


def test_output_not_defined():
    g, other = chain(), chain()
    g.outputs = [g.outputs[0], other.outputs[0]]
    rejects(g, "output 1 (f64[3], result of mul", "is not defined in this graph")
    g.outputs = [g.operations[2].inputs[0]]
    verify(g)
    del g.operations[1]
    rejects(g, "op #1 mul")


def test_result_type_differs_from_abstract_eval():
    g = chain()
    g.operations[1].outputs[0].type = T("f32[3]")
    rejects(g, "op #1 cos", "result types are (f32[3]) but abstract_eval infers (f64[3])")
    g = chain()
    g.operations[0].outputs[0].type = T("~f64[3]")
    rejects(g, "op #0 sin", "result types are (~f64[3])")


def test_wrong_number_of_results():
    g = chain()
    op = g.operations[0]
    op.outputs = op.outputs + (GraphTensor(T("f64[3]"), g, op, 1),)
    rejects(g, "op #0 sin", "result types are (f64[3], f64[3]) but abstract_eval infers (f64[3])")


def test_result_that_records_another_op():
    g = chain()
    g.operations[1].outputs[0].op = g.operations[0]
    rejects(g, "op #1 cos", "result 0 records op sin")


def test_unhashable_attribute():
    g = FuncGraph("r")
    with g.as_default():
        g.outputs = [ops.reduce_sum(g.add_input(T("f64[3]")), axes=(0,), keepdims=False)]
    g.operations[0].attrs = {"axes": [0], "keepdims": False}
    rejects(g, "op #0 reduce_sum", "attribute axes=[0] is not hashable (list)")


def test_attributes_abstract_eval_rejects():
    g = FuncGraph("r")
    with g.as_default():
        g.outputs = [ops.reduce_sum(g.add_input(T("f64[3]")), axes=(0,), keepdims=False)]
    g.operations[0].attrs = {"axes": (4,), "keepdims": False}
    rejects(g, "op #0 reduce_sum", "abstract_eval rejects the op: ShapeError: reduce_sum: bad axes")


def test_op_that_belongs_to_another_graph():
    g, other = chain(), chain()
    g.operations[2].graph = other
    rejects(g, "op #2 mul (created at", "belongs to @f")
    g.operations[2].graph = None
    rejects(g, "op #2 mul", "belongs to no graph")


def test_sub_graphs_are_verified_recursively():
    with call_primitive() as call:
        g = nested_graph(call)
        body = g.operations[1].attrs["body"]
        inner = body.operations[0].attrs["body"]
        inner.operations[0].outputs[0].type = T("f64[4]")
        msg = rejects(g, "verify @outer/test_call.body@body/test_call.body@inner: op #0 mul")
        assert "abstract_eval infers (f64[3])" in msg


def test_sub_graph_in_a_tuple_attribute_is_verified():
    with call_primitive() as call:
        g = nested_graph(call)
        alt = g.operations[1].attrs["extra"][0]
        alt.outputs = [g.inputs[0]]
        rejects(g, "@outer/test_call.extra[0]@alt: output 0 (f64[3], an input of @outer)")


def test_sub_graph_capturing_a_value_defined_after_its_op():
    with call_primitive() as call:
        g = nested_graph(call)
        body = g.operations[1].attrs["body"]
        late = FuncGraph("late", outer=g)
        with g.as_default():
            later = ops.exp(g.inputs[0])
        with late.as_default():
            late.outputs = [late.to_tensor(later)]
        g.operations[1].attrs = {"body": body, "extra": (late,)}
        rejects(g, "extra[0]@late: capture 0 (f64[3]) reads a tensor of @outer that no "
                   "enclosing graph defines before")


def test_top_level_capture_of_a_graph_that_does_not_enclose_it():
    g, other = chain(), chain()
    g.capture(other.outputs[0], other.outputs[0].type, "c")
    rejects(g, "capture 0 (f64[3]) reads a tensor of @f, which does not enclose this graph")


@pytest.mark.parametrize("name", sorted(TRACED))
def test_optimized_graphs_stay_well_formed_and_printable(name):
    optimized = tg.optimize(TRACED[name]())
    verify(optimized)
    text = str(optimized)
    assert str(FuncGraph.parse(text)) == text
    assert FuncGraph.from_json(optimized.to_json()).to_json() == optimized.to_json()
