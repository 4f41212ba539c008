"""The Numba backend's lowering records (lowering.py): one per primitive, keyed by the
`Primitive` object, and nothing in the backend dispatching on an op's name."""

from __future__ import annotations

import ast
import pathlib

import numpy as np
import pytest

import tracegrad
from tests.backends._util import graph_of
from tracegrad.core.op import REGISTRY, Primitive
from tracegrad.errors import UnsupportedOpError
from tracegrad.ops import ELEMENTWISE

nb = pytest.importorskip("tracegrad.backends.numba")
from tracegrad.backends.numba import lowering as lw

BACKENDS = pathlib.Path(tracegrad.__file__).parent / "backends"

# Registered primitives the Numba backend never meets, and why (none today).
NO_RECORD: dict[str, str] = {}


def test_every_primitive_has_a_lowering_record():
    missing = [name for name, prim in REGISTRY.items()
               if name not in NO_RECORD and lw.find(prim) is None]
    assert not missing, f"primitives without a Numba lowering record: {sorted(missing)}"
    for name in NO_RECORD:
        assert lw.find(REGISTRY[name]) is None, f"{name} has a record: remove the exception"


def test_records_agree_with_the_primitive_families():
    records = lw.registered()
    elementwise = {p for p, rec in records.items() if rec.kind == lw.ELEMENTWISE}
    assert elementwise == set(ELEMENTWISE)
    for prim, rec in records.items():
        assert prim is REGISTRY[prim.name]
        if rec.kind == lw.ELEMENTWISE:
            assert rec.scalar is not None or rec.vector_math is not None, prim.name
        elif rec.kind in (lw.REMAP, lw.VIEW):
            assert rec.element is not None, prim.name
        elif rec.kind in (lw.BLOCK, lw.REDUCTION, lw.CONTROL):
            assert rec.emit is not None, prim.name
        elif rec.kind == lw.INLINED:
            assert rec.inline is not None, prim.name
        if rec.kind == lw.VIEW:
            assert rec.fuses_if is not None and rec.emit is not None, prim.name
        if rec.fast_trig or rec.sin_cos is not None:
            assert rec.vector_math is not None, prim.name


def _name_comparisons(tree: ast.AST) -> list[int]:
    """Lines that compare an op's name to a string, look a name up in a table, or find a
    method by a name built from strings."""

    def is_name(node) -> bool:  # `x.name`, `x.primitive.name`, or a local called `name`
        return (isinstance(node, ast.Attribute) and node.attr == "name") or (
            isinstance(node, ast.Name) and node.id == "name")

    def is_strings(node) -> bool:
        if isinstance(node, ast.Constant):
            return isinstance(node.value, str)
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return bool(node.elts) and all(is_strings(e) for e in node.elts)
        return False

    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(is_name(s) for s in sides) and any(is_strings(s) for s in sides):
                lines.append(node.lineno)
        elif isinstance(node, ast.Attribute) and node.attr == "name" and isinstance(
                node.value, ast.Attribute) and node.value.attr == "primitive":
            lines.append(node.lineno)  # `op.primitive.name`: checked below for message use
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id == "getattr" and len(node.args) > 1 and \
                isinstance(node.args[1], (ast.BinOp, ast.JoinedStr)):
            lines.append(node.lineno)
    return lines


def _in_messages(tree: ast.AST) -> set[int]:
    """Lines of `x.primitive.name` inside f-strings (a message, not a dispatch)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            for sub in ast.walk(node):
                if isinstance(sub, ast.Attribute) and sub.attr == "name":
                    found.add(sub.lineno)
    return found


def test_no_op_name_dispatch_in_the_backends():
    found = []
    for path in sorted(BACKENDS.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        allowed = _in_messages(tree)
        found += [f"{path.relative_to(BACKENDS)}:{line}"
                  for line in _name_comparisons(tree) if line not in allowed]
    assert not found, f"op-name dispatch (use the lowering record): {found}"


def test_the_name_check_finds_name_dispatch():
    src = ('if op.primitive.name == "sin": pass\n'
           'ok = name in ("reduce_sum", "reduce_max")\n'
           'rule = getattr(self, "_v_" + name, None)\n'
           'msg = f"{op.primitive.name} failed"\n')
    tree = ast.parse(src)
    assert sorted(set(_name_comparisons(tree)) - _in_messages(tree)) == [1, 2, 3]


def test_a_primitive_without_a_record_is_an_error_naming_it():
    prim = Primitive("throwaway_no_lowering")
    prim.def_abstract_eval(lambda x: x)
    prim.def_impl(lambda x: x)
    try:
        with pytest.raises(UnsupportedOpError, match="throwaway_no_lowering"):
            lw.lowering(prim)
        graph = graph_of(lambda x: prim.bind(x), np.ones(3))
        with pytest.raises(UnsupportedOpError, match="throwaway_no_lowering.*op created at"):
            nb.generate_source(graph)
        record = lw.Lowering(lw.ELEMENTWISE, scalar=lambda args, *_: args[0])
        lw.register(prim, record)
        assert lw.lowering(prim) is record
        with pytest.raises(ValueError, match="already has a Numba lowering"):
            lw.register(prim, record)
    finally:
        REGISTRY.pop(prim.name)
        lw._RECORDS.pop(prim, None)


def test_the_planner_reads_the_primitives_dims_rule(monkeypatch):
    """Which dims are equal is the primitive's fact (Primitive.def_dims): the planner unifies
    by it, and a primitive that declares none is an error naming it, not a slower kernel."""
    from tracegrad.backends.numba.plan import Plan
    from tracegrad.ops import elementwise as ew

    graph = graph_of(lambda x, y: x + y, np.ones(3), np.ones(3))
    assert len(Plan(graph).class_members) == 1  # add's rule: every operand has its shape
    monkeypatch.setattr(ew.add_p, "dims", None)
    with pytest.raises(UnsupportedOpError, match="'add' declares no dim relations"):
        Plan(graph)


def test_an_unknown_lowering_kind_is_refused():
    with pytest.raises(ValueError, match="unknown lowering kind"):
        lw.Lowering("fused")


def test_records_say_how_ops_fuse():
    from tracegrad.ops import linalg, reductions, shape_ops

    squeeze = graph_of(lambda a: shape_ops.reshape_p.bind(a, new_sizes=(3, 1, 4)),
                       np.ones((3, 4)))
    (op,) = squeeze.operations
    rec = lw.lowering(shape_ops.reshape_p)
    assert rec.kind == lw.VIEW and rec.fuses(op) and not rec.reads_array(op)
    assert lw.lowering(reductions.reduce_sum_p).kind == lw.REDUCTION
    assert lw.lowering(linalg.dot_general_p).needs_array
