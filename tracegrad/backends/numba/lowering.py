"""Lowering records: what the Numba backend knows about each primitive, keyed by the
`Primitive` object (as JAX's `mlir.register_lowering(prim, rule)`).

Each op family declares its records next to its emitters, with `register(prim, Lowering(...))`:
`scalars.py` the elementwise primitives, `codegen.py` the index remappings and generators,
`blocks.py`, `blocks_reduce.py`, `blocks_linalg.py` and `control.py` the blocks, the
package's `__init__.py` the primitives inlined before planning. The planner, the fusion
decisions, the code generator and the segmenter read the record (`lowering(prim)`); nothing
in the backend dispatches on an op's name. A primitive with no record is an
`UnsupportedOpError` naming it, and a test checks every registered primitive has one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tracegrad.core.op import Primitive
from tracegrad.errors import UnsupportedOpError

# How a primitive fuses (`Lowering.kind`):
ELEMENTWISE = "elementwise"  # a scalar expression of its operands' elements (`scalar`)
REMAP = "remap"  # reads its operand at a remapped index, inside its consumer's loop (`element`)
GENERATOR = "generator"  # an element computed from the index alone (`element`)
VIEW = "view"  # a view of its operand's array (`emit`); a remap (`element`) when `fuses_if`
REDUCTION = "reduction"  # a block evaluated into a shared loop nest, so siblings fuse (`emit`)
BLOCK = "block"  # a block of its own, reading its operands' arrays or elements (`emit`)
CONTROL = "control"  # cond/while: a block calling sub-graph kernels (`emit`), or segments
INLINED = "inlined"  # removed before planning (`inline(rewriter, op, inputs)`)
KINDS = (ELEMENTWISE, REMAP, GENERATOR, VIEW, REDUCTION, BLOCK, CONTROL, INLINED)
FUSED = (ELEMENTWISE, REMAP, GENERATOR)  # always evaluated inside their consumers' loops

# Cost classes (`Lowering.cost`): a costly elementwise op (a transcendental, a division) is
# worth storing rather than recomputing for each copy of a broadcast (fusion.py).
CHEAP = "cheap"
COSTLY = "costly"


@dataclass(frozen=True)
class Lowering:
    """What the backend needs to lower one primitive.

    - `kind`: how it fuses (see the constants above).
    - `cost`: `CHEAP` or `COSTLY` (elementwise ops).
    - `scalar(args, dtype, out_dtype, attrs, helpers) -> str`: an elementwise op's scalar
      expression of its operand expressions `args` (`dtype`: the first operand's).
    - `vector_math`: the name `f` of the vecmath.py helper `_f_v` a float elementwise op
      calls (float32 computed in float64); `scalar` covers the other dtypes.
    - `complex(args, dtype, out_dtype, attrs, helpers) -> str`: the scalar expression for
      complex operands, where `scalar` and `vector_math` are real only.
    - `fast_trig`: the helper has a fast-reduction twin `_f_fast_v`, right for arguments up
      to vecmath_trig.TRIG_FAST_LIMIT (a nest counts the others and redoes their block).
    - `sin_cos`: the position of its value in `_sin_cos_v`'s pair (sin 0, cos 1): sin and
      cos of one argument share one range reduction.
    - `guard(args, dtype) -> str | None`: a condition on the operands that raises the
      op's error (`error`) in the kernel.
    - `element(cg, op, t, idx, nest) -> (expr, deps)`: element `idx` of result `t`, for
      remaps, generators and fused views.
    - `fuses_if(op) -> bool`: whether this op of a `VIEW` primitive fuses as a remap, or
      this op of a `BLOCK` primitive is evaluated element by element (`element`) like an
      elementwise op (a small contraction: blocks_linalg.py).
    - `emit(cg, op)`: the block of a block, reduction, view or control-flow op (a
      reduction's returns whether its nest's innermost loop may be redone per block).
    - `needs_array`: it reads its operands as C-contiguous arrays (unless it fuses).
    - `error(args, where) -> Exception`: the user's error for a raise tagged with the op
      (`args`: the raise's arguments after the tag).
    - `linalg`: NumPy's LinAlgError from it is reported naming the op.
    - `inline(rewriter, op, inputs) -> outputs`: an `INLINED` op's replacement.
    """

    kind: str
    cost: str = CHEAP
    scalar: Callable | None = None
    vector_math: str | None = None
    complex: Callable | None = None
    fast_trig: bool = False
    sin_cos: int | None = None
    guard: Callable | None = None
    element: Callable | None = None
    fuses_if: Callable | None = None
    emit: Callable | None = None
    needs_array: bool = False
    error: Callable | None = None
    linalg: bool = False
    inline: Callable | None = None

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"unknown lowering kind {self.kind!r}; one of {KINDS}")

    def fuses(self, op) -> bool:
        """Whether `op` is evaluated element by element inside its consumers' loops."""
        if self.kind in FUSED:
            return True
        return self.kind in (VIEW, BLOCK) and self.fuses_if is not None and self.fuses_if(op)

    def reads_array(self, op) -> bool:
        """Whether `op` needs its operands stored as arrays."""
        return self.needs_array and not self.fuses(op)


_RECORDS: dict[Primitive, Lowering] = {}


def register(prim: Primitive, record: Lowering) -> Lowering:
    """Declare `record` as the lowering of `prim` (once per primitive)."""
    if prim in _RECORDS:
        raise ValueError(f"primitive {prim.name!r} already has a Numba lowering")
    _RECORDS[prim] = record
    return record


def lowering(prim: Primitive) -> Lowering:
    """The lowering record of `prim`; an UnsupportedOpError naming it when it has none."""
    found = _RECORDS.get(prim)
    if found is None:
        raise UnsupportedOpError(
            f"numba backend: primitive {prim.name!r} has no lowering record (no Numba code); "
            "use backend='numpy' for this function"
        )
    return found


def find(prim: Primitive) -> Lowering | None:
    """The lowering record of `prim`, or None."""
    return _RECORDS.get(prim)


def check_graph(graph) -> None:
    """Raise an UnsupportedOpError naming the first op of `graph` with no record, and
    where it was created."""
    for op in graph.operations:
        if op.primitive not in _RECORDS:
            raise UnsupportedOpError(
                f"numba backend: primitive {op.primitive.name!r} has no Numba code (op "
                f"created at {op.source}); use backend='numpy' for this function"
            )


def registered() -> dict[Primitive, Lowering]:
    """Every primitive with a lowering record, and its record (a copy)."""
    return dict(_RECORDS)
