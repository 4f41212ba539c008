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
"""

from __future__ import annotations

import numpy as np

from tracegrad.backends import blas_threads
from tracegrad.backends.numba.helpers import STORAGE
from tracegrad.backends.numba.lowering import lowering
from tracegrad.backends.numba.plan import Plan
from tracegrad.errors import ShapeError, TracegradIndexError

_SHAPE_CACHE_LIMIT = 256
_KERNEL_ERRORS = (IndexError, ValueError, ZeroDivisionError, np.linalg.LinAlgError)


class Executor:
    """`executor(list of arrays) -> list of fresh arrays` for one graph."""

    __slots__ = (
        "_F",
        "_I",
        "_consts",
        "_donating",
        "_has_I",
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

    def __init__(self, plan: Plan, entry, source: str, const_arrays, uses_I, uses_F, raises):
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
               "F16": np.float16}
        lines = ["def run(arrays, donated):" if donated else "def run(arrays):"]
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
            lines.append(f"    shapes, tail = ex._dynamic([{', '.join(ins)}])")
            for i, dt in enumerate(self.out_dtypes):
                env[f"od{i}"] = dt
                lines.append(alloc(i, f"shapes[{i}]"))
            call_args = ins + ["*tail"] + outs
        results = [o + ".astype(F16)" if f16 else o
                   for o, f16 in zip(outs, self.float16_out, strict=True)]
        lines += ["    try:",
                  f"        entry({', '.join(call_args)})",
                  "    except errors as e:",
                  "        raise ex._error(e) from None",
                  f"    return [{', '.join(results)}]"]
        # named under the package, so that error locations skip it for the user's line
        code = compile("\n".join(lines), f"{__file__}: generated run of @{self.name}", "exec")
        exec(code, env)  # noqa: S102 - the call path generated above
        return env["run"]

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
        result = (out_shapes, self._consts + self._int_vector(shapes) + self._F)
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
