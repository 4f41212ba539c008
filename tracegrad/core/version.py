"""The tracegrad version (`tg.__version__`), checked where compiled functions travel between
processes."""

__version__ = "0.1.0"
