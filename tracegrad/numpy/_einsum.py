"""`einsum`, composed from diagonal extraction, `reduce_sum`, `dot_general` and `transpose`.

Each operand first loses its repeated labels (a diagonal) and the labels no one else needs
(a sum); the operands are then contracted left to right, each step one `dot_general` whose
batch dims are the labels still needed later; a final transpose orders the output.
"""

from __future__ import annotations

import string

from tracegrad import ops
from tracegrad.core.shapes import shape_str
from tracegrad.errors import InvalidArgumentError, ShapeError
from tracegrad.numpy._core import broadcast_to_shape, ndim_of, promote, shape_of
from tracegrad.numpy._matrix import diagonal
from tracegrad.numpy._shape import transpose

_LETTERS = string.ascii_letters


def einsum(subscripts, *operands, dtype=None, optimize=False):
    """Einstein summation, as `np.einsum`: `"ij,jk->ik"`, implicit output (`"ij,jk"`),
    repeated labels for diagonals and traces (`"ii->i"`, `"ii"`), `...` for broadcast dims,
    or the interleaved form `einsum(a, [0, 1], b, [1, 2])`.

    >>> tnp.einsum("bij,bjk->bik", x, y)
    """
    if not isinstance(subscripts, str):
        subscripts, operands = _from_sublists(subscripts, *operands)
    if not operands:
        raise InvalidArgumentError("einsum: no operands given")
    operands, _ = promote(*operands)
    if dtype is not None:
        from tracegrad.numpy._creation import astype

        operands = [astype(x, dtype) for x in operands]
    inputs, output = _parse(subscripts.replace(" ", ""), operands)
    sizes = _label_sizes(inputs, operands)

    terms = []
    for labels, x in zip(inputs, operands, strict=True):
        x, labels = _diagonals(x, labels)
        terms.append((x, labels))
    for k in range(len(terms)):
        later = set(output).union(*(lab for _, lab in terms[:k] + terms[k + 1:]))
        terms[k] = _sum_unneeded(*terms[k], later)

    x, labels = terms[0]
    for k in range(1, len(terms)):
        y, ylabels = terms[k]
        keep = set(output).union(*(lab for _, lab in terms[k + 1:]))
        x, labels = _sum_unneeded(x, labels, keep | set(ylabels))
        y, ylabels = _sum_unneeded(y, ylabels, keep | set(labels))
        x, labels = _contract(x, labels, y, ylabels, keep, sizes)
    x, labels = _sum_unneeded(x, labels, set(output))
    return transpose(x, tuple(labels.index(c) for c in output))


def _from_sublists(*args):
    """The subscript string and operands of the interleaved form."""
    args = list(args)
    operands, specs = args[0::2], args[1::2]
    out = None
    if len(operands) > len(specs):
        out = operands.pop()
    labels = {}

    def name(sub):
        text = ""
        for s in sub:
            if s is Ellipsis:
                text += "..."
            else:
                text += labels.setdefault(int(s), _LETTERS[int(s)])
        return text

    text = ",".join(name(s) for s in specs)
    if out is not None:
        text += "->" + name(out)
    return text, operands


def _parse(subscripts, operands):
    if "->" in subscripts:
        lhs, output = subscripts.split("->")
    else:
        lhs, output = subscripts, None
    inputs = lhs.split(",")
    if len(inputs) != len(operands):
        raise ShapeError(f"einsum: {len(inputs)} operand subscripts for {len(operands)} "
                         "operands")
    user = set(lhs.replace("...", "")) | set((output or "").replace("...", ""))
    spare = [c for c in _LETTERS if c not in user]
    bad = (user - set(_LETTERS) - {","}) | ({"."} & user)
    if bad:
        raise ShapeError(f"einsum: invalid subscript characters {sorted(bad)}")
    ell_rank = 0
    for sub, x in zip(inputs, operands, strict=True):
        if "..." in sub:
            ell_rank = max(ell_rank, ndim_of(x) - (len(sub) - 3))
    ell = "".join(spare[:ell_rank])
    expanded = []
    for sub, x in zip(inputs, operands, strict=True):
        if "..." in sub:
            r = ndim_of(x) - (len(sub) - 3)
            if r < 0:
                raise ShapeError(f"einsum: operand {shape_str(shape_of(x))} has fewer dims "
                                 f"than subscripts {sub!r}")
            sub = sub.replace("...", ell[ell_rank - r:])
        if len(sub) != ndim_of(x):
            raise ShapeError(f"einsum: subscripts {sub!r} do not match operand of shape "
                             f"{shape_str(shape_of(x))}")
        expanded.append(sub)
    if output is None:
        counts = {}
        for sub in expanded:
            for c in sub:
                counts[c] = counts.get(c, 0) + 1
        output = ell + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ell))
    else:
        if "..." in output:
            output = output.replace("...", ell)
        elif ell_rank:
            raise ShapeError("einsum: the inputs have '...' dims but the output has "
                             "no '...'")
        seen = set("".join(expanded))
        for c in output:
            if c not in seen:
                raise ShapeError(f"einsum: output label {c!r} appears in no input")
        if len(set(output)) != len(output):
            raise ShapeError(f"einsum: output subscripts {output!r} repeat a label")
    return expanded, output


def _label_sizes(inputs, operands):
    sizes = {}
    for sub, x in zip(inputs, operands, strict=True):
        for c, d in zip(sub, shape_of(x), strict=True):
            old = sizes.get(c, 1)
            if d == 1:
                sizes.setdefault(c, 1)
            elif old in (1, None) or d is None:
                sizes[c] = d if old in (1, None) else old
            elif old != d:
                raise ShapeError(f"einsum: label {c!r} has sizes {old} and {d}")
    return sizes


def _diagonals(x, labels):
    """`x` with each repeated label reduced to its diagonal (moved to the end)."""
    while len(set(labels)) != len(labels):
        c = next(c for c in labels if labels.count(c) > 1)
        i = labels.index(c)
        j = labels.index(c, i + 1)
        x = diagonal(x, 0, i, j)
        labels = "".join(l for k, l in enumerate(labels) if k not in (i, j)) + c
    return x, labels


def _sum_unneeded(x, labels, keep):
    axes = tuple(i for i, c in enumerate(labels) if c not in keep)
    if not axes:
        return x, labels
    return ops.reduce_sum(x, axes=axes), "".join(c for c in labels if c in keep)


def _fit(x, labels, sizes):
    """`x` with its size-1 dims broadcast to the labels' sizes (einsum broadcasts them)."""
    shape = shape_of(x)
    target = tuple(sizes[c] if d == 1 else d for c, d in zip(labels, shape, strict=True))
    return x if target == shape else broadcast_to_shape(x, target, (x,))


def _contract(x, xl, y, yl, keep, sizes):
    x, y = _fit(x, xl, sizes), _fit(y, yl, sizes)
    shared = [c for c in xl if c in yl]
    batch = [c for c in shared if c in keep]
    contract = [c for c in shared if c not in keep]
    out = ops.dot_general(x, y, dimension_numbers=(
        (tuple(xl.index(c) for c in contract), tuple(yl.index(c) for c in contract)),
        (tuple(xl.index(c) for c in batch), tuple(yl.index(c) for c in batch)),
    ))
    labels = "".join(batch) + "".join(c for c in xl if c not in shared) + "".join(
        c for c in yl if c not in shared)
    return out, labels
