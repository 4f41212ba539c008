"""The seeds' eager gradient API: `implicit_val_and_grad`, `implicit_grad`,
`gradients_function`, `val_and_grad_function` and `make_vjp`, built on tape recordings.

Each runs the function once while a private tape records, then differentiates the
recording: with respect to the trainable Variables the function read (`implicit_*`) or
to chosen positional arguments (`params`, by position or by name).
"""

from __future__ import annotations

import inspect

from tracegrad.core import tree
from tracegrad.core.variables import Variable
from tracegrad.errors import InvalidArgumentError, TracegradIndexError, UsageError
from tracegrad.transforms.custom import fresh
from tracegrad.transforms.tape import Recording, as_output_gradient, as_tensor, recording


def _name(f) -> str:
    return getattr(f, "__name__", repr(f))


def _returned_none(f):
    return InvalidArgumentError(
        "Cannot differentiate a function that returns None; did you forget to return a "
        f"value from {_name(f)}?"
    )


def _targets(tape: Recording, result) -> list:
    return [tape.read_variable(y) if isinstance(y, Variable) else as_tensor(y)
            for y in tree.flatten(result)[0]]


def implicit_val_and_grad(f):
    """`f` -> a function returning `(f(*args), [(gradient, variable), ...])`: the gradient of
    `f`'s value (summed if it returns several tensors) with respect to every trainable
    Variable it read, in the variables' creation order.

    >>> w = tg.Variable(3.0)
    >>> value, grads_and_vars = tg.implicit_val_and_grad(lambda x: w * x)(2.0)
    >>> grads_and_vars[0][0].numpy()
    2.0

    Raises ValueError if `f` returns None or reads no trainable Variable.
    """

    def grad_fn(*args, **kwargs):
        tape = Recording()
        with recording(tape):
            end_node = f(*args, **kwargs)
            if end_node is None:
                raise _returned_none(f)
        variables = tape.watched_variables()
        if not variables:
            raise InvalidArgumentError(
                "No trainable variables were accessed while the function was being computed."
            )
        grads = tape.gradient(_targets(tape, end_node), list(variables))
        return end_node, list(zip(grads, variables, strict=True))

    return grad_fn


def implicit_grad(f):
    """`f` -> a function returning `[(gradient, variable), ...]` for the trainable Variables
    `f` read (see `implicit_val_and_grad`)."""

    def grad_fn(*args, **kwargs):
        return implicit_val_and_grad(f)(*args, **kwargs)[1]

    return grad_fn


def _parameter_positions(f, params, args) -> list[int]:
    """The positions in `args` of the parameters of `f` to differentiate."""
    try:
        names = inspect.getfullargspec(f).args
    except TypeError as e:
        if params is None:
            return list(range(len(args)))
        if all(isinstance(p, int) for p in params):
            return list(params)
        raise InvalidArgumentError(
            f"Either callable provided is not a function or could not inspect its arguments "
            f"by name: {f}. Original error: {e}"
        ) from None
    if names and names[0] == "self":
        names = names[1:]
    if params is None:
        return list(range(len(names) if names else len(args)))
    if all(isinstance(p, str) for p in params):
        missing = [p for p in params if p not in names]
        if missing:
            raise InvalidArgumentError(f"params {missing} are not parameters of {_name(f)}{names}")
        return [names.index(p) for p in params]
    if all(isinstance(p, int) for p in params):
        return list(params)
    raise InvalidArgumentError(f"params must be all strings or all integers; got {params}.")


def make_vjp(f, params=None, persistent=True):
    """`f` -> a function returning `(f(*args), vjp)`, where `vjp(dy=None)` is the list of
    vector-Jacobian products of `dy` (default: ones) with `f` w.r.t. each of `params`
    (positions or names of `f`'s parameters; all of them by default, `self` excluded).
    The same tensor passed for two parameters is differentiated for each independently.

    >>> result, vjp = tg.make_vjp(lambda x: x * x)(tg.constant(3.0))
    >>> result.numpy(), vjp()[0].numpy()
    (9.0, 6.0)

    The seed's checks, in its order: `params` that do not fit `f` raise ValueError;
    keyword arguments are refused (ValueError; the seed asserts); a parameter to
    differentiate that the call does not pass raises IndexError; `f` returning None raises
    ValueError. With `persistent=False`, `vjp` can be called once (RuntimeError).
    """

    def decorated(*args, **kwargs):
        positions = _parameter_positions(f, params, args)
        if kwargs:
            raise InvalidArgumentError("The gradient function can't take keyword arguments.")
        tape = Recording(persistent=persistent)
        args = list(args)
        sources = []
        seen = set()
        for i in positions:
            if not -len(args) <= i < len(args):
                raise TracegradIndexError(
                    f"make_vjp: parameter {i} of {_name(f)} is to be differentiated, but the "
                    f"call passes {len(args)} positional argument(s); pass it, or leave it "
                    "out of params"
                )
            t = as_tensor(args[i])
            # A copy made before anything is watched is a separate source.
            args[i] = fresh(t) if id(t) in seen else t
            seen.add(id(args[i]))
            sources.append(args[i])
        with recording(tape):
            for t in sources:
                tape.watch_tensor(t)
            result = f(*args)
            if result is None:
                raise _returned_none(f)
            flat, treedef = tree.flatten(result)
            flat = [fresh(y) for y in _targets(tape, flat)]
            result = tree.unflatten(treedef, flat)
        calls = [0]

        def vjp(dy=None):
            if calls[0] and not persistent:
                raise UsageError(
                    "this vjp was made with persistent=False and can be called only once"
                )
            calls[0] += 1
            dys = None if dy is None else [
                as_output_gradient(d) for d in tree.flatten(dy, is_leaf=lambda d: d is None)[0]
            ]
            return tape.gradient(flat, sources, dys)

        return result, vjp

    return decorated


def val_and_grad_function(f, params=None):
    """`f` -> a function returning `(f(*args), [gradient per param])`; it accepts `dy=` to
    weight `f`'s outputs (a vector-Jacobian product). See `make_vjp` for `params`.

    >>> f = lambda x, y: x * x * x * y - x * y * y
    >>> value, (dx, dy) = tg.val_and_grad_function(f)(2.0, 3.0)
    >>> value.numpy(), dx.numpy(), dy.numpy()
    (6.0, 27.0, -4.0)

    Raises ValueError for keyword arguments other than `dy`.
    """

    def decorated(*args, **kwargs):
        dy = kwargs.pop("dy", None)
        if kwargs:
            raise InvalidArgumentError(
                "Functions to be differentiated cannot receive keyword arguments."
            )
        value, vjp = make_vjp(f, params)(*args)
        return value, vjp(dy=dy)

    return decorated


def gradients_function(f, params=None):
    """`f` -> a function returning the list of gradients of `f` w.r.t. `params` (see
    `val_and_grad_function`); differentiable again for higher orders.

    >>> f = lambda x, y: x * x * x * y - x * y * y
    >>> grad_fn = tg.gradients_function(f)
    >>> [g.numpy() for g in grad_fn(2.0, 3.0)]
    [27.0, -4.0]
    >>> tg.gradients_function(lambda x, y: grad_fn(x, y)[0])(2.0, 3.0)[0].numpy()
    36.0
    """

    def decorated(*args, **kwargs):
        return val_and_grad_function(f, params)(*args, **kwargs)[1]

    return decorated

