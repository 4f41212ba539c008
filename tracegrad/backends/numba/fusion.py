"""Which tensors are fused, and in what order the code generator visits the ops.

- `kinds[id(t)]`: how tensor `t` is held (see codegen.py): `virtual` (evaluated inside
  its consumers' loops), `root` (stored by an elementwise loop), `scalar`, `const_array`,
  or `block` (the output of an op with a block of its own); a costly value broadcast into
  a larger loop is a root (computed once, not once per copy);
- `regions[id(t)]`: the ids of the fused ops evaluating `t` takes (broadcasts of scalars,
  which take no work, left out); no region exceeds `MAX_FUSED_OPS` ops (the operands of
  the op that would exceed it become roots);
- `schedule()`: a topological order of the ops that puts independent loops over the same
  iteration space next to each other (sibling fusion).
"""

from __future__ import annotations

import os

from tracegrad.backends.numba.blocks_linalg import copies_operand
from tracegrad.backends.numba.lowering import COSTLY, REDUCTION, REMAP, VIEW, lowering
from tracegrad.backends.numba.plan import Plan, data_inputs
from tracegrad.core import dtypes
from tracegrad.core.op import constant_p
from tracegrad.core.shapes import size
from tracegrad.ops.linalg import dot_general_p
from tracegrad.ops.random_bits import threefry2x32_p
from tracegrad.ops.shape_ops import broadcast_in_dim_p, reshape_p, squeeze_map

# The most fused elementwise ops one loop nest evaluates (env TRACEGRAD_NUMBA_MAX_FUSED);
# see docs/performance.md for the compile times it was chosen from.
MAX_FUSED_OPS = int(os.environ.get("TRACEGRAD_NUMBA_MAX_FUSED", "128"))
# The most values one loop nest stores or reduces (env TRACEGRAD_NUMBA_MAX_NEST_VALUES):
# LLVM's vectorizer checks at run time that no array the loop stores overlaps another it
# touches, so a loop storing 24 arrays and reading 50 (the weights' gradients of an LSTM's
# backward step) took 10 s to compile and about a thousand checks on every entry.
MAX_NEST_VALUES = int(os.environ.get("TRACEGRAD_NUMBA_MAX_NEST_VALUES", "8"))
# A graph with more fused elementwise ops than this has its elementwise loop nests made
# functions of the module, nests with the same code compiled once (env
# TRACEGRAD_NUMBA_OUTLINE_OPS; docs/performance.md).
OUTLINE_OPS = int(os.environ.get("TRACEGRAD_NUMBA_OUTLINE_OPS", "256"))

# How far ahead `schedule` looks for siblings of a loop (in operations).
_LOOKAHEAD = 256
# The region size from which a region is worth storing rather than recomputing for each
# copy of a broadcast (as is one with a `COSTLY` op).
_COSTLY_REGION = 6
# Rows narrower than this keep a costly vector unflattened into them out of their loop
# nest (`_store_before_narrow_unflattens`): 8 float64 lanes fill one 512-bit vector or two
# 256-bit ones (LLVM's usual width, AVX2 and most AVX-512 CPUs), so a shorter inner loop
# leaves vectors partly empty on either kind of vector unit.
_NARROW = 8
# The most elements of a costly value read by several loop nests that is stored rather than
# recomputed in each (32 KB of float64: it stays in the L1 cache between the nests).
_SMALL_SHARED = 4096
# The most ops `Fusion._feeds` walks back from a tensor (it runs for every large value
# whose consumers end apart, so its walks must stay short in unrolled graphs).
_FEEDS_WALK = 2048


def _enlarges(before, after) -> bool:
    """Whether a broadcast from shape `before` to `after` repeats elements."""
    n = 1
    for d in before:
        if d is None:
            return True
        n *= d
    m = 1
    for d in after:
        if d is None:
            return True
        m *= d
    return m > n



def _count(shape) -> float:
    """The number of elements of a tensor of `shape` (infinite when a dim is unknown)."""
    n = size(shape)
    return float("inf") if n is None else n


def _small(shape) -> bool:
    """Whether a tensor of `shape` has a known size of at most `_SMALL_SHARED` elements."""
    return _count(shape) <= _SMALL_SHARED


def _free(op) -> bool:
    """Whether a fused op costs nothing in a loop: a broadcast of a scalar reads the scalar's
    variable (it does not count towards `MAX_FUSED_OPS`)."""
    return op.primitive is broadcast_in_dim_p and op.inputs[0].ndim == 0


class Fusion:
    """The fusion decisions for `plan.graph` (see the module docstring)."""

    def __init__(self, plan: Plan):
        self.plan = plan
        self.kinds: dict = {}
        self.regions: dict = {}
        self._tensors: dict | None = None
        self._decide()

    def _decide(self):
        for op in self.plan.graph.operations:
            fusible = lowering(op.primitive).fuses(op)
            for t in op.outputs:
                if not fusible:
                    kind = "block"
                elif t.ndim == 0:
                    kind = "scalar"
                elif op.primitive is constant_p:
                    kind = "const_array"
                elif self._must_store(t):
                    kind = "root"
                else:
                    kind = "virtual"
                self.kinds[id(t)] = kind
        self._place_small_contractions()
        self._compute_into_product_copies()
        self._store_before_broadcasts()
        self._store_before_narrow_unflattens()
        self._store_shared_values()
        self._cap_regions()

    def _compute_into_product_copies(self):
        """A computed operand of a BLAS product that the product copies to another layout
        (blocks_linalg.copies_operand: a batch axis last, `einsum("kij,njk->nki")` of
        x - mu laid out (n, j, k)) and that nothing else reads is not stored: the
        copy's loop computes it (one pass over it instead of a store and a strided copy)."""
        plan = self.plan
        for op in plan.graph.operations:
            if op.primitive is not dot_general_p or self.kinds[id(op.outputs[0])] != "block":
                continue
            for k, x in enumerate(op.inputs):
                if self.kinds.get(id(x)) == "root" and not plan.is_output(x) and \
                        len(plan.consumers[id(x)]) == 1 and copies_operand(op, k):
                    self.kinds[id(x)] = "virtual"

    def _store_before_broadcasts(self):
        """Store the operand of a broadcast that enlarges the iteration space when its fused
        region is costly (a transcendental or a division, or `_COSTLY_REGION` ops):
        evaluated inside the larger loop it would be recomputed for every broadcast copy."""
        for op in self.plan.graph.operations:
            if op.primitive is not broadcast_in_dim_p:
                continue
            x, y = op.inputs[0], op.outputs[0]
            if self.kinds.get(id(x)) != "virtual" or not _enlarges(x.shape, y.shape):
                continue
            if self._costly(x):
                self.kinds[id(x)] = "root"

    def _store_before_narrow_unflattens(self):
        """Store a costly vector that a reshape unflattens into rows narrower than a vector
        register (`_NARROW`): in one flat loop of its own it vectorizes, in its consumers'
        nest its inner loop would be too short to (a reparameterized sample of a few
        latent dims per row: tracegrad.random draws samples as vectors). The reshape is
        then a view of the stored vector."""
        for op in self.plan.graph.operations:
            if op.primitive is not reshape_p or squeeze_map(op) is not None:
                continue
            x, t = op.inputs[0], op.outputs[0]
            if self.kinds.get(id(t)) != "virtual":
                continue
            narrow = t.shape[-1] is not None and t.shape[-1] < _NARROW
            if self.kinds.get(id(x)) == "virtual" and narrow and self._costly(x):
                self.kinds[id(x)] = "root"
            if self.kinds.get(id(x)) != "virtual":
                self.kinds[id(t)] = "block"  # a view: its consumers may loop flat

    def _store_shared_values(self):
        """Store a value whose consumers end in different stored tensors when recomputing it
        in each of their loop nests costs more than storing it: one computed from random
        bits (`threefry2x32`: ~130 integer ops an element; a reparameterized sample read by
        the forward and the backward pass), or a costly one (`_costly`) of at most
        `_SMALL_SHARED` elements, which stays in cache (the gates of a recurrent step, read
        by the next layer, the state outputs, the loss and the backward pass: each of their
        nests recomputed the whole step). A larger one is stored when its region holds a
        transcendental (`_transcendental`) and one of its ends is reduced or transformed
        before another end reads the result, so their nests cannot be one (a log-sum-exp's
        gradient reads the sum of the `exp` it multiplies)."""
        ends: dict = {}
        for op in reversed(self.plan.graph.operations):
            for t in op.outputs:
                if self.kinds.get(id(t)) != "virtual":
                    continue
                if self._from_random_bits(t) or (_small(t.shape) and self._costly(t)):
                    apart = self._ends_apart(t, ends)
                elif self._transcendental(t):
                    apart = self._ends_in_turn(t, ends)
                else:
                    continue
                if apart:
                    self.kinds[id(t)] = "root"
                    ends.clear()

    def _reached(self, t, ends: dict) -> frozenset:
        """The non-virtual tensors that evaluating `t` feeds, through virtual ones (`ends`:
        a memo, valid while the kinds do not change)."""
        if self.kinds.get(id(t)) != "virtual":
            return frozenset((id(t),))
        if id(t) not in ends:
            ends[id(t)] = frozenset().union(*(self._reached(out, ends)
                                              for op, _ in self.plan.consumers[id(t)]
                                              for out in op.outputs))
        return ends[id(t)]

    def _end_groups(self, t, ends: dict) -> set:
        """For each consumer of virtual `t`, the stored tensors it ends in (distinct sets)."""
        return {frozenset().union(*(self._reached(out, ends) for out in c.outputs))
                for c, _ in self.plan.consumers[id(t)]}

    def _ends_apart(self, t, ends: dict) -> bool:
        """Whether the consumers of virtual `t` end in different stored tensors (so that
        each of their loop nests would evaluate `t`)."""
        return len(self._end_groups(t, ends)) > 1

    def _ends_in_turn(self, t, ends: dict) -> bool:
        """Whether an end of a consumer of virtual `t` that is not evaluated element by
        element (a reduction, a block) feeds the end of another consumer."""
        groups = self._end_groups(t, ends)
        if len(groups) < 2:
            return False
        if self._tensors is None:
            self._tensors = {id(x): (x, i) for i, op in enumerate(self.plan.graph.operations)
                             for x in op.outputs}
        tensors = self._tensors
        for group in groups:
            firsts = {e for e in group if e in tensors and
                      self.kinds.get(e) not in ("root", "virtual")}
            if firsts and any(self._feeds(firsts, tensors[e][0]) for other in groups
                              if other is not group for e in other if e in tensors):
                return True
        return False

    def _feeds(self, sources: set, t) -> bool:
        """Whether a tensor of `sources` (ids of op outputs) is `t` or one it is computed
        from (looked for among the ops after the first source's, up to `_FEEDS_WALK` of
        them: a long graph's answer is no)."""
        first = min(self._tensors[s][1] for s in sources)
        seen: set = set()
        stack = [t]
        while stack:
            x = stack.pop()
            if id(x) in sources:
                return True
            found = self._tensors.get(id(x))
            if found is None or found[1] < first or id(x.op) in seen:
                continue
            seen.add(id(x.op))
            if len(seen) > _FEEDS_WALK:
                return False
            stack.extend(x.op.inputs)
        return False

    def _place_small_contractions(self):
        """A small contraction (blocks_linalg.SMALL_CONTRACTION terms) is evaluated in its
        consumers' loops only where that saves storing it: one stored anyway (an output, an
        operand of an op that reads arrays) or read by loop nests that end in different
        stored tensors (each would redo its terms) is a BLAS block of its own. The virtual
        operands of a fused one that are smaller than its result (so read again for many of
        its elements) and do more than remap stored arrays are stored."""
        for op in self.plan.graph.operations:
            if op.primitive is not dot_general_p or not lowering(op.primitive).fuses(op):
                continue
            t = op.outputs[0]
            kind = self.kinds[id(t)]
            if kind == "root" or (kind == "virtual" and self._ends_apart(t, {})):
                self.kinds[id(t)] = "block"
                stored = op.inputs
            else:
                stored = [x for x in op.inputs if _count(x.shape) < _count(t.shape) and
                          self._region_has(x, lambda o, n: lowering(o.primitive).kind
                                           not in (REMAP, VIEW))]
            for x in stored:
                if self.kinds.get(id(x)) == "virtual":
                    self.kinds[id(x)] = "root"

    def _from_random_bits(self, t) -> bool:
        return self._region_has(t, lambda op, n: op.primitive is threefry2x32_p)

    def _costly(self, t) -> bool:
        return self._region_has(
            t, lambda op, n: lowering(op.primitive).cost == COSTLY or n >= _COSTLY_REGION)

    def _transcendental(self, t) -> bool:
        """Whether `t`'s fused region holds a transcendental of floats (an op computed by a
        vector-math helper, 1-2 ns an element: more than storing a float64 and reading it
        back costs, about 0.6 ns at 25 GB/s; a division or a square root costs less)."""
        return self._region_has(t, lambda op, n: lowering(op.primitive).vector_math is not None
                                and dtypes.is_float(op.outputs[0].dtype))

    def _region_has(self, t, found) -> bool:
        """Whether `found(op, ops seen so far)` holds for an op of `t`'s fused region."""
        seen: set = set()
        stack = [t]
        while stack:
            x = stack.pop()
            op = x.op
            if op is None or id(op) in seen or self.kinds.get(id(x)) != "virtual":
                continue
            seen.add(id(op))
            if found(op, len(seen)):
                return True
            stack.extend(op.inputs)
        return False

    def _cap_regions(self):
        """Store the virtual operands of an op whose fused region would exceed
        `MAX_FUSED_OPS`; `regions[id(t)]`: the fused ops evaluating `t` takes."""
        virtual: dict = {}  # the regions a consumer merges: those of virtual tensors
        for op in self.plan.graph.operations:
            ins = [x for x in data_inputs(op) if self.kinds.get(id(x)) == "virtual"]
            merged = frozenset().union(*(virtual[id(x)] for x in ins))
            if len(merged) >= MAX_FUSED_OPS:
                for x in ins:
                    self.kinds[id(x)] = "root"
                    virtual[id(x)] = frozenset()
                merged = frozenset()
            own = frozenset() if _free(op) else frozenset((id(op),))
            for t in op.outputs:
                self.regions[id(t)] = merged | own
                if self.kinds[id(t)] == "virtual":
                    virtual[id(t)] = self.regions[id(t)]

    def _must_store(self, t) -> bool:
        """Outputs and operands of ops that need an array are stored; a value read by several
        consumers is recomputed in each (docs/numba.md: storing them was slower)."""
        plan = self.plan
        if plan.is_output(t):
            return True
        return any(lowering(op.primitive).reads_array(op) for op, _ in plan.consumers[id(t)])

    def schedule(self) -> list:
        """The graph's operations in a topological order that moves independent loops over
        the same iteration space (roots and reductions over equal dims, reading nothing
        the earlier ones produce) next to each other, so that they can share one nest."""
        ops = list(self.plan.graph.operations)
        producer = {id(t): op for op in ops for t in op.outputs}
        placed: set = set()
        order: list = []

        def ready(op, group, acc, failed) -> bool:
            """Whether `op` can run now without reading what `group` produces; collects
            the virtual producers it needs in `acc` (`failed`: producers that cannot)."""
            for x in op.inputs:
                p = producer.get(id(x))
                if p is None or id(p) in acc:
                    continue
                if id(p) in group or id(p) in failed:
                    return False
                # a scalar constant is loaded at kernel entry: it closes no nest
                virtual = self.kinds[id(x)] == "virtual" or (
                    self.kinds[id(x)] == "scalar" and p.primitive is constant_p)
                if id(p) in placed and not virtual:
                    continue
                if not virtual or not ready(p, group, acc, failed):
                    failed.add(id(p))
                    return False
                acc[id(p)] = p
            return True

        def place(op):
            placed.add(id(op))
            order.append(op)

        for k, op in enumerate(ops):
            if id(op) in placed:
                continue
            place(op)
            key = self.loop_key(op)
            if key is None:
                continue
            group = {id(op)}
            for later in ops[k + 1:k + 1 + _LOOKAHEAD]:
                if id(later) in placed or self.loop_key(later) != key:
                    continue
                acc: dict = {}
                if ready(later, group, acc, set()):
                    for p in acc.values():
                        if id(p) not in placed:
                            place(p)
                    place(later)
                    group.add(id(later))
        return order

    def loop_key(self, op):
        """The dims a root or a `REDUCTION` op loops over (None for other ops)."""
        kind = self.kinds[id(op.outputs[0])]
        if kind == "root":
            return self.plan.dims(op.outputs[0])
        if kind == "block" and lowering(op.primitive).kind == REDUCTION:
            return self.plan.dims(op.inputs[0])
        return None
