"""`tracegrad.scipy`: SciPy's API over tracegrad's primitives (`tracegrad.scipy.linalg`)."""

from tracegrad.scipy import linalg

__all__ = ["linalg"]
