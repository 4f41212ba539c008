"""One error hierarchy: every error the public API raises for a user's mistake is a
`tg.errors.TracegradError`, is also the Python type the API (and the seeds) name, and
names the user's line.

One row per error path: the call that must raise (a lambda on one line, which is the line
the message must name), the Python type, and the tracegrad class."""

import os
import warnings

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tracegrad import errors
from tracegrad.core.state import state
from tracegrad.function import compile_graph

X = tg.constant(np.array([1.0, 2.0]))
V = tg.Variable(np.array([1, 2], np.int64), name="V")  # assigned by the rows that fail


# -- tapes in the states the rows need ---------------------------------------------------------


def entered_tape(persistent=False):
    """A tape that is recording (entered, not exited)."""
    g = tg.GradientTape(persistent=persistent)
    g.__enter__()
    return g


def tape_of_square(x=X, persistent=False):
    """(tape, x, x * x): a finished recording, not used yet."""
    with tg.GradientTape(persistent=persistent) as g:
        g.watch(x)
        y = x * x
    return g, x, y


def used_tape():
    g, x, y = tape_of_square()
    g.gradient(y, x)
    return g, x, y


def rows_tape():
    return tape_of_square(tg.constant(np.ones((2, 3))))


def variable_target_inside_persistent_tape():
    v = tg.Variable(2.0)
    g = entered_tape(persistent=True)
    return g, v


@tg.custom_gradient
def two_gradients_for_one_input(x):
    return x * 2.0, lambda dy: (dy, dy)


@tg.custom_gradient
def no_grad_fn(x):
    return x * 2.0


def returns_none(x):
    return None


class Case:
    def __init__(self, call, python_type, tracegrad_type):
        self.call = call
        self.python_type = python_type
        self.tracegrad_type = tracegrad_type
        self.line = call.__code__.co_firstlineno

    def __repr__(self):
        return f"line {self.line}"


E = errors
CASES = [
    # GradientTape: the seed's conditions
    Case(lambda: (lambda g, x, y: g.gradient(y, x))(*used_tape()), RuntimeError, E.UsageError),
    Case(lambda: entered_tape().__enter__(), ValueError, E.InvalidArgumentError),
    Case(lambda: entered_tape().gradient(None, X), TypeError, E.ArgumentTypeError),
    Case(lambda: (lambda g, v: g.gradient(v, v))(*variable_target_inside_persistent_tape()),
         ValueError, E.InvalidArgumentError),
    Case(lambda: (lambda g, x, y: g.gradient(y, x, unconnected_gradients="zeros"))(*tape_of_square()),  # noqa: E501
         ValueError, E.InvalidArgumentError),
    Case(lambda: (lambda g, x, y: g.gradient(y, "x"))(*tape_of_square()),
         TypeError, E.ArgumentTypeError),
    Case(lambda: entered_tape().watch("x"), ValueError, E.InvalidArgumentError),
    Case(lambda: tg.GradientTape().watch(X), RuntimeError, E.UsageError),
    Case(lambda: tg.GradientTape().stop_recording().__enter__(), RuntimeError, E.UsageError),
    Case(lambda: tape_of_square()[0].stop_recording().__enter__(), ValueError,
         E.InvalidArgumentError),
    Case(lambda: tg.GradientTape().reset(), ValueError, E.InvalidArgumentError),
    Case(lambda: (lambda g, x, y: g.jacobian(y, x, experimental_use_pfor=False))(*tape_of_square()),  # noqa: E501
         RuntimeError, E.UsageError),
    Case(lambda: (lambda g, x, y: g.batch_jacobian(y, x))(*tape_of_square()),
         ValueError, E.ShapeError),
    Case(lambda: (lambda g, x, y: g.batch_jacobian(y, x, parallel_iterations=2))(*rows_tape()),
         RuntimeError, E.UsageError),
    # tg.gradients / tg.hessians
    Case(lambda: tg.gradients(X * X, [X]), RuntimeError, E.UsageError),
    Case(lambda: tg.hessians(X * X, [X]), RuntimeError, E.UsageError),
    Case(lambda: tg.function(lambda x: tg.hessians(tnp.sum(x * 0.0 + 1.0), [x * 2.0]))(np.ones(2)),  # noqa: E501
         ValueError, E.InvalidArgumentError),
    Case(lambda: tg.function(lambda x: tg.gradients([x * 2.0], [x], grad_ys=[x, x]))(np.ones(2)),
         ValueError, E.InvalidArgumentError),
    Case(lambda: tg.function(lambda x: tg.gradients(x * 2.0, [x], unconnected_gradients="0"))(1.0),  # noqa: E501
         ValueError, E.InvalidArgumentError),
    # functional transforms
    Case(lambda: tg.grad(lambda x: (x, x))(1.0), TypeError, E.ArgumentTypeError),
    Case(lambda: tg.grad(lambda x: x * 2.0)(np.ones(3)), ValueError, E.ShapeError),
    Case(lambda: tg.grad(lambda x: x * 2.0)(np.int64(3)), TypeError, E.DTypeError),
    Case(lambda: tg.grad(lambda x: x * 2.0, has_aux=True)(1.0), TypeError, E.ArgumentTypeError),
    Case(lambda: tg.grad(lambda x: x * 2.0, argnums=3)(1.0), TypeError, E.ArgumentTypeError),
    Case(lambda: tg.grad(lambda x, y: x * y, argnums=(0, 0))(1.0, 2.0), ValueError,
         E.InvalidArgumentError),
    Case(lambda: tg.grad(tg.function(lambda x, n: x * n, static_argnums=1), argnums=1),
         ValueError, E.InvalidArgumentError),
    Case(lambda: tg.vjp(lambda x: x * 2.0, np.arange(3)), TypeError, E.DTypeError),
    Case(lambda: tg.vjp(lambda x: x * 2.0, np.ones(2))[1]((np.ones(2),)), ValueError,
         E.InvalidArgumentError),
    Case(lambda: tg.jvp(lambda x: x * 2.0, (np.ones(2),), (np.ones(2), np.ones(2))), ValueError,
         E.InvalidArgumentError),
    Case(lambda: tg.hvp(lambda x: x * 2.0, (), ()), ValueError, E.InvalidArgumentError),
    Case(lambda: tg.jacobian(lambda x: x * 2.0, mode="forward")(np.ones(2)), ValueError,
         E.InvalidArgumentError),
    Case(lambda: tg.batch_jacobian(lambda x: x * 2.0)(np.ones(3)), ValueError, E.ShapeError),
    Case(lambda: tg.batch_jacobian(lambda x: x[0] * 2.0)((np.ones((2, 2)), np.ones((2, 2)))),
         TypeError, E.ArgumentTypeError),
    Case(lambda: tg.vmap(lambda x: x * 2.0, in_axes=2)(np.ones(3)), ValueError,
         E.InvalidArgumentError),
    Case(lambda: tg.vmap(lambda x: x * 2.0, in_axes=None)(np.ones(3)), ValueError,
         E.InvalidArgumentError),
    Case(lambda: tg.pfor(lambda i: i * 2, 2.5), TypeError, E.ArgumentTypeError),
    Case(lambda: tg.pfor(lambda i: i * 2, -1), ValueError, E.InvalidArgumentError),
    # the seeds' function-wrapping API
    Case(lambda: tg.implicit_grad(returns_none)(1.0), ValueError, E.InvalidArgumentError),
    Case(lambda: tg.implicit_grad(lambda x: x * 2.0)(1.0), ValueError, E.InvalidArgumentError),
    Case(lambda: tg.gradients_function(lambda x: x * 2.0)(1.0, k=1), ValueError,
         E.InvalidArgumentError),
    Case(lambda: tg.make_vjp(lambda x, y=1.0: x * y)(1.0), IndexError, E.TracegradIndexError),
    Case(lambda: tg.make_vjp(lambda x: x, params=[0, "x"])(1.0), ValueError,
         E.InvalidArgumentError),
    Case(lambda: tg.make_vjp(lambda x: x, params=["z"])(1.0), ValueError,
         E.InvalidArgumentError),
    Case(lambda: (lambda vjp: (vjp(), vjp()))(tg.make_vjp(lambda x: x * 2.0, persistent=False)(1.0)[1]),  # noqa: E501
         RuntimeError, E.UsageError),
    # custom gradients and gradient overrides
    Case(lambda: no_grad_fn(X), TypeError, E.ArgumentTypeError),
    Case(lambda: tg.grad(lambda x: tnp.sum(two_gradients_for_one_input(x)))(np.ones(2)),
         ValueError, E.InvalidArgumentError),
    Case(lambda: tg.RegisterGradient(3), TypeError, E.ArgumentTypeError),
    Case(lambda: tg.RegisterGradient("test_error_hierarchy.identity")(lambda op, g: [g]),
         KeyError, E.RegistryError),
    Case(lambda: tg.gradient_override_map({"Sin": "x"}).__enter__(), ValueError,
         E.InvalidArgumentError),
    Case(lambda: tg.convert_to_tensor(tg.IndexedSlices(X, tg.constant(np.array([0, 1])), None)),
         ValueError, E.InvalidArgumentError),
    # tracing and tracegrad.numpy
    Case(lambda: tg.function(lambda x: x if x > 0 else -x)(1.0), TypeError, E.TracerBoolError),
    Case(lambda: tg.function(lambda x: x + np.ones(3))(np.ones(2)), ValueError, E.ShapeError),
    Case(lambda: tg.function(lambda x: x[5])(np.ones(3)), IndexError, E.TracegradIndexError),
    Case(lambda: tg.function(lambda x: x[1::0])(np.ones(3)), ValueError, E.InvalidArgumentError),
    Case(lambda: tg.function(lambda x, i: tnp.take(x, i), backend="numpy")(np.ones(3), np.array([7])),  # noqa: E501
         IndexError, E.TracegradIndexError),  # found when the op runs
    Case(lambda: tg.function(lambda x: x + tnp.arange(0, 1, 0))(1.0), ZeroDivisionError,
         E.ZeroStepError),
    Case(lambda: tg.function(lambda x: tnp.concatenate(x))(np.ones(2)), TypeError,
         E.ArgumentTypeError),
    Case(lambda: tg.function(lambda x: np.busday_count(x, x))(np.ones((2, 2))), NotImplementedError,
         E.UnsupportedOpError),
    Case(lambda: len(tg.constant(1.0)), TypeError, E.ArgumentTypeError),
    Case(lambda: tg.function(lambda x, i: tnp.take(x, i), backend="numba")(np.ones(3), np.array([7])),  # noqa: E501
         IndexError, E.TracegradIndexError),  # in the kernel
    # tg.function's arguments, signatures and concrete functions
    Case(lambda: tg.function(42), TypeError, E.ArgumentTypeError),
    Case(lambda: tg.function(lambda x: x, backend="gpu"), ValueError, E.InvalidArgumentError),
    Case(lambda: compile_graph(tg.trace(lambda x: x * 2.0)(1.0), "gpu"), ValueError,
         E.InvalidArgumentError),
    Case(lambda: tg.function(lambda x: x, input_signature=[3]), TypeError, E.ArgumentTypeError),
    Case(lambda: tg.function(lambda x: x, static_argnums=3), ValueError, E.InvalidArgumentError),
    Case(lambda: tg.function(max, static_argnums=-1), ValueError, E.InvalidArgumentError),
    Case(lambda: tg.function(lambda x: x, static_argnames="y"), ValueError,
         E.InvalidArgumentError),
    Case(lambda: tg.function(lambda x: x)(1.0, y=2.0), TypeError, E.ArgumentTypeError),
    Case(lambda: tg.function(lambda x, s: x, static_argnums=1)(1.0, [1]), TypeError,
         E.ArgumentTypeError),
    Case(lambda: tg.function(lambda x: x)(tg.TensorSpec([2])), TypeError, E.ArgumentTypeError),
    Case(lambda: tg.function(lambda x: x, input_signature=[tg.TensorSpec([2])])((X, X)),
         TypeError, E.ArgumentTypeError),
    Case(lambda: tg.function(lambda x: x, input_signature=[tg.TensorSpec([2])])("a"), TypeError,
         E.ArgumentTypeError),
    Case(lambda: tg.function(lambda x: x).get_concrete_function(1.0)((1.0, 2.0)), TypeError,
         E.ArgumentTypeError),
    Case(lambda: tg.function(lambda x, s: x).get_concrete_function(1.0, "a")(1.0, "b"), TypeError,
         E.ArgumentTypeError),
    # Variable updates, eager and inside tg.function
    Case(lambda: tg.Variable([1.0, 2.0]).assign([1.0, 2.0, 3.0]), ValueError, E.ShapeError),
    Case(lambda: tg.Variable(np.ones(2, np.float32)).assign(np.ones(2)), TypeError, E.DTypeError),
    Case(lambda: tg.function(lambda x: V.assign_add(x) and x)(np.ones(3)), ValueError,
         E.ShapeError),
    Case(lambda: tg.function(lambda x: V.assign(x * 0.5) and x)(np.ones(2, np.int64)), TypeError,
         E.DTypeError),
    Case(lambda: tg.function(lambda x: tg.cond(x > 0, lambda: V.assign_sub(x) and x, lambda: x))(1.0),  # noqa: E501
         NotImplementedError, E.UnsupportedOpError),
    Case(lambda: tg.grad(lambda x: tnp.sum(V.assign([x, x]) * x))(1.0), NotImplementedError,
         E.UnsupportedOpError),
]


def test_every_row_is_on_its_own_line():
    lines = [c.line for c in CASES]
    assert len(set(lines)) == len(lines)


tg.RegisterGradient("test_error_hierarchy.identity")(lambda op, g: [g])


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_error_is_a_tracegrad_error_of_the_python_type_naming_the_users_line(case):
    tapes = list(state.tapes)
    try:
        with pytest.raises(Exception) as info, warnings.catch_warnings():  # noqa: PT011
            warnings.simplefilter("ignore")  # a persistent tape used inside its context
            case.call()
    finally:
        state.tapes[:] = tapes  # the rows' tapes that stayed entered
    e = info.value
    assert type(e) is case.tracegrad_type, f"{type(e).__name__}: {e}"
    assert isinstance(e, errors.TracegradError)
    assert isinstance(e, case.python_type)
    where = f"{os.path.basename(__file__)}:{case.line}"
    assert where in str(e), str(e)


def test_the_hierarchy_pairs_each_class_with_its_python_type():
    pairs = {
        errors.ShapeError: ValueError, errors.DTypeError: TypeError,
        errors.UnsupportedOpError: NotImplementedError, errors.NotDifferentiableError: LookupError,
        errors.TracerBoolError: TypeError, errors.InvalidArgumentError: ValueError,
        errors.ArgumentTypeError: TypeError, errors.UsageError: RuntimeError,
        errors.TracegradIndexError: IndexError, errors.RegistryError: KeyError,
        errors.ZeroStepError: ZeroDivisionError, errors.GraphParseError: ValueError,
        errors.VectorizationError: ValueError,
    }
    for cls, python_type in pairs.items():
        assert issubclass(cls, errors.TracegradError) and issubclass(cls, python_type)
    assert issubclass(errors.VectorizationError, errors.UnsupportedOpError)


def test_a_message_names_the_users_line_once():
    with pytest.raises(errors.ShapeError) as info:
        tg.grad(lambda x: x * 2.0)(np.ones(3))
    assert str(info.value).count(os.path.basename(__file__)) == 1
    assert str(errors.RegistryError("no such name")).startswith("no such name")  # unquoted
