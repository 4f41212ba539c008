"""Generated code as records: statements whose names are slots, and the loop nests that place
them; renaming, re-running and outlining a nest are operations on its records, and text is
produced once, when a line is rendered (docs/numba.md, "Code as records").

A statement's `template` is its text with every name of the generated function written as a
slot, `{v3}` (`slot`): the slots are its names, read with `string.Formatter` (the template
format's own parser, never the generated text), and rendering is `template.format_map` with
a renaming (`Names`). Only names are slots: keywords, literals, attributes and helpers other
than the vector-math ones are plain text, and the generated code has no braces but those of
IR comments, which are `Comment` records and never formatted.
"""

from __future__ import annotations

import string

from tracegrad.backends.numba import helpers

_FORMAT = string.Formatter()
# The generated module's entry function, and every generated function's decorator before
# its options (cache.py rewrites `cache=True`)
ENTRY = "kernel"
DECORATOR = '@njit(cache=True, error_model="numpy", nogil=True'
# The options of a function only other generated functions call: it has no wrapper for
# calls from Python or C (LLVM spent up to 0.7 s on each wrapper of a step with 80 arrays).
CALLED_ONLY = ", no_cpython_wrapper=True, no_cfunc_wrapper=True"

# Loop nests' own names (values, gather indices, loop and block variables): the prefixes
# of `CodeGen.fresh` whose names nothing after their nest reads (renamed in a nest's re-run)
LOOP_LOCAL = frozenset(("v", "g", "i", "kb", "mb", "jb", "nb"))


def direct_args(names) -> str:
    """The argument tuple of a `_direct` call of a function of the module (helpers.py)."""
    names = list(names)
    return f"({', '.join(names)},)" if names else "()"


def slot(name: str) -> str:
    """`name` as a slot of a statement's template."""
    return "{" + name + "}"


def name_of(s: str) -> str:
    """The name of slot `s`."""
    return s[1:-1]


class Names(dict):
    """A renaming of slots (name -> new name); a name it does not hold stays."""

    def __missing__(self, key):
        return key


SAME = Names()


class Stmt:
    """One line of generated code: `template` (names as slots), `names` (its slots in order
    of appearance), `defines` (the names it assigns), `alloc` (it allocates a buffer: kept
    in the kernel when its nest is outlined, not repeated by a re-run)."""

    __slots__ = ("alloc", "defines", "names", "template")

    def __init__(self, template: str, defines=(), alloc: bool = False):
        self.template = template
        self.names = tuple(f for _, f, _, _ in _FORMAT.parse(template) if f is not None)
        self.defines = frozenset(defines)
        self.alloc = alloc

    def text(self, names: Names = SAME) -> str:
        return self.template.format_map(names)


class Comment:
    """A comment line (an IR line): plain text, no names."""

    __slots__ = ("body",)
    names = ()
    defines = frozenset()
    alloc = False

    def __init__(self, body: str):
        self.body = body

    def text(self, names: Names = SAME) -> str:
        return self.body


def stmts(template: str, defines=()) -> list[Stmt]:
    """The records of a statement of one or more lines, each assigning `defines`."""
    return [Stmt(line, defines) for line in template.split("\n")]


def record(x):
    """`x` as a record (a template string is a statement of its own)."""
    return Stmt(x) if isinstance(x, str) else x


def placed(indent: str, x) -> Line:
    """Record (or template, or placed line) `x` placed at `indent`."""
    if isinstance(x, Line):
        return Line(indent + x.indent, x.rec, x.names)
    return Line(indent, record(x))


class Line:
    """A record placed in a rendered nest: its indentation and the renaming it is shown
    with."""

    __slots__ = ("indent", "names", "rec")

    def __init__(self, indent: str, rec, names: Names = SAME):
        self.indent = indent
        self.rec = rec
        self.names = names

    @property
    def shown(self) -> tuple:
        """The names it renders (after its renaming)."""
        return tuple(self.names[n] for n in self.rec.names)

    def text(self, names: Names | None = None) -> str:
        """Its text, its names renamed again by `names` when given."""
        own = self.names
        if names is not None:
            own = Names({n: names[own[n]] for n in self.rec.names})
        return self.indent + self.rec.text(own)


def render(lines: list[Line]) -> list[str]:
    return [line.text() for line in lines]


def full_reduction(names, outline: bool, imported: dict) -> Names:
    """The renaming that makes lines naming `names` call the full sin/cos/tan reduction
    instead of the fast one (`helpers.FULL`) and, in a large kernel (`outline`), the called
    twins of the vector-math helpers (`helpers.CALLED`, recorded in `imported`)."""
    rename = Names()
    for n in names:
        full = helpers.FULL.get(n, n)
        if outline and full in helpers.CALLED:
            full = helpers.CALLED[full]
            imported[full] = None
        if full != n:
            rename[n] = full
    return rename


def outline(lines: list[Line]):
    """A rendered elementwise nest as a function: `(allocations, comments, body, params)`,
    its buffers allocated by the caller and passed in with every other name it reads
    (`params`, in order of appearance); its own names are numbered `l0`..., its parameters
    `p0`..., so nests with the same code have the same body."""
    allocs = [line for line in lines if line.rec.alloc]
    comments = [line for line in lines if isinstance(line.rec, Comment)]
    body = [line for line in lines if isinstance(line.rec, Stmt) and not line.rec.alloc]
    defined = {line.names[n] for line in body for n in line.rec.defines}
    rename, params = Names(), []
    for line in body:
        for name in line.shown:
            if name in rename or name.startswith("_"):
                continue
            if name in defined:
                rename[name] = f"l{len(rename) - len(params)}"
            else:
                rename[name] = f"p{len(params)}"
                params.append(name)
    return allocs, comments, [line.text(rename) for line in body], params


class Ref:
    """How a tensor is held in the generated function (codegen.py): `arr`, `scal` or
    `virtual`, and its name (a slot)."""

    __slots__ = ("kind", "name")

    def __init__(self, kind: str, name: str | None = None):
        self.kind = kind
        self.name = name


class Nest:
    """A loop nest being built: statement records are placed at the depth where their
    indices are bound (so loop-invariant work is hoisted), stores go innermost; `render`
    places them in their loops."""

    def __init__(self, cg, dims, parallel: bool = False):
        self.cg = cg
        self.dims = tuple(dims)
        self.vars = [cg.fresh("i") for _ in dims]
        # records (or templates) at each depth: before the loop of that depth, after it
        self.pre = [[] for _ in range(len(dims) + 1)]
        self.post = [[] for _ in range(len(dims) + 1)]
        self.prologue: list = []
        self.memo: dict = {}
        self.roots: set = set()
        self.parallel = parallel
        self.commented: set = set()
        self.views: dict | None = None  # collapsed nests: array name -> its view
        self.key = None  # the iteration space: see CodeGen.loop_nest
        self.results: set = set()  # ids of reduction results (complete after the loops)
        self.size = 0  # fused ops evaluated in the nest
        self.values = 0  # values it stores or reduces (`fusion.MAX_NEST_VALUES`)
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
        # its value, its statement); the other one of the same a replaces that statement by
        # one of _sin_cos_fast_v (`sin_cos`)
        self.trig_calls: dict = {}
        # the innermost loop in blocks of SUM_BLOCK (see `blocked`): loop variable names, and
        # the statements run after each block
        self.block: tuple | None = None
        self.block_dim = len(self.dims) - 1
        self.block_end: list = []
        # the innermost loop written out this many times (`unroll`)
        self.unrolled: int | None = None
        # arrays read while it is set come from copies laid out for the innermost loop
        # (`contiguous`): set while a short contraction's operand is evaluated
        self.contiguous_reads = False
        # statements run at the start of each block (a parallel nest's per-block scratch and
        # views of its arrays from the block's first element: `block_view`)
        self.block_start: list = []
        self.block_views: dict = {}
        # the outermost loop's body run for this many consecutive indices at once (`_jammed`)
        self.jam = 1
        if self.split_blocks:
            self.blocked(0)

    @property
    def split_blocks(self) -> bool:
        """Whether this parallel nest's threads split its single loop in blocks of
        `helpers.SUM_BLOCK` (a nest of more loops splits its outermost one)."""
        return self.parallel and len(self.dims) == 1 and self.dims[0] != "1"

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
            self.prologue.append(Stmt(f"{count} = ({self.dims[self.block_dim]} + "
                                      f"{helpers.SUM_BLOCK - 1}) // {helpers.SUM_BLOCK}",
                                      (name_of(count),)))
        return self.block

    def block_view(self, name: str) -> str:
        """A view of array `name` (of this split nest's one loop) from the block's first
        element on, read at the index in the block: its loop vectorizes (`name` read at
        the nest's own index, an index whose sign LLVM cannot see, is a scalar loop in a
        parallel loop's body)."""
        found = self.block_views.get(name)
        if found is None:
            self.cg.counter += 1
            raw = f"{name_of(name)}_b{self.cg.counter}"
            found = self.block_views[name] = slot(raw)
            k = self.block[0]
            self.block_start.append(Stmt(f"{found} = {name}[{k} * {helpers.SUM_BLOCK}:]",
                                         (raw,)))
        return found

    def at(self, name: str, dims) -> str:
        """Element `name[own index]` of an array over this nest's `dims` (read through its
        view in a collapsed nest, its block's view in a split one)."""
        if self.views is not None:
            name = self.view(name, dims)
        elif len(dims) != 1 or dims[0] == "1":
            ix = ("0" if d == "1" else v for v, d in zip(self.vars, dims, strict=True))
            return f"{name}[{', '.join(ix)}]"
        if self.split_blocks:
            return f"{self.block_view(name)}[{self.block[3]}]"
        return f"{name}[{self.vars[0]}]"

    def unroll(self, count: int) -> bool:
        """Write the innermost loop out as `count` copies of its body (a short row of known
        length, reduced after it: `copies`); False when the loop already runs in blocks."""
        if self.block is not None or self.unrolled not in (None, count):
            return False
        self.unrolled = count
        return True

    @property
    def loop_inner(self) -> int | None:
        """The innermost loop the nest runs (over a dim of size > 1): the one around the
        innermost dim when that one is written out (`unroll`); None when there is none."""
        last = len(self.dims) - (self.unrolled is not None)
        sized = [k for k in range(last) if self.dims[k] != "1"]
        return sized[-1] if sized else None

    def strided(self, dims, index, first=()) -> tuple[list, bool] | None:
        """How the innermost loop reads an array of `dims` at `index` (`(expr, deps)` per
        axis; `first`: axes not counted): `(walked axes, read again by an outer loop)`
        when it reads with a stride (it walks axes but not the last one), else None."""
        inner = self.loop_inner
        if inner is None or self.views is not None or len(dims) < 2:
            return None
        walked = [a for a in range(len(dims)) if a not in first and dims[a] != "1"
                  and inner in index[a][1]]
        if not walked or len(dims) - 1 in walked:
            return None
        used = frozenset().union(*(index[a][1] for a in range(len(dims)) if a not in first))
        return walked, not all(k in used for k in range(inner + 1) if self.dims[k] != "1")

    def contiguous(self, name: str, dims, index, first=()):
        """`read(index) -> (expr, deps)` reading array `name` (dims `dims`) from a copy made
        before the loops whose last axes are those the innermost loop walks at `index`
        (`first`: axes put first, a written-out contraction's), so that the innermost
        loop reads consecutive elements and vectorizes; None when the array is read that
        way already or is not read again by an outer loop (a copy would be one more pass
        over it)."""
        strided = self.strided(dims, index, first)
        if strided is None or not strided[1]:
            return None
        walked = strided[0]
        perm = [*first, *(a for a in range(len(dims)) if a not in first and a not in walked),
                *walked]
        key = ("contiguous", name, tuple(perm))
        copy = self.memo.get(key)
        if copy is None:
            copy = self.memo[key] = self.cg.fresh("ct")
            # it defines `copy`: an outlined nest makes it a local, not a parameter
            self.prologue.append(Stmt(f"{copy} = np.ascontiguousarray("
                                      f"{self.cg.transposed(name, perm)})", (name_of(copy),)))

        def read(idx):
            parts = ["0" if dims[a] == "1" else idx[a][0] for a in perm]
            deps = frozenset().union(*(idx[a][1] for a in perm if dims[a] != "1"))
            return f"{copy}[{', '.join(parts)}]", deps
        return read

    def copies(self, var: str) -> list[str]:
        """The names of `var` (a slot defined in the innermost loop) in an unrolled loop's
        copies."""
        return [slot(f"{name_of(var)}_{k}") for k in range(self.unrolled)]

    def _unrolled(self, body: list[Line]) -> list[Line]:
        """The innermost loop's `body` written out `unrolled` times: in copy k the loop
        variable is k and each name assigned in the body gets the suffix `_k` but those
        named outside it (accumulators set before the loop keep theirs)."""
        outside = set()
        n_dims = len(self.dims)
        for x in (*self.prologue, *self.block_end, *(r for d in range(n_dims)
                                                      for r in self.pre[d] + self.post[d])):
            line = x if isinstance(x, Line) else Line("", record(x))
            outside.update(line.shown)  # (a template's own defines may be undeclared)
        if self.trig_flag is not None:  # set to 0 before the loops (`render`)
            outside.add(name_of(self.trig_flag))
        own = {line.names[n] for line in body for n in line.rec.defines} - outside
        out = []
        for k in range(self.unrolled):
            names = Names({name_of(self.vars[-1]): str(k)})
            names.update((n, f"{n}_{k}") for n in own)
            out.extend(Line(line.indent, line.rec,
                            Names({n: names[line.names[n]] for n in line.rec.names}))
                       for line in body)
        return out

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
            raw = f"{name_of(name)}_v{len(self.views)}"
            found = self.views[name] = slot(raw)
            shape = [product([dims[a] for a in g]) for g in self.groups]
            view = self.cg.view(name, "(" + ", ".join(shape) + ",)")
            self.prologue.append(Stmt(f"{found} = {view}", (raw,)))
        return found

    def index(self):
        return [(v, frozenset((k,))) for k, v in enumerate(self.vars)]

    @staticmethod
    def depth(deps) -> int:
        return max(deps) + 1 if deps else 0

    def stmt(self, deps, template: str, op=None, defines=()) -> list[Stmt]:
        """Place statement `template` (names as slots; lines assigning `defines`, raw
        names) at the depth of `deps`, after `op`'s IR line the first time; returns its
        records."""
        d = self.depth(deps)
        if op is not None and id(op) not in self.commented:
            self.commented.add(id(op))
            self.pre[d].append(Comment("# " + self.cg.plan.ir_lines[id(op)]))
        recs = stmts(template, defines)
        self.pre[d].extend(recs)
        return recs

    def sin_cos(self, deps, arg: str, second, var: str, op):
        """sin(arg) and cos(arg) in one nest: the statement of the first of them (`first =
        _sin_fast_v(arg)` or cos) is replaced by one call of `_sin_cos_fast_v` (one range
        reduction, each polynomial once) and its pick; `var` (the other one, record
        `second`) picks the other value of the pair. Returns `(var, deps)`."""
        first_rec, first, stmt = self.trig_calls.pop(arg)  # a third one: a call of its own
        cg = self.cg
        pair = cg.fresh("v")
        fast = helpers.FAST["_sin_cos_v"]
        cg.helpers[fast] = cg.helpers["_sin_cos_v"] = None
        records = self.pre[self.depth(deps)]
        k = next(i for i, r in enumerate(records) if r is stmt)
        records[k:k + 1] = [Stmt(f"{pair} = {slot(fast)}({arg})", (name_of(pair),)),
                            Stmt(f"{first} = {pair}[{first_rec.sin_cos}]", (name_of(first),))]
        self.stmt(deps, f"{var} = {pair}[{second.sin_cos}]", op, (name_of(var),))
        return var, deps

    def render(self) -> list[Line]:
        """The nest's lines: its loops with their records placed; with a trig flag, the
        innermost loop's block (or the whole nest) again with the full reduction."""
        redo = self.trig_flag is not None and not self.whole_rerun and (
            self.block is None or self.block_dim == self.inner) and self.unrolled is None
        if redo:
            self.blocked(self.inner)
        flag = self.trig_flag
        out = [placed("", r) for r in self.prologue]
        if flag is not None and not redo:
            out.append(Line("", Stmt(f"{flag} = 0", (name_of(flag),))))

        def level(d, indent):
            lines = [placed(indent, r) for r in self.pre[d]]
            inner = level(d + 1, "") if self.block is not None and d == self.block_dim \
                else None
            if inner is not None and (inner or self.block_end):  # (an empty one is left out)
                k, count, m, j = self.block
                b = helpers.SUM_BLOCK
                first = Line("", Stmt(f"{self.vars[d]} = {k} * {b} + {j}",
                                      (name_of(self.vars[d]),)))
                body = [first] + inner
                lines += _outer_loop(indent, k, count, self.parallel and d == 0)
                lines.append(Line(indent + "    ", Stmt(
                    f"{m} = min({b}, {self.dims[d]} - {k} * {b})", (name_of(m),))))
                lines.extend(placed(indent + "    ", r) for r in self.block_start)
                if redo:
                    lines.append(Line(indent + "    ", Stmt(f"{flag} = 0", (name_of(flag),))))
                lines.append(_loop(indent + "    ", j, m))
                lines.extend(_indented(indent + "        ", body))
                if redo:
                    lines.append(Line(indent + "    ", Stmt(f"if {flag} != 0:")))
                    again = self._redo(body)
                    lines.append(_loop(indent + "        ", j, m, again))
                    lines.extend(_indented(indent + "            ", body, again, flag))
                lines.extend(placed(indent + "    ", r) for r in self.block_end)
            elif d == len(self.dims) - 1 and self.unrolled is not None:
                lines.extend(self._unrolled(level(d + 1, indent)))
            elif d == 0 and self._jams():
                inner = level(1, indent + "    ")
                if inner:
                    lines.extend(self._jammed(indent, inner))
            elif d < len(self.dims) and self.dims[d] == "1":
                # a loop of one iteration is its body, its index 0: a loop costs Numba's
                # frontend a range object and its iteration (95 such in the LSTM l=4
                # gradient, the padded blocks of its weights)
                inner = level(d + 1, indent)
                if inner:
                    lines.append(Line(indent, Stmt(f"{self.vars[d]} = 0",
                                                   (name_of(self.vars[d]),))))
                    lines.extend(inner)
            elif d < len(self.dims):
                inner = level(d + 1, indent + "    ")
                if inner:  # an empty loop is left out
                    lines += _outer_loop(indent, self.vars[d], self.dims[d],
                                         self.parallel and d == 0)
                    lines.extend(inner)
            lines.extend(placed(indent, r) for r in self.post[d])
            return lines

        out.extend(level(0, ""))
        if flag is not None and not redo:
            # the whole nest again with the full reduction: its loop-local names get a suffix
            # and it writes the buffers already allocated
            copy = [line for line in out if name_of(flag) not in line.rec.names
                    and not line.rec.alloc]
            names = {n for line in copy for n in line.rec.names}
            again = self._full(names)
            again.update((n, n + "_f") for n in names if n in self.cg.loop_locals)
            out.append(Line("", Stmt(f"if {flag} != 0:")))
            out.extend(Line("    " + line.indent, line.rec,
                            Names({n: again[line.names[n]] for n in line.rec.names}))
                       for line in copy)
        return out

    def _jams(self) -> bool:
        """Whether the outermost loop is jammed: asked for (`jam`), a serial nest of
        several loops with no blocks, written-out loop or trig flag, whose innermost loop
        stores nothing (every statement there assigns a name: a loop bound by its stores
        gains nothing, and kmeans' gradient nest, storing a row of 1000 and adding to a
        column sum, ran 1.5x slower jammed), and no name set before the loop is assigned
        in it (an accumulator across rows: jammed rows would interleave its updates)."""
        if self.jam < 2 or len(self.dims) < 2 or self.dims[0] == "1" or self.parallel or \
                self.block is not None or self.unrolled is not None or \
                self.trig_flag is not None or any(
                    isinstance(x, Stmt) and not x.defines for x in self.pre[len(self.dims)]):
            return False
        outside = _assigned((*self.prologue, *self.pre[0], *self.post[0]))
        inside = _assigned(x for d in range(1, len(self.dims) + 1)
                           for x in (*self.pre[d], *self.post[d]))
        return not outside & inside

    def _jammed(self, indent: str, body: list[Line]) -> list[Line]:
        """The outermost loop over `body` (its lines, placed) in steps of `jam` indices,
        each statement written once per index, those of index `i + c` with the names
        assigned in the loop suffixed `_c` (the inner loops shared: an operand element
        loaded in the innermost loop serves every row, as a matrix product's register tile
        does), then a loop over the remaining indices."""
        i, n, k = self.vars[0], self.dims[0], self.jam
        loops = {name_of(v) for v in self.vars[1:]}  # the inner loops' lines assign these
        stmts_ = [line for line in body if isinstance(line.rec, Stmt)
                  and not line.rec.defines & loops]
        # the names that differ between rows: the index, and every name a statement reading
        # or assigning one assigns (loads of the other operand are shared)
        own, grown = {name_of(i)}, True
        while grown:
            grown = False
            for line in stmts_:
                defined = {line.names[x] for x in line.rec.defines}
                if not defined <= own and own & (set(line.shown) | defined):
                    own |= defined
                    grown = True
        copies = [Names({x: f"{x}_{c}" for x in own}) for c in range(1, k)]
        out = [Line(indent, Stmt(f"for {i} in range(0, {n} - {n} % {k}, {k}):",
                                 (name_of(i),)))]
        out += [Line(indent + "    ", Stmt(f"{slot(name_of(i) + f'_{c}')} = {i} + {c}",
                                           (f"{name_of(i)}_{c}",))) for c in range(1, k)]
        for line in body:
            out.append(line)
            if line in stmts_ and own & set(line.shown):
                out += [Line(line.indent, line.rec,
                             Names({x: copy[line.names[x]] for x in line.rec.names}))
                        for copy in copies]
        out.append(Line(indent, Stmt(f"for {i} in range({n} - {n} % {k}, {n}):",
                                     (name_of(i),))))
        return out + body

    def _redo(self, body: list[Line]) -> Names:
        """The renaming of the innermost loop's `body` run again for one block with the full
        sin/cos/tan reduction: the names it assigns get a suffix (Numba's SSA pass repairs
        every name assigned twice with a walk over the whole function: quadratic in the
        kernel's size); it counts no arguments (`_indented` leaves out the flag's lines)."""
        own = {name_of(self.block[3])}
        for line in body:
            own |= line.rec.defines
        own.discard(name_of(self.trig_flag))
        names = {n for line in body for n in line.rec.names}
        again = self._full(names)
        again.update((n, n + "_f") for n in own)
        return again

    def _full(self, names) -> Names:
        """The renaming to the full sin/cos/tan reduction; in a large kernel the
        vector-math helpers are called, not inlined (a rare path: LLVM optimizes one copy
        of each)."""
        return full_reduction(names, self.cg.outline, self.cg.helpers)


def _assigned(xs) -> set:
    """The names records, templates or placed lines `xs` assign (as shown)."""
    out = set()
    for x in xs:
        line = placed("", x)
        out.update(line.names[n] for n in line.rec.defines)
    return out


def _loop(indent: str, var: str, count: str, names: Names = SAME) -> Line:
    return Line(indent, Stmt(f"for {var} in range({count}):", (name_of(var),)), names)


def _outer_loop(indent: str, var: str, count: str, parallel: bool) -> list[Line]:
    """The line of a nest's outermost loop, or the lines of a `prange` loop (whose index
    Numba types unsigned: `min(i, n - 1)` of it would be a float) and its index as int64."""
    if not parallel:
        return [_loop(indent, var, count)]
    raw = name_of(var) + "_u"
    return [Line(indent, Stmt(f"for {slot(raw)} in prange({count}):", (raw,))),
            Line(indent + "    ", Stmt(f"{var} = np.int64({slot(raw)})", (name_of(var),)))]


def _indented(indent: str, body: list[Line], names: Names | None = None, skip=None):
    """`body` indented, with renaming `names`, without the lines naming `skip`."""
    return [Line(indent + line.indent, line.rec, line.names if names is None else names)
            for line in body if skip is None or name_of(skip) not in line.rec.names]


def product(dims) -> str:
    dims = [d for d in dims if d != "1"]
    if not dims:
        return "1"
    return dims[0] if len(dims) == 1 else "(" + " * ".join(dims) + ")"
