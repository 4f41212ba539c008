"""Forward mode: `jvp_inline`, the Jacobian-vector product of a traced function.

The product `J t` is the transpose of the vector-Jacobian product: `u -> J^T u` is linear in
the cotangent `u`, so differentiating `<J^T u, t>` with respect to `u` gives `J t` for any
`u` (the double-vjp construction). Both passes are the reverse-mode gradient rules every
primitive already has, so every differentiable primitive has forward mode with no rule of
its own; the second pass never reads `u` (gradient rules are linear in their incoming
gradient), so after dead-code elimination the graph computes `J t` alone.
"""

from __future__ import annotations

from collections.abc import Callable

from tracegrad import ops
from tracegrad.core import dtypes, tree
from tracegrad.core.state import state
from tracegrad.transforms.autodiff import Linearization, tangent_leaves, tangent_tensors
from tracegrad.transforms.backprop import backprop

__all__ = ["jvp_inline"]


def jvp_inline(fn: Callable, primals, tangents, what: str = "jvp"):
    """`(out, tangent_out)` of `fn(*primals)` along `tangents` (structured like `primals`),
    emitted into the current graph; integer and bool outputs get zero tangents; static primals (a Python bool
    flag) are passed as they are."""
    primals, tangents = tuple(primals), tuple(tangents)
    nums, t_leaves = tangent_leaves(what, primals, tangents)
    lin = Linearization(fn, primals, {}, nums, what)
    out_leaves, out_def = tree.flatten(lin.result)
    out_leaves = [lin.to_tensor(y) for y in out_leaves]
    outs = lin.emit(out_leaves)
    target = state.graph
    tangent_inputs = tangent_tensors(what, lin, t_leaves)
    wanted = [i for i, y in enumerate(out_leaves) if dtypes.is_differentiable(y.dtype)]
    results = [ops.zeros_like(y) for y in outs]
    if wanted:
        ys = [out_leaves[i] for i in wanted]
        grads = lin.pullback(ys, [ops.zeros_like(outs[i]) for i in wanted])
        cotangents = lin.graph.inputs[-len(ys):]  # the u of the pullback above
        env = lin._env_of(target)

        def transpose():
            seeds = []
            for t in tangent_inputs:
                placeholder = lin.graph.add_input(t.type)
                env[id(placeholder)] = t
                seeds.append(placeholder)
            state.transposing += 1
            try:
                return backprop(lin.graph.operations, grads, cotangents, seeds,
                                unconnected_gradients="zero")
            finally:
                state.transposing -= 1

        for i, jt in zip(wanted, lin.emit(lin.then(transpose)), strict=True):
            results[i] = jt
    return tree.unflatten(out_def, outs), tree.unflatten(out_def, results)
