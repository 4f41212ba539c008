"""SciPy's APIs over tracegrad: `tracegrad.scipy.linalg` (decompositions and solvers with
gradients) and `tracegrad.scipy.optimize` (SciPy's minimizers driven by compiled
derivatives)."""

from tracegrad.scipy import linalg, optimize

__all__ = ["linalg", "optimize"]
