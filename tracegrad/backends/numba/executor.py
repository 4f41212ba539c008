"""The call path of a compiled graph: normalise inputs, allocate outputs, call the kernel.

The kernel's compiled entry point is called directly (no Numba dispatch): its signature is
fixed (C-contiguous arrays of the traced dtypes), so every input is first made one (a
strided view, another dtype or a non-array is copied once). Output buffers are allocated
here from shapes known at compile time, or, for graphs with unknown dims, computed once
per distinct input shapes (which also checks them: a mismatch is a ShapeError naming the
op). Errors raised inside the kernel carry an op tag and become messages naming the op
and the user's line that created it.
"""

from __future__ import annotations

import numpy as np

from tracegrad.backends.numba.plan import Plan
from tracegrad.errors import ShapeError

_SHAPE_CACHE_LIMIT = 256


class Executor:
    """`executor(list of arrays) -> list of fresh arrays` for one graph."""

    __slots__ = ("plan", "entry", "source", "in_dtypes", "in_shapes", "out_dtypes",
                 "out_shapes", "tail", "static", "raises", "_shape_cache", "n_in", "_I",
                 "_has_I", "_consts", "_F", "name")

    def __init__(self, plan: Plan, entry, source: str, const_arrays, uses_I, uses_F, raises):
        graph = plan.graph
        self.plan = plan
        self.entry = entry
        self.source = source
        self.name = graph.name
        self.n_in = len(graph.all_inputs)
        self.in_dtypes = [t.dtype for t in graph.all_inputs]
        self.in_shapes = [tuple(t.shape) for t in graph.all_inputs]
        self.out_dtypes = [t.dtype for t in graph.outputs]
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

    def _int_vector(self, shapes) -> list:
        return [self.plan.int_values(shapes)] if self._has_I else []

    def __call__(self, arrays):
        if len(arrays) != self.n_in:
            raise TypeError(f"{self.name}: expected {self.n_in} arrays, got {len(arrays)}")
        args = []
        for a, dt in zip(arrays, self.in_dtypes):
            if type(a) is not np.ndarray or a.dtype is not dt or not a.flags.c_contiguous:
                a = np.ascontiguousarray(a, dtype=dt)
            args.append(a)
        if self.static:
            for a, s in zip(args, self.in_shapes):
                if a.shape != s:
                    self._shape_mismatch(args)
            out_shapes, tail = self.out_shapes, self.tail
        else:
            out_shapes, tail = self._dynamic(args)
        outs = [np.empty(s, d) for s, d in zip(out_shapes, self.out_dtypes)]
        try:
            self.entry(*args, *tail, *outs)
        except (IndexError, ValueError, ZeroDivisionError, np.linalg.LinAlgError) as e:
            raise self._error(e) from None
        return outs

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
        args = e.args
        if args and type(args[0]) is int and 0 <= args[0] < len(self.raises):
            op = self.raises[args[0]]
            name, where = op.primitive.name, f"(op created at {op.source})"
            if isinstance(e, IndexError):
                return IndexError(f"{name}: index {args[1]} is out of bounds for an axis of "
                                  f"size {args[2]} {where}")
            if name == "pow":
                return ValueError(f"pow: integers to negative integer powers are not "
                                  f"allowed {where}")
            if name == "triangular_solve":
                return np.linalg.LinAlgError(
                    f"triangular_solve: singular matrix: zero on the diagonal at row "
                    f"{args[1]} {where}")
        if isinstance(e, np.linalg.LinAlgError):
            ops = [f"{op.primitive.name} at {op.source}" for op in self.plan.graph.operations
                   if op.primitive.name in ("cholesky", "solve", "det", "slogdet")]
            return np.linalg.LinAlgError(f"{e} (in {', '.join(ops) or 'a linalg op'})")
        return e

    def __repr__(self):
        return f"<numba executor for @{self.name}>"
