"""NumPy protocol dispatch: `np.sin(t)`, `np.sum(t, axis=1)`, `np.dot(a, t)` on tensors.

`__array_ufunc__` and `__array_function__` route NumPy calls that involve a `tg.Tensor`
or `tg.Variable` to tracegrad.numpy. Inside a trace, a NumPy function tracegrad lacks
raises UnsupportedOpError naming it; eagerly it runs NumPy on the values.
"""

from __future__ import annotations

import numpy as np

import tracegrad.numpy as tnp
from tracegrad.core.ir import GraphTensor, Tensor
from tracegrad.core.source import user_location
from tracegrad.core.state import state
from tracegrad.core.variables import Variable
from tracegrad.errors import UnsupportedOpError

UFUNCS = {
    np.add: tnp.add,
    np.subtract: tnp.subtract,
    np.multiply: tnp.multiply,
    np.true_divide: tnp.true_divide,
    np.negative: tnp.negative,
    np.sin: tnp.sin,
    np.cos: tnp.cos,
    np.exp: tnp.exp,
    np.log: tnp.log,
    np.tanh: tnp.tanh,
    np.sqrt: tnp.sqrt,
}

FUNCTIONS = {
    np.sum: tnp.sum,
    np.reshape: tnp.reshape,
    np.transpose: tnp.transpose,
    np.stack: tnp.stack,
}


def _symbolic(args) -> bool:
    if state.graph is not None:
        return True
    for a in args:
        if isinstance(a, GraphTensor):
            return True
        if isinstance(a, (list, tuple)) and _symbolic(a):
            return True
    return False


def _unsupported(name: str):
    return UnsupportedOpError(
        f"numpy.{name} is not supported by tracegrad (called at {user_location()}); "
        "use a tracegrad.numpy function, or compute it outside the traced function"
    )


def _to_numpy(x):
    if isinstance(x, (Tensor, Variable)):
        return np.asarray(x)
    if isinstance(x, (list, tuple)):
        return type(x)(_to_numpy(e) for e in x) if not hasattr(x, "_fields") else x
    if isinstance(x, dict):
        return {k: _to_numpy(v) for k, v in x.items()}
    return x


def array_ufunc(self, ufunc, method, *inputs, **kwargs):
    fn = UFUNCS.get(ufunc) if method == "__call__" else None
    if fn is not None and not kwargs:
        return fn(*inputs)
    name = ufunc.__name__ if method == "__call__" else f"{ufunc.__name__}.{method}"
    if kwargs:
        name += f" with {', '.join(sorted(kwargs))}="
    if _symbolic(inputs):
        raise _unsupported(name)
    return getattr(ufunc, method)(*_to_numpy(inputs), **_to_numpy(kwargs))


def array_function(self, func, types, args, kwargs):
    fn = FUNCTIONS.get(func)
    if fn is not None:
        return fn(*args, **kwargs)
    if _symbolic(args) or _symbolic(tuple(kwargs.values())):
        raise _unsupported(func.__name__)
    return func(*_to_numpy(args), **_to_numpy(kwargs))


def install():
    for cls in (Tensor, Variable):
        cls.__array_ufunc__ = array_ufunc
        cls.__array_function__ = array_function
