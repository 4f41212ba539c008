"""tracegrad: trace NumPy-style Python into graphs, differentiate them, compile them."""

from tracegrad import errors
from tracegrad import numpy  # noqa: F401  (installs Tensor operators and NumPy dispatch)
from tracegrad.core.ir import FuncGraph, Tensor
from tracegrad.core.types import TensorSpec
from tracegrad.core.variables import Variable
from tracegrad.function import (
    ConcreteFunction, Function, compiled_source, config, function, trace,
)
from tracegrad.passes import optimize
from tracegrad.eager import constant, convert_to_tensor

__version__ = "0.1.0"

__all__ = [
    "errors", "FuncGraph", "Tensor", "TensorSpec", "Variable", "ConcreteFunction", "Function",
    "config", "function", "trace", "constant", "convert_to_tensor", "optimize", "compiled_source",
]
