"""The exceptions and warnings tracegrad raises (`tg.errors`).

Every error raised for a user's mistake is a `TracegradError` and also the Python type
callers of NumPy and TensorFlow catch (`ShapeError` is a `ValueError`, the tape's "used
twice" a `RuntimeError`, ...). Every message names the user's file:line — the base class
appends it, "(at file.py:LINE)", when the message does not name it yet — and the op, and
suggests the fix when there is one.
"""


class TracegradError(Exception):
    """Base class of every tracegrad error."""

    #: `() -> "file.py:LINE"` of the user's code that is running. `tracegrad.core.source`
    #: installs its `user_location` here (this module sits below core and imports nothing).
    locate = staticmethod(lambda: "<unknown>")

    def __init__(self, message="", *args):
        location = self.locate()
        if isinstance(message, str) and location != "<unknown>" and location not in message:
            message = f"{message} (at {location})"
        super().__init__(message, *args)

    def __str__(self):  # not KeyError's quoting of its message
        return str(self.args[0]) if len(self.args) == 1 else super().__str__()


class ShapeError(TracegradError, ValueError):
    """Operand shapes do not fit the op (also: `grad` of a non-scalar output)."""


class DTypeError(TracegradError, TypeError):
    """Operand dtypes do not fit the op, or a dtype tracegrad does not support."""


class UnsupportedOpError(TracegradError, NotImplementedError):
    """A NumPy function or feature that tracegrad does not provide."""


class VectorizationError(UnsupportedOpError, ValueError):
    """An op that vectorization (`vmap`, `pfor`, the vectorized Jacobians) cannot batch;
    also a `ValueError`, as TensorFlow's pfor raises. The message names the switch to the
    sequential loop (`use_pfor=False`, `experimental_use_pfor=False`, `tg.for_loop`)."""


class NotDifferentiableError(TracegradError, LookupError):
    """An op on the path being differentiated has no gradient rule."""


class TracerBoolError(TracegradError, TypeError):
    """Python control flow (`if`, `while`, `bool()`, `int()`) on a traced value."""


class InvalidArgumentError(TracegradError, ValueError):
    """An argument of the right kind with a value that does not fit: an unknown option,
    mismatched structures or counts, an object `GradientTape.watch` cannot watch; also the
    seed's tape-state ValueErrors (entering a recording tape, pausing one that is not)."""


class ArgumentTypeError(TracegradError, TypeError):
    """An argument of the wrong kind: `grad` of a function returning a tuple, a `None`
    gradient target, a structure where one array is needed."""


class UsageError(TracegradError, RuntimeError):
    """An API used where or when it cannot be: a non-persistent tape used twice,
    `tg.gradients` called eagerly, a tape that is not recording."""


class TracegradIndexError(TracegradError, IndexError):
    """An index out of bounds, or more indices than the array has axes."""


class RegistryError(TracegradError, KeyError):
    """A name registered twice (`tg.RegisterGradient`), or not registered."""


class ZeroStepError(TracegradError, ZeroDivisionError):
    """`tnp.arange` with a step of zero (NumPy raises ZeroDivisionError)."""


class CompileMemoryError(TracegradError, MemoryError):
    """The numba backend ran out of memory compiling a kernel (the function then runs on
    the numpy backend, with a warning saying so)."""

    locate = staticmethod(lambda: "<unknown>")  # raised in the compile thread: no user line


class RetracingWarning(UserWarning):
    """One function has been traced for many different input signatures."""


class FrozenRandomWarning(UserWarning):
    """A NumPy random function called while a function is traced: its numbers are drawn
    once and frozen into the graph (use `tracegrad.random` with a key argument)."""


class GraphParseError(TracegradError, ValueError):
    """Text or JSON that is not a well-formed FuncGraph (the message gives the line)."""


class GraphVerificationError(TracegradError):
    """A FuncGraph that breaks the IR's rules (`tracegrad.core.verify`); names the op."""
