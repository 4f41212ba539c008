"""The backward pass of an eager tape, traced once per recorded structure and replayed.

A training loop records the same ops on every step: the same primitives with the same
attributes, on tensors of the same shapes and dtypes, wired the same way. `gradient` then
walks them with `backprop`, whose bookkeeping and gradient rules cost Python time per op.
Here the walk is traced instead, the second time a structure is seen, into a FuncGraph
whose inputs stand for the recorded tensors; later gradients of that structure run the
graph's ops on the recorded arrays, with the same NumPy impls in the same order (the
values are bit-identical to the walk's). Once those replays have taken about what a
compile takes, the graph is compiled into one numba kernel in the background, which
later gradients run (values within the numba backend's bounds; `tg.config.tape_kernels`).

The structure (`signature`) is, per record in order: its primitive and gradient rule, its
attributes, which earlier tensor each input is, the shape and dtype of every new tensor and
which Variable each Variable read belongs to; then the targets, sources, output gradients
and the unconnected-gradients mode. Anything the trace cannot stand for falls back to the
walk: records with a gradient override (custom gradients, `gradient_override_map`, a
`take` giving IndexedSlices), inputs that are not eager tensors, unhashable attributes,
output gradients that are not tensors, a trace or replay that raises, and any gradient
taken while a tape records or a graph is traced (higher derivatives need the ops run one
by one). docs/tape.md, "The cached backward pass".
"""

from __future__ import annotations

import threading
import time
import warnings

import numpy as np

from tracegrad.core.hooks import Hook
from tracegrad.core.ir import EagerTensor, FuncGraph, Operation
from tracegrad.core.op import constant_p
from tracegrad.core.state import state
from tracegrad.core.types import TensorType
from tracegrad.transforms.backprop import backprop
from tracegrad.transforms.indexed_slices import aggregate_gradients

# signature -> a `Replay`, or None for a structure seen once (or one the trace refused)
_CACHE: dict = {}
_LOCK = threading.Lock()
CACHE_SIZE = 256  # structures remembered; the oldest is forgotten first
TRACE_AT_ONCE = False  # trace a structure the first time it is seen (for tests)


class _Refused:
    """The cache entry of a structure whose backward cannot be replayed."""


_REFUSED = _Refused()


def signature(records, var_of, targets, sources, grad_ys, mode):
    """`(signature, slots, tensors)` of a gradient request on `records`, or None when the
    request is not one a replay covers. `tensors` lists each distinct tensor once (`slots`
    maps its id to its position)."""
    slots: dict = {}
    tensors: list = []
    variables: dict = {}
    # per record: its primitive, rule, attributes, input slots and result types; before
    # it, a leaf entry (type, Variable) for each operand seen first
    sig: list = []
    add = sig.append
    find = slots.get
    for op in records:
        if op.grad_override is not None:
            return None
        ins = []
        for t in op.inputs:
            i = find(id(t))
            if i is None:
                if type(t) is not EagerTensor:
                    return None
                i = _leaf(t, slots, tensors, add, var_of, variables)
            ins.append(i)
        prim = op.primitive
        attrs = op.attrs
        outs = op.outputs
        if len(outs) == 1:
            t = outs[0]
            if type(t) is not EagerTensor or id(t) in slots:
                return None
            slots[id(t)] = len(tensors)
            tensors.append(t)
            v = t._value
            add((prim, prim.grad, tuple(attrs.items()) if attrs else None, tuple(ins),
                 v.shape, v.dtype))
            continue
        types = []
        for t in outs:
            if type(t) is not EagerTensor or id(t) in slots:
                return None
            slots[id(t)] = len(tensors)
            tensors.append(t)
            types.append((t._value.shape, t._value.dtype))
        add((prim, prim.grad, tuple(attrs.items()) if attrs else None, tuple(ins),
             tuple(types)))
    add(mode)
    for group in (targets, sources, grad_ys):
        add(len(group))
        for t in group:
            if t is None:
                add(None)
                continue
            i = find(id(t))
            if i is None:
                if type(t) is not EagerTensor:
                    return None
                i = _leaf(t, slots, tensors, add, var_of, variables)
            add(i)
    return tuple(sig), slots, tensors


def _leaf(t, slots, tensors, add, var_of, variables) -> int:
    """Give tensor `t`, first seen as an operand, a slot; `add` its entry."""
    i = slots[id(t)] = len(tensors)
    tensors.append(t)
    v = t._value
    var = var_of.get(id(t))
    if var is not None:
        var = variables.setdefault(var, len(variables))
    add(("leaf", v.shape, v.dtype, var))
    return i


def _keys(tensors: list, var_of: dict) -> list:
    """The gradient identity of each tensor: its slot, or its Variable's first slot (the
    reads of one Variable share one)."""
    first: dict = {}
    keys = []
    for i, t in enumerate(tensors):
        var = var_of.get(id(t))
        keys.append(i if var is None else first.setdefault(var, ("variable", i)))
    return keys


# Seconds the NumPy replays of one structure take in all before its kernel is compiled:
# about what a compile takes, so compiling costs at most about as much as it can save.
KERNEL_AFTER_SECONDS = 1.0

# `compile(graph, seconds its replays took)`: a Future of the executor `run(list of arrays)
# -> list of arrays` of the graph compiled by the numba backend; None: not yet (a compile
# expected to cost more than the replays have taken so far: ask again later); False: never
# (kernels are off). Installed by tracegrad/function.
_kernel_compiler = Hook("the compiler of tape backward kernels", "tracegrad.function")


def set_kernel_compiler(compile_in_background) -> None:
    """Install what compiles a replayed backward pass into a kernel in the background."""
    _kernel_compiler.install(compile_in_background)


class Replay:
    """A traced backward pass: `run(tensors)` gives one gradient (or None) per source.

    It runs the graph's ops with their NumPy impls; once those runs have taken
    `KERNEL_AFTER_SECONDS` in all, it asks for the graph compiled into one kernel (in the
    background) and runs that once it is ready.
    """

    def __init__(self, graph: FuncGraph, placeholders: list, results: list):
        used = {id(t) for op in graph.operations for t in op.inputs}
        used.update(id(g) for g in results if g is not None)
        slot_of = {}
        feeds = []  # the tensors whose arrays the graph reads
        for i, p in enumerate(placeholders):
            if id(p) in used:
                slot_of[id(p)] = len(feeds)
                feeds.append(i)
        plan = []
        constants = set()
        for op in graph.operations:
            ins = tuple(slot_of[id(t)] for t in op.inputs)
            outs = []
            for t in op.outputs:
                slot_of[id(t)] = len(slot_of)
                outs.append(slot_of[id(t)])
            if op.primitive is constant_p:
                constants.update(outs)
            plan.append((op.primitive.impl, op.attrs, ins,
                         tuple(outs) if op.primitive.multiple_results else outs[0]))
        self.plan = plan
        self.n_slots = len(slot_of)
        self.feeds = feeds
        # per source: None, ("fed", slot of the tensor fed) or ("out", env slot, copy?,
        # position among the kernel's outputs)
        self.results = []
        outputs: dict = {}  # id -> the graph tensors the kernel returns
        for g in results:
            if g is None:
                self.results.append(None)
            elif slot_of[id(g)] < len(feeds):
                self.results.append(("fed", slot_of[id(g)]))
            else:
                s = slot_of[id(g)]
                outputs.setdefault(id(g), g)
                self.results.append(("out", s, s in constants, list(outputs).index(id(g))))
        graph.outputs = list(outputs.values())
        graph.inputs = [placeholders[i] for i in feeds]
        self.graph = graph
        self.spent = 0.0  # seconds of NumPy replays
        self.kernel = None  # the Future of the compiled kernel, then the kernel (False: none)
        self.compiled = False

    def run(self, tensors: list) -> list:
        if self.compiled:
            return self._run_kernel(tensors)
        kernel = self.kernel
        if kernel:
            if kernel.done():
                try:
                    self.kernel = kernel.result()
                    self.compiled = True
                except Exception as e:  # noqa: BLE001 - the replay goes on as it is
                    self.kernel = False
                    warnings.warn(f"tape gradient: the numba backend could not compile a "
                                  f"backward pass ({type(e).__name__}: {e}); its NumPy "
                                  "replay goes on", RuntimeWarning, stacklevel=2)
                if self.compiled:
                    return self._run_kernel(tensors)
        elif kernel is None:
            start = time.perf_counter()
            grads = self._replay(tensors)
            self.spent += time.perf_counter() - start
            if self.spent >= KERNEL_AFTER_SECONDS:
                self.kernel = _kernel_compiler(self.graph, self.spent) \
                    if _kernel_compiler.fn else False
            return grads
        return self._replay(tensors)

    def _replay(self, tensors: list) -> list:
        env = [None] * self.n_slots
        for s, i in enumerate(self.feeds):
            env[s] = tensors[i]._value
        for impl, attrs, ins, out in self.plan:
            r = impl(*[env[i] for i in ins], **attrs) if attrs else impl(*[env[i] for i in ins])
            if type(out) is int:
                env[out] = r if type(r) is np.ndarray else np.asarray(r)
            else:
                for o, v in zip(out, r, strict=True):
                    env[o] = v if type(v) is np.ndarray else np.asarray(v)
        outs = [np.array(env[res[1]]) if res[2] else env[res[1]]
                if res is not None and res[0] == "out" else None for res in self.results]
        return self._gradients(tensors, outs)

    def _run_kernel(self, tensors: list) -> list:
        arrays = [tensors[i]._value for i in self.feeds]
        results = self.kernel(arrays)
        fed = {id(a) for a in arrays}
        outs = []
        for res in self.results:
            x = None
            if res is not None and res[0] == "out":
                x = results[res[3]]
                if id(x) in fed or x.base is not None or not x.flags.writeable:
                    x = np.array(x)
            outs.append(x)
        return self._gradients(tensors, outs)

    def _gradients(self, tensors: list, outs: list) -> list:
        """One gradient per source: the tensor fed, or `outs[i]` as a tensor (one tensor
        for a result that answers several sources)."""
        made: dict = {}
        grads = []
        for res, x in zip(self.results, outs, strict=True):
            if res is None:
                grads.append(None)
            elif res[0] == "fed":
                grads.append(tensors[self.feeds[res[1]]])
            else:
                g = made.get(res[1])
                if g is None:
                    g = made[res[1]] = EagerTensor(x)
                grads.append(g)
        return grads


def _trace(records, slots, tensors, key_of, targets, sources, grad_ys, mode) -> Replay:
    """The backward pass traced into a graph: `backprop` on copies of `records` whose
    tensors are the graph's inputs."""
    graph = FuncGraph("tape_backward")
    with graph.as_default():
        ph = [graph.add_input(TensorType(t._value.shape, t._value.dtype)) for t in tensors]
        keys = {id(p): k for p, k in zip(ph, key_of, strict=True)}
        shadow = []
        for rec in records:
            op = Operation(rec.primitive, [ph[slots[id(t)]] for t in rec.inputs], rec.attrs,
                           None, None, None)
            op.outputs = tuple(ph[slots[id(t)]] for t in rec.outputs)
            shadow.append(op)

        def placeholder(t):
            return None if t is None else ph[slots[id(t)]]

        grads = backprop(shadow, [placeholder(t) for t in targets],
                         [placeholder(t) for t in sources],
                         None if grad_ys is None else [placeholder(t) for t in grad_ys],
                         unconnected_gradients=mode, aggregate=aggregate_gradients,
                         key=lambda t: keys[id(t)])
    return Replay(graph, ph, grads)


def cached_gradient(records, var_of, targets, sources, grad_ys, mode):
    """The gradients `backprop` would give for this request (one per source), from a
    replay of its traced backward pass; None when the request is left to `backprop`."""
    if state.graph is not None or state.tapes or state.transposing:
        return None
    # `None` (ones for every target) and an empty list (an error backprop reports) differ
    found = signature(records, var_of, targets, sources, () if grad_ys is None else grad_ys,
                      (mode, grad_ys is None))
    if found is None:
        return None
    sig, slots, tensors = found
    try:
        replay = _CACHE.get(sig)
    except TypeError:  # an unhashable attribute
        return None
    if replay is None:
        if sig not in _CACHE and not TRACE_AT_ONCE:  # seen once: remember it, let backprop run
            with _LOCK:
                while len(_CACHE) >= CACHE_SIZE:
                    del _CACHE[next(iter(_CACHE))]
                _CACHE[sig] = None
            return None
        try:
            replay = _trace(records, slots, tensors, _keys(tensors, var_of), targets, sources,
                            grad_ys, mode)
        except Exception:  # noqa: BLE001 - backprop runs and reports it
            replay = _REFUSED
        _CACHE[sig] = replay
    if replay is _REFUSED:
        return None
    try:
        return replay.run(tensors)
    except Exception:  # noqa: BLE001 - backprop runs again and reports it
        return None
