"""Tracing a Python function into a FuncGraph, with errors located at the user's line."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tracegrad.core import tree
from tracegrad.core.ir import FuncGraph, Tensor
from tracegrad.core.state import state
from tracegrad.core.types import TensorType
from tracegrad.core.variables import Variable, close_effect_scope, effect_scope
from tracegrad.errors import TracegradError
from tracegrad.function._keys import _is_array, _Static
from tracegrad.function._numpy_random import watching


def trace_graph(fn: Callable, treedef, entries, statics, names, name: str, verify: bool,
                effects: bool = True):
    """Trace `fn` with a placeholder per array entry (named by `names`); returns
    `(graph, out_treedef, written)`. With `effects`, `fn` may assign Variables: the final
    value of each (`written`, in order of first assignment) is an output of the graph after
    `fn`'s results. `verify` checks the graph with `tracegrad.core.verify`."""
    graph = FuncGraph(name, outer=state.graph)
    if effects:
        effect_scope(graph)
    try:
        with watching(fn, name):
            out_treedef = _trace_into(graph, fn, treedef, entries, statics, names, name)
    finally:
        written = close_effect_scope(graph)
    graph.outputs += [t for _, t in written]
    if verify:
        from tracegrad.core.verify import verify as check

        check(graph)
    return graph, out_treedef, [v for v, _ in written]


def _trace_into(graph, fn, treedef, entries, statics, names, name):
    values = []
    with graph.as_default():
        k = 0
        for e in entries:
            if _is_array(e):
                values.append(graph.add_input(TensorType(e[0], e[1], len(e) == 3), names[k]))
                k += 1
            elif type(e) is _Static:
                values.append(statics[e.index])
            else:
                values.append(e.value)
        args, kwargs = tree.unflatten(treedef, values)
        out = fn(*args, **kwargs)
        out_leaves, out_treedef = tree.flatten(out)
        outputs = []
        for x in out_leaves:
            if not isinstance(x, (Tensor, Variable, np.ndarray, np.generic, bool, int, float,
                                  complex)):
                raise TracegradError(
                    f"{name} returned a {type(x).__name__}; a traced function returns "
                    "tensors, arrays, Python numbers and structures (tuple, list, dict, "
                    "namedtuple, None) of them"
                )
            outputs.append(graph.to_tensor(x))
        graph.outputs = outputs
    return out_treedef
