"""Op-table rows for complex64 and complex128: every primitive that takes complex operands
(the parts `real`, `imag`, `conj`, `complex`; arithmetic, the holomorphic functions, `abs`,
comparisons in NumPy's lexicographic order, casts, reductions, products, select, shape and
indexing ops, linear algebra), values against NumPy and gradients against central
differences in the real and imaginary directions (the gradient of a real loss L of
z = x + iy is dL/dx + i dL/dy)."""

from __future__ import annotations

import numpy as np

import tracegrad.numpy as tnp
from tests.ops.optable import C64, C128, F32, F64, case, rand
from tracegrad import ops

WHY = ("NumPy's complex loops and the numba backend's complex functions round differently "
       "in the last bits")

# -- the parts of complex numbers --------------------------------------------------------------

for _dt in (C128, C64):
    _z = rand((3, 4), _dt, -2, 2)
    _g = (0,) if _dt == C128 else ()
    case(f"real[{_dt}]", tnp.real, np.real, _z, grad_argnums=_g, primitive="real")
    case(f"imag[{_dt}]", tnp.imag, np.imag, _z, grad_argnums=_g, primitive="imag")
    case(f"conj[{_dt}]", tnp.conj, np.conj, _z, grad_argnums=_g, primitive="conj")
for _dt in (F64, F32):
    _g = (0, 1) if _dt == F64 else ()
    case(f"complex[{_dt}]", ops.complex_, lambda x, y: x + 1j * y, rand((3, 4), _dt),
         rand((3, 4), _dt, seed=1), grad_argnums=_g, primitive="complex")
case("complex[f64,inf]", ops.complex_, lambda x, y: np.array([complex(a, b) for a, b in zip(x, y)]),
     np.array([np.inf, -1.0, np.nan]), np.array([2.0, np.inf, 0.5]), primitive="complex")

# -- elementwise functions ---------------------------------------------------------------------

# name: (tnp function, NumPy function, low, high of both parts)
UNARY = {
    "neg": (tnp.negative, np.negative, -2, 2), "abs": (tnp.absolute, np.absolute, -2, 2),
    "sign": (tnp.sign, np.sign, -2, 2), "exp": (tnp.exp, np.exp, -2, 2),
    "exp2": (tnp.exp2, np.exp2, -2, 2), "expm1": (tnp.expm1, np.expm1, -1, 1),
    "log": (tnp.log, np.log, 0.2, 3), "log2": (tnp.log2, np.log2, 0.2, 3),
    "log10": (tnp.log10, np.log10, 0.2, 3), "log1p": (tnp.log1p, np.log1p, 0.1, 2),
    "sqrt": (tnp.sqrt, np.sqrt, 0.1, 3), "sin": (tnp.sin, np.sin, -2, 2),
    "cos": (tnp.cos, np.cos, -2, 2), "tan": (tnp.tan, np.tan, -1, 1),
    "asin": (tnp.arcsin, np.arcsin, -0.8, 0.8), "acos": (tnp.arccos, np.arccos, -0.8, 0.8),
    "atan": (tnp.arctan, np.arctan, -0.8, 0.8), "sinh": (tnp.sinh, np.sinh, -2, 2),
    "cosh": (tnp.cosh, np.cosh, -2, 2), "tanh": (tnp.tanh, np.tanh, -1, 1),
    "asinh": (tnp.arcsinh, np.arcsinh, -0.8, 0.8),
    "acosh": (tnp.arccosh, np.arccosh, 1.2, 3), "atanh": (tnp.arctanh, np.arctanh, -0.8, 0.8),
    "square": (tnp.square, np.square, -2, 2), "reciprocal": (tnp.reciprocal, np.reciprocal, 0.5, 2),
    "angle": (tnp.angle, np.angle, -2, 2),
}
NOT_SMOOTH = {"sign"}

for _name, (_fn, _ref, _lo, _hi) in UNARY.items():
    prim = _name if _name not in ("square", "reciprocal", "angle") else None
    case(f"{_name}[c128,3x4]", _fn, _ref, rand((3, 4), C128, _lo, _hi),
         grad_argnums=() if _name in NOT_SMOOTH else (0,), rtol=1e-13, why=WHY, primitive=prim)
    case(f"{_name}[c64,5]", _fn, _ref, rand((5,), C64, _lo, _hi), rtol=1e-6, why=WHY,
         primitive=prim)

SPECIAL = np.array([complex(np.nan, 0), complex(0, np.inf), complex(-np.inf, 1), 0j, 1 - 2j])
for _prim, _fn, _ref in (("is_finite", tnp.isfinite, np.isfinite),
                         ("is_nan", tnp.isnan, np.isnan), ("is_inf", tnp.isinf, np.isinf)):
    case(f"{_prim}[c128,special]", _fn, _ref, SPECIAL, primitive=_prim)
    case(f"{_prim}[c64,special]", _fn, _ref, SPECIAL.astype(C64), primitive=_prim)

for _y in (2, 3, 7, -1, -4):
    case(f"integer_pow[c128,y={_y}]", lambda z, y=_y: tnp.power(z, y),
         lambda z, y=_y: np.power(z, y), rand((3, 4), C128, 0.5, 1.5), grad_argnums=(0,),
         rtol=1e-14, why=WHY, primitive="integer_pow")
case("integer_pow[c64,y=5]", lambda z: tnp.power(z, 5), lambda z: np.power(z, 5),
     rand((5,), C64, -1, 1), rtol=1e-6, why=WHY, primitive="integer_pow")

# name: (tnp function, NumPy function, low, high)
BINARY = {
    "add": (tnp.add, np.add, -2, 2), "sub": (tnp.subtract, np.subtract, -2, 2),
    "mul": (tnp.multiply, np.multiply, -2, 2), "div": (tnp.true_divide, np.true_divide, 0.5, 2),
    "pow": (tnp.power, np.power, 0.5, 1.5), "max": (tnp.maximum, np.maximum, -2, 2),
    "min": (tnp.minimum, np.minimum, -2, 2), "eq": (tnp.equal, np.equal, -1, 1),
    "ne": (tnp.not_equal, np.not_equal, -1, 1), "lt": (tnp.less, np.less, -1, 1),
    "le": (tnp.less_equal, np.less_equal, -1, 1), "gt": (tnp.greater, np.greater, -1, 1),
    "ge": (tnp.greater_equal, np.greater_equal, -1, 1),
}
COMPARE = {"eq", "ne", "lt", "le", "gt", "ge"}


def _ties(x):
    """`x` with some real parts equal to those of its reversal, so that comparisons go to
    the imaginary parts (NumPy's lexicographic order)."""
    y = x.copy()
    y.real[::2] = y.real[::-1][::2]
    return y


for _prim, (_fn, _ref, _lo, _hi) in BINARY.items():
    for _dt in (C128, C64):
        x, y = rand((3, 4), _dt, _lo, _hi), rand((3, 4), _dt, _lo, _hi, seed=1)
        if _prim in COMPARE:
            y = _ties(x)[::-1] if _prim != "eq" else np.where(x.real > 0, x, y)
        grad = (0, 1) if _dt == C128 and _prim not in COMPARE else ()
        exact = _prim in COMPARE or _prim in ("add", "sub", "max", "min")
        case(f"{_prim}[{_dt},3x4]", _fn, _ref, x, y, grad_argnums=grad,
             rtol=0 if exact else 1e-14 if _dt == C128 else 1e-6, why="" if exact else WHY,
             primitive=_prim)
for _prim, _fn, _ref in (("max", tnp.maximum, np.maximum), ("min", tnp.minimum, np.minimum)):
    _x = rand((3, 4), C128)
    case(f"{_prim}[c128,ties]", _fn, _ref, _x, _ties(_x)[::-1], primitive=_prim)
case("div[c128,zero]", tnp.true_divide, np.true_divide,
     np.array([1 + 1j, 0j, -2 + 0j, complex(np.inf, 1)]), np.array([0j, 0j, 1e-300j, 2 - 1j]),
     primitive="div")
case("pow[c128,zero_base]", tnp.power, np.power, np.array([0j, 0j, 2 + 1j, 0j]),
     np.array([2 + 0j, 0.5 + 1j, 0j, -1 + 0.5j]), primitive="pow")

# -- with real operands and Python scalars -----------------------------------------------------

case("mul[c64,f32]", tnp.multiply, np.multiply, rand((3,), C64), rand((3,), F32), rtol=1e-6,
     why=WHY)
case("add[f32,1j]", lambda x: x + 2.5j, lambda x: x + 2.5j, rand((4,), F32))
case("mul[c128,f64,grad]", lambda z, x: z * tnp.exp(1j * x), lambda z, x: z * np.exp(1j * x),
     rand((4,), C128), rand((4,), F64), grad_argnums=(0, 1), rtol=1e-15, why=WHY)
case("astype[c128,f64]", lambda z: tnp.astype(z, F64), lambda z: z.real.astype(F64),
     rand((3, 2), C128), grad_argnums=(0,), primitive="convert_element_type")
case("astype[f64,c128]", lambda x: tnp.astype(x, C128), lambda x: x.astype(C128),
     rand((3, 2), F64), grad_argnums=(0,), primitive="convert_element_type")
case("astype[c128,c64]", lambda z: tnp.astype(z, C64), lambda z: z.astype(C64), rand((4,), C128),
     primitive="convert_element_type")
case("astype[c64,i32]", lambda z: tnp.astype(z, "int32"), lambda z: z.real.astype("int32"),
     rand((4,), C64, -9, 9), primitive="convert_element_type")
case("astype[c128,bool]", lambda z: tnp.astype(z, "bool"), lambda z: z.astype(bool),
     np.array([0j, 1j, 1 + 0j, 0.5 - 2j]), primitive="convert_element_type")
case("where[c128]", lambda c, x, y: tnp.where(c, x, y), np.where, rand((3, 4), "bool"),
     rand((3, 4), C128), rand((4,), C128), grad_argnums=(1, 2), primitive="select")

# -- reductions, products, shapes, indexing ----------------------------------------------------

for _name, _fn, _ref in (("sum", tnp.sum, np.sum), ("prod", tnp.prod, np.prod),
                         ("mean", tnp.mean, np.mean), ("var", tnp.var, np.var),
                         ("cumsum", tnp.cumsum, np.cumsum), ("cumprod", tnp.cumprod, np.cumprod)):
    for _axis in (None, 1):
        case(f"{_name}[c128,axis={_axis}]", lambda z, f=_fn, a=_axis: f(z, axis=a),
             lambda z, f=_ref, a=_axis: f(z, axis=a), rand((3, 4), C128, -1.5, 1.5),
             grad_argnums=(0,), rtol=1e-14, why="summed in another order")
case("sum[c64,axis=0]", lambda z: tnp.sum(z, axis=0), lambda z: np.sum(z, axis=0),
     rand((5, 3), C64), rtol=1e-6, why="summed in another order")

for _name, _fn, _ref, _shapes in (
        ("dot", tnp.dot, np.dot, ((4,), (4,))), ("matmul", tnp.matmul, np.matmul, ((3, 4), (4, 2))),
        ("matvec", tnp.matmul, np.matmul, ((3, 4), (4,))),
        ("batched_matmul", tnp.matmul, np.matmul, ((2, 3, 4), (2, 4, 5))),
        ("vdot", tnp.vdot, np.vdot, ((3, 2), (3, 2))),
        ("einsum", lambda a, b: tnp.einsum("ij,kj->ik", a, b),
         lambda a, b: np.einsum("ij,kj->ik", a, b), ((3, 4), (2, 4)))):
    case(f"{_name}[c128]", _fn, _ref, rand(_shapes[0], C128), rand(_shapes[1], C128, seed=1),
         grad_argnums=(0, 1), rtol=1e-13, why="summed in another order (BLAS)",
         primitive="dot_general" if _name == "matmul" else None)
case("matmul[c64]", tnp.matmul, np.matmul, rand((3, 4), C64), rand((4, 2), C64, seed=1),
     rtol=1e-6, why="summed in another order (BLAS)", primitive="dot_general")
case("matmul[c128,f64]", tnp.matmul, np.matmul, rand((3, 4), C128), rand((4, 2), F64, seed=1),
     grad_argnums=(0, 1), rtol=1e-13, why="summed in another order (BLAS)")

case("reshape_transpose[c128]", lambda z: tnp.transpose(tnp.reshape(z, (4, 3)))[::-1, 1:],
     lambda z: np.transpose(np.reshape(z, (4, 3)))[::-1, 1:], rand((3, 4), C128),
     grad_argnums=(0,))
case("concatenate_pad[c128]", lambda a, b: tnp.pad(tnp.concatenate([a, b]), 1),
     lambda a, b: np.pad(np.concatenate([a, b]), 1), rand((2, 3), C128), rand((1, 3), C128),
     grad_argnums=(0, 1))
case("take[c128]", lambda z: tnp.take(z, np.array([2, 0, 2]), axis=1),
     lambda z: np.take(z, np.array([2, 0, 2]), axis=1), rand((3, 4), C128), grad_argnums=(0,))
case("at_add[c128]", lambda z, v: tnp.at(z)[np.array([0, 2, 0])].add(v),
     lambda z, v: _add_at(z, np.array([0, 2, 0]), v), rand((4,), C128), rand((3,), C128),
     grad_argnums=(0, 1))
case("sort_complex[c128]", tnp.sort_complex, np.sort_complex,
     np.array([1 + 2j, 1 - 1j, -3 + 0j, 1 + 0j, 0.5j]))


def _add_at(z, idx, v):
    out = z.copy()
    np.add.at(out, idx, v)
    return out


# -- linear algebra ----------------------------------------------------------------------------

_A = rand((3, 3), C128) + 3 * np.eye(3)
_B = rand((3, 2), C128, seed=2)
case("solve[c128]", tnp.linalg.solve, np.linalg.solve, _A, _B, grad_argnums=(0, 1), rtol=1e-13,
     why="LAPACK's pivoting order", primitive="solve")
case("inv[c128]", tnp.linalg.inv, np.linalg.inv, _A, grad_argnums=(0,), rtol=1e-13,
     why="LAPACK's pivoting order")
case("det[c128]", tnp.linalg.det, np.linalg.det, _A, grad_argnums=(0,), rtol=1e-13,
     why="LAPACK's pivoting order", primitive="det")
case("slogdet[c128]", lambda a: tuple(tnp.linalg.slogdet(a)), lambda a: tuple(np.linalg.slogdet(a)),
     _A, grad_argnums=(0,), rtol=1e-13, why="LAPACK's pivoting order", primitive="slogdet")
case("cholesky[c128]", lambda a: tnp.linalg.cholesky(a @ tnp.conj(a.T)),
     lambda a: np.linalg.cholesky(a @ a.conj().T), _A, grad_argnums=(0,), rtol=1e-13,
     why="the product is summed in another order", primitive="cholesky")
case("triangular_solve[c128]", lambda a, b: ops.triangular_solve(a, b, lower=True),
     lambda a, b: np.linalg.solve(np.tril(a), b), _A, _B, grad_argnums=(0, 1), rtol=1e-13,
     why="substitution against LAPACK's solve", primitive="triangular_solve")
case("norm[c128]", tnp.linalg.norm, np.linalg.norm, _A, grad_argnums=(0,), rtol=1e-15,
     why="summed in another order")
case("solve[c64]", tnp.linalg.solve, np.linalg.solve, _A.astype(C64), _B.astype(C64),
     rtol=1e-6, why="LAPACK's pivoting order", primitive="solve")
