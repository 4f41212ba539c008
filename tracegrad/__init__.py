"""tracegrad: trace NumPy-style Python into graphs, differentiate them, compile them."""

from tracegrad import errors
from tracegrad import numpy  # noqa: F401  (installs Tensor operators and NumPy dispatch)
from tracegrad import nn  # noqa: F401
from tracegrad import extend, optimizers, random, tree
from tracegrad.core.ir import FuncGraph, Tensor
from tracegrad.core.types import TensorSpec
from tracegrad.core.version import __version__  # noqa: F401
from tracegrad.core.variables import Variable
from tracegrad.function import (
    ConcreteFunction, Function, compiled_source, config, function, trace, wait_for_compiles,
)
from tracegrad.passes import optimize
from tracegrad.eager import constant, convert_to_tensor
from tracegrad.autodiff import (
    batch_jacobian, for_loop, grad, hessian, hvp, jacobian, jvp, pfor, value_and_grad, vjp, vmap,
)
from tracegrad.derivatives import elementwise_grad, fixed_point, linear_transpose, linearize
from tracegrad.transforms.autodiff import (
    RegisterGradient, UnconnectedGradients, gradient_override_map, gradients, hessians,
    stop_gradient,
)
from tracegrad.transforms.control_flow import cond, fori_loop, scan, while_loop
from tracegrad.transforms.custom import custom_gradient, grad_pass_through, recompute_grad
from tracegrad.transforms.custom_rules import custom_jvp, custom_vjp
from tracegrad.transforms.eager_api import (
    gradients_function, implicit_grad, implicit_val_and_grad, make_vjp, val_and_grad_function,
)
from tracegrad.transforms.indexed_slices import IndexedSlices
from tracegrad.transforms.tape import GradientTape


__all__ = [
    "errors", "extend", "optimizers", "random", "tree",
    "FuncGraph", "Tensor", "TensorSpec", "Variable", "ConcreteFunction", "Function",
    "config", "function", "trace", "wait_for_compiles", "constant", "convert_to_tensor",
    "optimize", "compiled_source",
    "grad", "value_and_grad", "vjp", "hvp", "jvp", "jacobian", "batch_jacobian", "hessian",
    "vmap", "pfor", "for_loop", "cond", "while_loop", "fori_loop", "scan", "gradients", "hessians", "stop_gradient",
    "RegisterGradient", "gradient_override_map", "UnconnectedGradients",
    "GradientTape", "IndexedSlices", "custom_gradient", "recompute_grad", "grad_pass_through",
    "custom_vjp", "custom_jvp", "elementwise_grad", "linearize", "linear_transpose",
    "fixed_point",
    "implicit_val_and_grad", "implicit_grad", "gradients_function", "val_and_grad_function",
    "make_vjp",
]
