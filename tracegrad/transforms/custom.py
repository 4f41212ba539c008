"""Gradients supplied from outside the ops: `tg.custom_gradient`, `tg.recompute_grad`,
`tg.grad_pass_through`, and compiled `tg.function` calls recorded on tapes as one op.

All of them end in a boundary op (`custom_gradient` or `call`, see `ops/custom.py`) whose
gradient rule is a Python callable attached to the op (`grad_override`), eagerly on the tape
record and inside a trace on the graph operation, so `GradientTape`, `tg.gradients` and the
functional transforms all meet the same rule through `backprop`.
"""

from __future__ import annotations

import functools
import inspect
import types
import warnings

import numpy as np

from tracegrad.core import dtypes, tree
from tracegrad.core import parser
from tracegrad.core.ir import EagerTensor, FuncGraph, GraphTensor, Operation
from tracegrad.core.source import user_location
from tracegrad.core.state import state
from tracegrad.core.types import TensorType
from tracegrad.core.variables import Variable
from tracegrad.errors import ArgumentTypeError, InvalidArgumentError, NotDifferentiableError
from tracegrad.ops.custom import call_p, custom_gradient_p
from tracegrad.passes import Rewriter
from tracegrad.transforms.autodiff import RegisterGradient
from tracegrad.transforms.backprop import backprop
from tracegrad.transforms.tape import (
    GradientTape,
    VariableWatcher,
    as_tensor,
    inline_recorded,
    stop_recording,
)


def bind_with_rule(prim, inputs, attrs, rule):
    """Apply `prim` (multiple results) to `inputs` with `rule` (a callable, or a name
    registered with `tg.RegisterGradient`) as the gradient of this op."""
    if state.graph is not None:
        outs = prim.bind(*inputs, **attrs)
        outs[0].op.grad_override = rule
        return outs
    outs = tuple(EagerTensor(np.asarray(o)) for o in prim.impl(
        *[t._value for t in inputs], **attrs))
    if state.tapes:
        op = Operation(prim, inputs, attrs, user_location(), None, rule)
        op.outputs = outs
        for tape in state.tapes:
            tape.record(op)
    return outs


def fresh(x):
    """`x` as a new tensor with the same value and an identity gradient (a separate source
    on a tape even when `x` is used elsewhere)."""
    return custom_gradient_p.bind(as_tensor(x), num_results=1)[0]


# -- custom_gradient -------------------------------------------------------------------------


class _Decorated:
    """`impl(f, args, kwargs)` as a callable that also binds as a method (self is bound to
    `f` before `impl` sees the arguments, so it is never differentiated)."""

    def __init__(self, f, impl):
        self._f = f
        self._impl = impl
        functools.update_wrapper(self, f)

    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        return _Decorated(self._f.__get__(instance, owner), self._impl)

    def __call__(self, *args, **kwargs):
        return self._impl(self._f, args, kwargs)


def custom_gradient(f=None):
    """Decorator giving `f` a gradient of your own: `f(*x)` returns `(y, grad_fn)`.

    `y` is a tensor or structure of tensors; `grad_fn(*dys)` receives one upstream gradient
    per flattened `y` and returns one gradient (or None) per flattened positional input
    `x`. If `f` reads trainable Variables that are not among its inputs, `grad_fn` must
    accept `variables=` (the list of those variables, in creation order) and return
    `(input_grads, variable_grads)` with one gradient per variable. Keyword arguments
    are passed to `f` but receive no gradient. Works eagerly, under GradientTapes,
    inside `tg.function` and with `tg.grad`; `grad_fn` may itself be differentiable or
    decorated (higher-order custom gradients).

    >>> @tg.custom_gradient
    ... def log1pexp(x):
    ...     e = tnp.exp(x)
    ...     def grad(dy):
    ...         return dy * (1 - 1 / (1 + e))
    ...     return tnp.log(1 + e), grad
    >>> x = tg.constant(100.0)
    >>> with tg.GradientTape() as g:
    ...     g.watch(x)
    ...     y = log1pexp(x)
    >>> g.gradient(y, x).numpy()
    1.0
    """
    if f is None:
        return custom_gradient
    return _Decorated(f, _call_custom)


def _variables_parameter(grad_fn) -> tuple[bool, bool]:
    """(accepts `variables=`, names `variables` explicitly)."""
    try:
        params = inspect.signature(grad_fn).parameters.values()
    except (TypeError, ValueError):
        return True, False
    named = any(p.name == "variables" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
                for p in params)
    return named or any(p.kind is p.VAR_KEYWORD for p in params), named


def _call_custom(f, args, kwargs):
    name = getattr(f, "__name__", "f")
    flat_args, args_tree = tree.flatten(args)
    if state.graph is not None:  # f sees tensors of the graph, as the gradient rule does
        flat_args = [as_tensor(a) for a in flat_args]
        args = tree.unflatten(args_tree, flat_args)
    with VariableWatcher() as watcher:
        out = f(*args, **kwargs)
    _check_pair(out, name)
    result, grad_fn = out
    given = flat_args + list(kwargs.values())
    variables = [v for v in watcher.watched_variables() if all(v is not a for a in given)]
    accepts, named = _variables_parameter(grad_fn)
    refuses = getattr(grad_fn, "refuses_variables", None)  # a custom_vjp / custom_jvp rule
    if variables and not accepts and refuses is None:
        raise ArgumentTypeError(
            "@tg.custom_gradient grad_fn must accept keyword argument 'variables', since "
            f"function {name} uses variables: {[v.name for v in variables]}"
        )
    if named and not variables:
        warnings.warn(
            f"@tg.custom_gradient grad_fn of {name} has 'variables' in its signature, but "
            "no trainable Variables were read on the forward pass", UserWarning, stacklevel=3,
        )
    flat_result, out_tree = tree.flatten(result)
    if not flat_result:
        raise InvalidArgumentError(f"@tg.custom_gradient: {name} returned no outputs")
    ys = [as_tensor(y) for y in flat_result]
    xs = [as_tensor(a) for a in flat_args]
    reads = [v.value() for v in variables]
    call = _GradFnCall(name, grad_fn, len(xs), variables, refuses)
    if state.graph is None:
        outs = bind_with_rule(custom_gradient_p, [*ys, *xs, *reads],
                              {"num_results": len(ys)}, call.eager_rule)
    else:
        operands = [*ys, *xs, *reads]
        operands += closure_tensors(grad_fn, state.graph, operands)
        rule = DeferredGradient(call, operands, getattr(f, "reverse_only", False))
        outs = bind_with_rule(custom_gradient_p, operands, {"num_results": len(ys)}, rule)
    return tree.unflatten(out_tree, outs)


def closure_tensors(fn, graph: FuncGraph, known) -> list:
    """The tensors of `graph` (or of the graphs enclosing it) that `fn` closes over, other
    than `known`: in its closure cells and defaults, through lists, tuples, dicts, nested
    functions and `functools.partial`s, in the order met."""
    found = {id(t): None for t in known}
    order = []
    seen = set()
    stack = [fn]
    while stack:
        v = stack.pop()
        if isinstance(v, GraphTensor):
            if id(v) not in found and (v.graph is graph or v.graph.is_ancestor_of(graph)):
                found[id(v)] = v
                order.append(v)
            continue
        if id(v) in seen:
            continue
        seen.add(id(v))
        if isinstance(v, (list, tuple, set, frozenset)):
            stack.extend(reversed(list(v)))
        elif isinstance(v, dict):
            stack.extend(reversed(list(v.values())))
        elif isinstance(v, types.FunctionType):
            cells = []
            for cell in v.__closure__ or ():
                try:
                    cells.append(cell.cell_contents)
                except ValueError:  # a cell not yet assigned
                    pass
            stack.extend(reversed([*cells, *(v.__defaults__ or ()),
                                   *(v.__kwdefaults__ or {}).values()]))
        elif isinstance(v, functools.partial):
            stack.extend(reversed([v.func, *v.args, *v.keywords.values()]))
        elif isinstance(v, types.MethodType):
            stack.append(v.__func__)
    return order


def _check_pair(out, name: str) -> None:
    if not (isinstance(out, (tuple, list)) and len(out) == 2 and callable(out[1])):
        raise ArgumentTypeError(
            f"@tg.custom_gradient: {name} must return a pair (outputs, grad_fn), got "
            f"{type(out).__name__}"
        )


class _GradFnCall:
    """Calls a user's `grad_fn` and checks its answer: one gradient per flattened input,
    and with `variables=` one per variable."""

    def __init__(self, name, grad_fn, n_inputs, variables, refuses=None):
        self.name = name
        self.grad_fn = grad_fn
        self.n_inputs = n_inputs
        self.variables = variables
        self.refuses = refuses  # a rule with no variables= (custom_vjp, custom_jvp): its kind

    def needed_variables(self, op) -> list:
        """The variables read by `op`'s function whose gradient is asked for."""
        skip = getattr(op, "skip_input_indices", None) or ()
        first = op.attrs["num_results"] + self.n_inputs
        return [v for j, v in enumerate(self.variables) if first + j not in skip]

    def __call__(self, dys, where: str, needed=()) -> list:
        """`[*input_grads, *variable_grads]`, each a tensor or None; `needed` are the
        variables whose gradients are asked for."""
        name, variables = self.name, self.variables
        if variables and self.refuses:
            if needed:
                raise NotDifferentiableError(
                    f"{self.refuses} function {name} reads trainable Variables "
                    f"{[v.name for v in needed]} that are not among its arguments, and its "
                    "rule gives gradients for its arguments only (JAX refuses to "
                    "differentiate with respect to a closed-over value too): pass them as "
                    f"arguments ({where})")
            input_grads, variable_grads = self.grad_fn(*dys), [None] * len(variables)
        elif variables:
            out = self.grad_fn(*dys, variables=list(variables))
            if not (isinstance(out, (tuple, list)) and len(out) == 2):
                raise InvalidArgumentError(
                    f"@tg.custom_gradient grad_fn of {name} is called with variables= and "
                    f"must return a pair (input_grads, variable_grads) ({where})"
                )
            input_grads, variable_grads = out
            variable_grads = list(variable_grads)
            if len(variable_grads) != len(variables):
                raise InvalidArgumentError(
                    "Must return gradient for each variable from @custom_gradient grad_fn "
                    f"(grad_fn of {name} returned {len(variable_grads)} for "
                    f"{len(variables)} variables; {where})."
                )
        else:
            input_grads, variable_grads = self.grad_fn(*dys), []
        flat = tree.flatten(input_grads, is_leaf=lambda g: g is None)[0]
        if len(flat) != self.n_inputs:
            raise InvalidArgumentError(
                f"custom_gradient function {name} expected to return {self.n_inputs} "
                f"gradients but returned {len(flat)} instead ({where})."
            )
        return [None if g is None else as_tensor(g) for g in [*flat, *variable_grads]]

    def eager_rule(self, op, *dys):
        """The gradient rule of an eagerly recorded custom_gradient op."""
        n = op.attrs["num_results"]
        return [None] * n + self(dys, f"op at {op.source}", self.needed_variables(op))


class DeferredGradient:
    """The gradient rule of a traced custom_gradient op: the user's `grad_fn`, traced into
    the graph being differentiated only when a gradient is asked for (so it may call its
    own function, and what it builds is differentiated in turn).

    `operands` are the op's operands as traced: results, inputs, variable reads, then the
    tensors of the forward pass `grad_fn` closes over. Where the op was copied (into a
    gradient, batched or optimized graph) the copy's operands stand for them while
    `grad_fn` runs."""

    serialized_as = "custom_gradient.deferred"  # read back: a gradient that says why not

    def __init__(self, call: _GradFnCall, operands: list, reverse_only: bool):
        self.call = call
        self.operands = operands
        self.reverse_only = reverse_only  # a custom_vjp rule: no forward mode

    def __repr__(self):
        return f"<deferred gradient of {self.call.name}>"

    def __call__(self, op, *dys):
        n = op.attrs["num_results"]
        grads = self.run(list(op.inputs), list(dys), f"op at {op.source}",
                         self.call.needed_variables(op))
        return [None] * n + grads + [None] * (len(op.inputs) - n - len(grads))

    def run(self, operands: list, dys: list, where: str, needed=()) -> list:
        """`grad_fn` on the result gradients `dys` in the current graph, `operands`
        standing for the op's operands: one gradient (or None) per input and variable
        (`needed`: the variables whose gradients are asked for)."""
        saved = state.stand_ins
        state.stand_ins = {**saved, **{id(o): (o, t) for o, t in zip(
            self.operands, operands, strict=True) if o is not t}}
        try:
            dys = [d if dtypes.is_differentiable(t.dtype) else None
                   for d, t in zip(dys, operands, strict=False)]
            return self.call(dys, where, needed)
        finally:
            state.stand_ins = saved

    def batched(self, what: str) -> DeferredGradient:
        """The rule of the op batched by `vmap` (`what` names the transform)."""
        return _BatchedGradient(self, what)

    def materialized(self, op) -> Operation:
        """`op` with its gradient function traced now into a `grad_graph` attribute (the
        form that serializes): inputs one gradient per floating-point result, then the
        op's operands as residuals. Gradient functions it calls stay deferred."""
        n = op.attrs["num_results"]
        graph = FuncGraph(f"{self.call.name}_grad", outer=op.graph)
        with graph.as_default():
            dys = [graph.add_input(t.type.strong(), f"dy{i}")
                   if dtypes.is_differentiable(t.dtype) else None
                   for i, t in enumerate(op.inputs[:n])]
            residuals = [graph.add_input(t.type, f"r{i}") for i, t in enumerate(op.inputs)]
            grads = self.run(residuals, dys, f"op at {op.source}")
            graph.outputs = [graph.to_tensor(g) for g in grads if g is not None]
        for external, _ in graph.captures:
            if not isinstance(external, Variable):
                raise InvalidArgumentError(
                    f"to_json: the gradient function of {self.call.name} (op at {op.source}) "
                    "reads a traced tensor that is not in its closure; it cannot be "
                    "written out")
        mask = tuple(g is not None for g in grads)
        new = Operation(custom_gradient_p, [*op.inputs[:n + len(mask)], *op.inputs],
                        {"num_results": n, "grad_graph": graph, "gradient_mask": mask},
                        op.source, op.graph, GRAD_GRAPH_RULE)
        new.outputs = op.outputs
        return new


class _BatchedGradient(DeferredGradient):
    """A deferred gradient rule under `vmap`: traced for one example when a gradient is
    asked for, then batched over the examples (all operands batched on axis 0)."""

    def __init__(self, inner: DeferredGradient, what: str):
        self.inner = inner
        self.what = what
        self.call = inner.call
        self.reverse_only = inner.reverse_only

    def run(self, operands: list, dys: list, where: str, needed=()) -> list:
        from tracegrad.ops._batching import bdim_at
        from tracegrad.transforms.vectorize import Vectorizer

        graph = FuncGraph(f"{self.call.name}_grad", outer=state.graph)
        with graph.as_default():
            ins = [graph.add_input(TensorType(tuple(t.shape[1:]), t.dtype, t.type.weak))
                   for t in operands]
            cts = [None if d is None else graph.add_input(ins[i].type.strong())
                   for i, d in enumerate(dys)]
            grads = self.inner.run(ins, cts, where, needed)
            graph.outputs = [graph.to_tensor(g) for g in grads if g is not None]
        fed = [*operands, *[d for d in dys if d is not None]]
        outs, dims = Vectorizer(self.what).run(graph, fed, [0] * len(fed))
        outs = iter([bdim_at(x, d, 0, operands[0], 0) for x, d in zip(outs, dims, strict=True)])
        return [None if g is None else next(outs) for g in grads]


GRAD_GRAPH_RULE = "custom_gradient.grad_graph"  # registered name: graphs keep it in JSON


@RegisterGradient(GRAD_GRAPH_RULE)
def _inline_grad_graph(op, *dys):
    """The gradient rule of a traced custom_gradient op: its `grad_graph` attribute inlined
    into the graph being built, fed the result gradients and the residual operands."""
    n, mask = op.attrs["num_results"], op.attrs["gradient_mask"]
    residuals = op.inputs[n + len(mask):]
    dys = [g for g, t in zip(dys, op.outputs, strict=True) if dtypes.is_differentiable(t.dtype)]
    outs = iter(inline_recorded(op.attrs["grad_graph"], state.graph, [*dys, *residuals]))
    grads = [next(outs) if present else None for present in mask]
    return [None] * n + grads + [None] * len(residuals)


@RegisterGradient(DeferredGradient.serialized_as)
def _deferred_read_back(op, *dys):
    """The gradient of a custom_gradient op whose gradient function was not written out
    (a graph read back from JSON keeps the first order only)."""
    raise NotDifferentiableError(
        f"custom_gradient op created at {op.source} was read back from JSON without its "
        "gradient function (a graph keeps the gradient functions its custom gradients call "
        "to one order): differentiate the Python function that traced it")


def recompute_grad(f):
    """`f` with its intermediate results forgotten after the forward pass and recomputed
    when the gradient is needed (memory for time). Gradients flow to the positional
    arguments and to the trainable Variables `f` reads.

    >>> layer = tg.recompute_grad(lambda x: tnp.tanh(x) * x)
    """

    @custom_gradient
    def inner(*args, **kwargs):
        with stop_recording():
            result = f(*args, **kwargs)

        def grad_fn(*dresult, **grad_kwargs):
            variables = grad_kwargs.get("variables")
            flat_args, args_tree = tree.flatten(args)
            watched_vars = list(variables or ())
            with GradientTape() as tape:
                copies = [fresh(a) for a in flat_args]
                tape.watch(copies)
                if watched_vars:
                    tape.watch(watched_vars)
                again = f(*tree.unflatten(args_tree, copies), **kwargs)
            grads = tape.gradient(again, copies + watched_vars, output_gradients=list(dresult),
                                  unconnected_gradients="zero")
            n = len(copies)
            return grads[:n] if variables is None else (grads[:n], grads[n:])

        return result, grad_fn

    functools.update_wrapper(inner, f)
    return inner


def grad_pass_through(f):
    """`f` in the forward pass, an identity in the backward pass: the gradient of each
    output goes unchanged to the matching input (Variables `f` touches get none).

    >>> x = tg.Variable(1.0)
    >>> z = tg.Variable(3.0)
    >>> with tg.GradientTape() as tape:
    ...     y = tg.grad_pass_through(x.assign)(z ** 2)   # y is 9.0
    >>> tape.gradient(y, z).numpy()
    6.0
    """

    @custom_gradient
    def passed(*args, **kwargs):
        def grad(*dys, **grad_kwargs):
            variables = grad_kwargs.get("variables")
            if variables is not None:
                return dys, [None] * len(variables)
            return dys

        return f(*args, **kwargs), grad

    functools.update_wrapper(passed, f)
    return passed


# -- tg.function calls on tapes --------------------------------------------------------------


class CompiledCall:
    """A graph called on arrays (the callee of `call` ops): `executor` runs it, compiled by
    `compile_fn(graph)` on first use when None. Its gradient graph is built and compiled
    once, on first use, and is itself a CompiledCall (so every order stays compiled)."""

    def __init__(self, graph: FuncGraph, executor, compile_fn):
        self.graph = graph
        self._executor = executor
        self._compile = compile_fn
        self._backward = None

    def __call__(self, arrays):
        if self._executor is None:
            self._executor = self._compile(self.graph)
        return self._executor(arrays)

    def __repr__(self):
        return f"<CompiledCall @{self.graph.name}>"

    def _gradient(self):
        if self._backward is None:
            graph, wrt, cotangent_of = vjp_graph(self.graph)
            self._backward = (CompiledCall(graph, None, self._compile), wrt, cotangent_of)
        return self._backward

    def vjp(self, op, *out_grads):
        backward, wrt, cotangent_of = self._gradient()
        grads = [None] * len(op.inputs)
        if not wrt:
            return grads
        cts = [out_grads[i] for i in cotangent_of]
        reads = [v.value() for v, _ in backward.graph.captures]  # Variables only rules read
        results = call_p.bind(*op.inputs, *cts, *reads, callee=backward)
        for i, g in zip(wrt, results, strict=True):
            grads[i] = g
        return grads


def _run_reference(graph: FuncGraph):
    from tracegrad.transforms.evaluate import compile_graph

    return compile_graph(graph)


def load_callee(graph: FuncGraph) -> CompiledCall:
    """The callee of the `call` ops of a graph read back from text or JSON: `graph` run by
    the reference interpreter when called eagerly (backends inline it)."""
    return CompiledCall(graph, None, _run_reference)


parser.set_callee_loader(load_callee)


def vjp_graph(forward: FuncGraph):
    """The gradient graph of `forward`: inputs are forward's inputs and captures followed
    by one cotangent per floating-point output; outputs are the gradients of the inputs
    the outputs depend on. Returns (graph, indices of those inputs, indices of the
    outputs that take a cotangent). The forward ops are copied in (recomputed)."""
    graph = FuncGraph(f"{forward.name}_vjp", outer=forward.outer)
    with graph.as_default():
        primals = [graph.add_input(t.type, t.name) for t in forward.all_inputs]
        cotangent_of = [i for i, t in enumerate(forward.outputs)
                        if dtypes.is_differentiable(t.dtype)]
        cts = [graph.add_input(forward.outputs[i].type.strong(), f"ct{i}") for i in cotangent_of]
        env = {id(t): p for t, p in zip(forward.all_inputs, primals, strict=True)}
        for external, placeholder in forward.captures:
            # a Variable read again by a gradient rule is the input that feeds its capture
            graph._capture_map[id(external)] = env[id(placeholder)]
        outputs = Rewriter(forward, target=graph, env=env).run()
        # weak inputs too: called inside a trace, a weakly typed tensor may depend on
        # what is differentiated (eagerly they are Python scalars, which no tape watches)
        candidates = [i for i, p in enumerate(primals) if dtypes.is_differentiable(p.dtype)]
        grads = backprop(graph.operations, [outputs[i] for i in cotangent_of],
                         [primals[i] for i in candidates], cts)
        wrt = [i for i, g in zip(candidates, grads, strict=True) if g is not None]
        graph.outputs = [graph.to_tensor(g) for g in grads if g is not None]
    return graph, wrt, cotangent_of


def make_call_recorder(callee_for):
    """The hook `tg.function` calls when a compiled function runs eagerly while tapes
    record: `record_call(concrete, inputs, results)` (inputs are EagerTensors aligned with
    `concrete.graph.all_inputs`, results with its outputs) records the call as one `call`
    op of `callee_for(concrete)` (a CompiledCall kept by the concrete function, so its
    gradient graph is built once per trace)."""

    def record_call(concrete, inputs, results):
        op = Operation(call_p, inputs, {"callee": callee_for(concrete)}, None, None, None)
        op.outputs = tuple(results)
        for tape in state.tapes:
            tape.record(op)

    return record_call
