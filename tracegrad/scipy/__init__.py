"""SciPy's APIs over tracegrad: `tracegrad.scipy.linalg` (decompositions and solvers with
gradients), `tracegrad.scipy.special` (special functions), `tracegrad.scipy.stats`
(distributions),
`tracegrad.scipy.optimize` (SciPy's minimizers driven by compiled
derivatives) and `tracegrad.scipy.signal` (convolutions)."""

from tracegrad.scipy import linalg, optimize, signal, special, stats

__all__ = ["linalg", "optimize", "signal", "special", "stats"]
