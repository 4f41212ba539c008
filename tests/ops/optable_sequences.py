"""Op-table rows for tracegrad.numpy's second slice of compositions (issue 24): convolution
and polynomials, integrals and differences, searching and interpolation, creation and index
helpers, windows, vector products, selection, covariance and the NaN-ignoring quantiles."""

from __future__ import annotations

import numpy as np

import tracegrad.numpy as tnp
from tests.ops.optable import BOOL, F32, F64, I32, I64, case, rand, ulps

A5, V3, W7 = rand((5,), seed=50), rand((3,), seed=51), rand((7,), seed=52)
X35 = rand((3, 5), seed=53)


def _sum_order(reference, *args) -> dict:
    return {**ulps(reference, *args),
            "why": "a sum of products in another order than NumPy's loop (matmul)"}


# -- convolution and polynomials ---------------------------------------------------------

for _mode in ("full", "same", "valid"):
    for _a, _v in ((A5, V3), (V3, A5), (A5, W7[:1]), (rand((4,), seed=54), rand((2,), seed=55))):
        for _name in ("convolve", "correlate"):
            f, r = getattr(tnp, _name), getattr(np, _name)
            case(f"{_name}[{_mode},{len(_a)},{len(_v)}]",
                 lambda a, v, f=f, m=_mode: f(a, v, m), lambda a, v, r=r, m=_mode: r(a, v, m),
                 _a, _v, grad_argnums=(0, 1),
                 **_sum_order(lambda a, v, r=r, m=_mode: r(a, v, m), _a, _v))
for _da, _db in ((I32, I64), (F32, F32), (I64, F32), (BOOL, I32)):
    case(f"convolve[{_da},{_db}]", tnp.convolve, np.convolve, rand((5,), _da, -3, 3, seed=56),
         rand((3,), _db, -3, 3, seed=57),
         **_sum_order(np.convolve, rand((5,), _da, -3, 3, seed=56), rand((3,), _db, -3, 3,
                                                                            seed=57)))
case("correlate[default mode]", tnp.correlate, np.correlate, W7, V3, grad_argnums=(0, 1),
     **_sum_order(np.correlate, W7, V3))

case("polyval", tnp.polyval, np.polyval, V3, X35, grad_argnums=(0, 1))
case("polyval[i32 x]", tnp.polyval, np.polyval, V3, rand((4,), I32))
case("polyval[i64,i64]", tnp.polyval, np.polyval, rand((4,), I64, -3, 3), rand((5,), I64))
case("polyval[f32 p,weak x]", lambda p: tnp.polyval(p, 1.5), lambda p: np.polyval(p, 1.5),
     rand((3,), F32))
for _name in ("polyadd", "polysub", "polymul"):
    f, r = getattr(tnp, _name), getattr(np, _name)
    for _a, _b in ((V3, A5), (A5, V3), (V3, V3[::-1].copy()), (rand((2,), I32), V3)):
        case(f"{_name}[{_a.dtype},{len(_a)},{len(_b)}]", f, r, _a, _b,
             grad_argnums=(0, 1) if _a.dtype == F64 else (),
             **(_sum_order(r, _a, _b) if _name == "polymul" else {}))
for _m in (0, 1, 2, 6):
    case(f"polyder[m={_m}]", lambda p, m=_m: tnp.polyder(p, m),
         lambda p, m=_m: np.polyder(p, m), A5, grad_argnums=(0,))
case("polyder[i32]", tnp.polyder, np.polyder, rand((4,), I32))
for _m, _k in ((0, None), (1, None), (2, None), (2, [1.0, -2.0]), (1, 3.0)):
    case(f"polyint[m={_m},k={_k}]", lambda p, m=_m, k=_k: tnp.polyint(p, m, k),
         lambda p, m=_m, k=_k: np.polyint(p, m, k), A5, grad_argnums=(0,))
case("polyint[f32]", tnp.polyint, np.polyint, rand((3,), F32))
case("polyint[i64]", tnp.polyint, np.polyint, rand((3,), I64))
for _n, _inc in ((None, False), (None, True), (0, False), (1, True), (4, False)):
    case(f"vander[N={_n},increasing={_inc}]", lambda x, n=_n, i=_inc: tnp.vander(x, n, i),
         lambda x, n=_n, i=_inc: np.vander(x, n, i), A5, grad_argnums=(0,))
for _dt in (F32, I32, BOOL):
    case(f"vander[{_dt}]", tnp.vander, np.vander, rand((4,), _dt, -3, 3))

# -- integrals and differences ------------------------------------------------------------

case("trapezoid", tnp.trapezoid, np.trapezoid, X35, grad_argnums=(0,))
case("trapezoid[x 1-D]", lambda y, x: tnp.trapezoid(y, x), lambda y, x: np.trapezoid(y, x),
     X35, np.sort(A5), grad_argnums=(0, 1))
case("trapezoid[x 2-D,axis=0]", lambda y, x: tnp.trapezoid(y, x, axis=0),
     lambda y, x: np.trapezoid(y, x, axis=0), X35, np.sort(rand((3, 5), seed=58), 0),
     grad_argnums=(0, 1))
case("trapezoid[dx,axis=0]", lambda y: tnp.trapezoid(y, dx=0.25, axis=0),
     lambda y: np.trapezoid(y, dx=0.25, axis=0), X35, grad_argnums=(0,))
for _dt in (I32, F32, BOOL):
    case(f"trapezoid[{_dt}]", tnp.trapezoid, np.trapezoid, rand((6,), _dt, -3, 3))
case("trapezoid[one sample]", tnp.trapezoid, np.trapezoid, rand((2, 1)))

case("gradient", tnp.gradient, np.gradient, X35, grad_argnums=(0,))
case("gradient[1-D]", tnp.gradient, np.gradient, W7, grad_argnums=(0,))
case("gradient[spacings]", lambda f: tnp.gradient(f, 0.5, 2.0),
     lambda f: np.gradient(f, 0.5, 2.0), X35, grad_argnums=(0,))
case("gradient[edge_order=2,axis=1]", lambda f: tnp.gradient(f, axis=1, edge_order=2),
     lambda f: np.gradient(f, axis=1, edge_order=2), X35, grad_argnums=(0,))
case("gradient[coordinates]", lambda f, x: tnp.gradient(f, x),
     lambda f, x: np.gradient(f, x), W7, np.cumsum(rand((7,), F64, 0.1, 1.0, seed=59)),
     grad_argnums=(0, 1))
case("gradient[uniform coordinates]", lambda f: tnp.gradient(f, np.arange(7.0) * 0.5),
     lambda f: np.gradient(f, np.arange(7.0) * 0.5), W7, grad_argnums=(0,))
for _dt in (I32, F32):
    case(f"gradient[{_dt}]", lambda f: tnp.gradient(f, axis=0),
         lambda f: np.gradient(f, axis=0), rand((4, 3), _dt, -5, 5))

PHASE = np.cumsum(rand((10,), F64, -5, 5, seed=60))
case("unwrap", tnp.unwrap, np.unwrap, PHASE, grad_argnums=(0,))
case("unwrap[2-D,axis=0]", lambda p: tnp.unwrap(p, axis=0), lambda p: np.unwrap(p, axis=0),
     PHASE.reshape(5, 2), grad_argnums=(0,))
case("unwrap[period,discont]", lambda p: tnp.unwrap(p, discont=3.0, period=4.0),
     lambda p: np.unwrap(p, discont=3.0, period=4.0), PHASE, grad_argnums=(0,))
case("unwrap[i64,period=6]", lambda p: tnp.unwrap(p, period=6),
     lambda p: np.unwrap(p, period=6), np.array([0, 5, 9, 2, 14, 3, 3]))
case("unwrap[f32]", tnp.unwrap, np.unwrap, PHASE.astype(F32))

# -- searching and interpolation ------------------------------------------------------------

SORTED = np.sort(W7)
SORTED[3] = SORTED[2]  # a tie
QUERIES = np.concatenate([rand((5,), F64, -3, 3, seed=61), SORTED[1:4], [np.nan, -9.0, 9.0]])
for _side in ("left", "right"):
    case(f"searchsorted[{_side}]", lambda a, v, s=_side: tnp.searchsorted(a, v, s),
         lambda a, v, s=_side: np.searchsorted(a, v, s), SORTED, QUERIES)
    case(f"searchsorted[{_side},NaN in a]", lambda a, v, s=_side: tnp.searchsorted(a, v, s),
         lambda a, v, s=_side: np.searchsorted(a, v, s), np.array([1.0, 2.0, np.nan, np.nan]),
         np.array([[0.0, 1.5], [2.0, np.nan]]))
    case(f"searchsorted[{_side},i32,scalar]", lambda a, s=_side: tnp.searchsorted(a, 2, s),
         lambda a, s=_side: np.searchsorted(a, 2, s), np.array([0, 2, 2, 5], I32))
case("searchsorted[sorter]", lambda a, v: tnp.searchsorted(a, v, sorter=np.argsort(W7)),
     lambda a, v: np.searchsorted(a, v, sorter=np.argsort(W7)), W7, QUERIES)
case("searchsorted[i64 a,f32 v]", tnp.searchsorted, np.searchsorted, np.arange(5),
     rand((4,), F32, -1, 6))
for _right in (False, True):
    case(f"digitize[right={_right}]", lambda x, b, r=_right: tnp.digitize(x, b, r),
         lambda x, b, r=_right: np.digitize(x, b, r), QUERIES, SORTED)
    case(f"digitize[decreasing,right={_right}]", lambda x, b, r=_right: tnp.digitize(x, b, r),
         lambda x, b, r=_right: np.digitize(x, b, r), QUERIES, SORTED[::-1].copy())
case("digitize[i32]", tnp.digitize, np.digitize, rand((3, 2), I32, -1, 6), np.arange(5))

XP = np.sort(rand((6,), seed=62))
FP = rand((6,), seed=63)
XS = np.concatenate([rand((8,), F64, -3, 3, seed=64), XP, [np.nan]])
case("interp", tnp.interp, np.interp, rand((2, 4), F64, -3, 3, seed=65), XP, FP,
     grad_argnums=(0, 1, 2))
case("interp[at sample points,outside,NaN]", tnp.interp, np.interp, XS, XP, FP)
case("interp[left,right]", lambda x, xp, fp: tnp.interp(x, xp, fp, left=-5.0, right=7.0),
     lambda x, xp, fp: np.interp(x, xp, fp, left=-5.0, right=7.0), XS, XP, FP)
case("interp[one point]", tnp.interp, np.interp, XS, XP[:1], FP[:1])
case("interp[i32,f32]", tnp.interp, np.interp, rand((5,), I32, -3, 3), XP.astype(F32),
     FP.astype(F32))
case("interp[scalar x]", lambda xp, fp: tnp.interp(0.25, xp, fp),
     lambda xp, fp: np.interp(0.25, xp, fp), XP, FP)

# -- creation and index helpers --------------------------------------------------------------

case("empty", lambda a: tnp.empty((2, 3)) + a, lambda a: np.zeros((2, 3)) + a, X35[0, :3])
case("empty_like", lambda a: tnp.empty_like(a, dtype=I32), lambda a: np.zeros_like(a, I32),
     X35)
case("array[ndmin]", lambda a: tnp.array(a, ndmin=3), lambda a: np.array(a, ndmin=3), A5,
     grad_argnums=(0,))
case("array[dtype]", lambda a: tnp.array(a, dtype=F32), lambda a: np.array(a, dtype=F32),
     X35)
case("array[list]", lambda a: tnp.array([1, 2]) * a, lambda a: np.array([1, 2]) * a,
     rand((2,), I32))
case("copy", tnp.copy, np.copy, X35, grad_argnums=(0,))
case("copy[bool]", tnp.copy, np.copy, rand((3,), BOOL))
case("logspace[static]", lambda a: tnp.logspace(0, 2, 5) * a,
     lambda a: np.logspace(0, 2, 5) * a, A5)
case("logspace[tensor start,base]", lambda s: tnp.logspace(s, 2.0, 5, base=2.0),
     lambda s: np.logspace(s, 2.0, 5, base=2.0), np.array(0.5), grad_argnums=(0,))
case("logspace[vector,axis=1]", lambda s: tnp.logspace(s, 2.0, 4, endpoint=False, axis=1),
     lambda s: np.logspace(s, 2.0, 4, endpoint=False, axis=1), np.array([0.5, 1.0]),
     grad_argnums=(0,))
case("geomspace[static]", lambda a: tnp.geomspace(1, 1000, 4) * a,
     lambda a: np.geomspace(1, 1000, 4) * a, rand((4,)))
case("geomspace[tensor]", lambda s: tnp.geomspace(s, 1000.0, 4),
     lambda s: np.geomspace(s, 1000.0, 4), np.array(2.0), grad_argnums=(0,))
case("geomspace[negative,endpoint=False]", lambda s: tnp.geomspace(s, -1000.0, 5, False),
     lambda s: np.geomspace(s, -1000.0, 5, False), np.array(-2.0), grad_argnums=(0,))
case("geomspace[vectors,axis=-1]", lambda s, e: tnp.geomspace(s, e, 4, axis=-1),
     lambda s, e: np.geomspace(s, e, 4, axis=-1), np.array([1.0, 2.0]), np.array([10.0, 50.0]),
     grad_argnums=(0, 1))
for _k in (0, 1, -2):
    case(f"tri[k={_k}]", lambda a, k=_k: a * tnp.tri(3, 5, k), lambda a, k=_k: a * np.tri(3, 5, k),
         X35, grad_argnums=(0,))
case("tri[int]", lambda a: a * tnp.tri(3, dtype=int), lambda a: a * np.tri(3, dtype=int),
     rand((3, 3), I32))
case("indices", lambda a: a[tnp.indices((2, 3))[1]], lambda a: a[np.indices((2, 3))[1]], A5,
     grad_argnums=(0,))
case("indices[sparse]", lambda a: a * tnp.indices((3, 5), sparse=True)[1],
     lambda a: a * np.indices((3, 5), sparse=True)[1], X35)
for _name in ("tril_indices_from", "triu_indices_from"):
    for _k in (0, 1, -1):
        case(f"{_name}[k={_k}]", lambda a, f=getattr(tnp, _name), k=_k: a[f(a, k)],
             lambda a, r=getattr(np, _name), k=_k: a[r(a, k)], X35, grad_argnums=(0,))
case("tril_indices", lambda a: a[tnp.tril_indices(3, 1, 5)], lambda a: a[np.tril_indices(3, 1, 5)],
     X35)
case("triu_indices", lambda a: a[tnp.triu_indices(3)], lambda a: a[np.triu_indices(3)],
     X35[:, :3])
case("diag_indices", lambda a: a[tnp.diag_indices(3)], lambda a: a[np.diag_indices(3)],
     X35[:, :3], grad_argnums=(0,))
case("diag_indices_from[3-D]", lambda a: a[tnp.diag_indices_from(a)],
     lambda a: a[np.diag_indices_from(a)], rand((2, 2, 2)), grad_argnums=(0,))
case("mask_indices", lambda a: a[tnp.mask_indices(3, tnp.triu, 1)],
     lambda a: a[np.mask_indices(3, np.triu, 1)], X35[:, :3])
for _name in ("bartlett", "blackman", "hamming", "hanning"):
    for _m in (0, 1, 6):
        case(f"{_name}[{_m}]", lambda a, f=getattr(tnp, _name), m=_m: a * f(m),
             lambda a, r=getattr(np, _name), m=_m: a * r(m), rand((_m,), seed=66),
             grad_argnums=(0,) if _m else ())

# -- vector products -----------------------------------------------------------------------

A43, B43, A42 = rand((4, 3), seed=67), rand((4, 3), seed=68), rand((4, 2), seed=69)
for _a, _b in ((A43, B43), (A42, B43), (A43, A42), (A42, A42[::-1].copy()), (A43[0], B43)):
    case(f"cross[{_a.shape},{_b.shape}]", tnp.cross, np.cross, _a, _b, grad_argnums=(0, 1))
case("cross[axis=0]", lambda a, b: tnp.cross(a, b, axis=0), lambda a, b: np.cross(a, b, axis=0),
     A43.T.copy(), B43.T.copy(), grad_argnums=(0, 1))
case("cross[axisa,axisc]", lambda a, b: tnp.cross(a, b, axisa=0, axisc=0),
     lambda a, b: np.cross(a, b, axisa=0, axisc=0), A43.T.copy(), B43, grad_argnums=(0, 1))
case("cross[i32,i64]", tnp.cross, np.cross, rand((3,), I32, -3, 3), rand((3,), I64, -3, 3))
for _a, _b in ((X35, A43), (A5, A43), (rand((2, 1, 2)), rand((3, 2))), (rand(()), V3)):
    case(f"kron[{_a.shape},{_b.shape}]", tnp.kron, np.kron, _a, _b, grad_argnums=(0, 1))
case("kron[i32,bool]", tnp.kron, np.kron, rand((2, 2), I32), rand((2, 3), BOOL))
case("vecdot", tnp.vecdot, np.vecdot, A43, B43[0], grad_argnums=(0, 1),
     **_sum_order(np.vecdot, A43, B43[0]))
case("vecdot[axis=0]", lambda a, b: tnp.vecdot(a, b, axis=0),
     lambda a, b: np.vecdot(a, b, axis=0), A43, B43, grad_argnums=(0, 1),
     **_sum_order(lambda a, b: np.vecdot(a, b, axis=0), A43, B43))
case("vecdot[i32]", tnp.vecdot, np.vecdot, rand((2, 3), I32), rand((3,), I32))
case("matvec", tnp.matvec, np.matvec, rand((2, 4, 3)), A43[0], grad_argnums=(0, 1),
     **_sum_order(np.matvec, rand((2, 4, 3)), A43[0]))
case("vecmat", tnp.vecmat, np.vecmat, A43[:2], rand((2, 3, 4)), grad_argnums=(0, 1),
     **_sum_order(np.vecmat, A43[:2], rand((2, 3, 4))))
case("matvec[f32,i32]", tnp.matvec, np.matvec, rand((3, 2), F32), rand((2,), I32))

# -- selection -------------------------------------------------------------------------------

case("select", lambda x: tnp.select([x < 0, x > 1], [x, x * x], -1.0),
     lambda x: np.select([x < 0, x > 1], [x, x * x], -1.0), X35, grad_argnums=(0,))
case("select[f32,weak choices]", lambda x: tnp.select([x < 0, x > 1], [1, x], 0),
     lambda x: np.select([x < 0, x > 1], [1, x], 0), rand((5,), F32))
case("select[i32,default array]", lambda x, d: tnp.select([x > 0], [x], d),
     lambda x, d: np.select([x > 0], [x], d), rand((2, 3), I32), rand((3,), F64),
     grad_argnums=(1,))
CHOICE = np.array([[0, 1, 2], [2, 1, 0]])
case("choose", lambda i, a, b: tnp.choose(i, [a, b, 5.0]),
     lambda i, a, b: np.choose(i, [a, b, 5.0]), CHOICE, V3, rand((2, 3)), grad_argnums=(1, 2))
for _mode in ("wrap", "clip"):
    case(f"choose[{_mode}]", lambda i, a, b, m=_mode: tnp.choose(i, [a, b], mode=m),
         lambda i, a, b, m=_mode: np.choose(i, [a, b], mode=m), CHOICE * 2 - 1, V3,
         rand((2, 3)), grad_argnums=(1, 2))
case("choose[i32]", lambda i, a: tnp.choose(i, [a, -a]), lambda i, a: np.choose(i, [a, -a]),
     rand((4,), I32, 0, 1), rand((4,), I32))
case("isin", tnp.isin, np.isin, rand((3, 4), I32, -3, 3), np.array([1, -2, 7]))
case("isin[invert,f64]", lambda x, t: tnp.isin(x, t, invert=True),
     lambda x, t: np.isin(x, t, invert=True), np.array([1.0, np.nan, 2.5]),
     np.array([[2.5, np.nan]]))
case("isin[scalar]", lambda t: tnp.isin(3, t), lambda t: np.isin(3, t), rand((4,), I64))
for _obj, _values, _axis in ((1, 9.0, None), ([0, 2, 2], [7.0, 8.0, 9.0], 1),
                             (2, [[1.0, 2.0, 3.0, 4.0, 5.0]], 0), (1, [1.0, 2.0, 3.0], 1),
                             ([1], [[1.0], [2.0], [3.0]], 1), (slice(0, 2), -1.0, 1),
                             (-1, 5, 0), (np.array([3, 0]), 2.5, None)):
    case(f"insert[{_obj},{_values},axis={_axis}]",
         lambda a, o=_obj, v=_values, x=_axis: tnp.insert(a, o, v, x),
         lambda a, o=_obj, v=_values, x=_axis: np.insert(a, o, v, x), X35, grad_argnums=(0,))
case("insert[tensor values]", lambda a, v: tnp.insert(a, [1, 3], v, axis=1),
     lambda a, v: np.insert(a, [1, 3], v, axis=1), X35, rand((3, 1)), grad_argnums=(0, 1))
case("insert[i32,float values]", lambda a: tnp.insert(a, 1, 2.7),
     lambda a: np.insert(a, 1, 2.7), rand((4,), I32))

# -- covariance ------------------------------------------------------------------------------

for _name, _kw in (("cov", {}), ("cov", {"rowvar": False}), ("cov", {"bias": True}),
                   ("cov", {"ddof": 2}), ("corrcoef", {}), ("corrcoef", {"rowvar": False})):
    f, r = getattr(tnp, _name), getattr(np, _name)
    case(f"{_name}[{_kw}]", lambda a, f=f, k=_kw: f(a, **k), lambda a, r=r, k=_kw: r(a, **k),
         X35, grad_argnums=(0,), **_sum_order(lambda a, r=r, k=_kw: r(a, **k), X35))
    case(f"{_name}[y,{_kw}]", lambda a, b, f=f, k=_kw: f(a, b, **k),
         lambda a, b, r=r, k=_kw: r(a, b, **k), A5, W7[:5], grad_argnums=(0, 1),
         **_sum_order(lambda a, b, r=r, k=_kw: r(a, b, **k), A5, W7[:5]))
for _dt in (F32, I32):
    case(f"cov[{_dt}]", tnp.cov, np.cov, rand((3, 4), _dt, -3, 3),
         **_sum_order(np.cov, rand((3, 4), _dt, -3, 3)))
case("cov[f32,dtype]", lambda a: tnp.cov(a, dtype=F32), lambda a: np.cov(a, dtype=F32),
     rand((3, 4), F32), **_sum_order(lambda a: np.cov(a, dtype=F32), rand((3, 4), F32)))
case("corrcoef[1-D]", tnp.corrcoef, np.corrcoef, A5)

# -- NaN-ignoring order statistics -----------------------------------------------------------

XN = rand((4, 5, 3), seed=70)
XN[0, 1, 2] = XN[2, 3, 0] = XN[1, 0, 0] = np.nan
XN[3, :, 1] = np.nan  # an all-NaN slice along axis 1
for _name in ("nanmedian", "nanquantile", "nanpercentile"):
    f, r = getattr(tnp, _name), getattr(np, _name)
    qs = {"nanmedian": (None,), "nanquantile": (0.3, np.array([0.0, 0.5, 1.0])),
          "nanpercentile": (70.0,)}[_name]
    for _q in qs:
        args = () if _q is None else (_q,)
        for _axis, _keep in ((None, False), (1, False), (-1, True), ((0, 2), False)):
            case(f"{_name}[q={_q},axis={_axis},keepdims={_keep}]",
                 lambda a, f=f, q=args, x=_axis, k=_keep: f(a, *q, axis=x, keepdims=k),
                 lambda a, r=r, q=args, x=_axis, k=_keep: r(a, *q, axis=x, keepdims=k),
                 XN, grad_argnums=(0,) if _axis != 1 else ())
    for _dt in (F32, I32):
        args = () if _name == "nanmedian" else (qs[0],)
        case(f"{_name}[{_dt}]", lambda a, f=f, q=args: f(a, *q, axis=0),
             lambda a, r=r, q=args: r(a, *q, axis=0), rand((5, 3), _dt, -5, 5, seed=71))
for _method in ("lower", "higher", "midpoint", "nearest"):
    case(f"nanquantile[method={_method}]",
         lambda a, m=_method: tnp.nanquantile(a, np.array([0.1, 0.5, 0.8]), axis=0, method=m),
         lambda a, m=_method: np.nanquantile(a, np.array([0.1, 0.5, 0.8]), axis=0, method=m),
         XN[:, :, 0], grad_argnums=(0,))
# NumPy's interpolation to the last bit: float32 values, weak and array q
for _q in (55.5, np.array([12.5, 77.0])):
    for _name in ("percentile", "nanpercentile"):
        case(f"{_name}[float32,q={_q}]", lambda a, f=getattr(tnp, _name), q=_q: f(a, q, axis=0),
             lambda a, r=getattr(np, _name), q=_q: r(a, q, axis=0), rand((9, 4), F32, -5, 5,
                                                                         seed=72))
