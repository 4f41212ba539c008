"""Signature keys of calls: how arguments are told apart, checked and converted.

Each flat leaf of `(args, kwargs)` gets an *entry* in the signature key:
  (shape, dtype)        an array (ndarray, NumPy scalar, tg.Tensor, tg.Variable); a dim
                        may be None in the entries of a trace made for many sizes;
  (shape, dtype, True)  a Python int or float, traced as a weakly typed rank-0 tensor
                        (inside a trace, any weakly typed tensor of the enclosing trace);
  _Static(i)            a static argument (its value is `statics[i]`);
  _StaticLeaf(value)    any other object (a Python bool, a string, a callable): baked into
                        the trace, each distinct value its own trace, as tf.function does.
"""

from __future__ import annotations

import inspect

import numpy as np

from tracegrad.core import dtypes, tree
from tracegrad.core.arrays import as_array, is_foreign_array, native
from tracegrad.core.ir import EagerTensor, GraphTensor, Tensor
from tracegrad.core.source import user_location
from tracegrad.core.state import state
from tracegrad.core.types import TensorSpec, TensorType
from tracegrad.core.variables import Variable
from tracegrad.errors import (
    ArgumentTypeError, DTypeError, InvalidArgumentError, ShapeError, TracegradError,
)

_ndarray = np.ndarray
# Python numbers traced as weak scalars; a Python bool is static (a flag for `if`).
_PY_SCALARS = {float: dtypes.float64, int: dtypes.int64, complex: dtypes.complex128}
_WEAK_ENTRIES = {t: ((), d, True) for t, d in _PY_SCALARS.items()}
# What a TensorSpec of an input_signature accepts in place of an array.
_SPEC_SCALARS = {**_PY_SCALARS, bool: dtypes.bool_}


class _Static:
    """Stands for static argument number `index` in the flattened arguments."""

    __slots__ = ("index",)

    def __init__(self, index):
        self.index = index

    def __eq__(self, other):
        return type(other) is _Static and other.index == self.index

    def __hash__(self):
        return hash(("static", self.index))

    def __repr__(self):
        return f"<static {self.index}>"


class _StaticLeaf:
    """A non-array leaf, compared by type and value."""

    __slots__ = ("key", "value")

    def __init__(self, value, where):
        self.value = value
        self.key = _typed_key(value, where)

    def __eq__(self, other):
        return type(other) is _StaticLeaf and other.key == self.key

    def __hash__(self):
        return hash(self.key)


_NO_STATICS = (tuple, ())


def _typed_key(value, where):
    """A hashable key for a static value that tells `1`, `1.0` and `True` apart."""
    if type(value) is tuple:
        return (tuple, tuple([_typed_key(v, where) for v in value])) if value else _NO_STATICS
    try:
        hash(value)
    except TypeError:
        raise ArgumentTypeError(
            f"{where} must be hashable (it is part of the trace cache key), got "
            f"{type(value).__name__}; pass arrays as traced arguments instead"
        ) from None
    return (type(value), value)


def _entry(x):
    """The signature-key entry of one leaf."""
    t = type(x)
    if t is _ndarray:
        return (x.shape, x.dtype)
    if t is EagerTensor:
        v = x._value
        return (v.shape, v.dtype)
    weak = _WEAK_ENTRIES.get(t)
    if weak is not None:
        return weak
    if t is _Static:
        return x
    if isinstance(x, Variable):
        return (x._value.shape, x._value.dtype)
    if isinstance(x, (_ndarray, np.generic)):
        return (np.shape(x), np.asarray(x).dtype)
    if isinstance(x, GraphTensor):
        if state.graph is not None:  # a function called inside a trace
            return (x.shape, x.dtype, True) if x.type.weak else (x.shape, x.dtype)
        raise TracegradError(
            f"a traced Tensor ({x.type}) created at {x._where()} is passed to a compiled "
            f"function at {user_location()} outside the trace that made it (a leaked tracer)"
        )
    if isinstance(x, TensorSpec):
        raise ArgumentTypeError(f"a TensorSpec ({x}) stands for an array only in "
                                "get_concrete_function and tg.trace; call the function with "
                                "arrays")
    return _StaticLeaf(x, "a non-array argument")


def _native_leaf(x):
    """Leaf `x` as calls take it: another library's array (`__array__`, DLPack) as a NumPy
    array, an array of another byte order converted to the native one, the rest as is."""
    t = type(x)
    if t is _ndarray:
        return x if x.dtype.isnative else native(x)
    if t is EagerTensor or t in _PY_SCALARS or t is _Static:
        return x
    if isinstance(x, _ndarray):  # np.memmap, other subclasses
        return x if x.dtype.isnative else native(x)
    if isinstance(x, (Tensor, Variable, np.generic, TensorSpec)):
        return x
    return as_array(x) if is_foreign_array(x) else x


def _canonical_entries(fname, fn, leaves, treedef, entries):
    """`entries` with supported dtypes; a DTypeError naming the argument that has none."""
    try:
        return [(e[0], dtypes.canonicalize(e[1])) + e[2:] if _is_array(e) else e
                for e in entries]
    except TracegradError:
        pass
    args, kwargs = tree.unflatten(treedef, leaves)
    for name, e in zip(_leaf_names(fn, args, kwargs), entries, strict=True):
        if _is_array(e) and np.dtype(e[1]).newbyteorder("=") not in dtypes.SUPPORTED:
            raise DTypeError(
                f"{fname}: argument {name} has dtype {np.dtype(e[1]).name}, which tracegrad "
                f"does not support ({dtypes.SUPPORTED_TEXT}; convert it with .astype first)")
    raise AssertionError("an entry of an unsupported dtype")


def _fast_key(args):
    """`(key, eager, scalars, flags)` for positional arguments that are all arrays, tensors,
    Python numbers or bools (the common call), else None. The key holds each array's shape
    and dtype, each number's type and each bool's value (static): it decides the trace
    exactly as the full key does; `flags` says a bool is there (the call feeds the others)."""
    key = []
    eager = scalars = flags = False
    for a in args:
        t = type(a)
        if t is _ndarray:
            key.append(a.shape)
            key.append(a.dtype)
        elif t is EagerTensor:
            v = a._value
            key.append(v.shape)
            key.append(v.dtype)
            eager = True
        elif t in _PY_SCALARS:
            key.append(t)
            scalars = True
        elif t is bool:
            key.append(_FLAG_KEYS[a])
            flags = True
        else:
            return None
    return tuple(key), eager, scalars, flags


_FLAG_KEYS = {True: "static True", False: "static False"}


def _is_array(entry) -> bool:
    return type(entry) is tuple


def _family(entry):
    """What must match for a trace with None dims to serve this leaf: dtype, weakness, rank."""
    if type(entry) is tuple:
        return (entry[1], len(entry) == 3, len(entry[0]))
    return entry


def _dims_fit(spec_shape, shape) -> bool:
    return len(spec_shape) == len(shape) and all(
        s is None or s == d for s, d in zip(spec_shape, shape)
    )


def _spec_dtype_accepts(x, dtype, given) -> bool:
    """Arrays must have the spec's dtype (`given`); a Python scalar may be of a kind that
    promotes into it (an int for a float spec, a bool for anything), as NEP 50 weak
    scalars do."""
    py = _SPEC_SCALARS.get(type(x))
    if py is None and isinstance(x, GraphTensor) and x.type.weak:
        py = x.dtype  # a Python scalar of an enclosing trace
    if py is None:
        return given == dtype
    return dtypes.result_type((dtype, False), (py, True)) == (dtype, False)


def _check_leaf(fname, name, x, shape, dtype, what):
    """Raise if leaf `x` (a value, or a TensorSpec) does not fit `shape` and `dtype`."""
    if isinstance(x, TensorSpec):
        entry = (x.shape, x.dtype)
    elif type(x) is bool:  # an array for the spec, not the static flag it is elsewhere
        entry = ((), dtypes.bool_, True)
    else:
        entry = _entry(x)
    if _is_array(entry) and _dims_fit(shape, entry[0]) and _spec_dtype_accepts(
        x, dtype, entry[1]
    ):
        return
    spec = f"{what} {TensorType(shape, dtype)}"
    if not _is_array(entry):
        raise ArgumentTypeError(f"{fname}: argument {name} must be an array for {spec}, "
                                f"got {type(x).__name__}")
    if not _dims_fit(shape, entry[0]):
        raise ShapeError(f"{fname}: argument {name} has shape {tuple(entry[0])}, which does "
                         f"not fit {spec}")
    raise DTypeError(f"{fname}: argument {name} has dtype {np.dtype(entry[1]).name}, which "
                     f"does not fit {spec}")


def _to_array(x, dtype) -> np.ndarray:
    """The array fed to the executor for leaf `x` (Variables have been read already)."""
    t = type(x)
    if t is _ndarray:
        return x
    if t is EagerTensor:
        return x._value
    try:
        return np.asarray(x, dtype=dtype)
    except OverflowError:
        raise DTypeError(f"the Python int {x} does not fit {np.dtype(dtype).name} (at "
                         f"{user_location()}); pass it as a float or a NumPy array") from None


def narrowed_int_inputs(graph) -> tuple:
    """`(position, name, dtype, its min, its max)` of each weak int64 input of `graph` (a
    Python int argument) that the graph converts to another integer dtype: NumPy requires
    such an int to fit that dtype, and so does the call path (`check_narrowed`), since the
    graph's conversion would wrap it."""
    weak_ints = {id(t): i for i, t in enumerate(graph.inputs)
                 if t.type.weak and t.type.dtype == np.int64}
    found = {}
    for op in graph.operations:
        if (op.primitive.name == "convert_element_type" and id(op.inputs[0]) in weak_ints
                and dtypes.is_int(op.attrs["new_dtype"]) and op.attrs["new_dtype"] != np.int64):
            found[weak_ints[id(op.inputs[0])]] = (op.inputs[0].name, op.attrs["new_dtype"])
    return tuple((i, name, dt, int(np.iinfo(dt).min), int(np.iinfo(dt).max))
                 for i, (name, dt) in sorted(found.items()))


def check_narrowed(name: str, narrowed: tuple, arrays) -> None:
    """Raise DTypeError if a Python int argument listed by `narrowed_int_inputs` is out of
    the range of the dtype the graph converts it to."""
    for i, arg, dtype, low, high in narrowed:
        value = int(arrays[i])
        if not low <= value <= high:
            raise DTypeError(
                f"{name}: the Python int {value} passed as {arg} does not fit {dtype.name}, "
                "the dtype the function converts it to; NumPy refuses it too"
            )


def _describe(treedef, statics) -> str:
    text = tree.treedef_str(treedef)
    return f"{text} with static values {statics!r}" if statics else text


def _leaf_names(fn, args, kwargs) -> list[str]:
    """A readable name for each flat leaf of `(args, kwargs)`: the parameter's name, with
    `_0`, `_1`... for the leaves of a structure."""
    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        params = []
    named = [(params[i] if i < len(params) else f"arg{i}", a) for i, a in enumerate(args)]
    named += sorted(kwargs.items(), key=lambda kv: kv[0])
    names = []
    for base, value in named:
        n = len(tree.flatten(value)[0])
        names += [base] if n == 1 else [f"{base}_{j}" for j in range(n)]
    return names


def _safe_signature(fn):
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


def _normalize_static(fname, signature, argnums, argnames):
    """Static positions (non-negative, sorted) and names, each completing the other."""
    argnums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    argnames = (argnames,) if isinstance(argnames, str) else tuple(argnames)
    if signature is None:
        if any(i < 0 for i in argnums):
            raise InvalidArgumentError(
                f"{fname}: negative static_argnums need an inspectable signature")
        return tuple(sorted(set(argnums))), argnames
    params = list(signature.parameters.values())
    positional = [p.name for p in params
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    has_varargs = any(p.kind == p.VAR_POSITIONAL for p in params)
    nums = set()
    for i in argnums:
        j = i + len(positional) if i < 0 else i
        if j < 0 or (j >= len(positional) and not has_varargs):
            raise InvalidArgumentError(
                f"{fname}: static_argnums {i} is out of range for a function of "
                f"{len(positional)} positional parameters")
        nums.add(j)
    known = {p.name for p in params if p.kind != p.VAR_POSITIONAL}
    has_varkw = any(p.kind == p.VAR_KEYWORD for p in params)
    for name in argnames:
        if name not in known and not has_varkw:
            raise InvalidArgumentError(f"{fname}: static_argnames {name!r} names no parameter")
        if name in positional:
            nums.add(positional.index(name))
    names = set(argnames) | {positional[i] for i in nums if i < len(positional)}
    return tuple(sorted(nums)), tuple(sorted(names))
