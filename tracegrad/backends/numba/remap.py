"""Index remapping: the lowering records and element rules of the ops a fused loop nest
evaluates by reading their operand at another index (broadcasts, transposes, slices,
reversals, gathers, squeezing reshapes, reshapes of a computed vector) or from the index
alone (`iota`, `dim_size`, constants); a reshape that is not fused is a view (`_reshape`).

Each element rule is `rule(cg, op, t, idx, nest) -> (expression, deps)`: element `idx` of
`t` (one `(expression, deps)` per dim) evaluated in `nest` by the `CodeGen` `cg`.
"""

from __future__ import annotations

from tracegrad.backends.numba.lowering import (
    ELEMENTWISE,
    GENERATOR,
    REMAP,
    VIEW,
    Lowering,
    lowering,
    register,
)
from tracegrad.backends.numba.plan import AttrSlot
from tracegrad.backends.numba.records import Ref, name_of
from tracegrad.backends.numba.scalars import NB_TYPE
from tracegrad.core import dtypes
from tracegrad.core.op import constant_p
from tracegrad.ops import indexing, shape_ops


def _v_broadcast_in_dim(cg, op, t, idx, nest):
    x = op.inputs[0]
    xdims = cg.dims(x)
    mapped = []
    for i, d in enumerate(op.attrs["broadcast_dimensions"]):
        e, dep = idx[d]
        if x.shape[i] == 1:
            mapped.append(("0", frozenset()))
        elif x.shape[i] is None:  # may be 1 at run time: clamp the index
            mapped.append((f"min({e}, {xdims[i]} - 1)", dep))
        else:
            mapped.append((e, dep))
    return cg.elem(x, mapped, nest)

def _v_transpose(cg, op, t, idx, nest):
    x = op.inputs[0]
    mapped = [None] * len(idx)
    for i, p in enumerate(op.attrs["permutation"]):
        mapped[p] = idx[i]
    return cg.elem(x, mapped, nest)

def _v_slice(cg, op, t, idx, nest):
    x = op.inputs[0]
    tid = id(x)
    mapped = []
    for k, ((e, dep), start, limit, stride) in enumerate(zip(
            idx, op.attrs["start_indices"], op.attrs["limit_indices"],
            op.attrs["strides"], strict=True)):
        if x.shape[k] == 1:
            mapped.append(("0", frozenset()))
            continue
        if cg.module.constant_starts and start is not None and start >= 0:
            s = str(start)  # (strides are positive) the run-time start if an element is read
        else:
            s = cg.int_local(AttrSlot(tid, _slice_start(k, start, limit, stride)), "st")
        step = e if stride == 1 else f"{stride} * {e}"
        if s == "0":
            mapped.append((e if stride == 1 else f"({step})", dep))
        elif e == "0":
            mapped.append((s, dep))
        else:
            mapped.append((f"({s} + {step})", dep))
    return cg.elem(x, mapped, nest)

def _v_rev(cg, op, t, idx, nest):
    x = op.inputs[0]
    xd = cg.dims(x)
    mapped = list(idx)
    for k in op.attrs["dimensions"]:
        e, dep = idx[k]
        mapped[k] = (f"({xd[k]} - 1 - {e})", dep)
    return cg.elem(x, mapped, nest)

def _v_reshape(cg, op, t, idx, nest):
    x = op.inputs[0]
    pairs = shape_ops.squeeze_map(op)
    if pairs is None:  # a vector unflattened: its index is the row-major linear one
        e, deps = "0", frozenset()
        for (ie, dep), d in zip(idx, cg.dims(t), strict=True):
            if d != "1":
                e = ie if e == "0" else f"({e} * {d} + {ie})"
                deps |= dep
        return cg.elem(x, [(e, deps)], nest)
    mapped = [("0", frozenset())] * x.ndim
    for i, j in pairs:
        mapped[i] = idx[j]
    return cg.elem(x, mapped, nest)


def unflattens(op) -> bool:
    """Whether reshape `op` unflattens a vector computed by an elementwise op (a fused
    remap: the vector's element at the row-major linear index)."""
    x = op.inputs[0]
    return (x.ndim == 1 and op.outputs[0].ndim > 1 and x.op is not None
            and lowering(x.op.primitive).kind == ELEMENTWISE)

def _v_gather(cg, op, t, idx, nest):
    x, ind = op.inputs
    ax = op.attrs["axis"]
    r = ind.ndim
    e, dep = cg.elem(ind, idx[ax:ax + r], nest)
    n = cg.dims(x)[ax]
    var = cg.fresh("g")
    nest.stmt(dep, cg.index_stmt(var, e, n, op), op, (name_of(var),))
    mapped = list(idx[:ax]) + [(var, dep)] + list(idx[ax + r:])
    return cg.elem(x, mapped, nest)

def _v_iota(cg, op, t, idx, nest):
    e, dep = idx[op.attrs["dimension"]]
    if cg.dims(t)[op.attrs["dimension"]] == "1":
        e, dep = "0", frozenset()
    dt = t.dtype
    expr = f"({e} != 0)" if dt == dtypes.bool_ else f"{NB_TYPE[dt]}({e})"
    return expr, dep

def _v_dim_size(cg, op, t, idx, nest):
    x = op.inputs[0]
    return f"np.int64({cg.dims(x)[op.attrs['axis']]})", frozenset()


def _slice_start(k, start, limit, stride):
    """The slot function for the start index of dim `k` of a slice (unknown dims resolve
    Python slice rules against the run-time size)."""
    def fn(shape):
        return slice(start, limit, stride).indices(shape[k])[0]
    return fn


def _reshape(cg, op):
    """A reshape that is not fused: a view of its operand's array."""
    (x,), t = op.inputs, op.outputs[0]
    shape = ", ".join(cg.dims(t))
    name = cg.fresh("r")
    cg.emit(f"{name} = {cg.view(cg.array(x), f'({shape},)')}")
    cg.refs[id(t)] = Ref("arr", name)


# -- lowering records: index remappings, generators, views ------------------------------------

register(shape_ops.broadcast_in_dim_p, Lowering(REMAP, element=_v_broadcast_in_dim))
register(shape_ops.transpose_p, Lowering(REMAP, element=_v_transpose))
register(shape_ops.slice_p, Lowering(REMAP, element=_v_slice))
register(shape_ops.rev_p, Lowering(REMAP, element=_v_rev))
register(indexing.gather_p, Lowering(REMAP, element=_v_gather))
register(shape_ops.reshape_p, Lowering(
    VIEW, element=_v_reshape, emit=_reshape,
    fuses_if=lambda op: shape_ops.squeeze_map(op) is not None or unflattens(op),
    needs_array=True))
register(shape_ops.iota_p, Lowering(GENERATOR, element=_v_iota))
register(shape_ops.dim_size_p, Lowering(GENERATOR, element=_v_dim_size))
# a scalar constant is loaded at kernel entry, an array one is an argument (codegen.py)
register(constant_p, Lowering(GENERATOR))
