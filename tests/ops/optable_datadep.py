"""Op-table rows for the functions whose output size depends on the data (issue 24):
nonzero, argwhere, flatnonzero, one-argument where, extract, compress. The table runs
every row traced too, so each row passes a static `size=` (padded with `fill_value` or
truncated, as jax.numpy); the eager results without `size=` are in
tests/numpy/test_datadep.py."""

from __future__ import annotations

import numpy as np

import tracegrad.numpy as tnp
from tests.ops.optable import BOOL, F32, F64, I32, I64, case, rand


def _fit(x, size, fill, axis=0):
    """NumPy's result `x` padded with `fill` or truncated to `size` along `axis`."""
    x = np.asarray(x)
    n = x.shape[axis]
    if size <= n:
        return np.take(x, np.arange(size), axis=axis)
    pad = list(x.shape)
    pad[axis] = size - n
    return np.concatenate([x, np.full(pad, fill, x.dtype)], axis=axis)


M34 = rand((3, 4), F64, -1, 1, seed=70) * (rand((3, 4), BOOL, seed=71))
V8 = rand((8,), I32, -1, 1, seed=72)
for _x in (M34, V8, rand((2, 3, 2), BOOL, seed=73), np.zeros((3,), F32)):
    _id = "x".join(map(str, _x.shape)) + f",{_x.dtype}"
    for _size, _fill in ((0, None), (3, None), (30, None), (30, -1)):
        _f = 0 if _fill is None else _fill
        case(f"nonzero[{_id},size={_size},fill={_fill}]",
             lambda x, s=_size, v=_fill: tnp.nonzero(x, size=s, fill_value=v),
             lambda x, s=_size, f=_f: tuple(_fit(i.astype(np.int64), s, f) for i in np.nonzero(x)),
             _x)
        case(f"argwhere[{_id},size={_size},fill={_fill}]",
             lambda x, s=_size, v=_fill: tnp.argwhere(x, size=s, fill_value=v),
             lambda x, s=_size, f=_f: _fit(np.argwhere(x).astype(np.int64), s, f), _x)
        case(f"flatnonzero[{_id},size={_size},fill={_fill}]",
             lambda x, s=_size, v=_fill: tnp.flatnonzero(x, size=s, fill_value=v),
             lambda x, s=_size, f=_f: _fit(np.flatnonzero(x).astype(np.int64), s, f), _x)
case("where[one argument,size=5]", lambda x: tnp.where(x, size=5),
     lambda x: tuple(_fit(i.astype(np.int64), 5, 0) for i in np.nonzero(x)), M34)
case("nonzero[fill per dim]", lambda x: tnp.nonzero(x, size=12, fill_value=(-1, -2)),
     lambda x: tuple(_fit(i.astype(np.int64), 12, f) for i, f in zip(np.nonzero(x), (-1, -2))),
     M34)

X34 = rand((3, 4), seed=74)
for _size, _fill in ((2, 0), (5, 0), (12, 0), (12, -7.5)):
    case(f"extract[size={_size},fill={_fill}]",
         lambda c, x, s=_size, v=_fill: tnp.extract(c > 0, x, size=s, fill_value=v),
         lambda c, x, s=_size, v=_fill: _fit(np.extract(c > 0, x), s, v), M34, X34,
         grad_argnums=(1,))
case("extract[i64,size=4]", lambda c, x: tnp.extract(c, x, size=4),
     lambda c, x: _fit(np.extract(c, x), 4, 0), V8, rand((8,), I64, -5, 5, seed=75))
case("extract[static condition]", lambda x: tnp.extract(M34 != 0, x),
     lambda x: np.extract(M34 != 0, x), X34, grad_argnums=(0,))

C4 = np.array([True, False, True, True])
for _axis, _size in ((1, 2), (1, 5), (0, 2), (None, 3), (None, 14)):
    _cond = C4 if _axis == 1 else C4[:3] if _axis == 0 else np.tile(C4, 3)
    case(f"compress[axis={_axis},size={_size}]",
         lambda c, x, a=_axis, s=_size: tnp.compress(c, x, axis=a, size=s, fill_value=-1.0),
         lambda c, x, a=_axis, s=_size: _fit(np.compress(c, x, axis=a), s, -1.0,
                                             0 if a is None else a),
         _cond, X34, grad_argnums=(1,))
case("compress[short condition,size=3]", lambda c, x: tnp.compress(c, x, axis=1, size=3),
     lambda c, x: _fit(np.compress(c, x, axis=1), 3, 0, 1), np.array([False, True]),
     rand((2, 4), I32, seed=76))
case("compress[static condition]", lambda x: tnp.compress(C4, x, axis=1),
     lambda x: np.compress(C4, x, axis=1), X34, grad_argnums=(0,))
