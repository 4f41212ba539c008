"""Operators and methods of `tg.Tensor` and `tg.Variable`, installed on the classes.

Binary operators return NotImplemented for operands that are not arrays (so `t == None`
is False, as for any Python object). `==` is elementwise, but a traced tensor compared
outside its trace compares by identity, so graph inspection (`t in graph.outputs`) works.
`x[...]` follows NumPy's indexing rules; tensors are
immutable (`x[i] = v` raises and points to `tnp.at`).
"""

from __future__ import annotations

import dis
import sys

import numpy as np

import tracegrad.numpy as tnp
from tracegrad.core.ir import EagerTensor, GraphTensor, Tensor
from tracegrad.core.state import state
from tracegrad.core.variables import Variable
from tracegrad.errors import ArgumentTypeError, TracerBoolError
from tracegrad.numpy._indexing import getitem
from tracegrad.numpy._views import key_text

_OPERANDS = (Tensor, Variable, np.ndarray, np.generic, bool, int, float, complex, list, tuple)
# The operands' usual exact types, tested before the isinstance chain.
_COMMON = frozenset((EagerTensor, GraphTensor, np.ndarray, float, int, bool, complex))


def _binary(fn, reflected=False):
    if reflected:
        def method(self, other):
            if type(other) not in _COMMON and not isinstance(other, _OPERANDS):
                return NotImplemented
            return fn(other, self)
    else:
        def method(self, other):
            if type(other) not in _COMMON and not isinstance(other, _OPERANDS):
                return NotImplemented
            return fn(self, other)
    method.__name__ = fn.__name__
    method.__doc__ = fn.__doc__
    return method


def _foreign(x) -> bool:
    """Whether `x` is a traced tensor that no op being built now could use."""
    if type(x) is not GraphTensor:
        return False
    g = state.graph
    return g is None or not (x.graph is g or x.graph.is_ancestor_of(g))


def _equality(fn, same: bool):
    """`==` / `!=`: elementwise, except that a traced tensor compared outside its trace (when
    inspecting a graph: `t in graph.outputs`) compares by identity."""
    def method(self, other):
        if not isinstance(other, _OPERANDS):
            return NotImplemented
        if _foreign(self) or _foreign(other):
            return (self is other) == same
        return fn(self, other)

    method.__name__ = fn.__name__
    method.__doc__ = fn.__doc__
    return method


def _setitem(self, key, value):
    view = getattr(self, "_view", None)
    if view is not None:
        raise ArgumentTypeError(
            f"`u[...] = value` on u = x[{key_text(view)}], a view of x: in NumPy it would "
            "write into x, but tracegrad tensors are immutable and x would keep its values; "
            f"update x functionally: `x = tnp.at(x)[{key_text(view)}].set(...)`")
    raise ArgumentTypeError(
        "tracegrad tensors are immutable: use `x = tnp.at(x)[idx].set(value)` (or `.add`) "
        "for a functional update"
    )


def _in_place_operator(symbol: str, functional: str):
    """`u += v` and the other in-place operators: on a view of another tensor (`u = x[1:]`)
    they raise, as NumPy would change `x` and tracegrad cannot; on any other tensor they
    leave it to Python, which computes `u = u + v`."""
    def method(self, other):
        view = getattr(self, "_view", None)
        if view is None:
            return NotImplemented
        key = key_text(view)
        raise ArgumentTypeError(
            f"`u {symbol}= ...` on u = x[{key}], a view of x: in NumPy it would change x too, "
            "but tracegrad tensors are immutable and x would keep its values; update x "
            f"functionally: `x = tnp.at(x)[{key}].{functional.format(key=key, op=symbol)}` "
            f"(or write `u = u {symbol} ...` if x is not used again)")

    method.__name__ = f"__i{_IN_PLACE[symbol]}__"
    return method


_IN_PLACE = {"+": "add", "-": "sub", "*": "mul", "/": "truediv", "//": "floordiv",
             "%": "mod", "**": "pow", "@": "matmul", "&": "and", "|": "or", "^": "xor",
             "<<": "lshift", ">>": "rshift"}


def _pow(self, other, modulo=None):
    if modulo is not None:
        return NotImplemented
    if not isinstance(other, _OPERANDS):
        return NotImplemented
    return tnp.power(self, other)


OPERATORS = {
    "__add__": _binary(tnp.add),
    "__radd__": _binary(tnp.add, True),
    "__sub__": _binary(tnp.subtract),
    "__rsub__": _binary(tnp.subtract, True),
    "__mul__": _binary(tnp.multiply),
    "__rmul__": _binary(tnp.multiply, True),
    "__truediv__": _binary(tnp.true_divide),
    "__rtruediv__": _binary(tnp.true_divide, True),
    "__floordiv__": _binary(tnp.floor_divide),
    "__rfloordiv__": _binary(tnp.floor_divide, True),
    "__mod__": _binary(tnp.mod),
    "__rmod__": _binary(tnp.mod, True),
    "__pow__": _pow,
    "__rpow__": _binary(tnp.power, True),
    "__matmul__": _binary(tnp.matmul),
    "__rmatmul__": _binary(tnp.matmul, True),
    "__and__": _binary(tnp.bitwise_and),
    "__rand__": _binary(tnp.bitwise_and, True),
    "__or__": _binary(tnp.bitwise_or),
    "__ror__": _binary(tnp.bitwise_or, True),
    "__xor__": _binary(tnp.bitwise_xor),
    "__rxor__": _binary(tnp.bitwise_xor, True),
    "__lshift__": _binary(tnp.left_shift),
    "__rlshift__": _binary(tnp.left_shift, True),
    "__rshift__": _binary(tnp.right_shift),
    "__rrshift__": _binary(tnp.right_shift, True),
    "__lt__": _binary(tnp.less),
    "__le__": _binary(tnp.less_equal),
    "__gt__": _binary(tnp.greater),
    "__ge__": _binary(tnp.greater_equal),
    "__eq__": _equality(tnp.equal, True),
    "__ne__": _equality(tnp.not_equal, False),
    "__neg__": tnp.negative,
    "__pos__": tnp.positive,
    "__abs__": tnp.absolute,
    "__invert__": tnp.invert,
    "__getitem__": getitem,
    "__round__": lambda self, ndigits=None: tnp.round(self, ndigits or 0),
    "__setitem__": _setitem,
    **{f"__i{name}__": _in_place_operator(
        symbol, "add(value)" if symbol == "+" else "add(-value)" if symbol == "-"
        else "set(x[{key}] {op} value)") for symbol, name in _IN_PLACE.items()},
}


def _shape_args(args):
    """`reshape(2, 3)` and `reshape((2, 3))` alike."""
    if len(args) == 1 and not isinstance(args[0], (int, np.integer)):
        return args[0]
    return args


def _reshape(self, *shape, order="C"):
    return tnp.reshape(self, _shape_args(shape), order)


def _transpose(self, *axes):
    return tnp.transpose(self, _shape_args(axes) if axes else None)


_DISCARDED: dict = {}


def _result_discarded() -> bool:
    """Whether the method's caller calls it as a statement, dropping the result."""
    frame = sys._getframe(2)
    key = (frame.f_code, frame.f_lasti)
    found = _DISCARDED.get(key)
    if found is None:
        found = False
        for ins in dis.get_instructions(frame.f_code):
            if ins.offset > frame.f_lasti:
                found = ins.opname == "POP_TOP"
                break
        if len(_DISCARDED) > 4096:
            _DISCARDED.clear()
        _DISCARDED[key] = found
    return found


def _in_place(name: str, fn, fix: str):
    """A NumPy method that changes the array in place: a Variable is assigned the result;
    a tensor (immutable) returns it, and refuses a call whose result is dropped, which in
    NumPy code relies on the change."""
    def method(self, *args, **kwargs):
        if isinstance(self, Variable):
            self.assign(fn(self.value(), *args, **kwargs))
            return None
        if _result_discarded():
            raise ArgumentTypeError(
                f"x.{name}() changes x in place in NumPy, but tracegrad tensors are "
                f"immutable and its result is dropped here: write `x = {fix}`")
        return fn(self, *args, **kwargs)

    method.__name__ = name
    return method


def _concrete(self, what: str) -> np.ndarray:
    """The value of an eager tensor or a Variable outside a trace, for methods that return
    Python objects."""
    t = self.value() if isinstance(self, Variable) else self
    if isinstance(t, GraphTensor):
        raise TracerBoolError(
            f"{what} of a traced Tensor ({t.type}): its value is not known while tracing; "
            "call it on the compiled function's result")
    return np.asarray(t.numpy())


def _fill(self, value):
    if isinstance(self, Variable):
        self.assign(tnp.full_like(self.value(), value))
        return None
    raise ArgumentTypeError(
        "x.fill() writes into x, but tracegrad tensors are immutable: write "
        "`x = np.full_like(x, value)`")


def _put(self, *args, **kwargs):
    raise ArgumentTypeError(
        "x.put() writes into x, but tracegrad tensors are immutable: write "
        "`x = tnp.at(x.ravel())[ind].set(v).reshape(x.shape)`")


def _sort(a, axis=-1, kind=None, order=None, *, stable=None):
    if order is not None:
        raise ArgumentTypeError("sort: order= (fields of structured arrays) is not supported")
    return tnp.sort(a, axis, kind, stable=stable)


def _argsort(self, axis=-1, kind=None, order=None, *, stable=None):
    if order is not None:
        raise ArgumentTypeError("argsort: order= (fields of structured arrays) is not "
                                "supported")
    return tnp.argsort(self, axis, kind, stable=stable)


METHODS = {
    "reshape": _reshape,
    "transpose": _transpose,
    "astype": lambda self, dtype, order="K", casting="unsafe", subok=True, copy=True:
        tnp.astype(self, dtype, copy=copy),
    "sum": lambda self, axis=None, dtype=None, keepdims=False: tnp.sum(
        self, axis, dtype, keepdims),
    "prod": lambda self, axis=None, dtype=None, keepdims=False: tnp.prod(
        self, axis, dtype, keepdims),
    "mean": lambda self, axis=None, dtype=None, keepdims=False: tnp.mean(
        self, axis, dtype, keepdims),
    "var": lambda self, axis=None, dtype=None, ddof=0, keepdims=False: tnp.var(
        self, axis, dtype, ddof, keepdims),
    "std": lambda self, axis=None, dtype=None, ddof=0, keepdims=False: tnp.std(
        self, axis, dtype, ddof, keepdims),
    "max": lambda self, axis=None, keepdims=False: tnp.max(self, axis, keepdims),
    "min": lambda self, axis=None, keepdims=False: tnp.min(self, axis, keepdims),
    "any": lambda self, axis=None, keepdims=False: tnp.any(self, axis, keepdims),
    "all": lambda self, axis=None, keepdims=False: tnp.all(self, axis, keepdims),
    "argmax": lambda self, axis=None, keepdims=False: tnp.argmax(self, axis, keepdims),
    "argmin": lambda self, axis=None, keepdims=False: tnp.argmin(self, axis, keepdims),
    "cumsum": lambda self, axis=None, dtype=None: tnp.cumsum(self, axis, dtype),
    "cumprod": lambda self, axis=None, dtype=None: tnp.cumprod(self, axis, dtype),
    "clip": lambda self, min=None, max=None: tnp.clip(self, min, max),
    "round": lambda self, decimals=0: tnp.round(self, decimals),
    "ravel": lambda self: tnp.ravel(self),
    "flatten": lambda self: tnp.ravel(self),
    "squeeze": lambda self, axis=None: tnp.squeeze(self, axis),
    "swapaxes": lambda self, axis1, axis2: tnp.swapaxes(self, axis1, axis2),
    "dot": lambda self, b: tnp.dot(self, b),
    "take": lambda self, indices, axis=None, mode=None: tnp.take(self, indices, axis,
                                                                 mode=mode),
    "repeat": lambda self, repeats, axis=None: tnp.repeat(self, repeats, axis),
    "diagonal": lambda self, offset=0, axis1=0, axis2=1: tnp.diagonal(self, offset, axis1,
                                                                      axis2),
    "trace": lambda self, offset=0, axis1=0, axis2=1, dtype=None: tnp.trace(
        self, offset, axis1, axis2, dtype),
    "sort": _in_place("sort", _sort, "np.sort(x)"),
    "argsort": _argsort,
    "nonzero": lambda self, *, size=None, fill_value=None: tnp.nonzero(
        self, size=size, fill_value=fill_value),
    "ptp": lambda self, axis=None, keepdims=False: tnp.ptp(self, axis, keepdims),
    "searchsorted": lambda self, v, side="left", sorter=None: tnp.searchsorted(
        self, v, side, sorter),
    "compress": lambda self, condition, axis=None, *, size=None, fill_value=0: tnp.compress(
        condition, self, axis, size=size, fill_value=fill_value),
    "choose": lambda self, choices, mode="raise": tnp.choose(self, choices, mode=mode),
    "copy": lambda self, order="C": tnp.copy(self),
    "conj": lambda self: tnp.conj(self),
    "conjugate": lambda self: tnp.conjugate(self),
    "tolist": lambda self: _concrete(self, "tolist()").tolist(),
    "item": lambda self, *args: _concrete(self, "item()").item(*args),
    "tobytes": lambda self, order="C": _concrete(self, "tobytes()").tobytes(order),
    "fill": _fill,
    "put": _put,
}

PROPERTIES = {
    "real": lambda self: tnp.real(self),
    "imag": lambda self: tnp.imag(self),
    "T": lambda self: tnp.transpose(self),
    "mT": lambda self: tnp.swapaxes(self, -1, -2),
    "flat": lambda self: tnp.ravel(self),
    "itemsize": lambda self: self.dtype.itemsize,
    "nbytes": lambda self: self.size * self.dtype.itemsize,
}


def install():
    for cls in (Tensor, Variable):
        for name, fn in {**OPERATORS, **METHODS}.items():
            setattr(cls, name, fn)
        for name, fn in PROPERTIES.items():
            setattr(cls, name, property(fn))
