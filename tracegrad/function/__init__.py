"""`tg.function`, `ConcreteFunction` and `tg.trace`: the trace cache and the call path.

The first call with a new input signature (structure, dtypes, shapes, static values)
traces the Python function into a `FuncGraph`; later calls with that signature go
straight to the compiled graph: flatten -> signature key -> dict lookup -> convert ->
call -> unflatten. Calls whose arguments are all top-level arrays (the common case)
take a shorter path keyed by the arrays' shapes and dtypes alone.
"""

from __future__ import annotations

import atexit
import functools
import gc
import importlib
import operator
import os
import queue
import sys
import threading
import time
import warnings
import weakref
from collections.abc import Callable
from typing import Any

from tracegrad import backends
from tracegrad.backends import blas_threads, threads
from tracegrad.core import tree
from tracegrad.core.hooks import Hook
from tracegrad.core.ir import EagerTensor, FuncGraph, GraphTensor
from tracegrad.core.source import user_frame
from tracegrad.core.state import state
from tracegrad.core.types import TensorSpec
from tracegrad.core.variables import Variable
from tracegrad.core.verify import sub_graphs
from tracegrad.errors import (
    ArgumentTypeError, InvalidArgumentError, RetracingWarning, TracegradError, UsageError,
)
from tracegrad.function._keys import (
    _canonical_entries,
    _check_leaf,
    _describe,
    _dims_fit,
    _entry,
    _family,
    _fast_key,
    _is_array,
    _leaf_names,
    _native_leaf,
    _ndarray,
    _normalize_static,
    _safe_signature,
    _Static,
    _StaticLeaf,
    _to_array,
    _typed_key,
    check_narrowed,
    narrowed_int_inputs,
)
from tracegrad.function import _pickle
from tracegrad.function._effects import traced_write
from tracegrad.function._trace import trace_graph
from tracegrad.ops import convert_element_type
from tracegrad.ops.custom import call_p
from tracegrad.transforms.custom import CompiledCall, make_call_recorder
from tracegrad.transforms.tape import inline_recorded
from tracegrad.transforms.tape_cache import set_kernel_compiler

BACKENDS = ("numba", "numpy")
RETRACE_WARNING_THRESHOLD = 10  # distinct input shapes traced before RetracingWarning
EXACT_KEYS_PER_FUNCTION = 4096  # memoized call signatures that map onto None-dim traces


class Config:
    """Process-wide settings.

    - `backend`: used when a function names none ("numpy" or "numba"; env TRACEGRAD_BACKEND);
    - `parallel`: the numba backend's default for `parallel`: large calls run their loops
      on `num_threads` threads (True; env TRACEGRAD_PARALLEL=1), none do (False; env
      TRACEGRAD_PARALLEL=0), or only those of a graph that splits into independent rows,
      such as a vmap or per-example Jacobians (None, the default; docs/numba.md,
      "Parallel loops");
    - `verify`: check every traced graph, and every optimized graph the numba backend
      compiles, with `tracegrad.core.verify` (env TRACEGRAD_VERIFY=1);
    - `background_compile`: a numba function's first calls run the numpy backend (the
      reference) while its kernel compiles in a background thread, and switch to the kernel
      once it is ready (default on; env TRACEGRAD_BACKGROUND_COMPILE=0 makes the first call
      wait for the kernel). Results of the two agree within the numba backend's documented
      bounds (docs/function.md, "The first call").
    - `tape_kernels`: the backward pass of an eager tape whose structure repeats (docs/tape.md,
      "The cached backward pass") runs as a numba kernel once its NumPy replays took
      `tape_cache.KERNEL_AFTER_SECONDS` (default on; env TRACEGRAD_TAPE_KERNELS=0 keeps
      the NumPy replay, bit-identical to the walk);
    - `vector_width`: the vector width in bits (256 or 512) LLVM prefers for the loops of
      numba kernels compiled from then on; None (the default) leaves it to LLVM, which
      picks 256 on most AVX-512 CPUs (env TRACEGRAD_VECTOR_WIDTH; docs/numba.md, "Vector
      units").
    - `defer_compile_above`: in the background mode, a graph whose compile is expected to
      take longer than this many seconds (its op count times the measured compile cost per
      op: `compile_estimate`) starts compiling only once its calls have spent as long on
      the numpy backend, so a huge graph called once is never compiled (default 30; None:
      never defer; env TRACEGRAD_DEFER_COMPILE_ABOVE; docs/numba.md, "When a kernel is
      compiled").
    - `num_threads`: the threads a numba kernel's loops and its BLAS calls may use (default:
      the cores available to the process, after its CPU affinity and cgroup quota; env
      TRACEGRAD_NUM_THREADS).
    - `compile_memory_limit`: the memory a numba compile may take, in bytes (an int, or a
      string such as "8G"), or None for no limit (the default; env
      TRACEGRAD_COMPILE_MEMORY_LIMIT). With a limit, every compile runs in a child process
      (Linux), and one that exceeds it warns and runs the function on the numpy backend
      (docs/numba.md, "Large compiles run in a child process").
    """

    def __init__(self):
        self.backend = os.environ.get("TRACEGRAD_BACKEND", "numba")
        self.parallel = {"": None, "0": False}.get(
            os.environ.get("TRACEGRAD_PARALLEL", "").strip(), True)
        self.verify = os.environ.get("TRACEGRAD_VERIFY", "") not in ("", "0")
        self.background_compile = os.environ.get("TRACEGRAD_BACKGROUND_COMPILE", "1") not in (
            "", "0")
        self.tape_kernels = os.environ.get("TRACEGRAD_TAPE_KERNELS", "1") not in ("", "0")
        defer = os.environ.get("TRACEGRAD_DEFER_COMPILE_ABOVE", "30")
        self.defer_compile_above = None if defer.lower() in ("", "none") else float(defer)
        width = os.environ.get("TRACEGRAD_VECTOR_WIDTH", "")
        self.vector_width = int(width) if width.isdigit() else (width or None)

    @property
    def num_threads(self) -> int:
        return threads.num_threads

    @num_threads.setter
    def num_threads(self, count):
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise InvalidArgumentError(
                f"tg.config.num_threads must be a positive int, got {count!r}")
        threads.num_threads = count
        blas_threads.resync()

    @property
    def vector_width(self) -> int | None:
        return backends.vector_width

    @vector_width.setter
    def vector_width(self, bits):
        if bits is not None and (isinstance(bits, bool) or bits not in (256, 512)):
            raise InvalidArgumentError(
                f"tg.config.vector_width must be 256, 512 or None (LLVM's choice), got "
                f"{bits!r}")
        backends.vector_width = bits

    @property
    def compile_memory_limit(self) -> int | None:
        return backends.compile_memory_limit

    @compile_memory_limit.setter
    def compile_memory_limit(self, size):
        try:
            backends.compile_memory_limit = backends.parse_bytes(size)
        except ValueError as e:
            raise InvalidArgumentError(f"tg.config.compile_memory_limit: {e}") from None


config = Config()


def compile_graph(graph: FuncGraph, backend: str | None = None, parallel: bool | None = None,
                  *, optimized: bool = False):
    """The executor `run(list of arrays) -> list of arrays` for `graph` on `backend`.

    The numpy backend (the reference) runs the graph as traced; the numba backend
    compiles `tg.optimize(graph)`, or `graph` itself when it is `optimized` already.
    """
    backend = backend or config.backend
    if backend == "numpy":
        from tracegrad.transforms.evaluate import compile_graph as compile_numpy

        return compile_numpy(graph)
    if backend == "numba":
        from tracegrad.backends.numba import compile_graph as compile_numba

        return compile_numba(graph if optimized else _optimized(graph),
                             parallel=config.parallel if parallel is None else parallel)
    raise InvalidArgumentError(f"unknown backend {backend!r}; choose one of {BACKENDS}")


def _optimized(graph: FuncGraph) -> FuncGraph:
    """`tg.optimize(graph)`, verified when `config.verify` asks for it."""
    from tracegrad.passes import optimize

    optimized = optimize(graph)
    if config.verify:
        from tracegrad.core.verify import verify

        verify(optimized)
    return optimized


def _optimized_or_none(graph: FuncGraph) -> FuncGraph | None:
    """`_optimized(graph)`, or None when a pass fails on it."""
    try:
        return _optimized(graph)
    except Exception:  # noqa: BLE001 - a tracegrad bug: the compile reports it
        return None


# The compile cost per graph op assumed before this process has timed a compile of its own
# (issue 30: 9 ms per op for elementwise chains, 50 ms for unrolled logsumexp steps).
COMPILE_SECONDS_PER_OP = 0.03
_COMPILE_COST = [0.0, 0]  # CPU seconds and graph ops of the compiles of >= 100 ops so far


def compile_estimate(graph: FuncGraph) -> float:
    """The seconds a numba compile of `graph` is expected to take: its op count (with the
    ops of its branches' and loops' graphs) times the cost per op measured on this
    process's compiles of 100 ops or more (before there is one, `COMPILE_SECONDS_PER_OP`)."""
    seconds, ops = _COMPILE_COST
    per_op = seconds / ops if ops else COMPILE_SECONDS_PER_OP
    return _op_count(graph) * per_op


def _op_count(graph: FuncGraph) -> int:
    """`graph`'s ops and those of its sub-graphs (each compiled once)."""
    return sum(1 + sum(_op_count(sub) for _, sub in sub_graphs(op.attrs)) for op in graph.operations)


# The numpy backend's time per op run on small arrays and per element an op writes,
# assumed for a graph's first call before this process has timed interim calls of its own
# (measured, one thread, loop bodies run as generated code: 0.5-1.1 us per op of a scan
# step of 0-d or 14-element values; NumPy's elementwise loops write about 1 ns per float64).
INTERIM_SECONDS_PER_OP = 1e-6
INTERIM_SECONDS_PER_ELEMENT = 1e-9
# `tg.optimize`'s time per op (measured: the LSTM l=4 gradient's 1140 ops, 0.19 ms each):
# the interim runs the optimized graph when its run is expected to take longer than that
# (a loop's body runs once per step; optimizing drops what a loop's gradient would run twice)
OPTIMIZE_SECONDS_PER_OP = 2e-4
_INTERIM_COST = [0.0, 0.0]  # CPU seconds spent and seconds modelled, over interim calls


def interim_estimate(graph: FuncGraph) -> float:
    """The seconds a call of `graph` on the numpy backend is expected to take: per op run
    (a loop's body once per iteration of its `maximum_iterations`) a fixed cost plus one per
    element of its results, scaled by what this process's interim calls took against what
    was expected of them."""
    return _interim_model(graph) * _interim_scale()


def _interim_scale() -> float:
    spent, expected = _INTERIM_COST
    return spent / expected if expected else 1.0


def _interim_model(graph: FuncGraph) -> float:
    seconds = 0.0
    for op in graph.operations:
        elements = sum(_known_size(t.shape) for t in op.outputs)
        seconds += INTERIM_SECONDS_PER_OP + elements * INTERIM_SECONDS_PER_ELEMENT
        times = op.attrs.get("maximum_iterations") or 1
        seconds += times * sum(_interim_model(sub) for _, sub in sub_graphs(op.attrs))
    return seconds


def _known_size(shape) -> int:
    n = 1
    for d in shape:
        n *= 1 if d is None else d
    return n


def _waits_for_kernel(interim: float, compile_seconds: float) -> bool:
    """Whether a first call waits for the kernel instead of running the numpy interim: when
    the interim is expected to take longer than the compile (a loop of many cheap steps,
    each run in Python by the numpy backend; the kernel's run is then negligible)."""
    return interim > compile_seconds


def _compile_due(expected: float, spent: float) -> bool:
    """Whether a compile expected to take `expected` seconds starts, once calls of the graph
    on the numpy backend took `spent`: at once up to `config.defer_compile_above`, beyond it
    once the calls have spent as long as the compile would take."""
    limit = config.defer_compile_above
    return limit is None or expected <= limit or spent >= expected


def _timed_compile(graph, backend, parallel, optimized=None):
    """`compile_graph(graph, ...)` (of `optimized`, `graph` already optimized, when given),
    its CPU time added to the cost per op of `graph` that `compile_estimate` reads."""
    start = time.thread_time()
    if optimized is None:
        run = compile_graph(graph, backend, parallel)
    else:
        run = compile_graph(optimized, backend, parallel, optimized=True)
    n = _op_count(graph)
    if n >= 100:
        _COMPILE_COST[0] += time.thread_time() - start
        _COMPILE_COST[1] += n
    return run


class _Interim:
    """The executor of a concrete function while its kernel compiles in the background:
    runs the graph with the numpy backend, and once the kernel is ready installs it as the
    function's executor (later calls go straight to it).

    A graph whose compile is expected to take longer than `config.defer_compile_above`
    seconds (`compile_estimate`) starts compiling only once its calls have spent as long
    on the numpy backend as the compile would take, or when `wait_for_compiles` asks for
    it: a huge graph called once is never compiled. Any other compile starts when the first
    call ends (Numba's compile holds the GIL for much of its time: started with the call, it
    slowed the interim's Python loop down). A graph whose numpy run is expected to take
    longer than its compile (`interim_estimate`: a loop of many steps) has its calls wait
    for the kernel instead (`waits`). Otherwise, a graph whose numpy run is expected to take
    longer than optimizing it (`OPTIMIZE_SECONDS_PER_OP`) runs optimized, and its compile
    reads that graph (optimized once); if a pass fails, the interim runs the traced graph."""

    def __init__(self, concrete, backend, parallel):
        self._concrete = concrete
        graph, optimized = concrete.graph, None
        self._model = _interim_model(graph)
        self._estimate = compile_estimate(graph)
        self.waits = _waits_for_kernel(self._model * _interim_scale(), self._estimate)
        if not self.waits and self._model > _op_count(graph) * OPTIMIZE_SECONDS_PER_OP:
            optimized = _optimized_or_none(graph)  # None: the compile reports the failure
            if optimized is not None:
                self._model = _interim_model(optimized)
        self._reference = compile_graph(graph if optimized is None else optimized, "numpy")
        self._args = (graph, backend, parallel, optimized)  # optimized once, for both
        self._kernel = None
        self._spent = 0.0
        if self.waits:
            self._start()
        else:  # started after the first call: compiling, it would hold the GIL from it
            _DEFERRED.add(self)

    def _start(self):
        with _COMPILER_LOCK:
            if self._kernel is None:
                _DEFERRED.discard(self)
                self._kernel = _compiler().submit(_timed_compile, *self._args)

    def __call__(self, arrays):
        kernel = self._kernel
        if self.waits or (kernel is not None and kernel.done()):
            return self.wait()(arrays)
        start, cpu = time.perf_counter(), time.thread_time()
        out = self._reference(arrays)
        self._spent += time.perf_counter() - start
        _INTERIM_COST[0] += time.thread_time() - cpu  # CPU time, as compiles are measured
        _INTERIM_COST[1] += self._model
        if kernel is None and _compile_due(self._estimate, self._spent):
            self._start()
        return out

    def wait(self):
        """The executor installed once the compile ends (blocks until then)."""
        self._start()
        self._kernel.exception()
        return self._install()

    def _install(self):
        concrete = self._concrete
        try:
            run = self._kernel.result()
        except Exception as e:  # noqa: BLE001 - out of memory, or a tracegrad bug
            _compile_failed(concrete.name, e, 5)
            run = self._reference
        if concrete._executor is self:
            concrete._executor = run
            concrete._donating = None  # the kernel may take donated buffers
        return run


class _CompileThread:
    """The one daemon thread that compiles kernels, in the order they were submitted (Numba
    compiles one at a time).

    A process that ends while a compile is in flight does not wait for it: the thread is a
    daemon, compiles still queued are dropped, and the objects of the abandoned compile are
    left out of the interpreter's last garbage collections (`_freeze_at_exit`). Abandoning a compile is safe for the kernel cache: tracegrad and Numba write
    each cache file under a temporary name and link or rename it into place, so a compile
    cut short leaves no entry, never a half-written one; kernels compiled before stay."""

    def __init__(self):
        self._queue = queue.SimpleQueue()
        self._busy = 0  # compiles submitted and not ended
        self._closing = False
        atexit.register(self._at_exit)
        self._thread = threading.Thread(target=self._work, name=backends.BACKGROUND_THREAD,
                                        daemon=True)
        self._thread.start()

    def submit(self, fn, *args):
        """A `concurrent.futures.Future` of `fn(*args)`."""
        from concurrent.futures import Future

        future = Future()
        with _COMPILER_LOCK:
            self._busy += 1
        self._queue.put((future, fn, args))
        return future

    def _work(self):
        while True:
            future, fn, args = self._queue.get()
            try:
                if self._closing:  # the process is ending: dropped
                    future.cancel()
                elif future.set_running_or_notify_cancel():
                    try:
                        future.set_result(fn(*args))
                    except BaseException as e:  # noqa: BLE001 - handed to whoever waits
                        future.set_exception(e)
            finally:
                with _COMPILER_LOCK:
                    self._busy -= 1
            del future, fn, args

    def _at_exit(self):
        self._closing = True


def _compile_failed(name: str, e: Exception, stacklevel: int) -> None:
    """Warn that the numba backend could not compile function `name` (it runs on the numpy
    backend): out of memory, or a tracegrad bug."""
    if isinstance(e, MemoryError):
        why = f"ran out of memory compiling this function ({type(e).__name__}: {e})"
    else:
        why = f"could not compile this function ({type(e).__name__}: {e})"
    warnings.warn(f"{name}: the numba backend {why}; it runs on the numpy backend",
                  RuntimeWarning, stacklevel=stacklevel)


def _freeze_at_exit():
    """Leave every object out of the interpreter's last garbage collections (`gc.freeze`):
    walking a large traced graph or an abandoned compile took seconds after the program's
    last line (an unrolled graph of 196,000 ops: 4.7 s, then 0.3 s). Objects are still
    freed by reference counting; only cycles left at exit are not collected, which Python
    does not promise anyway."""
    gc.freeze()


atexit.register(_freeze_at_exit)
_COMPILER: list = []


def _compiler() -> _CompileThread:
    """The background compile thread (started on first use)."""
    if not _COMPILER:
        with _COMPILER_LOCK:
            if not _COMPILER:
                _COMPILER.append(_CompileThread())
    return _COMPILER[0]


_COMPILER_LOCK = threading.RLock()
_DEFERRED: weakref.WeakSet = weakref.WeakSet()  # interims whose compile waits (_Interim)


def wait_for_compiles() -> None:
    """Block until every kernel compiling in the background is ready: from then on, each of
    those functions runs its kernel (its next call installs it). For timing a function
    right after its first call (docs/function.md, "The first call"). Kernels whose compile
    was deferred (`tg.config.defer_compile_above`) start compiling now."""
    for interim in list(_DEFERRED):
        interim._start()
    if _COMPILER and not _COMPILER[0]._closing:  # (at exit nothing compiles any more)
        _COMPILER[0].submit(int).result()  # one thread, in order: every earlier compile ended


def compiled_source(graph: FuncGraph) -> str:
    """The Python source the numba backend generates for `tg.optimize(graph)` (what
    `tracegrad dump --stage compiled` prints)."""
    from tracegrad.passes import optimize

    try:
        numba_backend = importlib.import_module("tracegrad.backends.numba")
    except ModuleNotFoundError as e:
        if e.name not in ("numba", "tracegrad.backends.numba"):
            raise
        numba_backend = None
    generate = getattr(numba_backend, "generate_source", None)
    if generate is None:
        raise TracegradError("compiled_source needs the numba backend "
                             "(tracegrad.backends.numba.generate_source), which is not available")
    return generate(optimize(graph))


# -- concrete functions ----------------------------------------------------------------------


class ConcreteFunction:
    """One trace of a `Function` for one input signature; callable like the function.

    `graph` is the `tg.FuncGraph`; `structured_input_signature` is `(args, kwargs)` with a
    `TensorSpec` for every traced argument and the value of every static one.
    """

    def __init__(self, owner: Function, graph: FuncGraph, treedef, entries, statics,
                 out_treedef, written=()):
        self.graph = graph
        self.name = owner.__name__
        self._owner = owner
        self._treedef = treedef
        self._entries = entries
        self._statics = statics
        self._statics_key = _typed_key(statics, "static arguments")
        self._out_treedef = out_treedef
        # The Variables the function assigns: the graph's last outputs are their final
        # values, written back when a call succeeds (_effects.py, docs/variables.md).
        self._written = tuple(written)
        self._n_results = len(graph.outputs) - len(self._written)
        self._donating = None  # the executor's run with donated output buffers, if it has one
        self._pack = _packer(out_treedef)
        self._numpy_out = _numpy_packer(out_treedef,
                                        [t.ndim for t in graph.outputs[:self._n_results]])
        self._array_leaves = [i for i, e in enumerate(entries) if _is_array(e)]
        self._in_dtypes = [entries[i][1] for i in self._array_leaves]
        self._captures = [ext for ext, _ in graph.captures]
        self._variables = any(isinstance(c, Variable) for c in self._captures)
        self._plain_captures = all(isinstance(c, (Variable, EagerTensor)) for c in self._captures)
        self._narrowed = narrowed_int_inputs(graph)
        self._executor = None
        self._callee = None
        # A trace that reads tensors of the trace it was made in belongs to that trace: it
        # is inlined there, never cached or called.
        self._enclosed = any(isinstance(c, GraphTensor) for c in self._captures)
        self._payload = None  # (digest, bytes) once pickled (_pickle.py)

    def __reduce__(self):
        """Pickled as its graph's JSON and its signature, with the tracegrad version."""
        if self._payload is None:
            self._payload = _pickle.concrete_payload(self)
        return (_pickle.rebuild_concrete,
                (_pickle.__version__, _pickle.GRAPH_FORMAT_VERSION) + self._payload)

    @property
    def structured_input_signature(self):
        names = iter(t.name for t in self.graph.inputs)
        leaves = []
        for e in self._entries:
            if _is_array(e):
                leaves.append(TensorSpec(e[0], e[1], next(names)))
            elif type(e) is _Static:
                leaves.append(self._statics[e.index])
            else:
                leaves.append(e.value)
        return tree.unflatten(self._treedef, leaves)

    @property
    def structured_outputs(self):
        return tree.unflatten(self._out_treedef,
                              [TensorSpec(t.shape, t.dtype)
                               for t in self.graph.outputs[:self._n_results]])

    @property
    def executor(self):
        """`run(list of arrays) -> list of arrays`, compiled on first use."""
        if self._executor is None:
            with self._owner._lock:  # threads of a first call: one compiles, the rest wait
                if self._executor is None:
                    backend = self._owner._backend or config.backend
                    if backend == "numba" and config.background_compile:
                        self._executor = _Interim(self, backend, self._owner._parallel)
                    else:
                        try:
                            self._executor = compile_graph(self.graph, backend,
                                                           self._owner._parallel)
                        except MemoryError as e:
                            if backend != "numba":
                                raise
                            _compile_failed(self.name, e, 5)
                            self._executor = compile_graph(self.graph, "numpy")
        return self._executor

    @property
    def callee(self) -> CompiledCall:
        """This trace as the callee of `call` ops (in enclosing traces, on tapes): runs
        `executor`; its gradient graph is built and compiled once, on first use."""
        if self._callee is None:
            owner = self._owner
            self._callee = CompiledCall(
                self.graph, self._execute,
                functools.partial(compile_graph, backend=owner._backend, parallel=owner._parallel))
        return self._callee

    def _execute(self, arrays):
        return self.executor(arrays)

    def __call__(self, *args, **kwargs):
        leaves, treedef, statics = self._owner._canonicalize(args, kwargs)
        if treedef != self._treedef or _typed_key(statics, "") != self._statics_key:
            raise ArgumentTypeError(
                f"{self.name}: this concrete function takes arguments structured as "
                f"{_describe(self._treedef, self._statics)}, got {_describe(treedef, statics)}"
            )
        names = [t.name for t in self.graph.inputs]
        k = 0
        for x, e in zip(leaves, self._entries, strict=True):
            if _is_array(e):
                _check_leaf(self.name, names[k], x, e[0], e[1], "the traced input")
                k += 1
            elif type(e) is _StaticLeaf and _entry(x) != e:
                raise ArgumentTypeError(f"{self.name}: this concrete function was traced "
                                        f"with {e.value!r} where it is now given {x!r}")
        return self._call_leaves(leaves)

    def _call_leaves(self, leaves):
        inputs = [leaves[i] for i in self._array_leaves]
        if state.graph is not None:
            return self._call_in_trace(inputs)
        eager = False
        for i, x in enumerate(inputs):
            if isinstance(x, Variable):
                inputs[i] = x.value()  # a snapshot, reported to the recording tapes
                eager = True
            elif type(x) is EagerTensor:
                eager = True
        arrays = [_to_array(x, d) for x, d in zip(inputs, self._in_dtypes, strict=True)]
        return self._run(arrays, inputs, eager)

    def _run(self, arrays, inputs, eager: bool):
        """Feed `arrays` (one per graph input) and the captures; pack the results."""
        if self._narrowed:
            check_narrowed(self.name, self._narrowed, arrays)
        tapes = state.tapes
        captured = ()
        if self._captures:
            if tapes and self._variables:
                eager = True
            if eager and tapes:
                captured = [self._capture_tensor(c) for c in self._captures]
                arrays = arrays + [t._value for t in captured]
            elif self._plain_captures:  # Variables and eager tensors: their arrays
                arrays = arrays + [c._value for c in self._captures]
            else:
                arrays = arrays + [self._capture_tensor(c)._value for c in self._captures]
        if self._written:
            outs = self._run_writing(arrays)
            if not eager:
                return self._numpy_out(outs[:self._n_results])
        else:
            outs = self.executor(arrays)
            if not eager:
                return self._numpy_out(outs)
        results = [EagerTensor(o) for o in outs]
        if tapes:
            fed = [x if type(x) is EagerTensor else EagerTensor(a)
                   for x, a in zip(inputs, arrays[:len(inputs)], strict=True)]
            _call_recorder(self, fed + list(captured), results)
        return self._pack(results[:self._n_results] if self._written else results)

    def _run_writing(self, arrays):
        """Run a graph that assigns Variables, then write their new values (the graph's last
        outputs) into them: only once the whole call has succeeded, so a call that raises
        leaves every Variable unchanged. Each new value is a buffer the Variable owns from
        then on (O(1), no copy); the numba executor writes it into the Variable's spare
        buffer when nothing else references that one, so a step allocates nothing."""
        executor = self.executor
        if self._donating is None:
            donating = getattr(executor, "donating", None)
            self._donating = donating(len(self._written)) if donating is not None else False
        if self._donating:
            outs = self._donating(arrays, [v._donated_buffer() for v in self._written])
        else:
            outs = executor(arrays)
        for v, new in zip(self._written, outs[self._n_results:], strict=True):
            v._commit(new)
        return outs

    def _capture_tensor(self, external) -> EagerTensor:
        """The current value of a captured external (a Variable read reports to tapes)."""
        if isinstance(external, Variable):
            return external.value() if state.tapes else EagerTensor(external._value)
        if isinstance(external, EagerTensor):
            return external
        raise TracegradError(
            f"{self.name}: this concrete function captures a tensor of an enclosing trace "
            f"({external!r}); call it inside that trace"
        )

    def _call_in_trace(self, inputs):
        """Called inside another trace: one `call` op of this trace (operands: the inputs,
        converted to the traced dtypes, then the captured values read in the enclosing
        trace), or, for a trace that belongs to the enclosing one, its ops copied there.
        Either way the new ops are offered to the tapes recording in the enclosing trace."""
        outer = state.graph
        operands = [outer.to_tensor(x) for x in inputs]
        if self._enclosed:
            return self._pack(self._written_in_trace(
                outer, list(inline_recorded(self.graph, outer, operands))))
        for i, (x, p) in enumerate(zip(operands, self.graph.inputs, strict=True)):
            if x.dtype != p.dtype:  # a Python scalar or weak tensor given to a strong spec
                operands[i] = convert_element_type(x, new_dtype=p.dtype)
        operands += [outer.to_tensor(c) for c in self._captures]
        return self._pack(self._written_in_trace(outer, list(call_p.bind(*operands,
                                                                         callee=self.callee))))

    def _written_in_trace(self, outer, outs):
        """The function's results among `outs` (the call's outputs); the Variables it
        assigns are assigned their final values in the enclosing trace (in program order
        there), which must be a `tg.function`'s."""
        if not self._written:
            return outs
        n = self._n_results
        for v, t in zip(self._written, outs[n:], strict=True):
            traced_write(v, outer, t, "assign")
        return outs[:n]

    def __repr__(self):
        args, kwargs = self.structured_input_signature
        return f"<ConcreteFunction {self.name} args={args} kwargs={kwargs}>"


# The hook through which compiled calls are recorded on gradient tapes:
# `recorder(concrete, inputs, results)` is called when a compiled function runs eagerly while
# tapes record. `inputs` are EagerTensors aligned with `concrete.graph.all_inputs` (graph
# inputs, then capture placeholders; a Variable appears as the snapshot its read reported to
# the tapes), `results` EagerTensors aligned with `concrete.graph.outputs`. The recorder of
# transforms/custom.py records one `call` op of the concrete function's callee.
_call_recorder = Hook("the recorder of compiled calls on gradient tapes", "tracegrad.function")


def set_call_recorder(recorder) -> None:
    """Install `recorder(concrete, inputs, results)`, which a compiled call on a recording
    tape calls."""
    _call_recorder.install(recorder)


set_call_recorder(make_call_recorder(lambda concrete: concrete.callee))


def _tape_kernel(graph: FuncGraph, spent: float):
    """The Future of the numba kernel of a replayed tape backward pass whose replays took
    `spent` seconds; None while a compile expected to take longer than
    `config.defer_compile_above` has not been paid for by as many seconds of replays (the
    rule of `_Interim`); False when the numba backend is not the default or
    `config.tape_kernels` is off."""
    if not config.tape_kernels or config.backend != "numba":
        return False
    if not _compile_due(compile_estimate(graph), spent):
        return None
    return _compiler().submit(_timed_compile, graph, "numba", False)


set_kernel_compiler(_tape_kernel)


def _packer(treedef) -> Callable[[list], Any]:
    """`pack(flat results) -> structure`, short-cut for one result and flat tuples."""
    if treedef is tree.LEAF:
        return lambda results: results[0]
    if treedef[0] is tuple and all(c is tree.LEAF for c in treedef[2]):
        return tuple
    return functools.partial(tree.unflatten, treedef)


def _numpy_packer(treedef, ranks) -> Callable[[list], Any]:
    """`pack(executor results)` for NumPy callers: rank-0 results become NumPy scalars."""
    pack = _packer(treedef)
    if 0 not in ranks:
        return pack
    if treedef is tree.LEAF:
        return lambda results: results[0][()]
    scalars = [i for i, r in enumerate(ranks) if r == 0]

    def numpy_pack(results):
        results = list(results)
        for i in scalars:
            results[i] = results[i][()]
        return pack(results)

    return numpy_pack


# -- tracing ---------------------------------------------------------------------------------


class Function:
    """A Python function traced once per input signature and compiled (`tg.function`).

    Calling it with arrays returns NumPy (rank 0 as a NumPy scalar); with `tg.Tensor`s or
    `tg.Variable`s it returns `tg.Tensor`s, recorded on the active gradient tapes. Inside
    another trace it is one `call` op of its own trace for the arguments' signature
    (docs/function.md, "Nested functions").
    """

    # The transforms (`tg.grad(f)`, `tg.vmap(f)` ...) are Functions for their calls with
    # arrays; inside a trace they emit their ops inline, as transforms compose.
    _inline_in_trace = False

    def __init__(self, fn: Callable, *, input_signature=None, static_argnums=(),
                 static_argnames=(), backend: str | None = None, reduce_retracing: bool = False,
                 parallel: bool | None = None):
        if not callable(fn):
            raise ArgumentTypeError(f"tg.function needs a callable, got {type(fn).__name__}")
        if backend is not None and backend not in BACKENDS:
            raise InvalidArgumentError(f"unknown backend {backend!r}; choose one of {BACKENDS}")
        functools.update_wrapper(self, fn)
        if not hasattr(self, "__name__"):  # a partial, a callable object
            self.__name__ = getattr(getattr(fn, "func", type(fn)), "__name__", "function")
        self.python_function = fn
        self._backend = backend
        self._parallel = parallel
        self._reduce_retracing = bool(reduce_retracing)
        self._signature = _safe_signature(fn)
        self._static_argnums, self._static_argnames = _normalize_static(
            self.__name__, self._signature, static_argnums, static_argnames)
        self._has_statics = bool(self._static_argnums or self._static_argnames)
        if input_signature is not None:
            input_signature = tuple(input_signature)
            for s in tree.flatten(input_signature)[0]:
                if not isinstance(s, TensorSpec):
                    raise ArgumentTypeError(
                        f"{self.__name__}: input_signature holds a {type(s).__name__}; it "
                        "takes tg.TensorSpec structures")
        self.input_signature = input_signature
        self.tracing_count = 0
        self._cache: dict[Any, ConcreteFunction] = {}  # signature key -> trace
        self._fast: dict[tuple, ConcreteFunction] = {}  # top-level arrays' shapes/dtypes
        self._generic: dict[Any, list[ConcreteFunction]] = {}  # family -> traces with None
        self._last_entries: dict[Any, list] = {}  # family -> entries last traced (relaxing)
        self._specialized_traces: dict[Any, ConcreteFunction] = {}  # for calls in traces
        self._shapes_traced: set = set()
        self._lock = threading.RLock()
        self._bound: dict[int, tuple] = {}
        self._bind_plans: dict[tuple, tuple] = {}
        self._recipe = None  # (transform, fn, options) for a transformed function

    def __reduce__(self):
        """Pickled as its Python function and options (a transformed function as the
        transform, its function and options); the receiver traces again when first called."""
        if self._recipe is not None:
            return (_pickle.apply_transform, self._recipe)
        return (_pickle.rebuild_function,
                (self.python_function, _pickle.function_options(self)))

    # -- the call path ---------------------------------------------------------------------

    def __call__(self, *args, **kwargs):
        if state.graph is not None:
            return self._call_in_trace(args, kwargs)
        if kwargs and self._signature is not None:
            args, kwargs = self._bind(args, kwargs)  # f(x, y=y) is f(x, y)
        if not kwargs and not self._has_statics:
            fast = _fast_key(args)
            if fast is not None:
                key, eager, scalars, flags = fast
                concrete = self._fast.get(key)
                if concrete is not None:
                    if not (eager or scalars or flags or concrete._captures):
                        return concrete._numpy_out(concrete._executor(list(args)))
                    if flags:  # static bools are in the trace, not among its inputs
                        args = [a for a in args if type(a) is not bool]
                    arrays = [a if type(a) is _ndarray else _to_array(a, d)
                              for a, d in zip(args, concrete._in_dtypes)]
                    return concrete._run(arrays, args, eager)
        leaves, treedef, statics = self._canonicalize(args, kwargs)
        concrete = self._concrete_for(leaves, treedef, statics)
        if not kwargs and not self._has_statics and len(self._fast) < EXACT_KEYS_PER_FUNCTION:
            fast = _fast_key(args)
            # The short path feeds the arguments as they are: not for converted ones.
            if fast is not None and all(map(operator.is_, leaves, args)):
                if concrete._executor is None:  # the short path calls `_executor` directly
                    concrete._executor = concrete.executor
                self._fast[fast[0]] = concrete
        return concrete._call_leaves(leaves)

    def _call_in_trace(self, args, kwargs):
        """Called while another function is traced: the trace for these arguments (from the
        cache, or traced now and cached: once per signature, however many call sites and
        enclosing traces) called as one op. Inlined instead (the Python function run in the
        enclosing trace) for transforms, under `gradient_override_map` (which changes the
        ops a trace makes) and for arguments that cannot be part of a cache key."""
        if self._inline_in_trace or state.grad_overrides:
            return self.python_function(*args, **kwargs)
        leaves, treedef, statics = self._canonicalize(args, kwargs)
        try:
            entries = [_entry(x) for x in leaves]
        except TypeError:  # an unhashable non-array argument
            return self.python_function(*args, **kwargs)
        concrete = self._concrete_for(leaves, treedef, statics, entries)
        return self._specialized(concrete, leaves, entries)._call_leaves(leaves)

    def _specialized(self, concrete, leaves, entries) -> ConcreteFunction:
        """`concrete`, or, where it has None dims that the arguments know, the trace of
        the same entries with those dims known (traced once, cached): a `call` op's operand
        types equal its callee's input types, so the callee inlines with exact types."""
        known = [(tuple(s if s is not None else d for s, d in zip(c[0], e[0])),) + c[1:]
                 if _is_array(c) and None in c[0] else c
                 for c, e in zip(concrete._entries, entries, strict=True)]
        if known == concrete._entries:
            return concrete
        key = (concrete._treedef, tuple(known), concrete._statics_key)
        found = self._specialized_traces.get(key)
        if found is None:
            found = self._trace(leaves, concrete._treedef, known, concrete._statics)
            if not found._enclosed:
                self._specialized_traces[key] = found
        return found

    def _canonicalize(self, args, kwargs):
        """`(leaves, treedef, statics)`: arguments bound to parameters (keyword arguments
        of positional parameters become positional), static values set aside."""
        if kwargs and self._signature is not None:
            args, kwargs = self._bind(args, kwargs)
        statics = []
        if self._has_statics:
            args = list(args)
            for i in self._static_argnums:
                if i < len(args):
                    statics.append(args[i])
                    args[i] = _Static(len(statics) - 1)
            if kwargs:
                kwargs = dict(kwargs)
                for k in self._static_argnames:
                    if k in kwargs:
                        statics.append(kwargs[k])
                        kwargs[k] = _Static(len(statics) - 1)
        leaves, treedef = tree.flatten((tuple(args), kwargs))
        return [_native_leaf(x) for x in leaves], treedef, tuple(statics)

    def _bind(self, args, kwargs):
        """Keyword arguments of positional parameters moved into place, as
        `inspect.Signature.bind` does; the plan is worked out once per call pattern."""
        pattern = (len(args), tuple(kwargs))
        plan = self._bind_plans.get(pattern)
        if plan is None:
            try:
                bound = self._signature.bind(*args, **kwargs)
            except TypeError as e:
                raise ArgumentTypeError(f"{self.__name__}(): {e}") from None
            moved = tuple(bound.arguments)[len(args):len(bound.args)]
            plan = self._bind_plans[pattern] = (moved, tuple(sorted(bound.kwargs)))
        moved, rest = plan
        if moved:
            args = tuple(args) + tuple(kwargs[k] for k in moved)
        return args, {k: kwargs[k] for k in rest}

    def _concrete_for(self, leaves, treedef, statics, entries=None) -> ConcreteFunction:
        if entries is None:
            entries = [_entry(x) for x in leaves]
        statics_key = _typed_key(statics, "a static argument")
        key = (treedef, tuple(entries), statics_key)
        concrete = self._cache.get(key)
        if concrete is not None:
            return concrete
        with self._lock:
            family = (treedef, statics_key, tuple(_family(e) for e in entries))
            if self.input_signature is not None:
                entries = self._signature_entries(leaves, treedef, entries)
                concrete = self._cache.get((treedef, tuple(entries), statics_key))
            else:
                entries = _canonical_entries(self.__name__, self.python_function, leaves,
                                             treedef, entries)
                concrete = self._most_specific(family, entries)
                if concrete is None and self._reduce_retracing:
                    entries = self._relaxed(family, entries)
                    concrete = self._cache.get((treedef, tuple(entries), statics_key))
            if concrete is None:
                concrete = self._trace(leaves, treedef, entries, statics)
                if concrete._enclosed:
                    return concrete
                self._cache[(treedef, tuple(entries), statics_key)] = concrete
                if any(None in e[0] for e in entries if _is_array(e)):
                    self._generic.setdefault(family, []).append(concrete)
            if len(self._cache) < EXACT_KEYS_PER_FUNCTION:
                self._cache[key] = concrete
            return concrete

    def _most_specific(self, family, entries):
        """The trace with None dims that fits `entries` with the fewest None dims."""
        best, unknown = None, None
        for concrete in self._generic.get(family, ()):
            if all(not _is_array(s) or _dims_fit(s[0], e[0])
                   for s, e in zip(concrete._entries, entries, strict=True)):
                n = sum(s[0].count(None) for s in concrete._entries if _is_array(s))
                if best is None or n < unknown:
                    best, unknown = concrete, n
        return best

    def _relaxed(self, family, entries):
        """`entries` with the dims that differ from the last trace of the family as None."""
        last = self._last_entries.get(family)
        if last is not None:
            entries = [
                (tuple(a if a == b else None for a, b in zip(e[0], old[0])),) + e[1:]
                if _is_array(e) else e
                for e, old in zip(entries, last, strict=True)
            ]
        self._last_entries[family] = entries
        return entries

    def _signature_entries(self, leaves, treedef, entries):
        """The entries `input_signature` gives these arguments; checks them against it."""
        args, kwargs = tree.unflatten(treedef, leaves)
        traced = tuple(a for a in args if type(a) is not _Static)
        stray = [k for k, v in kwargs.items() if type(v) is not _Static]
        specs, sig_def = tree.flatten(self.input_signature)
        arg_leaves, arg_def = tree.flatten(traced)
        if stray or sig_def != arg_def:
            got = tree.treedef_str(arg_def) + (f" and keywords {stray}" if stray else "")
            raise ArgumentTypeError(
                f"{self.__name__}: arguments structured as {got} do not match "
                f"input_signature {tree.treedef_str(sig_def)}"
            )
        names = [n for n, x in zip(_leaf_names(self.python_function, args, {}),
                                   tree.flatten(args)[0], strict=True) if type(x) is not _Static]
        for x, spec, name in zip(arg_leaves, specs, names, strict=True):
            _check_leaf(self.__name__, spec.name or name, x, spec.shape, spec.dtype,
                        "input_signature")
        it = iter(specs)
        out = []
        for e in entries:
            if type(e) is not _Static:  # it has a spec (a Python bool too: an array for it)
                spec = next(it)
                e = (spec.shape, spec.dtype)
            out.append(e)
        return out

    def _trace(self, leaves, treedef, entries, statics) -> ConcreteFunction:
        args, kwargs = tree.unflatten(treedef, leaves)
        names = _leaf_names(self.python_function, args, kwargs)
        array_names = [n for n, e in zip(names, entries, strict=True) if _is_array(e)]
        if self.input_signature is not None:
            specs = tree.flatten(self.input_signature)[0]
            array_names = [s.name or n for s, n in zip(specs, array_names, strict=True)]
        # A transform (tg.grad(f) ...) is a pure function: Variables are not assigned in it.
        graph, out_treedef, written = trace_graph(
            self.python_function, treedef, entries, statics, array_names, self.__name__,
            config.verify, effects=not self._inline_in_trace)
        if not any(isinstance(c, GraphTensor) for c, _ in graph.captures):
            graph.outer = None  # made inside another trace, but independent of it
        self.tracing_count += 1
        self._shapes_traced.add(tuple(e[0] for e in entries if _is_array(e)))
        if len(self._shapes_traced) == RETRACE_WARNING_THRESHOLD + 1:
            warnings.warn(
                f"{self.__name__} has been traced {self.tracing_count} times for "
                f"{len(self._shapes_traced)} different input shapes; each new shape traces "
                "again. Pass reduce_retracing=True, or an input_signature with None dims, to "
                "trace once for many sizes.",
                RetracingWarning,
                stacklevel=_user_stacklevel(),
            )
        return ConcreteFunction(self, graph, treedef, entries, statics, out_treedef, written)

    # -- introspection ---------------------------------------------------------------------

    def get_concrete_function(self, *args, **kwargs) -> ConcreteFunction:
        """The trace for these arguments; `tg.TensorSpec`s may stand for arrays.

        Without arguments, a function with an `input_signature` uses it.
        """
        if not args and not kwargs and self.input_signature is not None:
            args = self.input_signature
        leaves, treedef, statics = self._canonicalize(args, kwargs)
        entries = [(x.shape, x.dtype) if isinstance(x, TensorSpec) else _entry(x)
                   for x in leaves]
        return self._concrete_for(leaves, treedef, statics, entries)

    def __get__(self, instance, owner=None):
        """Decorating a method: each instance gets its own Function over the bound method."""
        if instance is None:
            return self
        found = self._bound.get(id(instance))
        if found is not None and found[0]() is instance:
            return found[1]
        params = list(self._signature.parameters) if self._signature is not None else []
        key, table = id(instance), self._bound
        try:
            ref = weakref.ref(instance, lambda _, key=key, table=table: table.pop(key, None))
            method = _WeakMethod(self.python_function, instance, ref)
        except TypeError:  # not weak-referenceable: keep the instance alive with its cache
            ref = functools.partial(_identity, instance)
            method = functools.partial(self.python_function, instance)
        bound = Function(
            method,
            input_signature=self.input_signature,
            static_argnums=tuple(i - 1 for i in self._static_argnums if i > 0),
            static_argnames=tuple(n for n in self._static_argnames if params[:1] != [n]),
            backend=self._backend,
            reduce_retracing=self._reduce_retracing,
            parallel=self._parallel,
        )
        functools.update_wrapper(bound, self.python_function)
        table[key] = (ref, bound)
        return bound

    def __repr__(self):
        return f"<tg.Function {self.__name__} (traced {self.tracing_count}x)>"


def _identity(x):
    return x


class _WeakMethod:
    """A method's function bound to its instance through a weak reference (as
    `functools.partial(func, instance)` is through a strong one): the class's table of
    per-instance Functions must not keep instances, and their traces, alive."""

    def __init__(self, func, instance, ref):
        self.func = func
        self._ref = ref
        self.__signature__ = _safe_signature(functools.partial(func, instance))

    def __call__(self, *args, **kwargs):
        instance = self._ref()
        if instance is None:
            raise UsageError(f"{getattr(self.func, '__qualname__', 'method')}: the instance "
                             "this method was bound to no longer exists")
        return self.func(instance, *args, **kwargs)


def _user_stacklevel() -> int:
    """The `warnings.warn` stacklevel that points at the user's frame."""
    target = user_frame()
    f, level = sys._getframe(1), 1
    while f is not None and f is not target:
        f, level = f.f_back, level + 1
    return level if f is not None else 1


def function(fn: Callable | None = None, *, input_signature=None, static_argnums=(),
             static_argnames=(), backend: str | None = None, reduce_retracing: bool = False,
             parallel: bool | None = None):
    """Trace `fn` once per input signature into a FuncGraph and compile it.

    Usable as `@tg.function`, `@tg.function(backend="numpy")` or `tg.function(fn, ...)`.
    Python scalars are traced as weakly typed rank-0 tensors (a new value does not
    retrace); `static_argnums` / `static_argnames` bake values into the trace instead.
    `backend=None` uses `tg.config.backend` when the function is first run.

    >>> f = tg.function(lambda x, y: tnp.sin(x) * y)
    >>> f(np.zeros(3), 2.0)
    array([0., 0., 0.])
    """
    options = {"input_signature": input_signature, "static_argnums": static_argnums,
               "static_argnames": static_argnames, "backend": backend,
               "reduce_retracing": reduce_retracing, "parallel": parallel}
    if fn is None:
        return lambda f: Function(f, **options)
    return Function(fn, **options)


def trace(fn: Callable, *, static_argnums=(), static_argnames=()):
    """`tg.trace(fn)(*args) -> FuncGraph`: trace without compiling (`tg.TensorSpec`s may
    stand for arrays)."""
    f = fn if isinstance(fn, Function) else Function(
        fn, static_argnums=static_argnums, static_argnames=static_argnames)

    def traced(*args, **kwargs) -> FuncGraph:
        return f.get_concrete_function(*args, **kwargs).graph

    return traced
