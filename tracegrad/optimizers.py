"""Gradient-descent optimizers: `sgd` (momentum, Nesterov), `adam`, `adamw`, `rmsprop`,
`adagrad`, with optax's update rules and defaults.

Each optimizer works in two forms that share its rule:

- functional, on any tree of parameters: `state = opt.init(params)`, then
  `params, state = opt.update(grads, state, params)` — the state is a tree too, so a whole
  training step (loss, gradient, update) can be one `tg.function`;
- on `tg.Variable`s, as Keras's `apply_gradients`: `opt.apply(grads, variables)` assigns
  the new values (inside a `tg.function`, as traced `assign` ops); the optimizer keeps the
  slots (momenta) of those Variables in Variables of its own.

A learning rate is a number or a schedule: a callable of the step count (0 at the first
update) written with `tracegrad.numpy`, e.g. `lambda step: 0.1 * 0.99 ** step`.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

import tracegrad.numpy as tnp
from tracegrad import tree as _tree
from tracegrad.core.variables import Variable
from tracegrad.eager import convert_to_tensor
from tracegrad.errors import InvalidArgumentError
from tracegrad.transforms.indexed_slices import IndexedSlices

__all__ = ["Optimizer", "OptimizerState", "sgd", "adam", "adamw", "rmsprop", "adagrad"]


class OptimizerState(NamedTuple):
    """The functional form's state: the step `count` (int64) and one tree per slot, each of
    the parameters' structure."""

    count: Any
    slots: dict


# A rule updates one parameter: (g, p, slots of p, lr, count) -> (new p, new slots).
Rule = Callable[..., tuple[Any, dict]]


class Optimizer:
    """An update rule with its slots; see the module docstring for the two ways to use it."""

    def __init__(self, name: str, learning_rate, rule: Rule, slots: dict[str, float]):
        if not callable(learning_rate) and (not isinstance(learning_rate, numbers.Real)
                                            or isinstance(learning_rate, bool)):
            raise InvalidArgumentError(
                f"{name}: learning_rate must be a number or a callable of the step count, "
                f"got {type(learning_rate).__name__}")
        self.name = name
        self.learning_rate = learning_rate
        self._rule = rule
        self._slot_init = slots  # slot name -> initial value
        self._variable_slots: dict[int, tuple[Variable, dict[str, Variable]]] = {}
        self._count: Variable | None = None

    def __repr__(self):
        return f"<tg.optimizers.{self.name} learning_rate={self.learning_rate!r}>"

    def _lr(self, count, dtype):
        lr = self.learning_rate(count) if callable(self.learning_rate) else self.learning_rate
        if dtype is None or type(lr) in (int, float):  # Python numbers are weak
            return lr
        return tnp.astype(lr, dtype)

    def _step(self, g, p, slots, count):
        return self._rule(g, p, slots, self._lr(count, getattr(p, "dtype", None)), count)

    # -- functional -----------------------------------------------------------------------

    def init(self, params) -> OptimizerState:
        """The state before the first update: count 0, every slot at its initial value."""
        slots = {name: _tree.map(lambda p, v=value: tnp.full_like(p, v), params)
                 for name, value in self._slot_init.items()}
        return OptimizerState(np.zeros((), np.int64), slots)

    def update(self, grads, state: OptimizerState, params) -> tuple[Any, OptimizerState]:
        """`(new params, new state)` after one step with `grads` (a tree of the params'
        structure; a `None` gradient leaves its parameter and slots as they are)."""
        p_leaves, structure = _tree.flatten(params, is_leaf=_is_none)
        g_leaves = _leaves_like(grads, structure, "grads", self.name)
        names = list(self._slot_init)
        slot_leaves = [_leaves_like(state.slots[n], structure, f"state slot {n!r}", self.name)
                       for n in names]
        new_p, new_slots = [], [[] for _ in names]
        for i, (g, p) in enumerate(zip(g_leaves, p_leaves, strict=True)):
            slots = {n: column[i] for n, column in zip(names, slot_leaves, strict=True)}
            if g is not None and p is not None:
                p, slots = self._step(_dense(g), p, slots, state.count)
            new_p.append(p)
            for column, n in zip(new_slots, names, strict=True):
                column.append(slots[n])
        new_state = OptimizerState(
            state.count + 1,
            {n: structure.unflatten(c) for n, c in zip(names, new_slots, strict=True)})
        return structure.unflatten(new_p), new_state

    # -- on Variables ---------------------------------------------------------------------

    def apply(self, grads, variables) -> None:
        """Update each Variable of `variables` with its gradient in `grads` (two lists of one
        length; a `None` gradient skips its Variable), as Keras's `apply_gradients`."""
        grads, variables = list(grads), list(variables)
        if len(grads) != len(variables):
            raise InvalidArgumentError(
                f"{self.name}.apply: {len(grads)} gradients for {len(variables)} variables")
        if self._count is None:
            self._count = Variable(np.zeros((), np.int64), trainable=False,
                                   name=f"{self.name}/count")
        count = self._count.value()
        for g, v in zip(grads, variables, strict=True):
            if not isinstance(v, Variable):
                raise InvalidArgumentError(
                    f"{self.name}.apply: expects tg.Variables, got {type(v).__name__}")
            if g is None:
                continue
            slot_vars = self._slots_of(v)
            slots = {n: s.value() for n, s in slot_vars.items()}
            new_p, new_slots = self._step(_dense(g), v.value(), slots, count)
            for n, s in slot_vars.items():
                s.assign(new_slots[n])
            v.assign(new_p)
        self._count.assign_add(1)

    def _slots_of(self, v: Variable) -> dict[str, Variable]:
        found = self._variable_slots.get(id(v))
        if found is None or found[0] is not v:
            slots = {n: Variable(np.full(v.shape, value, v.dtype), trainable=False,
                                 name=f"{v.name}/{self.name}/{n}")
                     for n, value in self._slot_init.items()}
            found = self._variable_slots[id(v)] = (v, slots)
        return found[1]

    def variables(self) -> list[Variable]:
        """The optimizer's own Variables: the step count and every slot made so far."""
        out = [self._count] if self._count is not None else []
        for _, slots in self._variable_slots.values():
            out.extend(slots.values())
        return out


def _is_none(x) -> bool:
    return x is None


def _leaves_like(tree, structure, what, name):
    """The leaves of `tree`, which must have the params' structure (`None` a leaf)."""
    leaves, got = _tree.flatten(tree, is_leaf=_is_none)
    if got != structure:
        raise InvalidArgumentError(
            f"{name}.update: {what} has structure {got!r}, not the params' {structure!r}")
    return leaves


def _dense(g):
    return convert_to_tensor(g) if isinstance(g, IndexedSlices) else g


def _bias_corrected(moment, decay, t):
    return moment / tnp.astype(1 - decay ** t, moment.dtype)


# -- the optimizers ----------------------------------------------------------------------------


def sgd(learning_rate, momentum: float | None = None, nesterov: bool = False) -> Optimizer:
    """Stochastic gradient descent: `p -= lr * g`; with `momentum` m, a trace
    `t = g + m * t` and `p -= lr * t` (`lr * (g + m * t)` with `nesterov`)."""
    if momentum is None:
        return Optimizer("sgd", learning_rate, lambda g, p, s, lr, count: (p - lr * g, s), {})

    def rule(g, p, s, lr, count):
        trace = g + momentum * s["trace"]
        step = g + momentum * trace if nesterov else trace
        return p - lr * step, {"trace": trace}

    return Optimizer("sgd", learning_rate, rule, {"trace": 0.0})


def _square(g):
    """`|g|^2`: `g ** 2`, and `g * conj(g)` (real values, in g's dtype) for complex `g`, so
    that complex parameters take the steps of their real and imaginary parts' magnitude."""
    return g * tnp.conj(g) if tnp.iscomplexobj(g) else g ** 2


def _adam_step(g, s, count, b1, b2, eps, eps_root, nesterov):
    mu = (1 - b1) * g + b1 * s["mu"]
    nu = (1 - b2) * _square(g) + b2 * s["nu"]
    t = count + 1
    if nesterov:
        mu_hat = b1 * _bias_corrected(mu, b1, t + 1) + (1 - b1) * _bias_corrected(g, b1, t)
    else:
        mu_hat = _bias_corrected(mu, b1, t)
    nu_hat = _bias_corrected(nu, b2, t)
    return mu_hat / (tnp.sqrt(nu_hat + eps_root) + eps), {"mu": mu, "nu": nu}


def adam(learning_rate, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
         eps_root: float = 0.0, *, nesterov: bool = False) -> Optimizer:
    """Adam: bias-corrected moving averages of the gradient and its square,
    `p -= lr * mu_hat / (sqrt(nu_hat + eps_root) + eps)` (NAdam with `nesterov`)."""
    def rule(g, p, s, lr, count):
        step, s = _adam_step(g, s, count, b1, b2, eps, eps_root, nesterov)
        return p - lr * step, s

    return Optimizer("adam", learning_rate, rule, {"mu": 0.0, "nu": 0.0})


def adamw(learning_rate, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
          eps_root: float = 0.0, weight_decay: float = 1e-4, *,
          nesterov: bool = False) -> Optimizer:
    """Adam with decoupled weight decay: `p -= lr * (adam step + weight_decay * p)`."""
    def rule(g, p, s, lr, count):
        step, s = _adam_step(g, s, count, b1, b2, eps, eps_root, nesterov)
        return p - lr * (step + weight_decay * p), s

    return Optimizer("adamw", learning_rate, rule, {"mu": 0.0, "nu": 0.0})


def rmsprop(learning_rate, decay: float = 0.9, eps: float = 1e-8, initial_scale: float = 0.0,
            centered: bool = False, momentum: float | None = None,
            nesterov: bool = False) -> Optimizer:
    """RMSProp: `g / sqrt(nu + eps)` with `nu` a moving average of `g**2` (minus the
    squared moving average of `g` when `centered`), scaled by `lr`, then a momentum
    trace as `sgd`'s when `momentum` is given."""
    slots = {"nu": initial_scale}
    if centered:
        slots["mu"] = 0.0
    if momentum is not None:
        slots["trace"] = 0.0

    def rule(g, p, s, lr, count):
        new = {"nu": (1 - decay) * _square(g) + decay * s["nu"]}
        var = new["nu"]
        if centered:
            new["mu"] = (1 - decay) * g + decay * s["mu"]
            var = var - _square(new["mu"])
        step = lr * (g / tnp.sqrt(var + eps))
        if momentum is not None:
            new["trace"] = step + momentum * s["trace"]
            step = step + momentum * new["trace"] if nesterov else new["trace"]
        return p - step, new

    return Optimizer("rmsprop", learning_rate, rule, slots)


def adagrad(learning_rate, initial_accumulator_value: float = 0.1,
            eps: float = 1e-7) -> Optimizer:
    """Adagrad: `p -= lr * g / sqrt(sum of g**2 so far + eps)` (0 where that sum is 0)."""
    def rule(g, p, s, lr, count):
        total = _square(g) + s["sum_of_squares"]
        scale = tnp.where(total > 0, 1 / tnp.sqrt(total + eps), 0.0)
        return p - lr * (scale * g), {"sum_of_squares": total}

    return Optimizer("adagrad", learning_rate, rule,
                     {"sum_of_squares": initial_accumulator_value})
