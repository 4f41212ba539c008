"""SciPy's APIs over tracegrad: `tracegrad.scipy.linalg` (decompositions and solvers with
gradients), `tracegrad.scipy.special` (special functions), `tracegrad.scipy.stats`
(distributions) and
`tracegrad.scipy.optimize` (SciPy's minimizers driven by compiled
derivatives)."""

from tracegrad.scipy import linalg, optimize, special, stats

__all__ = ["linalg", "optimize", "special", "stats"]
