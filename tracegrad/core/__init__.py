"""The IR and its machinery: dtypes, shapes, trees, tensors, graphs, primitives, binding."""

from tracegrad.core.ir import EagerTensor, FuncGraph, GraphTensor, Literal, Operation, Tensor
from tracegrad.core.op import REGISTRY, Primitive, get_primitive
from tracegrad.core.state import state
from tracegrad.core.types import TensorSpec, TensorType
from tracegrad.core.variables import Variable

__all__ = [
    "EagerTensor", "FuncGraph", "GraphTensor", "Literal", "Operation", "Tensor", "REGISTRY",
    "Primitive", "get_primitive", "state", "TensorSpec", "TensorType", "Variable",
]
