"""`Primitive`: an op with rule slots, its registry, and `bind` (where a new op goes).

`prim.bind(*arrays, **attrs)` asks the context stack:
- inside a trace, it appends an `Operation` to the graph being built and returns symbolic
  tensors whose types `abstract_eval` inferred;
- eagerly with `tg.Tensor`/`tg.Variable` inputs, it runs `impl`, wraps the results as
  tensors and offers the op to every recording tape;
- with plain NumPy inputs and nothing recording, it runs `impl` and returns NumPy.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from tracegrad.core import dtypes
from tracegrad.core.ir import EagerTensor, FuncGraph, GraphTensor, Operation
from tracegrad.core.source import user_location
from tracegrad.core.state import state
from tracegrad.core.types import TensorType
from tracegrad.errors import (
    DTypeError, InvalidArgumentError, RegistryError, TracegradError, TracegradIndexError,
)

REGISTRY: dict[str, Primitive] = {}


class Primitive:
    """A named op with rule slots filled where it is defined.

    - `abstract_eval(*types, **attrs)` -> result `TensorType` (a list if `multiple_results`);
      raises `ShapeError` / `DTypeError` naming the op.
    - `impl(*ndarrays, **attrs)` -> ndarray(s): the NumPy reference.
    - `grad(op, *out_grads)` -> one gradient (or None) per input, built with tracegrad ops.
    - `batch(ctx, args, dims, **attrs)`: the vectorization rule (optional).
    - `dims(op)`: which dims of the op's operands and results are equal, and
      `size_operands`: where its run-time dim-size operands start (`def_dims`).

    Forward mode has no slot: `tg.jvp` transposes the vjp (docs/autodiff.md).
    """

    __slots__ = ("name", "multiple_results", "abstract_eval", "impl", "grad", "batch", "dims",
                 "size_operands")

    def __init__(self, name: str, *, multiple_results: bool = False):
        if name in REGISTRY:
            raise InvalidArgumentError(f"a primitive named {name!r} is already registered")
        self.name = name
        self.multiple_results = multiple_results
        self.abstract_eval: Callable | None = None
        self.impl: Callable | None = None
        self.grad: Callable | None = None
        self.batch: Callable | None = None
        self.dims: Callable | None = None
        self.size_operands: int | None = None
        REGISTRY[name] = self

    def def_abstract_eval(self, fn):
        self.abstract_eval = fn
        return fn

    def def_impl(self, fn):
        self.impl = fn
        return fn

    def def_grad(self, fn):
        self.grad = fn
        return fn

    def def_batch(self, fn):
        self.batch = fn
        return fn

    def def_dims(self, rule, *, size_operands: int | None = None):
        """Declare the op's dim relations, the one place they are stated (the numba planner
        and the simplifier read them).

        `rule(op)` yields `(x, i, y, j)` for each pair of equal dims: dim `i` of `x` equals
        dim `j` of `y`, where `x` and `y` are operands or results of `op` (an `Operation`, or
        any object with `inputs`, `outputs` and `attrs`, whose tensors have a `shape`).
        `no_dims` states that no result dim equals an operand dim.
        `size_operands`: the position of the op's first run-time dim-size operand (those from
        there on are scalar sizes, not data); the result's unknown dims are, in order, their
        values (broadcast_in_dim, iota).
        """
        self.dims = rule
        self.size_operands = size_operands
        return rule

    def size_operand_count(self, op) -> int:
        """How many trailing operands of `op` are run-time dim sizes."""
        return 0 if self.size_operands is None else len(op.inputs) - self.size_operands

    def __repr__(self):
        return f"<Primitive {self.name}>"

    def infer(self, types, attrs) -> list[TensorType]:
        out = self.abstract_eval(*types, **attrs)
        return list(out) if self.multiple_results else [out]

    def bind(self, *args, **attrs):
        graph = state.graph
        if graph is not None:
            return self.bind_in_graph(graph, args, attrs)
        return _bind_eager(self, args, attrs)

    def bind_in_graph(self, graph: FuncGraph, args, attrs):
        inputs = [
            a if type(a) is GraphTensor and a.graph is graph else graph.to_tensor(a) for a in args
        ]
        out_types = self.infer([t.type for t in inputs], attrs)
        op = graph.add_operation(self, inputs, attrs, out_types, user_location())
        if state.tapes:
            for tape in state.tapes:
                tape.record(op)
        return op.outputs if self.multiple_results else op.outputs[0]


def get_primitive(name: str) -> Primitive:
    try:
        return REGISTRY[name]
    except KeyError:
        raise RegistryError(f"no primitive named {name!r}") from None


def _eager_input(a):
    """(ndarray, tensor-or-None) for an eager argument."""
    from tracegrad.core.variables import Variable

    if isinstance(a, Variable):
        t = a.value()
        return t._value, t
    if isinstance(a, GraphTensor):
        raise TracegradError(
            f"a traced Tensor ({a.type}) created at {a._where()} is used eagerly at "
            f"{user_location()} (a leaked tracer); return it from the traced function instead"
        )
    if isinstance(a, EagerTensor):
        return a._value, a
    densify = getattr(a, "__tg_dense__", None)  # IndexedSlices: its dense tensor (recorded)
    if densify is not None:
        return _eager_input(densify())
    arr = np.asarray(a)
    if arr.dtype not in dtypes.SUPPORTED:
        arr = arr.astype(dtypes.canonicalize(arr.dtype))
    return arr, None


def _bind_eager(prim: Primitive, args, attrs):
    # The hot path of every eager program: tg.Tensor operands skip the general conversion,
    # and an Operation is built only when a tape is recording.
    values = []
    general = False
    eager = False
    arrays = False
    for a in args:
        cls = type(a)
        if cls is EagerTensor:
            values.append(a._value)
            eager = True
        elif cls is np.ndarray:
            values.append(a)
            arrays = True
        else:
            general = True
            break
    if general:
        values, tensors = _eager_inputs(args)
        eager = any(t is not None for t in tensors)
    try:
        out = prim.impl(*values, **attrs) if attrs else prim.impl(*values)
    except Exception as e:  # noqa: BLE001 - reported as a tracegrad error at the user's line
        _raise_eager_error(prim, values, attrs, e)
    if not eager:
        if prim.multiple_results:
            return tuple(_numpy_result(o) for o in out)
        return _numpy_result(out)
    if prim.multiple_results:
        outputs = tuple(EagerTensor(o if type(o) is np.ndarray else np.asarray(o)) for o in out)
    else:
        outputs = EagerTensor(out if type(out) is np.ndarray else np.asarray(out))
    tapes = state.tapes
    if tapes:  # a tape keeps NumPy operands for the gradient: copies, as the user may write
        if general:
            inputs = [t if t is not None else EagerTensor(v.copy() if v is a else v)
                      for a, t, v in zip(args, tensors, values, strict=True)]
        elif arrays:
            inputs = [a if type(a) is EagerTensor else EagerTensor(a.copy()) for a in args]
        else:
            inputs = args
        _record_eager(prim, inputs, attrs, outputs, tapes)
    return outputs


def _eager_inputs(args) -> tuple[list, list]:
    """The arrays of eager arguments, and the tensor each came from (None for NumPy)."""
    values = []
    tensors = []
    for a in args:
        v, t = _eager_input(a)
        values.append(v)
        tensors.append(t)
    return values, tensors


def bind_recorded(prim: Primitive, inputs: tuple) -> EagerTensor:
    """`prim` (single-result, no attributes) bound on eager tensors `inputs` while tapes
    record: what `bind` gives, without its conversions (the eager fast paths' bind)."""
    try:
        out = (prim.impl(inputs[0]._value, inputs[1]._value) if len(inputs) == 2
               else prim.impl(*[t._value for t in inputs]))
    except Exception:  # noqa: BLE001 - bind runs it again and reports it at the user's line
        return prim.bind(*inputs)
    return record_result(prim, inputs, {}, out)


def record_result(prim: Primitive, inputs: tuple, attrs: dict, out) -> EagerTensor:
    """`out`, what single-result `prim` gave on the arrays of eager tensors `inputs`, as a
    tensor offered to every recording tape, as `bind` offers it."""
    t = EagerTensor(out if type(out) is np.ndarray else np.asarray(out))
    _record_eager(prim, inputs, attrs, t, state.tapes)
    return t


def _record_eager(prim: Primitive, inputs, attrs, outputs, tapes) -> None:
    """Offer an eagerly run op (`outputs`: its result, a tuple if it has several) to every
    recording tape."""
    overrides = state.grad_overrides
    op = Operation(prim, inputs, attrs, None, None, overrides.get(prim.name) if overrides else None)
    op.outputs = outputs if prim.multiple_results else (outputs,)
    for tape in tapes:
        tape.record(op)


def _numpy_result(x):
    if type(x) is np.ndarray:
        return x[()] if x.ndim == 0 else x
    return x


def _raise_eager_error(prim: Primitive, values, attrs, e: Exception):
    if isinstance(e, TracegradError):  # it names the user's line already (the base class)
        raise e from None
    types = [TensorType(v.shape, v.dtype) for v in values]
    try:
        prim.infer(types, attrs)
    except TracegradError as err:
        raise err from None
    raise runtime_error(e, prim.name, f"at {user_location()}") from None


def runtime_error(e: Exception, name: str, where: str) -> Exception:
    """`e` (an impl's IndexError, LinAlgError ...) as the same type, its message naming op
    `name` and `where` it was created or run (a note instead if the type does not take a
    message). An index out of bounds, the user's mistake, becomes a `TracegradIndexError`;
    a numerical failure (LinAlgError) stays NumPy's."""
    msg = str(e) if str(e).startswith(f"{name}:") else f"{name}: {e}"
    cls = TracegradIndexError if type(e) is IndexError else type(e)
    try:
        new = cls(f"{msg} ({where})")
    except Exception:  # noqa: BLE001 - a constructor that wants other arguments
        e.add_note(f"in tracegrad op {name!r} ({where})")
        return e
    return new.with_traceback(e.__traceback__)


# -- the one primitive the IR itself needs ----------------------------------------------------

constant_p = Primitive("constant")


@constant_p.def_abstract_eval
def _constant_abstract_eval(*, value, weak=False):
    v = value.value
    if v.dtype not in dtypes.SUPPORTED:
        raise DTypeError(f"constant: unsupported dtype {v.dtype}")
    return TensorType(v.shape, v.dtype, weak)


@constant_p.def_impl
def _constant_impl(*, value, weak=False):
    return value.value


constant_p.def_grad(lambda op, g: ())


def no_dims(op):
    """The dims rule of a primitive none of whose result dims equals an operand dim."""
    return ()


constant_p.def_dims(no_dims)
