"""Variable updates inside `tg.function`: traced `assign` ops, and their write-back.

While a `tg.function` is traced, `v.assign(x)` / `assign_add` / `assign_sub` bind an
`assign` op whose first operand is the Variable's value at that point of the program (its
capture, or the result of its previous `assign`) and records the result as the Variable's
current value (reads from then on return it). When the trace ends, the final value of each
assigned Variable becomes an extra output of the graph; a call writes those outputs into
the Variables once the compiled code has returned (`commit`), so a call that raises leaves
every Variable as it was. docs/variables.md has the semantics.
"""

from __future__ import annotations

import numpy as np

from tracegrad.core import variables
from tracegrad.core.ir import EagerTensor, FuncGraph, GraphTensor
from tracegrad.core.state import state
from tracegrad.errors import UnsupportedOpError
from tracegrad.ops import add, convert_element_type, sub
from tracegrad.ops.effects import assign

_COMBINE = {"assign_add": add, "assign_sub": sub}


def traced_write(variable, graph: FuncGraph, value, how: str) -> None:
    """`variable.<how>(value)` inside the trace of `graph`: an `assign` op in program order."""
    scope = variables.scope_of(graph)
    if scope is None:
        raise UnsupportedOpError(
            f"Variable.{how} of {variable.name!r} inside a cond branch, a loop body or a "
            "transform (tg.grad, tg.vmap, tg.jacobian ...): these are pure functions. Return "
            "the new value and assign it in the body of the tg.function"
        )
    x, weak = _operand(graph, value)
    variable.check_value(x.shape, x.dtype, weak, how)
    saved = state.tapes
    state.tapes = []  # an assignment is not recorded on tapes, as eagerly
    try:
        current = scope.get(variable)
        if current is None:
            current = variable._placeholder(graph)
        if x.dtype != variable.dtype:
            x = convert_element_type(x, new_dtype=variable.dtype)
        combine = _COMBINE.get(how)
        if combine is not None:
            x = combine(current, x)
        new = assign(current, x, variable=variable.name)
    finally:
        state.tapes = saved
    scope[variable] = new


def _operand(graph: FuncGraph, value) -> tuple[GraphTensor, bool]:
    """`value` as a tensor of `graph`, and whether it is weakly typed (a Python number or
    list, a weak tensor of the trace)."""
    if isinstance(value, GraphTensor):
        t = graph.to_tensor(value)
        return t, t.type.weak
    if isinstance(value, (EagerTensor, variables.Variable, np.ndarray, np.generic)):
        return graph.to_tensor(value), False
    t = graph.to_tensor(np.asarray(value) if isinstance(value, (list, tuple)) else value)
    return t, True


variables.set_traced_write(traced_write)
