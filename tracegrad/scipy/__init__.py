"""SciPy's APIs over tracegrad: `tracegrad.scipy.optimize` (minimizers driven by compiled
derivatives)."""

from tracegrad.scipy import optimize

__all__ = ["optimize"]
