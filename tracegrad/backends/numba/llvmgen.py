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
import inspect
import operator
import os
import sys
import textwrap

INDEX_ERROR = 1
NUMBA_ERROR = 2


class Unsupported(Exception):
    """The function uses something this translator does not know (Numba compiles it)."""


_LL = {"float64": "double", "float32": "float", "int64": "i64", "int32": "i32",
       "int16": "i16", "int8": "i8", "uint64": "i64", "uint32": "i32", "uint16": "i16",
       "uint8": "i8", "bool": "i1"}
_SIZE = {"float64": 8, "float32": 4, "int64": 8, "int32": 4, "int16": 2, "int8": 1,
         "uint64": 8, "uint32": 4, "uint16": 2, "uint8": 1, "bool": 1}
_BITS = {"int64": 64, "int32": 32, "int16": 16, "int8": 8, "uint64": 64, "uint32": 32,
         "uint16": 16, "uint8": 8, "bool": 1}
_CASTS = {"float64", "float32", "int64", "int32", "int16", "int8", "uint64", "uint32",
          "uint16", "uint8", "intp", "bool_"}
_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.Div: operator.truediv, ast.BitAnd: operator.and_, ast.BitOr: operator.or_,
           ast.BitXor: operator.xor, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}
_CMPOPS = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt,
           ast.GtE: operator.ge, ast.Eq: operator.eq, ast.NotEq: operator.ne}
_FCMP = {operator.lt: "olt", operator.le: "ole", operator.gt: "ogt", operator.ge: "oge",
         operator.eq: "oeq", operator.ne: "une"}
_ICMP = {operator.lt: "lt", operator.le: "le", operator.gt: "gt", operator.ge: "ge"}
_FLOAT_OPS = {operator.add: "fadd", operator.sub: "fsub", operator.mul: "fmul"}
_INT_OPS = {operator.add: "add", operator.sub: "sub", operator.mul: "mul",
            operator.and_: "and", operator.or_: "or", operator.xor: "xor"}
_ARRAY = "array"


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

    def __init__(self, typing, names: dict, symbol_of):
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
        self.terminated = False

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

    def alloca(self, ty: str, count: int = 1) -> str:
        t = self.tmp()
        self.allocas.append(f"{t} = alloca {ty}" + (f", i64 {count}" if count > 1 else ""))
        return t

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
        try:
            sig = self.typing.resolve_function_type(fn, tuple(_nbtype(_scalar(t))
                                                              for t in types_), {})
        except Unsupported:
            raise
        except Exception as e:  # noqa: BLE001 - Numba's typing errors vary
            raise Unsupported(f"{fn} on {types_}") from e
        if sig is None:
            raise Unsupported(f"{fn} on {types_}")
        return [_name(a) for a in sig.args], _name(sig.return_type)

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
            raise Unsupported(f"name {e.id}")
        ptr, t = found
        return self.op(f"load {_LL[t]}, ptr {ptr}"), t

    def e_UnaryOp(self, e):
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
        else:
            name = _INT_OPS[fn]
        if name is None:
            raise Unsupported(f"{fn.__name__} on {r}")
        return self.op(f"{name} {_LL[r]} {a}, {b}"), r

    def divide(self, fn, right, a, ta, b, tb, args, r):
        # Python's floor division and modulo of signed ints, by a positive constant only
        c = _constant_int(right)
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
        c = _constant_int(x)
        if c is not None and c >= 0:
            return v
        neg = self.op(f"icmp slt i64 {v}, 0")
        return self.op(f"select i1 {neg}, i64 {self.op(f'add i64 {v}, {n}')}, i64 {v}")

    def address(self, arr: _Array, idx: list[str]) -> str:
        if not idx:
            return arr.data
        elem = "i8" if arr.dtype == "bool" else _LL[arr.dtype]
        if arr.contiguous:
            flat = idx[0]
            for v, n in zip(idx[1:], arr.shape[1:]):
                flat = self.op(f"add i64 {self.op(f'mul i64 {flat}, {n}')}, {v}")
            return self.op(f"getelementptr inbounds {elem}, ptr {arr.data}, i64 {flat}")
        off = None
        for v, st in zip(idx, arr.strides):
            term = self.op(f"mul i64 {v}, {st}")
            off = term if off is None else self.op(f"add i64 {off}, {term}")
        return self.op(f"getelementptr inbounds i8, ptr {arr.data}, i64 {off}")

    def row(self, arr: _Array, idx: list[str]) -> _Array:
        """The view `arr[idx]` of its leading axes."""
        from numba.core import types

        off = None
        for v, st in zip(idx, arr.strides):
            term = self.op(f"mul i64 {v}, {st}")
            off = term if off is None else self.op(f"add i64 {off}, {term}")
        data = self.op(f"getelementptr inbounds i8, ptr {arr.data}, i64 {off}")
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
        if e.keywords:
            raise Unsupported("keywords")
        f = e.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) \
                and f.value.id == "np" and f.attr in _CASTS and len(e.args) == 1:
            v, t = self.scalar(e.args[0])
            dst = {"intp": "int64", "bool_": "bool"}.get(f.attr, f.attr)
            return self.cast(v, t, dst), dst
        if not isinstance(f, ast.Name):
            raise Unsupported("call")
        special = _CALLS.get(f.id)
        if special is not None:
            return special(self, e.args)
        return self.helper_call(f.id, e.args)

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
        if len(args) != 3:
            raise Unsupported("_index")
        (e, te), (n, tn), (tag, tt) = [self.scalar(a) for a in args]
        if any(_is_float(t) or t == "bool" for t in (te, tn, tt)):
            raise Unsupported("_index")
        g = self.cast(e, te, "int64")
        n = self.cast(n, tn, "int64")
        neg = self.op(f"icmp slt i64 {g}, 0")
        g2 = self.op(f"select i1 {neg}, i64 {self.op(f'add i64 {g}, {n}')}, i64 {g}")
        low = self.op(f"icmp slt i64 {g2}, 0")
        high = self.op(f"icmp sge i64 {g2}, {n}")
        ok = self.fail_if(self.op(f"or i1 {low}, {high}"))
        for k, v in enumerate((self.cast(tag, tt, "int64"), g, n)):
            self.emit(f"store i64 {v}, ptr {self.op(f'getelementptr i64, ptr %err, i64 {k}')}")
        self.emit(f"ret i32 {INDEX_ERROR}")
        self.resume(ok)
        return g2, "int64"

    def arrays_of(self, args, count: int) -> list[_Array]:
        if len(args) != count:
            raise Unsupported("arguments")
        found = []
        for a in args:
            v, t = self.expr(a)
            found.append(v if t == _ARRAY else None)
        return found

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
        strides, step = [], str(_SIZE[src.dtype])
        for d in reversed(dims):
            strides.insert(0, step)
            step = self.op(f"mul i64 {step}, {d}")
        return _Array(src.meminfo, src.parent, src.nitems, src.data, dims, strides,
                      types.Array(src.nbtype.dtype, len(dims), "C",
                                  readonly=not src.nbtype.mutable)), _ARRAY

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
            if t == "none":
                raise Unsupported("None passed")
            vals.append((v, t))
            argtys.append(v.nbtype if t == _ARRAY else _nbtype(t))
        return vals, tuple(argtys)

    def c_direct(self, args):
        from numba.core.registry import CPUDispatcher

        if len(args) != 2 or not isinstance(args[0], ast.Name) \
                or not isinstance(args[1], ast.Tuple):
            raise Unsupported("_direct")
        disp = self.names.get(args[0].id)
        if not isinstance(disp, CPUDispatcher):
            raise Unsupported("_direct of a non-dispatcher")
        vals, argtys = self.values_and_types(args[1].elts)
        symbol = self.symbol_of(disp, argtys)
        found = load_or_compile(disp, argtys, symbol, "call")
        if found is None or found.returns is not None:
            raise Unsupported(f"_direct of {args[0].id}, not translated")
        if (args[0].id, argtys, symbol) not in self.callees:
            self.callees.append((args[0].id, argtys, symbol))
        flat = self.flat_args(vals)
        self.decls[symbol] = f"declare i32 @\"{symbol}\"(ptr, ptr, " + \
            ", ".join(x.split(" ")[0] for x in flat) + ")"
        slot = self.alloca("i64")
        rc = self.op(f"call i32 @\"{symbol}\"(ptr %err, ptr {slot}, {', '.join(flat)})")
        ok = self.fail_if(self.op(f"icmp ne i32 {rc}, 0"))
        self.emit(f"ret i32 {rc}")
        self.resume(ok)
        return None, "none"

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
        self.emit(f"ret i32 {NUMBA_ERROR}")
        self.resume(ok)
        if ret == "none":
            return None, "none"
        if ret == "bool":
            return self.op(f"trunc i8 {self.op(f'load i8, ptr {out}')} to i1"), ret
        return self.op(f"load {_LL[ret]}, ptr {out}"), ret

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
            ptr = f"%v.{name}"
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
        if t == "none":
            raise Unsupported("None assigned")
        if t == _ARRAY:
            if not isinstance(target, ast.Name) or target.id in self.vars \
                    or target.id in self.arrays:
                raise Unsupported("array assignment")
            self.arrays[target.id] = v
            return
        self.store(target, v, t)

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
        if v is None or (isinstance(v, ast.Constant) and v.value is None):
            self.returned(None)
            self.emit("ret i32 0")
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
            self.emit("ret i32 0")
        self.terminated = True

    def returned(self, what) -> None:
        if self.returns is not False and self.returns != what:
            raise Unsupported("two kinds of return")
        self.returns = what

    def s_If(self, s):
        c, tc = self.scalar(s.test)
        yes, no, end = self.label(), self.label(), self.label()
        self.cbranch(self.cast(c, tc, "bool"), yes, no)
        self.start(yes)
        self.stmts(s.body)
        self.branch(end)
        self.start(no)
        self.stmts(s.orelse)
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
        down = step < 0
        counter = self.alloca("i64")
        self.emit(f"store i64 {start}, ptr {counter}")
        head, body, latch, end = self.label(), self.label(), self.label(), self.label()
        self.start(head)
        i = self.op(f"load i64, ptr {counter}")
        self.cbranch(self.op(f"icmp {'sgt' if down else 'slt'} i64 {i}, {stop}"), body, end)
        self.start(body)
        self.assign_name(s.target.id, i, "int64")
        self.loops.append((latch, end))
        self.stmts(s.body)
        self.loops.pop()
        self.start(latch)
        self.emit(f"store i64 {self.op(f'add i64 {i}, {step}')}, ptr {counter}")
        self.branch(head)
        self.start(end)

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
          ast.BoolOp: _Fn.e_BoolOp, ast.Subscript: _Fn.e_Subscript, ast.Call: _Fn.e_Call}
_STMTS = {ast.Assign: _Fn.s_Assign, ast.AugAssign: _Fn.s_AugAssign, ast.Expr: _Fn.s_Expr,
          ast.Pass: _Fn.s_Pass, ast.Return: _Fn.s_Return, ast.If: _Fn.s_If,
          ast.While: _Fn.s_While, ast.For: _Fn.s_For, ast.Break: _Fn.s_Break,
          ast.Continue: _Fn.s_Continue}
_CALLS = {"abs": _Fn.c_abs, "min": _Fn.c_min, "max": _Fn.c_max, "_index": _Fn.c_index,
          "_ccopy": _Fn.c_ccopy, "_crow": _Fn.c_crow, "_cview": _Fn.c_cview,
          "_fma": _Fn.c_fma, "_direct": _Fn.c_direct}


def _constant_int(e) -> int | None:
    """The value of an int literal (`3`, `-1`), else None."""
    sign = 1
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
        sign, e = -1, e.operand
    if isinstance(e, ast.Constant) and isinstance(e.value, int) \
            and not isinstance(e.value, bool):
        return sign * e.value
    return None


_HELPER_CRES: dict = {}


def _helper(disp, argtys):
    key = (disp, argtys)
    found = _HELPER_CRES.get(key)
    if found is None:
        try:
            disp.compile(argtys)
        except Exception as e:  # noqa: BLE001 - Numba's typing errors vary
            raise Unsupported(f"{disp.py_func.__name__}{argtys}") from e
        found = _HELPER_CRES[key] = disp.overloads[argtys]
    return found


def translate(py_func, argtys, symbol: str, symbol_of):
    """`(ir_text, libraries, returns, callees)`: the LLVM module defining `symbol`, the
    translation of `py_func` for Numba argument types `argtys`; the Numba code libraries
    of the helpers it calls; None when it returns nothing, else the indices of the
    arguments it returns before its count; `(name, argtys, symbol)` of the functions it
    calls by `_direct` (translated and loaded). `symbol_of(dispatcher, argtys)`: the
    symbol of a function it calls by `_direct`. Raises Unsupported."""
    from numba.core import types
    from numba.core.registry import cpu_target

    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(py_func)))
    except (OSError, TypeError, SyntaxError) as e:
        raise Unsupported("no source") from e
    fdef = tree.body[0]
    if not isinstance(fdef, ast.FunctionDef) or fdef.args.vararg or fdef.args.kwarg \
            or fdef.args.kwonlyargs or fdef.args.defaults or fdef.args.posonlyargs \
            or len(fdef.args.args) != len(argtys):
        raise Unsupported("signature")
    _codegen()
    fn = _Fn(cpu_target.typing_context, py_func.__globals__, symbol_of)
    fn.params = [a.arg for a in fdef.args.args]
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
        fn.emit("ret i32 0")
    lines = [f"define i32 @\"{symbol}\"({', '.join(params)}) {{", "entry:"]
    lines += ["  " + a for a in fn.allocas] + fn.body + ["}"]
    text = "\n".join(list(fn.decls.values()) + lines
                     + ['!0 = !{!"branch_weights", i32 1, i32 1048576}']) + "\n"
    return text, fn.libraries, fn.returns, fn.callees


# -- compiled, cached and linked ---------------------------------------------------------

class Translated:
    """A function translated here and loaded: its code library, and what it returns
    (None: nothing; else the indices of the arguments returned before its count)."""

    __slots__ = ("library", "returns", "callees")

    def __init__(self, library, returns, callees):
        self.library, self.returns, self.callees = library, returns, callees


# Whether functions are translated (env TRACEGRAD_NUMBA_TRANSLATE=0: all go to Numba).
ENABLED = os.environ.get("TRACEGRAD_NUMBA_TRANSLATE", "1") != "0"
_LOADED: dict = {}  # symbol -> Translated, or None (Numba compiles it)
_OF_FUNCTION: dict = {}  # (module, function name) -> [Translated]
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
                entry = pickle.load(f)
            if entry[0] == _FORMAT:
                found.append(entry[1])
        except Exception:  # noqa: BLE001 - an unreadable entry is translated again
            continue
    return found


_READY: list = []


def _codegen():
    from numba.core.registry import cpu_target

    ctx = cpu_target.target_context
    if not _READY:  # Numba's typing, and its runtime (NRT), which linked helpers may call
        cpu_target.typing_context.refresh()
        ctx.refresh()
        _READY.append(True)
    return ctx.codegen()


class StaleEntry(RuntimeError):
    """A translated function's cache entry could not be loaded (it is deleted): machine code
    compiled to call it must be compiled again."""


_FORMAT = 1  # of the cache entries


def _load(path: str, argtys, names: dict):
    """The entry at `path`: a Translated, None when there is none, or StaleEntry (an entry
    that cannot be loaded, now deleted)."""
    import pickle

    codegen = _codegen()
    try:
        with open(path, "rb") as f:
            entry = pickle.load(f)
    except FileNotFoundError:
        return None
    except Exception:  # noqa: BLE001 - an unreadable entry is a stale one
        entry = None
    try:
        fmt, saved_argtys, magic, returns, callees, state = entry
        if fmt != _FORMAT or saved_argtys != argtys or magic != codegen.magic_tuple():
            raise ValueError("another format, machine or signature")
        for name, types_, symbol in callees:  # their machine code first: this code calls it
            if name not in names or load_or_compile(names[name], types_, symbol,
                                                    "call") is None:
                raise ValueError(f"its callee {name} is not translated")
        return Translated(codegen.unserialize_library(state), returns, callees)
    except Exception as e:  # noqa: BLE001 - whatever it is, the entry is of no use
        try:
            os.unlink(path)
        except OSError:
            pass
        return StaleEntry(f"tracegrad: the translated code in {path} could not be loaded "
                          f"({type(e).__name__}: {e}); it was deleted")


def _save(path: str, argtys, found: Translated) -> None:
    import pickle

    data = pickle.dumps((_FORMAT, argtys, _codegen().magic_tuple(), found.returns,
                         found.callees, found.library.serialize_using_object_code()))
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


def _compile(text: str, libraries, symbol: str):
    from numba.core.compiler_lock import global_compiler_lock

    with global_compiler_lock:
        return _compile_locked(text, libraries, symbol)


def _compile_locked(text: str, libraries, symbol: str):
    import llvmlite.binding as llvm

    codegen = _codegen()
    library = codegen.create_library(symbol)
    library.enable_object_caching()
    module = llvm.parse_assembly(text)
    module.triple = llvm.get_process_triple()
    module.data_layout = codegen._data_layout
    module.verify()
    library.add_llvm_module(module)
    for lib in libraries:
        library.add_linking_library(lib)
    library.finalize()
    return library


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
    if found is not False:
        return found
    with global_compiler_lock:
        return _load_or_compile(dispatcher, argtys, symbol, kind)


def _load_or_compile(dispatcher, argtys: tuple, symbol: str, kind) -> Translated | None:
    import llvmlite.binding as llvm

    if symbol in _LOADED:
        return _LOADED[symbol]
    py_func = dispatcher.py_func
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
        found = Translated(_compile(text, libraries, symbol), returns, callees)
        STATS["translated"] += 1
        if path:
            _save(path, argtys, found)
    llvm.add_symbol(symbol, found.library.get_pointer_to_function(symbol))
    _LOADED[symbol] = found
    _OF_FUNCTION.setdefault((py_func.__module__, py_func.__name__), []).append(found)
    return found


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
    with cgutils.if_unlikely(builder, builder.icmp_signed("==", rc, rc.type(NUMBA_ERROR))):
        code = builder.trunc(builder.load(err), ir.IntType(32))
        info = builder.inttoptr(builder.load(builder.gep(err, [i64(1)])), excinfo_ptr_t)
        status = context.call_conv._get_return_status(builder, code, info)
        context.call_conv.return_status_propagate(builder, status)
    return builder.load(count)
