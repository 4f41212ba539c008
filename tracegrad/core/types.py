"""`TensorType` (the abstract value of a tensor: shape, dtype, weakness) and `TensorSpec`."""

from __future__ import annotations

import numpy as np

from tracegrad.core import dtypes
from tracegrad.core.shapes import shape_str
from tracegrad.errors import InvalidArgumentError, ShapeError


class TensorType:
    """Shape (dims may be None), dtype and weak-typedness of a tensor; hashable."""

    __slots__ = ("shape", "dtype", "weak", "_hash")

    def __init__(self, shape, dtype: np.dtype, weak: bool = False):
        self.shape = tuple(shape)
        self.dtype = dtype
        self.weak = weak
        self._hash = hash((self.shape, dtype, weak))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __eq__(self, other):
        return (
            type(other) is TensorType
            and self.shape == other.shape
            and self.dtype == other.dtype
            and self.weak == other.weak
        )

    def __hash__(self):
        return self._hash

    def __str__(self):
        return ("~" if self.weak else "") + dtypes.short_name(self.dtype) + shape_str(self.shape)

    __repr__ = __str__

    def strong(self) -> TensorType:
        return TensorType(self.shape, self.dtype) if self.weak else self

    def with_shape(self, shape) -> TensorType:
        return TensorType(shape, self.dtype, self.weak)

    def with_dtype(self, dtype) -> TensorType:
        return TensorType(self.shape, dtype, self.weak)

    @staticmethod
    def parse(text: str) -> TensorType:
        """The type written as `f64[3,?]` (a leading `~` marks a weak type)."""
        text = text.strip()
        weak = text.startswith("~")
        if weak:
            text = text[1:]
        name, _, rest = text.partition("[")
        if not rest.endswith("]"):
            raise InvalidArgumentError(f"bad tensor type {text!r}")
        body = rest[:-1].strip()
        dims = [] if not body else [d.strip() for d in body.split(",")]
        shape = tuple(None if d in ("?", "None") else int(d) for d in dims)
        return TensorType(shape, dtypes.from_short_name(name), weak)


class TensorSpec:
    """The shape and dtype an argument must have; dims may be None (any size).

    >>> tg.TensorSpec([None, 3], "float32")
    TensorSpec(shape=(None, 3), dtype=float32, name=None)
    """

    __slots__ = ("shape", "dtype", "name")

    def __init__(self, shape, dtype="float64", name: str | None = None):
        self.shape = tuple(None if d is None else int(d) for d in shape)
        if any(d is not None and d < 0 for d in self.shape):
            raise ShapeError(f"TensorSpec: negative dim in {tuple(shape)}")
        self.dtype = dtypes.canonicalize(dtype, op="TensorSpec")
        self.name = name

    @classmethod
    def from_value(cls, value) -> TensorSpec:
        return cls(np.shape(value), np.asarray(value).dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def is_compatible_with(self, shape, dtype) -> bool:
        return (
            dtype == self.dtype
            and len(shape) == len(self.shape)
            and all(s is None or s == d for s, d in zip(self.shape, shape))
        )

    def to_type(self) -> TensorType:
        return TensorType(self.shape, self.dtype)

    def __eq__(self, other):
        return (
            isinstance(other, TensorSpec)
            and self.shape == other.shape
            and self.dtype == other.dtype
            and self.name == other.name
        )

    def __hash__(self):
        return hash((self.shape, self.dtype, self.name))

    def __repr__(self):
        return f"TensorSpec(shape={self.shape}, dtype={self.dtype.name}, name={self.name!r})"
