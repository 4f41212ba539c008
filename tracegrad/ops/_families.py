"""Rule factories for families of primitives, and op properties as data.

`unary`, `binary`, `compare` install the shared `abstract_eval`, `impl`, batch rule and
dims rule of an elementwise family; each op module then attaches the rules that differ
right beneath the primitive. `dims_elementwise` and `dims_same` are the dims rules
(`Primitive.def_dims`) several op modules share.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from tracegrad.core import dtypes
from tracegrad.core.op import Primitive
from tracegrad.ops._batching import batch_elementwise
from tracegrad.core.shapes import shape_str
from tracegrad.core.types import TensorType
from tracegrad.errors import DTypeError, ShapeError

# Op properties (sets of primitives), used by passes, backends and tests.
ELEMENTWISE: set[Primitive] = set()  # result element i depends on operand elements i only
UNARY: set[Primitive] = set()
BINARY: set[Primitive] = set()
COMPARISONS: set[Primitive] = set()
REDUCTIONS: set[Primitive] = set()
# Result index k along a dim its dims rule pairs with an operand dim reads that operand at
# index k along it (elementwise ops, reductions, broadcasts, transposes, contractions' free and
# batch dims; not cumulative ops, sorts, reversals): a run split along such a dim is the op
# on each part (the numba backend's row-split kernels, docs/numba.md "Parallel loops").
ALIGNED: set[Primitive] = set()
COMMUTATIVE: set[Primitive] = set()
NONDIFFERENTIABLE: set[Primitive] = set()  # results are integer/bool or piecewise constant

# Which dtypes an op accepts.
KINDS = {
    "float": dtypes.FLOATS,  # real floats
    "inexact": dtypes.INEXACT,  # real and complex floats
    "complex": dtypes.COMPLEX,
    "int": dtypes.INTS,
    "real": dtypes.FLOATS | dtypes.INTS,
    "numeric": dtypes.INEXACT | dtypes.INTS,
    "intbool": dtypes.INTS | {dtypes.bool_},
    "any": frozenset(dtypes.SUPPORTED),
}


def dims_same(op):
    """Dims rule: the result has its (first) operand's shape (cumulative ops, sort, rev)."""
    x, t = op.inputs[0], op.outputs[0]
    for i in range(len(t.shape)):
        yield t, i, x, i


def dims_elementwise(op):
    """Dims rule: every operand has the result's shape."""
    t = op.outputs[0]
    for x in op.inputs:
        for i in range(len(x.shape)):
            yield t, i, x, i


def elementwise(prim: Primitive) -> Primitive:
    """Mark `prim` elementwise (result element i reads operand elements i only): a member of
    `ELEMENTWISE`, with the dims rule that every operand has the result's shape."""
    ELEMENTWISE.add(prim)
    ALIGNED.add(prim)
    prim.def_dims(dims_elementwise)
    return prim


def _no_gradient(op, *out_grads):
    return [None] * len(op.inputs)


def nondifferentiable(*prims: Primitive) -> None:
    """Mark primitives whose results are integer, bool or piecewise constant: their
    gradient rule gives every input `None` (no gradient flows through them)."""
    for prim in prims:
        prim.def_grad(_no_gradient)
        NONDIFFERENTIABLE.add(prim)


def needs(op, i: int) -> bool:
    """Whether the gradient of input `i` of `op` is wanted (backprop lists the others in
    `op.skip_input_indices`); rules skip work, and NaN-prone terms, for the others."""
    skip = getattr(op, "skip_input_indices", None)
    return not skip or i not in skip


def check_kind(op: str, t: TensorType, kind: str, what: str = "operand") -> None:
    if t.dtype not in KINDS[kind]:
        allowed = ", ".join(sorted(d.name for d in KINDS[kind]))
        raise DTypeError(f"{op}: {what} has dtype {t.dtype.name}; expected one of {allowed}")


def same_shape(op: str, *types: TensorType) -> tuple:
    """The common shape of operands that must have equal shapes (None matches any size)."""
    shape = types[0].shape
    for t in types[1:]:
        if len(t.shape) != len(shape) or any(
            a is not None and b is not None and a != b for a, b in zip(shape, t.shape)
        ):
            shapes = " and ".join(shape_str(x.shape) for x in types)
            raise ShapeError(
                f"{op}: operands must have equal shapes, got {shapes} "
                "(tracegrad.numpy inserts broadcast_in_dim for NumPy broadcasting)"
            )
        shape = tuple(a if a is not None else b for a, b in zip(shape, t.shape))
    return shape


def same_dtype(op: str, *types: TensorType) -> np.dtype:
    dtype = types[0].dtype
    for t in types[1:]:
        if t.dtype != dtype:
            names = " and ".join(x.dtype.name for x in types)
            raise DTypeError(
                f"{op}: operands must have the same dtype, got {names} "
                "(tracegrad.numpy promotes dtypes as NumPy does)"
            )
    return dtype


def real_only(name: str, impl: Callable) -> Callable:
    """`impl` refusing complex operands with a DTypeError naming `name`: NumPy (or SciPy)
    computes some functions on complex operands that a primitive defines for real ones
    only (rint, erf ...), and the eager path runs `impl` without `abstract_eval`."""
    def checked(*xs, **attrs):
        for x in xs:
            if x.dtype.kind == "c":
                raise DTypeError(f"{name}: operand has dtype {x.dtype.name}; expected a real "
                                 "one")
        return impl(*xs, **attrs)

    return checked


# The kinds whose NumPy implementation may accept complex operands that the kind refuses.
_REAL_KINDS = ("float", "real")


def unary(name: str, impl: Callable, kind: str = "float", out_dtype=None) -> Primitive:
    """An elementwise primitive of one operand; the result has its type, or `out_dtype` (a
    dtype, or a function of the operand's dtype, keeping its weakness)."""
    prim = Primitive(name)

    @prim.def_abstract_eval
    def abstract_eval(x):
        check_kind(name, x, kind)
        if callable(out_dtype):
            return TensorType(x.shape, out_dtype(x.dtype), x.weak)
        if out_dtype is not None:
            return TensorType(x.shape, out_dtype)
        return x

    prim.def_impl(real_only(name, impl) if kind in _REAL_KINDS else impl)
    batch_elementwise(prim)
    elementwise(prim)
    UNARY.add(prim)
    return prim


def binary(name: str, impl: Callable, kind: str = "numeric", commutative: bool = False,
           out_dtype=None) -> Primitive:
    """An elementwise primitive of two operands with equal shapes and dtypes; the result has
    their dtype, or `out_dtype` (a dtype, or a function of theirs)."""
    prim = Primitive(name)

    @prim.def_abstract_eval
    def abstract_eval(x, y):
        shape = same_shape(name, x, y)
        dtype = same_dtype(name, x, y)
        check_kind(name, x, kind)
        if callable(out_dtype):
            return TensorType(shape, out_dtype(dtype), x.weak and y.weak)
        if out_dtype is not None:
            return TensorType(shape, out_dtype)
        return TensorType(shape, dtype, x.weak and y.weak)

    prim.def_impl(real_only(name, impl) if kind in _REAL_KINDS else impl)
    batch_elementwise(prim)
    elementwise(prim)
    BINARY.add(prim)
    if commutative:
        COMMUTATIVE.add(prim)
    return prim


def compare(name: str, impl: Callable) -> Primitive:
    """An elementwise comparison: equal shapes and dtypes, a bool result."""
    prim = binary(name, impl, kind="any", out_dtype=dtypes.bool_)
    COMPARISONS.add(prim)
    nondifferentiable(prim)
    return prim
