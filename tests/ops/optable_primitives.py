"""Op-table rows for every primitive: each through the thinnest function that binds it
(`tracegrad.ops` or a one-op `tracegrad.numpy` function), with NumPy/SciPy as the oracle."""

from __future__ import annotations

import numpy as np
import scipy.linalg
import scipy.special

import tracegrad as tg
import tracegrad.numpy as tnp
from tests.ops.optable import BOOL, F32, F64, I32, I64, case, rand, shape_id, ulps
from tracegrad import ops
from tracegrad.function import compile_graph
from tracegrad.ops.custom import call_p
from tracegrad.transforms.custom import CompiledCall

# -- unary elementwise -------------------------------------------------------------------------

# primitive: (tnp function, NumPy function, low, high)
UNARY = {
    "neg": (tnp.negative, np.negative, -2, 2),
    "sign": (tnp.sign, np.sign, -2, 2),
    "abs": (tnp.absolute, np.absolute, -2, 2),
    "floor": (tnp.floor, np.floor, -3, 3),
    "ceil": (tnp.ceil, np.ceil, -3, 3),
    "round": (tnp.rint, np.rint, -3, 3),
    "exp": (tnp.exp, np.exp, -3, 3),
    "exp2": (tnp.exp2, np.exp2, -3, 3),
    "expm1": (tnp.expm1, np.expm1, -3, 3),
    "log": (tnp.log, np.log, 0.05, 4),
    "log2": (tnp.log2, np.log2, 0.05, 4),
    "log10": (tnp.log10, np.log10, 0.05, 4),
    "log1p": (tnp.log1p, np.log1p, -0.9, 3),
    "sqrt": (tnp.sqrt, np.sqrt, 0.0, 4),
    "sin": (tnp.sin, np.sin, -4, 4),
    "cos": (tnp.cos, np.cos, -4, 4),
    "tan": (tnp.tan, np.tan, -1.3, 1.3),
    "asin": (tnp.arcsin, np.arcsin, -0.95, 0.95),
    "acos": (tnp.arccos, np.arccos, -0.95, 0.95),
    "atan": (tnp.arctan, np.arctan, -4, 4),
    "sinh": (tnp.sinh, np.sinh, -3, 3),
    "cosh": (tnp.cosh, np.cosh, -3, 3),
    "tanh": (tnp.tanh, np.tanh, -3, 3),
    "asinh": (tnp.arcsinh, np.arcsinh, -4, 4),
    "acosh": (tnp.arccosh, np.arccosh, 1.05, 4),
    "atanh": (tnp.arctanh, np.arctanh, -0.95, 0.95),
}
SMOOTH = {"exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan", "asin",
          "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "neg"}

for _prim, (_fn, _ref, _lo, _hi) in UNARY.items():
    for _shape in ((3, 4), (), (0,)):
        for _dt in (F64, F32):
            grad = (0,) if _dt == F64 and _prim in SMOOTH and _shape else ()
            case(f"{_prim}[{_dt},{shape_id(_shape)}]", _fn, _ref,
                 rand(_shape, _dt, _lo, _hi), grad_argnums=grad, primitive=_prim)

case("sqrt[f64,zero]", tnp.sqrt, np.sqrt, np.array([0.0, 1e-300, 4.0]), primitive="sqrt")
case("logistic[f64,3x4]", ops.logistic, scipy.special.expit, rand((3, 4), F64, -30, 30),
     grad_argnums=(0,), rtol=2e-16, why="SciPy's expit is 1/(1+exp(-x)); the primitive "
     "uses exp(-|x|), exact to rounding in both tails", primitive="logistic")
case("logistic[f32,tails]", ops.logistic,
     lambda x: scipy.special.expit(x.astype(F64)).astype(F32),
     np.array([-100, -20, -1, 0, 1, 20, 100], np.float32), rtol=2.4e-7, atol=1e-44,
     why="computed in float32 (2 roundings) against float64 rounded once",
     primitive="logistic")
case("erf[f64,3x4]", ops.erf, scipy.special.erf, rand((3, 4), F64, -3, 3), grad_argnums=(0,),
     primitive="erf")
case("erf[f32,5]", ops.erf, scipy.special.erf, rand((5,), F32, -3, 3), primitive="erf")

SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -2.5, 1e30])
for _prim, _fn, _ref in (("is_finite", tnp.isfinite, np.isfinite),
                         ("is_nan", tnp.isnan, np.isnan), ("is_inf", tnp.isinf, np.isinf)):
    case(f"{_prim}[f64,special]", _fn, _ref, SPECIAL, primitive=_prim)
    case(f"{_prim}[f32,special]", _fn, _ref, SPECIAL.astype(F32), primitive=_prim)

for _dt in (BOOL, I32, I64):
    case(f"not[{_dt}]", tnp.invert, np.invert, rand((2, 3), _dt, -5, 5), primitive="not")

for _y in (0, 1, 2, 3, -1, -3):
    case(f"integer_pow[f64,y={_y}]", lambda x, y=_y: tnp.power(x, y),
         lambda x, y=_y: np.power(x, y), rand((3, 4), F64, 0.5, 2), grad_argnums=(0,),
         primitive="integer_pow")
case("integer_pow[i32,y=3]", lambda x: tnp.power(x, 3), lambda x: np.power(x, 3),
     rand((5,), I32, -4, 4), primitive="integer_pow")
case("integer_pow[f32,y=2]", lambda x: tnp.power(x, 2), lambda x: np.power(x, 2),
     rand((5,), F32), primitive="integer_pow")

# -- binary elementwise ------------------------------------------------------------------------

# primitive: (tnp function, NumPy function, dtypes, (low, high) of the operands)
BINARY = {
    "add": (tnp.add, np.add, (F64, F32, I64, I32, BOOL), (-3, 3)),
    "sub": (tnp.subtract, np.subtract, (F64, F32, I64, I32), (-3, 3)),
    "mul": (tnp.multiply, np.multiply, (F64, F32, I64, I32, BOOL), (-3, 3)),
    "div": (tnp.true_divide, np.true_divide, (F64, F32), (0.5, 3)),
    "floor_div": (tnp.floor_divide, np.floor_divide, (F64, F32, I64, I32), (1, 5)),
    "mod": (tnp.mod, np.mod, (F64, F32, I64, I32), (1, 5)),
    "pow": (tnp.power, np.power, (F64, F32, I64, I32), (1, 3)),
    "max": (tnp.maximum, np.maximum, (F64, F32, I64, I32, BOOL), (-3, 3)),
    "min": (tnp.minimum, np.minimum, (F64, F32, I64, I32, BOOL), (-3, 3)),
    "atan2": (tnp.arctan2, np.arctan2, (F64, F32), (-3, 3)),
    "and": (tnp.bitwise_and, np.bitwise_and, (I64, I32, BOOL), (-8, 8)),
    "or": (tnp.bitwise_or, np.bitwise_or, (I64, I32, BOOL), (-8, 8)),
    "xor": (tnp.bitwise_xor, np.bitwise_xor, (I64, I32, BOOL), (-8, 8)),
    "shift_left": (tnp.left_shift, np.left_shift, (I64, I32), (-8, 70)),
    "shift_right": (tnp.right_shift, np.right_shift, (I64, I32), (-8, 70)),
    "eq": (tnp.equal, np.equal, (F64, F32, I64, I32, BOOL), (-2, 2)),
    "ne": (tnp.not_equal, np.not_equal, (F64, F32, I64, I32, BOOL), (-2, 2)),
    "lt": (tnp.less, np.less, (F64, F32, I64, I32, BOOL), (-2, 2)),
    "le": (tnp.less_equal, np.less_equal, (F64, F32, I64, I32, BOOL), (-2, 2)),
    "gt": (tnp.greater, np.greater, (F64, F32, I64, I32, BOOL), (-2, 2)),
    "ge": (tnp.greater_equal, np.greater_equal, (F64, F32, I64, I32, BOOL), (-2, 2)),
}
DIFFERENTIABLE = {"add", "sub", "mul", "div", "pow", "max", "min", "atan2", "mod"}
PAIRS = (((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 3), (4, 1)), ((), (3,)), ((0, 3), (3,)))

for _prim, (_fn, _ref, _dts, (_lo, _hi)) in BINARY.items():
    for _dt in _dts:
        for _sa, _sb in PAIRS:
            if _dt in (I32, BOOL, F32) and _sa != _sb and _sa:
                continue
            lo, hi = (_lo, _hi) if not (_dt in (I32, I64) and _prim in ("eq", "ne")) else (0, 2)
            a = rand(_sa, _dt, lo, hi, seed=1)
            b = rand(_sb, _dt, lo, hi, seed=2)
            if _prim in ("eq", "ne", "le", "ge") and _sa == _sb and a.size:
                b.flat[::2] = a.flat[::2]  # equal elements too
            grad = (0, 1) if _dt == F64 and _prim in DIFFERENTIABLE and a.size and b.size \
                and _prim not in ("max", "min") else ()
            case(f"{_prim}[{_dt},{shape_id(_sa)},{shape_id(_sb)}]", _fn, _ref, a, b,
                 grad_argnums=grad, primitive=_prim)

case("max[f64,nan]", tnp.maximum, np.maximum, np.array([np.nan, 1.0, -np.inf]),
     np.array([0.0, np.nan, 2.0]), primitive="max")
case("min[f64,nan]", tnp.minimum, np.minimum, np.array([np.nan, 1.0, -np.inf]),
     np.array([0.0, np.nan, 2.0]), primitive="min")
case("max[f64,grad]", tnp.maximum, np.maximum, rand((3, 4), seed=3), rand((3, 4), seed=4),
     grad_argnums=(0, 1), primitive="max")
case("min[f64,grad]", tnp.minimum, np.minimum, rand((3, 4), seed=3), rand((3, 4), seed=4),
     grad_argnums=(0, 1), primitive="min")
case("floor_div[f64,signs]", tnp.floor_divide, np.floor_divide,
     np.array([-7.0, 7.0, -7.5, 7.5, 0.0]), np.array([2.0, -2.0, 2.0, -2.0, 3.0]),
     primitive="floor_div")
case("mod[i64,signs]", tnp.mod, np.mod, np.array([-7, 7, -7, 7, 0]), np.array([2, -2, -3, 3, 5]),
     primitive="mod")
case("mod[f64,signs]", tnp.mod, np.mod, np.array([-7.5, 7.5, -7.5, 7.5]),
     np.array([2.0, -2.0, -3.0, 3.0]), primitive="mod")

# -- select, casts, stop_gradient --------------------------------------------------------------

for _dt in (F64, F32, I64, I32, BOOL):
    case(f"select[{_dt}]", tnp.where, np.where, rand((3, 4), BOOL, seed=5),
         rand((3, 4), _dt, seed=6), rand((3, 4), _dt, seed=7),
         grad_argnums=(1, 2) if _dt == F64 else (), primitive="select")

_CASTS = [(F64, F32), (F64, I64), (F64, I32), (F64, BOOL), (F32, F64), (F32, I32), (I64, F64),
          (I64, I32), (I64, BOOL), (I32, F32), (I32, I64), (BOOL, F64), (BOOL, I32), (F64, F64)]
for _src, _dst in _CASTS:
    x = rand((3, 4), _src, -5, 5, seed=8)
    if _src in (F64, F32):
        x.flat[:3] = [0.0, -2.7, 2.7]
    case(f"convert_element_type[{_src}->{_dst}]", lambda a, d=_dst: ops.convert_element_type(
        a, new_dtype=np.dtype(d)), lambda a, d=_dst: a.astype(d), x,
        grad_argnums=(0,) if _src == _dst == F64 else (), primitive="convert_element_type")

case("stop_gradient[f64]", ops.stop_gradient, lambda x: x, rand((3,)), primitive="stop_gradient")
case("assign[f64 2x3]", lambda c, x: ops.assign(c, x, variable="w"), lambda c, x: x,
     rand((2, 3)), rand((2, 3), seed=1), primitive="assign")
case("assign[i32]", lambda c, x: ops.assign(c, x, variable="n"), lambda c, x: x,
     rand((4,), I32), rand((4,), I32, seed=1), primitive="assign")

# -- shape primitives --------------------------------------------------------------------------

case("broadcast_in_dim[4->3x4]", lambda x: ops.broadcast_in_dim(
    x, shape=(3, 4), broadcast_dimensions=(1,)), lambda x: np.broadcast_to(x, (3, 4)),
    rand((4,)), grad_argnums=(0,), primitive="broadcast_in_dim")
case("broadcast_in_dim[3x1->2x3x5]", lambda x: ops.broadcast_in_dim(
    x, shape=(2, 3, 5), broadcast_dimensions=(1, 2)),
    lambda x: np.broadcast_to(x[None], (2, 3, 5)), rand((3, 1)), grad_argnums=(0,),
    primitive="broadcast_in_dim")
case("broadcast_in_dim[s->0x2,i32]", lambda x: ops.broadcast_in_dim(
    x, shape=(0, 2), broadcast_dimensions=()), lambda x: np.broadcast_to(x, (0, 2)),
    np.array(3, np.int32), primitive="broadcast_in_dim")

for _dt in (F64, I32, BOOL):
    case(f"reshape[2x6->3x4,{_dt}]", lambda x: ops.reshape(x, new_sizes=(3, 4)),
         lambda x: x.reshape(3, 4), rand((2, 6), _dt),
         grad_argnums=(0,) if _dt == F64 else (), primitive="reshape")
case("reshape[2x3->-1]", lambda x: ops.reshape(x, new_sizes=(-1,)), lambda x: x.reshape(-1),
     rand((2, 3)), grad_argnums=(0,), primitive="reshape")
case("reshape[s->1x1]", lambda x: ops.reshape(x, new_sizes=(1, 1)),
     lambda x: x.reshape(1, 1), rand(()), grad_argnums=(0,), primitive="reshape")
case("reshape[0x3->3x0]", lambda x: ops.reshape(x, new_sizes=(3, 0)),
     lambda x: x.reshape(3, 0), rand((0, 3)), primitive="reshape")

for _perm in ((1, 0, 2), (2, 0, 1), (0, 1, 2)):
    case(f"transpose[{_perm}]", lambda x, p=_perm: ops.transpose(x, permutation=p),
         lambda x, p=_perm: np.transpose(x, p), rand((2, 3, 4)), grad_argnums=(0,),
         primitive="transpose")
case("transpose[i32]", lambda x: ops.transpose(x, permutation=(1, 0)), np.transpose,
     rand((2, 3), I32), primitive="transpose")

case("slice[strided]", lambda x: ops.slice(x, start_indices=(1, 0), limit_indices=(4, 5),
                                           strides=(2, 3)), lambda x: x[1:4:2, 0:5:3],
     rand((5, 6)), grad_argnums=(0,), primitive="slice")
case("slice[empty]", lambda x: ops.slice(x, start_indices=(2,), limit_indices=(2,),
                                         strides=(1,)), lambda x: x[2:2], rand((5,)),
     primitive="slice")
case("rev[0,2]", lambda x: ops.rev(x, dimensions=(0, 2)), lambda x: x[::-1, :, ::-1],
     rand((2, 3, 4)), grad_argnums=(0,), primitive="rev")
case("rev[bool]", lambda x: ops.rev(x, dimensions=(0,)), lambda x: x[::-1],
     rand((5,), BOOL), primitive="rev")


def _pad_reference(x, value, config):
    out = np.full(tuple(lo + hi + n + max(n - 1, 0) * i
                        for n, (lo, hi, i) in zip(x.shape, config)), value, x.dtype)
    out[tuple(slice(lo, lo + n + max(n - 1, 0) * i, i + 1)
              for n, (lo, hi, i) in zip(x.shape, config))] = x
    return out


for _config in (((1, 2, 0), (0, 1, 0)), ((0, 0, 2), (1, 0, 1)), ((3, 0, 1), (0, 0, 0))):
    case(f"pad[{_config}]", lambda x, v, c=_config: ops.pad(x, v, padding_config=c),
         lambda x, v, c=_config: _pad_reference(x, v, c), rand((2, 3)), np.array(-1.5),
         grad_argnums=(0, 1), primitive="pad")
case("pad[i32,interior]", lambda x, v: ops.pad(x, v, padding_config=((1, 1, 2),)),
     lambda x, v: _pad_reference(x, v, ((1, 1, 2),)), rand((4,), I32), np.array(7, np.int32),
     primitive="pad")

case("concatenate[3 operands]", lambda a, b, c: ops.concatenate(a, b, c, dimension=1),
     lambda a, b, c: np.concatenate([a, b, c], axis=1), rand((2, 1)), rand((2, 3)),
     rand((2, 0)), grad_argnums=(0, 1), primitive="concatenate")
case("concatenate[bool]", lambda a, b: ops.concatenate(a, b, dimension=0),
     lambda a, b: np.concatenate([a, b]), rand((2,), BOOL), rand((3,), BOOL),
     primitive="concatenate")

for _dt, _dim in ((I64, 0), (I32, 1), (F64, 1), (F32, 0)):
    case(f"iota[{_dt},dim={_dim}]",
         lambda d=_dt, k=_dim: ops.iota(dtype=np.dtype(d), shape=(3, 4), dimension=k),
         lambda d=_dt, k=_dim: np.broadcast_to(
             np.arange((3, 4)[k], dtype=d).reshape((3, 1) if k == 0 else (1, 4)), (3, 4)),
         primitive="iota")
case("dim_size[axis=1]", lambda x: ops.dim_size(x, axis=1),
     lambda x: np.int64(x.shape[1]), rand((2, 5)), primitive="dim_size")

# -- reductions, cumulative, sorting -----------------------------------------------------------

_REDUCE = {"reduce_sum": (np.sum, (F64, F32, I64, I32, BOOL)),
           "reduce_prod": (np.prod, (F64, F32, I64, I32, BOOL)),
           "reduce_max": (np.max, (F64, F32, I64, I32, BOOL)),
           "reduce_min": (np.min, (F64, F32, I64, I32, BOOL))}
for _prim, (_ref, _dts) in _REDUCE.items():
    _p = ops.get_primitive(_prim)
    for _dt in _dts:
        for _axes, _keep in (((0,), False), ((1, 2), True), ((0, 1, 2), False), ((), False)):
            case(f"{_prim}[{_dt},axes={_axes},keepdims={_keep}]",
                 lambda x, p=_p, a=_axes, k=_keep: p.bind(x, axes=a, keepdims=k),
                 lambda x, r=_ref, a=_axes, k=_keep, d=_dt, acc=_prim in (
                     "reduce_sum", "reduce_prod"):
                 r(x, axis=a, keepdims=k, dtype=d) if acc else r(x, axis=a, keepdims=k),
                 rand((2, 3, 4), _dt, 0.5, 1.5) if _prim == "reduce_prod" else rand(
                     (2, 3, 4), _dt), grad_argnums=(0,) if _dt == F64 else (),
                 primitive=_prim)
case("reduce_sum[empty]", lambda x: ops.reduce_sum(x, axes=(0,)), lambda x: np.sum(x, axis=0),
     rand((0, 3)), primitive="reduce_sum")
case("reduce_prod[empty]", lambda x: ops.reduce_prod(x, axes=(1,)),
     lambda x: np.prod(x, axis=1), rand((3, 0)), primitive="reduce_prod")

for _prim, _ref in (("argmax", np.argmax), ("argmin", np.argmin)):
    for _dt in (F64, F32, I32, BOOL):
        case(f"{_prim}[{_dt},axis=1]", lambda x, p=_prim: ops.get_primitive(p).bind(x, axis=1),
             lambda x, r=_ref: r(x, axis=1), rand((3, 4), _dt, -3, 3), primitive=_prim)
    case(f"{_prim}[nan]", lambda x, p=_prim: ops.get_primitive(p).bind(x, axis=0),
         lambda x, r=_ref: r(x, axis=0), np.array([1.0, np.nan, 3.0, np.nan]), primitive=_prim)

for _prim, _ref in (("cumsum", np.cumsum), ("cumprod", np.cumprod)):
    for _dt in (F64, F32, I64, I32):
        for _axis, _rev in ((0, False), (1, True)):
            x = rand((3, 4), _dt, 0.5, 1.5) if _dt in (F64, F32) else rand((3, 4), _dt, -2, 3)
            case(f"{_prim}[{_dt},axis={_axis},reverse={_rev}]",
                 lambda x, p=_prim, a=_axis, r=_rev: ops.get_primitive(p).bind(
                     x, axis=a, reverse=r),
                 lambda x, f=_ref, a=_axis, r=_rev: np.flip(f(np.flip(x, a), axis=a,
                                                              dtype=x.dtype), a) if r
                 else f(x, axis=a, dtype=x.dtype), x, grad_argnums=(0,) if _dt == F64 else (), primitive=_prim)

for _dt in (F64, F32, I32, BOOL):
    x = rand((3, 5), _dt, -3, 3)
    case(f"sort[{_dt}]", lambda x: ops.sort(x, axis=1), lambda x: np.sort(x, axis=1), x,
         grad_argnums=(0,) if _dt == F64 else (), primitive="sort")
    case(f"argsort[{_dt}]", lambda x: ops.argsort(x, axis=0),
         lambda x: np.argsort(x, axis=0, kind="stable"), x, primitive="argsort")
case("sort[nan]", lambda x: ops.sort(x, axis=0), np.sort,
     np.array([3.0, np.nan, -1.0, np.inf, 0.0]), primitive="sort")

# -- indexing ----------------------------------------------------------------------------------

_IDX = np.array([[2, 0], [-1, 1]])
case("gather[axis=0]", lambda x: ops.gather(x, _IDX, axis=0), lambda x: np.take(x, _IDX, axis=0),
     rand((3, 4)), grad_argnums=(0,), primitive="gather")
case("gather[axis=1,i32 indices]", lambda x, i: ops.gather(x, i, axis=1),
     lambda x, i: np.take(x, i, axis=1), rand((3, 4)), np.array([3, 3, 0], np.int32),
     grad_argnums=(0,), primitive="gather")
case("gather[scalar index]", lambda x: ops.gather(x, np.array(1), axis=0), lambda x: x[1],
     rand((3, 4), I32), primitive="gather")


def _add_at(x, i, u, axis):
    out = x.copy()
    np.add.at(out, (slice(None),) * axis + (i,), u)
    return out


def _set_at(x, i, u, axis):
    out = x.copy()
    out[(slice(None),) * axis + (i,)] = u
    return out


case("scatter_add[repeated]", lambda x, u: ops.scatter_add(x, np.array([0, 2, 0]), u, axis=0),
     lambda x, u: _add_at(x, np.array([0, 2, 0]), u, 0), rand((4, 2)), rand((3, 2)),
     grad_argnums=(0, 1), primitive="scatter_add")
case("scatter_add[axis=1,i32]", lambda x, u: ops.scatter_add(x, np.array([[1], [-1]]), u,
                                                             axis=1),
     lambda x, u: _add_at(x, np.array([[1], [-1]]), u, 1), rand((3, 4), I32),
     rand((3, 2, 1), I32), primitive="scatter_add")
case("scatter[axis=0]", lambda x, u: ops.scatter(x, np.array([3, 1]), u, axis=0),
     lambda x, u: _set_at(x, np.array([3, 1]), u, 0), rand((4, 2)), rand((2, 2)),
     grad_argnums=(0, 1), primitive="scatter")

# -- contractions and linear algebra -----------------------------------------------------------

_DOTS = {
    "matvec": (((1,), (0,)), ((), ())),
    "matmul": (((1,), (0,)), ((), ())),
    "outer": (((), ()), ((), ())),
    "batch": (((2,), (1,)), ((0,), (0,))),
    "batch2+free": (((3,), (2,)), ((0, 1), (0, 1))),
    "batch_not_leading": (((0,), (2,)), ((2,), (0,))),
}
_DOT_SHAPES = {
    "matvec": ((3, 4), (4,)), "matmul": ((3, 4), (4, 5)), "outer": ((3,), (2,)),
    "batch": ((2, 3, 4), (2, 4, 5)), "batch2+free": ((2, 3, 4, 5), (2, 3, 5, 2)),
    "batch_not_leading": ((4, 3, 2), (2, 5, 4)),
}


def _dot_reference(a, b, dn):
    (lc, rc), (lb, rb) = dn
    letters = iter("abcdefghijklmnop")
    la = [next(letters) for _ in range(a.ndim)]
    lb_ = [next(letters) for _ in range(b.ndim)]
    for i, j in zip(lc + lb, rc + rb):
        lb_[j] = la[i]
    out = [la[i] for i in lb] + [c for i, c in enumerate(la) if i not in lc and i not in lb] + [
        c for j, c in enumerate(lb_) if j not in rc and j not in rb]
    return np.einsum(f"{''.join(la)},{''.join(lb_)}->{''.join(out)}", a, b)


for _name, _dn in _DOTS.items():
    _sa, _sb = _DOT_SHAPES[_name]
    for _dt in (F64, F32, I64, I32):
        a, b = rand(_sa, _dt, seed=1), rand(_sb, _dt, seed=2)
        ref = lambda a, b, d=_dn: _dot_reference(a, b, d)
        case(f"dot_general[{_name},{_dt}]",
             lambda a, b, d=_dn: ops.dot_general(a, b, dimension_numbers=d), ref, a, b,
             grad_argnums=(0, 1) if _dt == F64 else (),
             why="einsum sums in another order than BLAS", primitive="dot_general",
             **ulps(ref, a, b))
case("dot_general[empty contraction]", lambda a, b: ops.dot_general(
    a, b, dimension_numbers=(((1,), (0,)), ((), ()))), lambda a, b: a @ b, rand((2, 0)),
    rand((0, 3)), primitive="dot_general")


def _spd(n, batch=(), dtype=F64, seed=0):
    a = rand(batch + (n, n), dtype, seed=seed)
    return (a @ np.swapaxes(a, -1, -2) + n * np.eye(n, dtype=dtype)).astype(dtype)


def _unit_triangular(n, lower, seed=0):
    a = rand((n, n), seed=seed) * 0.3
    a = np.tril(a) if lower else np.triu(a)
    np.fill_diagonal(a, rand((n,), low=1.0, high=2.0, seed=seed + 1))
    return a


case("cholesky[f64]", ops.cholesky, np.linalg.cholesky, _spd(4), grad_argnums=(0,),
     grad_rtol=1e-5, primitive="cholesky")
case("cholesky[f32,batch]", ops.cholesky, np.linalg.cholesky, _spd(3, (2,), F32),
     primitive="cholesky")
for _lower in (True, False):
    for _left in (True, False):
        for _trans in (False, True):
            a = _unit_triangular(3, _lower)
            b = rand((3, 2) if _left else (2, 3), seed=9)

            def _ref(a, b, lower=_lower, left=_left, trans=_trans):
                op_a = a.T if trans else a
                return scipy.linalg.solve(op_a, b) if left else scipy.linalg.solve(op_a.T, b.T).T

            case(f"triangular_solve[lower={_lower},left={_left},trans={_trans}]",
                 lambda a, b, lo=_lower, le=_left, t=_trans: ops.triangular_solve(
                     a, b, left_side=le, lower=lo, transpose_a=t), _ref, a, b,
                 grad_argnums=(1,), why="a general LAPACK solve as the oracle rounds "
                 "differently", **ulps(_ref, a, b, n=8),
                 primitive="triangular_solve")
case("triangular_solve[unit_diagonal,batch]", lambda a, b: ops.triangular_solve(
    a, b, unit_diagonal=True),
    lambda a, b: np.stack([scipy.linalg.solve_triangular(a[i], b[i], lower=True,
                                                         unit_diagonal=True) for i in range(2)]),
    rand((2, 3, 3), seed=3), rand((2, 3, 1), seed=4), primitive="triangular_solve")
case("solve[f64]", ops.solve, np.linalg.solve, _spd(4, seed=1), rand((4, 2)),
     grad_argnums=(0, 1), primitive="solve")
case("solve[f32,batch]", ops.solve, np.linalg.solve, _spd(3, (2,), F32), rand((2, 3, 1), F32),
     primitive="solve")
case("det[f64]", ops.det, np.linalg.det, rand((4, 4), seed=5), grad_argnums=(0,),
     primitive="det")
case("det[f32,batch]", ops.det, np.linalg.det, rand((2, 3, 3), F32), primitive="det")
case("slogdet[f64]", lambda a: tuple(ops.slogdet(a)), lambda a: tuple(np.linalg.slogdet(a)),
     rand((4, 4), seed=6), grad_argnums=(0,), primitive="slogdet")
case("slogdet[f32,batch]", lambda a: tuple(ops.slogdet(a)),
     lambda a: tuple(np.linalg.slogdet(a)), rand((2, 3, 3), F32, seed=6), primitive="slogdet")

# -- ops with sub-graphs or outside gradients ---------------------------------------------------

case("constant[f64]", lambda x: ops.add(x, np.array([1.0, 2.0, 3.0])),
     lambda x: x + np.array([1.0, 2.0, 3.0]), rand((3,)), primitive="constant")


@tg.custom_gradient
def _clipped_sin(x):
    def grad(dy):
        return dy * tnp.cos(x)

    return tnp.sin(x), grad


case("custom_gradient[sin]", _clipped_sin, np.sin, rand((3,)), grad_argnums=(0,),
     primitive="custom_gradient", numpy_in_numpy_out=False)

_CALLEE_GRAPH = tg.trace(lambda x: tnp.exp(x) * 2.0)(tg.TensorSpec([3]))
_CALLEE = CompiledCall(_CALLEE_GRAPH, compile_graph(_CALLEE_GRAPH, "numpy"),
                       lambda g: compile_graph(g, "numpy"))
case("call[exp*2]", lambda x: call_p.bind(x, callee=_CALLEE)[0], lambda x: np.exp(x) * 2.0,
     rand((3,)), grad_argnums=(0,), primitive="call")


def _branches(x):
    return tg.cond(tnp.sum(x) > 0, lambda v: tnp.sin(v) * v, lambda v: tnp.exp(v) - v,
                   operands=(x,))


def _branches_ref(x):
    return np.sin(x) * x if np.sum(x) > 0 else np.exp(x) - x


for _name, _x in (("true", rand((3,), F64, 0.1, 2.0)), ("false", rand((3,), F64, -2.0, -0.1))):
    case(f"cond[{_name}]", _branches, _branches_ref, _x, grad_argnums=(0,), primitive="cond")


def _euler(x):
    return tg.fori_loop(0, 5, lambda i, v: v + 0.1 * tnp.sin(v), x)


def _euler_ref(x):
    for _ in range(5):
        x = x + 0.1 * np.sin(x)
    return x


case("while[fori_loop]", _euler, _euler_ref, rand((2, 3)), grad_argnums=(0,), primitive="while")
