"""Op-table rows for tracegrad.numpy's elementwise functions, reductions and array creation:
NumPy's result dtypes (weak Python scalars, mixed dtypes, integer and bool input),
broadcasting, axes (None, negative, tuples), keepdims, empty and rank-0 arrays."""

from __future__ import annotations

import numpy as np

import tracegrad.numpy as tnp
from tests.ops.optable import BOOL, F32, F64, I32, I64, case, rand

# -- unary functions: integer input computes in float64 ----------------------------------------

FLOAT_UNARY = {
    # name: (low, high) of a valid domain
    "exp": (-3, 3), "exp2": (-3, 3), "expm1": (-3, 3), "log": (1, 5), "log2": (1, 5),
    "log10": (1, 5), "log1p": (0, 5), "sqrt": (0, 5), "sin": (-4, 4), "cos": (-4, 4),
    "tan": (-1, 1), "arcsin": (-1, 1), "arccos": (-1, 1), "arctan": (-4, 4),
    "sinh": (-3, 3), "cosh": (-3, 3), "tanh": (-3, 3), "arcsinh": (-4, 4),
    "arccosh": (1, 5), "arctanh": (0, 0), "rint": (-4, 4),
}
for _name, (_lo, _hi) in FLOAT_UNARY.items():
    for _dt in (I64, I32):
        case(f"{_name}[{_dt}]", getattr(tnp, _name), getattr(np, _name),
             rand((2, 3), _dt, _lo, _hi))
    f, r = getattr(tnp, _name), getattr(np, _name)
    case(f"{_name}[python scalar]", lambda f=f, v=float(_hi): f(v),
         lambda r=r, v=float(_hi): r(v))

for _name in ("negative", "positive", "absolute", "abs", "sign", "square", "floor", "ceil"):
    for _dt in (F64, F32, I64, I32):
        x = rand((2, 3), _dt, -4, 4, seed=3)
        case(f"{_name}[{_dt}]", getattr(tnp, _name), getattr(np, _name), x,
             grad_argnums=(0,) if _dt == F64 and _name in ("negative", "positive", "square")
             else ())
for _name in ("absolute", "floor", "ceil"):
    case(f"{_name}[bool]", getattr(tnp, _name), getattr(np, _name), rand((4,), BOOL))
case("abs[f64,away from 0]", tnp.abs, np.abs, np.array([-2.5, -0.5, 0.75, 3.0]),
     grad_argnums=(0,))
case("square[python int]", lambda: tnp.square(7), lambda: np.square(7))

for _dt, _x in ((F64, np.array([-4.0, -0.5, 0.25, 2.0])), (F32, np.array([-3, 0.5], F32)),
                (I64, np.array([-2, -1, 1, 2, 5])), (I32, np.array([-1, 1, 3], I32))):
    case(f"reciprocal[{_dt}]", tnp.reciprocal, np.reciprocal, _x,
         grad_argnums=(0,) if _dt == F64 else ())

for _name, _x in (("isnan", rand((3,), I32)), ("isinf", rand((3,), I64)),
                  ("isfinite", rand((3,), BOOL)), ("isfinite", np.array(np.inf, F32))):
    case(f"{_name}[{_x.dtype}]", getattr(tnp, _name), getattr(np, _name), _x)

for _dt in (F64, F32, I64, I32):
    for _d in (0, 1, 2, -1):
        x = rand((2, 5), _dt, -60, 60, seed=4) * (1 if _dt in (I64, I32) else 1.2345)
        x = x.astype(_dt)
        if _dt in (F64, F32):
            x.flat[:3] = [2.5, -0.5, 1.25]  # halves round to even
        case(f"round[{_dt},decimals={_d}]", lambda a, d=_d: tnp.round(a, d),
             lambda a, d=_d: np.round(a, d), x)
case("around[f64]", lambda a: tnp.around(a, 1), lambda a: np.around(a, 1), rand((4,)))

# -- binary functions: NumPy's promotion ---------------------------------------------------------

_SUPPORTED = {np.dtype(d) for d in (F64, F32, I64, I32, BOOL)}


def _supported(reference, *args) -> bool:
    """Whether NumPy computes `reference(*args)` in dtypes tracegrad has (bool / bool is
    float16 in NumPy: tracegrad raises DTypeError there, tested in tests/numpy)."""
    try:
        with np.errstate(all="ignore"):
            out = reference(*args)
    except TypeError:
        return False
    return np.asarray(out).dtype in _SUPPORTED and all(
        np.asarray(a).dtype in _SUPPORTED for a in args)


def _ulps(name, out) -> dict:
    """logaddexp2 composes exp2 and log1p, which NumPy's own loop calls from libm: within
    two ulps of it; in float32 logaddexp's exp and log1p are NumPy's SIMD loops, its own loop
    calls libm's expf and log1pf: within four (every other row is exact)."""
    if name == "logaddexp" and out.dtype == np.float32:
        return {"rtol": 4 * float(np.finfo(out.dtype).eps),
                "why": "float32 composite of exp and log1p: within 4 ulps of NumPy's loop"}
    if name != "logaddexp2":
        return {}
    return {"rtol": 2 * float(np.finfo(out.dtype).eps),
            "why": "composite of exp2 and log1p: within 2 ulps of NumPy's loop"}


BINARY = ("add", "subtract", "multiply", "divide", "true_divide", "floor_divide", "mod",
          "remainder", "power", "maximum", "minimum", "fmax", "fmin", "arctan2", "less",
          "less_equal", "greater", "greater_equal", "equal", "not_equal", "logical_and",
          "logical_or", "logical_xor", "logaddexp", "logaddexp2")
MIXED = ((I32, F32), (F32, I64), (I32, I64), (BOOL, I32), (F32, F64), (BOOL, F64))
for _name in BINARY:
    f, r = getattr(tnp, _name), getattr(np, _name)
    positive = _name in ("floor_divide", "mod", "remainder", "power", "divide", "true_divide")
    lo, hi = (1, 3) if positive else (-3, 3)
    for _da, _db in MIXED:
        a, b = rand((2, 3), _da, lo, hi, seed=5), rand((3,), _db, lo, hi, seed=6)
        if _supported(r, a, b):
            case(f"{_name}[{_da},{_db}]", f, r, a, b, **_ulps(_name, r(a, b)))
    for _s in (2.0, 2, True):
        for _dt in (F32, I32, F64, BOOL):
            x = rand((4,), _dt, lo, hi, seed=7)
            if _supported(lambda a, r=r, s=_s: r(a, s), x):
                case(f"{_name}[{_dt},{_s!r}]", lambda a, f=f, s=_s: f(a, s),
                     lambda a, r=r, s=_s: r(a, s), x)
            if _supported(lambda a, r=r, s=_s: r(s, a), x):
                case(f"{_name}[{_s!r},{_dt}]", lambda a, f=f, s=_s: f(s, a),
                     lambda a, r=r, s=_s: r(s, a), x)
    case(f"{_name}[python scalars]", lambda f=f: f(3.0, 2), lambda r=r: r(3.0, 2))
    case(f"{_name}[f64,broadcast]", f, r, rand((3, 1), F64, lo, hi, seed=8),
         rand((1, 4), F64, lo, hi, seed=9), **_ulps(_name, np.ones(1)),
         grad_argnums=(0, 1) if _name in ("add", "subtract", "multiply", "divide", "power",
                                          "arctan2", "logaddexp", "logaddexp2") else ())

# -- weak scalar operands: Python int and float arguments, traced as weak rank-0 tensors -----
# NumPy's result for the Python scalars themselves (NEP 50): `n > 2` of an int is a bool,
# `i + 1` an int64, `x32 * s` of a float s float32, `i32 + n` int32, `i32 * s` float64.
_WEAK = {"int": 2, "float": 1.5}
_WEAK_PAIRS = (("int", 3), ("int", 2.5), ("float", 2.5)) + tuple(
    (kind, dt) for kind in _WEAK for dt in (I32, F32, BOOL))
for _name in BINARY:
    f, r = getattr(tnp, _name), getattr(np, _name)
    for _kind, _other in _WEAK_PAIRS:
        _s = _WEAK[_kind]
        if type(_other) is str:
            _x = rand((4,), _other, 1, 3, seed=10)
            _pairs = {f"weak {_kind},{_other}": (_s, _x), f"{_other},weak {_kind}": (_x, _s)}
        else:
            _pairs = {f"weak {_kind},weak {type(_other).__name__}": (_s, _other)}
        for _label, _args in _pairs.items():
            if _supported(r, *_args):
                with np.errstate(all="ignore"):
                    _tol = _ulps(_name, np.asarray(r(*_args)))
                case(f"{_name}[{_label}]", f, r, *_args, **_tol)

_NANS = np.array([np.nan, 1.0, np.nan, -2.0, 3.0])
_NANS2 = np.array([0.5, np.nan, np.nan, -3.0, 1.0])
for _name in ("fmax", "fmin", "maximum", "minimum", "logical_and", "logical_or", "equal"):
    case(f"{_name}[nan]", getattr(tnp, _name), getattr(np, _name), _NANS, _NANS2)
_INFS = np.array([-np.inf, np.inf, np.inf, 1e308, -800.0, 0.5])
_INFS2 = np.array([-np.inf, np.inf, -np.inf, 1e308, -801.0, 0.5])
for _name in ("logaddexp", "logaddexp2"):
    case(f"{_name}[nan]", getattr(tnp, _name), getattr(np, _name), _NANS, _NANS2,
         **_ulps(_name, _NANS))
    case(f"{_name}[inf,huge,tie]", getattr(tnp, _name), getattr(np, _name), _INFS, _INFS2,
         **_ulps(_name, _INFS))
case("power[f64,negative int]", lambda a: tnp.power(a, -2), lambda a: np.power(a, -2),
     rand((3,), F64, 0.5, 2), grad_argnums=(0,))
case("power[f32,float exponent]", lambda a: tnp.power(a, 0.5), lambda a: np.power(a, 0.5),
     rand((3,), F32, 0.5, 2))
case("logical_not[f64]", tnp.logical_not, np.logical_not, np.array([0.0, np.nan, -1.0]))
case("logical_not[i32]", tnp.logical_not, np.logical_not, np.array([0, 3], I32))

for _dt, (_lo, _hi) in ((F64, (-1.0, 1.5)), (F32, (0.0, 0.5)), (I32, (-1, 2)), (I64, (0, 3))):
    x = rand((3, 4), _dt, -3, 3, seed=10)
    case(f"clip[{_dt}]", lambda a, lo=_lo, hi=_hi: tnp.clip(a, lo, hi),
         lambda a, lo=_lo, hi=_hi: np.clip(a, lo, hi), x)
case("clip[i32,float bounds]", lambda a: tnp.clip(a, 0, 2.5), lambda a: np.clip(a, 0, 2.5),
     rand((5,), I32, -3, 3))
case("clip[array bounds]", tnp.clip, np.clip, rand((3, 4)), rand((4,), seed=1) - 1,
     rand((3, 1), seed=2) + 1, grad_argnums=(0,))
case("clip[None max]", lambda a: tnp.clip(a, 0.0, None), lambda a: np.clip(a, 0.0, None),
     rand((4,)))
case("clip[nan]", lambda a: tnp.clip(a, -1.0, 1.0), lambda a: np.clip(a, -1.0, 1.0), _NANS)

for _dx, _dy in ((F64, F64), (I32, F32), (F32, F32), (BOOL, I64), (I32, I32)):
    case(f"where[{_dx},{_dy}]", tnp.where, np.where, rand((3, 1), BOOL, seed=11),
         rand((1, 4), _dx, seed=12), rand((4,), _dy, seed=13),
         grad_argnums=(1, 2) if _dx == _dy == F64 else ())
case("where[i32,2.5]", lambda c, x: tnp.where(c, x, 2.5), lambda c, x: np.where(c, x, 2.5),
     rand((4,), BOOL), rand((4,), I32))
case("where[f32,0]", lambda c, x: tnp.where(c, x, 0), lambda c, x: np.where(c, x, 0),
     rand((4,), BOOL), rand((4,), F32))
case("where[float condition]", tnp.where, np.where, np.array([0.0, 2.0, np.nan]),
     rand((3,), seed=1), rand((3,), seed=2))

# -- reductions ----------------------------------------------------------------------------------

AXES = (None, 0, -1, (0, 2), (-1, 0), ())
for _name in ("sum", "prod", "max", "min", "amax", "amin", "mean", "any", "all"):
    f, r = getattr(tnp, _name), getattr(np, _name)
    for _dt in (F64, F32, I32, I64, BOOL):
        if _name == "mean" and _dt == BOOL:
            continue
        x = rand((2, 3, 4), _dt, 0.5, 1.5) if _name == "prod" and _dt in (F64, F32) else rand(
            (2, 3, 4), _dt, -3, 3)
        for _axis in AXES:
            for _keep in (False, True):
                if _keep and _axis not in (None, -1, (0, 2)):
                    continue
                grad = (0,) if _dt == F64 and _name in ("sum", "prod", "mean") else ()
                case(f"{_name}[{_dt},axis={_axis},keepdims={_keep}]",
                     lambda a, f=f, ax=_axis, k=_keep: f(a, axis=ax, keepdims=k),
                     lambda a, r=r, ax=_axis, k=_keep: r(a, axis=ax, keepdims=k), x,
                     grad_argnums=grad)
    if _name not in ("max", "min", "amax", "amin"):
        case(f"{_name}[empty]", lambda a, f=f: f(a, axis=0), lambda a, r=r: r(a, axis=0),
             rand((0, 3)))
    case(f"{_name}[python scalar]", lambda f=f: f(2.5), lambda r=r: r(2.5))

for _name in ("sum", "prod", "mean", "cumsum", "cumprod"):
    f, r = getattr(tnp, _name), getattr(np, _name)
    for _src, _dst in ((I32, F64), (F64, F32), (BOOL, I32), (F32, F64)):
        case(f"{_name}[{_src},dtype={_dst}]",
             lambda a, f=f, d=_dst: f(a, axis=0, dtype=d),
             lambda a, r=r, d=_dst: r(a, axis=0, dtype=d),
             rand((3, 4), _src, 0.5, 2))
case("sum[dtype=np.float32 object]", lambda a: tnp.sum(a, dtype=np.float32),
     lambda a: np.sum(a, dtype=np.float32), rand((5,)))
case("sum[f64,nan]", tnp.sum, np.sum, _NANS)
case("max[f64,nan]", lambda a: tnp.max(a, axis=0), lambda a: np.max(a, axis=0), _NANS)

for _name in ("var", "std"):
    f, r = getattr(tnp, _name), getattr(np, _name)
    for _dt in (F64, F32, I32, I64):
        for _axis, _ddof, _keep in ((None, 0, False), (1, 1, False), ((0, 2), 0, True),
                                    (-1, 2, False), (0, 1.5, False)):
            case(f"{_name}[{_dt},axis={_axis},ddof={_ddof},keepdims={_keep}]",
                 lambda a, f=f, ax=_axis, d=_ddof, k=_keep: f(a, axis=ax, ddof=d, keepdims=k),
                 lambda a, r=r, ax=_axis, d=_ddof, k=_keep: r(a, axis=ax, ddof=d, keepdims=k),
                 rand((2, 3, 4), _dt, -3, 3), grad_argnums=(0,) if _dt == F64 else ())
    case(f"{_name}[ddof=n]", lambda a, f=f: f(a, ddof=4), lambda a, r=r: r(a, ddof=4),
         rand((4,)))
    case(f"{_name}[dtype=f32]", lambda a, f=f: f(a, axis=0, dtype=F32),
         lambda a, r=r: r(a, axis=0, dtype=F32), rand((3, 2)))

for _name in ("argmax", "argmin"):
    f, r = getattr(tnp, _name), getattr(np, _name)
    for _dt in (F64, F32, I32, BOOL):
        for _axis, _keep in ((None, False), (None, True), (0, False), (-1, True)):
            case(f"{_name}[{_dt},axis={_axis},keepdims={_keep}]",
                 lambda a, f=f, ax=_axis, k=_keep: f(a, axis=ax, keepdims=k),
                 lambda a, r=r, ax=_axis, k=_keep: r(a, axis=ax, keepdims=k),
                 rand((3, 4), _dt, -2, 2))

for _name in ("cumsum", "cumprod"):
    f, r = getattr(tnp, _name), getattr(np, _name)
    for _dt in (F64, F32, I32, I64, BOOL):
        x = rand((3, 4), _dt, 0.5, 1.5) if _dt in (F64, F32) else rand((3, 4), _dt, -2, 2)
        for _axis in (None, 0, -1):
            case(f"{_name}[{_dt},axis={_axis}]", lambda a, f=f, ax=_axis: f(a, axis=ax),
                 lambda a, r=r, ax=_axis: r(a, axis=ax), x,
                 grad_argnums=(0,) if _dt == F64 else ())
    case(f"{_name}[empty]", f, r, rand((0,)))

for _name in ("sort", "argsort"):
    f = getattr(tnp, _name)
    r = np.sort if _name == "sort" else lambda a, axis=-1: np.argsort(a, axis=axis, kind="stable")
    for _dt in (F64, F32, I32, I64, BOOL):
        x = rand((3, 4), _dt, -2, 2)
        for _axis in (None, 0, -1):
            case(f"{_name}[{_dt},axis={_axis}]", lambda a, f=f, ax=_axis: f(a, axis=ax),
                 lambda a, r=r, ax=_axis: r(a, axis=ax), x,
                 grad_argnums=(0,) if _dt == F64 and _name == "sort" else ())

# -- creation ------------------------------------------------------------------------------------

for _name in ("zeros", "ones"):
    f, r = getattr(tnp, _name), getattr(np, _name)
    for _dt in (None, F32, I32, BOOL, np.int64):
        kw = {} if _dt is None else {"dtype": _dt}
        case(f"{_name}[{_dt}]", lambda f=f, k=kw: f((2, 3), **k), lambda r=r, k=kw: r((2, 3), **k))
    case(f"{_name}[int shape]", lambda f=f: f(4), lambda r=r: r(4))
for _fill, _dt in ((2.5, None), (3, None), (True, None), (2.7, I32), (1, F32)):
    case(f"full[{_fill!r},{_dt}]", lambda v=_fill, d=_dt: tnp.full((2, 2), v, d),
         lambda v=_fill, d=_dt: np.full((2, 2), v, d))
case("full[array fill]", lambda v: tnp.full((3, 2), v), lambda v: np.full((3, 2), v),
     rand((2,)))
for _name in ("zeros_like", "ones_like"):
    f, r = getattr(tnp, _name), getattr(np, _name)
    for _dt in (None, I32, F32):
        case(f"{_name}[{_dt}]", lambda a, f=f, d=_dt: f(a, dtype=d),
             lambda a, r=r, d=_dt: r(a, dtype=d), rand((2, 3), F64))
for _fill, _dt in ((2.7, None), (7, F32), (-1, None)):
    case(f"full_like[{_fill},{_dt}]", lambda a, v=_fill, d=_dt: tnp.full_like(a, v, d),
         lambda a, v=_fill, d=_dt: np.full_like(a, v, d), rand((2, 3), I32))

for _args, _dt in (((5,), None), ((2, 11, 3), None), ((10, 2, -3), None), ((0.0, 1.0, 0.1), None),
                   ((1.5, -2.0, -0.3), None), ((0, 5), F32), ((3,), F64), ((-1.0, 1.0, 0.25), F32),
                   ((0.5, 5, 1.5), I64), ((5, 1), None), ((1e-3, 7e-3, 1e-3), None)):
    case(f"arange[{_args},{_dt}]", lambda a=_args, d=_dt: tnp.arange(*a, dtype=d),
         lambda a=_args, d=_dt: np.arange(*a, dtype=d))

for _args, _kw in (((0.0, 1.0, 5), {}), ((-3, 7, 6), {"endpoint": False}), ((2.0, 2.0, 1), {}),
                   ((0, 10, 7), {"dtype": I64}), ((-3.5, 7.0, 6), {"dtype": I32}),
                   ((1e-3, 2.0, 50), {}), ((0.0, 1.0, 0), {}), ((1.0, 0.0, 4), {"dtype": F32})):
    case(f"linspace[{_args},{_kw}]", lambda a=_args, k=_kw: tnp.linspace(*a, **k),
         lambda a=_args, k=_kw: np.linspace(*a, **k))
case("linspace[retstep]", lambda: tnp.linspace(0.0, 2.0, 5, retstep=True),
     lambda: np.linspace(0.0, 2.0, 5, retstep=True))
case("linspace[array bounds,axis=1]", lambda a, b: tnp.linspace(a, b, 4, axis=1),
     lambda a, b: np.linspace(a, b, 4, axis=1), rand((2,), seed=1), rand((2,), seed=2),
     grad_argnums=(0, 1))

for _args, _kw in (((3,), {}), ((2, 4), {}), ((4, 3, 1), {}), ((3, 3, -2), {}),
                   ((3,), {"dtype": I32}), ((2, 5, 4), {"dtype": BOOL})):
    case(f"eye[{_args},{_kw}]", lambda a=_args, k=_kw: tnp.eye(*a, **k),
         lambda a=_args, k=_kw: np.eye(*a, **k))
case("identity[4]", lambda: tnp.identity(4), lambda: np.identity(4))
case("identity[3,f32]", lambda: tnp.identity(3, F32), lambda: np.identity(3, F32))

for _src, _dst in ((F64, I32), (I32, F32), (BOOL, F64), (F64, "float32"), (I64, np.bool_)):
    case(f"astype[{_src}->{_dst}]", lambda a, d=_dst: tnp.astype(a, d),
         lambda a, d=_dst: a.astype(d), rand((2, 3), _src, -3, 3))
    case(f"asarray[{_src}->{_dst}]", lambda a, d=_dst: tnp.asarray(a, dtype=d),
         lambda a, d=_dst: np.asarray(a, dtype=d), rand((2, 3), _src, -3, 3))
case("asarray[list]", lambda: tnp.asarray([[1, 2], [3, 4]]), lambda: np.asarray([[1, 2], [3, 4]]))


