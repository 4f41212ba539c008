"""`graph.to_dot()`: valid Graphviz with sub-graphs as clusters."""

import re
import shutil
import subprocess

import pytest
from ir_corpus import TRACED, call_primitive, example_graphs, nested_graph

NODE = re.compile(r'^\s*(\w+) \[.*label="((?:[^"\\]|\\.)*)".*\];$')
EDGE = re.compile(r"^\s*(\w+) -> (\w+)( \[.*\])?;$")


def check_structure(dot: str):
    """Every line is a node, an edge, a cluster bracket or a graph attribute; edges join
    declared nodes; braces balance."""
    lines = dot.splitlines()
    assert lines[0].startswith("digraph ") and lines[0].endswith("{") and lines[-1] == "}"
    declared, edges, depth = set(), [], 0
    for line in lines:
        bare = re.sub(r'"(?:[^"\\]|\\.)*"', "", line)  # braces inside labels do not count
        depth += bare.count("{") - bare.count("}")
        if m := NODE.match(line):
            assert m.group(1) not in declared, f"node {m.group(1)} declared twice"
            declared.add(m.group(1))
        elif m := EDGE.match(line):
            edges.append((m.group(1), m.group(2)))
        else:
            assert re.match(r'^\s*(digraph |subgraph cluster_\w+ \{|\}|rankdir|node \[|edge \[|'
                            r'label=)', line), line
    assert depth == 0
    for a, b in edges:
        assert a in declared and b in declared, (a, b)
    return declared, edges


@pytest.mark.parametrize("name", sorted(TRACED))
def test_traced_graphs_give_valid_dot(name):
    graph = TRACED[name]()
    declared, edges = check_structure(graph.to_dot())
    n = len(graph.inputs) + len(graph.captures) + len(graph.operations) + len(graph.outputs)
    assert len([d for d in declared if "_r" not in d]) == n


def test_example_graphs_give_valid_dot():
    for _, graph in example_graphs():
        check_structure(graph.to_dot())


def test_labels_show_ops_attributes_types_and_operand_order():
    graph = dict(example_graphs())["reduce_sum-0"]
    dot = graph.to_dot()
    assert 'label="reduce_sum\\naxes=(0,)\\nkeepdims=False\\nf64[4]"' in dot
    sub = dict(example_graphs())["sub-0"].to_dot()
    assert 'g0_in0 -> g0_op0 [label="0"];' in sub and 'g0_in1 -> g0_op0 [label="1"];' in sub


def test_multiple_results_are_told_apart():
    dot = dict(example_graphs())["slogdet-0"].to_dot()
    assert "g0_op0 -> g0_op0_r0" in dot and "g0_op0_r1 -> g0_out1;" in dot


def test_sub_graphs_are_clusters_linked_to_their_op_and_captures():
    with call_primitive() as call:
        dot = nested_graph(call).to_dot()
    check_structure(dot)
    assert "subgraph cluster_g1 {" in dot and "subgraph cluster_g2 {" in dot
    assert 'label="test_call body = @body"' in dot
    assert 'label="test_call extra[0] = @alt"' in dot
    assert "g0_op0 -> g1_cap0 [style=dashed];" in dot  # body captures sin's result
    assert "g1_out0 -> g0_op1 [style=dotted];" in dot  # body's results feed the op
    assert "extra=(@alt, (@alt, 3))" in dot


def test_names_with_quotes_are_escaped():
    from ir_corpus import T

    from tracegrad.core.ir import FuncGraph

    g = FuncGraph('say "hi"')
    g.outputs = [g.add_input(T("f64[]"), 'x"y')]
    dot = g.to_dot()
    assert dot.startswith('digraph "say \\"hi\\"" {')
    check_structure(dot)


def _graph_named(name, call):
    return nested_graph(call) if name == "nested" else TRACED[name]()


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
@pytest.mark.parametrize("name", ["nested", *sorted(TRACED)])
def test_graphviz_accepts_the_output(name):
    with call_primitive() as call:
        dot = _graph_named(name, call).to_dot()
    run = subprocess.run(["dot", "-Tsvg"], input=dot, capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0 and not run.stderr, run.stderr
    assert "<svg" in run.stdout
