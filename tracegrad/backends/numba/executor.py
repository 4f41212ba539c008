"""The call path of a compiled graph: normalise inputs, allocate outputs, call the kernel.

The kernel's compiled entry point is called directly (no Numba dispatch): its signature is
fixed (C-contiguous arrays of the traced dtypes), so every input is first made one (a
strided view, another dtype or a non-array is copied once). Output buffers are allocated
here from shapes known at compile time, or, for graphs with unknown dims, computed once
per distinct input shapes (which also checks them: a mismatch is a ShapeError naming the
op). Errors raised inside the kernel carry an op tag and become messages naming the op
and the user's line that created it.

`donating(k)` gives a second entry point, `run(arrays, donated)`, for graphs whose last `k`
outputs are the new values of Variables (tracegrad/function/_effects.py): a donated buffer
(an array of that output's shape and dtype, C-contiguous, referenced by nobody else; None
for "allocate") is written instead of a fresh one, so a training step that updates its
parameters allocates nothing. A donated buffer is never an input of the call.

The kernel's large temporaries (`kept`: codegen.py's `keep_temporaries`, graphs of known
shapes) are arguments too: the executor allocates them and keeps them for the next call,
so that their memory is not returned to the system and faulted in again every call. A call
takes a set from the executor's pool (a new one when it is empty: calls from several
threads, or a call inside a call, never share one) and gives it back after; the kernel only
writes its outputs into the output buffers, so nothing returned aliases a kept buffer.
"""

from __future__ import annotations

import math
import threading

import numpy as np

from tracegrad.backends import blas_threads, threads
from tracegrad.backends.numba import parallel
from tracegrad.backends.numba.helpers import STORAGE
from tracegrad.backends.numba.lowering import lowering
from tracegrad.backends.numba.plan import Plan
from tracegrad.errors import ShapeError, TracegradIndexError

_SHAPE_CACHE_LIMIT = 256
# Sets of temporaries an executor keeps idle at most, and the largest set it keeps
_POOL_LIMIT = 1
_KEEP_LIMIT_BYTES = 256 << 20
_PARALLEL_COMPILE = threading.Lock()  # one compile of a graph's parallel executor
_KERNEL_ERRORS = (IndexError, ValueError, ZeroDivisionError, np.linalg.LinAlgError)


class Executor:
    """`executor(list of arrays) -> list of fresh arrays` for one graph."""

    __slots__ = (
        "_F",
        "_I",
        "_consts",
        "_donating",
        "_has_I",
        "_kept",
        "_parallel",
        "_parallel_ex",
        "_parallel_runs",
        "_pool",
        "_row_split",
        "_shape_cache",
        "entry",
        "float16_out",
        "in_dtypes",
        "in_scalar",
        "in_shapes",
        "n_in",
        "name",
        "out_dtypes",
        "out_shapes",
        "plan",
        "raises",
        "run",
        "source",
        "static",
        "tail",
    )

    def __init__(self, plan: Plan, entry, source: str, const_arrays, uses_I, uses_F, raises,
                 kept=(), parallel=None, row_split=False):
        graph = plan.graph
        self.plan = plan
        self.entry = entry
        self.source = source
        self.name = graph.name
        self.n_in = len(graph.all_inputs)
        self.in_dtypes = [STORAGE[t.dtype] for t in graph.all_inputs]
        self.in_shapes = [tuple(t.shape) for t in graph.all_inputs]
        self.in_scalar = [t.ndim == 0 for t in graph.all_inputs]
        self.out_dtypes = [STORAGE[t.dtype] for t in graph.outputs]
        self.float16_out = [t.dtype != STORAGE[t.dtype] for t in graph.outputs]
        self.static = plan.static
        self.raises = raises
        self._consts = [np.ascontiguousarray(c).copy() for c in const_arrays]
        self._F = [np.array(plan.float_values, dtype=np.float64)] if uses_F else []
        self._has_I = uses_I
        self._shape_cache: dict = {}
        self._kept = list(kept)  # (shape, dtype) of each
        self._pool: list = []
        # compiles the graph's parallel executor (parallel.py), or None: always serial
        self._parallel = parallel
        # the parallel kernel is row-split: large calls (its products count too) run it at
        # one thread too (its bits differ: rows.py)
        self._row_split = row_split
        self._parallel_ex = None  # the parallel executor, once compiled
        self._parallel_runs: dict = {}
        if self.static:
            shapes = plan.static_shapes()
            self.out_shapes = [tuple(shapes[id(t)]) for t in graph.outputs]
            self.tail = self._consts + self._int_vector(shapes) + self._F
        else:
            self.out_shapes = None
            self.tail = None
        self.run = self._build_run()
        self._donating: dict = {}

    def _int_vector(self, shapes) -> list:
        return [self.plan.int_values(shapes)] if self._has_I else []

    def __call__(self, arrays):
        return self.run(arrays)

    def donating(self, k: int):
        """`run(arrays, donated)`: as `self(arrays)`, the last `k` outputs written into the
        buffers of `donated` (a list of `k` arrays or None) where given."""
        run = self._donating.get(k)
        if run is None:
            run = self._donating[k] = self._build_run(k)
        return run

    def _build_run(self, donated: int = 0):
        """A Python function specialised to this graph's arity, dtypes and (static) shapes:
        no loops, no zips, one C call per input and per output, then the kernel. With
        `donated`, it takes buffers for the last `donated` outputs as a second argument."""
        n, m = self.n_in, len(self.out_dtypes)
        ins = [f"a{i}" for i in range(n)]
        outs = [f"o{i}" for i in range(m)]
        env = {"C": np.ascontiguousarray, "A": np.asarray, "E": np.empty,
               "entry": self.entry, "ex": self, "errors": _KERNEL_ERRORS,
               "F16": np.float16, "pool": self._pool, "workspace": self._workspace,
               "T": threads}
        lines = ["def run(arrays, donated):" if donated else "def run(arrays):"]
        # a large call with more than one thread runs the parallel kernel (parallel.py)
        par = ("        return ex._parallel_run({})({})".format(
            donated, "arrays, donated" if donated else "arrays"))
        if self._parallel is not None and self.static and parallel.large_call(
                self.plan.graph, self.plan.static_shapes(), self._row_split):
            lines += [par[4:]] if self._row_split else ["    if T.num_threads > 1:", par]
        first_donated = m - donated

        def alloc(i: int, shape: str) -> str:
            if i < first_donated or self.float16_out[i]:  # float16: held as float32
                return f"    o{i} = E({shape}, od{i})"
            return (f"    o{i} = donated[{i - first_donated}]\n"
                    f"    if o{i} is None or o{i}.shape != {shape}:\n"
                    f"        o{i} = E({shape}, od{i})")

        if n:
            lines.append(f"    {', '.join(ins)}{',' if n == 1 else ''} = arrays")
        else:
            lines.append("    if arrays:\n        raise TypeError('expected no arrays')")
        for i, dt in enumerate(self.in_dtypes):
            env[f"d{i}"] = dt
            conv = "A" if self.in_scalar[i] else "C"
            lines.append(f"    a{i} = {conv}(a{i}, d{i})")
        if self.static:
            for i, shape in enumerate(self.in_shapes):
                env[f"s{i}"] = shape
            if n:
                cond = " or ".join(f"a{i}.shape != s{i}" for i in range(n))
                lines.append(f"    if {cond}:\n        ex._shape_mismatch([{', '.join(ins)}])")
            tail = []
            for k, arr in enumerate(self.tail):
                env[f"t{k}"] = arr
                tail.append(f"t{k}")
            for i, (shape, dt) in enumerate(zip(self.out_shapes, self.out_dtypes)):
                env[f"os{i}"], env[f"od{i}"] = shape, dt
                lines.append(alloc(i, f"os{i}"))
            call_args = ins + tail + outs
        else:
            lines.append(f"    shapes, tail, large = ex._dynamic([{', '.join(ins)}])")
            if self._parallel is not None:
                more = "" if self._row_split else " and T.num_threads > 1"
                lines += [f"    if large{more}:", par]
            for i, dt in enumerate(self.out_dtypes):
                env[f"od{i}"] = dt
                lines.append(alloc(i, f"shapes[{i}]"))
            call_args = ins + ["*tail"] + outs
        results = [o + ".astype(F16)" if f16 else o
                   for o, f16 in zip(outs, self.float16_out, strict=True)]
        keeps = bool(self._kept) and self._keeps()
        if keeps:
            lines += ["    try:\n        ws = pool.pop()\n    except IndexError:",
                      "        ws = workspace()"]
        elif self._kept:  # too large to keep: a new set every call
            lines.append("    ws = workspace()")
        if self._kept:
            call_args.append("*ws")
        lines += ["    try:",
                  f"        entry({', '.join(call_args)})",
                  "    except errors as e:",
                  "        raise ex._error(e) from None"]
        if keeps:
            lines += ["    finally:",
                      f"        if len(pool) < {_POOL_LIMIT}:\n            pool.append(ws)"]
        lines.append(f"    return [{', '.join(results)}]")
        # named under the package, so that error locations skip it for the user's line
        code = compile("\n".join(lines), f"{__file__}: generated run of @{self.name}", "exec")
        exec(code, env)  # noqa: S102 - the call path generated above
        return env["run"]

    def _workspace(self) -> list:
        """A new set of the kernel's kept temporaries."""
        return [np.empty(shape, dtype) for shape, dtype in self._kept]

    def _keeps(self) -> bool:
        """Whether calls give their temporaries back to the pool (not when they are huge)."""
        size = sum(math.prod(shape) * dtype.itemsize for shape, dtype in self._kept)
        return size <= _KEEP_LIMIT_BYTES

    def _parallel_run(self, donated: int):
        """The run (of `donated` outputs' buffers) of the parallel kernel."""
        run = self._parallel_runs.get(donated)
        if run is None:
            run = self._parallel_runs[donated] = parallel.ParallelRun(
                self._parallel_executor, donated)
        return run

    def _parallel_executor(self):
        """The graph's parallel executor, compiled by the first call that needs it."""
        with _PARALLEL_COMPILE:
            if self._parallel_ex is None:
                self._parallel_ex = self._parallel(threaded=True)
        return self._parallel_ex

    def _shape_mismatch(self, args):
        self.plan.shapes(args)  # raises a ShapeError naming the input
        raise ShapeError(f"{self.name}: input shapes {[a.shape for a in args]} do not match "
                         f"the traced {self.in_shapes}")

    def _dynamic(self, args):
        key = tuple(a.shape for a in args)
        found = self._shape_cache.get(key)
        if found is not None:
            return found
        shapes = self.plan.shapes(args)
        out_shapes = [tuple(shapes[id(t)]) for t in self.plan.graph.outputs]
        large = self._parallel is not None and parallel.large_call(
            self.plan.graph, shapes, self._row_split)
        result = (out_shapes, self._consts + self._int_vector(shapes) + self._F, large)
        if not self.plan.data_dependent and len(self._shape_cache) < _SHAPE_CACHE_LIMIT:
            self._shape_cache[key] = result
        return result

    def _error(self, e: Exception) -> Exception:
        blas_threads.resync()  # a BLAS call the error skipped may have lowered its count
        args = e.args
        if args and type(args[0]) is int and 0 <= args[0] < len(self.raises):
            op = self.raises[args[0]]
            where = f"(op created at {op.source})"
            if isinstance(e, IndexError):
                return TracegradIndexError(f"{op.primitive.name}: index {args[1]} is out of "
                                           f"bounds for an axis of size {args[2]} {where}")
            error = lowering(op.primitive).error
            if error is not None:
                return error(args[1:], where)
        if isinstance(e, np.linalg.LinAlgError):
            ops = [f"{op.primitive.name} at {op.source}" for op in self.plan.graph.operations
                   if lowering(op.primitive).linalg]
            return np.linalg.LinAlgError(f"{e} (in {', '.join(ops) or 'a linalg op'})")
        return e

    def __repr__(self):
        return f"<numba executor for @{self.name}>"
