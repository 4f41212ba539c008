"""Shapes with possibly unknown (`None`) dims: broadcasting and axis normalisation."""

from __future__ import annotations

from tracegrad.errors import ShapeError

Shape = tuple  # tuple[int | None, ...]


def shape_str(shape: Shape) -> str:
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


def size(shape: Shape) -> int | None:
    n = 1
    for d in shape:
        if d is None:
            return None
        n *= d
    return n


def is_known(shape: Shape) -> bool:
    return None not in shape


def broadcast_shapes(*shapes: Shape, op: str = "broadcast") -> Shape:
    """NumPy broadcasting of `shapes`; an unknown dim broadcasts as "some size".

    `None` against `1` gives `None`; `None` against `n` gives `n` (the unknown dim must be
    `n` or `1` at run time); `None` against `None` gives `None`.
    """
    if len(shapes) == 1:
        return tuple(shapes[0])
    ndim = max(len(s) for s in shapes)
    out = []
    for axis in range(ndim):
        dim = 1
        for s in shapes:
            i = axis - (ndim - len(s))
            if i < 0:
                continue
            d = s[i]
            if d == 1 or d == dim:
                continue
            if dim == 1:
                dim = d
            elif d is None:
                continue
            elif dim is None:
                dim = d
            else:
                raise ShapeError(
                    f"{op}: shapes {' and '.join(shape_str(s) for s in shapes)} "
                    "cannot be broadcast together"
                )
        out.append(dim)
    return tuple(out)


def dims_compatible(a: int | None, b: int | None) -> bool:
    return a is None or b is None or a == b


def shapes_compatible(a: Shape, b: Shape) -> bool:
    return len(a) == len(b) and all(dims_compatible(x, y) for x, y in zip(a, b))


def normalize_axis(axis: int, ndim: int, op: str = "op") -> int:
    """A non-negative axis for `axis` in `[-ndim, ndim)`."""
    try:
        a = int(axis)
    except TypeError:
        raise ShapeError(f"{op}: axis must be an integer, got {axis!r}") from None
    if not -ndim <= a < ndim:
        raise ShapeError(f"{op}: axis {axis} is out of bounds for an array of rank {ndim}")
    return a % ndim if ndim else 0


def normalize_axes(axis, ndim: int, op: str = "op") -> tuple[int, ...]:
    """Sorted non-negative axes for `axis=None | int | tuple` (None means every axis)."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (tuple, list)):
        axes = tuple(normalize_axis(a, ndim, op) for a in axis)
        if len(set(axes)) != len(axes):
            raise ShapeError(f"{op}: repeated axis in {tuple(axis)}")
        return tuple(sorted(axes))
    return (normalize_axis(axis, ndim, op),)
