"""The Numba backend: a FuncGraph becomes one generated module with one `@njit` entry
function of fused native loops, cached in memory and on disk (see docs/numba.md).

- `compile_graph(graph, parallel=False)` -> executor; `executor(list of arrays)` feeds
  `graph.all_inputs` in order and returns fresh arrays in `graph.outputs` order (`parallel`
  None: only graphs that split into rows run large calls on several threads).
- `generate_source(graph)` -> the generated module's source (what `--stage compiled` prints).
- `cache_info()`, `clear_memory_cache()`, `cache_dir()`: the kernel cache.

Numba is imported lazily, on the first compile.
"""

from __future__ import annotations

from functools import partial

from tracegrad.backends import threads
from tracegrad.backends.numba import rows
from tracegrad.backends.numba.cache import cache_dir, cache_info, clear_memory_cache
from tracegrad.backends.numba.codegen import ENTRY, CodeGen
from tracegrad.backends.numba.control import Segment, check_outer
from tracegrad.backends.numba.helpers import STORAGE
from tracegrad.backends.numba.lowering import INLINED, Lowering, find, register, registered
from tracegrad.backends.numba.parallel import large_call, passive_omp, with_threads
from tracegrad.backends.numba.plan import Plan
from tracegrad.backends.numba.segments import SegmentedExecutor, has_control_flow
from tracegrad.backends.numba.split import split_entry
from tracegrad.core import dtypes
from tracegrad.core.ir import FuncGraph
from tracegrad.ops import linalg, reductions
from tracegrad.ops.custom import call_p, custom_gradient_p
from tracegrad.ops.effects import assign_p
from tracegrad.ops.elementwise import convert_element_type_p
from tracegrad.passes.inline import inline_call, inline_custom_gradient

__all__ = [
    "cache_dir",
    "cache_info",
    "clear_memory_cache",
    "compile_graph",
    "generate_source",
    "supported_primitives",
]


# Primitives the backend removes before planning (`_lower`): a `call` is its callee's graph
# inlined, a `custom_gradient` boundary is its first operands (the gradient is not computed
# here), an `assign` its value (the function layer writes the Variable from the graph's
# outputs). `call` and `custom_gradient` use the inliner `tg.optimize` uses (passes/inline.py).

register(call_p, Lowering(INLINED, inline=inline_call))
register(custom_gradient_p, Lowering(INLINED, inline=inline_custom_gradient))
register(assign_p, Lowering(INLINED, inline=lambda rw, op, ins: ins[1:]))


def _inlined(op):
    """The `inline` rule of `op`'s primitive when it is removed before planning, or None."""
    if (op.primitive in _F32_ACCUMULATED and op.inputs[0].dtype == dtypes.float16
            and not op.outputs[0].type.weak):
        return _float32_accumulated
    rec = find(op.primitive)
    return rec.inline if rec is not None and rec.kind == INLINED else None


# float16 sums, products and matrix products accumulate in float32 and round once at the
# end, as NumPy's float16 loops do over a contiguous run of elements.
_F32_ACCUMULATED = (reductions.reduce_sum_p, reductions.reduce_prod_p, linalg.dot_general_p)


def _float32_accumulated(rw, op, ins):
    def convert(x, dtype):
        return rw.emit(convert_element_type_p, [x], {"new_dtype": dtype}, op.source)[0]

    wide = [convert(x, dtypes.float32) if x.type.dtype == dtypes.float16 else x for x in ins]
    (out,) = rw.emit(op.primitive, wide, dict(op.attrs), op.source)
    return [convert(out, dtypes.float16)]


def _lower(graph: FuncGraph) -> FuncGraph:
    """`graph` without `call` / `custom_gradient` / `assign` ops (a copy only when it has
    some)."""
    from tracegrad.passes import run_pass

    def make_rule(rw):
        def rule(rw, op, ins):
            inline = _inlined(op)
            return None if inline is None else inline(rw, op, ins)
        return rule

    while any(_inlined(op) is not None for op in graph.operations):
        graph, _ = run_pass(graph, make_rule)
    return graph


class _Source:
    """A kernel's generated source, not compiled."""

    def __init__(self, source: str):
        self.source = source


def generate_source(graph: FuncGraph, parallel: bool = False) -> str:
    """The Python source of the module the Numba backend compiles for `graph` (for a graph
    with control flow, the modules of its straight-line runs and of its sub-graphs): its
    first kernel, whose slices start at constants (`_kernel_source`)."""
    graph = _lower(graph)
    if has_control_flow(graph):
        try:
            return split_entry(_generate(graph, parallel, constant_starts=True)[1].generate(),
                               ENTRY)
        except Segment:
            return SegmentedExecutor(graph, lambda g: _Source(generate_source(g, parallel)),
                                     parallel).source
    found, plan = _row_split(Plan(graph)) if parallel else (None, None)
    return (found or _source(*_generate(graph, parallel, plan, constant_starts=True)))[0]


def _generate(graph: FuncGraph, parallel: bool, plan: Plan | None = None,
              constant_starts: bool = False):
    plan = plan or Plan(graph)
    if has_control_flow(graph):
        check_outer(plan)
    cg = CodeGen(plan, parallel, constant_starts=constant_starts)
    cg.keep_temporaries()  # those of known shapes (of a graph with unknown dims too)
    return plan, cg


def _kernel_source(graph: FuncGraph, parallel: bool, plan: Plan | None):
    """`(source, cg)` of the kernel to load for `graph`.

    A slice whose start is a non-negative constant reads at that constant, not at a slot of
    `I` loaded at kernel entry: an index LLVM folds, and a shorter compile (the LSTM l=4
    gradient: 274 slot loads fewer). Such starts may be sizes, though (`x[n // 2:]`, a
    concatenation's gradient), and the generic kernel serves every size. So a graph loads
    the generic kernel when it is compiled already (in memory or on disk), or when a
    specialization of it with other starts was loaded before (the function met a second
    size); else the specialized one: at most two compiles for a function whatever the
    sizes it meets."""
    from tracegrad.backends.numba.cache import SPECIALIZED, has_kernel, kernel_key

    generic = _source(*_generate(graph, parallel, plan))
    generic_key = kernel_key(generic[0], str(_signature(graph, generic[1])))
    if has_kernel(generic_key):
        return generic
    special = _source(*_generate(graph, parallel, constant_starts=True))
    if special[0] == generic[0]:
        return generic
    key = kernel_key(special[0], str(_signature(graph, special[1])))
    return special if SPECIALIZED.setdefault(generic_key, key) == key else generic


def _source(plan: Plan, cg: CodeGen):
    """`(source, cg)` of the kernel `cg` generates."""
    return split_entry(cg.generate(), ENTRY), cg


def _row_split(plan: Plan):
    """`(found, plan)`: `found`, the row-split kernel `(source, cg)` of `plan`'s graph
    (rows.py, generated on `plan`), or None when the graph does not split into rows or its
    serial kernel can raise; `plan`, a plan untouched by the attempt for its other kernels
    (None when `found`: they make their own)."""
    d = rows.row_class(plan)
    if d is None:
        return None, plan
    found = rows.generate(plan, d, CodeGen)
    return found, (None if found is not None else Plan(plan.graph))


def compile_graph(graph: FuncGraph, parallel: bool | None = False):
    """The executor of `graph`: `run(list of arrays) -> list of arrays` (fresh arrays).
    Graphs with control flow are compiled between their control-flow ops (segments.py).
    `parallel`: large calls run loops on `threads.num_threads` threads (parallel.py); None:
    only a graph that splits into rows does (rows.py)."""
    graph = _lower(graph)
    if has_control_flow(graph):
        try:  # branches and loops inside the kernel (control.py)
            return _compile_kernel(graph, parallel)
        except Segment:
            return SegmentedExecutor(graph, lambda g: _compile_kernel(g, parallel), parallel)
    return _compile_kernel(graph, parallel)


def _compile_kernel(graph: FuncGraph, parallel: bool | None):
    graph = _lower(graph)
    found, plan = _row_split(Plan(graph)) if parallel is not False else (None, None)
    # a row-split kernel's bits can differ from the serial kernel's (rows.py): its graph's
    # large calls run it at every thread count
    split = found is not None
    parallel = split or bool(parallel)  # None: row-split kernels only
    if parallel and (threads.num_threads > 1 or split) and \
            _always_large(found[1].plan if split else plan, split):
        # every call is large: the parallel kernel alone (the same bits on one thread)
        return _executor(graph, True, threaded=True, found=found)
    # with `parallel`, large calls run a second kernel, compiled when one first comes
    # (parallel.py): the serial one keeps its loops single-threaded (and its call path)
    return _executor(graph, False, partial(_executor, graph, True, found=found)
                     if parallel else None, row_split=split, plan=plan)


def _always_large(plan: Plan, split: bool) -> bool:
    return plan.static and large_call(plan.graph, plan.static_shapes(), split)


def _executor(graph: FuncGraph, parallel: bool, compile_parallel=None, threaded=False,
              row_split=False, plan: Plan | None = None, found=None):
    """The executor of `graph`'s kernel: `found` (a row-split kernel's `(source, cg)`), else
    the kernel generated for `parallel` on `plan` (None: a new one)."""
    from tracegrad.backends.numba.cache import load_kernel
    from tracegrad.backends.numba.executor import Executor

    source, cg = found if found is not None and parallel else \
        _kernel_source(graph, parallel, plan)
    if parallel:
        passive_omp()
    entry = load_kernel(source, _signature(graph, cg), ENTRY)
    return Executor(cg.plan, with_threads(entry) if threaded else entry, source,
                    cg.const_arrays, cg.uses_I, cg.uses_F, cg.raises, cg.kept,
                    parallel=compile_parallel, row_split=row_split)


def _signature(graph: FuncGraph, cg: CodeGen) -> tuple:
    from numba import types
    from numba.np.numpy_support import from_dtype

    def arr(dtype, ndim):
        return types.Array(from_dtype(STORAGE[dtypes.canonicalize(dtype)]), ndim, "C")

    sig = [arr(t.dtype, t.ndim) for t in graph.all_inputs]
    sig += [arr(c.dtype, c.ndim) for c in cg.const_arrays]
    if cg.uses_I:
        sig.append(arr("int64", 1))
    if cg.uses_F:
        sig.append(arr("float64", 1))
    sig += [arr(t.dtype, t.ndim) for t in graph.outputs]
    sig += [arr(dtype, len(shape)) for shape, dtype in cg.kept]
    return tuple(sig)


def supported_primitives() -> set:
    """The names of the primitives the backend has Numba code for (a lowering record:
    lowering.py)."""
    return {prim.name for prim in registered()}
