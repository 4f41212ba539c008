"""Op-table rows for tracegrad.numpy's composite functions (written over other tnp functions,
no primitive of their own): elementwise (hypot, cbrt, fmod, frexp, isclose ...), NaN-ignoring
reductions and statistics, shapes and arrangement, creation, sequences and polynomials."""

from __future__ import annotations

import numpy as np

import tracegrad.numpy as tnp
from tests.ops.optable import BOOL, F32, F64, I32, I64, case, rand


def _ulps(name, dtype, n=2) -> dict:
    """cbrt and hypot are compositions (exp2/log2 and a Newton step; a scaled sqrt), within
    `n` ulps of NumPy's libm calls."""
    if name not in ("cbrt", "hypot") or np.dtype(dtype).kind != "f":
        return {}
    return {"rtol": n * float(np.finfo(dtype).eps),
            "why": f"{name} is a composition: within {n} ulps of NumPy's libm call"}


SPECIAL = np.array([0.0, -0.0, 1.5, -2.5, np.inf, -np.inf, np.nan, 1e-300, -7.0])

# -- elementwise ---------------------------------------------------------------------------------

for _name in ("trunc", "signbit", "fabs", "cbrt", "deg2rad", "radians", "rad2deg", "degrees",
              "sinc", "isposinf", "isneginf", "real", "imag", "conj", "conjugate",
              "iscomplex", "isreal", "angle", "nan_to_num", "modf", "frexp"):
    f, r = getattr(tnp, _name), getattr(np, _name)
    for _dt in (F64, F32, I32, I64):
        case(f"{_name}[{_dt}]", f, r, rand((2, 3), _dt, -4, 4, seed=21),
             grad_argnums=(0,) if _dt == F64 and _name not in (
                 "trunc", "signbit", "isposinf", "isneginf", "iscomplex", "isreal", "angle",
                 "imag", "frexp") else (), **_ulps(_name, F64 if _dt in (I32, I64) else _dt))
    case(f"{_name}[special]", f, r, SPECIAL, **_ulps(_name, F64))
case("angle[deg=True]", lambda a: tnp.angle(a, deg=True), lambda a: np.angle(a, deg=True),
     np.array([-1.0, 2.0, -0.0]))
case("sinc[0]", tnp.sinc, np.sinc, np.array([0.0, 0.25, -1.0]), grad_argnums=(0,))
case("cbrt[python scalar]", lambda: tnp.cbrt(-27.0), lambda: np.cbrt(-27.0),
     **_ulps("cbrt", F64))
case("nan_to_num[values]", lambda a: tnp.nan_to_num(a, nan=-1.0, posinf=9.0, neginf=-9.0),
     lambda a: np.nan_to_num(a, nan=-1.0, posinf=9.0, neginf=-9.0), SPECIAL)
case("nan_to_num[f32]", tnp.nan_to_num, np.nan_to_num, SPECIAL.astype(F32))
case("nan_to_num[bool]", tnp.nan_to_num, np.nan_to_num, rand((3,), BOOL))

_PAIRS = ((F64, F64), (F32, F32), (I32, F32), (I64, I64), (F32, I64))
for _name in ("hypot", "copysign", "fmod", "heaviside", "float_power", "divmod"):
    f, r = getattr(tnp, _name), getattr(np, _name)
    for _da, _db in _PAIRS:
        a = rand((2, 3), _da, -4, 4, seed=22)
        b = rand((3,), _db, 1, 3, seed=23) * np.array([1, -1, 1]).astype(_db)
        grad = {"hypot": (0, 1), "copysign": (0,), "fmod": (0,), "heaviside": (1,),
                "float_power": (0,), "divmod": ()}[_name]
        if _name == "float_power":
            a = np.abs(a) + np.array(1, a.dtype)
        case(f"{_name}[{_da},{_db}]", f, r, a, b,
             grad_argnums=grad if (_da, _db) == (F64, F64) else (),
             **_ulps(_name, np.result_type(r(a[:1, :1], b[:1])[0] if _name == "divmod"
                                           else r(a[:1, :1], b[:1]))))
    case(f"{_name}[special]", f, r, SPECIAL, SPECIAL[::-1].copy(), **_ulps(_name, F64))
    case(f"{_name}[weak]", lambda a, f=f: f(a, 2.0), lambda a, r=r: r(a, 2.0),
         rand((3,), F32, 1, 3), **_ulps(_name, F32))
case("hypot[huge,tiny]", tnp.hypot, np.hypot, np.array([1e300, 1e-300, 3.0, 0.0]),
     np.array([1e300, 1e-300, 4.0, 0.0]), **_ulps("hypot", F64))
case("heaviside[zeros]", tnp.heaviside, np.heaviside, np.array([-1.0, 0.0, 2.0, 0.0]),
     np.array([0.5, 0.5, 0.5, 0.25]), grad_argnums=(1,))
case("fmod[i32,zero divisor]", tnp.fmod, np.fmod, np.array([5, -5, 7], I32),
     np.array([3, 3, 0], I32))
for _da, _db in ((F64, I64), (F32, I32), (F64, I32)):
    case(f"ldexp[{_da},{_db}]", tnp.ldexp, np.ldexp, rand((4,), _da, -3, 3, seed=24),
         np.array([0, 3, -5, 40], _db), grad_argnums=(0,) if _da == F64 else ())
case("ldexp[huge exponent]", tnp.ldexp, np.ldexp, np.array([1e-300, 3.0]),
     np.array([1100, -1000]))
case("frexp[powers of two]", tnp.frexp, np.frexp,
     np.array([1.0, 2.0, 0.5, 2.0**-1022, 2.0**1023, 3.0 * 2.0**-1060, -(2.0**52)]))

_CLOSE_A = np.array([1.0, 1.0 + 1e-9, np.inf, np.inf, np.nan, 1e8, 0.0, -np.inf])
_CLOSE_B = np.array([1.0, 1.0, np.inf, -np.inf, np.nan, 1e8 + 1, 1e-9, 5.0])
for _name in ("isclose", "allclose"):
    f, r = getattr(tnp, _name), getattr(np, _name)
    case(f"{_name}[special]", f, r, _CLOSE_A, _CLOSE_B)
    case(f"{_name}[equal_nan]", lambda a, b, f=f: f(a, b, equal_nan=True),
         lambda a, b, r=r: r(a, b, equal_nan=True), _CLOSE_A, _CLOSE_B)
    case(f"{_name}[tolerances]", lambda a, b, f=f: f(a, b, rtol=0.1, atol=0.5),
         lambda a, b, r=r: r(a, b, rtol=0.1, atol=0.5), rand((3, 4), seed=1),
         rand((4,), seed=2))
    case(f"{_name}[i32,i32]", f, r, rand((5,), I32), rand((5,), I32, seed=1))
    case(f"{_name}[f32,f32]", f, r, rand((5,), F32), rand((5,), F32, seed=1) * 1e-6 +
         rand((5,), F32))
for _name in ("array_equal", "array_equiv"):
    f, r = getattr(tnp, _name), getattr(np, _name)
    _x = rand((2, 3), I32)
    case(f"{_name}[same]", f, r, _x, _x.copy())
    case(f"{_name}[differ]", f, r, _x, _x + np.array(1, I32))
    case(f"{_name}[shapes]", f, r, rand((2, 3)), rand((3, 2)))
    case(f"{_name}[broadcast]", f, r, np.ones((2, 3)), np.ones(3))
case("array_equal[equal_nan]", lambda a, b: tnp.array_equal(a, b, equal_nan=True),
     lambda a, b: np.array_equal(a, b, equal_nan=True), SPECIAL, SPECIAL.copy())

# -- arrangement ---------------------------------------------------------------------------------

X234 = rand((2, 3, 4), seed=30)
for _shift, _axis in ((1, None), (-2, 1), (5, 0), ((1, 2), (0, 2)), (0, -1), (3, (0, 1)),
                     ((1, 2), None), ((1, -3), 1), ((1, 2), (2, 2))):  # shifts broadcast and add
    case(f"roll[{_shift},axis={_axis}]", lambda a, s=_shift, x=_axis: tnp.roll(a, s, x),
         lambda a, s=_shift, x=_axis: np.roll(a, s, x), X234, grad_argnums=(0,))
case("roll[i32,empty]", lambda a: tnp.roll(a, 2, 0), lambda a: np.roll(a, 2, 0),
     rand((0, 3), I32))
for _k, _axes in ((1, (0, 1)), (2, (0, 1)), (3, (1, 2)), (-1, (2, 0)), (4, (0, 1))):
    case(f"rot90[k={_k},axes={_axes}]", lambda a, k=_k, x=_axes: tnp.rot90(a, k, x),
         lambda a, k=_k, x=_axes: np.rot90(a, k, x), X234, grad_argnums=(0,))
for _name in ("fliplr", "flipud", "matrix_transpose"):
    case(f"{_name}[3-D]", getattr(tnp, _name), getattr(np, _name), X234, grad_argnums=(0,))
case("flipud[1-D bool]", tnp.flipud, np.flipud, rand((5,), BOOL))
for _shape in ((), (3,), (2, 3), (2, 3, 4)):
    for _name in ("atleast_1d", "atleast_2d", "atleast_3d"):
        case(f"{_name}[{_shape}]", getattr(tnp, _name), getattr(np, _name), rand(_shape),
             grad_argnums=(0,))
case("atleast_3d[two arrays]", lambda a, b: tnp.atleast_3d(a, b),
     lambda a, b: np.atleast_3d(a, b), rand((3,)), rand((), I32))
for _name, _shapes in (("column_stack", ((3,), (3, 2))), ("dstack", ((2, 3), (2, 3, 2))),
                       ("dstack", ((3,), (3,))), ("column_stack", ((4,), (4,)))):
    f, r = getattr(tnp, _name), getattr(np, _name)
    case(f"{_name}[{_shapes}]", lambda a, b, f=f: f([a, b]), lambda a, b, r=r: r([a, b]),
         rand(_shapes[0], seed=1), rand(_shapes[1], seed=2), grad_argnums=(0, 1))
case("column_stack[i32,f32]", lambda a, b: tnp.column_stack((a, b)),
     lambda a, b: np.column_stack((a, b)), rand((3,), I32), rand((3,), F32))
for _arg, _axis in ((3, 0), (4, 1), (5, 1), ([1, 3], 1), (7, 0)):
    case(f"array_split[{_arg},axis={_axis}]",
         lambda a, s=_arg, x=_axis: tnp.array_split(a, s, x),
         lambda a, s=_arg, x=_axis: tuple(np.array_split(a, s, x)), rand((5, 6)),
         grad_argnums=(0,))
for _name, _shape, _arg in (("hsplit", (4, 6), 3), ("hsplit", (6,), [2]), ("vsplit", (4, 6), 2),
                            ("dsplit", (2, 2, 4), [1, 3])):
    f, r = getattr(tnp, _name), getattr(np, _name)
    case(f"{_name}[{_shape},{_arg}]", lambda a, f=f, s=_arg: tuple(f(a, s)),
         lambda a, r=r, s=_arg: tuple(r(a, s)), rand(_shape), grad_argnums=(0,))
case("unstack[axis=1]", lambda a: tnp.unstack(a, axis=1), lambda a: np.unstack(a, axis=1),
     X234, grad_argnums=(0,))
for _axis, _start in ((2, 0), (0, 3), (1, 1), (-1, 1)):
    case(f"rollaxis[{_axis},{_start}]", lambda a, x=_axis, s=_start: tnp.rollaxis(a, x, s),
         lambda a, x=_axis, s=_start: np.rollaxis(a, x, s), X234)
case("permute_dims", lambda a: tnp.permute_dims(a, (2, 0, 1)),
     lambda a: np.permute_dims(a, (2, 0, 1)), X234, grad_argnums=(0,))
case("concat[axis=1]", lambda a, b: tnp.concat([a, b], axis=1),
     lambda a, b: np.concat([a, b], axis=1), rand((2, 3)), rand((2, 1), I32),
     grad_argnums=(0,))
for _axis in (None, 0, 1):
    case(f"append[axis={_axis}]", lambda a, b, x=_axis: tnp.append(a, b, x),
         lambda a, b, x=_axis: np.append(a, b, x), rand((2, 3)), rand((2, 3), seed=3),
         grad_argnums=(0, 1))
for _obj, _axis in ((1, 0), ([0, 2], 1), (slice(0, 4, 2), None), (-1, 1), ([], 0)):
    case(f"delete[{_obj},axis={_axis}]", lambda a, o=_obj, x=_axis: tnp.delete(a, o, x),
         lambda a, o=_obj, x=_axis: np.delete(a, o, x), rand((3, 4)), grad_argnums=(0,))
for _shape in ((2, 4), 7, (0,), (3, 2), 2):
    case(f"resize[{_shape}]", lambda a, s=_shape: tnp.resize(a, s),
         lambda a, s=_shape: np.resize(a, s), rand((2, 3)), grad_argnums=(0,))
case("resize[empty]", lambda a: tnp.resize(a, (2, 2)), lambda a: np.resize(a, (2, 2)),
     rand((0,), I32))
for _k in (0, 1, -2):
    case(f"diagflat[k={_k}]", lambda a, k=_k: tnp.diagflat(a, k),
         lambda a, k=_k: np.diagflat(a, k), rand((2, 2)), grad_argnums=(0,))
case("broadcast_arrays", lambda a, b, c: tnp.broadcast_arrays(a, b, c),
     lambda a, b, c: np.broadcast_arrays(a, b, c), rand((3, 1)), rand((4,), I32), rand(()),
     grad_argnums=(0, 2))
case("broadcast_shapes", lambda a: tnp.full_like(a, sum(tnp.broadcast_shapes((3, 1), 4, ()))),
     lambda a: np.full_like(a, sum(np.broadcast_shapes((3, 1), 4, ()))), rand((2,)))
for _kw in ({}, {"indexing": "ij"}, {"sparse": True}, {"indexing": "ij", "sparse": True}):
    case(f"meshgrid[{_kw}]", lambda a, b, c, k=_kw: tnp.meshgrid(a, b, c, **k),
         lambda a, b, c, k=_kw: tuple(np.meshgrid(a, b, c, **k)), rand((3,)), rand((2,), I32),
         rand((4,), seed=1), grad_argnums=(0, 2))
case("meshgrid[2-D input]", lambda a, b: tnp.meshgrid(a, b),
     lambda a, b: tuple(np.meshgrid(a, b)), rand((2, 2)), rand((3,)))
case("ix_", lambda a, b: tnp.ix_(a, b), lambda a, b: np.ix_(a, b), np.array([0, 2]),
     np.array([1, 0, 1]))
case("ix_[index]", lambda x: x[tnp.ix_([0, 2], [1, 3])], lambda x: x[np.ix_([0, 2], [1, 3])],
     rand((3, 4)), grad_argnums=(0,))
case("block[2x2]", lambda a, b, c, d: tnp.block([[a, b], [c, d]]),
     lambda a, b, c, d: np.block([[a, b], [c, d]]), rand((2, 2)), rand((2, 3)),
     rand((1, 2)), rand((1, 3)), grad_argnums=(0, 1, 2, 3))
case("block[1-D,scalars]", lambda a, b: tnp.block([a, b, 1.0]),
     lambda a, b: np.block([a, b, 1.0]), rand((3,)), rand((), I32))
case("block[depth 3]", lambda a, b: tnp.block([[[a]], [[b]]]),
     lambda a, b: np.block([[[a]], [[b]]]), rand((2,)), rand((2,)))

for _name, _ref in (("acos", np.arccos), ("asin", np.arcsin), ("atan", np.arctan),
                    ("acosh", np.arccosh), ("asinh", np.arcsinh), ("atanh", np.arctanh)):
    _lo, _hi = (1.5, 3) if _name == "acosh" else (-0.9, 0.9)
    case(f"{_name}[alias]", getattr(tnp, _name), _ref, rand((3,), F64, _lo, _hi),
         grad_argnums=(0,))
case("atan2[alias]", tnp.atan2, np.arctan2, rand((3,)), rand((3,), seed=1), grad_argnums=(0, 1))
case("pow[alias]", tnp.pow, np.power, rand((3,), F64, 0.5, 2), rand((3,), seed=1),
     grad_argnums=(0, 1))
case("bitwise_invert[alias]", tnp.bitwise_invert, np.invert, rand((4,), I32))

# -- NaN-ignoring reductions and statistics --------------------------------------------------------

XNAN = rand((3, 4), seed=40)
XNAN[0, 1] = XNAN[2, 3] = np.nan
XNAN_ROW = XNAN.copy()
XNAN_ROW[1] = np.nan  # an all-NaN row
for _name in ("nansum", "nanprod", "nanmax", "nanmin", "nanmean", "nanvar", "nanstd",
              "nanargmax", "nanargmin", "nancumsum", "nancumprod"):
    f, r = getattr(tnp, _name), getattr(np, _name)
    cum = _name.startswith("nancum")
    grad = () if "arg" in _name else (0,)
    for _axis in ((None, 0, -1) if cum else (None, 0, 1, (0, 1))):
        if "arg" in _name and isinstance(_axis, tuple):
            continue
        case(f"{_name}[axis={_axis}]", lambda a, f=f, x=_axis: f(a, axis=x),
             lambda a, r=r, x=_axis: r(a, axis=x), XNAN, grad_argnums=grad)
    for _dt in (F32, I32, BOOL):
        if _dt == BOOL and _name in ("nanvar", "nanstd", "nanmean"):
            continue
        case(f"{_name}[{_dt}]", lambda a, f=f: f(a, axis=0), lambda a, r=r: r(a, axis=0),
             rand((3, 4), _dt, -2, 2, seed=41),
             **({"rtol": 4 * float(np.finfo(F32).eps),
                 "why": "a float32 sum of squares in another order than NumPy's pairwise"}
                if _dt == F32 and _name in ("nanvar", "nanstd", "nanmean") else {}))
    if not cum:
        case(f"{_name}[keepdims]", lambda a, f=f: f(a, axis=1, keepdims=True),
             lambda a, r=r: r(a, axis=1, keepdims=True), XNAN, grad_argnums=grad)
for _name in ("nansum", "nanmax", "nanmin", "nanmean"):
    f, r = getattr(tnp, _name), getattr(np, _name)
    case(f"{_name}[all-NaN row]", lambda a, f=f: f(a, axis=1), lambda a, r=r: r(a, axis=1),
         XNAN_ROW)
# fewer numbers than ddof + 1 in a row: NaN there (NumPy), and no NaN in the other rows'
# gradients
for _name in ("nanvar", "nanstd"):
    f, r = getattr(tnp, _name), getattr(np, _name)
    case(f"{_name}[count <= ddof]", lambda a, f=f: f(a, axis=1, ddof=2),
         lambda a, r=r: r(a, axis=1, ddof=2), np.array([[1.0, 3.0, np.nan], [2.0, 5.0, 4.0]]))
    case(f"{_name}[count <= ddof, gradient]", lambda a, f=f: f(a, axis=1, ddof=1)[0],
         lambda a, r=r: r(a, axis=1, ddof=1)[0],
         np.array([[1.0, 3.0, 2.5], [5.0, np.nan, np.nan]]), grad_argnums=(0,))
case("nanvar[ddof=1]", lambda a: tnp.nanvar(a, axis=1, ddof=1),
     lambda a: np.nanvar(a, axis=1, ddof=1), XNAN, grad_argnums=(0,))
case("nanstd[ddof=1]", lambda a: tnp.nanstd(a, ddof=1), lambda a: np.nanstd(a, ddof=1), XNAN,
     grad_argnums=(0,))

for _dt in (F64, F32, I32, BOOL):
    for _axis in (None, 0, (0, 1)):
        case(f"count_nonzero[{_dt},axis={_axis}]",
             lambda a, x=_axis: tnp.count_nonzero(a, axis=x),
             lambda a, x=_axis: np.count_nonzero(a, axis=x), rand((3, 4), _dt, -1, 1, seed=42))
for _dt in (F64, I32):
    for _axis, _keep in ((None, False), (1, True), (0, False)):
        case(f"ptp[{_dt},axis={_axis},keepdims={_keep}]",
             lambda a, x=_axis, k=_keep: tnp.ptp(a, axis=x, keepdims=k),
             lambda a, x=_axis, k=_keep: np.ptp(a, axis=x, keepdims=k), rand((3, 4), _dt),
             grad_argnums=(0,) if _dt == F64 else ())

X34 = rand((3, 4), seed=43)
W34 = rand((3, 4), F64, 0.5, 2, seed=44)
case("average[no weights]", tnp.average, np.average, X34, grad_argnums=(0,))
case("average[i32,axis=1]", lambda a: tnp.average(a, axis=1), lambda a: np.average(a, axis=1),
     rand((3, 4), I32))
case("average[weights]", lambda a, w: tnp.average(a, weights=w),
     lambda a, w: np.average(a, weights=w), X34, W34, grad_argnums=(0, 1))
case("average[1-D weights,axis=1,returned]",
     lambda a, w: tnp.average(a, axis=1, weights=w, returned=True),
     lambda a, w: np.average(a, axis=1, weights=w, returned=True), X34, W34[0],
     grad_argnums=(0, 1))
case("average[i32,f32 weights,keepdims]",
     lambda a, w: tnp.average(a, axis=0, weights=w, keepdims=True),
     lambda a, w: np.average(a, axis=0, weights=w, keepdims=True), rand((3, 4), I32),
     W34.astype(F32))
case("average[returned,no weights]", lambda a: tnp.average(a, axis=0, returned=True),
     lambda a: np.average(a, axis=0, returned=True), X34)

X345 = rand((3, 4, 5), seed=45)
for _name in ("median", "quantile", "percentile"):
    f, r = getattr(tnp, _name), getattr(np, _name)
    qs = {"median": (None,), "quantile": (0.3, 1.0, np.array([0.0, 0.25, 0.5])),
          "percentile": (30.0, np.array([10.0, 90.0]))}[_name]
    for _q in qs:
        for _axis, _keep in ((None, False), (1, False), (-1, True), ((0, 2), False)):
            args = () if _q is None else (_q,)
            case(f"{_name}[q={_q},axis={_axis},keepdims={_keep}]",
                 lambda a, f=f, q=args, x=_axis, k=_keep: f(a, *q, axis=x, keepdims=k),
                 lambda a, r=r, q=args, x=_axis, k=_keep: r(a, *q, axis=x, keepdims=k),
                 X345, grad_argnums=(0,))
    for _dt in (F32, I32, I64):
        args = () if _name == "median" else (qs[0],)
        case(f"{_name}[{_dt}]", lambda a, f=f, q=args: f(a, *q, axis=0),
             lambda a, r=r, q=args: r(a, *q, axis=0), rand((5, 3), _dt, -5, 5, seed=46))
    case(f"{_name}[nan]", lambda a, f=f, q=qs[-1:] if _name != "median" else ():
         f(a, *q, axis=1), lambda a, r=r, q=qs[-1:] if _name != "median" else (): r(a, *q,
                                                                                   axis=1),
         XNAN)
for _method in ("lower", "higher", "midpoint", "nearest"):
    for _dt in (F64, I32):
        case(f"quantile[method={_method},{_dt}]",
             lambda a, m=_method: tnp.quantile(a, np.array([0.1, 0.5, 0.8]), axis=0, method=m),
             lambda a, m=_method: np.quantile(a, np.array([0.1, 0.5, 0.8]), axis=0, method=m),
             rand((6, 2), _dt, -5, 5, seed=47), grad_argnums=(0,) if _dt == F64 else ())
case("median[even,ties]", tnp.median, np.median, np.array([1.0, 3.0, 3.0, 7.0]))

for _n, _axis in ((1, -1), (2, 0), (0, -1), (3, 1)):
    case(f"diff[n={_n},axis={_axis}]", lambda a, n=_n, x=_axis: tnp.diff(a, n, x),
         lambda a, n=_n, x=_axis: np.diff(a, n, x), rand((4, 5), seed=48), grad_argnums=(0,))
case("diff[bool]", tnp.diff, np.diff, rand((6,), BOOL))
case("diff[i32,prepend,append]", lambda a: tnp.diff(a, prepend=0, append=np.array([[5], [6]])),
     lambda a: np.diff(a, prepend=0, append=np.array([[5], [6]])), rand((2, 3), I32))
case("diff[too many]", lambda a: tnp.diff(a, 5), lambda a: np.diff(a, 5), rand((3,)))
case("ediff1d", tnp.ediff1d, np.ediff1d, rand((2, 3)), grad_argnums=(0,))
case("ediff1d[ends]", lambda a: tnp.ediff1d(a, to_end=[7, 8], to_begin=-1),
     lambda a: np.ediff1d(a, to_end=[7, 8], to_begin=-1), rand((4,), I32))
for _name in ("cumulative_sum", "cumulative_prod"):
    f, r = getattr(tnp, _name), getattr(np, _name)
    for _axis, _init in ((0, False), (1, True), (-1, False)):
        case(f"{_name}[axis={_axis},include_initial={_init}]",
             lambda a, f=f, x=_axis, i=_init: f(a, axis=x, include_initial=i),
             lambda a, r=r, x=_axis, i=_init: r(a, axis=x, include_initial=i),
             rand((3, 4), F64, 0.5, 1.5), grad_argnums=(0,))
    case(f"{_name}[1-D,i32,initial]", lambda a, f=f: f(a, include_initial=True),
         lambda a, r=r: r(a, include_initial=True), rand((4,), I32))
    case(f"{_name}[bool,dtype]", lambda a, f=f: f(a, dtype=F32),
         lambda a, r=r: r(a, dtype=F32), rand((4,), BOOL))
