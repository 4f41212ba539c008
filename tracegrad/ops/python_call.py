"""`python_call`: a user's Python function of NumPy arrays as a primitive (autograd's
`extend.primitive`, tracegrad.extend).

`python_call(*operands, function=f, kwargs=())` runs `f.impl(*arrays, **kwargs)`. Its
result types come from `f.result` (a rule of the operand types) or from running `f.impl`
once on zeros of the operands' shapes; its gradient from the vjp makers the user gave
(`f.vjps[i](ans, *operands, **kwargs)` returns `g -> gradient of operand i`), written
with tracegrad ops, so they are differentiable and batched like any code. Batched, it runs
`f`'s own batch rule if it has one, else `f.impl` once per example (a loop in NumPy).
The numpy backend calls `f.impl`; the Numba backend runs it between compiled kernels.
"""

from __future__ import annotations

import numpy as np

from tracegrad.core import dtypes
from tracegrad.core.ir import EagerTensor, FuncGraph
from tracegrad.core.op import Primitive, no_dims
from tracegrad.core.state import state
from tracegrad.core.types import TensorType
from tracegrad.errors import InvalidArgumentError, NotDifferentiableError, TracegradError
from tracegrad.ops._batching import bdim_at, first_batched

python_call_p = Primitive("python_call", multiple_results=True)


class PythonFunction:
    """A user's function of NumPy arrays with the rules the user gave it: `result(*types,
    **kwargs)` (optional), `vjps` (argnum -> vjp maker), `batch_rule` (optional)."""

    def __init__(self, impl, name: str, result=None):
        self.impl = impl
        self.name = name
        self.result = result
        self.vjps: dict[int, object] = {}
        self.batch_rule = None
        self.single = True  # the function returns one array (not a tuple)
        self._types: dict = {}

    def __repr__(self):
        return f"<python function {self.name}>"

    def out_types(self, types, kwargs) -> list[TensorType]:
        key = (tuple(types), kwargs)
        found = self._types.get(key)
        if found is None:
            found = self._types[key] = self._infer(types, dict(kwargs))
        return found

    def _infer(self, types, kwargs) -> list[TensorType]:
        if self.result is not None:
            out = self.result(*types, **kwargs)
        else:
            if any(None in t.shape for t in types):
                raise InvalidArgumentError(
                    f"python primitive {self.name}: operand shapes "
                    f"{[t.shape for t in types]} are not all known; give the primitive a "
                    "result= rule")
            try:
                with np.errstate(all="ignore"):
                    out = self.impl(*[np.zeros(t.shape, t.dtype) for t in types], **kwargs)
            except Exception as e:  # noqa: BLE001 - any failure: ask for the rule
                raise InvalidArgumentError(
                    f"python primitive {self.name}: its result types are found by running it "
                    f"on zeros of its operands' shapes, which raised {type(e).__name__}: {e}; "
                    "give the primitive a result= rule") from None
        self.single = not isinstance(out, (tuple, list))
        outs = [out] if self.single else list(out)
        return [o if isinstance(o, TensorType) else
                TensorType(tuple(o.shape), dtypes.canonicalize(o.dtype, op=self.name))
                if hasattr(o, "shape") and hasattr(o, "dtype") else
                TensorType(tuple(np.shape(o)), dtypes.canonicalize(np.asarray(o).dtype,
                                                                   op=self.name))
                for o in outs]


@python_call_p.def_abstract_eval
def _python_call_abstract_eval(*types, function, kwargs=()):
    return function.out_types(types, kwargs)


python_call_p.def_dims(no_dims)  # (nothing is known of how its sizes relate)


@python_call_p.def_impl
def _python_call_impl(*arrays, function, kwargs=()):
    out = function.impl(*arrays, **dict(kwargs))
    outs = [out] if not isinstance(out, (tuple, list)) else list(out)
    types = function.out_types(tuple(TensorType(a.shape, a.dtype) for a in arrays), kwargs)
    if len(outs) != len(types):
        raise TracegradError(f"python primitive {function.name} returned {len(outs)} "
                             f"arrays, its result rule says {len(types)}")
    result = []
    for o, t in zip(outs, types, strict=True):
        o = np.asarray(o)
        if o.ndim != len(t.shape) or any(d is not None and d != s
                                         for d, s in zip(t.shape, o.shape, strict=True)):
            raise TracegradError(
                f"python primitive {function.name} returned an array of shape {o.shape} "
                f"where its result types say {t.shape} (found by its result= rule, or by "
                "running it on zeros): a result whose shape depends on the values needs a "
                "result= rule, and cannot be traced")
        if o.dtype != t.dtype:
            o = o.astype(t.dtype)
        result.append(o)
    return tuple(result)


def _tensor(x):
    if x is None or hasattr(x, "dtype") and not isinstance(x, np.ndarray):
        return x
    return state.graph.to_tensor(x) if state.graph is not None else EagerTensor(np.asarray(x))


@python_call_p.def_grad
def _python_call_grad(op, *gs):
    function, kwargs = op.attrs["function"], dict(op.attrs.get("kwargs", ()))
    if not function.vjps:
        raise NotDifferentiableError(
            f"python primitive {function.name} (at {op.source}) has no gradient: give it one "
            "with tracegrad.extend.defvjp (or defjvp)")
    ans = op.outputs[0] if function.single else tuple(op.outputs)
    g = gs[0] if function.single else tuple(gs)
    grads = []
    for i in range(len(op.inputs)):
        maker = function.vjps.get(i)
        skip = getattr(op, "skip_input_indices", None)
        if maker is None or (skip and i in skip):
            grads.append(None)
            continue
        grads.append(_tensor(maker(ans, *op.inputs, **kwargs)(g)))
    return grads


@python_call_p.def_batch
def _python_call_batch(ctx, args, dims, *, function, kwargs=()):
    if function.batch_rule is not None:
        outs, out_dims = function.batch_rule(args, dims, **dict(kwargs))
        return list(outs), list(out_dims)
    like, like_dim = first_batched(args, dims)
    operands = [bdim_at(x, d, 0, like, like_dim) if d is not None else x
                for x, d in zip(args, dims, strict=True)]
    looped = _Looped(function, tuple(d is not None for d in dims), lambda: type(ctx)(ctx.what))
    outs = python_call_p.bind(*operands, function=looped, kwargs=kwargs)
    return list(outs), [0] * len(outs)


class _Looped(PythonFunction):
    """`function` run once per example along axis 0 of the `batched` operands; its
    gradients are `function`'s, batched the same way (`vectorizer()` makes the `vmap`
    transform that batches them)."""

    def __init__(self, function: PythonFunction, batched: tuple, vectorizer):
        super().__init__(self._run, f"{function.name} (per example)")
        self.base, self.batched = function, batched
        self.result = self._result
        self._vectorizer = vectorizer
        self.vjps = {i: self._looped_vjp(i) for i in function.vjps}

    def _looped_vjp(self, i):
        """The vjp maker of operand `i`: the base's vjp of one example, batched over the
        examples (summed over them for an operand every example shares)."""
        def maker(ans, *args, **kwargs):
            def vjp(g):
                from tracegrad.ops.api import reduce_sum

                outs = [ans] if self.base.single else list(ans)
                cts = [c for c in ([g] if self.base.single else list(g)) if c is not None]
                graph = FuncGraph(f"{self.base.name}_vjp", outer=state.graph)
                with graph.as_default():
                    one = [graph.add_input(TensorType(tuple(t.shape[1:]), t.dtype))
                           for t in [*outs, *cts]]
                    arg_ins = [graph.add_input(TensorType(tuple(a.shape[1:]), a.dtype) if b
                                               else a.type)
                               for a, b in zip(args, self.batched, strict=True)]
                    it = iter(one[len(outs):])
                    one_g = [None if c is None else next(it)
                             for c in ([g] if self.base.single else g)]
                    one_ans = one[0] if self.base.single else tuple(one[:len(outs)])
                    one_g = one_g[0] if self.base.single else tuple(one_g)
                    graph.outputs = [_tensor(self.base.vjps[i](one_ans, *arg_ins, **kwargs)(
                        one_g))]
                dims = [0] * (len(outs) + len(cts)) + [0 if b else None for b in self.batched]
                (r,), (d,) = self._vectorizer().run(graph, [*outs, *cts, *args], dims)
                r = bdim_at(r, d, 0, outs[0], 0)
                return r if self.batched[i] else reduce_sum(r, axes=(0,))

            return vjp

        return maker

    def __eq__(self, other):
        return isinstance(other, _Looped) and (other.base, other.batched) == (
            self.base, self.batched)

    def __hash__(self):
        return hash((id(self.base), self.batched))

    def _result(self, *types, **kwargs):
        size = next(t.shape[0] for t, b in zip(types, self.batched, strict=True) if b)
        inner = [TensorType(t.shape[1:], t.dtype) if b else t
                 for t, b in zip(types, self.batched, strict=True)]
        outs = self.base.out_types(tuple(inner), tuple(sorted(kwargs.items())))
        self.single = self.base.single
        found = [TensorType((size, *t.shape), t.dtype) for t in outs]
        return found[0] if self.single else found

    def _run(self, *arrays, **kwargs):
        n = next(a.shape[0] for a, b in zip(arrays, self.batched, strict=True) if b)
        rows = [self.base.impl(*[a[i] if b else a for a, b in
                                 zip(arrays, self.batched, strict=True)], **kwargs)
                for i in range(n)]
        if self.base.single:
            return np.stack([np.asarray(r) for r in rows])
        return tuple(np.stack([np.asarray(r[k]) for r in rows]) for k in range(len(rows[0])))
