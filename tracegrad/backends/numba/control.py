"""Control flow inside the generated function: a `cond` is an `if`, a `while` is a `while`.

Each sub-graph (a branch; a loop's condition; its body followed by the condition, as one
step) becomes a kernel of its own, an `@njit` function of the same module generated and
fused like any graph. Branches and conditions are inlined where they are called by LLVM
(`forceinline`); a loop's step function runs the whole loop (`Loop`): the caller calls
it once (`_direct`), so it is compiled once, not on its own and again in its caller, and
no Python and no call separate iterations. The loop keeps two buffers per carry; the step
writes the second from the first, which is then copied back (small carries of known size)
or swapped with it (Numba updates the reference counts of swapped arrays, which costs
more than copying a few thousand elements). A loop that keeps its history writes each
iteration's carry into a row of a buffer that starts at `maximum_iterations` rows (at
most HISTORY_ROWS_BOUNDED; such a buffer is never full and has no code growing it) or
HISTORY_ROWS, and grows by doubling (its final size is the iteration count, known only
when the loop ends: the kernel sets that dim itself; a loop whose history may grow is
run by its caller, the step inlined there); only the histories something reads
are kept. Carries and history rows are copied by one memcpy each (`_ccopy`, `_crow`):
generated loops cost Numba's front end a loop each. A step's temporaries are allocated
once, before the loop, by a companion function of the step (`while_step3_ws`: the same
arguments, the same sizes), and passed to every call: an iteration allocates nothing.

A sub-graph kernel takes every size from its input arrays, so its callers' arrays set
them (a history grows while the loop runs). A graph this cannot express raises
`Segment`, and the backend compiles it between its control-flow ops instead
(segments.py): a sub-graph size that depends on neither its inputs nor a constant, a cond
result of unknown size, or a size computed after a loop from its history's size.
"""

from __future__ import annotations

import numpy as np

from tracegrad.backends.numba.lowering import CONTROL, Lowering, register
from tracegrad.backends.numba.plan import AttrSlot, Plan, _Fixed, _ShapeRead
from tracegrad.backends.numba.records import Ref, direct_args, name_of, slot
from tracegrad.backends.numba.scalars import NB_TYPE
from tracegrad.ops.control_flow import cond_p, while_p
from tracegrad.ops.python_call import python_call_p
from tracegrad.ops.shape_ops import slice_p

# Rows a loop's history buffers start with when it has no `maximum_iterations` (they
# double when full); with one, they start at most this many rows and never exceed it.
HISTORY_ROWS = 64
HISTORY_ROWS_BOUNDED = 4096
# A loop copies its carries back after each step when they hold at most this many elements
# in all (and swaps its two sets of buffers otherwise).
COPY_BACK_ELEMENTS = 4096


class Segment(Exception):
    """This graph's control flow is compiled between kernels (segments.py), not inside
    one; the message says why."""


class Module:
    """What the functions of one generated module share."""

    def __init__(self, constant_starts: bool = False):
        self.functions: list[str] = []  # sub-graph kernels, callees before callers
        # a slice's non-negative start is written in as a constant, not read from `I`
        # (`_kernel_source` chooses: backends/numba/__init__.py)
        self.constant_starts = constant_starts
        self.helpers: dict = {}  # helper names to import
        self.raises: list = []  # raise tag -> op
        self.count = 0
        self.outlined: dict = {}  # the code of an outlined loop nest -> its function

    def name(self, role: str) -> str:
        self.count += 1
        return f"{role}{self.count}"


class SubKernel:
    """A sub-graph's kernel in the module, the caller's names of its extra arrays, and how
    many temporaries it takes from its caller (a loop step's)."""

    def __init__(self, name: str, extras: list[str], workspace: int = 0):
        self.name = name
        self.extras = extras
        self.workspace = workspace

    def call(self, ins, outs, workspace=()) -> str:
        return f"{self.name}({self._args(ins, outs, workspace)})"

    def alloc_workspace(self, ins, outs, prefix: str) -> tuple[str, list[str]]:
        """The line allocating the temporaries for a call with these arrays (the companion
        `{name}_ws` takes the same arguments), and their names."""
        names = [slot(f"{prefix}_s{k}") for k in range(self.workspace)]
        return f"{', '.join(names)}, = {self.name}_ws({self._args(ins, outs)})", names

    def _args(self, ins, outs, workspace=()) -> str:
        return ", ".join([*ins, *self.extras, *outs, *workspace])


class Loop:
    """A while loop run by its step's function: it is called once, runs every iteration
    and returns the last carries and the iteration count, so the step is compiled once,
    not on its own and again inside its caller. `k` consts, `m` carries (input `k + j`,
    output `j`; output `m` is the condition), histories `kept` (each a parameter after the
    step's, a row written before each step), at most `limit` iterations."""

    def __init__(self, k: int, m: int, kept: list, scalar: list, limit, copy_back: bool):
        self.k, self.m, self.kept, self.scalar = k, m, kept, scalar
        self.limit, self.copy_back = limit, copy_back
        self.params = [f"h{j}" for j in kept]

    def lines(self, body: list[str], helpers: dict) -> list[str]:
        """The step function's body: its own lines `body` inside the loop."""
        k, m, it = self.k, self.m, "loop_it"
        cur = [f"a{k + j}" for j in range(m)]
        step = [line for text in body for line in text.split("\n")]
        loop = _while(helpers, _test(f"out{m}", it, self.limit), it, cur,
                      [f"out{j}" for j in range(m)], list(zip(self.params, self.kept)),
                      self.scalar, self.copy_back, step)
        return [f"{it} = 0", *loop, f"return ({', '.join(cur + [it])},)"]


def sub_kernel(cg, graph, role: str, tied=(), loop: Loop | None = None) -> SubKernel:
    """Generate `graph`'s kernel into `cg`'s module; its constant arrays and int and float
    vectors become constant arrays of `cg`'s function. `tied`: (output, input) positions
    whose sizes must be equal (a loop's carry in and out); `loop`: the step runs it."""
    from tracegrad.backends.numba.codegen import CodeGen
    from tracegrad.passes import optimize

    graph = _prepare(optimize(graph))
    plan = Plan(graph)
    loop_classes = _check_sizes(plan, tied, role)
    sub = CodeGen(plan, parallel=False, module=cg.module, entry=cg.module.name(role))
    if role == "while_step":  # called once per iteration: its temporaries are hoisted
        sub.workspace = []
        sub.loop_classes = loop_classes
        sub.loop = loop
    cg.module.functions.append(sub.function())
    extras = [cg.const_array(c) for c in sub.const_arrays]
    if sub.uses_I:
        extras.append(cg.const_array(np.array(_int_values(plan, role), dtype=np.int64)))
    if sub.uses_F:
        extras.append(cg.const_array(np.array(plan.float_values, dtype=np.float64)))
    return SubKernel(sub.entry, extras, len(sub.workspace or ()))


def _prepare(graph):
    from tracegrad.backends.numba import _lower

    return _lower(graph)


def _check_sizes(plan: Plan, tied, role: str) -> set:
    """Every unknown size of the sub-graph comes from an input (and a tied output has its
    input's sizes); returns the dim classes its own loops size (check_outer)."""
    graph = plan.graph
    kernel_classes = check_outer(plan)
    for t in plan.tensors:
        for ax, d in enumerate(t.shape):
            if d is None and _source(plan, t, ax) is None and \
                    plan.dim_class[(id(t), ax)] not in kernel_classes:
                raise Segment(f"a size of {role} depends on its data")
    for o, i in tied:
        out, inp = graph.outputs[o], graph.inputs[i]
        for ax, (a, b) in enumerate(zip(out.shape, inp.shape, strict=True)):
            if a is None or b is None:
                if a == 1 or b == 1 or plan.dim_class[(id(out), ax)] != \
                        plan.dim_class[(id(inp), ax)]:
                    raise Segment(f"{role} may change the size of a carry")
    return kernel_classes


def _source(plan: Plan, t, ax):
    """The input (tensor, axis) that sets the size of `t`'s axis `ax`, or None."""
    cls = plan.dim_class.get((id(t), ax))
    if cls is None:
        return None
    rep, rax = plan.class_members[cls]
    return (rep, rax) if id(rep) in plan.input_index else None


def _int_values(plan: Plan, role: str) -> list:
    """The sub-graph's int vector: what is known before it runs (class sizes that come
    from inputs are read from them in the kernel)."""
    shapes = plan.static_shapes()
    values = []
    for int_slot in plan.int_slots:
        if isinstance(int_slot, _ShapeRead):
            d = shapes[int_slot.tid][int_slot.axis]
            values.append(0 if d is None else d)
        elif isinstance(int_slot, AttrSlot):
            shape = shapes[int_slot.tid]
            if None in shape:
                raise Segment(f"{role} slices an array of unknown size")
            values.append(int_slot.fn(shape))
        elif isinstance(int_slot, _Fixed):
            values.append(int_slot.value)
        else:
            raise Segment(f"{role} needs a value computed at run time")
    return values


# -- the outer graph ---------------------------------------------------------------------------


def check_outer(plan: Plan) -> set:
    """The dim classes of `plan` that only its kernel knows (the sizes of loop histories);
    raises `Segment` when a size the caller computes would depend on one."""
    kernel_classes = set()
    derived: set = set()
    for op in plan.graph.operations:
        prim = op.primitive
        if prim is while_p and op.attrs.get("keep_history"):
            m = len(op.inputs) - op.attrs["num_consts"]
            for h in op.outputs[m + 1:]:
                kernel_classes.add(plan.dim_class[(id(h), 0)])
                derived.add(id(h))
        elif prim is cond_p:
            for t in op.outputs:
                if None in t.shape:
                    raise Segment("a cond result has an unknown size")
        elif any(id(x) in derived for x in op.inputs):
            if prim is slice_p or (prim is while_p and any(
                    id(x) in derived for x in op.inputs[op.attrs["num_consts"]:])):
                raise Segment("a size computed from a loop's history")
            derived.update(id(t) for t in op.outputs if None in t.shape)
    for t in plan.tensors:
        if id(t) not in derived:
            continue
        for ax, d in enumerate(t.shape):
            if d is None and plan.dim_class[(id(t), ax)] not in kernel_classes:
                raise Segment("a size computed from a loop's history")
    for t in plan.graph.outputs:
        for ax, d in enumerate(t.shape):
            if d is None and plan.dim_class[(id(t), ax)] in kernel_classes:
                raise Segment("a result's size is a loop's iteration count")
    return kernel_classes


# -- emitters ----------------------------------------------------------------------------------


def emit_cond(cg, op) -> None:
    pred, *args = op.inputs
    false_graph, true_graph = op.attrs["branches"]
    ins = [cg.operand_array(x) for x in args]
    branches = [sub_kernel(cg, g, role) for g, role in ((false_graph, "false_branch"),
                                                        (true_graph, "true_branch"))]
    outs = [cg.alloc(t) for t in op.outputs]
    test, _ = cg.read(pred, [])
    cg.emit(f"if {test}:\n    {branches[1].call(ins, outs)}\n"
            f"else:\n    {branches[0].call(ins, outs)}")
    for t, name in zip(op.outputs, outs, strict=True):
        if t.ndim == 0:
            cg.set_scalar(t, f"{name}[()]")


register(cond_p, Lowering(CONTROL, emit=emit_cond, needs_array=True))


def emit_while(cg, op) -> None:
    from tracegrad.backends.numba.segments import _step_graph

    attrs = op.attrs
    k = attrs["num_consts"]
    limit = attrs.get("maximum_iterations")
    history = attrs.get("keep_history", False)
    consts = [cg.operand_array(x) for x in op.inputs[:k]]
    inits = op.inputs[k:]
    m = len(inits)
    tied = [(j, k + j) for j in range(m)]
    cond = sub_kernel(cg, attrs["cond_graph"], "while_cond")
    # Histories nothing reads are not kept (a scan's carries, when only its ys are used).
    kept = [j for j in range(m) if history and _used(cg.plan, op.outputs[m + 1 + j])]
    # Small carries of known size are copied back after each step: cheaper than swapping
    # the two buffers, whose reference counts Numba updates on every swap.
    copy_back = m and all(None not in x.shape for x in inits) and \
        sum(int(np.prod(x.shape)) for x in inits) <= COPY_BACK_ELEMENTS
    rows = HISTORY_ROWS if limit is None else max(1, min(limit, HISTORY_ROWS_BOUNDED))
    scalar = [x.ndim == 0 for x in inits]
    # the step runs the whole loop unless a history buffer may have to grow
    loop = Loop(k, m, kept, scalar, limit, bool(copy_back)) \
        if not kept or (limit is not None and rows >= limit) else None
    step = sub_kernel(cg, _step_graph(attrs["cond_graph"], attrs["body_graph"], k),
                      "while_step", tied, loop)
    w = cg.fresh("w")
    w = name_of(w)
    cur = [slot(f"{w}_c{j}") for j in range(m)]
    nxt = [slot(f"{w}_n{j}") for j in range(m)]
    hist = [slot(f"{w}_h{j}") for j in range(m)]
    go, it = slot(f"{w}_go"), slot(f"{w}_it")
    lines = []
    for j, x in enumerate(inits):
        src = cg.operand_array(x)
        lines += [f"{cur[j]} = {src}.copy()", f"{nxt[j]} = np.empty_like({cur[j]})"]
    lines += [f"{go} = np.empty((), dtype=np.bool_)", cond.call(consts + cur, [go])]
    workspace = []
    if step.workspace:
        line, workspace = step.alloc_workspace(consts + cur, nxt + [go], w)
        lines.append(line)
    for j in kept:  # (the histories of a loop of the entry kernel are kept: codegen.py)
        x = inits[j]
        shape = ", ".join((str(rows), *cg.dims(x)))
        value = f"np.empty(({shape},), dtype={NB_TYPE[x.dtype]})"
        lines.append(f"{hist[j]} = {cg.kept_or((rows, *x.shape), x.dtype, value)}")
    if loop is not None:
        cg.helpers["_direct_step"] = None
        args = [*consts, *cur, *step.extras, *nxt, go, *workspace, *(hist[j] for j in kept)]
        lines.append(f"{', '.join(cur + [it])}, = _direct_step({step.name}, "
                     f"{direct_args(args)}, {k}, {m})")
    else:  # a history that may grow: the step is inlined here
        lines.append(f"{it} = 0")
        grow = _grow(cg, it, limit, [(hist[j], inits[j]) for j in kept], slot(f"{w}_g"))
        lines += _while(cg.helpers, _test(go, it, limit), it, cur, nxt,
                        [(hist[j], j) for j in kept], scalar, copy_back,
                        [step.call(consts + cur, nxt + [go], workspace)], before=grow)
    cg.emit("\n".join(lines))
    for j, t in enumerate(op.outputs[:m]):
        if t.ndim == 0:
            cg.set_scalar(t, f"{cur[j]}[()]")
        else:
            cg.refs[id(t)] = _arr(cur[j])
    if history:
        cg.set_scalar(op.outputs[m], f"np.int64({it})")
        for j in kept:
            t = op.outputs[m + 1 + j]
            cg.emit(f"{{n{cg.plan.dim_class[(id(t), 0)]}}} = {it}\n"
                    f"{hist[j]} = {hist[j]}[:{it}]")
            cg.refs[id(t)] = _arr(hist[j])


register(while_p, Lowering(CONTROL, emit=emit_while, needs_array=True))


def _python_call_segment(cg, op):
    raise Segment(f"python_call of {op.attrs['function'].name} runs in Python, between "
                  "kernels (segments.py)")


register(python_call_p, Lowering(CONTROL, emit=_python_call_segment, needs_array=True))


def _used(plan: Plan, t) -> bool:
    return bool(plan.consumers[id(t)]) or plan.is_output(t)


def _grow(cg, it, limit, hists, g) -> list[str]:
    """Lines doubling each history buffer of `hists` (`(name, carry)`) when it is full."""
    grown = f"min(2 * {it}, {limit})" if limit is not None else f"2 * {it}"
    lines = [f"if {it} == {hists[0][0]}.shape[0]:"]
    for h, x in hists:
        dims = cg.dims(x)
        r = cg.fresh("r")
        lines += [f"    {g} = np.empty(({', '.join((grown, *dims))},), dtype={NB_TYPE[x.dtype]})",
                  f"    for {r} in range({it}):",
                  *["        " + line for line in _copy(cg, dims, (g, r), (h, r))],
                  f"    {h} = {g}"]
    return lines


def _test(go: str, it: str, limit) -> str:
    """A loop's condition: flag array `go` set, and fewer than `limit` iterations done."""
    return f"{go}[()]" if limit is None else f"{go}[()] and {it} < {limit}"


def _while(helpers, test, it, cur, nxt, hists, scalar, copy_back, step, before=()) -> list:
    """A loop's `while` statement: the lines `before`, the rows of `hists` (`(buffer,
    j)`: carry `j` into row `it`), the step's lines `step`, then the carries `nxt` copied
    back into `cur` (`copy_back`) or the two swapped, and `it` counted."""
    body = [*before, *(_copy_into(helpers, scalar[j], (h, it), cur[j]) for h, j in hists),
            *step]
    if copy_back:
        body += [_copy_into(helpers, s, (c, None), n) for s, c, n in zip(scalar, cur, nxt)]
    elif cur:
        body.append(f"{', '.join(cur)}, {', '.join(nxt)} = {', '.join(nxt)}, "
                    f"{', '.join(cur)},")
    body.append(f"{it} += 1")
    return [f"while {test}:", *("    " + line for line in body)]


def _copy_into(helpers, scalar: bool, dst, src) -> str:
    """The line copying carry buffer `src` (C-contiguous; `scalar`: 0-d) into `dst`: an
    `(array, row or None)`."""
    if scalar:
        return f"{dst[0]}[{dst[1] if dst[1] is not None else '()'}] = {src}[()]"
    helper = "_ccopy" if dst[1] is None else "_crow"
    helpers[helper] = None
    row = "" if dst[1] is None else f"{dst[1]}, "
    return f"{helper}({dst[0]}, {row}{src})"


def _copy(cg, dims, dst, src) -> list[str]:
    """Loops copying an array of `dims` from `src` to `dst`, each `(array, leading index
    or None)` (slice assignment would copy too, but costs Numba seconds to compile)."""
    loops = [cg.fresh("i") for _ in dims]
    ix = [("0" if d == "1" else v) for v, d in zip(loops, dims)]

    def at(name, lead):
        parts = ([lead] if lead is not None else []) + ix
        return f"{name}[{', '.join(parts) or '()'}]"

    lines = [f"{'    ' * k}for {v} in range({d}):" for k, (v, d) in enumerate(zip(loops, dims))]
    lines.append("    " * len(dims) + f"{at(*dst)} = {at(*src)}")
    return lines


def _arr(name):
    return Ref("arr", name)
