"""NumPy's views, for tracegrad's immutable tensors: which results of basic indexing NumPy
gives as views (`x[1:-1]`), marked with their key so that in-place operators on them raise
rather than leave `x` unchanged, and the copies that are not views."""

from __future__ import annotations

import numpy as np

from tracegrad import ops
from tracegrad.core.ir import EagerTensor
from tracegrad.core.state import state


def is_view(key, ndim: int) -> bool:
    """Whether NumPy's `x[key]` (of `ndim` dims) is a view of `x`: a basic index (ints,
    slices, None, ...) other than one int per dim, which gives a scalar (a copy)."""
    kind = type(key)
    if kind is slice or key is None or key is Ellipsis:
        return True
    if kind is not tuple:
        return (kind is int or isinstance(key, np.integer)) and ndim > 0
    ints = 0
    for k in key:
        if type(k) is int or isinstance(k, np.integer):
            ints += 1
        elif not (type(k) is slice or k is None or k is Ellipsis):
            return False
    return ints < len(key) or ndim > 0


def as_view(x, out, key):
    """`out` (= `x[key]`) marked as a view, a new tensor where it is `x` itself (`x[:]`)."""
    if out is x:
        out = _alias(x)
        if out is None:
            return x
    out._view = key
    return out


def unviewed(x):
    """`x`, or where `x` is a view (a result of basic indexing) a new tensor of its values
    that is not one: what NumPy's copies (`copy`, `array`, `astype`) give."""
    if getattr(x, "_view", None) is None:
        return x
    out = _alias(x)
    return x if out is None else out


def _alias(x):
    """A new tensor equal to `x` (recorded, so that gradients flow), or None where the
    dims are not all known."""
    if type(x) is EagerTensor and state.graph is None and not state.tapes:
        return EagerTensor(x._value)
    if None in x.shape:
        return None
    return ops.reshape(x, new_sizes=x.shape)


def key_text(key) -> str:
    """`key` as written between brackets: `1:-1, None, ...`."""
    def item(k):
        if type(k) is slice:
            text = ":".join("" if v is None else str(v) for v in (k.start, k.stop, k.step))
            return text[:-1] if k.step is None else text
        return "..." if k is Ellipsis else str(k)

    return ", ".join(map(item, key)) if type(key) is tuple else item(key)
