"""Reverse-mode transforms over traced code: `tg.gradients`, `tg.hessians`, the inline
forms of `grad` / `value_and_grad` / `vjp` / `hvp`, and gradient overrides.

The functional transforms differentiate `fn` with respect to its arguments only: `fn` is
traced into its own `FuncGraph` nested in the graph being built, with fresh inputs for
the differentiated arguments (values it closes over are captures, hence constants), the
gradient is built in that graph by `backprop`, and the ops the requested results need are
copied into the current graph — the forward ops a gradient does not use are never emitted.
`tracegrad.autodiff` stages these inline forms as compiled functions for concrete input.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tracegrad import ops
from tracegrad.core import dtypes, tree
from tracegrad.core.arrays import as_array, is_foreign_array
from tracegrad.core.ir import FuncGraph, GraphTensor, Tensor
from tracegrad.core.op import constant_p, get_primitive
from tracegrad.core.shapes import shape_str
from tracegrad.core.state import state
from tracegrad.core.variables import Variable
from tracegrad.errors import (
    ArgumentTypeError, DTypeError, InvalidArgumentError, RegistryError, ShapeError, UsageError,
)
from tracegrad.transforms.backprop import (
    GRADIENT_REGISTRY,
    UnconnectedGradients,
    backprop,
    check_gradient,
)

__all__ = [
    "gradients", "hessians", "stop_gradient", "RegisterGradient", "gradient_override_map",
    "UnconnectedGradients", "Linearization", "grad_inline", "value_and_grad_inline",
    "vjp_inline", "hvp_inline", "tangent_leaves", "tangent_tensors", "is_static_value",
]


# -- tg.gradients / tg.hessians --------------------------------------------------------------


def _as_list(x) -> list:
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _current_graph(name: str) -> FuncGraph:
    graph = state.graph
    if graph is None:
        raise UsageError(
            f"tg.{name} is not supported when executing eagerly: it differentiates the ops of "
            "the function being traced. Call it inside a tg.function, or use "
            "tg.GradientTape (or tg.grad) eagerly"
        )
    return graph


def gradients(ys, xs, grad_ys=None, stop_gradients=None, unconnected_gradients="none") -> list:
    """Symbolic derivatives of `sum(ys)` with respect to each x in `xs`, inside traced code.

    Returns a list with one entry per x: `sum over y of d(y * grad_y)/dx`, of x's shape, or
    None when x is unconnected to the ys (zeros with `unconnected_gradients="zero"`) or is
    an integer or bool tensor. `grad_ys` holds the initial gradient of each y (ones by
    default). `stop_gradients` are tensors treated as constants: partial instead of total
    derivatives. Raises `RuntimeError` when called eagerly.

    >>> @tg.function
    ... def partials():
    ...     a = tg.constant(0.0)
    ...     b = 2 * a
    ...     return tg.gradients(a + b, [a, b], stop_gradients=[a, b])
    >>> partials()                       # without stop_gradients: [3.0, 1.0]
    [np.float64(1.0), np.float64(1.0)]
    """
    graph = _current_graph("gradients")
    ys = [graph.to_tensor(y) for y in _as_list(ys)]
    xs = [graph.to_tensor(x) for x in _as_list(xs)]
    stops = [graph.to_tensor(s) for s in _as_list(stop_gradients or [])]
    if grad_ys is not None:
        grad_ys = [
            graph.to_tensor(g) if isinstance(g, (Tensor, Variable)) else g
            for g in _as_list(grad_ys)
        ]
    return backprop(list(graph.operations), ys, xs, grad_ys, stop_gradients=stops,
                    unconnected_gradients=unconnected_gradients)


def hessians(ys, xs) -> list:
    """The Hessian of `sum(ys)` with respect to each x in `xs`, inside traced code.

    One entry per x, of shape `x.shape + x.shape`; x must have known dims. Built as one
    more reverse pass per element of x. As in the seed, an x that `sum(ys)` does not
    depend on (or an integer x: no gradient) raises ValueError, `RuntimeError` eagerly.
    """
    graph = _current_graph("hessians")
    xs = [graph.to_tensor(x) for x in _as_list(xs)]
    firsts = gradients(ys, xs)
    result = []
    for i, (g, x) in enumerate(zip(firsts, xs, strict=True)):
        if g is None:
            raise InvalidArgumentError(
                f"hessians: the ys have no gradient with respect to xs[{i}] (of type "
                f"{x.type}): they do not depend on it, or it is not a float tensor"
            )
        if None in x.shape:
            raise ShapeError(
                f"hessians: x of type {x.type} has unknown dims; the Hessian needs its size"
            )
        n = int(np.prod(x.shape, dtype=np.int64))
        flat = ops.reshape(g, new_sizes=(n,))
        records = list(graph.operations)  # the rows' reverse passes need none of each other
        rows = []
        for j in range(n):
            piece = ops.slice(flat, start_indices=(j,), limit_indices=(j + 1,), strides=(1,))
            gj = ops.reshape(piece, new_sizes=())
            (row,) = backprop(records + [piece.op, gj.op], [gj], [x],
                              unconnected_gradients="zero")
            rows.append(ops.reshape(row, new_sizes=(1, n)))
        if rows:
            h = ops.concatenate(*rows, dimension=0) if len(rows) > 1 else rows[0]
            result.append(ops.reshape(h, new_sizes=tuple(x.shape) * 2))
        else:
            zero = graph.constant(np.zeros((), x.dtype))
            result.append(ops.broadcast_in_dim(zero, shape=tuple(x.shape) * 2,
                                               broadcast_dimensions=()))
    return result


# -- stop_gradient, gradient overrides -------------------------------------------------------


def _read(x):
    if isinstance(x, Variable):
        return x.value()
    if isinstance(x, (Tensor, np.ndarray)):
        return x
    arr = as_array(x)
    return arr.astype(dtypes.canonicalize(arr.dtype), copy=False)


def stop_gradient(x):
    """`x` unchanged, but a constant to every gradient (tapes, `tg.gradients`, `tg.grad`).

    >>> tg.grad(lambda x: x * tg.stop_gradient(x))(3.0)     # not 6.0
    np.float64(3.0)
    """
    return ops.stop_gradient(_read(x))


class RegisterGradient:
    """Decorator registering a gradient function `(op, *out_grads) -> in_grads` under a name,
    for `tg.gradient_override_map`. `op` has `.inputs`, `.outputs`, `.attrs`; return one
    gradient (or None) per input. A name can be registered once.

    >>> @tg.RegisterGradient("clipped_sin")
    ... def _clipped(op, g):
    ...     return [tnp.clip(g, -1, 1) * tnp.cos(op.inputs[0])]
    >>> with tg.gradient_override_map({"sin": "clipped_sin"}):
    ...     tg.grad(lambda x: 5.0 * tnp.sin(x))(0.0)
    np.float64(1.0)
    """

    def __init__(self, op_type: str):
        if not isinstance(op_type, str):
            raise ArgumentTypeError(f"RegisterGradient takes a name (str), got {op_type!r}")
        self._op_type = op_type

    def __call__(self, fn: Callable) -> Callable:
        if self._op_type in GRADIENT_REGISTRY:
            raise RegistryError(f"a gradient named {self._op_type!r} is already registered")
        GRADIENT_REGISTRY[self._op_type] = fn
        return fn


@contextlib.contextmanager
def gradient_override_map(op_type_map: dict):
    """Within the block, new ops of the primitives named in the keys (traced, or eager on a
    tape) are differentiated with the gradient functions registered under the values.

    >>> with tg.gradient_override_map({"sin": "clipped_sin"}):
    ...     y = tnp.sin(x)                 # y's gradient goes through clipped_sin
    """
    if not isinstance(op_type_map, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in op_type_map.items()
    ):
        raise ArgumentTypeError(
            "gradient_override_map takes a dict from primitive names to names registered "
            f"with tg.RegisterGradient, got {op_type_map!r}"
        )
    for name in op_type_map:
        try:
            get_primitive(name)
        except KeyError:
            raise InvalidArgumentError(
                f"gradient_override_map: no primitive named {name!r} (primitive names are "
                "lower-case, as printed in graphs: 'sin', 'mul', 'dot_general')"
            ) from None
    saved = state.grad_overrides
    state.grad_overrides = {**saved, **op_type_map}
    try:
        yield
    finally:
        state.grad_overrides = saved


# -- the functional transforms, inline ---------------------------------------------------------


class Linearization:
    """`fn(*args, **kwargs)` traced into its own graph nested in the current one, with fresh
    inputs for the leaves of the arguments at `argnums`; results are copied out on demand.

    - `result`: what `fn` returned, with tensors of the nested graph;
    - `pullback(ys, cotangents)`: nested-graph gradients of the ys (cotangents: tensors of
      the current graph, or None for ones) with respect to the differentiated leaves;
    - `emit(tensors)`: the current graph's copies of nested-graph tensors (copying only the
      ops they need that are not copied yet).
    """

    def __init__(self, fn: Callable, args: tuple, kwargs: dict, argnums: tuple, what: str):
        outer = state.graph
        self.what = what
        self.graph = FuncGraph(f"{what}_{getattr(fn, '__name__', 'fn')}", outer=outer)
        self._env: dict[int, tuple[FuncGraph, dict]] = {}
        self._order: dict[int, int] = {}
        env = self._env_of(outer)
        self.arg_treedefs = []
        self.inputs: list[GraphTensor] = []
        call_args = list(args)
        with self.graph.as_default():
            for i in argnums:
                leaves, treedef = tree.flatten(args[i])
                placeholders = []
                for leaf in leaves:
                    primal = outer.to_tensor(leaf)
                    _check_differentiable(what, primal, i)
                    p = self.graph.add_input(primal.type)
                    env[id(p)] = primal
                    placeholders.append(p)
                self.arg_treedefs.append(treedef)
                self.inputs += placeholders
                call_args[i] = tree.unflatten(treedef, placeholders)
            self.result = fn(*call_args, **kwargs)
        self._n_forward = len(self.graph.operations)

    def split_aux(self):
        """`(out, aux)` of a function that returns a pair (has_aux)."""
        return split_aux(self.what, self.result)

    def to_tensor(self, value):
        """`value` (a result leaf) as a tensor of the nested graph."""
        with self.graph.as_default():
            return self.graph.to_tensor(value)

    def pullback(self, ys: Sequence, cotangents: Sequence | None = None) -> list:
        """Gradients (nested-graph tensors, zeros where unconnected) of `sum(ys * cotangents)`
        with respect to the differentiated leaves."""
        grad_ys = None
        if cotangents is not None:
            target = state.graph
            env = self._env_of(target)
            grad_ys = []
            for y, ct in zip(ys, cotangents, strict=True):
                if not isinstance(ct, (Tensor, Variable)):
                    ct = np.asarray(ct, dtype=y.dtype)
                ct = target.to_tensor(ct)
                check_gradient(ct, y, f"{self.what}: the cotangent",
                               "the output it is for")
                p = self.graph.add_input(ct.type)
                env[id(p)] = ct
                grad_ys.append(p)
        with self.graph.as_default():
            return backprop(self.graph.operations[: self._n_forward], ys, self.inputs, grad_ys,
                            unconnected_gradients="zero")

    def then(self, build: Callable):
        """Run `build()` with the nested graph current (to add ops after the forward)."""
        with self.graph.as_default():
            return build()

    # -- copying into the current graph ------------------------------------------------------

    def _env_of(self, graph: FuncGraph) -> dict:
        entry = self._env.get(id(graph))
        if entry is None or entry[0] is not graph:
            entry = (graph, {})
            self._env[id(graph)] = entry
        return entry[1]

    def _known(self, t, target: FuncGraph):
        """The tensor of `target` standing for nested-graph tensor `t`, if there is one yet."""
        env = self._env_of(target)
        found = env.get(id(t))
        if found is not None:
            return found
        g = target.outer
        while g is not None:
            entry = self._env.get(id(g))
            if entry is not None and entry[0] is g and id(t) in entry[1]:
                found = target.to_tensor(entry[1][id(t)])
                env[id(t)] = found
                return found
            g = g.outer
        if t.op is None:  # a capture of the nested graph: the value it captured
            for external, placeholder in self.graph.captures:
                if placeholder is t:
                    found = target.to_tensor(external)
                    env[id(t)] = found
                    return found
            raise UsageError(
                f"{self.what}: an input of the differentiated function is used outside the "
                f"trace it belongs to"
            )
        return None

    def emit(self, tensors: Sequence) -> list:
        """The current graph's tensors for nested-graph `tensors` (other values unchanged).

        A product with a literal one (the seed of a gradient, broadcast) is not copied: its
        other operand stands for it. That is sound here because the nested graph's sources
        are its inputs, never its constants.
        """
        target = state.graph
        env = self._env_of(target)
        todo: dict[int, Any] = {}
        stack = [t for t in tensors if isinstance(t, GraphTensor) and t.graph is self.graph]
        while stack:
            t = stack.pop()
            if self._known(t, target) is not None or id(t.op) in todo:
                continue
            todo[id(t.op)] = t.op
            alias = self._alias(t.op)
            stack.extend(t.op.inputs if alias is None else [alias])
        if len(self._order) != len(self.graph.operations):
            self._order = {id(op): i for i, op in enumerate(self.graph.operations)}
        for op in sorted(todo.values(), key=lambda op: self._order[id(op)]):
            alias = self._alias(op)
            if alias is not None:
                env[id(op.outputs[0])] = self._known(alias, target)
                continue
            inputs = [self._known(t, target) for t in op.inputs]
            if op.primitive is constant_p:
                outputs = [target.constant(op.attrs["value"].value, op.attrs.get("weak", False))]
            else:
                # Types are re-inferred: an input may have been replaced by a tensor that
                # differs in weakness only (an alias, or an outer graph's weak scalar).
                types = op.primitive.infer([t.type for t in inputs], op.attrs)
                new = target.add_operation(op.primitive, inputs, op.attrs, types, op.source)
                new.grad_override = op.grad_override
                for tape in state.tapes:
                    tape.record(new)
                outputs = new.outputs
            for old, out in zip(op.outputs, outputs, strict=True):
                env[id(old)] = out
        return [self._known(t, target) if isinstance(t, GraphTensor) and t.graph is self.graph
                else target.to_tensor(t) if isinstance(t, GraphTensor) else t for t in tensors]

    def _alias(self, op):
        """For `mul(one, x)` / `mul(x, one)` with a literal one and x of the result's type, x."""
        if op.primitive is not ops.mul_p:
            return None
        out = op.outputs[0]
        for one, other in (op.inputs, op.inputs[::-1]):
            if (_is_literal_one(one) and tuple(other.shape) == tuple(out.shape)
                    and other.dtype == out.dtype):
                return other
        return None


def _is_literal_one(t) -> bool:
    """Whether `t` is a constant 1, possibly broadcast."""
    while t.op is not None:
        if t.op.primitive is constant_p:
            v = t.op.attrs["value"].value
            return v.ndim == 0 and v == 1
        if t.op.primitive is not ops.broadcast_in_dim_p:
            return False
        t = t.op.inputs[0]
    return False


def split_aux(what: str, result):
    """`(out, aux)` from what a has_aux function returned; TypeError if it is no pair."""
    if not (isinstance(result, (tuple, list)) and len(result) == 2):
        length = f" of length {len(result)}" if isinstance(result, (tuple, list)) else ""
        raise ArgumentTypeError(
            f"{what} with has_aux=True: the function must return a pair (output, aux), but "
            f"it returned a {type(result).__name__}{length}"
        )
    return result[0], result[1]


def _check_differentiable(what: str, t, argnum: int) -> None:
    if not dtypes.is_differentiable(t.dtype):
        raise DTypeError(
            f"{what}: argument {argnum} has a leaf of dtype {t.dtype.name}; only float and "
            "complex arguments can be differentiated (convert it with .astype(float), or leave it out "
            f"of argnums)"
        )


def normalize_argnums(argnums, nargs: int, what: str) -> tuple[int, ...]:
    """argnums as a tuple of non-negative positions (an int gives a 1-tuple)."""
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    if not nums:
        raise InvalidArgumentError(f"{what}: argnums must not be empty")
    out = []
    for i in nums:
        if not isinstance(i, int) or not -nargs <= i < nargs:
            raise ArgumentTypeError(
                f"{what}: argnums={argnums!r} but the function was called with {nargs} "
                "positional arguments"
            )
        out.append(i % nargs)
    if len(set(out)) != len(out):
        raise InvalidArgumentError(f"{what}: argnums {argnums!r} repeats an argument")
    return tuple(out)


def _scalar_output(what: str, lin: Linearization, out, holomorphic: bool = False):
    if not isinstance(out, (Tensor, Variable, np.ndarray, np.generic, float, int, complex)):
        raise ArgumentTypeError(
            f"{what}: the function must return a scalar, got {type(out).__name__}"
        )
    out = lin.to_tensor(out)
    if out.shape != ():
        raise ShapeError(
            f"{what}: the function must return a scalar (rank 0), got shape "
            f"{shape_str(out.shape)}; use tg.vjp or tg.jacobian for non-scalar outputs"
        )
    if not dtypes.is_differentiable(out.dtype):
        raise DTypeError(
            f"{what}: the function must return a float scalar, got {out.dtype.name}"
        )
    if holomorphic:
        wrong = [t.dtype.name for t in [out, *lin.inputs] if not dtypes.is_complex(t.dtype)]
        if wrong:
            raise DTypeError(f"{what} with holomorphic=True needs complex arguments and a "
                             f"complex output; got {', '.join(sorted(set(wrong)))}")
    elif dtypes.is_complex(out.dtype):
        raise DTypeError(
            f"{what}: the function returns a complex scalar; a gradient needs a real one "
            "(take tnp.real, tnp.abs ... of it), or pass holomorphic=True for the complex "
            "derivative of a holomorphic function")
    return out


def _split_grads(lin: Linearization, grads: list, single: bool):
    """Flat gradients back in the structure of the differentiated arguments."""
    out, k = [], 0
    for treedef in lin.arg_treedefs:
        n = tree.num_leaves(treedef)
        out.append(tree.unflatten(treedef, grads[k:k + n]))
        k += n
    return out[0] if single else tuple(out)


def value_and_grad_inline(fn, args, kwargs, argnums, has_aux, what="value_and_grad",
                          want_value=True, holomorphic=False):
    """`(value, grads)` (`((value, aux), grads)` with has_aux) of `fn(*args, **kwargs)`,
    emitted into the current graph."""
    nums = normalize_argnums(argnums, len(args), what)
    lin = Linearization(fn, args, kwargs, nums, what)
    out, aux = lin.split_aux() if has_aux else (lin.result, None)
    out = _scalar_output(what, lin, out, holomorphic)
    grads = lin.pullback([out])
    if holomorphic:  # the gradient of the real part is conj(df/dz)
        grads = [None if g is None else lin.then(lambda g=g: ops.conj(g)) for g in grads]
    aux_leaves, aux_def = tree.flatten(aux)
    wanted = ([out] if want_value else []) + aux_leaves + grads
    emitted = lin.emit(wanted)
    value = emitted.pop(0) if want_value else None
    aux = tree.unflatten(aux_def, emitted[:len(aux_leaves)])
    g = _split_grads(lin, emitted[len(aux_leaves):], isinstance(argnums, int))
    if want_value:
        return ((value, aux) if has_aux else value), g
    return (g, aux) if has_aux else g


def grad_inline(fn, args, kwargs, argnums, has_aux, holomorphic=False):
    """The gradient of scalar `fn` (`(grads, aux)` with has_aux), emitted inline."""
    return value_and_grad_inline(fn, args, kwargs, argnums, has_aux, "grad", want_value=False,
                                 holomorphic=holomorphic)


def is_static_value(x) -> bool:
    """Whether primal `x` is a Python value that is no number or array (a bool, a str, a
    callable...): transforms pass it as it is, as tg.function does, and its gradient is
    None."""
    leaves = tree.flatten(x)[0]
    return bool(leaves) and all(
        type(leaf) is bool or not isinstance(leaf, _NUMERIC) and not is_foreign_array(leaf)
        for leaf in leaves)


_NUMERIC = (Tensor, Variable, np.ndarray, np.generic, int, float, complex)


def differentiated_positions(primals: tuple) -> tuple[int, ...]:
    """The positions of the primals that are differentiated: all but static values."""
    return tuple(i for i, p in enumerate(primals) if not is_static_value(p))


def _per_primal(n: int, nums: tuple, values: tuple) -> tuple:
    """`values` of the differentiated positions `nums` spread over `n` primals, None at the
    static ones."""
    out = [None] * n
    for i, v in zip(nums, values, strict=True):
        out[i] = v
    return tuple(out)


def vjp_inline(fn, primals, has_aux):
    """`(out, vjp_fn)` (`(out, vjp_fn, aux)` with has_aux) of `fn(*primals)`, emitted inline;
    `vjp_fn(cotangent)` returns one gradient per primal, as a tuple (None for a static
    primal such as a Python bool flag)."""
    primals = tuple(primals)
    nums = differentiated_positions(primals)
    lin = Linearization(fn, primals, {}, nums, "vjp")
    out, aux = lin.split_aux() if has_aux else (lin.result, None)
    out_leaves, out_def = tree.flatten(out)
    out_leaves = [lin.to_tensor(y) for y in out_leaves]
    aux_leaves, aux_def = tree.flatten(aux)
    emitted = lin.emit(out_leaves + aux_leaves)
    out_value = tree.unflatten(out_def, emitted[:len(out_leaves)])

    def vjp_fn(cotangent):
        if state.graph is None:
            raise UsageError(
                "vjp_fn of a tg.vjp taken inside traced code must be called inside that "
                "trace"
            )
        cts, ct_def = tree.flatten(cotangent)
        if ct_def != out_def:
            raise InvalidArgumentError(
                f"vjp_fn: the cotangent is structured as {tree.treedef_str(ct_def)}, but the "
                f"function's output as {tree.treedef_str(out_def)}"
            )
        pairs = [(y, ct) for y, ct in zip(out_leaves, cts, strict=True)
                 if dtypes.is_differentiable(y.dtype)]
        grads = lin.pullback([y for y, _ in pairs], [ct for _, ct in pairs])
        return _per_primal(len(primals), nums, _split_grads(lin, lin.emit(grads), False))

    if has_aux:
        return out_value, vjp_fn, tree.unflatten(aux_def, emitted[len(out_leaves):])
    return out_value, vjp_fn


def tangent_leaves(what: str, primals: tuple, tangents: tuple) -> tuple[tuple, list]:
    """`(nums, leaves)`: the differentiated positions of the (non-empty) `primals` and the
    leaves of their `tangents`, which must be structured like them (the tangent of a static
    primal is ignored)."""
    if not primals:
        raise InvalidArgumentError(f"{what}: needs at least one primal")
    nums = differentiated_positions(primals)
    if len(tangents) == len(primals):
        primals, tangents = [primals[i] for i in nums], [tangents[i] for i in nums]
    _, p_def = tree.flatten(primals)
    t_leaves, t_def = tree.flatten(tangents)
    if p_def != t_def:
        raise InvalidArgumentError(
            f"{what}: tangents structured as {tree.treedef_str(t_def)} do not match primals "
            f"structured as {tree.treedef_str(p_def)}"
        )
    return nums, t_leaves


def tangent_tensors(what: str, lin: Linearization, t_leaves: list) -> list:
    """The tangents as tensors of the current graph, each checked against its primal."""
    target = state.graph
    out = []
    for t, p in zip(t_leaves, lin.inputs, strict=True):
        t = target.to_tensor(t)
        check_gradient(t, p, f"{what}: the tangent", "its primal")
        out.append(t)
    return out


def hvp_inline(fn, primals, tangents):
    """Hessian-vector products of scalar `fn` at `primals` along `tangents` (one per primal,
    a tuple), by reverse-over-reverse: the gradient of `<grad fn(primals), tangents>`."""
    primals, tangents = tuple(primals), tuple(tangents)
    nums, t_leaves = tangent_leaves("hvp", primals, tangents)
    lin = Linearization(fn, primals, {}, nums, "hvp")
    out = _scalar_output("hvp", lin, lin.result)
    grads = lin.pullback([out])
    target = state.graph
    env = lin._env_of(target)
    tangent_inputs = tangent_tensors("hvp", lin, t_leaves)

    def inner():
        terms = []
        for g, t in zip(grads, tangent_inputs, strict=True):
            placeholder = lin.graph.add_input(t.type)
            env[id(placeholder)] = t
            axes = tuple(range(g.ndim))
            terms.append(ops.reduce_sum(ops.mul(g, placeholder), axes=axes))
        total = terms[0]
        for term in terms[1:]:
            total = ops.add(total, term)
        return backprop(lin.graph.operations, [total], lin.inputs, unconnected_gradients="zero")

    hv = lin.emit(lin.then(inner))
    return _per_primal(len(primals), nums, _split_grads(lin, hv, False))
