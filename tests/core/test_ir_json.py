"""The JSON form: `graph.to_json()` / `FuncGraph.from_json(s)` keep everything, versioned."""

import json

import numpy as np
import pytest
from ir_corpus import (
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
from tracegrad.core.ir import FuncGraph
from tracegrad.core.parser import ParsedCapture
from tracegrad.errors import GraphParseError, TracegradError
from tracegrad.transforms.evaluate import evaluate

EXAMPLE_GRAPHS = dict(example_graphs())


def same_graph(a: FuncGraph, b: FuncGraph):
    """Everything the JSON form promises to keep, compared field by field."""
    assert a.name == b.name
    assert [(t.name, t.type) for t in a.all_inputs] == [(t.name, t.type) for t in b.all_inputs]
    assert len(a.operations) == len(b.operations)
    for x, y in zip(a.operations, b.operations, strict=True):
        assert x.primitive is y.primitive
        assert (x.source, x.grad_override) == (y.source, y.grad_override)
        assert [(t.name, t.type) for t in x.outputs] == [(t.name, t.type) for t in y.outputs]
        assert set(x.attrs) == set(y.attrs)
        for k, v in x.attrs.items():
            same_attr(v, y.attrs[k])
    assert str(a) == str(b)
    assert a.pretty(locations=True) == b.pretty(locations=True)


def same_attr(v, w):
    assert type(v) is type(w)
    if isinstance(v, FuncGraph):
        same_graph(v, w)
    elif isinstance(v, tuple):
        assert len(v) == len(w)
        for a, b in zip(v, w, strict=True):
            same_attr(a, b)
    else:
        assert v == w or (v != v and w != w)  # NaN attributes


def json_roundtrip(graph: FuncGraph) -> FuncGraph:
    text = graph.to_json()
    loaded = FuncGraph.from_json(text)
    same_graph(graph, loaded)
    assert loaded.to_json() == text
    return loaded


@pytest.mark.parametrize("name", sorted(EXAMPLE_GRAPHS))
def test_every_example_op_round_trips(name):
    json_roundtrip(EXAMPLE_GRAPHS[name])


@pytest.mark.parametrize("name", sorted(TRACED))
def test_traced_graphs_round_trip(name):
    json_roundtrip(TRACED[name]())


def test_large_literals_round_trip_exactly():
    rng = np.random.default_rng(0)
    for dtype in ("float64", "float32", "int64", "int32", "bool"):
        value = (rng.normal(size=(50, 7)) * 1e6).astype(dtype)
        if dtype == "float64":
            value[0, :3] = [np.nan, -np.inf, -0.0]
        graph = op_graph("constant", (), {"value": lit(value, dtype)})
        loaded = json_roundtrip(graph)
        got = loaded.operations[0].attrs["value"].value
        assert got.dtype == value.dtype and got.shape == value.shape
        assert got.tobytes() == value.tobytes()
        assert not got.flags.writeable


def test_nested_graphs_round_trip_with_captures_of_enclosing_graphs():
    with call_primitive() as call:
        graph = nested_graph(call)
        check_nested_links(json_roundtrip(graph))


def test_top_level_captures_load_as_placeholders_fed_explicitly():
    graph = TRACED["variable_capture"]()
    loaded = json_roundtrip(graph)
    (external, placeholder), = loaded.captures
    assert isinstance(external, ParsedCapture) and external.name == "w"
    x, w = np.array([1.0, -2.0, 0.5]), np.array([3.0, 1.0, 2.0])
    assert evaluate(loaded, x, w)[0] == evaluate(graph, x, w)[0] == x @ w + w.sum()


def test_unknown_dims_weak_types_and_sources_survive():
    graph = TRACED["mixed_weak_scalar"]()
    loaded = json_roundtrip(graph)
    assert loaded.inputs[1].type == T("~f64[]")
    assert all("ir_corpus.py:" in op.source for op in loaded.operations)
    loaded = json_roundtrip(TRACED["unknown_dims"]())
    assert loaded.inputs[0].type == T("f64[?,2]")


def test_names_of_results_and_gradient_override_names_survive():
    graph = op_graph("sin", ("f64[3]",), {})
    graph.operations[0].outputs[0].name = "h"
    graph.operations[0].grad_override = "MyGrad"
    loaded = json_roundtrip(graph)
    assert loaded.operations[0].outputs[0].name == "h"
    assert loaded.operations[0].grad_override == "MyGrad"


def test_document_layout_is_versioned_and_readable():
    doc = json.loads(op_graph("reduce_sum", ("f64[?,2]",), {"axes": (1,), "keepdims": False})
                     .to_json())
    assert doc["format"] == "tracegrad.graph" and doc["version"] == 1
    g = doc["graph"]
    assert g["inputs"] == [{"id": 0, "name": "x0", "type": "f64[?,2]"}]
    (op,) = g["operations"]
    assert op["primitive"] == "reduce_sum" and op["inputs"] == [0]
    assert op["attrs"] == {"axes": {"tuple": [1]}, "keepdims": False}
    assert op["outputs"] == [{"id": 1, "type": "f64[?]"}] and g["outputs"] == [1]


def test_attribute_tags():
    graph = op_graph("convert_element_type", ("i64[]",), {"new_dtype": np.dtype("float32")})
    doc = json.loads(graph.to_json())
    assert doc["graph"]["operations"][0]["attrs"] == {"new_dtype": {"dtype": "float32"}}


def test_python_objects_in_attributes_are_refused_by_name():
    graph = op_graph("sin", ("f64[3]",), {})
    graph.operations[0].attrs = {"fn": print}
    with pytest.raises(TracegradError, match="attribute fn of op #0 sin .* JSON cannot hold"):
        graph.to_json()
    graph.operations[0].attrs = {}
    graph.operations[0].grad_override = lambda op, g: [g]
    with pytest.raises(TracegradError, match="gradient override that is a Python function"):
        graph.to_json()


def _doc(graph=None):
    graph = graph or op_graph("add", ("f64[3]", "f64[3]"), {})
    return json.loads(graph.to_json())


def _edit(doc, fn):
    fn(doc)
    return json.dumps(doc)


@pytest.mark.parametrize("edit,message", [
    (lambda d: d.update(version=3),
     "format version 3, written by a newer tracegrad; this one reads versions up to 2"),
    (lambda d: d.update(version="1"), "bad version '1'"),
    (lambda d: d.update(format="other"), "not a tracegrad graph document"),
    (lambda d: d.pop("graph"), "document: missing field 'graph'"),
    (lambda d: d["graph"]["operations"][0].update(primitive="plus"), "unknown primitive 'plus'"),
    (lambda d: d["graph"]["operations"][0].update(inputs=[0, 7]),
     "graph.operations[0].inputs[1]: 7 is not the id of a tensor defined before"),
    (lambda d: d["graph"]["operations"][0]["outputs"][0].update(type="f64[4]"),
     "add infers (f64[3]), the document says (f64[4])"),
    (lambda d: d["graph"]["operations"][0]["outputs"][0].update(type="f64[3"),
     "bad tensor type 'f64[3'"),
    (lambda d: d["graph"]["operations"][0]["outputs"][0].update(id=0),
     "tensor id 0 is defined twice"),
    (lambda d: d["graph"].update(outputs=[5]), "graph.outputs[0]: 5 is not the id"),
    (lambda d: d["graph"]["operations"][0].update(attrs={"x": [1]}), "a bare list"),
    (lambda d: d["graph"]["operations"][0].update(attrs={"x": {"set": [1]}}),
     "unknown attribute tag 'set'"),
    (lambda d: d["graph"]["operations"][0].update(attrs={"x": {"dtype": "clongdouble"}}),
     "dtype 'clongdouble' is not supported"),
    (lambda d: d["graph"]["inputs"].append("x"), "graph.inputs[2]: expected an object"),
    (lambda d: d["graph"].update(name=3), "graph.name: expected str, got int"),
])
def test_malformed_documents_are_rejected_with_a_path(edit, message):
    with pytest.raises(GraphParseError) as info:
        FuncGraph.from_json(_edit(_doc(), edit))
    assert message in str(info.value)


@pytest.mark.parametrize("data,shape,message", [
    ("AAAA", [3], "3 bytes do not hold 3 float64 values"),
    ("@@@", [1], "bad base64"),
    ("", [-1], "expected non-negative ints"),
])
def test_malformed_literals_are_rejected(data, shape, message):
    doc = _doc(op_graph("constant", (), {"value": lit([1.0, 2.0, 3.0], "float64")}))
    doc["graph"]["operations"][0]["attrs"]["value"]["literal"].update(data=data, shape=shape)
    with pytest.raises(GraphParseError, match=message):
        FuncGraph.from_json(json.dumps(doc))


def test_not_json_at_all():
    with pytest.raises(GraphParseError, match="not valid JSON"):
        FuncGraph.from_json("{func @f")


def test_loaded_graph_runs_like_the_original():
    graph = TRACED["ops_pipeline"]()
    loaded = FuncGraph.from_json(graph.to_json())
    x = np.array([[2.0, 0.5, 1.0], [0.1, 3.0, -1.0], [1.0, 1.0, 4.0]])
    idx = np.array([2, 0], dtype=np.int32)
    for a, b in zip(evaluate(graph, x, idx), evaluate(loaded, x, idx), strict=True):
        np.testing.assert_array_equal(a, b)


def test_capture_of_a_tensor_traced_around_the_graph_is_kept_as_a_placeholder():
    graphs = []

    def outer(x):
        y = ops.sin(x)
        graphs.append(tg.trace(lambda z: ops.mul(z, y))(tg.TensorSpec([2])))
        return y

    tg.trace(outer)(tg.TensorSpec([2]))
    inner = graphs[0]
    assert inner.captures and inner.captures[0][0].graph is not inner
    loaded = FuncGraph.from_json(inner.to_json())
    assert isinstance(loaded.captures[0][0], ParsedCapture)
    assert str(loaded) == str(inner)
