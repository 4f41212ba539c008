"""The machinery under every tracegrad.numpy function: conversion, NEP 50 promotion,
NumPy broadcasting made explicit as `convert_element_type` / `broadcast_in_dim` ops, and
shape helpers that cope with unknown (None) dims."""

from __future__ import annotations

import numpy as np

from tracegrad import ops
from tracegrad.core import dtypes
from tracegrad.core.arrays import as_array, native
from tracegrad.core.ir import EagerTensor, GraphTensor, Tensor
from tracegrad.core.shapes import broadcast_shapes, normalize_axes, normalize_axis, shape_str
from tracegrad.core.source import user_location
from tracegrad.core.state import state
from tracegrad.core.variables import Variable
from tracegrad.errors import DTypeError, InvalidArgumentError, ShapeError
from tracegrad.ops.shape_ops import broadcast_array

_PY_SCALARS = (bool, int, float, complex)


def is_tensor(x) -> bool:
    return isinstance(x, (Tensor, Variable))


def is_python_scalar(x) -> bool:
    return type(x) in _PY_SCALARS


def tracing() -> bool:
    return state.graph is not None


def read(x):
    """`x` with Variables read (a tensor), lists and other libraries' arrays turned into
    arrays, arrays of another byte order into native ones; other arrays unchanged."""
    if isinstance(x, Tensor) or type(x) in _PY_SCALARS:
        return x
    if isinstance(x, np.ndarray):
        return x if x.dtype.isnative else native(x)
    if isinstance(x, Variable):
        return x.value()
    if isinstance(x, np.generic):
        if x.dtype in SUPPORTED:
            return x  # a NumPy scalar stays one (returned as is by no-op functions)
        x = np.asarray(x)
    elif isinstance(x, (list, tuple)) and any(is_tensor(e) for e in _flat(x)):
        from tracegrad.numpy._shape import stack

        return stack([read(e) for e in x])
    elif getattr(x, "__tg_dense__", None) is not None:
        return x.__tg_dense__()
    arr = as_array(x)
    if arr.dtype not in dtypes.SUPPORTED:
        arr = arr.astype(dtypes.canonicalize(arr.dtype))
    return arr


def _flat(x):
    for e in x:
        if isinstance(e, (list, tuple)):
            yield from _flat(e)
        else:
            yield e


def dtype_of(x) -> tuple[np.dtype, bool]:
    """`(dtype, weak)` of an operand (Python scalars are weak)."""
    if isinstance(x, GraphTensor):
        return x.type.dtype, x.type.weak
    if type(x) in _PY_SCALARS:
        return dtypes.python_scalar_dtype(x), True
    return x.dtype, False


def has_float_dtype(x) -> bool:
    """Whether an operand's dtype is a float or complex one (one that has NaN)."""
    return dtypes.is_inexact(dtype_of(x)[0])


def shape_of(x) -> tuple:
    if type(x) in _PY_SCALARS:
        return ()
    return tuple(x.shape)


def ndim_of(x) -> int:
    return 0 if type(x) in _PY_SCALARS else len(x.shape)


def dtype_arg(dtype, op: str) -> np.dtype | None:
    """A `dtype=` argument (None, a NumPy dtype, a scalar type or a name) canonicalised."""
    if dtype is None:
        return None
    try:
        return dtypes.canonicalize(dtype, op=op)
    except DTypeError as e:
        raise DTypeError(str(e)) from None


def python_int_as(x, dtype: np.dtype) -> np.ndarray:
    """`x` (a Python or NumPy scalar, an array) as a `dtype` array; a Python int out of the
    range of `dtype` is a DTypeError at the user's line (NumPy's OverflowError)."""
    try:
        return np.asarray(x, dtype=dtype)
    except OverflowError:
        raise DTypeError(f"the Python int {x} does not fit {np.dtype(dtype).name}, "
                         "the dtype of the array it meets") from None


def cast(x, dtype: np.dtype, weak: bool = False):
    """`x` as `dtype` (a convert_element_type op when it is a tensor of another dtype)."""
    if type(x) in _PY_SCALARS:
        if type(x) is complex and dtype.kind != "c":
            x = x.real  # NumPy's cast of a complex value to a real dtype
        value = python_int_as(x, dtype)
        if weak and state.graph is not None:
            return state.graph.constant(value, weak=True)
        return value
    if isinstance(x, GraphTensor):
        if x.type.dtype == dtype and x.type.weak == weak:
            return x
        return ops.convert_element_type(x, new_dtype=dtype, weak=weak)
    if x.dtype == dtype:
        return x
    if isinstance(x, np.ndarray) and state.graph is None:
        return ops.convert_element_type_p.impl(x, new_dtype=dtype)
    return ops.convert_element_type(x, new_dtype=dtype)


_EAGER_ARRAYS = frozenset((EagerTensor, np.ndarray))


def promote(*xs, min_kind: str | None = None):
    """The operands converted to their NEP 50 common dtype, and that dtype.

    `min_kind="float"` promotes integer and bool results to float64 (as `true_divide`);
    complex results stay complex.
    """
    if not xs:
        raise InvalidArgumentError("need at least one array")
    if min_kind is None and state.graph is None:
        # eager tensors, Variables (read, in order) and arrays of one dtype as they are
        xs = [x.value() if type(x) is Variable else x for x in xs]
        dtype = xs[0].dtype if type(xs[0]) in _EAGER_ARRAYS else None
        if dtype in SUPPORTED and dtype.isnative and all(
                type(x) in _EAGER_ARRAYS and x.dtype is dtype for x in xs):
            return xs, dtype
    xs = [read(x) for x in xs]
    dtype, weak = dtypes.result_type(*(dtype_of(x) for x in xs))
    if min_kind == "float" and not dtypes.is_inexact(dtype):
        dtype = dtypes.float64
    return [operand(x, dtype, weak) for x in xs], dtype


def operand(x, dtype: np.dtype, weak: bool):
    """`x` cast to `dtype` as an operand of an op whose result is `weak` or not: a weak
    tensor of that dtype is used as it is (the op's result is strong anyway)."""
    if type(x) is GraphTensor and x.type.dtype == dtype and not weak:
        return x
    return cast(x, dtype, weak)


# -- NumPy's own loop selection ---------------------------------------------------------------

_WEAK_KEY = {dtypes.bool_: dtypes.bool_, dtypes.int64: int, dtypes.float64: float,
             dtypes.complex128: complex}
_DEFAULT_OF_WEAK = {int: dtypes.int64, float: dtypes.float64, complex: dtypes.complex128}
_LOOPS: dict = {}


def loop_dtypes(ufunc, keys, name: str) -> tuple:
    """The dtypes NumPy's `ufunc` computes in for operands `keys` (a dtype, or `int`/`float`
    for a weak Python scalar): `(in..., out)`. A loop tracegrad cannot run is a DTypeError."""
    found = _LOOPS.get((ufunc, keys))
    if found is not None:
        return found
    resolve = keys
    if all(k in _DEFAULT_OF_WEAK for k in keys):
        # Only weak operands: NumPy's own loop for Python scalars alone would be `object`
        # (`greater(int, int)`); a weak int is an int64 there, as `np.greater(3, 2)` computes.
        resolve = tuple(_DEFAULT_OF_WEAK[k] for k in keys)
    try:
        loop = ufunc.resolve_dtypes(resolve + (None,) * ufunc.nout)
    except TypeError as e:
        names = ", ".join(k.name if isinstance(k, np.dtype) else f"python {k.__name__}"
                          for k in keys)
        raise DTypeError(f"{name}: not supported for operands of dtype {names} ({e})"
                         ) from None
    for dt in loop:
        if dt not in dtypes.SUPPORTED:
            names = ", ".join(k.name if isinstance(k, np.dtype) else f"python {k.__name__}"
                              for k in keys)
            raise DTypeError(
                f"{name}: NumPy computes it in {dt.name} for operands of dtype {names}; "
                f"tracegrad supports {dtypes.SUPPORTED_TEXT} (cast first)"
            )
    _LOOPS[(ufunc, keys)] = loop
    return loop


def loop_key(x):
    if isinstance(x, GraphTensor):
        t = x.type
        return _WEAK_KEY[t.dtype] if t.weak else t.dtype
    if type(x) in _PY_SCALARS:
        return dtypes.bool_ if type(x) is bool else type(x)
    return x.dtype


def ufunc_operands(ufunc, name: str, *xs):
    """The operands cast to the dtypes NumPy's `ufunc` loop uses and broadcast together, and
    the loop's result dtype."""
    xs = [read(x) for x in xs]
    loop = loop_dtypes(ufunc, tuple(loop_key(x) for x in xs), name)
    weak = all(dtype_of(x)[1] for x in xs)
    xs = [operand(x, dt, weak) for x, dt in zip(xs, loop, strict=False)]
    return broadcast(*xs, op=name), loop[-1]


SUPPORTED = frozenset(dtypes.SUPPORTED)


# -- broadcasting ----------------------------------------------------------------------------


def dim_source(xs, shape, axis):
    """A scalar int64 tensor holding target dim `axis` of `shape`, read from an operand."""
    nd = len(shape)
    for x in xs:
        s = shape_of(x)
        i = axis - (nd - len(s))
        if i >= 0 and s[i] is None:
            return ops.dim_size(x, axis=i)
    raise InvalidArgumentError(f"no operand provides unknown dim {axis}")


def broadcast_to_shape(x, shape, sources=()):
    """`x` broadcast to `shape` by NumPy rules; unknown dims are read from `sources`."""
    xs = shape_of(x)
    shape = tuple(shape)
    if xs == shape and None not in shape:
        return x
    if type(x) in _PY_SCALARS:
        x = np.asarray(x)
    nd = len(shape)
    dims = tuple(range(nd - len(xs), nd))
    if xs == shape:
        return x
    if isinstance(x, np.ndarray) and None not in shape and state.graph is None:
        return broadcast_array(x, shape)
    dyn = [dim_source(list(sources) + [x], shape, i) for i, d in enumerate(shape) if d is None]
    return ops.broadcast_in_dim(x, *dyn, shape=shape, broadcast_dimensions=dims)


def broadcast(*xs, op: str = "broadcast"):
    """The operands broadcast to their common shape (a ShapeError naming `op` if they do not
    broadcast)."""
    shapes = [shape_of(x) for x in xs]
    first = shapes[0]
    if all(s == first for s in shapes):
        return list(xs)
    target = broadcast_shapes(*shapes, op=op)  # a ShapeError names the user's line
    return [x if s == target else broadcast_to_shape(x, target, xs) for x, s in zip(xs, shapes)]


# -- shapes with unknown dims ----------------------------------------------------------------


def static_dim(x, axis: int, op: str, hint: str = ""):
    """The size of dim `axis` of `x`; ShapeError when it is unknown while tracing."""
    d = shape_of(x)[axis]
    if d is None:
        raise ShapeError(
            f"{op}: needs the size of dim {axis} of {shape_str(shape_of(x))}, which is unknown "
            f"while tracing{'; ' + hint if hint else ''}"
        )
    return d


def static_shape(x, op: str, hint: str = "") -> tuple:
    for i in range(ndim_of(x)):
        static_dim(x, i, op, hint)
    return shape_of(x)


def reshape(x, shape, op: str = "reshape"):
    """`x` reshaped to `shape` (dims may be None, meaning "as in the operand"); skipped when
    the shape does not change. Several unknown dims are handled when only size-1 dims are
    inserted or removed."""
    shape = tuple(shape)
    old = shape_of(x)
    if old == shape:
        return x
    # (-1 for the unknown dim, unless a dim is 0: then any size fits and -1 is ambiguous)
    if sum(d is None for d in shape) <= 1 and not (None in shape and 0 in shape):
        return ops.reshape(x, new_sizes=tuple(-1 if d is None else d for d in shape))
    kept = [d for d in old if d != 1]
    if kept == [d for d in shape if d != 1]:
        # Only size-1 dims differ: drop the old ones, then insert the new ones.
        for axis in reversed([i for i, d in enumerate(old) if d == 1]):
            x = ops.gather(x, _index_constant(0), axis=axis)
        cur = shape_of(x)
        if cur == shape:
            return x
        bd = tuple(i for i, d in enumerate(shape) if d != 1)
        dyn = [ops.dim_size(x, axis=bd.index(i)) for i, d in enumerate(shape) if d is None]
        return ops.broadcast_in_dim(x, *dyn, shape=shape, broadcast_dimensions=bd)
    why = "a dim is 0 and another unknown" if 0 in shape else "more than one dim is unknown"
    raise ShapeError(
        f"{op}: cannot reshape {shape_str(old)} into {shape_str(shape)}: {why} while tracing "
        f"(at {user_location()}); give static shapes or an input_signature with at most one "
        "None dim here"
    )


def _index_constant(i: int):
    value = np.asarray(i, dtype=np.int64)
    return state.graph.constant(value) if state.graph is not None else value


def expand_dims_at(x, axes):
    """`x` with new size-1 dims at `axes` (positions in the result, non-negative, sorted)."""
    shape = list(shape_of(x))
    for a in axes:
        shape.insert(a, 1)
    return reshape(x, shape, "expand_dims")


def count(x, axes, dtype):
    """The number of elements of `x` over `axes`, as a `dtype` scalar (read at run time when
    a dim is unknown) — the divisor of mean and var."""
    shape = shape_of(x)
    n = 1
    dyn = []
    for a in axes:
        if shape[a] is None:
            dyn.append(a)
        else:
            n *= shape[a]
    if not dyn:
        return np.asarray(n, dtype=dtype)
    total = ops.dim_size(x, axis=dyn[0])
    for a in dyn[1:]:
        total = ops.mul(total, ops.dim_size(x, axis=a))
    if n != 1:
        total = ops.mul(total, _index_constant(n))
    return cast(total, dtype)


def axes_arg(axis, ndim: int, op: str) -> tuple:
    """Sorted non-negative axes for `axis=None|int|tuple` (a ShapeError naming `op` and the
    user's line when out of bounds)."""
    return normalize_axes(axis, ndim, op)


def axis_arg(axis, ndim: int, op: str) -> int:
    """A non-negative axis for `axis` in `[-ndim, ndim)`."""
    return normalize_axis(axis, ndim, op)


def as_eager(x):
    """An eager tg.Tensor for NumPy input (used when a result must be a Tensor)."""
    return x if isinstance(x, Tensor) else EagerTensor(np.asarray(x))


def result(x):
    """A rank-0 NumPy result as a NumPy scalar (as NumPy's functions return it)."""
    if type(x) is np.ndarray and x.ndim == 0:
        return x[()]
    return x
