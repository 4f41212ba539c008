"""Graphs for the printer, parser, JSON and verifier tests.

`EXAMPLES` gives, per primitive, invocations `(operand types, attributes)`; `op_graph`
builds a one-op graph from one. `TRACED` holds builders of graphs traced from real code
(tracegrad.numpy, tracegrad.ops, Python scalars, Variables). `nested_graph` builds graphs
whose op attributes hold sub-graphs (with captures of the enclosing graph), using a
`test_call` primitive registered only while `call_primitive()` is active.
"""

from __future__ import annotations

import contextlib

import numpy as np

import tracegrad as tg
import tracegrad.numpy as tnp
from tracegrad import ops
from tracegrad.core.ir import FuncGraph, Literal
from tracegrad.core.op import REGISTRY, Primitive
from tracegrad.core.types import TensorType


def T(text: str) -> TensorType:
    return TensorType.parse(text)


def lit(values, dtype) -> Literal:
    a = np.array(values, dtype=dtype)
    a.flags.writeable = False
    return Literal(a)


F64, F32, I64, I32, BOOL = (np.dtype(n) for n in ("float64", "float32", "int64", "int32", "bool"))
C64, C128 = np.dtype("complex64"), np.dtype("complex128")

_UNARY_FLOAT = [
    "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "sin", "cos", "tan", "asin",
    "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "logistic", "erf",
    "floor", "ceil", "round", "is_finite", "is_nan", "is_inf",
    "lgamma", "gamma", "digamma", "erfc", "erfinv", "erfcinv", "ndtr", "ndtri", "log_ndtr",
    "logit", "i0", "i0e", "i1", "i1e",
]
_BINARY_NUMERIC = ["add", "sub", "mul", "div", "floor_div", "mod", "pow", "max", "min", "atan2"]
_COMPARE = ["eq", "ne", "lt", "le", "gt", "ge"]

EXAMPLES: dict[str, list[tuple[tuple[str, ...], dict]]] = {
    **{name: [(("f64[3]",), {}), (("f32[?,2]",), {})] for name in _UNARY_FLOAT},
    "neg": [(("i32[4]",), {}), (("~f64[]",), {})],
    "sign": [(("f64[2]",), {}), (("c64[2]",), {})],
    "abs": [(("i64[2,2]",), {}), (("c128[3]",), {})],
    "real": [(("c128[3]",), {}), (("~c128[]",), {})],
    "imag": [(("c64[?,2]",), {})],
    "conj": [(("c128[2]",), {})],
    "complex": [(("f32[3]", "f32[3]"), {}), (("f64[]", "f64[]"), {})],
    "not": [(("bool[3]",), {}), (("i64[3]",), {})],
    "integer_pow": [(("f64[3]",), {"y": 3}), (("f32[]",), {"y": -2})],
    **{name: [(("f64[3]", "f64[3]"), {}), (("f32[?]", "f32[4]"), {})]
       for name in _BINARY_NUMERIC if name not in ("div", "atan2")},
    "div": [(("f64[2,3]", "f64[2,3]"), {}), (("c64[2]", "c64[2]"), {})],
    "atan2": [(("f32[5]", "f32[5]"), {})],
    **{name: [(("f64[3]", "f64[3]"), {}), (("f32[?]", "f32[4]"), {})]
       for name in ("igamma", "igammac", "zeta", "beta", "betaln")},
    **{name: [(("f64[2]", "f64[2]", "f64[2]"), {})] for name in ("betainc", "betaincc")},
    "and": [(("bool[3]", "bool[3]"), {})],
    "or": [(("i32[2]", "i32[2]"), {})],
    "xor": [(("bool[]", "bool[]"), {})],
    **{name: [(("f64[3]", "f64[3]"), {}), (("i64[?]", "i64[?]"), {})] for name in _COMPARE},
    "select": [(("bool[3]", "f64[3]", "f64[3]"), {}), (("bool[?]", "~f64[?]", "~f64[?]"), {})],
    "convert_element_type": [
        (("f64[3]",), {"new_dtype": F32}),
        (("i64[]",), {"new_dtype": F64, "weak": True}),
        (("bool[2]",), {"new_dtype": I32}),
        (("c128[2]",), {"new_dtype": F64}),
        (("f32[2]",), {"new_dtype": C64}),
    ],
    "stop_gradient": [(("f64[3]",), {})],
    "broadcast_in_dim": [
        (("f64[3]",), {"shape": (2, 3), "broadcast_dimensions": (1,)}),
        (("f64[]", "i64[]"), {"shape": (None, 4), "broadcast_dimensions": ()}),
    ],
    "reshape": [(("f64[2,3]",), {"new_sizes": (3, 2)}), (("f64[?,3]",), {"new_sizes": (-1,)})],
    "transpose": [(("f64[2,3,4]",), {"permutation": (2, 0, 1)})],
    "slice": [
        (("f64[5,4]",), {"start_indices": (1, 0), "limit_indices": (5, 4), "strides": (2, 1)}),
        (("f64[?]",), {"start_indices": (None,), "limit_indices": (-1,), "strides": (1,)}),
    ],
    "rev": [(("f64[3,2]",), {"dimensions": (0, 1)}), (("f64[3]",), {"dimensions": ()})],
    "pad": [(("f64[3]", "f64[]"), {"padding_config": ((1, 2, 1),)})],
    "concatenate": [(("f64[2,3]", "f64[4,3]", "f64[?,3]"), {"dimension": 0})],
    "iota": [
        ((), {"dtype": I64, "shape": (3, 2), "dimension": 0}),
        (("i64[]",), {"dtype": F32, "shape": (None,), "dimension": 0}),
    ],
    "dim_size": [(("f64[?,3]",), {"axis": 0})],
    "reduce_sum": [(("f64[3,4]",), {"axes": (0,), "keepdims": False}),
                   (("i32[?,4]",), {"axes": (0, 1), "keepdims": True})],
    "reduce_prod": [(("f64[3,4]",), {"axes": (1,), "keepdims": False})],
    "reduce_max": [(("f32[3,4]",), {"axes": (0, 1), "keepdims": False})],
    "reduce_min": [(("i64[3]",), {"axes": (0,), "keepdims": True})],
    "argmax": [(("f64[3,4]",), {"axis": 1, "keepdims": False, "index_dtype": I32})],
    "argmin": [(("f64[3]",), {"axis": 0})],
    "cumsum": [(("f64[3,4]",), {"axis": 1, "reverse": True})],
    "cumprod": [(("i64[5]",), {"axis": 0})],
    "sort": [(("f64[4,3]",), {"axis": 0})],
    "argsort": [(("f64[4]",), {"axis": 0, "index_dtype": I64})],
    "gather": [(("f64[5,3]", "i64[2,2]"), {"axis": 0}), (("f64[5,?]", "i32[4]"), {"axis": 1})],
    "scatter_add": [(("f64[5,3]", "i64[2]", "f64[2,3]"), {"axis": 0})],
    "scatter": [(("f32[5]", "i32[3]", "f32[3]"), {"axis": 0})],
    "dot_general": [
        (("f64[2,3]", "f64[3,4]"), {"dimension_numbers": (((1,), (0,)), ((), ()))}),
        (("f32[7,2,3]", "f32[7,3]"), {"dimension_numbers": (((2,), (1,)), ((0,), (0,)))}),
    ],
    "conv": [(("f64[2,3,7,6]", "f64[4,3,3,2]"), {"padding": ((1, 2), (0, -1))}),
             (("f32[?,1,2,9]", "f32[?,3,2,4]"), {"padding": ((0, 0),)})],
    "cholesky": [(("f64[3,3]",), {}), (("f64[2,?,?]",), {})],
    "triangular_solve": [
        (("f64[3,3]", "f64[3,2]"), {}),
        (("f64[3,3]", "f64[2,3]"), {"left_side": False, "lower": False, "transpose_a": True,
                                    "unit_diagonal": True}),
    ],
    "solve": [(("f64[3,3]", "f64[3,1]"), {})],
    "det": [(("f64[4,3,3]",), {})],
    "slogdet": [(("f32[3,3]",), {})],
    "qr": [(("f64[4,3]",), {}), (("f32[2,?,5]",), {"full_matrices": True})],
    "eigh": [(("f64[3,3]",), {"lower": False}), (("f64[2,?,?]",), {})],
    "svd": [(("f64[3,5]",), {"full_matrices": True}), (("f64[2,4,?]",), {})],
    "constant": [
        ((), {"value": lit(2.0, F64)}),
        ((), {"value": lit(3, I64), "weak": True}),
        ((), {"value": lit([[1.5, -0.0], [np.inf, -np.inf]], F64)}),
        ((), {"value": lit([np.nan, 0.1, 1e-45, 3.4028235e38, 16777217.0], F32)}),
        ((), {"value": lit([2**63 - 1, -(2**63), 0], I64)}),
        ((), {"value": lit([[True], [False]], BOOL)}),
        ((), {"value": lit(np.zeros((0, 3)), F64)}),
        ((), {"value": lit([-7, 2**31 - 1], I32)}),
        ((), {"value": lit(np.arange(32.0).reshape(4, 8) / 7, F64)}),  # the print limit
        ((), {"value": lit([1 - 2j, complex(np.nan, -np.inf), -0.0 - 0.0j, 1e-300 + 3e300j],
                           C128)}),
        ((), {"value": lit([0.1 + 1e-30j, -2.5e-7 - 1e38j], C64)}),
        ((), {"value": lit(1j, C128), "weak": True}),
    ],
}


def op_graph(name: str, operand_types, attrs) -> FuncGraph:
    """A graph applying primitive `name` once to fresh inputs of `operand_types`."""
    prim = REGISTRY[name]
    graph = FuncGraph(f"{name}_example")
    with graph.as_default():
        inputs = [graph.add_input(T(t), f"x{i}") for i, t in enumerate(operand_types)]
        out = prim.bind(*inputs, **attrs)
        graph.outputs = list(out) if prim.multiple_results else [out]
    return graph


def example_graphs():
    """`(id, graph)` for every example invocation."""
    for name, examples in EXAMPLES.items():
        for k, (types, attrs) in enumerate(examples):
            yield f"{name}-{k}", op_graph(name, types, attrs)


# -- graphs traced from real code -----------------------------------------------------------


def _mlp(x, w, b):
    h = tnp.tanh(tnp.matmul(x, w) + b)
    return tnp.sum(h * h) / 2.0


def _mixed(x, n):
    y = tnp.exp(x) - tnp.log(tnp.abs(x) + 1.0)
    z = tnp.where(x > 0, y, -y)
    return tnp.stack([z, tnp.sqrt(z * z + n)]).reshape(-1), n * 2


def _ops_pipeline(x, idx):
    s = ops.reduce_sum(ops.sin(x), axes=(1,), keepdims=True)
    g = ops.gather(x, idx, axis=0)
    t = ops.transpose(g, permutation=(1, 0))
    c = ops.concatenate(t, t, dimension=0)
    sign, logdet = ops.slogdet(ops.dot_general(
        x, x, dimension_numbers=(((0,), (0,)), ((), ()))))
    return s, c, sign + logdet, ops.cumsum(x, axis=0, reverse=True)


def _unknown_dims(x):
    y = x * 2.0 + tnp.sin(x)
    return tnp.sum(y, axis=0), y.reshape(-1)


_VARIABLE = tg.Variable(np.arange(3.0), name="w")


def _with_variable(x):
    return tnp.sum(x * _VARIABLE) + tnp.sum(_VARIABLE)


def _reductions_and_sorting(x):
    m = tnp.mean(x, axis=0) + tnp.var(x, axis=1, keepdims=True) * tnp.std(x)
    return (m, tnp.argmax(x, axis=1), tnp.cumsum(x, axis=0), tnp.sort(x, axis=-1),
            tnp.argsort(x[0]), tnp.max(x), tnp.prod(x, axis=(0, 1)))


def _indexing_and_shapes(x, i):
    y = tnp.concatenate([x, tnp.flip(x, axis=0)], axis=1)
    z = tnp.pad(tnp.take(y, i, axis=0), ((1, 0), (0, 2)))
    w = tnp.tile(tnp.expand_dims(x[1:, ::-1], 0), (2, 1, 1))
    u = tnp.at(x)[i].add(1.0)
    return z, tnp.swapaxes(w, 0, 2), tnp.squeeze(tnp.repeat(x[:1], 2, axis=0)[:, None]), u


def _linalg(a, b):
    spd = a @ a.T + tnp.eye(3)
    sign, logdet = tnp.linalg.slogdet(spd)
    return (tnp.linalg.solve(spd, b), tnp.linalg.det(spd) * sign + logdet,
            tnp.linalg.cholesky(spd), tnp.linalg.inv(spd), tnp.linalg.norm(b),
            tnp.einsum("ij,jk->ik", a, b))


def _logic_and_integers(x, k):
    mask = tnp.logical_and(x > 0, tnp.logical_not(tnp.isnan(x)))
    q = tnp.floor_divide(k, 3) + tnp.mod(k, 4) * 2
    return tnp.where(mask, tnp.clip(x, -1.0, 1.0), tnp.maximum(x, 0.5)), q, k > 2


def _creation(x):
    n = tnp.arange(6.0).reshape(2, 3) + tnp.linspace(0.0, 1.0, 3)
    return x + tnp.zeros_like(x) + 1.0, n * tnp.full((2, 3), 0.5), tnp.ones((2,), "int32")


def _loss(x, y):
    return tnp.sum(tnp.tanh(x * y) ** 2) / 3.0


def _nothing(x):
    return ()


def _no_ops(x, y):
    return y, x


def _every_dtype(*xs):
    """Each operand with a constant of its own dtype added, and cast to float16."""
    return [tnp.astype(x + np.ones((), x.dtype), np.float16) for x in xs]


_DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
           "float16", "float32", "float64")

TRACED = {
    "every_dtype": lambda: tg.trace(_every_dtype)(*[tg.TensorSpec([2], d) for d in _DTYPES]),
    "mlp": lambda: tg.trace(_mlp)(tg.TensorSpec([4, 3]), tg.TensorSpec([3, 5]),
                                  tg.TensorSpec([5])),
    "mixed_weak_scalar": lambda: tg.trace(_mixed)(tg.TensorSpec([3], "float32"), 1.5),
    "ops_pipeline": lambda: tg.trace(_ops_pipeline)(tg.TensorSpec([3, 3]),
                                                    tg.TensorSpec([2], "int32")),
    "unknown_dims": lambda: tg.trace(_unknown_dims)(tg.TensorSpec([None, 2])),
    "variable_capture": lambda: tg.trace(_with_variable)(tg.TensorSpec([3])),
    "no_outputs": lambda: tg.trace(_nothing)(tg.TensorSpec([3])),
    "no_ops": lambda: tg.trace(_no_ops)(tg.TensorSpec([3]), tg.TensorSpec([], "bool")),
    "lambda_name": lambda: tg.trace(lambda v: tnp.cos(v))(tg.TensorSpec([2])),
    "reductions_and_sorting": lambda: tg.trace(_reductions_and_sorting)(
        tg.TensorSpec([3, 4])),
    "indexing_and_shapes": lambda: tg.trace(_indexing_and_shapes)(
        tg.TensorSpec([3, 2]), tg.TensorSpec([2], "int64")),
    "linalg": lambda: tg.trace(_linalg)(tg.TensorSpec([3, 3]), tg.TensorSpec([3, 2])),
    "logic_and_integers": lambda: tg.trace(_logic_and_integers)(
        tg.TensorSpec([None]), tg.TensorSpec([4], "int32")),
    "creation": lambda: tg.trace(_creation)(tg.TensorSpec([None, 3], "float32")),
    "grad": lambda: tg.trace(tg.grad(_loss, argnums=(0, 1)))(
        tg.TensorSpec([3]), tg.TensorSpec([3])),
    "value_and_grad_unknown_dims": lambda: tg.trace(tg.value_and_grad(_loss))(
        tg.TensorSpec([None]), tg.TensorSpec([None])),
}


# -- sub-graphs ------------------------------------------------------------------------------


@contextlib.contextmanager
def call_primitive():
    """`test_call(*operands, body=g, extra=(g1, g2)) -> outputs of g`: a primitive whose
    attributes hold sub-graphs, registered while the context is active."""
    prim = Primitive("test_call", multiple_results=True)

    @prim.def_abstract_eval
    def abstract_eval(*types, body, extra=()):
        if [t for t in types] != [t.type for t in body.inputs]:
            raise tg.errors.ShapeError("test_call: operands do not fit the body's inputs")
        return [t.type for t in body.outputs]

    try:
        yield prim
    finally:
        del REGISTRY["test_call"]


def nested_graph(call) -> FuncGraph:
    """`@outer` holding a `test_call` whose body captures an outer value and itself holds a
    `test_call` whose body captures values of both enclosing graphs."""
    outer = FuncGraph("outer")
    with outer.as_default():
        x = outer.add_input(T("f64[3]"), "x")
        y = ops.sin(x)
        body = FuncGraph("body", outer=outer)
        with body.as_default():
            a = body.add_input(T("f64[3]"), "a")
            inner = FuncGraph("inner", outer=body)
            with inner.as_default():
                b = inner.add_input(T("f64[3]"), "a")  # the same name as the body's input
                inner.outputs = [ops.mul(ops.mul(b, inner.to_tensor(y)), inner.to_tensor(a))]
            (r,) = call.bind(a, body=inner)
            body.outputs = [ops.add(r, body.to_tensor(y)), ops.neg(a)]
        alt = FuncGraph("alt", outer=outer)
        with alt.as_default():
            alt.outputs = [ops.cos(alt.add_input(T("f64[3]"), "p"))]
        z, w = call.bind(x, body=body, extra=(alt, (alt, 3)))
        outer.outputs = [z, w]
    return outer


def check_nested_links(graph: FuncGraph) -> None:
    """A rebuilt `nested_graph`: sub-graphs know their enclosing graph and capture the
    right values of it."""
    body = graph.operations[1].attrs["body"]
    inner = body.operations[0].attrs["body"]
    assert body.outer is graph and inner.outer is body
    sin_result = graph.operations[0].outputs[0]
    assert [e for e, _ in body.captures] == [sin_result]
    assert [e for e, _ in inner.captures] == [sin_result, body.inputs[0]]
