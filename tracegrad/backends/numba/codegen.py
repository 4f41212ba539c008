"""Code generation: a FuncGraph becomes one Python module with one `@njit` entry function.

How a tensor is held in the generated function (its *ref*):
- `arr`: a C-contiguous array variable (an input, a constant array, an output buffer, a
  buffer allocated in the kernel, or a reshape view);
- `scal`: a scalar local (rank-0 results are always computed once, at function level);
- `virtual`: not stored at all: consumers evaluate it element by element inside their own
  loop nest (elementwise ops, broadcasts, transposes, slices, reversals, gathers, iota).

A *root* is a virtual-capable tensor that must be stored (a graph output, read by an op
that needs an array, or the end of a region at the size cap: see fusion.py); consecutive
roots over the same dims share one loop nest, so a whole elementwise region is one loop.
Blocks for the other primitives (reductions, dot_general, sort, ...) live in `blocks.py`.

Sibling fusion: reductions (lowering kind `REDUCTION`) also evaluate into the open nest when
they walk the same iteration space and read nothing it produces; `Fusion.schedule` moves
such independent siblings next to each other (a topological order), so several reductions
of one array are one pass over it; a value several of them read is evaluated once per
element (`Nest.memo`), and a float sum runs the nest's inner loop in blocks
(`Nest.blocked`). A nest holds at most `fusion.MAX_FUSED_OPS` fused ops: a
longer elementwise region is cut into several loops with an array in between (Numba's
compile time grows faster than linearly with a loop body's size).
"""

from __future__ import annotations

import re

from tracegrad import backends
from tracegrad.backends.numba import (
    blocks,
    blocks_linalg,
    blocks_reduce,
    control,
    fusion,
    helpers,
)
from tracegrad.backends.numba.lowering import (
    ELEMENTWISE,
    GENERATOR,
    REDUCTION,
    REMAP,
    VIEW,
    Lowering,
    lowering,
    register,
)
from tracegrad.backends.numba.plan import (
    AttrSlot,
    Plan,
    data_inputs,
    dims_broadcast,
    dims_gather,
    dims_same,
    dims_squeeze,
    dims_transpose,
    squeeze_map,
)
from tracegrad.backends.numba.scalars import NB_TYPE, scalar_expr, typed
from tracegrad.core import dtypes
from tracegrad.core.op import constant_p
from tracegrad.errors import UnsupportedOpError
from tracegrad.ops import indexing, shape_ops

# each registers the lowering records of its blocks
BLOCK_MODULES = (blocks, blocks_linalg, blocks_reduce, control)

ENTRY = "kernel"
# Every generated function's decorator, before its options (cache.py rewrites `cache=True`)
DECORATOR = '@njit(cache=True, error_model="numpy", nogil=True'
# `Nest` lines (renamed for a redo, made a function by `CodeGen._outlined`): the name a line
# assigns, the names a line uses (not attributes), and the names that are not the nest's.
_ASSIGNS = re.compile(r"\s*(?:for ([A-Za-z_]\w*) in |([A-Za-z_]\w*)\s*[-+*/]?=[^=])")
_NAME = re.compile(r"(?<![\w.])[A-Za-z_]\w*")
_GLOBALS = {"for", "in", "if", "else", "elif", "and", "or", "not", "range", "prange", "min",
            "max", "abs", "raise", "ValueError", "IndexError", "ZeroDivisionError",
            "None", "True", "False", "np", "math", "int", "float", "bool", "return"}
_ALLOC = re.compile(r"t\w+ = (?:np\.empty\(|ws\d+$)")  # a buffer, or a loop step's
_CALLS = re.compile(r"\b(_\w+_v)\(")  # a vector-math helper's call
# Names a nest's loops assign and nothing after the nest reads (values, gather indices,
# loop and block variables): renamed in the whole nest's re-run (`Nest.render`).
_LOCAL = re.compile(r"\b((?:v|g|i|kb|mb|jb|nb)\d+)\b")


class Ref:
    __slots__ = ("kind", "name")

    def __init__(self, kind: str, name: str | None = None):
        self.kind = kind
        self.name = name


class Nest:
    """A loop nest being built: statements are placed at the depth where their indices
    are bound (so loop-invariant work is hoisted), stores go innermost."""

    def __init__(self, cg: CodeGen, dims, parallel: bool = False):
        self.cg = cg
        self.dims = tuple(dims)
        self.vars = [cg.fresh("i") for _ in dims]
        self.pre = [[] for _ in range(len(dims) + 1)]
        self.post = [[] for _ in range(len(dims) + 1)]
        self.prologue: list[str] = []
        self.memo: dict = {}
        self.roots: set = set()
        self.parallel = parallel
        self.commented: set = set()
        self.views: dict | None = None  # collapsed nests: array name -> its view
        self.key = None  # the iteration space: see CodeGen.loop_nest
        self.results: set = set()  # ids of reduction results (complete after the loops)
        self.size = 0  # fused ops evaluated in the nest
        self.ops: frozenset = frozenset()  # their ids
        # counts the arguments the fast sin/cos/tan reduction is wrong for: per block of the
        # innermost loop, which is redone when it counts any (`render`)
        self.trig_flag = None
        # a huge trig argument re-runs the whole nest instead of its block: the statements
        # of the innermost loop may accumulate across blocks (a block's own nest, a
        # reduction that is not per block); `CodeGen.loop_nest` clears it for its nests,
        # whose reductions say whether they allow a block's redo
        self.whole_rerun = True
        self.trig_args: set = set()  # the argument expressions it counts
        # float64 sin(a) or cos(a) emitted as a call of its own: a -> (its lowering record,
        # its value); the other one of the same a replaces that call by one of _sin_cos_fast_v
        self.trig_calls: dict = {}
        # the innermost loop in blocks of SUM_BLOCK (see `blocked`): loop variable names, and
        # the statements run after each block
        self.block: tuple | None = None
        self.block_dim = len(self.dims) - 1
        self.block_end: list[str] = []

    def blocked(self, dim: int | None = None) -> tuple:
        """Make loop `dim` (the innermost one by default) run in blocks of
        `helpers.SUM_BLOCK` elements (for a reduction that sums each block, then combines
        the block sums); returns the names `(k, count, m, j)`: the block's number, the
        number of blocks, its length and the index in it. Statements in `block_end` run
        after each block."""
        if self.block is None:
            self.block_dim = len(self.dims) - 1 if dim is None else dim
            k, count, m, j = (self.cg.fresh(p) for p in ("kb", "nb", "mb", "jb"))
            self.block = (k, count, m, j)
            self.prologue.append(f"{count} = ({self.dims[self.block_dim]} + "
                                 f"{helpers.SUM_BLOCK - 1}) // {helpers.SUM_BLOCK}")
        return self.block

    @property
    def inner(self) -> int:
        """The innermost loop that is not over a dim of size 1."""
        sized = [k for k, d in enumerate(self.dims) if d != "1"]
        return sized[-1] if sized else len(self.dims) - 1

    def collapse(self, groups):
        """Make this nest loop over a view of its arrays with the dims of each group
        (consecutive axes) merged: fewer loops, contiguous inner loop."""
        self.views = {}
        self.groups = groups

    def view(self, name: str, dims) -> str:
        """`name` reshaped to this collapsed nest's groups (declared once, before the loop)."""
        found = self.views.get(name)
        if found is None:
            found = self.views[name] = f"{name}_v{len(self.views)}"
            shape = [_product([dims[a] for a in g]) for g in self.groups]
            self.prologue.append(f"{found} = _cview({name}, ({', '.join(shape)},))")
        return found

    def _called(self, m) -> str:
        """The called (not inlined) twin of a vector-math helper (helpers.CALLED)."""
        name = m.group(1)
        if name not in helpers.CALLED:
            return m.group(0)
        self.cg.helpers[name + "c"] = None
        return name + "c("

    def index(self):
        return [(v, frozenset((k,))) for k, v in enumerate(self.vars)]

    @staticmethod
    def depth(deps) -> int:
        return max(deps) + 1 if deps else 0

    def stmt(self, deps, line: str, op=None):
        d = self.depth(deps)
        if op is not None and id(op) not in self.commented:
            self.commented.add(id(op))
            self.pre[d].append("# " + self.cg.plan.ir_lines[id(op)])
        self.pre[d].extend(line.split("\n"))

    def render(self) -> list[str]:
        redo = self.trig_flag is not None and not self.whole_rerun and (
            self.block is None or self.block_dim == self.inner)
        if redo:
            self.blocked(self.inner)
        out = list(self.prologue)
        if self.trig_flag is not None and not redo:
            out.append(f"{self.trig_flag} = 0")

        def level(d, indent):
            lines = [indent + s for s in self.pre[d]]
            if self.block is not None and d == self.block_dim:
                k, count, m, j = self.block
                b = helpers.SUM_BLOCK
                first = f"{self.vars[d]} = {k} * {b} + {j}"
                body = [first] + level(d + 1, "")
                lines += [f"{indent}for {k} in range({count}):",
                          f"{indent}    {m} = min({b}, {self.dims[d]} - {k} * {b})"]
                if redo:
                    lines.append(f"{indent}    {self.trig_flag} = 0")
                lines.append(f"{indent}    for {j} in range({m}):")
                lines.extend(f"{indent}        {s}" for s in body)
                if redo:
                    lines += [f"{indent}    if {self.trig_flag} != 0:",
                              f"{indent}        for {j}_f in range({m}):"]
                    lines.extend(f"{indent}            {s}" for s in self._redo(body))
                lines.extend(f"{indent}    {s}" for s in self.block_end)
            elif d < len(self.dims):
                inner = level(d + 1, indent + "    ")
                if inner:  # an empty loop is left out
                    rng = "prange" if (self.parallel and d == 0) else "range"
                    lines.append(f"{indent}for {self.vars[d]} in {rng}({self.dims[d]}):")
                    lines.extend(inner)
            lines.extend(indent + s for s in self.post[d])
            return lines

        out.extend(level(0, ""))
        if self.trig_flag is not None and not redo:
            # the whole nest again with the full reduction: its loop-local names get a suffix
            # and it writes the buffers already allocated
            flag = self.trig_flag
            copy = [_LOCAL.sub(r"\1_f", line) for line in out
                    if not re.search(rf"\b{flag}\b", line) and not _ALLOC.match(line)]
            out.append(f"if {flag} != 0:")
            out.extend("    " + line for line in self._full(copy))
        return out

    def _redo(self, body: list[str]) -> list[str]:
        """The innermost loop's `body` again for one block, with the full sin/cos/tan
        reduction; the names it assigns get a suffix (Numba's SSA pass repairs every name
        assigned twice with a walk over the whole function: quadratic in the kernel's
        size), and it counts no arguments."""
        flag = self.trig_flag
        names = {self.block[3]}
        for line in body:
            m = _ASSIGNS.match(line)
            if m is not None:
                names.add(m.group(1) or m.group(2))
        names.discard(flag)
        own = re.compile(r"(?<![\w.])(" + "|".join(sorted(names, key=len, reverse=True)) +
                         r")\b")
        return self._full([own.sub(r"\1_f", line) for line in body
                           if not re.search(rf"\b{flag}\b", line)])

    def _full(self, lines: list[str]) -> list[str]:
        """`lines` calling the full sin/cos/tan reduction instead of the fast one; in a
        large kernel the vector-math helpers are called, not inlined (a rare path: LLVM
        optimizes one copy of each)."""
        lines = [line.replace("_fast_v(", "_v(") for line in lines]
        if self.cg.outline:
            lines = [_CALLS.sub(self._called, line) for line in lines]
        return lines


class CodeGen:
    """Generates the module source for `plan.graph` (see the module docstring)."""

    def __init__(self, plan: Plan, parallel: bool = False, module=None, entry: str = ENTRY):
        self.plan = plan
        self.graph = plan.graph
        self.parallel = parallel
        # the generated module this function is part of: its other functions (the kernels
        # of sub-graphs), the helpers it imports and the raise tags, shared by them all
        self.module = module if module is not None else control.Module()
        self.entry = entry
        self.sub = module is not None  # a sub-graph's kernel, called by the entry
        self.lines: list[str] = []
        self.helpers: dict = self.module.helpers
        self.refs: dict = {}
        self.counter = 0
        self.open_nest: Nest | None = None
        self.const_arrays: list = []  # ndarrays passed as kernel arguments
        self.raises: list = self.module.raises  # tag -> op
        self.kinds: dict = {}  # see fusion.py
        self.regions: dict = {}
        self.locals_loaded: dict = {}
        self.uses_I = False
        self.uses_F = False
        # A loop step's temporaries, allocated once by its caller before the loop (None:
        # allocated where they are written), but those sized by the step's own loops
        self.workspace: list[str] | None = None
        self.loop_classes: set = set()
        self.outline = False  # elementwise nests become functions: see `function`

    # -- names -------------------------------------------------------------------------------

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def tname(self, t) -> str:
        ir = self.plan.ir_names[id(t)][1:]
        return f"t{ir}" if ir.isdigit() else f"t_{ir}"

    def dims(self, t) -> tuple:
        return self.plan.dims(t)

    def int_local(self, fn, prefix: str = "s") -> str:
        """A local holding a new int slot's value (loaded at kernel entry)."""
        slot = self.plan.int_slot(fn)
        name = f"{prefix}{slot}"
        self.locals_loaded[name] = f"I[{slot}]"
        self.uses_I = True
        return name

    def raise_tag(self, op) -> int:
        self.raises.append(op)
        return len(self.raises) - 1

    # -- element access ------------------------------------------------------------------------

    def read(self, t, idx, nest=None):
        """`(expression, deps)` reading array-or-scalar `t` at `idx`."""
        ref = self.refs[id(t)]
        if ref.kind == "scal":
            return ref.name, frozenset()
        dims = self.dims(t)
        if nest is not None and nest.views is not None and t.ndim:
            deps = frozenset().union(*(d for _, d in idx))
            return f"{nest.view(ref.name, dims)}[{', '.join(e for e, _ in idx)}]", deps
        parts, deps = [], frozenset()
        for (e, dep), d in zip(idx, dims, strict=True):
            if d == "1":
                parts.append("0")
            else:
                parts.append(e)
                deps |= dep
        return f"{ref.name}[{', '.join(parts)}]" if parts else f"{ref.name}[()]", deps

    def elem(self, t, idx, nest: Nest):
        """`(expression, deps)` of element `idx` of `t` inside `nest`."""
        key = (id(t), tuple(e for e, _ in idx))
        hit = nest.memo.get(key)
        if hit is not None:
            return hit
        ref = self.refs.get(id(t))
        if ref is not None and ref.kind != "virtual":
            e, deps = self.read(t, idx, nest)
            if id(t) in nest.roots:  # stored in this nest's innermost loop: read after it
                deps = frozenset(range(len(nest.dims)))
            return e, deps
        result = self._virtual(t, idx, nest)
        nest.memo[key] = result
        return result

    def _virtual(self, t, idx, nest: Nest):
        op = t.op
        rec = lowering(op.primitive)
        if rec.element is not None:
            return rec.element(self, op, t, idx, nest)
        if rec.kind == ELEMENTWISE:
            return self._v_elementwise(op, t, idx, nest)
        raise UnsupportedOpError(f"numba backend: no fused code for {op.primitive.name}")

    def _v_elementwise(self, op, t, idx, nest):
        args, deps = [], frozenset()
        for x in op.inputs:
            e, d = self.elem(x, idx, nest)
            args.append(e)
            deps |= d
        var = self.fresh("v")
        rec = lowering(op.primitive)
        guard = rec.guard(args, t.dtype) if rec.guard is not None else None
        if guard is not None:
            tag = self.raise_tag(op)
            nest.stmt(deps, f"if {guard}:\n    raise ValueError({tag})", op)
        expr = scalar_expr(op.primitive, args, [x.dtype for x in op.inputs], t.dtype,
                           op.attrs, self.helpers)
        if rec.fast_trig and nest.dims and not nest.parallel and \
                nest.depth(deps) > nest.inner:
            # the innermost loop first runs with the cheap reduction and counts the arguments
            # it is not right for; a block that has any runs again with the full one (a value
            # hoisted out of the innermost loop takes the full one at once)
            f = rec.vector_math
            fast = f"_{f}_fast_v"
            self.helpers[fast] = None
            expr = expr.replace(f"_{f}_v(", f"{fast}(")
            if nest.trig_flag is None:
                nest.trig_flag = self.fresh("big")
            if rec.sin_cos is not None and expr == f"{fast}({args[0]})":
                other = nest.trig_calls.get(args[0])
                if other is not None and other[0] is not rec:
                    return self._sin_cos(nest, deps, args[0], other[1], var, op)
                nest.trig_calls.setdefault(args[0], (rec, var))
            nest.stmt(deps, f"{var} = {expr}", op)
            if args[0] not in nest.trig_args:  # sin(x) and cos(x): x is counted once
                nest.trig_args.add(args[0])
                self.helpers["_trig_huge"] = None  # one call to type, not three
                nest.stmt(deps, f"{nest.trig_flag} += _trig_huge({args[0]})")
            return var, deps
        nest.stmt(deps, f"{var} = {expr}", op)
        return var, deps

    def _sin_cos(self, nest: Nest, deps, arg: str, first: str, var: str, op):
        """sin(arg) and cos(arg) in one nest: the line `first = _sin_fast_v(arg)` (or cos)
        becomes one call of `_sin_cos_fast_v` (one range reduction, each polynomial once)
        and `var` (the other one) reads its pair; the re-run with the full reduction calls
        `_sin_cos_v`. Returns `(var, deps)`."""
        lines = nest.pre[nest.depth(deps)]
        first_rec = nest.trig_calls[arg][0]
        i = lines.index(f"{first} = _{first_rec.vector_math}_fast_v({arg})")
        pair = self.fresh("v")
        self.helpers["_sin_cos_fast_v"] = self.helpers["_sin_cos_v"] = None
        own = first_rec.sin_cos
        other = 1 - own
        lines[i:i + 1] = [f"{pair} = _sin_cos_fast_v({arg})", f"{first} = {pair}[{own}]"]
        nest.stmt(deps, f"{var} = {pair}[{other}]", op)
        del nest.trig_calls[arg]  # a third sin or cos of arg: evaluated on its own
        return var, deps

    def _v_broadcast_in_dim(self, op, t, idx, nest):
        x = op.inputs[0]
        xdims = self.dims(x)
        mapped = []
        for i, d in enumerate(op.attrs["broadcast_dimensions"]):
            e, dep = idx[d]
            if x.shape[i] == 1:
                mapped.append(("0", frozenset()))
            elif x.shape[i] is None:  # may be 1 at run time: clamp the index
                mapped.append((f"min({e}, {xdims[i]} - 1)", dep))
            else:
                mapped.append((e, dep))
        return self.elem(x, mapped, nest)

    def _v_transpose(self, op, t, idx, nest):
        x = op.inputs[0]
        mapped = [None] * len(idx)
        for i, p in enumerate(op.attrs["permutation"]):
            mapped[p] = idx[i]
        return self.elem(x, mapped, nest)

    def _v_slice(self, op, t, idx, nest):
        x = op.inputs[0]
        tid = id(x)
        mapped = []
        for k, ((e, dep), start, limit, stride) in enumerate(zip(
                idx, op.attrs["start_indices"], op.attrs["limit_indices"],
                op.attrs["strides"], strict=True)):
            if x.shape[k] == 1:
                mapped.append(("0", frozenset()))
                continue
            s = self.int_local(AttrSlot(tid, _slice_start(k, start, limit, stride)), "st")
            if stride == 1:
                mapped.append((f"({s} + {e})", dep))
            else:
                mapped.append((f"({s} + {stride} * {e})", dep))
        return self.elem(x, mapped, nest)

    def _v_rev(self, op, t, idx, nest):
        x = op.inputs[0]
        xd = self.dims(x)
        mapped = list(idx)
        for k in op.attrs["dimensions"]:
            e, dep = idx[k]
            mapped[k] = (f"({xd[k]} - 1 - {e})", dep)
        return self.elem(x, mapped, nest)

    def _v_reshape(self, op, t, idx, nest):
        x = op.inputs[0]
        pairs = squeeze_map(op)
        mapped = [("0", frozenset())] * x.ndim
        for i, j in pairs:
            mapped[i] = idx[j]
        return self.elem(x, mapped, nest)

    def _v_gather(self, op, t, idx, nest):
        x, ind = op.inputs
        ax = op.attrs["axis"]
        r = ind.ndim
        e, dep = self.elem(ind, idx[ax:ax + r], nest)
        n = self.dims(x)[ax]
        var = self.fresh("g")
        tag = self.raise_tag(op)
        nest.stmt(dep, f"{var} = np.int64({e})\nif {var} < 0:\n    {var} += {n}\n"
                       f"if {var} < 0 or {var} >= {n}:\n"
                       f"    raise IndexError({tag}, np.int64({e}), {n})", op)
        mapped = list(idx[:ax]) + [(var, dep)] + list(idx[ax + r:])
        return self.elem(x, mapped, nest)

    def _v_iota(self, op, t, idx, nest):
        e, dep = idx[op.attrs["dimension"]]
        if self.dims(t)[op.attrs["dimension"]] == "1":
            e, dep = "0", frozenset()
        dt = t.dtype
        expr = f"({e} != 0)" if dt == dtypes.bool_ else f"{NB_TYPE[dt]}({e})"
        return expr, dep

    def _v_dim_size(self, op, t, idx, nest):
        x = op.inputs[0]
        return f"np.int64({self.dims(x)[op.attrs['axis']]})", frozenset()

    # -- emission ------------------------------------------------------------------------------

    def emit(self, line: str):
        self.close_nest()
        self.lines.extend(line.split("\n"))

    def comment(self, op):
        self.emit("# " + self.plan.ir_lines[id(op)])

    def close_nest(self):
        nest = self.open_nest
        if nest is not None:
            self.open_nest = None
            if self.outline and nest.size and not (
                    nest.results or nest.block or nest.parallel or any(nest.post)):
                self.lines.extend(self._outlined(nest))
            else:
                self.lines.extend(nest.render())

    def _outlined(self, nest: Nest) -> list[str]:
        """The kernel's lines for elementwise `nest` made a function of the module: its
        buffers are allocated in the kernel and passed in with every other name it reads;
        names are numbered in order of appearance and comments left in the kernel, so
        nests with the same code are one function, compiled once (see `outline`)."""
        lines = nest.render()
        allocs = [line for line in lines if _ALLOC.match(line)]
        comments = [line for line in lines if line.lstrip().startswith("#")]
        body = [line for line in lines if line.strip() and not _ALLOC.match(line)
                and not line.lstrip().startswith("#")]
        defined = set()
        for line in body:
            m = _ASSIGNS.match(line)
            if m is not None:
                defined.add(m.group(1) or m.group(2))
        rename: dict = {}
        params: list = []
        for line in body:
            for name in _NAME.findall(line):
                if name in rename or name in _GLOBALS or name.startswith("_"):
                    continue
                if name in defined:
                    rename[name] = f"l{len(rename) - len(params)}"
                else:
                    rename[name] = f"p{len(params)}"
                    params.append(name)
        code = [_NAME.sub(lambda m: rename.get(m.group(0), m.group(0)), line) for line in body]
        code = "\n".join("    " + line for line in self._width() + code)
        if "_cview(" in code:
            self.module.uses_cview = True
        found = self.module.outlined.get(code)
        if found is None:
            found = self.module.outlined[code] = self.module.name("nest")
            self.module.functions.append(
                f"{DECORATOR})\n"
                f"def {found}({', '.join(f'p{k}' for k in range(len(params)))}):\n"
                f"{code}\n    return None\n")
        return allocs + comments + [f"{found}({', '.join(params)})"]

    def new_nest(self, dims, parallel: bool = False) -> Nest:
        """A nest for a block; the caller renders it with `add_nest` when done."""
        return Nest(self, dims, parallel and self.parallel)

    def add_nest(self, nest: Nest):
        self.close_nest()
        self.lines.extend(nest.render())

    def alloc(self, t, prologue: list | None = None) -> str:
        """The buffer a block or root writes `t` into (an output buffer when it is one)."""
        pos = self.plan.output_positions.get(id(t))
        if pos is not None:
            name = f"out{pos[0]}"
        else:
            name = self.tname(t)
            shape = ", ".join(self.dims(t))
            shape = f"({shape},)" if t.ndim == 1 else f"({shape})"
            line = f"{name} = np.empty({shape}, dtype={NB_TYPE[t.dtype]})"
            if self.workspace is not None and not any(
                    self.plan.dim_class.get((id(t), ax)) in self.loop_classes
                    for ax in range(t.ndim)):
                self.workspace.append(line.split(" = ", 1)[1])
                line = f"{name} = ws{len(self.workspace) - 1}"
            if prologue is not None:
                prologue.append(line)
            else:
                self.emit(line)
        self.refs[id(t)] = Ref("arr", name)
        return name

    def set_scalar(self, t, expr: str, keep_open: bool = False):
        """`t` (rank 0) is held by a new local assigned `expr` at function level (before
        the open nest, which stays open, with `keep_open`)."""
        if not keep_open:
            self.close_nest()
        name = self.tname(t).replace("t", "s", 1)
        self.lines.append(f"{name} = {expr}")
        self.refs[id(t)] = Ref("scal", name)
        if self.plan.is_output(t):
            self.lines.append(f"out{self.plan.output_positions[id(t)][0]}[()] = {name}")

    def nest_scalar(self, nest: Nest, t, expr: str):
        """`t` (rank 0) is held by a new local assigned `expr` after `nest`'s loops."""
        name = self.tname(t).replace("t", "s", 1)
        nest.post[0].append(f"{name} = {expr}")
        self.refs[id(t)] = Ref("scal", name)
        if self.plan.is_output(t):
            nest.post[0].append(f"out{self.plan.output_positions[id(t)][0]}[()] = {name}")

    def const_array(self, value) -> str:
        """The name of a new constant array argument holding `value`."""
        self.const_arrays.append(value)
        return f"c{len(self.const_arrays) - 1}"

    def operand_array(self, t) -> str:
        """An array holding `t` (a rank-0 local is put in a new 0-d array)."""
        ref = self.refs[id(t)]
        if ref.kind == "arr":
            return ref.name
        if ref.kind != "scal":
            raise AssertionError(f"{self.plan.ir_names[id(t)]} is not stored")
        name = self.fresh("z")
        self.emit(f"{name} = np.empty((), dtype={NB_TYPE[t.dtype]})\n{name}[()] = {ref.name}")
        return name

    def array(self, t) -> str:
        ref = self.refs[id(t)]
        if ref.kind != "arr":
            raise AssertionError(f"{self.plan.ir_names[id(t)]} is not an array")
        return ref.name

    def flat_ok(self, t, seen=None) -> bool:
        """Whether `t` reads every array it depends on at its own index (only elementwise
        ops and scalar broadcasts in between): its loops can be collapsed into one."""
        seen = {} if seen is None else seen
        if id(t) in seen:
            return seen[id(t)]
        ref = self.refs.get(id(t))
        ok = True
        if (ref is None or ref.kind == "virtual") and t.op is not None:
            op = t.op
            if lowering(op.primitive).kind == ELEMENTWISE:
                ok = all(self.flat_ok(x, seen) for x in op.inputs)
            else:
                ok = op.primitive is shape_ops.broadcast_in_dim_p and op.inputs[0].ndim == 0
        seen[id(t)] = ok
        return ok

    def loop_nest(self, dims, x, *, groups=None, parallel: bool = False, op=None,
                  at_index: bool = True) -> Nest:
        """The nest that evaluates `x` over `dims` (its own dims; collapsed to `groups` of
        consecutive axes when given): the open nest when it walks the same space, reads
        nothing it produces (`at_index=False`: the caller reads whole rows of array `x`,
        not only the element at the nest's index) and has room; otherwise a new one. The
        nest stays open for siblings until something else is emitted."""
        par = parallel and self.parallel
        key = (tuple(dims), tuple(groups) if groups else None, par)
        region = self.regions.get(id(x), frozenset())
        nest = self.open_nest
        # the ops of `x`'s region the nest already evaluates are shared (`Nest.memo`): only
        # the others count towards its size, and a value whose region is mostly shared
        # joins a nest up to twice the cap (the operands a cut at the cap stores read one
        # long region: in nests of their own, each would evaluate it again)
        if nest is not None:
            new = region - nest.ops
            room = fusion.MAX_FUSED_OPS if 2 * len(new) >= len(region) else \
                2 * fusion.MAX_FUSED_OPS
        if nest is None or nest.key != key or nest.size + len(new) > room or \
                self._conflicts(x, nest, at_index, {}):
            self.close_nest()
            nd = [_product([dims[a] for a in g]) for g in groups] if groups else dims
            nest = self.open_nest = Nest(self, nd, par)
            nest.key = key
            nest.whole_rerun = False
            if groups:
                nest.collapse(list(groups))
            new = region
        nest.size += len(new)
        nest.ops |= new
        if op is not None:
            nest.prologue.append("# " + self.plan.ir_lines[id(op)])
        return nest

    def _root(self, t):
        dims = self.dims(t)
        flat = t.ndim > 1 and self.flat_ok(t)
        nest = self.loop_nest(dims, t, groups=[tuple(range(t.ndim))] if flat else None,
                              parallel=True)
        target = self.alloc(t, nest.prologue)
        self.refs[id(t)] = Ref("virtual")
        e, _ = self.elem(t, nest.index(), nest)
        if flat:
            store = f"{nest.view(target, dims)}[{nest.vars[0]}]"
        else:
            ix = ", ".join("0" if d == "1" else v for v, d in zip(nest.vars, dims))
            store = f"{target}[{ix}]"
        nest.stmt(frozenset(range(len(nest.dims))), f"{store} = {e}")
        nest.roots.add(id(t))
        self.refs[id(t)] = Ref("arr", target)

    def _conflicts(self, t, nest, identity, seen) -> bool:
        """Whether evaluating `t` in `nest` reads one of its reduction results, or one of
        its roots at another index."""
        if id(t) in nest.results:
            return True
        if id(t) in nest.roots:
            return not identity
        key = (id(t), identity)
        if key in seen:
            return seen[key]
        ref = self.refs.get(id(t))
        result = False
        if (ref is None or ref.kind == "virtual") and t.op is not None:  # None: a new root
            same = identity and lowering(t.op.primitive).kind == ELEMENTWISE
            result = any(self._conflicts(x, nest, same, seen) for x in data_inputs(t.op))
        seen[key] = result
        return result

    def _scalar(self, op, t):
        nest = Nest(self, ())
        if op.primitive is constant_p:
            expr = self._const_scalar(op.attrs["value"].value)
            if self.plan.is_output(t):
                self.set_scalar(t, expr)
            else:  # loaded at kernel entry: the open nest stays open for its siblings
                name = self.tname(t).replace("t", "s", 1)
                self.locals_loaded[name] = expr
                self.refs[id(t)] = Ref("scal", name)
            return
        # one that reads nothing the open nest computes is placed before it, which stays
        # open for its siblings (a dim_size between a sum and a gradient of the same array)
        keep_open = self.open_nest is not None and not self._conflicts(
            t, self.open_nest, False, {})
        self.refs[id(t)] = Ref("virtual")
        e, _ = self.elem(t, [], nest)
        if not keep_open:
            self.close_nest()
        self.lines.extend(nest.render())
        self.set_scalar(t, e, keep_open=True)

    def _const_scalar(self, value) -> str:
        which, slot = self.plan.const_slot(value)
        dt = value.dtype
        if which == "F":
            self.uses_F = True
            return typed(f"F[{slot}]", dt) if dt == dtypes.float32 else f"F[{slot}]"
        self.uses_I = True
        if dt == dtypes.bool_:
            return f"(I[{slot}] != 0)"
        return typed(f"I[{slot}]", dt)

    # -- the whole function --------------------------------------------------------------------

    def generate(self) -> str:
        """The module's source: its sub-graph kernels, then the entry function."""
        function = self.function()
        return self._head() + "\n".join(self.module.functions + [function])

    def function(self) -> str:
        """This graph's function (decorator and definition)."""
        plan, graph = self.plan, self.graph
        plan_fusion = fusion.Fusion(plan)
        self.kinds, self.regions = plan_fusion.kinds, plan_fusion.regions
        # a large kernel's elementwise loop nests are functions of the module, the same code
        # compiled once (Numba's compile time per op grows with the function's size, and
        # long chains repeat themselves)
        self.outline = not self.parallel and sum(
            1 for k in self.kinds.values() if k in ("virtual", "root")) > fusion.OUTLINE_OPS
        params = []
        for k, t in enumerate(graph.all_inputs):
            name = f"a{k}"
            params.append(name)
            if t.ndim == 0:
                self.refs[id(t)] = Ref("scal", f"x{k}")
                self.lines.append(f"x{k} = {name}[()]")
            else:
                self.refs[id(t)] = Ref("arr", name)
        for op in plan_fusion.schedule():
            kind = self.kinds[id(op.outputs[0])]
            if kind == "virtual":
                for t in op.outputs:
                    self.refs[id(t)] = Ref("virtual")
            elif kind == "scalar":
                self._scalar(op, op.outputs[0])
            elif kind == "const_array":
                t = op.outputs[0]
                cname = f"c{len(self.const_arrays)}"
                self.const_arrays.append(op.attrs["value"].value)
                self.refs[id(t)] = Ref("arr", cname)
            elif kind == "root":
                self._root(op.outputs[0])
            else:
                rec = lowering(op.primitive)
                emitter = rec.emit
                if emitter is None:
                    raise UnsupportedOpError(
                        f"numba backend: primitive {op.primitive.name!r} has no Numba code "
                        f"(op created at {op.source}); use backend='numpy' for this function"
                    )
                if rec.kind == REDUCTION:
                    per_block = emitter(self, op)
                    if self.open_nest is not None:
                        self.open_nest.results.update(id(t) for t in op.outputs)
                        self.open_nest.whole_rerun |= not per_block
                    continue
                self.close_nest()
                self.comment(op)
                emitter(self, op)
        self.close_nest()
        self._write_outputs()
        n_const = len(self.const_arrays)
        params += [f"c{k}" for k in range(n_const)]
        if self.uses_I or plan.int_slots:
            self.uses_I = True
            params.append("I")
        if self.uses_F:
            params.append("F")
        params += [f"out{k}" for k in range(len(graph.outputs))]
        if self.workspace:
            return self._workspace_function(params) + "\n" + self._function(
                params + [f"ws{k}" for k in range(len(self.workspace))])
        return self._function(params)

    def _write_outputs(self):
        for k, t in enumerate(self.graph.outputs):
            ref = self.refs[id(t)]
            if ref.kind == "scal":
                if self.plan.output_positions[id(t)][0] != k or t.op is None:
                    self.emit(f"out{k}[()] = {ref.name}")
                continue
            if ref.kind == "arr" and ref.name == f"out{k}":
                continue
            nest = Nest(self, self.dims(t))
            e, _ = self.elem(t, nest.index(), nest)
            ix = ", ".join("0" if d == "1" else v for v, d in zip(nest.vars, self.dims(t)))
            nest.stmt(frozenset(range(t.ndim)), f"out{k}[{ix}] = {e}" if ix else
                      f"out{k}[()] = {e}")
            self.lines.append(f"# return {self.plan.ir_names[id(t)]} (copy)")
            self.add_nest(nest)

    def _head(self) -> list[str]:
        head = [
            f"# tracegrad numba kernel for: {self.plan.header}",
            "# One @njit entry function; each IR op's line is a comment above its code."
            if not self.module.functions else
            "# The @njit entry function `kernel`, after the kernels of its sub-graphs (branches"
            "\n# and loops) it calls; each IR op's line is a comment above its code.",
            "import math",
            "",
            "import numpy as np",
            "from numba import njit, prange",
        ]
        names = dict(self.helpers)
        if self.module.uses_cview:
            names["_cview"] = None
        if names:
            head.append(f"from {helpers.MODULE} import {', '.join(sorted(names))}")
        return "\n".join(head) + "\n\n\n"

    def _loads(self) -> list[str]:
        loads = [f"n{c} = {self._class_value(c)}" for c in range(len(self.plan.class_members))]
        return loads + [f"{n} = {src}" for n, src in self.locals_loaded.items()]

    def _workspace_function(self, params) -> str:
        """`{entry}_ws`: the step's temporaries for these arguments, as a tuple."""
        body = self._loads() + [f"return ({', '.join(self.workspace)},)"]
        return "\n".join([f"{DECORATOR})",
                          f"def {self.entry}_ws({', '.join(params)}):",
                          *("    " + line for line in body)]) + "\n"

    def _width(self) -> list[str]:
        """The first line of a function whose loops prefer `backends.vector_width` bits."""
        bits = backends.vector_width
        if bits is None:
            return []
        self.helpers[f"_vector_width_{bits}"] = None
        return [f"_vector_width_{bits}()"]

    def _function(self, params) -> str:
        plan = self.plan
        body = self._width() + self._loads() + self.lines + ["return None"]
        if any("_cview(" in line for line in self.lines):
            self.module.uses_cview = True
        par = ", parallel=True" if self.parallel else ""
        if self.sub:  # a branch or loop step: inlined where it is called (no call per step)
            par += ", forceinline=True"
        src = [f"{DECORATOR}{par})",
               f"def {self.entry}({', '.join(params)}):"]
        if self.sub:
            src.insert(0, f"# {plan.header}")
        src += ["    " + line if line else "" for line in body]
        return "\n".join(src) + "\n"

    def _class_value(self, c: int) -> str:
        """Where dim class `c`'s value comes from: the int vector, or in a sub-graph's
        kernel, the shape of an input it belongs to (its callers' arrays set its sizes)."""
        if self.sub:
            t, ax = self.plan.class_members[c]
            k = self.plan.input_index.get(id(t))
            if k is not None:
                return f"a{k}.shape[{ax}]"
        return f"I[{c}]"


def _product(dims) -> str:
    dims = [d for d in dims if d != "1"]
    if not dims:
        return "1"
    return dims[0] if len(dims) == 1 else "(" + " * ".join(dims) + ")"


def _slice_start(k, start, limit, stride):
    """The slot function for the start index of dim `k` of a slice (unknown dims resolve
    Python slice rules against the run-time size)."""
    def fn(shape):
        return slice(start, limit, stride).indices(shape[k])[0]
    return fn


def _reshape(cg, op):
    """A reshape that is not fused: a view of its operand's array."""
    (x,), t = op.inputs, op.outputs[0]
    shape = ", ".join(cg.dims(t))
    name = cg.fresh("r")
    cg.emit(f"{name} = _cview({cg.array(x)}, ({shape},))")
    cg.refs[id(t)] = Ref("arr", name)


# -- lowering records: index remappings, generators, views ------------------------------------

register(shape_ops.broadcast_in_dim_p, Lowering(
    REMAP, element=CodeGen._v_broadcast_in_dim, dims=dims_broadcast, dim_operands=1))
register(shape_ops.transpose_p, Lowering(
    REMAP, element=CodeGen._v_transpose, dims=dims_transpose))
register(shape_ops.slice_p, Lowering(REMAP, element=CodeGen._v_slice))
register(shape_ops.rev_p, Lowering(REMAP, element=CodeGen._v_rev, dims=dims_same))
register(indexing.gather_p, Lowering(REMAP, element=CodeGen._v_gather, dims=dims_gather))
register(shape_ops.reshape_p, Lowering(
    VIEW, element=CodeGen._v_reshape, emit=_reshape,
    fuses_if=lambda op: squeeze_map(op) is not None, dims=dims_squeeze, needs_array=True))
register(shape_ops.iota_p, Lowering(GENERATOR, element=CodeGen._v_iota, dim_operands=0))
register(shape_ops.dim_size_p, Lowering(GENERATOR, element=CodeGen._v_dim_size))
# a scalar constant is loaded at kernel entry, an array one is an argument (CodeGen.function)
register(constant_p, Lowering(GENERATOR))
