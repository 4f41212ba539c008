"""Op-table rows for unique and the set operations, bincount and the histograms (issue 24).
The table runs every row traced too, so the unique and set rows pass a static `size=`
(padded with `fill_value` or truncated, as jax.numpy) and bincount a static `length=`; an
integer bin count gives histograms a static shape. The eager results without `size=` and
the errors are in tests/numpy/test_sets.py."""

from __future__ import annotations

import numpy as np

import tracegrad.numpy as tnp
from tests.ops.optable import BOOL, F32, F64, I32, I64, case, rand
from tests.ops.optable_datadep import _fit


def _unique_ref(x, size, fill=None, axis=None, **options):
    """NumPy's unique with all its results, fitted to `size` as tnp pads them (values with
    `fill`, by default the smallest; first indices with the length; counts with 0)."""
    values, index, inverse, counts = np.unique(x, True, True, True, axis=axis, **options)
    ax = 0 if axis is None else axis % x.ndim
    if fill is None:
        fill = np.take(values, [0], axis=ax) if values.shape[ax] else 0
    n = x.size if axis is None else x.shape[ax]
    if values.shape[ax] < size:
        pad = list(values.shape)
        pad[ax] = size - values.shape[ax]
        padding = np.broadcast_to(np.asarray(fill, values.dtype), pad)
        values = np.concatenate([values, padding], axis=ax)
    else:
        values = np.take(values, np.arange(size), axis=ax)
    return (values, _fit(index.astype(np.int64), size, n), inverse.astype(np.int64),
            _fit(counts.astype(np.int64), size, 0))


TIES = np.array([3.0, -1.0, 3.0, 0.5, -1.0, 3.0, 2.0, 0.5])
NANS = np.array([2.0, np.nan, -1.0, np.nan, 2.0, 0.0, -0.0])
I2D = rand((3, 4), I64, -2, 2, seed=80)
for _name, _x in (("ties", TIES), ("nan", NANS), ("i64 3x4", I2D),
                  ("i32", rand((7,), I32, 0, 3, seed=81)), ("bool", rand((6,), BOOL, seed=82)),
                  ("f32", rand((5,), F32, -1, 1, seed=83).round(1))):
    for _size in (2, 9):
        case(f"unique[{_name},size={_size}]",
             lambda x, s=_size: tnp.unique(x, True, True, True, size=s),
             lambda x, s=_size: _unique_ref(x, s), _x)
case("unique[nan,equal_nan=False,size=7]",
     lambda x: tnp.unique(x, True, True, True, equal_nan=False, size=7),
     lambda x: _unique_ref(x, 7, equal_nan=False), NANS)
case("unique[ties,values only,fill=-9]", lambda x: tnp.unique(x, size=6, fill_value=-9.0),
     lambda x: _unique_ref(x, 6, -9.0)[0], TIES)
case("unique[empty,size=3,fill=1]", lambda x: tnp.unique(x, True, True, True, size=3,
                                                         fill_value=1.0),
     lambda x: _unique_ref(x, 3, 1.0), np.zeros((0,)))
ROWS = np.array([[1, 2, 1, 0], [0, 5, 0, 1], [1, 2, 1, 0]])
for _axis, _size in ((0, 2), (0, 4), (1, 2), (1, 5), (-1, 3)):
    case(f"unique[axis={_axis},size={_size}]",
         lambda x, a=_axis, s=_size: tnp.unique(x, True, True, True, axis=a, size=s),
         lambda x, a=_axis, s=_size: _unique_ref(x, s, axis=a), ROWS)
case("unique[axis=0,nan rows,size=5]",
     lambda x: tnp.unique(x, True, True, True, axis=0, size=5),
     lambda x: _unique_ref(x, 5, axis=0), np.array([[1.0, np.nan], [1.0, np.nan], [0.0, 2.0],
                                                   [1.0, 0.0]]))
case("unique[distinct,values]", lambda x: tnp.unique(x, size=6),
     lambda x: _unique_ref(x, 6)[0], rand((2, 3), F64, seed=84), grad_argnums=(0,))
case("unique[axis=0,values]", lambda x: tnp.unique(x, axis=0, size=3),
     lambda x: _unique_ref(x, 3, axis=0)[0], rand((3, 2), F64, seed=85), grad_argnums=(0,))
case("unique_all[nan,size=8]", lambda x: tuple(tnp.unique_all(x, size=8)),
     lambda x: _unique_ref(x, 8, equal_nan=False), NANS)
case("unique_counts[ties,size=4]", lambda x: tuple(tnp.unique_counts(x, size=4)),
     lambda x: tuple(_unique_ref(x, 4, equal_nan=False)[i] for i in (0, 3)), TIES)
case("unique_inverse[i64,size=5]", lambda x: tuple(tnp.unique_inverse(x, size=5)),
     lambda x: tuple(_unique_ref(x, 5, equal_nan=False)[i] for i in (0, 2)), I2D)
case("unique_values[ties,size=4]", lambda x: tnp.unique_values(x, size=4),
     lambda x: _unique_ref(x, 4, equal_nan=False)[0], TIES)


# -- set operations ---------------------------------------------------------------------------


def _first_fit(values, size, fill):
    """`values` fitted to `size` with `fill`, by default the first value (the smallest of a
    sorted result; 0 if none)."""
    if fill is None:
        fill = values[0] if values.size else 0
    return _fit(values, size, fill)


A = np.array([5.0, 1.0, 3.0, 3.0, 7.0, 1.0, np.nan, -2.0])
B = np.array([[3.0, 1.0, 1.0], [8.0, np.nan, 7.0]])
AI = rand((9,), I64, 0, 6, seed=86)
BI = rand((5,), I32, 3, 9, seed=87)
AU, BU = np.array([4.0, -1.0, 2.5, 0.0]), np.array([2.5, 9.0, -1.0])
for _name, _a, _b in (("f64 nan", A, B), ("int", AI, BI), ("unique", AU, BU),
                      ("empty ar2", AI, np.zeros(0, np.int64))):
    for _size, _fill in ((10, None),) + (((2, None), (10, -5)) if _name in ("f64 nan", "int")
                                         else ()):
        _id = f"{_name},size={_size},fill={_fill}"
        case(f"intersect1d[{_id}]",
             lambda a, b, s=_size, f=_fill: tnp.intersect1d(a, b, return_indices=True, size=s,
                                                            fill_value=f),
             lambda a, b, s=_size, f=_fill: (
                 lambda r: (_first_fit(r[0], s, f), _fit(r[1].astype(np.int64), s, a.size),
                            _fit(r[2].astype(np.int64), s, b.size)))(
                 np.intersect1d(a, b, return_indices=True)), _a, _b)
        for _fn in ("setdiff1d", "union1d", "setxor1d"):
            case(f"{_fn}[{_id}]",
                 lambda a, b, s=_size, f=_fill, fn=_fn: getattr(tnp, fn)(a, b, size=s,
                                                                         fill_value=f),
                 lambda a, b, s=_size, f=_fill, fn=_fn: _first_fit(
                     getattr(np, fn)(a, b), s, f), _a, _b)
for _fn in ("intersect1d", "setdiff1d", "setxor1d"):
    case(f"{_fn}[assume_unique,size=6]",
         lambda a, b, fn=_fn: getattr(tnp, fn)(a, b, assume_unique=True, size=6),
         lambda a, b, fn=_fn: _first_fit(getattr(np, fn)(a, b, assume_unique=True), 6, None),
         AU, BU)
# Gradients: values shared by both inputs stop being shared when one moves, so the finite
# differences run on disjoint inputs (tests/numpy/test_sets.py checks shared ones).
BD = np.array([9.0, -3.0, 1.5])
for _fn in ("setdiff1d", "union1d", "setxor1d"):
    case(f"{_fn}[disjoint,values]", lambda a, b, fn=_fn: getattr(tnp, fn)(a, b, size=8),
         lambda a, b, fn=_fn: _first_fit(getattr(np, fn)(a, b), 8, None), AU, BD,
         grad_argnums=(0, 1))
case("setdiff1d[assume_unique,in order]", lambda a, b: tnp.setdiff1d(a, b, True, size=3),
     lambda a, b: _first_fit(np.setdiff1d(a, b, True), 3, None),
     np.array([3, 9, -4, 1]), np.array([9]))
case("intersect1d[bool,size=2]", lambda a, b: tnp.intersect1d(a, b, size=2),
     lambda a, b: _first_fit(np.intersect1d(a, b), 2, None), np.array([True, True]),
     np.array([False, True]))


# -- bincount ---------------------------------------------------------------------------------

X = np.array([0, 3, 1, 1, 5, 3, 3])
for _length in (0, 4, 6, 9):
    case(f"bincount[length={_length}]", lambda x, n=_length: tnp.bincount(x, length=n),
         lambda x, n=_length: _fit(np.bincount(x), n, 0), X)
    case(f"bincount[weights,length={_length}]",
         lambda x, w, n=_length: tnp.bincount(x, w, length=n),
         lambda x, w, n=_length: _fit(np.bincount(x, w), n, 0.0), X,
         rand((7,), F64, seed=88), grad_argnums=(1,))
case("bincount[i32,f32 weights,length=7]", lambda x, w: tnp.bincount(x, w, length=7),
     lambda x, w: _fit(np.bincount(x, w), 7, 0.0), X.astype(np.int32),
     rand((7,), F32, seed=89), grad_argnums=(1,))
case("bincount[bool,length=3]", lambda x: tnp.bincount(x, length=3),
     lambda x: _fit(np.bincount(x), 3, 0), np.array([True, False, True]))
case("bincount[empty,length=2]", lambda x: tnp.bincount(x, length=2),
     lambda x: _fit(np.bincount(x), 2, 0), np.zeros(0, np.int64))


# -- histograms -------------------------------------------------------------------------------

H = rand((40,), F64, -3, 3, seed=90)
ON_EDGES = np.array([0.0, 1.0, 2.0, 2.0, 3.0, 4.0, 4.0])  # bins=4: edges at the integers
HW = rand((40,), F64, 0, 1, seed=91)
for _name, _x, _options in (
        ("bins=10", H, {}), ("bins=7", H, {"bins": 7}), ("on edges", ON_EDGES, {"bins": 4}),
        ("range", H, {"bins": 5, "range": (-1.0, 2.0)}),
        ("edges", H, {"bins": np.array([-2.0, -0.5, 0.0, 0.0, 1.0, 2.5])}),
        ("i64", rand((20,), I64, -4, 9, seed=92), {"bins": 6}),
        ("i32 range", rand((20,), I32, -4, 9, seed=93), {"bins": 3, "range": (0, 6)}),
        ("f32", rand((30,), F32, -1, 1, seed=94), {"bins": 5}),
        ("f32 range", rand((30,), F32, -1, 1, seed=95), {"bins": 4, "range": (-0.5, 0.75)}),
        ("constant", np.full(5, 2.5), {"bins": 3}), ("constant int", np.full(4, 7), {"bins": 2}),
        ("empty", np.zeros(0), {"bins": 3}), ("2-D", rand((4, 5), F64, seed=96), {"bins": 4}),
        ("nan range", np.array([0.5, np.nan, 1.5]), {"bins": 2, "range": (0, 2)})):
    case(f"histogram[{_name}]", lambda a, o=_options: tnp.histogram(a, **o),
         lambda a, o=_options: np.histogram(a, **o), _x)
case("histogram_bin_edges[f32]", lambda a: tnp.histogram_bin_edges(a, 6),
     lambda a: np.histogram_bin_edges(a, 6), rand((30,), F32, -1, 1, seed=94))
case("histogram[density]", lambda a: tnp.histogram(a, 6, density=True),
     lambda a: np.histogram(a, 6, density=True), H, grad_argnums=(0,))
case("histogram[weights]", lambda a, w: tnp.histogram(a, 5, weights=w),
     lambda a, w: np.histogram(a, 5, weights=w), H, HW, grad_argnums=(1,))
case("histogram[weights,density,range]",
     lambda a, w: tnp.histogram(a, 5, range=(-2, 2), weights=w, density=True),
     lambda a, w: np.histogram(a, 5, range=(-2, 2), weights=w, density=True), H, HW,
     grad_argnums=(0, 1))
case("histogram[f32 weights,edges]",
     lambda a, w: tnp.histogram(a, [-3.0, -1.0, 0.5, 3.0], weights=w),
     lambda a, w: np.histogram(a, [-3.0, -1.0, 0.5, 3.0], weights=w), H,
     HW.astype(np.float32), rtol=1e-6,
     why="NumPy sums the weights of given edges as differences of a float32 cumulative sum")
case("histogram[traced edges]", lambda a, e: tnp.histogram(a, e),
     lambda a, e: np.histogram(a, e), H, np.array([-2.5, -1.0, 0.0, 1.5]))

S = rand((25, 2), F64, -2, 2, seed=97)
case("histogramdd[bins=(3,4)]", lambda s: tnp.histogramdd(s, (3, 4)),
     lambda s: np.histogramdd(s, (3, 4)), S)
case("histogramdd[3-D,range,density]",
     lambda s: tnp.histogramdd(s, 2, range=[(-1, 1), (-2, 2), (0, 2)], density=True),
     lambda s: np.histogramdd(s, 2, range=[(-1, 1), (-2, 2), (0, 2)], density=True),
     rand((30, 3), F64, -2, 2, seed=98))
case("histogramdd[edges,weights]",
     lambda s, w: tnp.histogramdd(s, [[-2, 0, 2], [-1, 0, 0.5, 2]], weights=w),
     lambda s, w: np.histogramdd(s, [[-2, 0, 2], [-1, 0, 0.5, 2]], weights=w), S,
     rand((25,), F64, seed=99), grad_argnums=(1,))
case("histogramdd[i64]", lambda s: tnp.histogramdd(s, 3), lambda s: np.histogramdd(s, 3),
     rand((12, 2), I64, 0, 5, seed=100))
case("histogramdd[f32]", lambda s: tnp.histogramdd(s, 3), lambda s: np.histogramdd(s, 3),
     rand((12, 2), F32, 0, 5, seed=101))
case("histogram2d[bins=4]", lambda x, y: tnp.histogram2d(x, y, 4),
     lambda x, y: np.histogram2d(x, y, 4), S[:, 0], S[:, 1])
case("histogram2d[bins=(2,3),density,weights]",
     lambda x, y, w: tnp.histogram2d(x, y, (2, 3), density=True, weights=w),
     lambda x, y, w: np.histogram2d(x, y, (2, 3), density=True, weights=w), S[:, 0], S[:, 1],
     rand((25,), F64, 0, 1, seed=102), grad_argnums=(0, 2))
case("histogram2d[edges]", lambda x, y: tnp.histogram2d(x, y, [-2, -1, 0, 2]),
     lambda x, y: np.histogram2d(x, y, [-2, -1, 0, 2]), S[:, 0], S[:, 1])
