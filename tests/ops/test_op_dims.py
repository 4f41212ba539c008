"""The dims rules (`Primitive.def_dims`): every primitive states which of its result dims
equal which operand dims, and which come from run-time size operands; the op table shows
each rule agrees with the primitive's `abstract_eval`: for every op of every traced row
(sub-graphs included), the dims its rule equates have equal sizes in the op's inferred
types, with the rows' shapes known and with every dim unknown (only the leading dims, for a
row whose primitive needs some dims static, as conv's spatial dims)."""

from __future__ import annotations

import numpy as np
import pytest

import tracegrad as tg
from tests.ops.optable import CASES
from tracegrad.core import dtypes
from tracegrad.core.op import REGISTRY, no_dims
from tracegrad.core.verify import sub_graphs

# Primitives no op-table row exercises, and why.
UNSAMPLED: dict[str, str] = {
    "assign": "a Variable's assignment: tests/test_function_variables.py",
    "call": "no_dims (the callee relates results to operands); inlined before planning",
    "custom_gradient": "inlined by tg.optimize and the numba backend",
    "python_call": "no_dims (a user's Python function): tests/test_extend.py",
}


def test_every_primitive_declares_its_dims():
    missing = sorted(name for name, prim in REGISTRY.items() if prim.dims is None)
    assert not missing, f"primitives without a dims rule (Primitive.def_dims): {missing}"


def _spec(a, unknown, leading=False):
    """`a`'s spec: its shape, every dim unknown, or (`leading`) only its first dim unknown."""
    if type(a) in (int, float, bool):
        return a
    arr = np.asarray(a)
    if not unknown:
        shape = arr.shape
    elif leading:
        shape = (None,) + arr.shape[1:] if arr.ndim else ()
    else:
        shape = (None,) * arr.ndim
    return tg.TensorSpec(shape, arr.dtype)


def _ops(graph):
    for op in graph.operations:
        yield op
        for _, g in sub_graphs(op.attrs):
            yield from _ops(g)


def _graphs(unknown):
    for c in CASES:
        if not all(isinstance(a, (np.ndarray, np.generic, int, float, bool)) for a in c.args):
            continue
        try:
            yield c, tg.trace(c.fn)(*[_spec(a, unknown) for a in c.args])
        except Exception:
            if not unknown:
                raise
            try:  # a primitive with dims that must be static (conv's spatial dims)
                yield c, tg.trace(c.fn)(*[_spec(a, unknown, leading=True) for a in c.args])
            except Exception:  # noqa: BLE001 - rows that need their shapes are left out
                pass


def _check_op(c, op):
    ends = {id(t) for t in (*op.inputs, *op.outputs)}
    for x, i, y, j in op.primitive.dims(op):
        assert id(x) in ends and id(y) in ends, (c, op.primitive, "names a foreign tensor")
        a, b = x.shape[i], y.shape[j]
        assert a is None or b is None or a == b, (
            f"{c}: {op.primitive.name}'s dims rule equates dim {i} of {x.type} and dim {j} "
            f"of {y.type}")
    first = op.primitive.size_operands
    if first is not None:
        sizes = op.inputs[first:]
        assert all(s.shape == () and dtypes.is_int(s.dtype) for s in sizes), (c, op)
        assert len(sizes) == op.outputs[0].shape.count(None), (c, op)


@pytest.mark.parametrize("unknown", [False, True], ids=["known dims", "unknown dims"])
def test_dims_rules_agree_with_abstract_eval_on_the_op_table(unknown):
    seen = set()
    for c, graph in _graphs(unknown):
        for op in _ops(graph):
            seen.add(op.primitive.name)
            _check_op(c, op)
    unsampled = sorted(set(REGISTRY) - seen - set(UNSAMPLED))
    assert not unsampled, f"no op-table row exercises the dims rules of {unsampled}"


def test_custom_gradient_results_are_their_operands():
    f = tg.custom_gradient(lambda x: (x * 2.0, lambda g: g))
    graph = tg.trace(f)(tg.TensorSpec([None, 3]))
    (op,) = [op for op in graph.operations if op.primitive.name == "custom_gradient"]
    pairs = list(op.primitive.dims(op))
    assert pairs and all(x.shape[i] == y.shape[j] or None in (x.shape[i], y.shape[j])
                         for x, i, y, j in pairs)


def test_no_dims_states_no_relation():
    assert list(no_dims(object())) == []
    assert REGISTRY["slice"].dims is no_dims and REGISTRY["iota"].size_operands == 0
