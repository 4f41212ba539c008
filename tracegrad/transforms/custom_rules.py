"""JAX's extension points: `tg.custom_vjp` (a function with its own reverse-mode rule,
`f.defvjp(fwd, bwd)`) and `tg.custom_jvp` (its own forward-mode rule, `f.defjvp(rule)`).

Both end in the `custom_gradient` boundary op, like `tg.custom_gradient`, so every
transform meets them: `grad`, `vjp`, tapes and `tg.gradients` call the reverse rule; `jvp`
and `jacobian` in forward mode differentiate it again (forward mode is the transpose of
reverse mode, docs/autodiff.md); `vmap` batches its graph. A custom_jvp rule reaches
reverse mode transposed: the rule is linear in the tangents, so the reverse rule is the
gradient of `<rule's tangent out, cotangent>` with respect to the tangents.
"""

from __future__ import annotations

import abc
import functools
import inspect

from tracegrad import ops
from tracegrad.core import dtypes, tree
from tracegrad.core.state import state
from tracegrad.errors import InvalidArgumentError, NotDifferentiableError, UsageError
from tracegrad.ops.custom import REVERSE_ONLY, custom_gradient_p
from tracegrad.transforms.autodiff import RegisterGradient
from tracegrad.transforms.custom import _call_custom, bind_with_rule, fresh
from tracegrad.transforms.tape import GradientTape, as_tensor

__all__ = ["custom_vjp", "custom_jvp"]


class _Custom(abc.ABC):
    """A function with a rule of its own; `nondiff_argnums` are passed to the rule first
    and get no gradient."""

    _kind = ""
    _setter = ""  # the call that sets the rule

    @abc.abstractmethod
    def _has_rule(self) -> bool:
        """Whether the rule has been set."""

    @abc.abstractmethod
    def _apply(self, nondiff: dict, diff: tuple):
        """`(output, grad_fn)` for `_call_custom`."""

    def __init__(self, fun, nondiff_argnums=()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self._in_rule = 0  # > 0 while `fwd` runs: calls of the function inside it are plain
        self.nondiff_argnums = tuple(sorted(int(i) for i in nondiff_argnums))
        try:
            self._signature = inspect.signature(fun)
        except (TypeError, ValueError):
            self._signature = None

    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        return functools.partial(self, instance)

    def _positional(self, args, kwargs) -> tuple:
        if not kwargs:
            return args
        if self._signature is None:
            raise InvalidArgumentError(
                f"{self._kind} function {self.__name__}: keyword arguments need a function "
                "whose signature can be read")
        bound = self._signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return bound.args

    def _forward_rule(self, rule, *args):
        """`rule(*args)` with the function's own calls inside it plain: `fwd` computes the
        function's value, as in JAX."""
        self._in_rule += 1
        try:
            return rule(*args)
        finally:
            self._in_rule -= 1

    def _split(self, args):
        for i in self.nondiff_argnums:
            if not -len(args) <= i < len(args):
                raise InvalidArgumentError(
                    f"{self._kind} function {self.__name__}: nondiff_argnums {i} out of range "
                    f"for {len(args)} arguments")
        nondiff = {i % len(args): args[i] for i in self.nondiff_argnums}
        diff = tuple(a for i, a in enumerate(args) if i not in nondiff)
        return nondiff, diff

    @staticmethod
    def _merge(nondiff: dict, diff) -> tuple:
        it = iter(diff)
        return tuple(nondiff[i] if i in nondiff else next(it)
                     for i in range(len(nondiff) + len(diff)))

    def __call__(self, *args, **kwargs):
        if not self._has_rule():
            raise UsageError(f"{self._kind} function {self.__name__} has no rule: call "
                             f"{self.__name__}.{self._setter} first")
        args = self._positional(args, kwargs)
        if self._in_rule or (state.graph is None and not state.tapes):
            # nothing can differentiate this call, or `fwd` calls the function itself
            # (for its primal output, as JAX's examples do): the function's own ops
            return self.fun(*args)
        nondiff, diff = self._split(args)
        def forward(*diff_args):
            return self._apply(nondiff, diff_args)

        forward.__name__ = self.__name__
        forward.reverse_only = isinstance(self, custom_vjp)  # no forward mode, as in JAX
        return _call_custom(forward, diff, {})


def _zeros_for_missing(dys, outs):
    return [ops.zeros_like(as_tensor(y))
            if d is None and dtypes.is_differentiable(_dtype(y)) else d
            for d, y in zip(dys, outs, strict=True)]


def _dtype(x):
    return as_tensor(x).dtype


class custom_vjp(_Custom):  # noqa: N801 (JAX's name)
    """A function with its own reverse-mode rule, as JAX's `jax.custom_vjp`:

    >>> @tg.custom_vjp
    ... def clip_gradient(lo, hi, x):
    ...     return x
    >>> def fwd(lo, hi, x):
    ...     return x, (lo, hi)                       # the output and residuals
    >>> def bwd(res, g):
    ...     lo, hi = res
    ...     return (None, None, tnp.clip(g, lo, hi))  # one cotangent per argument
    >>> clip_gradient.defvjp(fwd, bwd)

    `fwd(*args)` returns `(output, residuals)`; `bwd(*nondiff_args, residuals, cotangent)`
    returns a tuple with one cotangent per differentiated argument, each of that argument's
    structure (`None` for none). Called with nothing to differentiate it, the function
    runs `fun` itself; otherwise `fwd`'s output is the result.
    """

    _kind = "custom_vjp"
    _setter = "defvjp(fwd, bwd)"

    def __init__(self, fun, nondiff_argnums=()):
        super().__init__(fun, nondiff_argnums)
        self.fwd = self.bwd = None

    def defvjp(self, fwd, bwd, symbolic_zeros: bool = False) -> None:
        """Sets the rule: `fwd` computes the output and the residuals `bwd` reads."""
        if symbolic_zeros:
            raise InvalidArgumentError("custom_vjp.defvjp: symbolic_zeros is not supported")
        self.fwd, self.bwd = fwd, bwd

    def _has_rule(self) -> bool:
        return self.fwd is not None

    def _apply(self, nondiff, diff):
        pair = self._forward_rule(self.fwd, *self._merge(nondiff, diff))
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
            raise InvalidArgumentError(
                f"custom_vjp function {self.__name__}: fwd must return a pair "
                f"(output, residuals), got {type(pair).__name__}")
        out, residuals = pair
        outs, out_def = tree.flatten(out)
        fixed = tuple(nondiff[i] for i in sorted(nondiff))

        def grad_fn(*dys):
            dys = [None if d is None else _no_forward_mode(d)
                   for d in _zeros_for_missing(dys, outs)]
            cotangent = tree.unflatten(out_def, dys)
            cts = self.bwd(*fixed, residuals, cotangent)
            if not isinstance(cts, (tuple, list)) or len(cts) != len(diff):
                raise InvalidArgumentError(
                    f"custom_vjp function {self.__name__}: bwd must return a tuple of "
                    f"{len(diff)} cotangents (one per differentiated argument), got "
                    f"{len(cts) if isinstance(cts, (tuple, list)) else type(cts).__name__}")
            return [g for ct, arg in zip(cts, diff, strict=True)
                    for g in _cotangent_leaves(ct, arg, self.__name__)]

        grad_fn.refuses_variables = self._kind
        return out, grad_fn


_NO_FORWARD_MODE = REVERSE_ONLY


def _no_forward_mode(dy):
    """`dy` through an identity whose gradient is an error when forward mode transposes
    the pullback (it differentiates the reverse rule with respect to its cotangent, which
    needs `bwd` linear in it: JAX refuses forward mode of a custom_vjp function too), and
    `dy`'s own gradient otherwise."""
    return bind_with_rule(custom_gradient_p, [as_tensor(dy)], {"num_results": 1},
                          _NO_FORWARD_MODE)[0]


def _refuse_forward_mode(op, *dys):
    if not state.transposing:
        return list(dys)  # reverse over reverse differentiates bwd in its cotangent too
    raise NotDifferentiableError(
        f"custom_vjp at {op.source}: forward-mode differentiation (jvp, a forward-mode "
        "jacobian) of a custom_vjp function is not defined, as in JAX: its bwd need not be "
        "linear in the cotangent; give the function a custom_jvp rule instead")


RegisterGradient(_NO_FORWARD_MODE)(_refuse_forward_mode)


def _is_none(x) -> bool:
    return x is None


def _cotangent_leaves(ct, arg, name) -> list:
    """One cotangent (or None) per leaf of `arg` as `tree.flatten` gives them."""
    arg_leaves, arg_def = tree.flatten(arg, is_leaf=_is_none)
    if ct is None:
        return [None] * sum(a is not None for a in arg_leaves)
    ct_leaves, ct_def = tree.flatten(ct, is_leaf=_is_none)
    if len(ct_leaves) != len(arg_leaves) or not tree.same_structure(ct_def, arg_def):
        raise InvalidArgumentError(
            f"custom_vjp function {name}: bwd returned a cotangent of structure "
            f"{tree.treedef_str(ct_def)} for an argument of structure "
            f"{tree.treedef_str(arg_def)}")
    return [c for c, a in zip(ct_leaves, arg_leaves, strict=True) if a is not None]


class custom_jvp(_Custom):  # noqa: N801 (JAX's name)
    """A function with its own forward-mode rule, as JAX's `jax.custom_jvp`:

    >>> @tg.custom_jvp
    ... def log1pexp(x):
    ...     return tnp.log1p(tnp.exp(x))
    >>> @log1pexp.defjvp
    ... def log1pexp_jvp(primals, tangents):
    ...     (x,), (t,) = primals, tangents
    ...     return log1pexp(x), t * (1 - 1 / (1 + tnp.exp(x)))

    `rule(*nondiff_args, primals, tangents)` (primals and tangents: tuples over the other
    arguments) returns `(output, tangent of the output)`, the tangent linear
    in `tangents` (reverse mode transposes it; linearity is not checked: a rule that is not
    linear in the tangents gives wrong gradients). `defjvps(*fns)` gives one function per
    argument instead, `fn(tangent, output, *primals)`, summed. The output is `fun`'s.
    """

    _kind = "custom_jvp"
    _setter = "defjvp(rule)"

    def __init__(self, fun, nondiff_argnums=()):
        super().__init__(fun, nondiff_argnums)
        self.jvp = None

    def defjvp(self, jvp, symbolic_zeros: bool = False):
        """Sets the rule; returns it (so it can be used as a decorator)."""
        if symbolic_zeros:
            raise InvalidArgumentError("custom_jvp.defjvp: symbolic_zeros is not supported")
        self.jvp = jvp
        return jvp

    def _has_rule(self) -> bool:
        return self.jvp is not None

    def defjvps(self, *jvps) -> None:
        """One rule per differentiated argument, `fn(tangent, output, *primals)` (or None
        for an argument with no tangent contribution); the output tangent is their sum."""
        def rule(*args):
            *fixed, primals, tangents = args
            n = len(fixed) + len(primals)
            nondiff = dict(zip(sorted(i % n for i in self.nondiff_argnums), fixed, strict=True))
            out = self.fun(*self._merge(nondiff, primals))
            total = None
            for fn, t in zip(jvps, tangents, strict=True):
                if fn is None:
                    continue
                part = fn(t, out, *primals)
                total = part if total is None else _tree_add(total, part)
            return out, total

        self.jvp = rule

    def _apply(self, nondiff, diff):
        args = self._merge(nondiff, diff)
        out = self.fun(*args)
        outs = tree.flatten(out)[0]
        fixed = tuple(nondiff[i] for i in sorted(nondiff))

        def grad_fn(*dys):
            leaves, structure = tree.flatten(diff)

            def output_tangents(zeros):
                tangents = tuple(tree.unflatten(structure, zeros))
                pair = self.jvp(*fixed, diff, tangents)
                if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
                    raise InvalidArgumentError(
                        f"custom_jvp function {self.__name__}: the rule must return a pair "
                        f"(output, output tangent), got {type(pair).__name__}")
                t_leaves = tree.flatten(pair[1], is_leaf=_is_none)[0]
                if len(t_leaves) != len(outs):
                    raise InvalidArgumentError(
                        f"custom_jvp function {self.__name__}: the rule's output tangent has "
                        f"{len(t_leaves)} leaves for {len(outs)} outputs")
                return t_leaves

            return transpose_linear(output_tangents, leaves, _zeros_for_missing(dys, outs))

        grad_fn.refuses_variables = self._kind
        return out, grad_fn


def transpose_linear(fn, primals: list, cotangents: list) -> list:
    """The transpose of `fn`, a function linear in a list of tangents (one per tensor of
    `primals`, which give their shapes) returning a list of output tangents (None for
    none): the gradient of `<fn(tangents), cotangents>` in the tangents, taken at zero
    tangents. One gradient per primal, None for those that are not floats."""
    floats = [i for i, x in enumerate(primals) if dtypes.is_differentiable(_dtype(x))]
    # distinct tensors to watch (equal constants may be one tensor in a graph)
    zeros = [fresh(ops.zeros_like(as_tensor(x))) for x in primals]
    with GradientTape() as tape:
        tape.watch([zeros[i] for i in floats])
        outs = fn(zeros)
    pairs = [(t, d) for t, d in zip(outs, cotangents, strict=True)
             if d is not None and t is not None]
    grads = tape.gradient([t for t, _ in pairs], [zeros[i] for i in floats],
                          output_gradients=[d for _, d in pairs],
                          unconnected_gradients="zero") if pairs else []
    flat = [None] * len(primals)
    for i, g in zip(floats, grads, strict=True):
        flat[i] = g
    return flat


def _tree_add(a, b):
    la, da = tree.flatten(a)
    lb, _ = tree.flatten(b)
    return tree.unflatten(da, [x + y for x, y in zip(la, lb, strict=True)])
