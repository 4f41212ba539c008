"""Row-split parallel kernels (docs/numba.md, "Parallel loops").

A graph whose rows are independent along a leading dim (a vmap, a per-example Jacobian or
Hessian: every output and every value that has the dim has it as axis 0, and every op that
reads or writes it is in `ops.ALIGNED`) gets, as its parallel kernel, its serial kernel
called on parts of the rows from a `prange` loop: one launch per call, each part's matrix
products one BLAS call of its rows on one BLAS thread. The parts depend only on the call's
shapes, so every thread count gives the same bits (a BLAS's result for a row can depend on
how many rows its call has: OpenBLAS's does).
"""

from __future__ import annotations

from tracegrad.backends.numba.parallel import largest
from tracegrad.backends.numba.plan import Plan
from tracegrad.backends.numba.records import DECORATOR, ENTRY
from tracegrad.backends.numba.split import split_entry
from tracegrad.backends.numba.segments import has_control_flow
from tracegrad.ops import ALIGNED

# The parts a call's rows are split into: at least ROW_PARTS (divisible by 2, 3, 4 and 6
# threads), more when a part's largest value would have more than PART_ELEMENTS elements
# (its temporaries then stay in a core's L2 cache), at most one per row. Each part costs a
# call of the serial kernel, about 1 us (docs/performance.md, "Parallel loops").
ROW_PARTS = 12
PART_ELEMENTS = 1 << 15


class _Parts:
    """Slot value: how many parts the rows of dim class `d` are split into."""

    __slots__ = ("d",)

    def __init__(self, d):
        self.d = d

    def __call__(self, plan, shapes):
        t, ax = plan.class_members[self.d]
        rows = shapes[id(t)][ax]
        per_part = -(-largest(shapes.values()) // PART_ELEMENTS)
        return max(1, min(rows, max(ROW_PARTS, per_part)))

BODY = "rows_part"


def row_class(plan: Plan) -> int | None:
    """The dim class along which `plan`'s graph splits into independent rows, or None."""
    graph = plan.graph
    if has_control_flow(graph) or plan.data_dependent or not graph.outputs:
        return None
    cls = plan.dim_class
    first = graph.outputs[0]
    d = cls.get((id(first), 0)) if first.ndim else None
    if d is None:
        return None
    if any(c == d and ax != 0 for (_, ax), c in cls.items()):
        return None

    def has(t) -> bool:
        return t.ndim > 0 and cls.get((id(t), 0)) == d

    if not all(has(t) for t in graph.outputs):
        return None
    for op in graph.operations:
        reads, writes = any(has(t) for t in op.inputs), [has(t) for t in op.outputs]
        if not (reads or any(writes)):
            continue
        if not any(writes) and not any(plan.consumers[id(t)] or plan.is_output(t)
                                       for t in op.outputs):
            continue  # a dim size read only as a shape: each part computes its own
        if op.primitive not in ALIGNED or (reads and not all(writes)):
            return None
    return d if any(has(t) for t in graph.all_inputs) else None


def generate(plan: Plan, d: int, codegen):
    """`(source, cg)`: the module of `plan`'s row-split kernel along dim class `d` (`cg`,
    the code generator of its serial part made by `codegen(plan, parallel, entry=...)`,
    holds what the executor needs), or None when the serial kernel can raise (not from a
    parallel loop)."""
    parts = plan.int_slot(_Parts(d))
    cg = codegen(plan, False, entry=BODY)
    cg.helpers["_blas_one"] = cg.helpers["_blas_restore"] = None
    # Numba's parallel loop hands a 0-d array to the functions it calls as its scalar (a
    # part's `a[()]` failed to type): the parts read one-element views instead
    cg.scalar_index = "0"
    body = split_entry(cg.generate(), BODY)
    if cg.raises:
        return None
    graph = plan.graph
    split = {f"a{k}" for k, t in enumerate(graph.all_inputs)
             if t.ndim and plan.dim_class.get((id(t), 0)) == d}
    split |= {f"out{k}" for k in range(len(graph.outputs))}
    scalars = {f"a{k}" for k, t in enumerate(graph.all_inputs) if t.ndim == 0}
    args = [f"{p}[r0:r1]" if p in split else "Ip" if p == "I" else
            f"{p}_1" if p in scalars else p for p in cg.params]
    entry = "\n".join([
        f"{DECORATOR}, parallel=True)",
        f"def {ENTRY}({', '.join(cg.params)}):",
        f"    rows = I[{d}]",
        f"    parts = I[{parts}]",
        *(f"    {p}_1 = {p}.reshape((1,))" for p in sorted(scalars)),
        "    saved = _blas_one(0)  # every part's products on one BLAS thread",
        "    for part_u in prange(parts):",
        "        part = np.int64(part_u)",
        "        r0 = part * rows // parts",
        "        r1 = (part + 1) * rows // parts",
        "        Ip = I.copy()",
        f"        Ip[{d}] = r1 - r0",
        f"        {BODY}({', '.join(args)})",
        "    _blas_restore(saved)",
        "    return None",
    ])
    return body + "\n\n" + entry + "\n", cg
