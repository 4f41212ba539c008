"""The IR text form: printing (API.md's "IR text form") and `FuncGraph.parse` round trips."""

import re

import numpy as np
import pytest
from ir_corpus import (
    EXAMPLES,
    TRACED,
    T,
    call_primitive,
    check_nested_links,
    example_graphs,
    lit,
    nested_graph,
    op_graph,
)

import tracegrad as tg
from tracegrad import ops
from tracegrad.core.ir import FuncGraph, Literal
from tracegrad.core.parser import ParsedCapture
from tracegrad.core.printer import LITERAL_PRINT_LIMIT, format_attr, format_op
from tracegrad.errors import GraphParseError
from tracegrad.transforms.evaluate import evaluate

EXAMPLE_GRAPHS = dict(example_graphs())


def roundtrip(graph: FuncGraph) -> FuncGraph:
    text = str(graph)
    parsed = FuncGraph.parse(text)
    assert str(parsed) == text
    located = graph.pretty(locations=True)
    assert FuncGraph.parse(located).pretty(locations=True) == located
    return parsed


# -- the printed form ------------------------------------------------------------------------


def loss(x, y):
    return tg.numpy.sum(tg.numpy.sin(x) * y)


def test_api_example_prints_exactly():
    g = tg.trace(loss)(tg.TensorSpec([3]), tg.TensorSpec([3]))
    assert str(g) == (
        "func @loss(%x: f64[3], %y: f64[3]) -> (f64[]) {\n"
        "  %0 = sin %x : f64[3]\n"
        "  %1 = mul %0, %y : f64[3]\n"
        "  %2 = reduce_sum %1 {axes=(0,), keepdims=False} : f64[]\n"
        "  return %2\n"
        "}"
    )
    assert g.pretty() == str(g)


def test_multiple_results_unknown_dims_and_weak_types_print():
    g = op_graph("slogdet", ("f64[3,3]",), {})
    assert "  %0, %1 = slogdet %x0 : f64[], f64[]" in str(g)
    g = op_graph("select", ("bool[?]", "~f64[?]", "~f64[?]"), {})
    assert str(g).splitlines()[0] == (
        "func @select_example(%x0: bool[?], %x1: ~f64[?], %x2: ~f64[?]) -> (~f64[?]) {"
    )


def test_locations_name_the_users_line():
    g = tg.trace(loss)(tg.TensorSpec([3]), tg.TensorSpec([3]))
    line = loss.__code__.co_firstlineno + 1
    lines = g.pretty(locations=True).splitlines()
    assert lines[1].endswith(f"    # test_ir_text.py:{line}")
    assert all(text.endswith(f"# test_ir_text.py:{line}") for text in lines[1:4])
    assert "#" not in str(g)


@pytest.mark.parametrize("value,text", [
    (3, "3"), (-2, "-2"), (2.5, "2.5"), (float("inf"), "inf"), (float("-inf"), "-inf"),
    (float("nan"), "nan"), (1e-300, "1e-300"), (True, "True"), (None, "None"),
    ("it's", '"it\'s"'), ((), "()"), ((1,), "(1,)"), ((1, (2, None)), "(1, (2, None))"),
    (np.dtype("float32"), "f32"), (np.dtype("bool"), "bool"), (T("~i32[?,2]"), "~i32[?,2]"),
    (np.int64(7), "7"), (np.float32(0.1), "0.1"),
])
def test_attribute_values_print(value, text):
    assert format_attr(value) == text


@pytest.mark.parametrize("values,dtype,text", [
    (2.0, "float64", "2.0:f64[]"),
    ([[1, 2], [3, 4]], "int32", "[[1, 2], [3, 4]]:i32[2,2]"),
    ([0.1, np.nan, -np.inf], "float32", "[0.1, nan, -inf]:f32[3]"),
    ([True, False], "bool", "[True, False]:bool[2]"),
    (np.zeros((2, 0)), "float64", "[[], []]:f64[2,0]"),
])
def test_literals_print_values_and_type(values, dtype, text):
    assert format_attr(lit(values, dtype)) == text


def test_python_objects_print_for_reading_only():
    class Callee:
        graph = FuncGraph("inner")

    assert format_attr(print) == "<function builtins.print>"
    assert format_attr(Callee()) == "@inner"  # a callee: named, its graph printed after
    assert format_attr(object()) == "<object builtins.object>"


def test_large_literals_are_elided():
    n = LITERAL_PRINT_LIMIT + 1
    text = format_attr(lit(np.arange(n).reshape(1, n), "int64"))
    assert text == f"[0, 1, 2, ..., {n - 3}, {n - 2}, {n - 1}]:i64[1,{n}]"


def test_format_op_alone_names_operands_by_position():
    g = op_graph("add", ("f64[3]", "f64[3]"), {})
    assert format_op(g.operations[0]) == "%0 = add %in0, %in1 : f64[3]"


def test_graph_names_that_are_not_identifiers_are_quoted():
    g = FuncGraph('grad(f) "2"')
    g.outputs = [g.add_input(T("f64[]"), "x")]
    assert str(g).startswith('func @"grad(f) \\"2\\""(%x: f64[]) -> (f64[]) {')
    assert FuncGraph.parse(str(g)).name == 'grad(f) "2"'


def test_input_names_are_made_unique_and_stable():
    g = FuncGraph("f")
    xs = [g.add_input(T("f64[]"), n) for n in ("x", "x", "x_1", None, "7", "a b")]
    g.outputs = xs
    header = str(g).splitlines()[0]
    assert header.startswith(
        "func @f(%x: f64[], %x_1: f64[], %x_1_1: f64[], %arg3: f64[], %7_1: f64[], %a_b: f64[])"
    )
    roundtrip(g)


def test_captures_print_in_the_header():
    g = TRACED["variable_capture"]()
    header = str(g).splitlines()[0]
    assert header == "func @_with_variable(%x: f64[3]) captures(%w: f64[3]) -> (f64[]) {"


def test_sub_graphs_nest_as_indented_blocks():
    with call_primitive() as call:
        text = str(nested_graph(call))
    assert text == """\
func @outer(%x: f64[3]) -> (f64[3], f64[3]) {
  %0 = sin %x : f64[3]
  %1, %2 = test_call %x {body=func @body(%a: f64[3]) captures(%capture0: f64[3] = %0) -> (f64[3], f64[3]) {
      %3 = test_call %a {body=func @inner(%a_1: f64[3]) captures(%capture0_1: f64[3] = %0, %capture1: f64[3] = %a) -> (f64[3]) {
          %4 = mul %a_1, %capture0_1 : f64[3]
          %5 = mul %4, %capture1 : f64[3]
          return %5
        }} : f64[3]
      %6 = add %3, %capture0 : f64[3]
      %7 = neg %a : f64[3]
      return %6, %7
    }, extra=(func @alt(%p: f64[3]) -> (f64[3]) {
      %8 = cos %p : f64[3]
      return %8
    }, (func @alt(%p_1: f64[3]) -> (f64[3]) {
      %9 = cos %p_1 : f64[3]
      return %9
    }, 3))} : f64[3], f64[3]
  return %1, %2
}"""


# -- round trips -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(EXAMPLE_GRAPHS))
def test_every_example_op_round_trips(name):
    graph = EXAMPLE_GRAPHS[name]
    parsed = roundtrip(graph)
    (op,), (parsed_op,) = graph.operations, parsed.operations
    assert parsed_op.primitive is op.primitive
    assert parsed_op.attrs == op.attrs
    assert [type(v) for v in parsed_op.attrs.values()] == [type(v) for v in op.attrs.values()]


@pytest.mark.parametrize("name", sorted(TRACED))
def test_traced_graphs_round_trip(name):
    roundtrip(TRACED[name]())


def test_nested_graphs_round_trip_with_their_captures():
    with call_primitive() as call:
        graph = nested_graph(call)
        check_nested_links(roundtrip(graph))


def test_parsed_literals_keep_every_bit():
    for types, attrs in EXAMPLES["constant"]:
        parsed = FuncGraph.parse(str(op_graph("constant", types, attrs)))
        a, b = attrs["value"].value, parsed.operations[0].attrs["value"].value
        assert a.dtype == b.dtype and a.shape == b.shape
        assert a.tobytes() == b.tobytes()


def test_parsed_graph_computes_what_the_original_computes():
    g = TRACED["mlp"]()
    parsed = FuncGraph.parse(str(g))
    rng = np.random.default_rng(1)
    args = [rng.normal(size=t.shape) for t in g.inputs]
    np.testing.assert_array_equal(evaluate(parsed, *args)[0], evaluate(g, *args)[0])


def test_parsed_captures_are_placeholders_without_values():
    parsed = FuncGraph.parse(str(TRACED["variable_capture"]()))
    (external, placeholder), = parsed.captures
    assert isinstance(external, ParsedCapture) and external.name == "w"
    assert placeholder.type == T("f64[3]")
    x, w = np.array([1.0, 2.0, 3.0]), np.array([4.0, 5.0, 6.0])
    assert evaluate(parsed, x, w)[0] == x @ w + w.sum()


def test_parsed_ops_get_sources_from_location_comments_or_ir_lines():
    text = "func @f(%x: f64[]) -> (f64[]) {\n  %0 = sin %x : f64[]    # model.py:12\n" \
           "  %1 = cos %0 : f64[]\n  return %1\n}"
    g = FuncGraph.parse(text)
    assert [op.source for op in g.operations] == ["model.py:12", "<ir>:3"]


def test_parser_ignores_comment_lines_and_blank_lines():
    text = "# a comment\n\nfunc @f(%x: f64[]) -> (f64[]) {\n  # here too\n  return %x\n}\n"
    assert str(FuncGraph.parse(text)) == "func @f(%x: f64[]) -> (f64[]) {\n  return %x\n}"


# -- parse errors ----------------------------------------------------------------------------

GOOD = """\
func @f(%x: f64[3]) -> (f64[]) {
  %0 = reduce_sum %x {axes=(0,), keepdims=False} : f64[]
  return %0
}"""


def test_the_error_cases_start_from_a_good_text():
    assert str(FuncGraph.parse(GOOD)) == GOOD


@pytest.mark.parametrize("bad,line,message", [
    (GOOD.replace("reduce_sum", "reduce_summ"), 2, "unknown primitive 'reduce_summ'"),
    (GOOD.replace(": f64[]\n", ": f64[3]\n"), 2,
     "reduce_sum gives 1 result(s) of type f64[], the text says 1 result(s) of type f64[3]"),
    (GOOD.replace("axes=(0,)", "axes=(1,)"), 2, "reduce_sum: bad axes (1,)"),
    (GOOD.replace("%x {", "%y {"), 2, "%y is used before it is defined"),
    (GOOD.replace("f64[3]", "f65[3]"), 1, "unknown dtype 'f65'"),
    (GOOD.replace("return %0", "return %0, %x"), 3, "returns f64[], f64[3] but its header"),
    (GOOD.replace("  return %0\n", ""), 3, "graph @f has no return"),
    (GOOD.replace("keepdims=False", "keepdims=False, keepdims=True"), 2,
     "attribute keepdims is given twice"),
    (GOOD.replace("keepdims=False", "keepdims=[1, 2]"), 2, "a list is not an attribute value"),
    (GOOD.replace("keepdims=False", "keepdims=<function f>"), 2, "Python object"),
    (GOOD.replace("keepdims=False", "keepdims=<Callee @<lambda>>"), 2,
     "attribute value <Callee @<lambda>> is a Python object"),
    (GOOD.replace("axes=(0,)", "axez=(0,)"), 2, "attributes {'axez': (0,), 'keepdims': False}"),
    (GOOD.replace("{axes", "{{axes"), 2, "expected an attribute name, got '{'"),
    (GOOD + "\n}", 5, "unexpected '}' after the graph's closing brace"),
    (GOOD.replace("%0 = ", "%x = "), 2, "%x is defined twice"),
    (GOOD.replace("f64[3]", "f64[3,x]"), 1, "expected a dim (a size or ?), got 'x'"),
    (GOOD.replace("-> (f64[])", "(f64[])"), 1, "expected '->'"),
    (GOOD.replace("%0 = reduce", "%0 = $reduce"), 2, "unexpected character '$'"),
    (GOOD[:40], 2, "got end of text"),
])
def test_malformed_text_is_rejected_with_its_line(bad, line, message):
    with pytest.raises(GraphParseError) as info:
        FuncGraph.parse(bad)
    assert f"line {line}," in str(info.value)
    assert message in str(info.value)


def test_elided_literals_cannot_be_parsed_and_say_why():
    big = op_graph("constant", (), {"value": lit(np.arange(100.0), "float64")})
    with pytest.raises(GraphParseError, match=r"line 2, .*elided.*at most 32 elements.*to_json"):
        FuncGraph.parse(str(big))


@pytest.mark.parametrize("value,message", [
    ("[1.5, 2]:i64[2]", "1.5 is not a int64 value"),
    ("[1, 2]:bool[2]", "1 is not a bool value"),
    ("[1.0, 2.0]:f64[3]", "the values have shape (2,)"),
    ("[[1.0], [2.0, 3.0]]:f64[2,1]", "bad constant of type f64[2,1]"),
    ("1.0:f64[?]", "a constant array has a concrete strong type, not f64[?]"),
    ("99999999999999999999:i64[]", "bad constant of type i64[]"),
])
def test_bad_literals_are_rejected(value, message):
    text = f"func @f() -> (f64[]) {{\n  %0 = constant {{value={value}}} : f64[]\n  return %0\n}}"
    with pytest.raises(GraphParseError, match=re.escape(message)):
        FuncGraph.parse(text)


def test_operands_of_an_enclosing_graph_must_be_captured():
    with call_primitive():
        text = (
            "func @f(%x: f64[3]) -> (f64[3]) {\n"
            "  %0 = test_call %x {body=func @b(%a: f64[3]) -> (f64[3]) {\n"
            "      %1 = mul %a, %x : f64[3]\n"
            "      return %1\n"
            "    }} : f64[3]\n"
            "  return %0\n"
            "}"
        )
        with pytest.raises(GraphParseError, match=r"line 3, .*%x belongs to an enclosing graph"):
            FuncGraph.parse(text)
        fixed = text.replace("-> (f64[3]) {\n      %1", "captures(%c: f64[3] = %x) -> "
                             "(f64[3]) {\n      %1").replace("%a, %x", "%a, %c")
        assert str(FuncGraph.parse(fixed)) == fixed


def test_parse_needs_the_primitives_registered():
    import tracegrad.core.op as op_module

    saved = dict(op_module.REGISTRY)
    op_module.REGISTRY.clear()
    op_module.REGISTRY["constant"] = saved["constant"]
    try:
        with pytest.raises(GraphParseError, match="import tracegrad, which loads tracegrad.ops"):
            FuncGraph.parse(GOOD)
    finally:
        op_module.REGISTRY.clear()
        op_module.REGISTRY.update(saved)


def test_parsed_literals_are_read_only_and_hash_like_the_original():
    graph = op_graph("constant", (), {"value": lit([1.0, 2.0], "float64")})
    value = FuncGraph.parse(str(graph)).operations[0].attrs["value"]
    assert isinstance(value, Literal) and not value.value.flags.writeable
    assert value == graph.operations[0].attrs["value"]
    assert hash(value) == hash(graph.operations[0].attrs["value"])


def test_weak_constant_keeps_its_weak_attribute():
    g = tg.trace(lambda x: ops.add(x, 2.0))(tg.TensorSpec([], "float64"))
    assert "constant {value=2.0:f64[], weak=True} : ~f64[]" in str(g)
    assert roundtrip(g).operations[0].outputs[0].type.weak
