"""`tg.GradientTape`: records the ops run on watched tensors, eagerly or inside a trace, and
differentiates them with the one reverse-accumulation routine (`backprop`).

While a tape records it sits in `state.tapes`; every op that runs (`bind`, eagerly or into
the graph being traced) is offered to it with `record(op)`, and every Variable read with
`variable_accessed(variable, tensor)`. A tape keeps only the ops that consume a tensor it
watches (a set of `id()`s of tensors it keeps alive, so that no id is reused while it
records), and their outputs become watched in turn. Each read of a Variable is a new
tensor; the tape maps the reads of a watched variable back to it, so
`gradient(y, variable)` sums over them. Eagerly, a request whose recorded structure
repeats is answered by a replay of its traced backward pass (transforms/tape_cache.py).
"""

from __future__ import annotations

import contextlib
import math
import warnings

import numpy as np

from tracegrad import ops
from tracegrad.core import dtypes, tree
from tracegrad.core.ir import EagerTensor, FuncGraph, GraphTensor, Tensor
from tracegrad.core.state import state
from tracegrad.core.variables import Variable
from tracegrad.errors import (
    ArgumentTypeError, InvalidArgumentError, ShapeError, TracegradError, UsageError,
)
from tracegrad.ops.indexing import gather_p
from tracegrad.passes import inline_graph
from tracegrad.transforms.backprop import backprop, unconnected_mode
from tracegrad.transforms.indexed_slices import (
    IndexedSlices,
    aggregate_gradients,
    gather_rows_gradient,
    wants_rows_gradient,
)
from tracegrad.transforms.jacobian import check_batch_shapes, stacked_rows
from tracegrad.transforms.tape_cache import cached_gradient

_USED = (
    "A non-persistent GradientTape can only be used to compute one set of gradients (or "
    "jacobians); create it with persistent=True to call gradient/jacobian more than once"
)


def _variable_key(v: Variable) -> tuple:
    return ("variable", v._unique_id)


def as_tensor(x):
    """`x` as a tensor of the current context: tensors pass through, Variables are read,
    IndexedSlices densified, anything else becomes a constant (Python floats -> float64)."""
    if isinstance(x, Tensor):
        return x
    if isinstance(x, Variable):
        return x.value()
    if isinstance(x, IndexedSlices):
        return x.__tg_dense__()
    if state.graph is not None:
        return state.graph.to_tensor(x)
    arr = np.array(x)
    dtype = dtypes.canonicalize(arr.dtype)
    return EagerTensor(arr if arr.dtype == dtype else arr.astype(dtype))


def constant_like_context(arr: np.ndarray):
    """`arr` as a constant tensor of the current context (eager or the graph being built)."""
    return state.graph.constant(arr) if state.graph is not None else EagerTensor(arr)


class Recording:
    """What one tape has recorded: the kept ops in creation order and the watched tensors.

    This is the object that sits in `state.tapes`; `GradientTape` is the user's handle on it
    (a new Recording after `reset()` or after a non-persistent tape was used).
    """

    def __init__(self, persistent: bool = False, watch_accessed_variables: bool = True):
        self.persistent = persistent
        self.watch_accessed_variables = watch_accessed_variables
        self.records: list = []
        self.live: set = set()  # ids of the watched tensors and of recorded ops' outputs
        self.var_of: dict = {}  # id of a variable read -> the variable's key
        self.variables: dict = {}  # key -> watched Variable
        self.keep: list = []  # the tensors watched by id that no record holds (kept alive)

    # -- called by bind and Variable.value ------------------------------------------------

    def record(self, op) -> None:
        live = self.live
        for t in op.inputs:
            if id(t) in live:
                break
        else:
            return
        if op.primitive is gather_p and op.graph is None and wants_rows_gradient(op):
            op.grad_override = gather_rows_gradient
        self.records.append(op)
        for t in op.outputs:
            live.add(id(t))

    def variable_accessed(self, v: Variable, t) -> None:
        key = _variable_key(v)
        if key not in self.variables:
            if not (self.watch_accessed_variables and v.trainable):
                return
            self.variables[key] = v
        raw = id(t)
        if raw in self.var_of:  # a variable's capture in a graph: one tensor for every read
            return
        self.var_of[raw] = key
        self.live.add(raw)
        self.keep.append(t)

    # -- watching ---------------------------------------------------------------------------

    def watch_tensor(self, t) -> None:
        self.live.add(id(t))
        self.keep.append(t)

    def watch_variable(self, v: Variable) -> None:
        self.variables.setdefault(_variable_key(v), v)

    def watched_variables(self) -> tuple:
        """The watched variables in creation order."""
        return _creation_order(self.variables)

    def key(self, t):
        k = id(t)
        return self.var_of.get(k, k)

    # -- differentiating --------------------------------------------------------------------

    def read_variable(self, v: Variable):
        """A read of `v` registered on this recording (for a Variable used as a target)."""
        t = v.value()
        self.variable_accessed(v, t)
        return t

    def _source(self, x):
        """The tensor standing for source `x` (None: a variable this tape cannot reach)."""
        if isinstance(x, Variable):
            if state.graph is None:
                t = EagerTensor(x._value)
                self.var_of[id(t)] = _variable_key(x)
                self.keep.append(t)
                return t
            found = state.graph._capture_map.get(id(x))
            return found if found is not None and id(found) in self.var_of else None
        if isinstance(x, Tensor):
            return x
        raise ArgumentTypeError(
            f"GradientTape.gradient: sources must be tensors or Variables, got "
            f"{type(x).__name__}"
        )

    def gradient(self, targets, sources, output_gradients=None, unconnected_gradients="none"):
        """One gradient (or None) per source, of `sum(targets * output_gradients)`."""
        mode = unconnected_mode(unconnected_gradients)
        xs = [self._source(x) for x in sources]
        found = [x for x in xs if x is not None]
        grads = cached_gradient(self.records, self.var_of, targets, found, output_gradients,
                                mode)
        if grads is None:
            grads = backprop(
                list(self.records), targets, found, output_gradients,
                unconnected_gradients=mode, aggregate=aggregate_gradients, key=self.key,
            )
        grads = iter(grads)
        out = []
        for x, s in zip(xs, sources, strict=True):
            if x is not None:
                out.append(next(grads))
            elif mode == "zero":
                out.append(constant_like_context(np.zeros(s.shape, s.dtype)))
            else:
                out.append(None)
        return out


class VariableWatcher:
    """Collects the trainable Variables read while it is active (records no ops)."""

    def __init__(self):
        self.variables: dict = {}

    def record(self, op) -> None:
        pass

    def variable_accessed(self, v: Variable, t) -> None:
        if v.trainable:
            self.variables.setdefault(_variable_key(v), v)

    def watched_variables(self) -> tuple:
        return _creation_order(self.variables)

    def __enter__(self):
        state.tapes.append(self)
        return self

    def __exit__(self, *exc):
        _remove(state.tapes, self)


def _creation_order(variables: dict) -> tuple:
    return tuple(sorted(variables.values(), key=lambda v: v._unique_id))


def _remove(stack: list, item) -> None:
    for i in range(len(stack) - 1, -1, -1):
        if stack[i] is item:
            del stack[i]
            return


@contextlib.contextmanager
def stop_recording():
    """No tape records inside (variable watchers still see variable reads)."""
    saved = state.tapes
    state.tapes = [t for t in saved if not isinstance(t, Recording)]
    try:
        yield
    finally:
        state.tapes = saved


@contextlib.contextmanager
def recording(rec: Recording):
    """`rec` records inside."""
    state.tapes.append(rec)
    try:
        yield rec
    finally:
        _remove(state.tapes, rec)


def inline_recorded(graph, target, inputs) -> list:
    """`passes.inline_graph` into the graph being built, offering the copied ops to the
    tapes recording in it (as if they had been bound there)."""
    start = len(target.operations)
    outs = inline_graph(graph, target, inputs)
    if state.tapes and target is state.graph:
        for op in target.operations[start:]:
            for tape in state.tapes:
                tape.record(op)
    return outs


def _flatten_watchable(x) -> list:
    return tree.flatten(x, is_leaf=lambda v: v is None)[0]


class GradientTape:
    """Records operations for automatic differentiation (`with tg.GradientTape() as g:`).

    Operations executed inside the context are recorded if one of their inputs is
    watched: tensors passed to `watch`, and trainable Variables read inside (unless
    `watch_accessed_variables=False`). `gradient` then differentiates any recorded
    result with respect to watched tensors or variables. A tape can be used once unless
    `persistent=True`. Works eagerly and inside `tg.function`.

    >>> x = tg.constant(3.0)
    >>> with tg.GradientTape() as g:
    ...     g.watch(x)
    ...     y = x * x
    >>> g.gradient(y, x).numpy()
    6.0
    """

    def __init__(self, persistent: bool = False, watch_accessed_variables: bool = True):
        self._tape: Recording | None = None
        self._persistent = bool(persistent)
        self._watch_accessed_variables = bool(watch_accessed_variables)
        self._watched_variables: tuple = ()
        self._recording = False
        self._warned = False

    def __enter__(self):
        self._push_tape()
        return self

    def __exit__(self, typ, value, traceback):
        if self._recording:
            self._pop_tape()

    def _push_tape(self):
        if self._recording:
            raise InvalidArgumentError(
                "Tape is still recording. This can happen if you try to re-enter an "
                "already-active tape."
            )
        if self._tape is None:
            self._tape = Recording(self._persistent, self._watch_accessed_variables)
        state.tapes.append(self._tape)
        self._recording = True

    def _pop_tape(self):
        if not self._recording:
            raise InvalidArgumentError("Tape is not recording.")
        _remove(state.tapes, self._tape)
        self._recording = False

    def watch(self, tensor) -> None:
        """Ensures that `tensor` (a tensor, Variable, or a structure of them) is traced by
        this tape, and by this tape only: an outer tape that should differentiate what an
        inner one computes watches the tensor itself.

        The leaves are taken in order: each is checked (ValueError for anything that is not
        a tensor or Variable; a warning for one that is not floating-point, which cannot
        carry a gradient), then watched. RuntimeError for a tape with no recording (never
        entered, or a non-persistent tape already used).
        """
        for t in _flatten_watchable(tensor):
            if not isinstance(t, (Tensor, Variable)):
                raise InvalidArgumentError(  # the seed raises ValueError
                    f"GradientTape.watch: passed in object of type {type(t)}, not tg.Tensor")
            if not dtypes.is_differentiable(t.dtype):
                warnings.warn(
                    "The dtype of the watched tensor must be floating (e.g. tg.float32), "
                    f"got {t.dtype.name}", UserWarning, stacklevel=2,
                )
            if self._tape is None:
                raise UsageError(
                    "GradientTape.watch on a tape that is not recording anything: call it "
                    "inside `with tape:` (a non-persistent tape that computed its gradient "
                    "is used up; create a new one)"
                )
            if isinstance(t, Variable):
                self._tape.watch_variable(t)
                for watcher in state.tapes:  # as a read does, for custom_gradient's watcher
                    if isinstance(watcher, VariableWatcher):
                        watcher.variable_accessed(t, None)
            else:
                self._tape.watch_tensor(t)

    @contextlib.contextmanager
    def stop_recording(self):
        """Temporarily stops recording operations on this tape.

        >>> x = tg.constant(4.0)
        >>> with tg.GradientTape() as tape:
        ...     with tape.stop_recording():
        ...         y = x ** 2
        >>> print(tape.gradient(y, x))
        None

        Raises RuntimeError for a tape with no recording (never entered, or a used
        non-persistent tape), ValueError for one that is not recording now (as the seed).
        """
        if self._tape is None:
            raise UsageError("Trying to stop recording a tape which is not recording.")
        self._pop_tape()
        try:
            yield
        finally:
            self._push_tape()

    def reset(self) -> None:
        """Clears everything recorded, as exiting and re-entering with a new tape would."""
        self._pop_tape()
        self._tape = None
        self._push_tape()

    def watched_variables(self) -> tuple:
        """The variables watched by this tape, in order of construction."""
        if self._tape is not None:
            self._watched_variables = self._tape.watched_variables()
        elif type(self._watched_variables) is dict:  # a used-up tape's, ordered when asked
            self._watched_variables = _creation_order(self._watched_variables)
        return self._watched_variables

    def _begin_gradient(self, what: str) -> Recording:
        if self._tape is None:
            raise UsageError(_USED)
        if self._recording:
            if not self._persistent:
                self._pop_tape()
            elif not self._warned:
                self._warned = True
                warnings.warn(
                    f"Calling GradientTape.{what} on a persistent tape inside its context "
                    "records the gradient ops on the tape too, which costs time and memory; "
                    "call it outside the context unless you want higher-order derivatives",
                    UserWarning, stacklevel=3,
                )
        return self._tape

    def _end_gradient(self) -> None:
        if not self._persistent:
            self._watched_variables = self._tape.variables
            self._tape = None

    def _target(self, tape: Recording, t):
        if isinstance(t, Variable):
            return tape.read_variable(t)
        return as_tensor(t)

    def gradient(self, target, sources, output_gradients=None,
                 unconnected_gradients="none"):
        """The gradient of `target` (a tensor or structure; their sum) with respect to each
        of `sources` (tensors, Variables, or a structure of them), mirroring `sources`.

        `output_gradients` weights each target (default ones). A source the target does
        not depend on gives None, or zeros with `unconnected_gradients="zero"`; an integer
        source gives None. The gradient of `take` w.r.t. its table is a `tg.IndexedSlices`.

        The seed's checks, in its order: RuntimeError when called again on a
        non-persistent tape; TypeError when `target` is None; ValueError for a Variable
        target of a persistent tape still recording (it is read on this tape, which cannot
        be entered twice); ValueError for an unknown `unconnected_gradients`; TypeError for
        a source that is not a tensor or Variable.
        """
        tape = self._begin_gradient("gradient")
        if target is None:
            raise ArgumentTypeError(
                "Argument `target` should be a list or nested structure of Tensors or "
                "Variables to be differentiated, but received None."
            )
        if type(target) in _TENSORS:  # one tensor: no structure to flatten
            targets = [target]
        else:
            targets = []
            for t in tree.flatten(target)[0]:
                if isinstance(t, Variable):
                    with self:
                        t = tape.read_variable(t)
                targets.append(as_tensor(t))
        kind = type(sources)
        if (kind is list or kind is tuple) and all(type(s) in _SOURCES for s in sources):
            flat_sources, treedef = list(sources), kind  # a flat list or tuple
        else:
            flat_sources, treedef = tree.flatten(sources, is_leaf=lambda v: v is None)
        _check_live(targets, flat_sources)
        if output_gradients is not None:
            output_gradients = [  # NumPy values and numbers take their target's dtype
                as_output_gradient(g)
                for g in tree.flatten(output_gradients, is_leaf=lambda v: v is None)[0]
            ]
        grads = tape.gradient(targets, flat_sources, output_gradients, unconnected_gradients)
        self._end_gradient()
        if treedef is list or treedef is tuple:
            return treedef(grads)
        return tree.unflatten(treedef, grads)

    # -- jacobians: vectorized (pfor) or one row after the other ---------------------------

    def _check_loop(self, what: str, use_pfor: bool) -> None:
        """Errors that come before anything is computed (the tape keeps recording)."""
        if self._tape is None:
            raise UsageError(_USED)
        if state.graph is None and not use_pfor and not self._persistent:
            raise UsageError(
                f"GradientTape must be created with persistent=True to compute the {what} "
                "with eager execution enabled and with experimental_use_pfor set to False."
            )

    def jacobian(self, target, sources, unconnected_gradients="none",
                 parallel_iterations=None, experimental_use_pfor=True):
        """The Jacobian of `target` w.r.t. each of `sources`: shape
        `target.shape + source.shape`, mirroring the structure of `sources`.

        >>> with tg.GradientTape(persistent=True) as g:
        ...     x = tg.constant([1.0, 2.0])
        ...     g.watch(x)
        ...     y = x * x
        >>> g.jacobian(y, x, experimental_use_pfor=False).numpy()
        array([[2., 0.], [0., 4.]])

        With `experimental_use_pfor=True` (the default) the gradient of the target is taken
        once, on a batch of one-hot output gradients (vectorized; eagerly the batched ops
        run one by one, recorded on any outer tape); `parallel_iterations=k` batches k rows
        at a time. With False, one gradient per element of the target (eagerly this needs a
        persistent tape).
        """
        self._check_loop("jacobian", experimental_use_pfor)
        tape = self._begin_gradient("jacobian")
        target = self._target(tape, target)
        flat_sources, treedef = tree.flatten(sources, is_leaf=lambda v: v is None)
        shape = tuple(target.shape)
        n = _static_size("jacobian", shape)
        if experimental_use_pfor and n:
            resolved = _resolved(tape, flat_sources)
            out = _vectorized(lambda: _jacobian_rows(
                "GradientTape.jacobian", tape, target, resolved, shape, None,
                unconnected_gradients, parallel_iterations))
            self._end_gradient()
            return tree.unflatten(treedef, out)
        rows = []
        for i in range(n):
            seed = np.zeros(n, target.dtype)
            seed[i] = 1
            seed = constant_like_context(seed.reshape(shape))
            rows.append(tape.gradient([target], flat_sources, [seed], unconnected_gradients))
        out = [
            _stack_rows([r[j] for r in rows], shape, s, unconnected_gradients, n == 0)
            for j, s in enumerate(flat_sources)
        ]
        self._end_gradient()
        return tree.unflatten(treedef, out)

    def batch_jacobian(self, target, source, unconnected_gradients="none",
                       parallel_iterations=None, experimental_use_pfor=True):
        """Per-example Jacobians: for `target` `[b, y...]` whose row i depends only on row i
        of `source` `[b, x...]`, the result has shape `[b, y..., x...]`.

        >>> with tg.GradientTape(persistent=True) as g:
        ...     x = tg.constant([[1., 2.], [3., 4.]])
        ...     g.watch(x)
        ...     y = x * x
        >>> g.batch_jacobian(y, x, experimental_use_pfor=False).numpy()[1]
        array([[6., 0.], [0., 8.]])

        Raises ValueError unless both have rank >= 2 and equal first dims.
        """
        if self._tape is None:
            raise UsageError(_USED)
        tshape, sshape = tuple(target.shape), tuple(source.shape)
        check_batch_shapes(tshape, sshape)
        self._check_loop("batch_jacobian", experimental_use_pfor)
        m = _static_size("batch_jacobian", tshape[1:])
        if (experimental_use_pfor and parallel_iterations is not None
                and parallel_iterations < m and not self._persistent):
            # The seed runs its loop body once per chunk: the first uses the tape up.
            self._begin_gradient("batch_jacobian")
            self._end_gradient()
            raise UsageError("GradientTape must be created with persistent=True to compute "
                             "the batch_jacobian with parallel_iterations.")
        tape = self._begin_gradient("batch_jacobian")
        target = self._target(tape, target)
        if experimental_use_pfor and m:
            (cols,) = _vectorized(lambda: _jacobian_rows(
                "GradientTape.batch_jacobian", tape, target, _resolved(tape, [source]),
                tshape[1:], 0, "zero", parallel_iterations))  # [b, y..., x...]
            self._end_gradient()
            return cols
        b = _static_size("batch_jacobian", tshape[:1])
        columns = []
        for j in range(m):
            seed = np.zeros((b, m), target.dtype)
            seed[:, j] = 1
            seed = constant_like_context(seed.reshape(tshape))
            columns.append(tape.gradient([target], [source], [seed], unconnected_gradients)[0])
        self._end_gradient()
        result_shape = tshape + sshape[1:]
        if all(c is None for c in columns):
            return constant_like_context(np.zeros(result_shape, target.dtype))
        stacked = _stack_rows(columns, (m,), source, "zero", m == 0)  # [m, b, x...]
        perm = (1, 0) + tuple(range(2, len(sshape) + 1))
        return ops.reshape(ops.transpose(stacked, permutation=perm), new_sizes=result_shape)


_TENSORS = frozenset((EagerTensor, GraphTensor))


def _check_live(targets, sources) -> None:
    """Refuse a traced tensor used outside the trace that made it (a leaked tracer): no tape
    of this trace can have recorded it, and its gradient would silently be None."""
    graph = state.graph
    for t in (*targets, *sources):
        if type(t) is GraphTensor and (graph is None or t.graph is not graph
                                       and not t.graph.is_ancestor_of(graph)):
            raise TracegradError(
                f"a traced Tensor ({t.type}) created at {t._where()} is passed to "
                "GradientTape.gradient outside the function that traced it (a leaked "
                "tracer); return it from the function instead")
_SOURCES = frozenset((EagerTensor, GraphTensor, Variable))


def as_output_gradient(g):
    """An output gradient as backprop takes it: tensors, or arrays it casts to the target's
    dtype (None means ones)."""
    if g is None or isinstance(g, Tensor):
        return g
    if isinstance(g, (Variable, IndexedSlices)):
        return as_tensor(g)
    return np.asarray(g)


def _jacobian_rows(what, tape, target, sources, shape, batch_axis, mode, parallel_iterations):
    """The Jacobian blocks of `target` w.r.t. `sources` by one vectorized gradient over the
    rows of an identity of `shape`'s size: `target.shape + source.shape` each (None where
    unconnected in mode "none"). With `batch_axis` 0 (batch_jacobian) each identity row is
    broadcast over the target's first dim and the blocks are `[b, y..., x[1:]...]`."""
    n = math.prod(shape)
    connected: list = []

    def row(seed):
        if batch_axis is not None:
            seed = ops.broadcast_like(seed, target, tuple(range(1, target.ndim)))
        grads = tape.gradient([target], sources, [seed], mode)
        connected[:] = [g is not None for g in grads]
        return [g.__tg_dense__() if isinstance(g, IndexedSlices) else g
                for g in grads if g is not None]

    rows = iter(stacked_rows(what, row, n, shape, target.dtype, True, parallel_iterations))
    out = []
    for present, source in zip(connected, sources, strict=True):
        if not present:
            out.append(None)
            continue
        r = next(rows)  # [n, *source.shape]
        if batch_axis is None:
            out.append(ops.reshape(r, new_sizes=(*shape, *source.shape)))
            continue
        r = ops.transpose(r, permutation=(1, 0, *range(2, r.ndim)))  # [b, n, x...]
        lead = -1 if r.shape[0] is None else r.shape[0]
        out.append(ops.reshape(r, new_sizes=(lead, *shape, *source.shape[1:])))
    return out


def _resolved(tape, sources) -> list:
    """Sources with each Variable replaced by the tensor standing for it in the current
    context (the vectorized gradient is built in a nested graph, where it cannot be found)."""
    out = []
    for s in sources:
        t = tape._source(s) if isinstance(s, Variable) else None
        out.append(s if t is None else t)
    return out


def _vectorized(build):
    """`build()` (which emits ops), in the graph being built; eagerly, traced into a graph
    that captures the eager tensors it reads, whose ops then run one by one on them (so
    any recording tape sees them, for higher-order gradients)."""
    if state.graph is not None:
        return build()
    graph = FuncGraph("vectorized")
    graph.capture_eager = True
    with graph.as_default():
        flat = build()
        graph.outputs = [graph.to_tensor(x) for x in flat if x is not None]
    values = iter(_replay_eagerly(graph))
    return [None if x is None else next(values) for x in flat]


def _replay_eagerly(graph: FuncGraph) -> list:
    """Run `graph`'s ops one by one eagerly on its captured values; returns its outputs."""
    env = {id(p): external for external, p in graph.captures}
    for op in graph.operations:
        out = op.primitive.bind(*[env[id(t)] for t in op.inputs], **op.attrs)
        outs = out if op.primitive.multiple_results else (out,)
        for t, v in zip(op.outputs, outs, strict=True):
            env[id(t)] = v
    return [as_tensor(env[id(t)]) for t in graph.outputs]


def _static_size(what: str, shape: tuple) -> int:
    if None in shape:
        raise ShapeError(
            f"GradientTape.{what}: the sequential loop needs a target of known shape, got "
            f"{shape}; trace with a fully known input_signature"
        )
    return math.prod(shape)


def _stack_rows(rows, lead_shape, source, mode, empty):
    """Per-row gradients (each shaped like `source`, or None) as one `lead_shape +
    source.shape` tensor; None if every row is None and `mode` is "none"."""
    sshape = tuple(source.shape)
    dtype = source.dtype
    if empty or all(r is None for r in rows):
        if mode == "none" and not empty:
            return None
        return constant_like_context(np.zeros(tuple(lead_shape) + sshape, dtype))
    parts = []
    for r in rows:
        if r is None:
            r = constant_like_context(np.zeros(sshape, dtype))
        elif isinstance(r, IndexedSlices):
            r = r.__tg_dense__()
        parts.append(ops.reshape(r, new_sizes=(1, *sshape)))
    stacked = parts[0] if len(parts) == 1 else ops.concatenate(*parts, dimension=0)
    return ops.reshape(stacked, new_sizes=tuple(lead_shape) + sshape)
