"""The module driver: a FuncGraph becomes one Python module with one `@njit` entry function.

Its code is built as records (records.py: statements whose names are slots, loop nests) and
rendered once; the index remappings and generators a nest evaluates are in remap.py.

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


from tracegrad import backends
from tracegrad.backends.numba import (
    blocks,
    blocks_linalg,
    blocks_reduce,
    control,
    fusion,
    helpers,
    records,
    remap,
)
from tracegrad.backends.numba.lowering import (
    CHEAP,
    ELEMENTWISE,
    REDUCTION,
    REMAP,
    VIEW,
    lowering,
)
from tracegrad.backends.numba.plan import Plan, data_inputs
from tracegrad.backends.numba.records import (
    CALLED_ONLY,
    DECORATOR,
    ENTRY,
    LOOP_LOCAL,
    Comment,
    Line,
    Nest,
    Ref,
    Stmt,
    direct_args,
    name_of,
    product,
    slot,
    stmts,
)
from tracegrad.backends.numba.scalars import NB_TYPE, scalar_expr, typed
from tracegrad.core import dtypes, shapes
from tracegrad.core.op import constant_p
from tracegrad.errors import UnsupportedOpError
from tracegrad.ops import shape_ops

# each registers the lowering records of its ops
LOWERING_MODULES = (blocks, blocks_linalg, blocks_reduce, control, remap)


# The least size of a temporary the executor keeps between calls (smaller ones come from
# malloc's free lists; larger ones, freed, are returned to the system and faulted in again)
KEEP_MIN_BYTES = 1 << 16


def unsigned(e: str) -> str:
    """Index expression `e` (never negative: an offset into an operand, a loop index) as an
    unsigned one when it computes anything: Numba wraps a signed index that may be
    negative around (a compare and a select per index per read), which kept LLVM from
    vectorizing a loop reading slices at offsets (4.8x slower on rows of 14)."""
    bare = name_of(e) if e.startswith("{") and e.endswith("}") else e  # a slot: one name
    if bare.isidentifier() or not any(c.isalpha() for c in e):
        return e
    return f"np.uint64({e})"


class CodeGen:
    """Generates the module source for `plan.graph` (see the module docstring)."""

    def __init__(self, plan: Plan, parallel: bool = False, module=None, entry: str = ENTRY,
                 constant_starts: bool = False):
        self.plan = plan
        self.graph = plan.graph
        self.parallel = parallel
        # the generated module this function is part of: its other functions (the kernels
        # of sub-graphs), the helpers it imports and the raise tags, shared by them all
        self.module = module if module is not None else control.Module(constant_starts)
        self.entry = entry
        self.sub = module is not None  # a sub-graph's kernel, called by the entry
        self.lines: list = []  # records (`records.Stmt`, `Comment`, `Line`)
        self.helpers: dict = self.module.helpers
        if any(t.dtype == dtypes.float16 for t in plan.tensors):
            self.helpers["_f16"] = None  # float16 results are rounded (helpers.STORAGE)
        self.refs: dict = {}
        self.counter = 0
        self.loop_locals: set = set()  # names of `records.LOOP_LOCAL` kinds
        self.open_nest: Nest | None = None
        self.const_arrays: list = []  # ndarrays passed as kernel arguments
        self.raises: list = self.module.raises  # tag -> op
        self.kinds: dict = {}  # see fusion.py
        self.regions: dict = {}
        self.locals_loaded: dict = {}
        self.uses_I = False
        self.uses_F = False
        # A loop step's temporaries, allocated once by its caller before the loop (None:
        # allocated where they are written), but those sized by the step's own loops; in the
        # entry kernel (`keep_temporaries`), its large temporaries, `kept`, which the
        # executor allocates and keeps between calls
        self.workspace: list[str] | None = None
        self.loop_classes: set = set()
        self.kept: list = []
        self.outline = False  # elementwise nests become functions: see `function`
        # the index a 0-d input array is read at: `()`, or `0` where it comes as a
        # one-element view (the parts of a row-split kernel: rows.py)
        self.scalar_index = "()"
        self.loop = None  # a loop step's function runs the whole loop (control.Loop)

    # -- names -------------------------------------------------------------------------------

    def fresh(self, prefix: str) -> str:
        """A new name (a slot: see records.py)."""
        self.counter += 1
        name = f"{prefix}{self.counter}"
        if prefix in LOOP_LOCAL:
            self.loop_locals.add(name)
        return slot(name)

    def tname(self, t, prefix: str = "t") -> str:
        """The name of tensor `t`'s buffer (`prefix` "s": of its scalar local)."""
        ir = self.plan.ir_names[id(t)][1:]
        return slot(f"{prefix}{ir}" if ir.isdigit() else f"{prefix}_{ir}")

    def dims(self, t) -> tuple:
        return self.plan.dims(t)

    def int_local(self, fn, prefix: str = "s") -> str:
        """A local holding a new int slot's value (loaded at kernel entry)."""
        k = self.plan.int_slot(fn)
        name = slot(f"{prefix}{k}")
        self.locals_loaded[name] = f"{{I}}[{k}]"
        self.uses_I = True
        return name

    def raise_tag(self, op) -> int:
        self.raises.append(op)
        return len(self.raises) - 1

    def tag_arg(self, op) -> str:
        """A new raise tag for `op` as an argument of a helper's call. It is typed int64:
        Numba compiles a called function again for each literal value of an argument, and
        the LSTM l=4 gradient compiled `_index` 62 times, 4 of its 45 seconds."""
        return f"np.int64({self.raise_tag(op)})"

    # A check raises through a helper's call (`_index`, `_value_error`): at a `raise`
    # statement Numba releases every array the function holds, and in a loop step with a
    # dozen gathers those reference-count calls were 3700, which LLVM took 15-30 s to
    # optimize; an error returned by a call leaves the function with no such code. A prange
    # body keeps the statement: Numba's parallel loops do not pass on a callee's error.

    def index_stmt(self, var, e, n, op) -> str:
        """`var = e` as an index into `n` elements (negative from the end); out of range
        raises IndexError naming `op`."""
        if self.parallel:
            tag = self.raise_tag(op)
            return (f"{var} = np.int64({e})\nif {var} < 0:\n    {var} += {n}\n"
                    f"if {var} < 0 or {var} >= {n}:\n"
                    f"    raise IndexError({tag}, np.int64({e}), {n})")
        self.helpers["_index"] = None
        n = f"np.int64({n})" if n.isdigit() else n
        return f"{var} = _index({e}, {n}, {self.tag_arg(op)})"

    def check_stmt(self, guard, op) -> str:
        """Raises ValueError naming `op` where `guard` holds."""
        if self.parallel:
            return f"if {guard}:\n    raise ValueError({self.raise_tag(op)})"
        self.helpers["_value_error"] = None
        return f"if {guard}:\n    _value_error({self.tag_arg(op)})"

    # -- element access ------------------------------------------------------------------------

    def read(self, t, idx, nest=None):
        """`(expression, deps)` reading array-or-scalar `t` at `idx`."""
        ref = self.refs[id(t)]
        if ref.kind == "scal":
            return ref.name, frozenset()
        dims = self.dims(t)
        if nest is not None and nest.contiguous_reads and id(t) not in nest.roots:
            read = nest.contiguous(ref.name, dims, idx)
            if read is not None:
                return read(idx)
        if nest is not None and nest.views is not None and t.ndim:
            deps = frozenset().union(*(d for _, d in idx))
            if nest.split_blocks:
                return nest.at(ref.name, dims), deps
            return f"{nest.view(ref.name, dims)}[{', '.join(e for e, _ in idx)}]", deps
        if nest is not None and nest.split_blocks and len(idx) == 1 and \
                idx[0][0] == nest.vars[0] and dims[0] != "1":
            return nest.at(ref.name, dims), idx[0][1]
        parts, deps = [], frozenset()
        for (e, dep), d in zip(idx, dims, strict=True):
            if d == "1":
                parts.append("0")
            else:
                parts.append(unsigned(e))
                deps |= dep
        return f"{ref.name}[{', '.join(parts)}]" if parts else f"{ref.name}[()]", deps

    def elem(self, t, idx, nest: Nest):
        """`(expression, deps)` of element `idx` of `t` inside `nest`."""
        key = (id(t), tuple(e for e, _ in idx))
        hit = nest.memo.get(key)
        if hit is not None:
            return hit
        ref = self.refs.get(id(t))
        if ref is not None and ref.kind != "virtual" and not self._recomputed(t, ref, idx, nest):
            e, deps = self.read(t, idx, nest)
            if id(t) in nest.roots:  # stored in this nest's innermost loop: read after it
                deps = frozenset(range(len(nest.dims)))
            return e, deps
        result = self._virtual(t, idx, nest)
        nest.memo[key] = result
        return result

    def _recomputed(self, t, ref, idx, nest: Nest) -> bool:
        """Whether stored array `t`, read by a short contraction's operand
        (`Nest.contiguous_reads`) once per element with a stride by the innermost loop, is
        evaluated from its operands instead: one cheap elementwise op of arrays and their
        views (a GMM's `x - mu`, stored for BLAS, read by the forward nest that vectorizes
        over the components)."""
        op = t.op
        if not nest.contiguous_reads or ref.kind != "arr" or op is None or \
                id(t) in nest.roots:
            return False
        rec = lowering(op.primitive)
        if rec.kind != ELEMENTWISE or rec.cost != CHEAP or rec.guard is not None or \
                not all(self._held(x) for x in op.inputs):
            return False
        strided = nest.strided(self.dims(t), idx)
        return strided is not None and not strided[1]

    def _held(self, t) -> bool:
        """Whether `t` is a stored array, a scalar local or a view of those (a broadcast,
        a reshape ...: read, not computed)."""
        ref = self.refs.get(id(t))
        if ref is not None and ref.kind in ("arr", "scal"):
            return True
        op = t.op
        return op is not None and lowering(op.primitive).kind in (VIEW, REMAP) and \
            all(self._held(x) for x in op.inputs)

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
            nest.stmt(deps, self.check_stmt(guard, op), op)
        in_dtypes = [x.dtype for x in op.inputs]
        defines = (name_of(var),)
        if rec.fast_trig and nest.dims and \
                nest.depth(deps) > nest.inner:
            # the innermost loop first runs with the cheap reduction and counts the arguments
            # it is not right for; a block that has any runs again with the full one (a value
            # hoisted out of the innermost loop takes the full one at once)
            expr = scalar_expr(op.primitive, args, in_dtypes, t.dtype, op.attrs,
                               self.helpers, fast=True)
            if nest.trig_flag is None:
                nest.trig_flag = self.fresh("big")
            if rec.sin_cos is not None and in_dtypes[0] == dtypes.float64:  # a call alone
                other = nest.trig_calls.get(args[0])
                if other is not None and other[0] is not rec:
                    return nest.sin_cos(deps, args[0], rec, var, op)
                (stmt,) = nest.stmt(deps, f"{var} = {expr}", op, defines)
                nest.trig_calls.setdefault(args[0], (rec, var, stmt))
            else:
                nest.stmt(deps, f"{var} = {expr}", op, defines)
            if args[0] not in nest.trig_args:  # sin(x) and cos(x): x is counted once
                nest.trig_args.add(args[0])
                self.helpers["_trig_huge"] = None  # one call to type, not three
                flag = nest.trig_flag
                nest.stmt(deps, f"{flag} += _trig_huge({args[0]})", defines=(name_of(flag),))
            return var, deps
        expr = scalar_expr(op.primitive, args, in_dtypes, t.dtype, op.attrs, self.helpers)
        nest.stmt(deps, f"{var} = {expr}", op, defines)
        return var, deps

    # -- emission ------------------------------------------------------------------------------

    def emit(self, template: str):
        """Statement `template` (names as slots: records.py) at function level."""
        self.close_nest()
        self.lines.extend(stmts(template))

    def comment(self, op):
        self.close_nest()
        self.lines.append(Comment("# " + self.plan.ir_lines[id(op)]))

    def close_nest(self):
        nest = self.open_nest
        if nest is not None:
            self.open_nest = None
            if self.outline and nest.size and not (
                    nest.results or nest.block or nest.parallel or any(nest.post)):
                self.lines.extend(self._outlined(nest))
            else:
                self.lines.extend(nest.render())

    def _outlined(self, nest: Nest) -> list:
        """The kernel's records for elementwise `nest` made a function of the module: its
        buffers are allocated in the kernel and passed in with every other name it reads;
        names are numbered in order of appearance and comments left in the kernel, so
        nests with the same code are one function, compiled once (see `outline`)."""
        allocs, comments, body, params = records.outline(nest.render())
        code = "\n".join("    " + line for line in self._width() + body)
        found = self.module.outlined.get(code)
        if found is None:
            found = self.module.outlined[code] = self.module.name("nest")
            self.module.functions.append(
                f"{DECORATOR}{CALLED_ONLY})\n"
                f"def {found}({', '.join(f'p{k}' for k in range(len(params)))}):\n"
                f"{code}\n    return None\n")
        self.helpers["_direct"] = None
        return allocs + comments + [Stmt(f"_direct({found}, {direct_args(map(slot, params))})")]

    def view(self, array: str, shape: str) -> str:
        """The expression of a C-ordered view of `array` with the dims `shape` (a tuple's
        source). Numba's parallel passes do not see that `_cview` aliases its operand (they
        dropped a prange loop storing into such a view as dead), so a parallel kernel
        reshapes instead."""
        if self.parallel:
            return f"{array}.reshape({shape})"
        self.helpers["_cview"] = None
        return f"_cview({array}, {shape})"

    def transposed(self, array: str, axes) -> str:
        """The expression of `np.transpose(array, axes)`, a view (`_tview`; a parallel
        kernel keeps NumPy's, for the reason `view` gives)."""
        order = f"({', '.join(map(str, axes))},)"
        if self.parallel:
            return f"np.transpose({array}, {order})"
        self.helpers["_tview"] = None
        return f"_tview({array}, {order})"

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
            name = slot(f"out{pos[0]}")
        else:
            name = self.tname(t)
            shape = ", ".join(self.dims(t))
            shape = f"({shape},)" if t.ndim == 1 else f"({shape})"
            value = f"np.empty({shape}, dtype={NB_TYPE[t.dtype]})"
            if self.workspace is not None and self._hoisted(t):
                self.workspace.append(value)
                value = slot(f"ws{len(self.workspace) - 1}")
            line = Stmt(f"{name} = {value}", (name_of(name),), alloc=True)
            if prologue is not None:
                prologue.append(line)
            else:
                self.close_nest()
                self.lines.append(line)
        self.refs[id(t)] = Ref("arr", name)
        return name

    def keep_temporaries(self):
        """Make this entry kernel's temporaries of at least `KEEP_MIN_BYTES` (of a graph of
        known shapes) arguments, `self.kept`, for the executor to keep between calls: their
        pages are not freed and faulted in again at every call."""
        self.workspace = []

    def _hoisted(self, t) -> bool:
        if self.sub:
            return not any(self.plan.dim_class.get((id(t), ax)) in self.loop_classes
                           for ax in range(t.ndim))
        return self._keeps(tuple(t.type.shape), t.dtype)

    def _keeps(self, shape: tuple, dtype) -> bool:
        """Whether the entry kernel takes a temporary of `shape` from the executor (then
        it is the next `ws` argument)."""
        if self.sub or self.workspace is None:
            return False
        storage = helpers.STORAGE[dtype]
        n = shapes.size(shape)
        if n is None or n * storage.itemsize < KEEP_MIN_BYTES:
            return False
        self.kept.append((shape, storage))
        return True

    def kept_or(self, shape: tuple, dtype, value: str) -> str:
        """`value` (an allocation of `shape`), or, in an entry kernel that keeps its large
        temporaries, the `ws` argument the executor passes in its place."""
        if not self._keeps(shape, dtype):
            return value
        self.workspace.append("")
        return slot(f"ws{len(self.workspace) - 1}")

    def scratch(self, name: str, size: str, elements: int | None, dtype) -> str:
        """The statement giving `name` a 1-d scratch array of `size` elements (`elements`
        when known at compile time) of `dtype`: in a loop step, a fixed-size one comes from
        the workspace its caller allocates once (not at every step); in an entry kernel, a
        large one is kept by the executor between calls."""
        value = f"np.empty({size}, dtype={NB_TYPE[dtype]})"
        if elements is None or self.workspace is None:
            return f"{name} = {value}"
        if not self.sub:
            return f"{name} = {self.kept_or((elements,), dtype, value)}"
        self.workspace.append(f"np.empty({elements}, dtype={NB_TYPE[dtype]})")
        return f"{name} = {slot(f'ws{len(self.workspace) - 1}')}"

    def set_scalar(self, t, expr: str, keep_open: bool = False):
        """`t` (rank 0) is held by a new local assigned `expr` at function level (before
        the open nest, which stays open, with `keep_open`)."""
        if not keep_open:
            self.close_nest()
        name = self.tname(t, "s")
        self.lines.append(Stmt(f"{name} = {expr}", (name_of(name),)))
        self.refs[id(t)] = Ref("scal", name)
        if self.plan.is_output(t):
            self.lines.append(Stmt(f"{self._out(t)}[()] = {name}"))

    def nest_scalar(self, nest: Nest, t, expr: str):
        """`t` (rank 0) is held by a new local assigned `expr` after `nest`'s loops."""
        name = self.tname(t, "s")
        nest.post[0].append(Stmt(f"{name} = {expr}", (name_of(name),)))
        self.refs[id(t)] = Ref("scal", name)
        if self.plan.is_output(t):
            nest.post[0].append(Stmt(f"{self._out(t)}[()] = {name}"))

    def _out(self, t) -> str:
        """The output buffer of graph output `t` (its first position)."""
        return slot(f"out{self.plan.output_positions[id(t)][0]}")

    def const_array(self, value) -> str:
        """The name of a new constant array argument holding `value`."""
        self.const_arrays.append(value.astype(helpers.STORAGE[value.dtype], copy=False))
        return slot(f"c{len(self.const_arrays) - 1}")

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
        not only the element at the nest's index) and has room (`fusion.MAX_FUSED_OPS`
        ops, `fusion.MAX_NEST_VALUES` values); otherwise a new one. The nest stays open for
        siblings until something else is emitted."""
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
                nest.values >= fusion.MAX_NEST_VALUES or \
                self._conflicts(x, nest, at_index, {}):
            self.close_nest()
            nd = [product([dims[a] for a in g]) for g in groups] if groups else dims
            nest = self.open_nest = Nest(self, nd, par)
            nest.key = key
            nest.whole_rerun = False
            if groups:
                nest.collapse(list(groups))
            new = region
        nest.size += len(new)
        nest.values += 1
        nest.ops |= new
        if op is not None:
            nest.prologue.append(Comment("# " + self.plan.ir_lines[id(op)]))
        return nest

    def _root(self, t):
        dims = self.dims(t)
        flat = t.ndim > 1 and self.flat_ok(t)
        nest = self.loop_nest(dims, t, groups=[tuple(range(t.ndim))] if flat else None,
                              parallel=True)
        target = self.alloc(t, nest.prologue)
        self.refs[id(t)] = Ref("virtual")
        e, _ = self.elem(t, nest.index(), nest)
        store = nest.at(target, dims)
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
                name = self.tname(t, "s")
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
        which, k = self.plan.const_slot(value)
        dt = value.dtype
        if which == "F":
            self.uses_F = True
            # a float16 constant is a float32 value (exact: helpers.STORAGE)
            return f"{{F}}[{k}]" if dt == dtypes.float64 else f"{NB_TYPE[dt]}({{F}}[{k}])"
        if which == "C":
            self.uses_F = True
            return f"{NB_TYPE[dt]}(complex({{F}}[{k}], {{F}}[{k + 1}]))"
        self.uses_I = True
        if dt == dtypes.bool_:
            return f"({{I}}[{k}] != 0)"
        return typed(f"{{I}}[{k}]", dt)

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
                self.refs[id(t)] = Ref("scal", slot(f"x{k}"))
                self.lines.append(Stmt(f"{{x{k}}} = {{{name}}}[{self.scalar_index}]",
                                       (f"x{k}",)))
            else:
                self.refs[id(t)] = Ref("arr", slot(name))
        for op in plan_fusion.schedule():
            kind = self.kinds[id(op.outputs[0])]
            if kind == "virtual":
                for t in op.outputs:
                    self.refs[id(t)] = Ref("virtual")
            elif kind == "scalar":
                self._scalar(op, op.outputs[0])
            elif kind == "const_array":
                t = op.outputs[0]
                self.refs[id(t)] = Ref("arr", self.const_array(op.attrs["value"].value))
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
        self.params = list(params)
        if self.workspace:
            ws = [f"ws{k}" for k in range(len(self.workspace))]
            if not self.sub:  # allocated by the executor
                return self._function(params + ws)
            return self._workspace_function(params) + "\n" + self._function(params + ws)
        return self._function(params)

    def _write_outputs(self):
        for k, t in enumerate(self.graph.outputs):
            ref = self.refs[id(t)]
            if ref.kind == "scal":
                if self.plan.output_positions[id(t)][0] != k or t.op is None:
                    self.emit(f"{{out{k}}}[()] = {ref.name}")
                continue
            if ref.kind == "arr" and ref.name == slot(f"out{k}"):
                continue
            nest = Nest(self, self.dims(t))
            e, _ = self.elem(t, nest.index(), nest)
            ix = ", ".join("0" if d == "1" else v for v, d in zip(nest.vars, self.dims(t)))
            nest.stmt(frozenset(range(t.ndim)), f"{{out{k}}}[{ix or '()'}] = {e}")
            self.lines.append(Comment(f"# return {self.plan.ir_names[id(t)]} (copy)"))
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
        if self.helpers:
            head.append(f"from {helpers.MODULE} import {', '.join(sorted(self.helpers))}")
        return "\n".join(head) + "\n\n\n"

    def _loads(self) -> list[Stmt]:
        loads = [(slot(f"n{c}"), self._class_value(c))
                 for c in range(len(self.plan.class_members))]
        return [Stmt(f"{n} = {src}", (name_of(n),))
                for n, src in loads + list(self.locals_loaded.items())]

    def _workspace_function(self, params) -> str:
        """`{entry}_ws`: the step's temporaries for these arguments, as a tuple (loading
        only the sizes they take: each load is code for Numba to compile)."""
        ret = Stmt(f"return ({', '.join(self.workspace)},)")
        body = [s for s in self._loads() if s.defines & set(ret.names)] + [ret]
        return "\n".join([f"{DECORATOR}{CALLED_ONLY})",
                          f"def {self.entry}_ws({', '.join(params)}):",
                          *("    " + line.text() for line in body)]) + "\n"

    def _width(self) -> list[str]:
        """The first line of a function whose loops prefer `backends.vector_width` bits."""
        bits = backends.vector_width
        if bits is None:
            return []
        self.helpers[f"_vector_width_{bits}"] = None
        return [f"_vector_width_{bits}()"]  # no names: its own text

    def _function(self, params) -> str:
        plan = self.plan
        lines = [line.text() for line in self.lines]
        if self.loop is not None:  # the whole loop: called once (control.Loop)
            params = params + self.loop.params
            body = self.loop.lines(lines, self.helpers)
        else:
            body = lines + ["return None"]
        # the sizes and scalars the function reads (a load nothing reads is still code for
        # Numba to compile: a loop's condition read 1 of its 47; the loop's own lines read
        # none of them)
        read = {n for line in self.lines
                for n in (line.shown if isinstance(line, Line) else line.names)}
        body = self._width() + [line.text() for line in self._loads()
                                if line.defines & read] + body
        par = ", parallel=True" if self.parallel else ""
        if self.sub and self.loop is None:  # a branch: inlined where it is called
            par += ", forceinline=True"
        if self.sub:
            par += CALLED_ONLY
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
                return f"{{a{k}}}.shape[{ax}]"
        return f"{{I}}[{c}]"
