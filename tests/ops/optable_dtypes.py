"""Op-table rows for the narrower dtypes (int8, int16, uint8, uint16, uint32, uint64 and
float16): arithmetic with wrap-around, comparisons, promotion of every pair of dtypes and of
weak Python scalars, float functions of float16 (and of the integers NumPy computes in
float16 or float32), reductions, astype between every pair of dtypes, bitwise operations,
and float16 gradients (loose tolerance: float16 has 11 significant bits).

`F16_ULP` lists the rows whose float16 results the numba backend may give one float16 ulp
away from NumPy's (tests/backends/test_numba_dtypes.py): NumPy computes float16 functions
with its float32 loops, the numba backend with its float64 vector math, each rounding once
more to float16."""

from __future__ import annotations

import itertools

import numpy as np

import tracegrad.numpy as tnp
from tests.ops.optable import case, rand

NARROW = ("int8", "int16", "uint8", "uint16", "uint32", "uint64")
NEW = NARROW + ("float16",)
ALL = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
       "float16", "float32", "float64")
ROWS: list = []  # every row of this file
F16_ULP: set = set()  # rows whose float16 results may be a float16 ulp off on numba


def _row(name, fn, reference, *args, ulp=False, **options):
    c = case(name, fn, reference, *args, **options)
    ROWS.append(c)
    if ulp:
        F16_ULP.add(name)
    return c


def _sample(dtype, shape=(2, 5), seed=0):
    """Values of `dtype` spanning its range: the extremes, zero, and random values (so sums,
    products and negation wrap around)."""
    dt = np.dtype(dtype)
    r = np.random.default_rng(seed + len(dtype))
    if dt.kind == "b":
        return r.random(size=shape) < 0.5
    if dt.kind == "f":
        x = r.uniform(-60, 60, size=shape).astype(dt)
        x.flat[:3] = [0.0, -2.5, 1.0 / 3.0]
        return x
    info = np.iinfo(dt)
    x = r.integers(int(info.min), int(info.max), size=shape, dtype=dt, endpoint=True)
    x.flat[:4] = [info.min, info.max, 0, 1]
    return x


def _nonzero(x):
    return np.where(x == 0, np.ones((), x.dtype), x)


# -- arithmetic and comparisons within each dtype -------------------------------------------

BINARY = ("add", "subtract", "multiply", "floor_divide", "remainder", "maximum", "minimum",
          "less", "greater_equal", "equal", "not_equal", "true_divide", "power")
for _dt in NEW:
    _a, _b = _sample(_dt, seed=1), _sample(_dt, (5,), seed=2)
    for _name in BINARY:
        f, r = getattr(tnp, _name), getattr(np, _name)
        b = _b
        if _name in ("floor_divide", "remainder", "true_divide"):
            b = _nonzero(_b)  # NumPy warns on integer division by zero (tracegrad gives 0)
        elif _name == "power":
            b = (np.abs(_b) % 4).astype(_dt)  # no negative integer powers
        _row(f"{_name}[{_dt},{_dt}]", f, r, _a, b, ulp=_name in ("power", "true_divide"))
    for _name in ("negative", "absolute", "sign", "square", "positive"):
        _row(f"{_name}[{_dt}]", getattr(tnp, _name), getattr(np, _name), _a)

# -- promotion: every pair of dtypes with at least one new, and weak Python scalars ----------

for _da, _db in itertools.product(ALL, ALL):
    if _da in NEW or _db in NEW:
        _row(f"add[{_da},{_db}]", tnp.add, np.add, rand((2, 3), _da, 0, 9, seed=3),
             rand((3,), _db, 0, 9, seed=4))
for _dt in NEW:
    x = rand((4,), _dt, 0, 9, seed=5)
    for _s in (3, 2.5, True):
        _row(f"add[{_dt},{_s!r}]", lambda a, s=_s: tnp.add(a, s), lambda a, s=_s: a + s, x)
        _row(f"multiply[{_s!r},{_dt}]", lambda a, s=_s: tnp.multiply(s, a),
             lambda a, s=_s: np.multiply(s, a), x)
    _row(f"greater[{_dt},weak 4]", lambda a: tnp.greater(a, 4), lambda a: np.greater(a, 4), x)
    _row(f"add[{_dt},python int argument]", tnp.add, np.add, x, 7)
    _row(f"true_divide[{_dt},python float argument]", tnp.true_divide, np.true_divide, x, 0.75)

# NumPy 2 compares a Python int outside the integer dtype's range by its value.
for _dt, _v in (("uint8", -1), ("uint8", 300), ("int8", 128), ("uint64", -5), ("int32", 2**40)):
    for _name in ("equal", "not_equal", "less", "greater_equal"):
        f, r = getattr(tnp, _name), getattr(np, _name)
        _row(f"{_name}[{_dt},{_v}]", lambda a, f=f, v=_v: f(a, v),
             lambda a, r=r, v=_v: r(a, v), _sample(_dt, (4,), seed=20))
        _row(f"{_name}[{_v},{_dt}]", lambda a, f=f, v=_v: f(v, a),
             lambda a, r=r, v=_v: r(v, a), _sample(_dt, (4,), seed=20))

# -- float functions: float16, and the integers NumPy computes in float16 or float32 ----------

FLOAT_UNARY = {"exp": (-3, 3), "log": (0.5, 5), "sin": (-4, 4), "cos": (-4, 4),
               "tanh": (-3, 3), "sqrt": (0, 5), "expm1": (-2, 2), "log1p": (0, 5),
               "arctan": (-4, 4), "floor": (-4, 4), "rint": (-4, 4), "reciprocal": (0.5, 4)}
for _name, (_lo, _hi) in FLOAT_UNARY.items():
    f, r = getattr(tnp, _name), getattr(np, _name)
    _row(f"{_name}[float16]", f, r, rand((3, 4), "float16", _lo, _hi, seed=6), ulp=True)
for _name in ("sin", "sqrt", "exp"):
    for _dt in NARROW:
        _row(f"{_name}[{_dt}]", getattr(tnp, _name), getattr(np, _name),
             rand((5,), _dt, 0, 5, seed=7), ulp=True)
for _name in ("deg2rad", "rad2deg", "frexp", "nan_to_num", "trunc", "signbit", "fabs"):
    _row(f"{_name}[float16]", getattr(tnp, _name), getattr(np, _name),
         rand((6,), "float16", -4, 4, seed=25))
_row("var[float16]", lambda a: tnp.var(a, axis=0), lambda a: np.var(a, axis=0),
     rand((5, 3), "float16", -4, 4, seed=26), ulp=True)
_row("isfinite[float16 overflow]", lambda a: tnp.isfinite(a * a), lambda a: np.isfinite(a * a),
     np.array([300.0, 255.9, -256.0, 1e4, 0.0], np.float16))
_row("multiply[float16 subnormal]", tnp.multiply, np.multiply,
     np.array([6e-5, 1e-4, -3e-3, 2.0**-14], np.float16),
     np.array([0.01, 0.125, 0.001, 0.5], np.float16))

# -- reductions ------------------------------------------------------------------------------

for _dt in NEW:
    x = rand((3, 4, 5), _dt, 0, 6, seed=8)
    for _name in ("sum", "prod", "max", "min", "mean", "argmax", "cumsum"):
        f, r = getattr(tnp, _name), getattr(np, _name)
        for _axis in (None, 0, -1):
            if _name == "prod" and _dt == "float16" and _axis is None:
                continue  # 6**60 overflows float16 (inf, like NumPy, but hides the values)
            _row(f"{_name}[{_dt},axis={_axis}]", lambda a, f=f, ax=_axis: f(a, axis=ax),
                 lambda a, r=r, ax=_axis: r(a, axis=ax), x,
                 ulp=_dt == "float16" and _name in ("sum", "prod", "mean"))

for _dt in ("float16", "int8", "uint16"):
    _row(f"matmul[{_dt}]", tnp.matmul, np.matmul, rand((3, 4), _dt, 0, 4, seed=21),
         rand((4, 2), _dt, 0, 4, seed=22), ulp=_dt == "float16")
_row("matmul,add[float16]", lambda a, b: a @ b + a[:, :2], lambda a, b: a @ b + a[:, :2],
     rand((3, 4), "float16", -2, 2, seed=23), rand((4, 2), "float16", -2, 2, seed=24), ulp=True)

# -- astype between every pair (float -> int only for values every integer dtype holds) -------

for _src, _dst in itertools.product(ALL, ALL):
    if np.dtype(_src).kind == "f":
        x = rand((7,), _src, 0, 100, seed=9)
        if np.dtype(_dst).kind in "iub":
            x.flat[:2] = [0.0, 99.75]
        else:
            with np.errstate(over="ignore"):  # -3e5 is -inf in float16
                x = np.concatenate([x, np.array([-0.0, np.inf, -np.inf, np.nan, 65519.0,
                                                 65520.0, 1e-8, -3e5], _src)])
    else:
        x = _sample(_src, (9,), seed=10)
    _row(f"astype[{_src}->{_dst}]", lambda a, d=_dst: tnp.astype(a, d),
         lambda a, d=_dst: a.astype(d), x)

# -- bitwise operations ------------------------------------------------------------------------

for _dt in NARROW:
    a, b = _sample(_dt, (6,), seed=11), _sample(_dt, (6,), seed=12)
    for _name in ("bitwise_and", "bitwise_or", "bitwise_xor"):
        _row(f"{_name}[{_dt}]", getattr(tnp, _name), getattr(np, _name), a, b)
    _row(f"invert[{_dt}]", tnp.invert, np.invert, a)

# -- shifts at the edge counts (0, 1, width - 1, width, width + 5, negative), and popcount -----

for _dt in NARROW + ("int32", "int64"):
    _w = np.dtype(_dt).itemsize * 8
    _signed = np.dtype(_dt).kind == "i"
    a = _sample(_dt, (8,), seed=17)
    a[4:] = [1, 3, -5 if _signed else 5, 6]
    b = np.array([0, 1, _w - 1, _w, _w + 5, 2, _w - 1, -1 if _signed else 2 * _w])
    b = b.astype(_dt)
    for _name in ("left_shift", "right_shift", "bitwise_left_shift", "bitwise_right_shift"):
        _row(f"{_name}[{_dt},edge counts]", getattr(tnp, _name), getattr(np, _name), a, b)
    _row(f"shift operators[{_dt}]", lambda x, y: (x << y, x >> y, x << 2, 1 >> y),
         lambda x, y: (x << y, x >> y, x << 2, 1 >> y), a, b)
    _row(f"bitwise_count[{_dt}]", tnp.bitwise_count, np.bitwise_count, a)
_row("bitwise_count[bool]", tnp.bitwise_count, np.bitwise_count, rand((5,), "bool"))
_row("bitwise_count[python int]", lambda: tnp.bitwise_count(-7), lambda: np.bitwise_count(-7))

# -- packbits and unpackbits -------------------------------------------------------------------

_bits = rand((3, 11), "int8", -1, 2, seed=18)
_packed = np.packbits(_bits != 0, axis=1)
for _kw in ({}, {"axis": 1}, {"axis": 0, "bitorder": "little"}, {"axis": -1}):
    _row(f"packbits[{_kw}]", lambda a, k=_kw: tnp.packbits(a, **k),
         lambda a, k=_kw: np.packbits(a, **k), _bits)
_row("packbits[bool,little]", lambda a: tnp.packbits(a, bitorder="little"),
     lambda a: np.packbits(a, bitorder="little"), rand((13,), "bool", seed=19))
for _kw in ({}, {"axis": 1}, {"axis": 0, "count": 2}, {"axis": 1, "count": 20},
            {"axis": 1, "count": -5, "bitorder": "little"}, {"count": 0}):
    _row(f"unpackbits[{_kw}]", lambda a, k=_kw: tnp.unpackbits(a, **k),
         lambda a, k=_kw: np.unpackbits(a, **k), _packed)

# -- float16 gradients (against float64 finite differences) ------------------------------------

_F16_GRAD = {"grad_argnums": (0,), "grad_rtol": 3e-2}
for _name, (_lo, _hi) in (("exp", (-2, 2)), ("sin", (-3, 3)), ("tanh", (-2, 2)),
                          ("log", (0.5, 4)), ("sqrt", (0.5, 4))):
    _row(f"{_name}[float16,grad]", getattr(tnp, _name), getattr(np, _name),
         rand((6,), "float16", _lo, _hi, seed=13), ulp=True, **_F16_GRAD)
_row("multiply,sum[float16,grad]", lambda a, b: tnp.sum(a * b, axis=0),
     lambda a, b: np.sum(a * b, axis=0), rand((3, 4), "float16", seed=14),
     rand((4,), "float16", seed=15), ulp=True, grad_argnums=(0, 1), grad_rtol=3e-2)
_row("mean[float16,grad]", tnp.mean, np.mean, rand((8,), "float16", seed=16), ulp=True,
     **_F16_GRAD)
