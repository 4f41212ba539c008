"""Eager fast paths of tracegrad.numpy: elementwise functions on `tg.Tensor`s and NumPy
values run NumPy straight on the arrays, skipping the explicit casts and broadcasts the
general path builds (and records on tapes) op by op.

Every fast path gives what the general path gives (dtype, shape, values, tape records)
and steps aside (returns None) for anything it does not cover; the general path then
runs and reports errors at the user's line.
"""

from __future__ import annotations

import numpy as np

from tracegrad.core.ir import EagerTensor
from tracegrad.core.op import bind_recorded, record_result
from tracegrad.core.state import state
from tracegrad.core.variables import Variable
from tracegrad.numpy._core import SUPPORTED, loop_dtypes, python_int_as, ufunc_operands
from tracegrad.ops.linalg import dot_general_p
from tracegrad.ops.shape_ops import broadcast_array, broadcast_in_dim_p


def apply_ufunc(ufunc, prim, name: str, *xs):
    """`prim` applied NumPy-style: NumPy's loop dtypes, broadcasting, then bind."""
    if state.graph is None:
        out = _eager_general(ufunc, prim, name, xs)
        if out is not None:
            return out
    xs, _ = ufunc_operands(ufunc, name, *xs)
    return prim.bind(*xs)


# ufunc -> the dtypes whose loop, for operands all of that dtype, computes in it.
_CLOSED: dict = {}
# Loop keys of Python scalars (weak: NumPy's loop selection sees their type, not a dtype).
_SCALAR_KEYS = {float: float, int: int, bool: np.dtype(bool)}
# (ufunc, loop keys) -> (NumPy's loop dtypes of the operands, whether they already have them).
_PLANS: dict = {}


def ufunc_function(ufunc, prim, name: str, doc: str):
    """The tracegrad.numpy function `name` applying elementwise `prim` as NumPy's `ufunc`
    (`apply_ufunc`: NumPy's loop dtypes and broadcasting), one or two operands as `ufunc`.

    Its first branch is the hot path of eager programs: tg.Tensors of one dtype that the
    loop keeps run `prim.impl` on their arrays directly (bound, so recorded, under a tape).

    >>> add = ufunc_function(np.add, ops.add_p, "add", "Elementwise `x1 + x2`.")
    """
    impl = prim.impl
    closed = _CLOSED.setdefault(ufunc, set())
    if ufunc.nin == 1:
        def fn(x):
            if type(x) is EagerTensor and x._value.dtype in closed and state.graph is None:
                if state.tapes:
                    return bind_recorded(prim, (x,))
                try:
                    out = impl(x._value)
                except Exception:  # noqa: BLE001, S110 - the general path reports it
                    pass
                else:
                    return EagerTensor(out if type(out) is np.ndarray else np.asarray(out))
            return apply_ufunc(ufunc, prim, name, x)
    else:
        def fn(x1, x2):
            if state.graph is None:
                t1, t2 = type(x1), type(x2)
                if t1 is EagerTensor and t2 is EagerTensor:
                    v1, v2 = x1._value, x2._value
                    if v1.dtype is v2.dtype and v1.dtype in closed:
                        if not state.tapes:
                            try:
                                out = impl(v1, v2)
                            except Exception:  # noqa: BLE001, S110 - the general path reports it
                                pass
                            else:
                                return EagerTensor(out if type(out) is np.ndarray
                                                   else np.asarray(out))
                        elif v1.shape == v2.shape:
                            return bind_recorded(prim, (x1, x2))
                        else:
                            out = _broadcast_recorded(prim, x1, x2, v1.shape, v2.shape)
                            if out is not None:
                                return out
                elif t1 is EagerTensor and t2 in _SCALAR_KEYS or (
                        t2 is EagerTensor and t1 in _SCALAR_KEYS):
                    out = _tensor_and_scalar(ufunc, prim, name, x1, x2)
                    if out is not None:
                        return out
                elif t1 is Variable or t2 is Variable:  # read first to last, as `read` does
                    return fn(x1.value() if t1 is Variable else x1,
                              x2.value() if t2 is Variable else x2)
                elif state.tapes and (t1 is np.ndarray and t2 is EagerTensor
                                      or t1 is EagerTensor and t2 is np.ndarray):
                    # under a tape, a NumPy operand is a constant tensor like any other (a
                    # copy: the tape keeps it for the gradient and the user may write to it)
                    a = x1 if t1 is np.ndarray else x2
                    if a.dtype in SUPPORTED and a.dtype.isnative:
                        return fn(EagerTensor(x1.copy()) if t1 is np.ndarray else x1,
                                  EagerTensor(x2.copy()) if t2 is np.ndarray else x2)
            return apply_ufunc(ufunc, prim, name, x1, x2)
    fn.__name__ = fn.__qualname__ = name
    fn.__module__ = "tracegrad.numpy"  # where pickle finds it
    fn.__doc__ = doc
    return fn


# (ufunc, tensor dtype, scalar type, tensor first) -> the scalar's loop dtype, or False when
# the loop casts the tensor.
_SCALAR_LOOPS: dict = {}


def _tensor_and_scalar(ufunc, prim, name: str, x1, x2):
    """A tg.Tensor and a Python scalar (either order) whose loop keeps the tensor's dtype:
    the scalar as that loop's dtype (NEP 50: `f32 * 2.0` is f32, `i32 + 2` is i32), bound
    under a tape (broadcast to the tensor's shape). None otherwise, or for an int out of
    the loop's range (which the general path reports)."""
    first = type(x1) is EagerTensor
    t, s = (x1, x2) if first else (x2, x1)
    v = t._value
    key = (ufunc, v.dtype, type(s), first)
    dtype = _SCALAR_LOOPS.get(key)
    if dtype is None:
        keys = (v.dtype, _SCALAR_KEYS[type(s)])
        loop, _ = _plan(ufunc, keys if first else keys[::-1], name)
        loop = loop if first else loop[::-1]
        dtype = _SCALAR_LOOPS[key] = loop[1] if loop[0] is v.dtype else False
    if dtype is False:
        return None
    try:
        c = np.asarray(s, dtype)
    except OverflowError:
        return None
    if state.tapes:
        c = EagerTensor(broadcast_array(c, v.shape) if v.ndim else c)
        return bind_recorded(prim, (t, c) if first else (c, t))
    try:
        return _tensor(prim.impl(v, c) if first else prim.impl(c, v))
    except Exception:  # noqa: BLE001 - the general path reports it at the user's line
        return None


def _broadcast_recorded(prim, x1, x2, s1: tuple, s2: tuple):
    """`prim` bound on two tensors of one dtype and different shapes, each broadcast to the
    common shape by a recorded `broadcast_in_dim` as the general path does (None when the
    shapes do not broadcast: the general path reports it)."""
    n1, n2 = len(s1), len(s2)
    if n2 < n1 and s1[n1 - n2:] == s2:  # the usual bias: x2's dims are x1's last ones
        return bind_recorded(prim, (x1, _broadcast(x2, s1)))
    nd = max(n1, n2)
    shape = []
    for d1, d2 in zip((1,) * (nd - n1) + s1, (1,) * (nd - n2) + s2, strict=True):
        if d1 == d2 or d2 == 1:
            shape.append(d1)
        elif d1 == 1:
            shape.append(d2)
        else:
            return None
    shape = tuple(shape)
    if s1 != shape:
        x1 = _broadcast(x1, shape)
    if s2 != shape:
        x2 = _broadcast(x2, shape)
    return bind_recorded(prim, (x1, x2))


def _broadcast(x, shape: tuple):
    """Eager tensor `x` broadcast to `shape` (its dims the trailing ones), recorded as the
    `broadcast_in_dim` bind would record."""
    v = x._value
    key = (len(shape), v.ndim)
    dims = _TRAILING.get(key)
    if dims is None:
        dims = _TRAILING[key] = tuple(range(key[0] - key[1], key[0]))
    return record_result(broadcast_in_dim_p, (x,),
                         {"shape": shape, "broadcast_dimensions": dims},
                         broadcast_array(v, shape))


_TRAILING: dict = {}  # (rank, operand rank) -> the trailing dims


def _tensor(out) -> EagerTensor:
    return EagerTensor(out if type(out) is np.ndarray else np.asarray(out))


def _eager_general(ufunc, prim, name: str, xs):
    keys = []
    values = []
    tensor = False
    for x in xs:
        t = type(x)
        if t is EagerTensor:
            v = x._value
            keys.append(v.dtype)
            values.append(v)
            tensor = True
        elif t is np.ndarray and x.dtype in SUPPORTED:
            keys.append(x.dtype)
            values.append(x)
        elif t in _SCALAR_KEYS:
            keys.append(_SCALAR_KEYS[t])
            values.append(x)
        else:
            return None
    keys = tuple(keys)
    plan = _PLANS.get((ufunc, keys))
    if plan is None:
        plan = _PLANS[ufunc, keys] = _plan(ufunc, keys, name)
    loop, exact = plan
    args = values if exact else [
        v if type(v) is np.ndarray and v.dtype == dt else python_int_as(v, dt)
        for v, dt in zip(values, loop, strict=True)
    ]
    if tensor and state.tapes:
        return _bind_recorded(prim, xs, values, args)
    try:
        out = prim.impl(*args)
    except Exception:  # noqa: BLE001 - the general path reports it at the user's line
        return None
    if not tensor:  # NumPy in, NumPy out (a NumPy scalar for rank 0)
        return out[()] if type(out) is np.ndarray and out.ndim == 0 else out
    return _tensor(out)


def _plan(ufunc, keys: tuple, name: str) -> tuple:
    loop = loop_dtypes(ufunc, keys, name)[:len(keys)]
    exact = all(k is dt for k, dt in zip(keys, loop, strict=True))
    if exact and all(k is keys[0] for k in keys):
        _CLOSED.setdefault(ufunc, set()).add(keys[0])
    return loop, exact


def _bind_recorded(prim, xs, values, args):
    """`prim` bound on `args` (so tapes record it) when every tensor operand is used as it
    is and every constant has the tensors' shape or is a scalar (broadcast here)."""
    shape = next(v.shape for x, v in zip(xs, values, strict=True) if type(x) is EagerTensor)
    operands = []
    for x, v, a in zip(xs, values, args, strict=True):
        if type(x) is EagerTensor:
            if a is not v or v.shape != shape:
                return None
            operands.append(x)
        elif a.shape == shape:
            operands.append(EagerTensor(a.copy()))
        elif a.ndim == 0:
            operands.append(EagerTensor(broadcast_array(a.copy(), shape)))
        else:
            return None
    return bind_recorded(prim, tuple(operands))


_PRODUCT_DTYPES = frozenset(np.dtype(t) for t in ("float32", "float64", "complex64",
                                                   "complex128"))
_OPERANDS = frozenset((EagerTensor, Variable, np.ndarray))


def matrix_product(a, b):
    """`a @ b` for two eager operands of rank 1 or 2 and one float or complex dtype
    (tg.Tensors, Variables, NumPy arrays; not both NumPy): NumPy's dot on their arrays,
    recorded on tapes as the `dot_general` matmul's general path binds. None for anything
    else."""
    ta, tb = type(a), type(b)
    if ta not in _OPERANDS or tb not in _OPERANDS or ta is tb is np.ndarray:
        return None
    va = a if ta is np.ndarray else a._value
    vb = b if tb is np.ndarray else b._value
    na = va.ndim
    if (not 0 < na < 3 or not 0 < vb.ndim < 3 or va.dtype is not vb.dtype
            or va.dtype not in _PRODUCT_DTYPES or va.shape[-1] != vb.shape[0]):
        return None
    if ta is Variable:  # read first to last, as the general path does
        a = a.value()
    if tb is Variable:
        b = b.value()
    out = np.dot(va, vb)
    if not state.tapes:
        return EagerTensor(out if type(out) is np.ndarray else np.asarray(out))
    return record_result(dot_general_p,
                         (EagerTensor(va.copy()) if ta is np.ndarray else a,
                          EagerTensor(vb.copy()) if tb is np.ndarray else b),
                         {"dimension_numbers": (((na - 1,), (0,)), ((), ()))}, out)
