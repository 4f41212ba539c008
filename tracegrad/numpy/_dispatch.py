"""NumPy protocol dispatch: `np.sin(t)`, `np.sum(t, axis=1)`, `np.dot(a, t)` on tensors.

`__array_ufunc__` and `__array_function__` route NumPy calls that involve a `tg.Tensor`
or `tg.Variable` to tracegrad.numpy. Arguments are matched by name against NumPy's own
signature; an argument tracegrad does not take (`out=`, `where=`, `initial=` ...) or a
function it lacks raises UnsupportedOpError naming the NumPy function inside a trace, and
eagerly runs NumPy on the values.
"""

from __future__ import annotations

import inspect

import numpy as np

import tracegrad.numpy as tnp
from tracegrad.core.ir import GraphTensor, Tensor
from tracegrad.core.source import user_location
from tracegrad.core.state import state
from tracegrad.core.variables import Variable
from tracegrad.errors import UnsupportedOpError
from tracegrad.numpy._ufuncs import UFUNCS

UFUNC_CALLS = {**UFUNCS, np.matmul: tnp.matmul}

# ufunc.reduce / ufunc.accumulate as the tracegrad function and its NumPy-default axis.
REDUCE = {
    np.add: tnp.sum, np.multiply: tnp.prod, np.maximum: tnp.max, np.minimum: tnp.min,
    np.logical_and: tnp.all, np.logical_or: tnp.any,
}
ACCUMULATE = {np.add: tnp.cumsum, np.multiply: tnp.cumprod}

FUNCTIONS = {
    np.sum: tnp.sum, np.mean: tnp.mean, np.prod: tnp.prod, np.max: tnp.max,
    np.min: tnp.min, np.amax: tnp.amax, np.amin: tnp.amin, np.argmax: tnp.argmax,
    np.argmin: tnp.argmin, np.var: tnp.var, np.std: tnp.std, np.cumsum: tnp.cumsum,
    np.cumprod: tnp.cumprod, np.any: tnp.any, np.all: tnp.all,
    np.round: tnp.round, np.around: tnp.round, np.clip: tnp.clip, np.where: tnp.where,
    np.dot: tnp.dot, np.vdot: tnp.vdot, np.inner: tnp.inner, np.outer: tnp.outer,
    np.tensordot: tnp.tensordot, np.einsum: tnp.einsum,
    np.reshape: tnp.reshape, np.ravel: tnp.ravel, np.transpose: tnp.transpose,
    np.swapaxes: tnp.swapaxes, np.moveaxis: tnp.moveaxis, np.expand_dims: tnp.expand_dims,
    np.squeeze: tnp.squeeze, np.broadcast_to: tnp.broadcast_to,
    np.concatenate: tnp.concatenate, np.stack: tnp.stack, np.hstack: tnp.hstack,
    np.vstack: tnp.vstack, np.split: tnp.split, np.tile: tnp.tile, np.repeat: tnp.repeat,
    np.flip: tnp.flip, np.take: tnp.take, np.take_along_axis: tnp.take_along_axis,
    np.pad: tnp.pad, np.zeros_like: tnp.zeros_like, np.ones_like: tnp.ones_like,
    np.full_like: tnp.full_like, np.diag: tnp.diag, np.diagonal: tnp.diagonal,
    np.trace: tnp.trace, np.triu: tnp.triu, np.tril: tnp.tril, np.astype: tnp.astype,
    np.sort: tnp.sort, np.argsort: tnp.argsort, np.nonzero: tnp.nonzero,
    np.linspace: tnp.linspace, np.shape: tnp.shape, np.ndim: tnp.ndim, np.size: tnp.size,
    np.linalg.norm: tnp.linalg.norm, np.linalg.inv: tnp.linalg.inv,
    np.linalg.solve: tnp.linalg.solve, np.linalg.det: tnp.linalg.det,
    np.linalg.slogdet: tnp.linalg.slogdet, np.linalg.cholesky: tnp.linalg.cholesky,
}

_SIGNATURES: dict = {}


def _signature(fn):
    sig = _SIGNATURES.get(fn)
    if sig is None:
        sig = _SIGNATURES[fn] = inspect.signature(fn)
    return sig


def _symbolic(args) -> bool:
    if state.graph is not None:
        return True
    for a in args:
        if isinstance(a, GraphTensor):
            return True
        if isinstance(a, (list, tuple)) and _symbolic(a):
            return True
    return False


def _numpy_name(func) -> str:
    module = getattr(func, "__module__", None) or "numpy"
    if module.startswith("numpy._core") or module == "numpy":
        module = "numpy"
    return f"{module}.{func.__name__}"


def _unsupported(name: str, detail: str = ""):
    return UnsupportedOpError(
        f"{name}{detail} is not supported by tracegrad inside traced code (called at "
        f"{user_location()}); use a tracegrad.numpy function, or compute it outside the "
        "traced function"
    )


def _to_numpy(x):
    if isinstance(x, (Tensor, Variable)):
        return np.asarray(x)
    if isinstance(x, (list, tuple)):
        return type(x)(_to_numpy(e) for e in x) if not hasattr(x, "_fields") else x
    if isinstance(x, dict):
        return {k: _to_numpy(v) for k, v in x.items()}
    return x


def _is_default(value, default) -> bool:
    if default is inspect.Parameter.empty:
        return False
    if value is default:
        return True
    return type(default) in (str, bool, int, float) and type(value) is type(default) and \
        value == default


def _translate(func, fn, args, kwargs):
    """`(args, kwargs)` for `fn` from a call of NumPy's `func` (matched by parameter name),
    and what `fn` lacks when it cannot take the call."""
    try:
        bound = _signature(func).bind(*args, **kwargs)
    except TypeError as e:
        return None, f" ({e})"
    mine = _signature(fn).parameters
    pos, kw, extra = [], {}, []
    for name, value in bound.arguments.items():
        param = bound.signature.parameters[name]
        if param.kind is param.VAR_POSITIONAL:
            pos.extend(value)
        elif param.kind is param.VAR_KEYWORD:
            for k, v in value.items():
                if k in mine:
                    kw[k] = v
                else:
                    extra.append(k)
        elif name in mine:
            kw[name] = value
        elif not _is_default(value, param.default):
            extra.append(name)
    if extra:
        return None, f" with {', '.join(f'{e}=' for e in extra)}"
    return (pos, kw), ""


def _no_out(kwargs) -> bool:
    out = kwargs.get("out")
    return out is None or all(o is None for o in out)


def array_ufunc(self, ufunc, method, *inputs, **kwargs):
    if not kwargs and method == "__call__":
        fn = UFUNC_CALLS.get(ufunc)
        if fn is not None:
            return fn(*inputs)
    name = f"numpy.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
    kw = {k: v for k, v in kwargs.items() if k != "out"} if _no_out(kwargs) else None
    if kw is not None:
        if method == "__call__" and not kw:
            fn = UFUNC_CALLS.get(ufunc)
            if fn is not None:
                return fn(*inputs)
        elif method in ("reduce", "accumulate") and len(inputs) == 1:
            fn = (REDUCE if method == "reduce" else ACCUMULATE).get(ufunc)
            allowed = {"axis", "dtype", "keepdims"} if method == "reduce" else {"axis", "dtype"}
            if fn in (tnp.max, tnp.min, tnp.all, tnp.any) and kw.get("dtype") is None:
                kw.pop("dtype", None)
                allowed = {"axis", "keepdims"}
            if fn is not None and set(kw) <= allowed:
                kw.setdefault("axis", 0)
                return fn(inputs[0], **kw)
    detail = f" with {', '.join(f'{k}=' for k in sorted(kwargs))}" if kwargs else ""
    if _symbolic(inputs) or _symbolic(tuple(kwargs.values())):
        raise _unsupported(name, detail)
    return getattr(ufunc, method)(*_to_numpy(inputs), **_to_numpy(kwargs))


def array_function(self, func, types, args, kwargs):
    fn = FUNCTIONS.get(func)
    detail = ""
    if fn is not None:
        call, detail = _translate(func, fn, args, kwargs)
        if call is not None:
            return fn(*call[0], **call[1])
    if _symbolic(args) or _symbolic(tuple(kwargs.values())):
        raise _unsupported(_numpy_name(func), detail)
    return func(*_to_numpy(args), **_to_numpy(kwargs))


def install():
    for cls in (Tensor, Variable):
        cls.__array_ufunc__ = array_ufunc
        cls.__array_function__ = array_function
