"""The Numba backend: a FuncGraph becomes one generated module with one `@njit` entry
function of fused native loops, cached in memory and on disk (see docs/numba.md).

- `compile_graph(graph, parallel=False)` -> executor; `executor(list of arrays)` feeds
  `graph.all_inputs` in order and returns fresh arrays in `graph.outputs` order.
- `generate_source(graph)` -> the generated module's source (what `--stage compiled` prints).
- `cache_info()`, `clear_memory_cache()`, `cache_dir()`: the kernel cache.

Numba is imported lazily, on the first compile.
"""

from __future__ import annotations

from tracegrad.backends.numba.cache import cache_dir, cache_info, clear_memory_cache
from tracegrad.backends.numba.codegen import ENTRY, CodeGen
from tracegrad.backends.numba.control import Segment, check_outer
from tracegrad.backends.numba.plan import Plan
from tracegrad.backends.numba.segments import CONTROL, SegmentedExecutor, has_control_flow
from tracegrad.core import dtypes
from tracegrad.core.ir import FuncGraph

__all__ = [
    "cache_dir",
    "cache_info",
    "clear_memory_cache",
    "compile_graph",
    "generate_source",
    "supported_primitives",
]


# Primitives the backend removes before planning: a `call` is its callee's graph inlined,
# a `custom_gradient` boundary is its first operands (the gradient is not computed here), an
# `assign` its value (the function layer writes the Variable from the graph's outputs).
LOWERED = ("call", "custom_gradient", "assign")


def _lower(graph: FuncGraph) -> FuncGraph:
    """`graph` without `call` / `custom_gradient` ops (a copy only when it has some)."""
    from tracegrad.passes import Rewriter, run_pass

    def make_rule(rw):
        def rule(rw, op, ins):
            name = op.primitive.name
            if name == "custom_gradient":
                return ins[: len(op.outputs)]
            if name == "assign":
                return ins[1:]
            if name == "call":
                callee = op.attrs["callee"].graph
                env = {id(t): x for t, x in zip(callee.all_inputs, ins, strict=True)}
                return Rewriter(callee, target=rw.target, env=env).run()
            return None
        return rule

    while any(op.primitive.name in LOWERED for op in graph.operations):
        graph, _ = run_pass(graph, make_rule)
    return graph


class _Source:
    """A kernel's generated source, not compiled."""

    def __init__(self, source: str):
        self.source = source


def generate_source(graph: FuncGraph, parallel: bool = False) -> str:
    """The Python source of the module the Numba backend compiles for `graph` (for a graph
    with control flow, the modules of its straight-line runs and of its sub-graphs)."""
    graph = _lower(graph)
    if has_control_flow(graph):
        try:
            return _generate(graph, parallel)[1].generate()
        except Segment:
            return SegmentedExecutor(graph, lambda g: _Source(generate_source(g, parallel)),
                                     parallel).source
    return CodeGen(Plan(graph), parallel).generate()


def _generate(graph: FuncGraph, parallel: bool):
    plan = Plan(graph)
    if has_control_flow(graph):
        check_outer(plan)
    return plan, CodeGen(plan, parallel)


def compile_graph(graph: FuncGraph, parallel: bool = False):
    """The executor of `graph`: `run(list of arrays) -> list of arrays` (fresh arrays).
    Graphs with control flow are compiled between their control-flow ops (segments.py)."""
    graph = _lower(graph)
    if has_control_flow(graph):
        try:  # branches and loops inside the kernel (control.py)
            return _compile_kernel(graph, parallel)
        except Segment:
            return SegmentedExecutor(graph, lambda g: _compile_kernel(g, parallel), parallel)
    return _compile_kernel(graph, parallel)


def _compile_kernel(graph: FuncGraph, parallel: bool):
    from tracegrad.backends.numba.cache import load_kernel
    from tracegrad.backends.numba.executor import Executor

    graph = _lower(graph)
    plan, cg = _generate(graph, parallel)
    source = cg.generate()
    entry = load_kernel(source, _signature(graph, cg), ENTRY)
    return Executor(plan, entry, source, cg.const_arrays, cg.uses_I, cg.uses_F, cg.raises)


def _signature(graph: FuncGraph, cg: CodeGen) -> tuple:
    from numba import types
    from numba.np.numpy_support import from_dtype

    def arr(dtype, ndim):
        return types.Array(from_dtype(dtypes.canonicalize(dtype)), ndim, "C")

    sig = [arr(t.dtype, t.ndim) for t in graph.all_inputs]
    sig += [arr(c.dtype, c.ndim) for c in cg.const_arrays]
    if cg.uses_I:
        sig.append(arr("int64", 1))
    if cg.uses_F:
        sig.append(arr("float64", 1))
    sig += [arr(t.dtype, t.ndim) for t in graph.outputs]
    return tuple(sig)


def supported_primitives() -> set:
    """The names of the primitives the backend has Numba code for."""
    from tracegrad.backends.numba import blocks, codegen, scalars

    virtual = {name[3:] for name in vars(codegen.CodeGen) if name.startswith("_v_")}
    return (set(blocks.BLOCKS) | scalars.SCALAR_PRIMITIVES | virtual | {"constant"}
            | set(LOWERED) | set(CONTROL))
