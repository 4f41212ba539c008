"""`tg.function`, `ConcreteFunction` and `tg.trace`: the trace cache and the call path.

The first call with a new input signature (structure, dtypes, shapes, static values)
traces the Python function into a `FuncGraph` and compiles it with the chosen backend;
later calls with that signature go straight to the compiled code:
flatten -> signature key -> dict lookup -> call -> unflatten.
"""

from __future__ import annotations

import functools
import inspect
import os
import warnings
import weakref
from typing import Any, Callable

import numpy as np

from tracegrad.core import dtypes, tree
from tracegrad.core.ir import EagerTensor, FuncGraph, GraphTensor, Tensor
from tracegrad.core.source import user_location
from tracegrad.core.state import state
from tracegrad.core.types import TensorSpec, TensorType
from tracegrad.core.variables import Variable
from tracegrad.errors import DTypeError, RetracingWarning, ShapeError, TracegradError

BACKENDS = ("numba", "numpy")
RETRACE_WARNING_THRESHOLD = 10


class Config:
    """Process-wide defaults: `backend` (env TRACEGRAD_BACKEND) and `parallel`."""

    def __init__(self):
        self.backend = os.environ.get("TRACEGRAD_BACKEND", "numpy")
        self.parallel = False


config = Config()


# -- leaves and signature keys ---------------------------------------------------------------

_WEAK = {
    float: ((), dtypes.float64, True),
    int: ((), dtypes.int64, True),
    bool: ((), dtypes.bool_, True),
}


class _Static:
    """Marks where a static argument sits in the flattened arguments."""

    __slots__ = ("index",)

    def __init__(self, index):
        self.index = index

    def __eq__(self, other):
        return type(other) is _Static and other.index == self.index

    def __hash__(self):
        return hash(("static", self.index))


class _ArgSpec(TensorSpec):
    """A TensorSpec for a traced argument, remembering whether it was a weak Python scalar."""

    __slots__ = ("weak",)

    def __init__(self, shape, dtype, name=None, weak=False):
        super().__init__(shape, dtype, name)
        self.weak = weak

    def __eq__(self, other):
        return super().__eq__(other) and getattr(other, "weak", False) == self.weak

    def __hash__(self):
        return hash((self.shape, self.dtype, self.name, self.weak))


def _leaf_spec(x):
    """`(shape, dtype, weak)` of an array leaf, or None for a non-array leaf."""
    t = type(x)
    if t is np.ndarray:
        return (x.shape, x.dtype, False)
    if t is EagerTensor:
        v = x._value
        return (v.shape, v.dtype, False)
    spec = _WEAK.get(t)
    if spec is not None:
        return spec
    if isinstance(x, Variable):
        return (x._value.shape, x._value.dtype, False)
    if isinstance(x, (np.ndarray, np.generic)):
        return (np.shape(x), np.asarray(x).dtype, False)
    if isinstance(x, (list, tuple)):  # only reached for namedtuple-like leaves
        return None
    return None


def _as_array(x, dtype) -> np.ndarray:
    t = type(x)
    if t is np.ndarray:
        return x if x.dtype == dtype else x.astype(dtype)
    if t is EagerTensor:
        return x._value
    if isinstance(x, Variable):
        return x.value()._value
    return np.asarray(x, dtype=dtype)


# -- concrete functions ----------------------------------------------------------------------


class ConcreteFunction:
    """One traced graph of a `Function`, for one input signature; callable.

    `graph` is the `FuncGraph`; `structured_input_signature` the `(args, kwargs)` specs.
    """

    def __init__(self, graph: FuncGraph, in_treedef, in_specs, out_treedef, backend, parallel,
                 python_name: str):
        self.graph = graph
        self._in_treedef = in_treedef
        self._in_specs = in_specs  # per flat leaf: TensorSpec or _Static
        self._out_treedef = out_treedef
        self._backend = backend
        self._parallel = parallel
        self._executor = None
        self._variables = [v for v, _ in graph.captures if isinstance(v, Variable)]
        self._array_leaves = [i for i, s in enumerate(in_specs) if isinstance(s, TensorSpec)]
        self._dtypes = [in_specs[i].dtype for i in self._array_leaves]
        self.name = python_name

    @property
    def structured_input_signature(self):
        args, kwargs = tree.unflatten(self._in_treedef, [
            s if isinstance(s, TensorSpec) else None for s in self._in_specs
        ])
        return args, kwargs

    @property
    def structured_outputs(self):
        return tree.unflatten(self._out_treedef, [
            TensorSpec(t.shape, t.dtype) for t in self.graph.outputs
        ])

    @property
    def executor(self):
        if self._executor is None:
            self._executor = compile_graph(self.graph, self._backend, self._parallel)
        return self._executor

    def _run(self, leaves, eager: bool):
        arrays = [_as_array(leaves[i], d) for i, d in zip(self._array_leaves, self._dtypes)]
        if self._variables:
            arrays += [v._value for v in self._variables]
        outs = self.executor(arrays)
        if eager:
            results = [EagerTensor(o) for o in outs]
            if state.tapes:
                _record_call(self, leaves, results)
        else:
            results = [o[()] if o.ndim == 0 else o for o in outs]
        return tree.unflatten(self._out_treedef, results)

    def __call__(self, *args, **kwargs):
        leaves, treedef = tree.flatten((args, kwargs))
        if treedef != self._in_treedef:
            raise TypeError(
                f"{self.name}: this concrete function takes arguments structured as "
                f"{tree.treedef_str(self._in_treedef)}, got {tree.treedef_str(treedef)}"
            )
        eager = False
        for x, spec in zip(leaves, self._in_specs, strict=True):
            if isinstance(spec, TensorSpec):
                _check_against_spec(self.name, x, spec)
                eager = eager or isinstance(x, (EagerTensor, Variable))
        return self._run(leaves, eager)

    def __repr__(self):
        return f"<ConcreteFunction {self.name}{self.structured_input_signature}>"


def _record_call(concrete, leaves, results):
    """Record a compiled call on the recording tapes (installed by the autodiff layer)."""
    recorder = _CALL_RECORDER[0]
    if recorder is not None:
        recorder(concrete, leaves, results)


_CALL_RECORDER: list = [None]


def _check_against_spec(name, x, spec: TensorSpec):
    s = _leaf_spec(x)
    if s is None:
        raise TypeError(f"{name}: expected an array for {spec}, got {type(x).__name__}")
    shape, dtype, _ = s
    if len(shape) != len(spec.shape) or any(
        d is not None and d != n for d, n in zip(spec.shape, shape)
    ):
        raise ShapeError(
            f"{name}: argument of shape {tuple(shape)} does not match {spec} "
            f"(at {user_location()})"
        )
    if dtype != spec.dtype and not (
        isinstance(x, (bool, int, float)) or np.can_cast(dtype, spec.dtype, "same_kind")
    ):
        raise DTypeError(f"{name}: argument of dtype {dtype} does not match {spec}")


def compile_graph(graph: FuncGraph, backend: str | None, parallel: bool | None = None):
    """The executor `run(list of arrays) -> list of arrays` for `graph` on `backend`."""
    backend = backend or config.backend
    if backend == "numpy":
        from tracegrad.transforms.evaluate import compile_graph as compile_numpy

        return compile_numpy(graph)
    if backend == "numba":
        from tracegrad.backends.numba import compile_graph as compile_numba
        from tracegrad.passes import optimize

        return compile_numba(optimize(graph), parallel=config.parallel if parallel is None
                             else parallel)
    raise ValueError(f"unknown backend {backend!r}; choose one of {BACKENDS}")


# -- tracing ---------------------------------------------------------------------------------


def _leaf_names(fn, args, kwargs) -> list[str]:
    """A readable name for each flat leaf of `(args, kwargs)`."""
    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        params = []
    names = []
    for i, a in enumerate(args):
        base = params[i] if i < len(params) else f"arg{i}"
        leaves, _ = tree.flatten(a)
        names += [base] if len(leaves) == 1 else [f"{base}_{j}" for j in range(len(leaves))]
    for k in sorted(kwargs):
        leaves, _ = tree.flatten(kwargs[k])
        names += [k] if len(leaves) == 1 else [f"{k}_{j}" for j in range(len(leaves))]
    return names


def trace_to_graph(fn: Callable, in_specs, in_treedef, static_values,
                   name: str | None = None):
    """Trace `fn` with placeholders for the TensorSpec leaves; returns (graph, out_treedef)."""
    graph = FuncGraph(name or getattr(fn, "__name__", "fn"), outer=state.graph)
    names = _leaf_names(fn, *tree.unflatten(in_treedef, in_specs))
    with graph.as_default():
        values = []
        for i, spec in enumerate(in_specs):
            if isinstance(spec, TensorSpec):
                values.append(graph.add_input(
                    TensorType(spec.shape, spec.dtype, getattr(spec, "weak", False)),
                    names[i] if i < len(names) else None,
                ))
            else:
                values.append(static_values[spec.index])
        call_args, call_kwargs = tree.unflatten(in_treedef, values)
        out = fn(*call_args, **call_kwargs)
        out_leaves, out_treedef = tree.flatten(out)
        outputs = []
        for x in out_leaves:
            if not isinstance(x, (Tensor, Variable, np.ndarray, np.generic, bool, int, float)):
                raise TracegradError(
                    f"{graph.name}: returned a {type(x).__name__}; a traced function returns "
                    "tensors, arrays, Python scalars and structures of them"
                )
            outputs.append(graph.to_tensor(x))
        graph.outputs = outputs
    return graph, out_treedef


class Function:
    """A Python function traced once per input signature and compiled (`tg.function`)."""

    def __init__(self, fn: Callable, *, input_signature=None, static_argnums=(),
                 static_argnames=(), backend: str | None = None, reduce_retracing: bool = False,
                 parallel: bool | None = None):
        if backend is not None and backend not in BACKENDS:
            raise ValueError(f"unknown backend {backend!r}; choose one of {BACKENDS}")
        self.python_function = fn
        functools.update_wrapper(self, fn)
        self._backend = backend
        self._parallel = parallel
        self._reduce_retracing = reduce_retracing
        self._signature = _safe_signature(fn)
        self._static_argnums, self._static_argnames = _normalize_static(
            self._signature, static_argnums, static_argnames
        )
        self._input_signature = None if input_signature is None else tuple(input_signature)
        self._cache: dict[Any, ConcreteFunction] = {}
        self._relaxed: dict[Any, list] = {}
        self._shapes_seen: set = set()
        self._warned = False
        self.tracing_count = 0
        self._descriptor_cache = weakref.WeakKeyDictionary()

    # -- the call path ---------------------------------------------------------------------

    def __call__(self, *args, **kwargs):
        if state.graph is not None:
            return self.python_function(*args, **kwargs)
        if kwargs or self._static_argnums or self._static_argnames:
            args, kwargs, statics = self._split_static(args, kwargs)
        else:
            statics = ()
        leaves, treedef = tree.flatten((args, kwargs))
        specs = []
        eager = False
        for x in leaves:
            s = _leaf_spec(x)
            if s is None:
                if type(x) is _Static:
                    specs.append(x)
                    continue
                s = ("static-leaf", _hashable_static(x))
            elif not eager and isinstance(x, (EagerTensor, Variable)):
                eager = True
            specs.append(s)
        key = (treedef, tuple(specs), statics)
        concrete = self._cache.get(key)
        if concrete is None:
            concrete = self._concrete_for(key, leaves, treedef, specs, statics)
        return concrete._run(leaves, eager)

    def _split_static(self, args, kwargs):
        """Canonical (args, kwargs) with static arguments replaced by markers, and their values."""
        if kwargs and self._signature is not None:
            try:
                bound = self._signature.bind(*args, **kwargs)
            except TypeError as e:
                raise TypeError(f"{self.__name__}(): {e}") from None
            args, kwargs = bound.args, dict(bound.kwargs)
        statics = []
        if self._static_argnums:
            args = list(args)
            for i in self._static_argnums:
                if i < len(args):
                    statics.append(_hashable_static(args[i], i))
                    args[i] = _Static(len(statics) - 1)
            args = tuple(args)
        if self._static_argnames and kwargs:
            for k in self._static_argnames:
                if k in kwargs:
                    statics.append(_hashable_static(kwargs[k], k))
                    kwargs[k] = _Static(len(statics) - 1)
        return args, kwargs, tuple(statics)

    def _concrete_for(self, key, leaves, treedef, specs, statics) -> ConcreteFunction:
        in_specs = []
        static_values = list(statics)
        for x, s in zip(leaves, specs):
            if type(s) is _Static:
                in_specs.append(s)
            elif s[0] == "static-leaf":
                static_values.append(x)
                in_specs.append(_Static(len(static_values) - 1))
            else:
                shape, dtype, weak = s
                dtype = dtypes.canonicalize(dtype, op=self.__name__)
                in_specs.append(_ArgSpec(shape, dtype, None, weak))
        if self._input_signature is not None:
            in_specs = self._apply_input_signature(leaves, treedef, in_specs)
        elif self._reduce_retracing:
            in_specs = self._relax(treedef, in_specs, statics)
        relaxed_key = (treedef, tuple(in_specs), statics, tuple(
            v for v in static_values[len(statics):]))
        concrete = self._cache.get(relaxed_key)
        if concrete is None:
            concrete = self._trace(treedef, in_specs, static_values)
            self._cache[relaxed_key] = concrete
        if not any(None in s.shape for s in in_specs if isinstance(s, TensorSpec)):
            self._cache[key] = concrete
        elif len(self._cache) < 4096:
            self._cache[key] = concrete
        return concrete

    def _apply_input_signature(self, leaves, treedef, in_specs):
        sig_leaves, sig_def = tree.flatten(self._input_signature)
        _, args_def = tree.flatten(tree.unflatten(treedef, leaves)[0])
        if sig_def != args_def and len(sig_leaves) != sum(
            isinstance(s, TensorSpec) for s in in_specs
        ):
            raise TypeError(
                f"{self.__name__}: arguments structured as {tree.treedef_str(args_def)} do not "
                f"match input_signature {tree.treedef_str(sig_def)}"
            )
        out, k = [], 0
        for x, s in zip(leaves, in_specs):
            if isinstance(s, TensorSpec):
                spec = sig_leaves[k]
                k += 1
                _check_against_spec(self.__name__, x, spec)
                out.append(_ArgSpec(spec.shape, spec.dtype, spec.name))
            else:
                out.append(s)
        return out

    def _relax(self, treedef, in_specs, statics):
        dtype_key = (treedef, statics, tuple(
            (s.dtype, len(s.shape), s.name) if isinstance(s, TensorSpec) else s for s in in_specs
        ))
        seen = self._relaxed.get(dtype_key)
        if seen is None:
            self._relaxed[dtype_key] = [s.shape if isinstance(s, TensorSpec) else None
                                        for s in in_specs]
            return in_specs
        relaxed = []
        for s, old in zip(in_specs, seen):
            if isinstance(s, TensorSpec):
                shape = tuple(a if a == b else None for a, b in zip(s.shape, old))
                relaxed.append(_ArgSpec(shape, s.dtype, s.name, s.weak))
            else:
                relaxed.append(s)
        self._relaxed[dtype_key] = [s.shape if isinstance(s, TensorSpec) else None
                                    for s in relaxed]
        return relaxed

    def _trace(self, treedef, in_specs, static_values) -> ConcreteFunction:
        graph, out_treedef = trace_to_graph(
            self.python_function, in_specs, treedef,
            static_values, name=getattr(self.python_function, "__name__", "fn"),
        )
        self.tracing_count += 1
        shapes = tuple(s.shape for s in in_specs if isinstance(s, TensorSpec))
        self._shapes_seen.add(shapes)
        if len(self._shapes_seen) > RETRACE_WARNING_THRESHOLD and not self._warned:
            self._warned = True
            warnings.warn(
                f"{self.__name__} has been traced {self.tracing_count} times for "
                f"{len(self._shapes_seen)} different input shapes; pass "
                "reduce_retracing=True or an input_signature with None dims to trace once",
                RetracingWarning,
                stacklevel=4,
            )
        return ConcreteFunction(graph, treedef, in_specs, out_treedef, self._backend,
                                self._parallel, self.__name__)

    # -- introspection ---------------------------------------------------------------------

    def get_concrete_function(self, *args, **kwargs) -> ConcreteFunction:
        """The ConcreteFunction for these arguments; `tg.TensorSpec`s stand for arrays."""
        if not args and not kwargs and self._input_signature is not None:
            args = self._input_signature
        if kwargs or self._static_argnums or self._static_argnames:
            args, kwargs, statics = self._split_static(args, kwargs)
        else:
            statics = ()
        leaves, treedef = tree.flatten((args, kwargs))
        specs = []
        for x in leaves:
            if isinstance(x, TensorSpec):
                specs.append((x.shape, x.dtype, False))
            elif type(x) is _Static:
                specs.append(x)
            else:
                s = _leaf_spec(x)
                specs.append(s if s is not None else ("static-leaf", _hashable_static(x)))
        key = (treedef, tuple(specs), statics)
        concrete = self._cache.get(key)
        if concrete is None:
            concrete = self._concrete_for(key, leaves, treedef, specs, statics)
        return concrete

    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        bound = self._descriptor_cache.get(instance)
        if bound is None:
            bound = Function(
                functools.partial(self.python_function, instance),
                input_signature=self._input_signature,
                static_argnums=tuple(i - 1 for i in self._static_argnums if i > 0),
                static_argnames=self._static_argnames,
                backend=self._backend,
                reduce_retracing=self._reduce_retracing,
                parallel=self._parallel,
            )
            functools.update_wrapper(bound, self.python_function)
            self._descriptor_cache[instance] = bound
        return bound

    def __repr__(self):
        return f"<tg.Function {self.__name__} (traced {self.tracing_count}x)>"


def _safe_signature(fn):
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


def _normalize_static(signature, argnums, argnames):
    argnums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    argnames = (argnames,) if isinstance(argnames, str) else tuple(argnames)
    if signature is None:
        return tuple(sorted(argnums)), argnames
    params = list(signature.parameters.values())
    positional = [p.name for p in params
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    nums = set()
    for i in argnums:
        nums.add(i if i >= 0 else len(positional) + i)
    names = set(argnames)
    for name in argnames:
        if name in positional:
            nums.add(positional.index(name))
    for i in list(nums):
        if i < len(positional):
            names.add(positional[i])
    return tuple(sorted(nums)), tuple(sorted(names))


def _hashable_static(value, where=None):
    try:
        hash(value)
    except TypeError:
        what = f"static argument {where!r}" if where is not None else "a non-array argument"
        raise TypeError(
            f"{what} must be hashable (it is part of the trace cache key), got "
            f"{type(value).__name__}; pass arrays as traced arguments instead"
        ) from None
    return value


def function(fn: Callable | None = None, *, input_signature=None, static_argnums=(),
             static_argnames=(), backend: str | None = None, reduce_retracing: bool = False,
             parallel: bool | None = None):
    """Trace `fn` once per input signature into a FuncGraph and compile it.

    Usable as `@tg.function`, `@tg.function(backend="numpy")` or `tg.function(fn, ...)`.
    Python scalars are traced as weakly typed rank-0 tensors (a new value does not
    retrace); `static_argnums` / `static_argnames` bake values into the trace instead.
    """
    options = dict(input_signature=input_signature, static_argnums=static_argnums,
                   static_argnames=static_argnames, backend=backend,
                   reduce_retracing=reduce_retracing, parallel=parallel)
    if fn is None:
        return lambda f: Function(f, **options)
    return Function(fn, **options)


def trace(fn: Callable, *, static_argnums=(), static_argnames=()):
    """`tg.trace(fn)(*args) -> FuncGraph`: trace without compiling (TensorSpecs allowed)."""
    def traced(*args, **kwargs) -> FuncGraph:
        f = fn if isinstance(fn, Function) else Function(
            fn, static_argnums=static_argnums, static_argnames=static_argnames)
        return f.get_concrete_function(*args, **kwargs).graph

    return traced
