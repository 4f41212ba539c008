"""Functions of a generated module compiled to LLVM IR directly, without Numba's passes.

The functions a kernel calls by `_direct` and `_direct_step` (helpers.py), its outlined loop
nests and loop steps, are scalar code in loops over array elements. Numba spends 10-25 ms
of CPU per such line on typing, its own IR and lowering before LLVM sees it; this module
translates the function's Python text to LLVM IR in one walk, typed from its arguments'
Numba types, and hands the IR to Numba's code library (the same optimization pipeline,
target and machine-code format). Anything outside the subset it knows raises
`Unsupported`, and Numba compiles the function as before.

The subset: assignments to locals and to array elements, `for ... in range(...)`, `while`,
`if`, `break`, `continue`; arithmetic and comparisons of int, float and bool scalars (the
types Numba's typing gives them; its wraparound of negative indices); `np.<scalar
type>(x)` casts, `abs`, `min` and `max` of ints; `x.shape[k]`; element reads and writes,
rows `a[i]` and `_cview` reshapes as views; `_crow` and `_ccopy` copies; `_index` (the
bounds check); calls of the helper module's functions on scalars and arrays (their Numba
machine code is linked in, and LLVM inlines the small ones); `_direct` calls of functions
translated too. A function returns nothing (a nest), or some of its array arguments and
then an int (a loop step: its carries and iteration count).

A translated function's ABI is `i32 fn(ptr err, ptr ret, <the arguments as Numba passes
them>)`. It returns 0 on success, with a step's count in `*ret`; `INDEX_ERROR` after a failed
`_index`, with `err[0:3]` its tag, index and size; `NUMBA_ERROR` when a Numba helper it
called failed, with `err[0:2]` Numba's status code and exception-info pointer.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import operator
import os
import sys
import textwrap

INDEX_ERROR = 1
NUMBA_ERROR = 2
MEMORY_ERROR = 3


class Unsupported(Exception):
    """The function uses something this translator does not know (Numba compiles it)."""


_LL = {"float64": "double", "float32": "float", "int64": "i64", "int32": "i32",
       "int16": "i16", "int8": "i8", "uint64": "i64", "uint32": "i32", "uint16": "i16",
       "uint8": "i8", "bool": "i1"}
_SIZE = {"float64": 8, "float32": 4, "int64": 8, "int32": 4, "int16": 2, "int8": 1,
         "uint64": 8, "uint32": 4, "uint16": 2, "uint8": 1, "bool": 1}
_BITS = {n: 1 if n == "bool" else 8 * k for n, k in _SIZE.items()}
_CASTS = set(_SIZE) - {"bool"} | {"intp", "bool_"}  # `np.<name>(x)`
_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.Div: operator.truediv, ast.BitAnd: operator.and_, ast.BitOr: operator.or_,
           ast.BitXor: operator.xor, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
           ast.LShift: operator.lshift, ast.RShift: operator.rshift}
_CMPOPS = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt,
           ast.GtE: operator.ge, ast.Eq: operator.eq, ast.NotEq: operator.ne}
_FCMP = {operator.lt: "olt", operator.le: "ole", operator.gt: "ogt", operator.ge: "oge",
         operator.eq: "oeq", operator.ne: "une"}
_ICMP = {operator.lt: "lt", operator.le: "le", operator.gt: "gt", operator.ge: "ge"}
_FLOAT_OPS = {operator.add: "fadd", operator.sub: "fsub", operator.mul: "fmul"}
_INT_OPS = {operator.add: "add", operator.sub: "sub", operator.mul: "mul",
            operator.and_: "and", operator.or_: "or", operator.xor: "xor",
            operator.lshift: "shl"}
_ARRAY = "array"
_TUPLE = "tuple"  # of scalars and arrays: a list of (value, type)
_FLOAT_CONSTANTS = {"inf": float("inf"), "nan": float("nan"), "pi": 3.141592653589793,
                    "e": 2.718281828459045}


def _name(t) -> str:
    """The key of a Numba scalar type in the tables above."""
    n = str(t)
    if n not in _LL:
        raise Unsupported(f"type {t}")
    return n


def _nbtype(n: str):
    from numba.core import types

    return types.boolean if n == "bool" else getattr(types, n)


def _is_float(n):
    return n.startswith("float")


def _is_signed(n):
    return n.startswith("int")


def _scalar(t: str) -> str:
    if t not in _LL:
        raise Unsupported("an array where a scalar goes")
    return t


class _Array:
    """An array value: LLVM values of its fields, and its Numba type."""

    __slots__ = ("meminfo", "parent", "nitems", "data", "shape", "strides", "nbtype")

    def __init__(self, meminfo, parent, nitems, data, shape, strides, nbtype):
        self.meminfo, self.parent, self.nitems, self.data = meminfo, parent, nitems, data
        self.shape, self.strides, self.nbtype = shape, strides, nbtype

    @property
    def dtype(self) -> str:
        return _name(self.nbtype.dtype)

    @property
    def contiguous(self) -> bool:
        return self.nbtype.layout == "C"

    def flat(self) -> list[str]:
        """The arguments Numba passes for it."""
        return ([f"ptr {self.meminfo}", f"ptr {self.parent}", f"i64 {self.nitems}",
                 f"i64 {_SIZE[self.dtype]}", f"ptr {self.data}"]
                + [f"i64 {v}" for v in self.shape] + [f"i64 {v}" for v in self.strides])


class _Fn:
    """The translation of one function."""

    def __init__(self, typing, names: dict, symbol_of, helper: bool = False):
        self.helper = helper  # a helper module's scalar function: returns its value
        self.typing = typing  # Numba's typing context
        self.names = names  # the module's globals
        self.symbol_of = symbol_of  # (dispatcher, argtys) -> symbol of a `_direct` callee
        self.body: list[str] = []
        self.allocas: list[str] = []
        self.n = 0
        self.vars: dict = {}  # local name -> (alloca, type name)
        self.arrays: dict = {}  # name -> _Array
        self.params: list = []  # argument names, in order
        self.loops: list = []  # (continue label, break label)
        self.decls: dict = {}  # symbol -> declaration
        self.libraries: list = []
        self.callees: list = []  # (name, argtys, symbol) of the functions called by `_direct`
        self.returns = False  # None: returns nothing; a list: the argument indices returned
        # (of a helper: the types it returns)
        self.defs: dict = {}  # symbol -> definition of the helpers translated with it
        self.freed: list = []  # slots of the buffers allocated here, freed at the exit
        self.exits: list = []  # (code, block) of the returns, which branch to the exit
        self.inits: list = []  # stores at entry, after the allocas
        self.counters: set = set()  # (scope, name) of int variables never negative
        self.stores: dict = {}  # name -> how many statements of the function assign it
        self.branches = 0  # depth of `if` statements around what is translated now
        self.scope = 0  # of the function inlined now (0: the function itself)
        self.scopes = 0
        self.module = None  # the name of the module of the function translated
        self.inline = None  # of the function inlined now: where its returns go
        self.terminated = False
        self.metadata: list = []  # module-level metadata nodes after the fixed ones (!0-!2)

    # -- emission ------------------------------------------------------------------------
    def tmp(self) -> str:
        self.n += 1
        return f"%t{self.n}"

    def label(self) -> str:
        self.n += 1
        return f"L{self.n}"

    def emit(self, line: str) -> None:
        if not self.terminated:
            self.body.append("  " + line)

    def op(self, text: str) -> str:
        t = self.tmp()
        self.emit(f"{t} = {text}")
        return t

    def alloca(self, ty: str) -> str:
        t = self.tmp()
        self.allocas.append(f"{t} = alloca {ty}")
        return t

    def ret(self, value: str) -> None:
        """Return `value` (`i32 <code>`) by the function's one exit, which frees the buffers
        allocated here (each return freeing them would repeat those calls at every error
        check)."""
        if not self.terminated:
            self.exits.append((value.split(" ", 1)[1], self.current()))
        self.branch("exit")

    def exit_block(self) -> list[str]:
        """The function's exit: the buffers allocated freed (a slot not reached holds null),
        then the code of the return that came here."""
        if not self.exits:
            return []
        lines = ["exit:"]
        if len(self.exits) == 1:
            code = self.exits[0][0]
        else:
            code = "%rc"
            lines.append("  %rc = phi i32 " + ", ".join(f"[ {v}, %{b} ]" for v, b in self.exits))
        for k, slot in enumerate(self.freed):
            lines += [f"  %fp{k} = load ptr, ptr {slot}", f"  call void @free(ptr %fp{k})"]
        return lines + [f"  ret i32 {code}"]

    def branch(self, target: str) -> None:
        self.emit(f"br label %{target}")
        self.terminated = True

    def cbranch(self, cond: str, yes: str, no: str) -> None:
        self.emit(f"br i1 {cond}, label %{yes}, label %{no}")
        self.terminated = True

    def start(self, label: str) -> None:
        if not self.terminated:
            self.branch(label)
        self.body.append(f"{label}:")
        self.terminated = False

    def current(self) -> str:
        for line in reversed(self.body):
            if not line.startswith("  "):
                return line[:-1]
        return "entry"

    def fail_if(self, bad: str) -> str:
        """Start a block taken when `bad`; the caller fills it, then calls `resume`."""
        fail, ok = self.label(), self.label()
        self.emit(f"br i1 {bad}, label %{fail}, label %{ok}, !prof !0")
        self.terminated = True
        self.start(fail)
        return ok

    def resume(self, ok: str) -> None:
        self.terminated = True
        self.start(ok)

    # -- values --------------------------------------------------------------------------
    def cast(self, v: str, src: str, dst: str) -> str:
        src, dst = _scalar(src), _scalar(dst)
        if src == dst:
            return v
        if dst == "bool":
            if _is_float(src):
                return self.op(f"fcmp une {_LL[src]} {v}, 0.0")
            return self.op(f"icmp ne {_LL[src]} {v}, 0")
        if _is_float(dst):
            if _is_float(src):
                kind = "fpext" if _LL[dst] == "double" else "fptrunc"
            else:
                kind = "sitofp" if _is_signed(src) else "uitofp"
            return self.op(f"{kind} {_LL[src]} {v} to {_LL[dst]}")
        if _is_float(src):
            kind = "fptosi" if _is_signed(dst) else "fptoui"
            return self.op(f"{kind} {_LL[src]} {v} to {_LL[dst]}")
        a, b = _BITS[src], _BITS[dst]
        if a == b:
            return v
        if a > b:
            return self.op(f"trunc {_LL[src]} {v} to {_LL[dst]}")
        kind = "sext" if _is_signed(src) else "zext"
        return self.op(f"{kind} {_LL[src]} {v} to {_LL[dst]}")

    def resolve(self, fn, types_):
        """`(argument types, result type)` of Numba's typing of `fn` on `types_`."""
        key = (fn, tuple(types_))
        found = _RESOLVED.get(key)
        if found is None:
            found = _RESOLVED[key] = self._resolve(fn, types_)
        if isinstance(found, Unsupported):
            raise found
        return found

    def _resolve(self, fn, types_):
        try:
            sig = self.typing.resolve_function_type(fn, tuple(_nbtype(_scalar(t))
                                                              for t in types_), {})
        except Unsupported as e:
            return e
        except Exception:  # noqa: BLE001 - Numba's typing errors vary
            return Unsupported(f"{fn} on {types_}")
        if sig is None:
            return Unsupported(f"{fn} on {types_}")
        try:
            return [_name(a) for a in sig.args], _name(sig.return_type)
        except Unsupported as e:
            return e

    def scalar(self, e) -> tuple[str, str]:
        v, t = self.expr(e)
        return v, _scalar(t)

    # -- expressions ---------------------------------------------------------------------
    def expr(self, e):
        m = _EXPRS.get(type(e))
        if m is None:
            raise Unsupported(type(e).__name__)
        return m(self, e)

    def e_Constant(self, e):
        v = e.value
        if isinstance(v, bool):
            return ("true" if v else "false"), "bool"
        if isinstance(v, int):
            if not -2**63 <= v < 2**63:
                raise Unsupported("int constant")
            return str(v), "int64"
        if isinstance(v, float):
            import struct

            return "0x%016X" % struct.unpack("<Q", struct.pack("<d", v))[0], "float64"
        raise Unsupported(f"constant {v!r}")

    def e_Name(self, e):
        if e.id in self.arrays:
            return self.arrays[e.id], _ARRAY
        found = self.vars.get(e.id)
        if found is None:
            value = self.names.get(e.id)  # a constant of the module
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return self.e_Constant(ast.Constant(value=value))
            raise Unsupported(f"name {e.id}")
        ptr, t = found
        return self.op(f"load {_LL[t]}, ptr {ptr}"), t

    def e_Attribute(self, e):
        if isinstance(e.value, ast.Name) and e.value.id in ("np", "math") \
                and e.attr in _FLOAT_CONSTANTS:
            return self.e_Constant(ast.Constant(value=_FLOAT_CONSTANTS[e.attr]))
        raise Unsupported("attribute")

    def e_Tuple(self, e):
        items = [self.expr(x) for x in e.elts]
        if any(t not in _LL and t != _ARRAY for _, t in items):
            raise Unsupported("a tuple of these")
        return items, _TUPLE

    def e_UnaryOp(self, e):
        c = _constant_int(e)
        if c is not None and isinstance(e.op, ast.USub) and -2**63 <= c < 0:
            return str(c), "int64"
        v, t = self.scalar(e.operand)
        if isinstance(e.op, ast.UAdd):
            return v, t
        if isinstance(e.op, ast.Not):
            return self.op(f"xor i1 {self.cast(v, t, 'bool')}, true"), "bool"
        if isinstance(e.op, ast.USub):
            args, r = self.resolve(operator.neg, (t,))
            v = self.cast(self.cast(v, t, args[0]), args[0], r)
            if _is_float(r):
                return self.op(f"fneg {_LL[r]} {v}"), r
            return self.op(f"sub {_LL[r]} 0, {v}"), r
        raise Unsupported(type(e.op).__name__)

    def e_BinOp(self, e):
        fn = _BINOPS.get(type(e.op))
        if fn is None:
            raise Unsupported(type(e.op).__name__)
        a, ta = self.scalar(e.left)
        b, tb = self.scalar(e.right)
        args, r = self.resolve(fn, (ta, tb))
        if fn is operator.truediv:
            if not _is_float(r):
                raise Unsupported("truediv")
            a, b = self.cast(a, ta, r), self.cast(b, tb, r)
            return self.op(f"fdiv {_LL[r]} {a}, {b}"), r
        if fn in (operator.floordiv, operator.mod):
            return self.divide(fn, e.right, a, ta, b, tb, args, r)
        a = self.cast(self.cast(a, ta, args[0]), args[0], r)
        b = self.cast(self.cast(b, tb, args[1]), args[1], r)
        if _is_float(r):
            name = _FLOAT_OPS.get(fn)
        elif r == "bool":
            name = _INT_OPS[fn] if fn in (operator.and_, operator.or_, operator.xor) else None
        elif fn is operator.rshift:
            name = "ashr" if _is_signed(r) else "lshr"
        else:
            name = _INT_OPS[fn]
        if name is None:
            raise Unsupported(f"{fn.__name__} on {r}")
        return self.op(f"{name} {_LL[r]} {a}, {b}"), r

    def divide(self, fn, right, a, ta, b, tb, args, r):
        # Python's floor division and modulo of signed ints, by a positive constant only
        c = self.constant(right)
        if r != "int64" or args != ["int64", "int64"] or c is None or c <= 0:
            raise Unsupported(f"{fn.__name__} on {ta}, {tb}")
        a, b = self.cast(a, ta, "int64"), self.cast(b, tb, "int64")
        q = self.op(f"sdiv i64 {a}, {b}")
        rem = self.op(f"srem i64 {a}, {b}")
        below = self.op(f"icmp slt i64 {rem}, 0")
        if fn is operator.floordiv:
            return self.op(f"sub i64 {q}, {self.op(f'zext i1 {below} to i64')}"), r
        return self.op(f"select i1 {below}, i64 {self.op(f'add i64 {rem}, {b}')}, "
                       f"i64 {rem}"), r

    def e_Compare(self, e):
        if len(e.ops) != 1:
            raise Unsupported("chained comparison")
        fn = _CMPOPS.get(type(e.ops[0]))
        if fn is None:
            raise Unsupported(type(e.ops[0]).__name__)
        a, ta = self.scalar(e.left)
        b, tb = self.scalar(e.comparators[0])
        return self.compare(fn, a, ta, b, tb), "bool"

    def compare(self, fn, a, ta, b, tb) -> str:
        args, r = self.resolve(fn, (ta, tb))
        t = args[0]
        if args[1] != t or r != "bool":
            raise Unsupported(f"{fn.__name__} on {ta}, {tb}")
        a, b = self.cast(a, ta, t), self.cast(b, tb, t)
        if _is_float(t):
            return self.op(f"fcmp {_FCMP[fn]} {_LL[t]} {a}, {b}")
        if fn in (operator.eq, operator.ne):
            cond = "eq" if fn is operator.eq else "ne"
        else:
            cond = ("s" if _is_signed(t) else "u") + _ICMP[fn]
        return self.op(f"icmp {cond} {_LL[t]} {a}, {b}")

    def e_IfExp(self, e):
        c, tc = self.scalar(e.test)
        ly, ln, end = self.label(), self.label(), self.label()
        self.cbranch(self.cast(c, tc, "bool"), ly, ln)
        self.start(ly)
        vy, ty = self.scalar(e.body)
        from_y = self.current()
        self.branch(end)
        self.start(ln)
        vn, tn = self.scalar(e.orelse)
        from_n = self.current()
        if ty != tn:
            raise Unsupported("branches of different types")
        self.branch(end)
        self.start(end)
        return self.op(f"phi {_LL[ty]} [{vy}, %{from_y}], [{vn}, %{from_n}]"), ty

    def e_BoolOp(self, e):
        v, t = self.scalar(e.values[0])
        if t != "bool":
            raise Unsupported("and/or of non-bools")
        for x in e.values[1:]:
            ly, end = self.label(), self.label()
            first = self.current()
            if isinstance(e.op, ast.And):
                self.cbranch(v, ly, end)
            else:
                self.cbranch(v, end, ly)
            self.start(ly)
            w, tw = self.scalar(x)
            if tw != "bool":
                raise Unsupported("and/or of non-bools")
            second = self.current()
            self.branch(end)
            self.start(end)
            const = "false" if isinstance(e.op, ast.And) else "true"
            v = self.op(f"phi i1 [{const}, %{first}], [{w}, %{second}]")
        return v, "bool"

    def e_Subscript(self, e):
        v = e.value
        if isinstance(v, ast.Attribute) and v.attr == "shape":
            arr, t = self.expr(v.value)
            k = e.slice
            if t != _ARRAY or not isinstance(k, ast.Constant) or isinstance(k.value, bool) \
                    or not isinstance(k.value, int) or not 0 <= k.value < len(arr.shape):
                raise Unsupported("shape")
            return arr.shape[k.value], "int64"
        arr, t = self.expr(v)
        if t != _ARRAY:
            raise Unsupported("subscript of a scalar")
        s = e.slice
        if isinstance(s, ast.Slice):
            return self.slice(arr, s), _ARRAY
        items = s.elts if isinstance(s, ast.Tuple) else [s]
        if any(isinstance(x, ast.Slice) for x in items) or len(items) > len(arr.shape):
            raise Unsupported("slice")
        idx = [self.index(x, n) for x, n in zip(items, arr.shape)]
        if len(idx) < len(arr.shape):
            return self.row(arr, idx), _ARRAY
        ptr = self.address(arr, idx)
        if arr.dtype == "bool":
            return self.op(f"trunc i8 {self.op(f'load i8, ptr {ptr}')} to i1"), "bool"
        return self.op(f"load {_LL[arr.dtype]}, ptr {ptr}"), arr.dtype

    def index(self, x, n: str) -> str:
        """An index `x` into an axis of size `n`, negative ones wrapped around (as Numba
        does for signed ints)."""
        v, t = self.scalar(x)
        if _is_float(t) or t == "bool":
            raise Unsupported("index type")
        if not _is_signed(t):
            return self.cast(v, t, "uint64")
        v = self.cast(v, t, "int64")
        return v if self.non_negative(x) else self.wrapped(v, n)

    def wrapped(self, v: str, n: str) -> str:
        """`v`, counted from the end (`v + n`) when negative."""
        neg = self.op(f"icmp slt i64 {v}, 0")
        return self.op(f"select i1 {neg}, i64 {self.op(f'add i64 {v}, {n}')}, i64 {v}")

    def byte_offset(self, idx: list[str], strides: list[str]) -> str:
        off = None
        for v, st in zip(idx, strides):
            term = self.op(f"mul i64 {v}, {st}")
            off = term if off is None else self.op(f"add i64 {off}, {term}")
        return off

    def c_strides(self, dims: list[str], itemsize: int) -> list[str]:
        """The byte strides of a C-contiguous array of shape `dims`."""
        strides, step = [], str(itemsize)
        for d in reversed(dims):
            strides.insert(0, step)
            step = str(int(step) * int(d)) if _is_literal(step) and _is_literal(d) else \
                self.op(f"mul i64 {step}, {d}")
        return strides

    def constant(self, x) -> int | None:
        """The value of an int literal or of a module's int constant, else None."""
        if isinstance(x, ast.Name) and x.id not in self.vars and x.id not in self.arrays:
            value = self.names.get(x.id)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
        return _constant_int(x)

    def non_negative(self, x) -> bool:
        """Whether the int expression `x` is never negative: constants, the variables of
        loops over `range` counting up from 0 (never assigned otherwise), their sums and
        products, and `_index`'s results."""
        c = self.constant(x)
        if c is not None:
            return c >= 0
        if isinstance(x, ast.Name):
            return (self.scope, x.id) in self.counters
        if isinstance(x, ast.BinOp) and isinstance(x.op, (ast.Add, ast.Mult)):
            return self.non_negative(x.left) and self.non_negative(x.right)
        return False

    def address(self, arr: _Array, idx: list[str]) -> str:
        if not idx:
            return arr.data
        elem = "i8" if arr.dtype == "bool" else _LL[arr.dtype]
        if arr.contiguous:
            flat = idx[0]
            for v, n in zip(idx[1:], arr.shape[1:]):
                flat = self.op(f"add i64 {self.op(f'mul i64 {flat}, {n}')}, {v}")
            return self.op(f"getelementptr inbounds {elem}, ptr {arr.data}, i64 {flat}")
        return self.op(f"getelementptr inbounds i8, ptr {arr.data}, "
                       f"i64 {self.byte_offset(idx, arr.strides)}")

    def slice(self, arr: _Array, s) -> _Array:
        """The view `arr[lower:upper]` of its first axis (Python's clamped bounds)."""
        if s.step is not None or not arr.shape:
            raise Unsupported("slice step")
        n = arr.shape[0]

        def bound(x, default):
            if x is None:
                return default
            v, t = self.scalar(x)
            if _is_float(t) or t == "bool" or not _is_signed(t):
                raise Unsupported("slice bound type")
            v = self.wrapped(self.cast(v, t, "int64"), n)
            v = self.op(f"select i1 {self.op(f'icmp slt i64 {v}, 0')}, i64 0, i64 {v}")
            return self.op(f"select i1 {self.op(f'icmp sgt i64 {v}, {n}')}, i64 {n}, i64 {v}")
        lo, hi = bound(s.lower, "0"), bound(s.upper, n)
        size = self.op(f"sub i64 {hi}, {lo}")
        size = self.op(f"select i1 {self.op(f'icmp slt i64 {size}, 0')}, i64 0, i64 {size}")
        data = self.op(f"getelementptr inbounds i8, ptr {arr.data}, "
                       f"i64 {self.op(f'mul i64 {lo}, {arr.strides[0]}')}")
        shape = [size] + arr.shape[1:]
        return _Array(arr.meminfo, arr.parent, self.product(shape), data, shape,
                      list(arr.strides), arr.nbtype)

    def row(self, arr: _Array, idx: list[str]) -> _Array:
        """The view `arr[idx]` of its leading axes."""
        from numba.core import types

        data = self.op(f"getelementptr inbounds i8, ptr {arr.data}, "
                       f"i64 {self.byte_offset(idx, arr.strides)}")
        shape, strides = arr.shape[len(idx):], arr.strides[len(idx):]
        layout = "C" if arr.contiguous else "A"
        return _Array(arr.meminfo, arr.parent, self.product(shape), data, shape, strides,
                      types.Array(arr.nbtype.dtype, len(shape), layout,
                                  readonly=not arr.nbtype.mutable))

    def product(self, values) -> str:
        out = "1"
        for v in values:
            out = v if out == "1" else self.op(f"mul i64 {out}, {v}")
        return out

    def e_Call(self, e):
        f = e.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) \
                and f.value.id == "np" and f.attr in _CASTS and len(e.args) == 1:
            v, t = self.scalar(e.args[0])
            dst = {"intp": "int64", "bool_": "bool"}.get(f.attr, f.attr)
            return self.cast(v, t, dst), dst
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) \
                and f.value.id == "np" and f.attr in ("empty", "zeros", "empty_like"):
            return self.new_array(f.attr, e)
        if isinstance(f, ast.Attribute) and f.attr == "copy" and not e.args \
                and not e.keywords:
            src, t = self.expr(f.value)
            if t != _ARRAY or not src.contiguous:
                raise Unsupported("copy")
            out = self.allocate(src.dtype, src.shape)
            self.memcpy(out.data, src.data, self.op(f"mul i64 {src.nitems}, {_SIZE[src.dtype]}"))
            return out, _ARRAY
        if e.keywords:
            raise Unsupported("keywords")
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) \
                and f.value.id == "np" and f.attr in ("rint", "abs") and len(e.args) == 1:
            if f.attr == "abs":
                return self.c_abs(e.args)
            v, t = self.scalar(e.args[0])
            if t != "float64":
                raise Unsupported("np.rint")
            self.decls["llvm.rint.f64"] = "declare double @llvm.rint.f64(double)"
            return self.op(f"call double @llvm.rint.f64(double {v})"), t
        if not isinstance(f, ast.Name):
            raise Unsupported("call")
        special = _CALLS.get(f.id)
        if special is not None:
            return special(self, e.args)
        callee = self.names.get(f.id)
        if getattr(getattr(callee, "py_func", None), "__module__", None) == self.module:
            return self.inline_call(callee, e.args)
        return self.helper_call(f.id, e.args)

    def allocate(self, dtype: str, dims: list[str]) -> _Array:
        """A new C-contiguous array, freed when the function returns."""
        from numba.core import types

        if all(_is_literal(d) for d in dims) and \
                _SIZE[dtype] * _prod(int(d) for d in dims) <= _STACK_BYTES:
            return self.stack_array(dtype, dims)
        if self.helper or self.loops:
            raise Unsupported("an allocation in a loop")
        nitems = self.product(dims)
        size = self.op(f"mul i64 {nitems}, {_SIZE[dtype]}")
        rounded = self.op(f"and i64 {self.op(f'add i64 {size}, 63')}, -64")
        self.decls["aligned_alloc"] = "declare ptr @aligned_alloc(i64, i64)"
        self.decls["free"] = "declare void @free(ptr)"
        data = self.op(f"call ptr @aligned_alloc(i64 64, i64 {rounded})")
        slot = self.alloca("ptr")
        self.inits.append(f"store ptr null, ptr {slot}")
        self.emit(f"store ptr {data}, ptr {slot}")
        self.freed.append(slot)
        failed = self.op(f"and i1 {self.op(f'icmp eq ptr {data}, null')}, "
                         f"{self.op(f'icmp ne i64 {rounded}, 0')}")
        ok = self.fail_if(failed)
        self.ret(f"i32 {MEMORY_ERROR}")
        self.resume(ok)
        return _Array("null", "null", nitems, data, list(dims), self.c_strides(dims, _SIZE[dtype]),
                      types.Array(_nbtype(dtype), len(dims), "C"))

    def stack_array(self, dtype: str, dims: list[str]) -> _Array:
        """A new array of a small constant size, on the stack (its contents undefined, as
        `np.empty`'s; a loop's iterations share it)."""
        from numba.core import types

        nitems = _prod(int(d) for d in dims)
        elem = "i8" if dtype == "bool" else _LL[dtype]
        data = self.tmp()
        self.allocas.append(f"{data} = alloca {elem}, i64 {max(nitems, 1)}, align 64")
        return _Array("null", "null", str(nitems), data, list(dims),
                      self.c_strides(dims, _SIZE[dtype]),
                      types.Array(_nbtype(dtype), len(dims), "C"))

    def new_array(self, kind: str, e):
        if kind == "empty_like":
            if len(e.args) != 1 or e.keywords:
                raise Unsupported("empty_like")
            src, t = self.expr(e.args[0])
            if t != _ARRAY:
                raise Unsupported("empty_like")
            return self.allocate(src.dtype, src.shape), _ARRAY
        dtype = "float64"
        for k in e.keywords:
            v = k.value
            if k.arg != "dtype" or not (isinstance(v, ast.Attribute) and isinstance(
                    v.value, ast.Name) and v.value.id == "np"):
                raise Unsupported(f"{kind} keywords")
            dtype = {"bool_": "bool", "intp": "int64"}.get(v.attr, v.attr)
            _scalar(dtype)
        if len(e.args) != 1:
            raise Unsupported(kind)
        shape = e.args[0]
        items = shape.elts if isinstance(shape, ast.Tuple) else [shape]
        dims = []
        for x in items:
            v, t = self.scalar(x)
            if _is_float(t) or t == "bool":
                raise Unsupported("shape type")
            dims.append(self.cast(v, t, "int64"))
        out = self.allocate(dtype, dims)
        if kind == "zeros":
            self.decls["llvm.memset"] = "declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)"
            size = self.op(f"mul i64 {out.nitems}, {_SIZE[dtype]}")
            self.emit(f"call void @llvm.memset.p0.i64(ptr {out.data}, i8 0, i64 {size}, "
                      f"i1 false)")
        return out, _ARRAY

    def inline_call(self, disp, args):
        """A call of another function of the module, translated in place: its value (None,
        a scalar, or a tuple of arrays and scalars)."""
        if self.helper:
            raise Unsupported("call")
        _function_def(disp.py_func, args)  # (its arity, before its arguments' code)
        return self.inline_values(disp, [self.expr(a) for a in args])

    def inline_values(self, disp, values):
        """`disp`'s function on `values` translated in place (its names in a scope of its
        own; a `return` jumps to its end)."""
        fdef = _function_def(disp.py_func, values)
        saved = (self.vars, self.arrays, self.scope, self.stores, self.names, self.inline,
                 self.module)
        self.scopes += 1
        self.vars, self.arrays, self.scope = {}, {}, self.scopes
        self.stores = _store_counts(fdef)
        self.names = disp.py_func.__globals__
        self.module = disp.py_func.__module__
        end = self.label()
        self.inline = {"end": end, "last": fdef.body[-1] if fdef.body else None,
                       "slot": None, "type": None, "tuple": None}
        try:
            for a, (v, t) in zip(fdef.args.args, values):
                if t == _ARRAY:
                    self.arrays[a.arg] = v
                elif t in _LL:
                    self.assign_name(a.arg, v, t)
                else:
                    raise Unsupported("argument")
            self.stmts(fdef.body)
            found = self.inline
            if found["slot"] is not None and not self.terminated:
                raise Unsupported("a function that may return nothing")
            self.branch(end)
            self.start(end)
        finally:
            (self.vars, self.arrays, self.scope, self.stores, self.names, self.inline,
             self.module) = saved
        if found["tuple"] is not None:
            return found["tuple"], _TUPLE
        if found["slot"] is not None:
            t = found["type"]
            return self.op(f"load {_LL[t]}, ptr {found['slot']}"), t
        return None, "none"

    def inline_return(self, s) -> None:
        found = self.inline
        v = s.value
        if v is None or (isinstance(v, ast.Constant) and v.value is None):
            if found["slot"] is not None or found["tuple"] is not None:
                raise Unsupported("returns of two kinds")
        else:
            value, t = self.expr(v)
            if t == _ARRAY:
                raise Unsupported("an array returned")
            if t == _TUPLE:
                if s is not found["last"] or found["slot"] is not None:
                    raise Unsupported("a tuple returned before the end")
                found["tuple"] = value
            else:
                t = _scalar(t)
                if found["slot"] is None:
                    if found["tuple"] is not None:
                        raise Unsupported("returns of two kinds")
                    found["slot"], found["type"] = self.alloca(_LL[t]), t
                elif found["type"] != t:
                    raise Unsupported("returns of two types")
                self.emit(f"store {_LL[t]} {value}, ptr {found['slot']}")
        self.branch(found["end"])

    def snapshot(self):
        return (len(self.body), len(self.allocas), len(self.inits), len(self.freed),
                len(self.exits), dict(self.decls), dict(self.defs), len(self.libraries),
                len(self.callees), self.terminated, set(self.counters), list(self.loops),
                self.branches)

    def restore(self, snap) -> None:
        (nb, na, ni, nf, ne, decls, defs, nl, nc, self.terminated, self.counters, self.loops,
         self.branches) = snap
        del self.body[nb:], self.allocas[na:], self.inits[ni:], self.freed[nf:], self.exits[ne:]
        del self.libraries[nl:], self.callees[nc:]
        self.decls, self.defs = decls, defs

    def c_abs(self, args):
        if len(args) != 1:
            raise Unsupported("abs")
        v, t = self.scalar(args[0])
        if _is_float(t):
            w = "f64" if t == "float64" else "f32"
            self.decls[f"llvm.fabs.{w}"] = f"declare {_LL[t]} @llvm.fabs.{w}({_LL[t]})"
            return self.op(f"call {_LL[t]} @llvm.fabs.{w}({_LL[t]} {v})"), t
        if t != "int64":
            raise Unsupported("abs")
        neg = self.op(f"icmp slt i64 {v}, 0")
        return self.op(f"select i1 {neg}, i64 {self.op(f'sub i64 0, {v}')}, i64 {v}"), t

    def _extreme(self, args, fn):
        if len(args) != 2:
            raise Unsupported("min/max")
        (a, ta), (b, tb) = self.scalar(args[0]), self.scalar(args[1])
        if ta != tb or _is_float(ta) or ta == "bool":
            raise Unsupported("min/max of these types")
        pick = self.compare(fn, b, tb, a, ta)  # Python's: the first of equal ones
        return self.op(f"select i1 {pick}, {_LL[ta]} {b}, {_LL[ta]} {a}"), ta

    def c_min(self, args):
        return self._extreme(args, operator.lt)

    def c_max(self, args):
        return self._extreme(args, operator.gt)

    def c_index(self, args):
        if len(args) != 3 or self.helper:
            raise Unsupported("_index")
        (e, te), (n, tn), (tag, tt) = [self.scalar(a) for a in args]
        if any(_is_float(t) or t == "bool" for t in (te, tn, tt)):
            raise Unsupported("_index")
        g = self.cast(e, te, "int64")
        n = self.cast(n, tn, "int64")
        g2 = self.wrapped(g, n)
        low = self.op(f"icmp slt i64 {g2}, 0")
        high = self.op(f"icmp sge i64 {g2}, {n}")
        ok = self.fail_if(self.op(f"or i1 {low}, {high}"))
        for k, v in enumerate((self.cast(tag, tt, "int64"), g, n)):
            self.emit(f"store i64 {v}, ptr {self.op(f'getelementptr i64, ptr %err, i64 {k}')}")
        self.ret(f"i32 {INDEX_ERROR}")
        self.resume(ok)
        return g2, "int64"

    def memcpy(self, dst: str, src: str, nbytes: str) -> None:
        self.decls["llvm.memcpy"] = "declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)"
        self.emit(f"call void @llvm.memcpy.p0.p0.i64(ptr {dst}, ptr {src}, i64 {nbytes}, "
                  f"i1 false)")

    def c_ccopy(self, args):
        if len(args) != 2:
            raise Unsupported("_ccopy")
        (dst, td), (src, ts) = self.expr(args[0]), self.expr(args[1])
        if td != _ARRAY or ts != _ARRAY or not (dst.contiguous and src.contiguous) \
                or dst.dtype != src.dtype:
            raise Unsupported("_ccopy")
        self.memcpy(dst.data, src.data,
                    self.op(f"mul i64 {src.nitems}, {_SIZE[src.dtype]}"))
        return None, "none"

    def c_crow(self, args):
        if len(args) != 3:
            raise Unsupported("_crow")
        dst, td = self.expr(args[0])
        row, tr = self.scalar(args[1])
        src, ts = self.expr(args[2])
        if td != _ARRAY or ts != _ARRAY or not (dst.contiguous and src.contiguous) \
                or dst.dtype != src.dtype or len(dst.shape) != len(src.shape) + 1 \
                or _is_float(tr) or tr == "bool":
            raise Unsupported("_crow")
        at = self.op(f"mul i64 {self.cast(row, tr, 'int64')}, {dst.strides[0]}")
        self.memcpy(self.op(f"getelementptr i8, ptr {dst.data}, i64 {at}"), src.data,
                    self.op(f"mul i64 {src.nitems}, {_SIZE[src.dtype]}"))
        return None, "none"

    def c_cview(self, args):
        from numba.core import types

        if len(args) != 2 or not isinstance(args[1], ast.Tuple):
            raise Unsupported("_cview")
        src, ts = self.expr(args[0])
        if ts != _ARRAY or not src.contiguous:
            raise Unsupported("_cview")
        dims = []
        for x in args[1].elts:
            v, t = self.scalar(x)
            if _is_float(t) or t == "bool":
                raise Unsupported("_cview")
            dims.append(self.cast(v, t, "int64"))
        return _Array(src.meminfo, src.parent, src.nitems, src.data, dims,
                      self.c_strides(dims, _SIZE[src.dtype]),
                      types.Array(src.nbtype.dtype, len(dims), "C",
                                  readonly=not src.nbtype.mutable)), _ARRAY

    def c_bits_of_f64(self, args):
        v, t = self.scalar(args[0]) if len(args) == 1 else (None, None)
        if t != "float64":
            raise Unsupported("_bits_of_f64")
        return self.op(f"bitcast double {v} to i64"), "int64"

    def c_f64_from_bits(self, args):
        v, t = self.scalar(args[0]) if len(args) == 1 else (None, None)
        if t != "int64":
            raise Unsupported("_f64_from_bits")
        return self.op(f"bitcast i64 {v} to double"), "float64"

    def c_lanes8(self, args):
        # NumPy's pairwise leaf: 8 running sums of elements i = j (mod 8) of b[lo:lo + m]
        if len(args) != 3:
            raise Unsupported("_lanes8")
        b, tb = self.expr(args[0])
        (lo, tl), (m, tm) = self.scalar(args[1]), self.scalar(args[2])
        if tb != _ARRAY or len(b.shape) != 1 or b.dtype not in ("float64", "float32") \
                or any(_is_float(t) or t == "bool" for t in (tl, tm)):
            raise Unsupported("_lanes8")
        lo, m = self.cast(lo, tl, "int64"), self.cast(m, tm, "int64")
        elt = _LL[b.dtype]
        vec = f"<8 x {elt}>"

        def load(start):
            at = self.op(f"add i64 {start}, {lo}")
            if b.contiguous:
                p = self.op(f"getelementptr inbounds {elt}, ptr {b.data}, i64 {at}")
                return self.op(f"load {vec}, ptr {p}, align {_SIZE[b.dtype]}")
            v = "undef"
            for j in range(8):
                off = self.op(f"mul i64 {self.op(f'add i64 {at}, {j}')}, {b.strides[0]}")
                p = self.op(f"getelementptr inbounds i8, ptr {b.data}, i64 {off}")
                v = self.op(f"insertelement {vec} {v}, {elt} "
                            f"{self.op(f'load {elt}, ptr {p}')}, i32 {j}")
            return v
        acc = self.alloca(vec)
        self.emit(f"store {vec} {load('0')}, ptr {acc}")
        blocks = self.op(f"sdiv i64 {m}, 8")
        counter = self.alloca("i64")
        self.emit(f"store i64 1, ptr {counter}")
        head, body, end = self.label(), self.label(), self.label()
        self.start(head)
        k = self.op(f"load i64, ptr {counter}")
        self.cbranch(self.op(f"icmp slt i64 {k}, {blocks}"), body, end)
        self.start(body)
        added = self.op(f"fadd {vec} {self.op(f'load {vec}, ptr {acc}')}, "
                        f"{load(self.op(f'mul i64 {k}, 8'))}")
        self.emit(f"store {vec} {added}, ptr {acc}")
        self.emit(f"store i64 {self.op(f'add i64 {k}, 1')}, ptr {counter}")
        self.branch(head)
        self.start(end)
        v = self.op(f"load {vec}, ptr {acc}")
        return [(self.op(f"extractelement {vec} {v}, i32 {j}"), b.dtype) for j in range(8)], \
            _TUPLE

    def c_fma(self, args):
        if len(args) != 3:
            raise Unsupported("_fma")
        vals = [self.scalar(a) for a in args]
        if any(t != "float64" for _, t in vals):
            raise Unsupported("_fma")
        self.decls["llvm.fma"] = "declare double @llvm.fma.f64(double, double, double)"
        return self.op("call double @llvm.fma.f64(" + ", ".join(f"double {v}" for v, _ in vals)
                       + ")"), "float64"

    def values_and_types(self, args):
        vals, argtys = [], []
        for a in args:
            v, t = self.expr(a)
            if t == "none" or t == _TUPLE:
                raise Unsupported(f"{t} passed")
            vals.append((v, t))
            argtys.append(v.nbtype if t == _ARRAY else _nbtype(t))
        return vals, tuple(argtys)

    def c_direct(self, args):
        if len(args) != 2:
            raise Unsupported("_direct")
        self.translated_call(args[0], args[1], "call", None)
        return None, "none"

    def c_direct_step(self, args):
        if len(args) != 4:
            raise Unsupported("_direct_step")
        first, count = _constant_int(args[2]), _constant_int(args[3])
        if first is None or count is None:
            raise Unsupported("_direct_step")
        picks = tuple(range(first, first + count))
        vals, n = self.translated_call(args[0], args[1], "step", picks)
        return [vals[k] for k in picks] + [(n, "int64")], _TUPLE

    def translated_call(self, name, tup, kind: str, picks):
        """Call the function `name` translated too (`kind` and `picks` as
        `load_or_compile` has them), on the values of tuple `tup`: (values, the count)."""
        from numba.core.registry import CPUDispatcher

        if self.helper or not isinstance(name, ast.Name) or not isinstance(tup, ast.Tuple):
            raise Unsupported("a direct call")
        disp = self.names.get(name.id)
        if not isinstance(disp, CPUDispatcher):
            raise Unsupported("a direct call of a non-dispatcher")
        vals, argtys = self.values_and_types(tup.elts)
        symbol = self.symbol_of(disp, argtys)
        found = load_or_compile(disp, argtys, symbol, kind)
        if found is None or found.returns != picks:
            raise Unsupported(f"{name.id} is not translated")
        if (name.id, argtys, symbol) not in self.callees:
            self.callees.append((name.id, argtys, symbol))
        flat = self.flat_args(vals)
        self.decls[symbol] = f"declare i32 @\"{symbol}\"(ptr, ptr, " + \
            ", ".join(x.split(" ")[0] for x in flat) + ")"
        slot = self.alloca("i64")
        rc = self.op(f"call i32 @\"{symbol}\"(ptr %err, ptr {slot}, {', '.join(flat)})")
        ok = self.fail_if(self.op(f"icmp ne i32 {rc}, 0"))
        self.ret(f"i32 {rc}")
        self.resume(ok)
        return vals, self.op(f"load i64, ptr {slot}")

    def flat_args(self, vals) -> list[str]:
        out = []
        for v, t in vals:
            if t == _ARRAY:
                out += v.flat()
            elif t == "bool":
                out.append(f"i8 {self.op(f'zext i1 {v} to i8')}")
            else:
                out.append(f"{_LL[t]} {v}")
        return out

    def helper_call(self, callee, args):
        from numba.core.registry import CPUDispatcher

        disp = self.names.get(callee)
        if not isinstance(disp, CPUDispatcher) \
                or not getattr(disp.py_func, "__module__", "").startswith("tg_helpers"):
            raise Unsupported(f"call of {callee}")
        vals, argtys = self.values_and_types(args)
        if all(t in _LL for _, t in vals):
            try:
                return self.inline_helper(disp, vals, argtys)
            except Unsupported as e:
                if _DEBUG:
                    print(f"llvmgen: helper {callee}: {e}", file=sys.stderr)
        elif not self.helper:  # arrays: translated in place
            snap = self.snapshot()
            try:
                return self.inline_values(disp, vals)
            except Unsupported as e:
                self.restore(snap)
                if _DEBUG:
                    print(f"llvmgen: helper {callee} inlined: {e}", file=sys.stderr)
        if _can_raise(disp):  # its exception would cross translated code: Numba's then
            raise Unsupported(f"{callee} may raise")
        cres = _helper(disp, argtys)
        restype = cres.signature.return_type
        ret = "none" if str(restype) == "none" else _name(restype)
        fnty = cres.target_context.call_conv.get_function_type(restype, argtys)
        symbol = cres.fndesc.mangled_name
        self.decls[symbol] = "declare i32 @\"{}\"({})".format(
            symbol, ", ".join("ptr" if str(a).endswith("*") else str(a) for a in fnty.args))
        if cres.library not in self.libraries:
            self.libraries.append(cres.library)
        out = self.alloca("i8" if ret in ("bool", "none") else _LL[ret])
        exc = self.alloca("ptr")
        flat = self.flat_args(vals)
        rc = self.op(f"call i32 @\"{symbol}\"(ptr {out}, ptr {exc}, {', '.join(flat)})")
        # Numba's codes: 0 ok, -2 None returned; anything else an exception
        bad = self.op(f"and i1 {self.op(f'icmp ne i32 {rc}, 0')}, "
                      f"{self.op(f'icmp ne i32 {rc}, -2')}")
        ok = self.fail_if(bad)
        self.emit(f"store i64 {self.op(f'sext i32 {rc} to i64')}, ptr %err")
        p1 = self.op("getelementptr i64, ptr %err, i64 1")
        self.emit(f"store ptr {self.op(f'load ptr, ptr {exc}')}, ptr {p1}")
        self.ret(f"i32 {NUMBA_ERROR}")
        self.resume(ok)
        if ret == "none":
            return None, "none"
        if ret == "bool":
            return self.op(f"trunc i8 {self.op(f'load i8, ptr {out}')} to i1"), ret
        return self.op(f"load {_LL[ret]}, ptr {out}"), ret

    def inline_helper(self, disp, vals, argtys):
        """A call of a scalar helper translated too, as an internal function LLVM inlines."""
        symbol, returns, decls, defs = _helper_ir(disp, argtys)
        self.decls.update(decls)
        self.defs.update(defs)
        args = ", ".join(f"{_LL[t]} {v}" for v, t in vals)
        if len(returns) == 1:
            t = returns[0]
            return self.op(f"call {_LL[t]} @\"{symbol}\"({args})"), t
        ty = _struct(returns)
        agg = self.op(f"call {ty} @\"{symbol}\"({args})")
        return [(self.op(f"extractvalue {ty} {agg}, {k}"), t)
                for k, t in enumerate(returns)], _TUPLE

    # -- statements ----------------------------------------------------------------------
    def stmts(self, body) -> None:
        for s in body:
            m = _STMTS.get(type(s))
            if m is None:
                raise Unsupported(type(s).__name__)
            m(self, s)

    def assign_name(self, name: str, v: str, t: str) -> None:
        if name in self.arrays:
            raise Unsupported("array name reassigned")
        found = self.vars.get(name)
        if found is None:
            ptr = f"%v{self.scope}.{name}"
            self.allocas.append(f"{ptr} = alloca {_LL[t]}")
            self.vars[name] = found = (ptr, t)
        ptr, tv = found
        if tv != t:
            raise Unsupported(f"{name} of two types")
        self.emit(f"store {_LL[t]} {v}, ptr {ptr}")

    def s_Assign(self, s):
        if len(s.targets) != 1:
            raise Unsupported("assignment")
        target = s.targets[0]
        v, t = self.expr(s.value)
        if isinstance(target, ast.Tuple):
            if t != _TUPLE or len(v) != len(target.elts) \
                    or not all(isinstance(x, (ast.Name, ast.Subscript)) for x in target.elts):
                raise Unsupported("tuple assignment")
            for x, (vi, ti) in zip(target.elts, v):
                if ti == _ARRAY:
                    if not isinstance(x, ast.Name):
                        raise Unsupported("an array stored")
                    self.bind(x.id, vi)
                else:
                    self.store(x, vi, ti)
            return
        if t == _TUPLE:
            raise Unsupported("a tuple assigned")
        if isinstance(target, ast.Name) and isinstance(s.value, ast.Call) \
                and isinstance(s.value.func, ast.Name) and s.value.func.id == "_index" \
                and self.stores.get(target.id) == 1:
            self.counters.add((self.scope, target.id))  # in [0, size)
        if t == "none":
            raise Unsupported("None assigned")
        if t == _ARRAY:
            if not isinstance(target, ast.Name):
                raise Unsupported("array assignment")
            self.bind(target.id, v)
            return
        self.store(target, v, t)

    def bind(self, name: str, arr: _Array) -> None:
        """`name` names `arr` from here on: a name is bound at translation, so one bound
        before may be bound again only outside loops and branches."""
        if name in self.vars:
            raise Unsupported("a scalar name made an array")
        old = self.arrays.get(name)
        if old is not None and old is not arr and (self.loops or self.branches):
            raise Unsupported("an array name bound again in a loop or branch")
        self.arrays[name] = arr

    def store(self, target, v, t):
        if isinstance(target, ast.Name):
            self.assign_name(target.id, v, t)
            return
        if not isinstance(target, ast.Subscript):
            raise Unsupported("assignment target")
        arr, ta = self.expr(target.value)
        s = target.slice
        items = s.elts if isinstance(s, ast.Tuple) else [s]
        if ta != _ARRAY or len(items) != len(arr.shape) \
                or any(isinstance(x, ast.Slice) for x in items):
            raise Unsupported("store")
        if not arr.nbtype.mutable:
            raise Unsupported("store to a read-only array")
        ptr = self.address(arr, [self.index(x, n) for x, n in zip(items, arr.shape)])
        if arr.dtype == "bool":
            b = self.cast(v, t, "bool")
            self.emit(f"store i8 {self.op(f'zext i1 {b} to i8')}, ptr {ptr}")
        else:
            self.emit(f"store {_LL[arr.dtype]} {self.cast(v, t, arr.dtype)}, ptr {ptr}")

    def s_AugAssign(self, s):
        load = ast.Name(id=s.target.id, ctx=ast.Load()) if isinstance(s.target, ast.Name) \
            else ast.Subscript(value=s.target.value, slice=s.target.slice, ctx=ast.Load())
        v, t = self.expr(ast.BinOp(left=load, op=s.op, right=s.value))
        if isinstance(s.target, ast.Name) and self.vars.get(s.target.id, (0, t))[1] != t:
            raise Unsupported("augmented assignment changes the type")
        self.store(s.target, v, t)

    def s_Expr(self, s):
        if not isinstance(s.value, ast.Constant):  # a docstring
            self.expr(s.value)

    def s_Pass(self, s):
        pass

    def s_Return(self, s):
        v = s.value
        if self.inline is not None:
            self.inline_return(s)
            return
        if self.helper:
            if v is None:
                raise Unsupported("a helper returning nothing")
            value, t = self.expr(v)
            items = value if t == _TUPLE else [(value, _scalar(t))]
            if any(ti not in _LL for _, ti in items):
                raise Unsupported("a helper returning arrays")
            types_ = tuple(ti for _, ti in items)
            self.returned(types_)
            if t != _TUPLE:
                self.emit(f"ret {_LL[t]} {value}")
            else:
                ty = _struct(types_)
                agg = "undef"
                for k, (vi, ti) in enumerate(items):
                    agg = self.op(f"insertvalue {ty} {agg}, {_LL[ti]} {vi}, {k}")
                self.emit(f"ret {ty} {agg}")
            self.terminated = True
            return
        if v is None or (isinstance(v, ast.Constant) and v.value is None):
            self.returned(None)
            self.ret("i32 0")
        else:
            if not isinstance(v, ast.Tuple) or not v.elts:
                raise Unsupported("return value")
            picks = []
            for x in v.elts[:-1]:
                if not isinstance(x, ast.Name) or x.id not in self.params \
                        or x.id not in self.arrays:
                    raise Unsupported("return of a non-argument")
                picks.append(self.params.index(x.id))
            count, t = self.scalar(v.elts[-1])
            if t != "int64":
                raise Unsupported("return count type")
            self.returned(tuple(picks))
            self.emit(f"store i64 {count}, ptr %ret")
            self.ret("i32 0")
        self.terminated = True

    def returned(self, what) -> None:
        if self.returns is not False and self.returns != what:
            raise Unsupported("two kinds of return")
        self.returns = what

    def s_If(self, s):
        c, tc = self.scalar(s.test)
        yes, no, end = self.label(), self.label(), self.label()
        self.cbranch(self.cast(c, tc, "bool"), yes, no)
        self.branches += 1
        self.start(yes)
        self.stmts(s.body)
        self.branch(end)
        self.start(no)
        self.stmts(s.orelse)
        self.branches -= 1
        self.branch(end)
        self.start(end)

    def s_While(self, s):
        if s.orelse:
            raise Unsupported("while else")
        head, body, end = self.label(), self.label(), self.label()
        self.start(head)
        c, tc = self.scalar(s.test)
        self.cbranch(self.cast(c, tc, "bool"), body, end)
        self.start(body)
        self.loops.append((head, end))
        self.stmts(s.body)
        self.loops.pop()
        self.branch(head)
        self.start(end)

    def s_For(self, s):
        it = s.iter
        if s.orelse or not isinstance(s.target, ast.Name) or not isinstance(it, ast.Call) \
                or not isinstance(it.func, ast.Name) or it.func.id != "range" \
                or it.keywords or not 1 <= len(it.args) <= 3:
            raise Unsupported("for")
        vals = []
        for a in it.args:
            v, t = self.scalar(a)
            if _is_float(t) or t == "uint64" or t == "bool":
                raise Unsupported("range of these types")
            vals.append(self.cast(v, t, "int64"))
        step = _constant_int(it.args[2]) if len(vals) == 3 else 1
        if not step:
            raise Unsupported("range step")
        start, stop = ("0", vals[0]) if len(vals) == 1 else (vals[0], vals[1])
        if step == 1 and (len(vals) == 1 or self.non_negative(it.args[0])) \
                and self.stores.get(s.target.id) == 1 and self.copy_loop(s, start, stop):
            return
        target = s.target.id

        def body(i, latch, end):
            if step > 0 and self.stores.get(target) == 1 and (
                    start == "0" or self.non_negative(it.args[0])):
                self.counters.add((self.scope, target))
            self.assign_name(target, i, "int64")
            self.loops.append((latch, end))
            self.stmts(s.body)
            self.loops.pop()

        self.counted_loop(start, stop, step, body)

    def counted_loop(self, start: str, stop: str, step: int, body, plain: bool = False
                     ) -> None:
        """A loop of an i64 `i` from `start` by `step` while it is before `stop`,
        `body(i, latch, end)` emitting its body (`latch`: where `continue` goes, `end`:
        where `break` goes). `plain`: not vectorized nor unrolled."""
        counter = self.alloca("i64")
        self.emit(f"store i64 {start}, ptr {counter}")
        head, inside, latch, end = self.label(), self.label(), self.label(), self.label()
        self.start(head)
        i = self.op(f"load i64, ptr {counter}")
        self.cbranch(self.op(f"icmp {'sgt' if step < 0 else 'slt'} i64 {i}, {stop}"),
                     inside, end)
        self.start(inside)
        body(i, latch, end)
        self.start(latch)
        self.emit(f"store i64 {self.op(f'add i64 {i}, {step}')}, ptr {counter}")
        if plain:
            m = 3 + len(self.metadata)
            self.metadata.append(f"!{m} = distinct !{{!{m}, !1, !2}}")
            self.emit(f"br label %{head}, !llvm.loop !{m}")
            self.terminated = True
        else:
            self.branch(head)
        self.start(end)

    def copy_loop(self, s, start: str, stop: str) -> bool:
        """Translate `for i in range(start, stop): dst[..., i] = src[..., i]` along the
        last axis of two C-contiguous arrays as one `memmove`, when it is that: a loop LLVM
        would vectorize, check for overlap and copy again for its remainder (an LSTM step's
        concatenations make dozens). Whether it was."""
        body, var = s.body, s.target.id
        if len(body) != 1 or not isinstance(body[0], ast.Assign) or len(body[0].targets) != 1:
            return False
        ends = []
        for e in (body[0].targets[0], body[0].value):
            if not isinstance(e, ast.Subscript) or not isinstance(e.value, ast.Name):
                return False
            items = e.slice.elts if isinstance(e.slice, ast.Tuple) else [e.slice]
            if not isinstance(items[-1], ast.Name) or items[-1].id != var or any(
                    isinstance(n, ast.Slice) or (isinstance(n, ast.Name) and n.id == var)
                    or (isinstance(n, ast.Call) and not _is_cast(n))
                    for x in [e.value, *items[:-1]] for n in ast.walk(x)):
                return False
            ends.append((e.value, items[:-1]))
        snap = self.snapshot()
        try:
            found = []
            for name, prefix in ends:
                arr, t = self.expr(name)
                if t != _ARRAY or not arr.contiguous or len(prefix) + 1 != len(arr.shape):
                    raise Unsupported("not a copy")
                found.append((arr, [self.index(x, n) for x, n in zip(prefix, arr.shape)]))
            (dst, at), (src, frm) = found
            if dst.dtype != src.dtype:
                raise Unsupported("not a copy")
        except Unsupported:
            self.restore(snap)
            return False
        n = self.op(f"sub i64 {stop}, {start}")
        go, end = self.label(), self.label()
        self.cbranch(self.op(f"icmp sgt i64 {n}, 0"), go, end)
        self.start(go)
        d, p = self.address(dst, at + [start]), self.address(src, frm + [start])
        nbytes = self.op(f"mul i64 {n}, {_SIZE[dst.dtype]}")
        # a forward copy onto a later part of its own source repeats what it copied first,
        # as memmove does not: that case is copied element by element
        di, pi = self.op(f"ptrtoint ptr {d} to i64"), self.op(f"ptrtoint ptr {p} to i64")
        past = self.op(f"add i64 {pi}, {nbytes}")
        ahead = self.op(f"and i1 {self.op(f'icmp ugt i64 {di}, {pi}')}, "
                        f"{self.op(f'icmp ult i64 {di}, {past}')}")
        fast, slow = self.label(), self.label()
        self.cbranch(ahead, slow, fast)
        self.start(fast)
        self.decls["llvm.memmove"] = "declare void @llvm.memmove.p0.p0.i64(ptr, ptr, i64, i1)"
        self.emit(f"call void @llvm.memmove.p0.p0.i64(ptr {d}, ptr {p}, i64 {nbytes}, i1 false)")
        self.branch(end)
        self.start(slow)
        elem = "i8" if dst.dtype == "bool" else _LL[dst.dtype]

        def element(i, *_):
            at = self.op(f"getelementptr {elem}, ptr {p}, i64 {i}")
            v = self.op(f"load {elem}, ptr {at}")
            self.emit(f"store {elem} {v}, "
                      f"ptr {self.op(f'getelementptr {elem}, ptr {d}, i64 {i}')}")

        self.counted_loop("0", n, 1, element, plain=True)  # (rare: kept small)
        self.start(end)
        return True

    def s_Break(self, s):
        if not self.loops:
            raise Unsupported("break")
        self.branch(self.loops[-1][1])
        self.start(self.label())

    def s_Continue(self, s):
        if not self.loops:
            raise Unsupported("continue")
        self.branch(self.loops[-1][0])
        self.start(self.label())


# what translates each kind of expression and statement, and the calls known by name
_EXPRS = {ast.Constant: _Fn.e_Constant, ast.Name: _Fn.e_Name, ast.UnaryOp: _Fn.e_UnaryOp,
          ast.BinOp: _Fn.e_BinOp, ast.Compare: _Fn.e_Compare, ast.IfExp: _Fn.e_IfExp,
          ast.BoolOp: _Fn.e_BoolOp, ast.Subscript: _Fn.e_Subscript, ast.Call: _Fn.e_Call,
          ast.Attribute: _Fn.e_Attribute, ast.Tuple: _Fn.e_Tuple}
_STMTS = {ast.Assign: _Fn.s_Assign, ast.AugAssign: _Fn.s_AugAssign, ast.Expr: _Fn.s_Expr,
          ast.Pass: _Fn.s_Pass, ast.Return: _Fn.s_Return, ast.If: _Fn.s_If,
          ast.While: _Fn.s_While, ast.For: _Fn.s_For, ast.Break: _Fn.s_Break,
          ast.Continue: _Fn.s_Continue}
_CALLS = {"abs": _Fn.c_abs, "min": _Fn.c_min, "max": _Fn.c_max, "_index": _Fn.c_index,
          "_ccopy": _Fn.c_ccopy, "_crow": _Fn.c_crow, "_cview": _Fn.c_cview,
          "_fma": _Fn.c_fma, "_direct": _Fn.c_direct, "_bits_of_f64": _Fn.c_bits_of_f64,
          "_f64_from_bits": _Fn.c_f64_from_bits, "_direct_step": _Fn.c_direct_step,
          "_lanes8": _Fn.c_lanes8}


def _is_cast(call) -> bool:
    """Whether `call` is a conversion `np.<type>(x)` (evaluated once or in every iteration
    alike)."""
    f = call.func
    return (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)
            and f.value.id == "np" and f.attr in _CASTS and len(call.args) == 1)


def _struct(types_) -> str:
    return "{" + ", ".join(_LL[t] for t in types_) + "}"


_HELPER_IR: dict = {}  # (dispatcher, argtys) -> (symbol, return types, declarations,
# definitions)


def _helper_ir(disp, argtys):
    """`(symbol, return types, {symbol: declaration}, {symbol: definition})` of the
    helper `disp`'s function for
    scalar `argtys`, translated as an internal function (with the helpers it calls), or
    Unsupported. Translated once per process."""
    key = (disp, argtys)
    found = _HELPER_IR.get(key)
    if isinstance(found, Unsupported):
        raise found
    if found is not None:
        return found
    from numba.core.registry import cpu_target

    py_func = disp.py_func
    symbol = f"tgh.{py_func.__name__}." + ".".join(str(t) for t in argtys)
    try:
        fdef = _function_def(py_func, argtys)
        fn = _Fn(cpu_target.typing_context, py_func.__globals__, None, helper=True)
        params = []
        for k, (a, t) in enumerate(zip(fdef.args.args, argtys)):
            n = _name(t)
            params.append(f"{_LL[n]} %a{k}")
            fn.assign_name(a.arg, f"%a{k}", n)
        fn.stmts(fdef.body)
        if not fn.terminated or not fn.returns:
            raise Unsupported("a helper that may return nothing")
        if fn.libraries:
            raise Unsupported("a helper calling Numba's code")
    except Unsupported as e:
        _HELPER_IR[key] = e
        raise
    returns = fn.returns
    ret = _LL[returns[0]] if len(returns) == 1 else _struct(returns)
    lines = [f"define internal {ret} @\"{symbol}\"({', '.join(params)}) alwaysinline {{",
             "entry:"] + ["  " + a for a in fn.allocas] + fn.body + ["}"]
    defs = {**fn.defs, symbol: "\n".join(lines)}
    found = _HELPER_IR[key] = (symbol, returns, fn.decls, defs)
    return found


_TREES: dict = {}  # function -> its syntax tree, or Unsupported


def _tree(py_func) -> ast.Module:
    """`py_func`'s source parsed (once per process)."""
    found = _TREES.get(py_func)
    if found is None:
        try:
            found = ast.parse(textwrap.dedent(inspect.getsource(py_func)))
        except (OSError, TypeError, SyntaxError):
            found = Unsupported("no source")
        _TREES[py_func] = found
    if isinstance(found, Unsupported):
        raise found
    return found


def _function_def(py_func, argtys) -> ast.FunctionDef:
    fdef = _tree(py_func).body[0]
    if not isinstance(fdef, ast.FunctionDef) or fdef.args.vararg or fdef.args.kwarg \
            or fdef.args.kwonlyargs or fdef.args.defaults or fdef.args.posonlyargs \
            or len(fdef.args.args) != len(argtys):
        raise Unsupported("signature")
    return fdef


_STACK_BYTES = 16384  # the largest constant-size buffer on the stack


def _is_literal(v: str) -> bool:
    return v.lstrip("-").isdigit()


def _prod(values) -> int:
    out = 1
    for v in values:
        out *= v
    return out


def _store_counts(fdef) -> dict:
    """How many statements of `fdef` assign each name (its parameters count one)."""
    counts = {a.arg: 1 for a in fdef.args.args}
    for node in ast.walk(fdef):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            counts[node.id] = counts.get(node.id, 0) + 1
    return counts


def _constant_int(e) -> int | None:
    """The value of an int literal (`3`, `-1`), else None."""
    sign = 1
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
        sign, e = -1, e.operand
    if isinstance(e, ast.Constant) and isinstance(e.value, int) \
            and not isinstance(e.value, bool):
        return sign * e.value
    return None


_RAISES = ("raise ", "_value_error", "_index(", "objmode", "np.linalg", "_lapack")
_CAN_RAISE: dict = {}


def _can_raise(disp) -> bool:
    """Whether the helper `disp`'s function, or one of the module's functions it names,
    may raise (read from their text)."""
    from numba.core.registry import CPUDispatcher

    found = _CAN_RAISE.get(disp)
    if found is None:
        _CAN_RAISE[disp] = False  # (a cycle of names does not raise by itself)
        try:
            text = inspect.getsource(disp.py_func)
            tree = _tree(disp.py_func)
        except (OSError, TypeError, Unsupported):
            found = True
        else:
            names = disp.py_func.__globals__
            found = any(r in text for r in _RAISES) or any(
                _can_raise(names[n.id]) for n in ast.walk(tree)
                if isinstance(n, ast.Name) and isinstance(names.get(n.id), CPUDispatcher)
                and names[n.id] is not disp)
        _CAN_RAISE[disp] = found
    return found


_RESOLVED: dict = {}  # (operator, operand types) -> Numba's typing, or Unsupported


def _helper(disp, argtys):
    """The Numba compile result of the helper `disp` for `argtys`."""
    if argtys not in disp.overloads:
        try:
            disp.compile(argtys)
        except Exception as e:  # noqa: BLE001 - Numba's typing errors vary
            raise Unsupported(f"{disp.py_func.__name__}{argtys}") from e
    return disp.overloads[argtys]


def translate(py_func, argtys, symbol: str, symbol_of):
    """`(ir_text, libraries, returns, callees)`: the LLVM module defining `symbol`, the
    translation of `py_func` for Numba argument types `argtys`; the Numba code libraries
    of the helpers it calls; None when it returns nothing, else the indices of the
    arguments it returns before its count; `(name, argtys, symbol)` of the functions it
    calls by `_direct` (translated and loaded). `symbol_of(dispatcher, argtys)`: the
    symbol of a function it calls by `_direct`. Raises Unsupported."""
    from numba.core import types
    from numba.core.registry import cpu_target

    fdef = _function_def(py_func, argtys)
    _codegen()
    fn = _Fn(cpu_target.typing_context, py_func.__globals__, symbol_of)
    fn.params = [a.arg for a in fdef.args.args]
    fn.module = py_func.__module__
    fn.stores = _store_counts(fdef)
    params = ["ptr %err", "ptr %ret"]
    for k, (name, t) in enumerate(zip(fn.params, argtys)):
        p = f"%a{k}"
        if isinstance(t, types.Array):
            _name(t.dtype)
            if t.layout not in ("C", "F", "A") or t.ndim > 8:
                raise Unsupported("layout")
            shape = [f"{p}.shape{j}" for j in range(t.ndim)]
            strides = [f"{p}.stride{j}" for j in range(t.ndim)]
            params += [f"ptr {p}.meminfo", f"ptr {p}.parent", f"i64 {p}.nitems",
                       f"i64 {p}.itemsize", f"ptr {p}.data"]
            params += [f"i64 {v}" for v in shape + strides]
            fn.arrays[name] = _Array(f"{p}.meminfo", f"{p}.parent", f"{p}.nitems",
                                     f"{p}.data", shape, strides, t)
        else:
            n = _name(t)
            params.append(f"{'i8' if n == 'bool' else _LL[n]} {p}")
            fn.assign_name(name, fn.op(f"icmp ne i8 {p}, 0") if n == "bool" else p, n)
    fn.stmts(fdef.body)
    if not fn.terminated:
        fn.returned(None)
        fn.ret("i32 0")
    lines = [f"define i32 @\"{symbol}\"({', '.join(params)}) {{", "entry:"]
    lines += ["  " + a for a in fn.allocas + fn.inits] + fn.body + fn.exit_block() + ["}"]
    text = "\n".join(list(fn.decls.values()) + list(fn.defs.values()) + lines
                      + ['!0 = !{!"branch_weights", i32 1, i32 1048576}',
                         '!1 = !{!"llvm.loop.vectorize.enable", i1 false}',
                         '!2 = !{!"llvm.loop.unroll.disable"}'] + fn.metadata) + "\n"
    return text, fn.libraries, fn.returns, fn.callees


# -- compiled, cached and linked ---------------------------------------------------------

class Translated:
    """A function translated here and loaded: its code library (None while another process
    compiles it: forks.py), and what it returns (None: nothing; else the indices of the
    arguments returned before its count)."""

    __slots__ = ("library", "returns", "callees")

    def __init__(self, library, returns, callees):
        self.library, self.returns, self.callees = library, returns, callees


# Whether functions are translated (env TRACEGRAD_NUMBA_TRANSLATE=0: all go to Numba).
ENABLED = os.environ.get("TRACEGRAD_NUMBA_TRANSLATE", "1") != "0"
_LOADED: dict = {}  # symbol -> Translated, or None (Numba compiles it)
_OF_FUNCTION: dict = {}  # (module, function name) -> [Translated], as they were used
_MODULE_OF: dict = {}  # symbol -> the name of the module of the function it translates
_DEBUG = bool(os.environ.get("TRACEGRAD_LLVMGEN_DEBUG"))
# `translated` here, `loaded` from the kernel cache, `unsupported`: left to Numba
STATS = {"translated": 0, "loaded": 0, "unsupported": 0}
_SUFFIX = ".tgll"


def _cache_prefix(py_func) -> str | None:
    path = getattr(sys.modules.get(py_func.__module__), "__file__", None)
    if not path:
        return None
    return os.path.join(os.path.dirname(path), f"{py_func.__module__}-{py_func.__name__}-")


def _cache_path(py_func, symbol: str) -> str | None:
    prefix = _cache_prefix(py_func)
    return None if prefix is None else prefix + symbol.rsplit(".", 1)[-1] + _SUFFIX


def cached_argtys(dispatcher) -> list:
    """The argument types `dispatcher`'s function has translated machine code for in the
    kernel cache."""
    import glob
    import pickle

    prefix = _cache_prefix(dispatcher.py_func)
    if prefix is None:
        return []
    found = []
    for path in sorted(glob.glob(glob.escape(prefix) + "*" + _SUFFIX)):
        try:
            with open(path, "rb") as f:
                fmt, argtys = pickle.load(f)  # the header only
            if fmt == _FORMAT:
                found.append(argtys)
        except Exception:  # noqa: BLE001 - an unreadable entry is translated again
            continue
    return found


_READY: list = []


def numba_contexts():
    """Numba's CPU target context, its typing and target registries loaded (and its
    runtime, NRT, which linked helpers may call)."""
    from numba.core.registry import cpu_target

    ctx = cpu_target.target_context
    if not _READY:
        cpu_target.typing_context.refresh()
        ctx.refresh()
        _READY.append(True)
    return ctx


def _codegen():
    return numba_contexts().codegen()


class StaleEntry(RuntimeError):
    """A translated function's cache entry could not be loaded (it is deleted): machine code
    compiled to call it must be compiled again."""


# Of the cache entries: a header `(format, argument types)`, then `(magic, returns,
# callees, serialized library)`, two pickles one after the other.
_FORMAT = 2


def _load(path: str, argtys, names: dict):
    """The entry at `path`: a Translated, None when there is none, or StaleEntry (an entry
    that cannot be loaded, now deleted)."""
    import pickle

    codegen = _codegen()
    try:
        with open(path, "rb") as f:
            entry = pickle.load(f), pickle.load(f)
    except FileNotFoundError:
        return None
    except Exception:  # noqa: BLE001 - an unreadable entry is a stale one
        entry = None
    try:
        (fmt, saved_argtys), (magic, returns, callees, state) = entry
        if fmt != _FORMAT or saved_argtys != argtys or magic != codegen.magic_tuple():
            raise ValueError("another format, machine or signature")
        for name, types_, symbol in callees:  # their machine code first: this code calls it
            if name not in names or load_or_compile(names[name], types_, symbol) is None:
                raise ValueError(f"its callee {name} is not translated")
        return Translated(codegen.unserialize_library(state), returns, callees)
    except Exception as e:  # noqa: BLE001 - whatever it is, the entry is of no use
        try:
            os.unlink(path)
        except OSError:
            pass
        return StaleEntry(f"tracegrad: the translated code in {path} could not be loaded "
                          f"({type(e).__name__}: {e}); it was deleted")


def _save(path: str, argtys, returns, callees, state) -> None:
    import pickle

    data = pickle.dumps((_FORMAT, argtys)) + pickle.dumps((
        _codegen().magic_tuple(), returns, callees, state))
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError:  # the kernel cache is not writable: its caller compiles in memory
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _save_library(path: str, argtys, found: Translated) -> None:
    """Save `found`, compiled in this process, as the cache entry at `path`."""
    _save(path, argtys, found.returns, found.callees,
          found.library.serialize_using_object_code())


def _compile(text: str, libraries, symbol: str):
    from numba.core.compiler_lock import global_compiler_lock

    with global_compiler_lock:
        return _compile_locked(text, libraries, symbol)


def _library(text: str, symbol: str):
    """A Numba code library holding the module `text` (not optimized yet)."""
    import llvmlite.binding as llvm

    codegen = _codegen()
    library = codegen.create_library(symbol)
    module = llvm.parse_assembly(text)
    module.triple = llvm.get_process_triple()
    module.data_layout = codegen._data_layout
    module.verify()
    # linked as it is: the module pipeline `finalize` runs optimizes it (Numba's function
    # passes on a module first, `add_llvm_module`, would do the same work twice)
    library._final_module.link_in(module)
    return library


def _compile_locked(text: str, libraries, symbol: str):
    library = _library(text, symbol)
    library.enable_object_caching()
    for lib in libraries:
        library.add_linking_library(lib)
    library.finalize()
    return library


def _object_code(text: str, libraries, symbol: str):
    """What `serialize_using_object_code` gives of the library `_compile` would build, made
    without linking its machine code into this process (the functions it calls need not
    be loaded)."""
    import llvmlite.binding as llvm

    library = _library(text, symbol)
    final = library._final_module
    for lib in libraries:
        final.link_in(lib._get_module_for_linking(), preserve=True)
    library._optimize_final_module()
    final.verify()
    obj = _codegen()._tm.emit_object(final)
    for fn in final.functions:  # as `_get_module_for_linking` has it
        if not fn.is_declaration and fn.linkage == llvm.Linkage.external:
            fn.linkage = "linkonce_odr"
    return symbol, "object", (obj, final.as_bitcode())


# Translations of at least this many characters of IR compile in a process of their own
# when the compile may fork (forks.py): a scan's steps, an entry and its loop nests then
# compile side by side, each on a core.
FORK_CHARS = int(os.environ.get("TRACEGRAD_TRANSLATED_FORK_CHARS", "20000"))


# `(start, wait)` of forks.py, set by it (`use_processes`) where a compile may fork:
# `start(symbol, work, load, size)` runs `work()` in a process of its own (the largest first
# when every core is taken), `wait(symbol)` waits for it and calls `load()`
_PROCESSES: list = []


def use_processes(start, wait) -> None:
    """Let translated functions compile in processes of their own: forks.py's `start`
    and `wait`."""
    _PROCESSES[:] = [start, wait]


def _compile_elsewhere(found: Translated, text: str, libraries, symbol: str, path: str,
                       argtys, names: dict) -> bool:
    """Compile `found`'s machine code in a forked process into the cache entry at `path`,
    loaded into `found` before code calling `symbol` is linked: whether it is."""
    if not _PROCESSES:
        return False

    def work():
        _save(path, argtys, found.returns, found.callees,
              _object_code(text, libraries, symbol))

    def load() -> bool:
        import llvmlite.binding as llvm

        loaded = _load(path, argtys, names)
        came = isinstance(loaded, Translated)
        if came:
            found.library = loaded.library
        else:  # that process failed: compiled here, where what fails is reported
            found.library = _compile(text, libraries, symbol)
            with contextlib.suppress(OSError):
                _save_library(path, argtys, found)
        llvm.add_symbol(symbol, found.library.get_pointer_to_function(symbol))
        return came

    return _PROCESSES[0](symbol, work, load, len(text))


def load_or_compile(dispatcher, argtys: tuple, symbol: str, kind: str | None = None
                    ) -> Translated | None:
    """`dispatcher`'s function for `argtys` translated, its machine code (from the kernel
    cache, or compiled now and cached) defining `symbol` in this process; None when it is
    not translated (Numba compiles it). `kind`: "call" for a function called by `_direct`
    (it may return nothing only), "step" for a loop's step (its carries and count); None:
    only what the cache holds (the callees of a caller compiled before, whose machine code
    calls them as they were compiled then)."""
    from numba.core.compiler_lock import global_compiler_lock

    found = _LOADED.get(symbol, False)
    if found is False:
        with global_compiler_lock:
            found = _load_or_compile(dispatcher, argtys, symbol, kind)
    elif kind is None and found is not None and found.library is None:
        with global_compiler_lock:  # compiled by another process: its machine code now
            _PROCESSES[1](symbol)
    if found is not None:
        py_func = dispatcher.py_func
        seen = _OF_FUNCTION.setdefault((py_func.__module__, py_func.__name__), [])
        if found not in seen:
            seen.append(found)
    return found


def _load_or_compile(dispatcher, argtys: tuple, symbol: str, kind) -> Translated | None:
    import llvmlite.binding as llvm

    if symbol in _LOADED:
        return _LOADED[symbol]
    py_func = dispatcher.py_func
    _MODULE_OF[symbol] = py_func.__module__
    path = _cache_path(py_func, symbol)
    found = _load(path, argtys, py_func.__globals__) if path else None
    if isinstance(found, StaleEntry):
        if kind is None:  # a caller's cached code calls it translated: compile them anew
            raise found
        found = None
    if found is not None:
        STATS["loaded"] += 1
    elif kind is None or not ENABLED:
        return None
    else:
        from tracegrad.backends.numba import helpers

        symbol_of = sys.modules[helpers.MODULE]._direct_symbol
        try:
            text, libraries, returns, callees = translate(py_func, argtys, symbol, symbol_of)
            if (returns is None) != (kind == "call"):
                raise Unsupported(f"returns {returns} from a {kind}")
        except Unsupported as e:
            if _DEBUG:
                print(f"llvmgen: {py_func.__name__}: {e}", file=sys.stderr)
            STATS["unsupported"] += 1
            _LOADED[symbol] = None
            return None
        STATS["translated"] += 1
        found = Translated(None, returns, callees)
        if path and len(text) >= FORK_CHARS and _compile_elsewhere(
                found, text, libraries, symbol, path, argtys, py_func.__globals__):
            _LOADED[symbol] = found  # its library comes when it is linked (forks.py)
            return found
        found.library = _compile(text, libraries, symbol)
        if path:
            _save_library(path, argtys, found)
    llvm.add_symbol(symbol, found.library.get_pointer_to_function(symbol))
    _LOADED[symbol] = found
    return found


def forget(module: str) -> None:
    """Translate `module`'s functions again when they are next called for: their cache
    entries are gone (a module compiled anew, into another cache directory or after a purge,
    must leave its own). The machine code loaded stays in use where it is linked."""
    for symbol in [s for s, m in _MODULE_OF.items() if m == module]:
        _LOADED.pop(symbol, None)
        del _MODULE_OF[symbol]
    for key in [k for k in _OF_FUNCTION if k[0] == module]:
        del _OF_FUNCTION[key]


def inspect_llvm(dispatcher) -> str:
    """The optimized LLVM IR of `dispatcher`'s function as translated and compiled in this
    process ("" when it was not, or was loaded from the cache as machine code)."""
    py_func = dispatcher.py_func
    found = _OF_FUNCTION.get((py_func.__module__, py_func.__name__), [])
    texts = []
    for t in found:
        try:
            texts.append(t.library.get_llvm_str())
        except Exception:  # noqa: BLE001 - a library from the cache has no IR
            continue
    return "\n".join(texts)


def call(context, builder, argtys, values, symbol: str):
    """Lower a call of the translated `symbol` with Numba values `values` of `argtys`;
    its count (an i64). An error in it raises what the Numba-compiled function would."""
    from llvmlite import ir
    from numba.core import cgutils, types
    from numba.core.callconv import excinfo_ptr_t

    i64 = ir.IntType(64)
    flat = context.get_arg_packer(argtys).as_arguments(builder, values)
    err = cgutils.alloca_once(builder, i64, size=3)
    count = cgutils.alloca_once(builder, i64)
    fnty = ir.FunctionType(ir.IntType(32), [err.type, count.type] + [v.type for v in flat])
    callee = cgutils.get_or_insert_function(builder.module, fnty, symbol)
    rc = builder.call(callee, [err, count] + list(flat))
    with cgutils.if_unlikely(builder, builder.icmp_signed("==", rc, rc.type(INDEX_ERROR))):
        found = tuple(builder.load(builder.gep(err, [i64(k)])) for k in range(3))
        context.call_conv.return_dynamic_user_exc(builder, IndexError, found,
                                                  (types.int64,) * 3)
    with cgutils.if_unlikely(builder, builder.icmp_signed("==", rc, rc.type(MEMORY_ERROR))):
        context.call_conv.return_user_exc(builder, MemoryError,
                                          ("tracegrad: a kernel's buffer could not be allocated",))
    with cgutils.if_unlikely(builder, builder.icmp_signed("==", rc, rc.type(NUMBA_ERROR))):
        code = builder.trunc(builder.load(err), ir.IntType(32))
        info = builder.inttoptr(builder.load(builder.gep(err, [i64(1)])), excinfo_ptr_t)
        status = context.call_conv._get_return_status(builder, code, info)
        context.call_conv.return_status_propagate(builder, status)
    return builder.load(count)
