"""The exceptions and warnings tracegrad raises (`tg.errors`).

Every message names the op and the user's file:line that created it, and suggests
the fix when there is one.
"""


class TracegradError(Exception):
    """Base class of every tracegrad error."""


class ShapeError(TracegradError, ValueError):
    """Operand shapes do not fit the op (also: `grad` of a non-scalar output)."""


class DTypeError(TracegradError, TypeError):
    """Operand dtypes do not fit the op, or a dtype tracegrad does not support."""


class UnsupportedOpError(TracegradError, NotImplementedError):
    """A NumPy function or feature that tracegrad does not provide."""


class NotDifferentiableError(TracegradError, LookupError):
    """An op on the path being differentiated has no gradient rule."""


class TracerBoolError(TracegradError, TypeError):
    """Python control flow (`if`, `while`, `bool()`, `int()`) on a traced value."""


class RetracingWarning(UserWarning):
    """One function has been traced for many different input signatures."""


class GraphParseError(TracegradError, ValueError):
    """Text or JSON that is not a well-formed FuncGraph (the message gives the line)."""


class GraphVerificationError(TracegradError):
    """A FuncGraph that breaks the IR's rules (`tracegrad.core.verify`); names the op."""
