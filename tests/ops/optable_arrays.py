"""Op-table rows for tracegrad.numpy's shape functions, indexing, `at[]` updates, products,
einsum, linear algebra, diagonals, padding, and tracegrad.nn."""

from __future__ import annotations

import numpy as np
import scipy.special

import tracegrad.numpy as tnp
from tests.ops.optable import BOOL, F32, F64, I32, I64, case, rand, ulps
from tracegrad import nn

# -- shapes --------------------------------------------------------------------------------------

X234 = rand((2, 3, 4))
for _shape in ((4, 6), (-1,), (3, -1, 2), 24, (2, 3, 4)):
    case(f"reshape[{_shape}]", lambda a, s=_shape: tnp.reshape(a, s),
         lambda a, s=_shape: np.reshape(a, s), X234, grad_argnums=(0,))
case("reshape[method args]", lambda a: a.reshape(4, 6), lambda a: a.reshape(4, 6), X234)
case("ravel[i32]", tnp.ravel, np.ravel, rand((2, 3), I32))
for _axes in (None, (1, 0, 2), (-1, 0, 1)):
    case(f"transpose[{_axes}]", lambda a, x=_axes: tnp.transpose(a, x),
         lambda a, x=_axes: np.transpose(a, x), X234, grad_argnums=(0,))
case("transpose[1-D]", tnp.transpose, np.transpose, rand((3,)))
case("T[property]", lambda a: a.T, lambda a: a.T, rand((2, 3)))
case("swapaxes[0,-1]", lambda a: tnp.swapaxes(a, 0, -1), lambda a: np.swapaxes(a, 0, -1), X234)
for _src, _dst in ((0, -1), ((0, 1), (2, 0)), (-1, 0)):
    case(f"moveaxis[{_src},{_dst}]", lambda a, s=_src, d=_dst: tnp.moveaxis(a, s, d),
         lambda a, s=_src, d=_dst: np.moveaxis(a, s, d), X234)
for _axis in (0, -1, (0, 2), (1, -1)):
    case(f"expand_dims[{_axis}]", lambda a, x=_axis: tnp.expand_dims(a, x),
         lambda a, x=_axis: np.expand_dims(a, x), rand((2, 3)), grad_argnums=(0,))
for _axis in (None, 0, (0, -1)):
    case(f"squeeze[{_axis}]", lambda a, x=_axis: tnp.squeeze(a, x),
         lambda a, x=_axis: np.squeeze(a, x), rand((1, 3, 1)), grad_argnums=(0,))
for _src, _dst in (((3,), (2, 3)), ((2, 1), (2, 2, 4)), ((), (3,)), ((1,), (0,))):
    case(f"broadcast_to[{_src}->{_dst}]", lambda a, s=_dst: tnp.broadcast_to(a, s),
         lambda a, s=_dst: np.broadcast_to(a, s), rand(_src), grad_argnums=(0,))

for _axis in (0, 1, -1, None):
    case(f"concatenate[axis={_axis}]", lambda a, b, x=_axis: tnp.concatenate([a, b], x),
         lambda a, b, x=_axis: np.concatenate([a, b], x), rand((2, 3), seed=1),
         rand((2, 3), seed=2), grad_argnums=(0, 1))
case("concatenate[i32,f32]", lambda a, b: tnp.concatenate((a, b)),
     lambda a, b: np.concatenate((a, b)), rand((2,), I32), rand((3,), F32))
case("concatenate[bool,i64]", lambda a, b: tnp.concatenate([a, b]),
     lambda a, b: np.concatenate([a, b]), rand((2,), BOOL), rand((3,), I64))
for _axis in (0, 1, -1):
    case(f"stack[axis={_axis}]", lambda a, b, x=_axis: tnp.stack([a, b], x),
         lambda a, b, x=_axis: np.stack([a, b], x), rand((2, 3), seed=1),
         rand((2, 3), seed=2), grad_argnums=(0, 1))
case("stack[scalars]", lambda a, b: tnp.stack([a, b]), lambda a, b: np.stack([a, b]),
     rand(()), rand((), I32))
for _sa, _sb in (((3,), (2,)), ((2, 1), (2, 3)), ((), (2,))):
    case(f"hstack[{_sa},{_sb}]", lambda a, b: tnp.hstack([a, b]),
         lambda a, b: np.hstack([a, b]), rand(_sa), rand(_sb))
for _sa, _sb in (((3,), (3,)), ((1, 3), (2, 3)), ((3,), (2, 3))):
    case(f"vstack[{_sa},{_sb}]", lambda a, b: tnp.vstack([a, b]),
         lambda a, b: np.vstack([a, b]), rand(_sa), rand(_sb))
for _arg, _axis in ((3, 0), ([1, 4], 0), ([-2, 10], 1), (2, -1), ([2, 1], 0)):
    case(f"split[{_arg},axis={_axis}]", lambda a, s=_arg, x=_axis: tuple(tnp.split(a, s, x)),
         lambda a, s=_arg, x=_axis: tuple(np.split(a, s, x)), rand((6, 4)), grad_argnums=(0,))
for _reps in (2, (2, 1), (1, 2, 3), (0, 2)):
    case(f"tile[{_reps}]", lambda a, r=_reps: tnp.tile(a, r), lambda a, r=_reps: np.tile(a, r),
         rand((2, 3)), grad_argnums=(0,))
case("tile[bool,scalar]", lambda a: tnp.tile(a, 3), lambda a: np.tile(a, 3), rand((), BOOL))
for _rep, _axis in ((2, None), (3, 0), (2, -1), ([1, 0, 2], 1), (np.array([2, 1]), 0)):
    case(f"repeat[{list(np.ravel(_rep))},axis={_axis}]",
         lambda a, r=_rep, x=_axis: tnp.repeat(a, r, x),
         lambda a, r=_rep, x=_axis: np.repeat(a, r, x), rand((2, 3)), grad_argnums=(0,))
for _axis in (None, 0, -1, (0, 2)):
    case(f"flip[{_axis}]", lambda a, x=_axis: tnp.flip(a, x), lambda a, x=_axis: np.flip(a, x),
         X234, grad_argnums=(0,))
case("shape/ndim/size", lambda a: tnp.full_like(a, tnp.ndim(a) * tnp.size(a) + tnp.shape(a)[0]),
     lambda a: np.full_like(a, a.ndim * a.size + a.shape[0]), X234)

# -- indexing ------------------------------------------------------------------------------------

X45 = rand((4, 5))
KEYS = {
    "1": 1, "-1": -1, "1:3": slice(1, 3), "::-1": slice(None, None, -1),
    "3:0:-2": slice(3, 0, -2), "-2:": slice(-2, None), "10:20": slice(10, 20),
    "-9:2": slice(-9, 2), "1,-2": (1, -2), "...,0": (Ellipsis, 0), "None,:,-1": (None, slice(None), -1),
    ":,None,::2,None": (slice(None), None, slice(None, None, 2), None), "()": (),
    "[0,2,-1]": [0, 2, -1], "[[0],[3]]": [[0], [3]], "[0,1],[2,4]": ([0, 1], [2, 4]),
    ":,[4,0,4]": (slice(None), [4, 0, 4]), "[[0,1]],[[1],[2]]": ([[0, 1]], [[1], [2]]),
    "[],": (np.array([], np.int64),), "mask": np.array([True, False, True, True]),
    "mask2d": rand((4, 5), BOOL, seed=3), ":,mask": (slice(None), rand((5,), BOOL, seed=4)),
    "1,[0,2]": (1, [0, 2]), "[1,2],::-2": ([1, 2], slice(None, None, -2)),
    "::-1,[3,1]": (slice(None, None, -1), [3, 1]),
}
for _name, _key in KEYS.items():
    case(f"getitem[{_name}]", lambda a, k=_key: a[k], lambda a, k=_key: a[k], X45,
         grad_argnums=(0,))

X345 = rand((3, 4, 5))
KEYS3 = {
    ":,[0,1],[1,2]": (slice(None), [0, 1], [1, 2]),
    "[0,1],:,[1,2]": ([0, 1], slice(None), [1, 2]),
    "[0,1],None,[1,2]": ([0, 1], None, [1, 2]),
    "0,:,[1,2]": (0, slice(None), [1, 2]), ":,0,[1,2]": (slice(None), 0, [1, 2]),
    "...,[1,2]": (Ellipsis, [1, 2]), "[2],...,1:3": ([2], Ellipsis, slice(1, 3)),
    "[[0],[2]],[[1,-1]],0": ([[0], [2]], [[1, -1]], 0),
    "[-1,0],[1,2],[4,0]": ([-1, 0], [1, 2], [4, 0]), "1:,None,[0,3],::2": (
        slice(1, None), None, [0, 3], slice(None, None, 2)),
}
for _name, _key in KEYS3.items():
    case(f"getitem3[{_name}]", lambda a, k=_key: a[k], lambda a, k=_key: a[k], X345,
         grad_argnums=(0,))
case("getitem[traced int array]", lambda a, i: a[i], lambda a, i: a[i], X45,
     np.array([[3, -1], [0, 2]]), grad_argnums=(0,))
case("getitem[traced arrays,broadcast]", lambda a, i, j: a[i, j], lambda a, i, j: a[i, j],
     X345, np.array([[0], [2]], I32), np.array([1, -1, 3]), grad_argnums=(0,))
case("getitem[traced arrays,separated]", lambda a, i, j: a[i, :, j],
     lambda a, i, j: a[i, :, j], X345, np.array([2, 0]), np.array([-1, 4]), grad_argnums=(0,))
case("getitem[traced scalar index]", lambda a, i: a[i, 1:], lambda a, i: a[i, 1:], X45,
     np.array(-2), grad_argnums=(0,))

for _axis, _mode in ((None, None), (0, None), (1, "wrap"), (-1, "clip"), (0, "raise")):
    case(f"take[axis={_axis},mode={_mode}]",
         lambda a, i, x=_axis, m=_mode: tnp.take(a, i, axis=x, mode=m),
         lambda a, i, x=_axis, m=_mode: np.take(a, i, axis=x, mode=m or "raise"),
         X45, np.array([[1, -2], [3, 0]]) * (3 if _mode in ("wrap", "clip") else 1),
         grad_argnums=(0,))
case("take[static indices,wrap]", lambda a: tnp.take(a, [7, -8], axis=1, mode="wrap"),
     lambda a: np.take(a, [7, -8], axis=1, mode="wrap"), X45)
case("take[scalar]", lambda a: tnp.take(a, 3), lambda a: np.take(a, 3), X45)
for _axis in (0, 1, -1, None):
    idx = np.argsort(X345, axis=_axis, kind="stable") if _axis is not None else np.argsort(
        X345, axis=None)[:7]
    case(f"take_along_axis[axis={_axis}]", lambda a, i, x=_axis: tnp.take_along_axis(a, i, x),
         lambda a, i, x=_axis: np.take_along_axis(a, i, x), X345, idx, grad_argnums=(0,))
case("take_along_axis[broadcast]", lambda a, i: tnp.take_along_axis(a, i, 1),
     lambda a, i: np.take_along_axis(a, i, 1), X345, np.array([[[0], [3]]]))


def _at_reference(how):
    def ref(a, key, v):
        out = a.copy()
        if how == "set":
            out[key] = v
        else:
            np.add.at(out, key, v)
        return out

    return ref


AT_KEYS = {"1": 1, "[0,2,0]": [0, 2, 0], ":,-1": (slice(None), -1), "1:,::2": (slice(1, None),
           slice(None, None, 2)), "[0,1],[1,3]": ([0, 1], [1, 3]), "mask": X45 > 0.5,
           "::-1,[4]": (slice(None, None, -1), [4])}
for _how in ("set", "add"):
    for _name, _key in AT_KEYS.items():
        shape = np.empty((4, 5))[_key].shape
        case(f"at[{_name}].{_how}", lambda a, v, k=_key, h=_how: getattr(tnp.at(a)[k], h)(v),
             lambda a, v, k=_key, h=_how: _at_reference(h)(a, k, v), X45,
             rand(shape[-1:] if shape else (), seed=5), grad_argnums=(0, 1))
    case(f"at[traced index].{_how}", lambda a, i, v, h=_how: getattr(tnp.at(a)[i], h)(v),
         lambda a, i, v, h=_how: _at_reference(h)(a, i, v), X45, np.array([3, -1, 3]),
         rand((3, 5), seed=6), grad_argnums=(0, 2))
    case(f"at[i32,scalar].{_how}", lambda a, h=_how: getattr(tnp.at(a)[[1, 1]], h)(7),
         lambda a, h=_how: _at_reference(h)(a, [1, 1], 7), rand((3,), I32))
case("at[f32,float value].set", lambda a: tnp.at(a)[0].set(2.5),
     lambda a: _at_reference("set")(a, 0, 2.5), rand((3,), F32))

# -- products ------------------------------------------------------------------------------------

PRODUCT_SHAPES = (((), (3,)), ((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)),
                  ((2, 2, 3), (3, 4)), ((2, 3), (5, 3, 4)), ((2, 2, 3), (2, 3, 4)),
                  ((1, 2, 3), (5, 3, 2)), ((2, 1, 2, 3), (4, 3, 1)))
BLAS = "BLAS sums in another order than NumPy's loop over the batch"
for _name in ("dot", "matmul", "inner"):
    f, r = getattr(tnp, _name), getattr(np, _name)
    for _sa, _sb in PRODUCT_SHAPES:
        if _name == "matmul" and not (_sa and _sb):
            continue
        if _name == "inner":
            _sb = _sb[:-2] + _sb[-1:] + _sb[-2:-1] if len(_sb) >= 2 else _sb
        try:
            r(np.ones(_sa), np.ones(_sb))
        except ValueError:
            continue
        for _dt in (F64, F32, I32):
            a, b = rand(_sa, _dt, seed=1), rand(_sb, _dt, seed=2)
            case(f"{_name}[{_dt},{_sa},{_sb}]", f, r, a, b,
                 grad_argnums=(0, 1) if _dt == F64 else (), why=BLAS, **ulps(r, a, b))
    a, b = rand((2, 3), I32), rand((3, 3), F32)
    case(f"{_name}[i32,f32]", f, r, a, b, why=BLAS, **ulps(r, a, b))
case("matmul[@ operator]", lambda a, b: a @ b, lambda a, b: a @ b, rand((2, 3)), rand((3,)),
     why=BLAS, **ulps(np.matmul, rand((2, 3)), rand((3,))))
case("vdot[2x2,4]", tnp.vdot, np.vdot, rand((2, 2)), rand((4,)), grad_argnums=(0, 1))
case("vdot[i32]", tnp.vdot, np.vdot, rand((3,), I32), rand((3,), I32))
case("outer[2x2,3]", tnp.outer, np.outer, rand((2, 2)), rand((3,)), grad_argnums=(0, 1))
case("outer[bool,i32]", tnp.outer, np.outer, rand((2,), BOOL), rand((3,), I32))
for _axes, _sa, _sb in ((2, (2, 3, 4), (3, 4, 5)), (0, (2,), (3,)), (1, (2, 3), (3, 2)),
                        (([1, 0], [0, 1]), (3, 4, 5), (4, 3, 2)), ((2, 0), (2, 3, 4), (4, 5))):
    a, b = rand(_sa, seed=1), rand(_sb, seed=2)
    case(f"tensordot[{_axes}]", lambda a, b, x=_axes: tnp.tensordot(a, b, x),
         lambda a, b, x=_axes: np.tensordot(a, b, x), a, b, grad_argnums=(0, 1), why=BLAS,
         **ulps(lambda a, b, x=_axes: np.tensordot(a, b, x), a, b))

EINSUM = {
    "ij,jk->ik": ((2, 3), (3, 4)), "ij,jk": ((2, 3), (3, 4)), "i,i": ((3,), (3,)),
    "i,i->i": ((3,), (3,)), "i,j->ij": ((2,), (3,)), "ij->ji": ((2, 3),), "ij->": ((2, 3),),
    "ii": ((3, 3),), "ii->i": ((3, 3),), "iij->ji": ((3, 3, 2),), "bij,bjk->bik": (
        (2, 3, 4), (2, 4, 5)), "...ij,...jk": ((5, 2, 3), (3, 4)), "...i,...i->...": (
        (2, 1, 3), (4, 3)), "ij,jk,kl->il": ((2, 3), (3, 4), (4, 2)), "ij,ij->i": (
        (2, 3), (1, 3)), "i...->...": ((3, 2, 2),), "ijk,kj->i": ((2, 3, 4), (4, 3)),
    "ab,cd->abcd": ((2, 2), (3, 1)), "ij,jk->": ((2, 3), (3, 4)),
}
for _spec, _shapes in EINSUM.items():
    for _dt in (F64, I32):
        args = [rand(s, _dt, seed=i) for i, s in enumerate(_shapes)]
        ref = lambda *a, s=_spec: np.einsum(s, *a)
        case(f"einsum[{_spec},{_dt}]", lambda *a, s=_spec: tnp.einsum(s, *a), ref, *args,
             grad_argnums=tuple(range(len(args))) if _dt == F64 else (),
             why="np.einsum sums in its own order", **ulps(ref, *args))
_SUB = (lambda a, b: np.einsum(a, [0, 1], b, [1, 2], [2, 0]), rand((2, 3)), rand((3, 4)))
case("einsum[sublists]", lambda a, b: tnp.einsum(a, [0, 1], b, [1, 2], [2, 0]), *_SUB,
     why="np.einsum sums in its own order", **ulps(*_SUB))
_MIXED = (lambda a, b: np.einsum("i,i", a, b), rand((4,), F32), rand((4,), I32))
case("einsum[f32,i32]", lambda a, b: tnp.einsum("i,i", a, b), *_MIXED,
     why="np.einsum sums in its own order", **ulps(*_MIXED))

# -- linear algebra ------------------------------------------------------------------------------

VECTOR_ORDS = (None, 2, 1, 0, np.inf, -np.inf, 3, 0.5, -1, -2.5)
for _ord in VECTOR_ORDS:
    for _dt in (F64, F32, I32):
        x = rand((2, 5), _dt, -3, 3, seed=7)
        case(f"norm[vector,ord={_ord},{_dt}]", lambda a, o=_ord: tnp.linalg.norm(a, o, axis=1),
             lambda a, o=_ord: np.linalg.norm(a, o, axis=1), x,
             grad_argnums=(0,) if _dt == F64 and _ord not in (0, np.inf, -np.inf) else ())
MATRIX_ORDS = (None, "fro", 1, -1, np.inf, -np.inf)
for _ord in MATRIX_ORDS:
    for _axis, _keep in ((None, False), ((0, 1), True), ((2, 0), False), ((-1, -2), False)):
        x = rand((3, 4) if _axis is None else (3, 4, 2), seed=8)
        case(f"norm[matrix,ord={_ord},axis={_axis},keepdims={_keep}]",
             lambda a, o=_ord, x=_axis, k=_keep: tnp.linalg.norm(a, o, x, k),
             lambda a, o=_ord, x=_axis, k=_keep: np.linalg.norm(a, o, x, k), x,
             grad_argnums=(0,) if _ord in (None, "fro") else ())
case("norm[default,3-D]", tnp.linalg.norm, np.linalg.norm, X234, grad_argnums=(0,))
case("norm[default,keepdims]", lambda a: tnp.linalg.norm(a, keepdims=True),
     lambda a: np.linalg.norm(a, keepdims=True), rand((2, 3), I64))


def _spd(n, batch=(), dtype=F64, seed=0):
    a = rand(batch + (n, n), dtype, seed=seed)
    return (a @ np.swapaxes(a, -1, -2) + n * np.eye(n, dtype=dtype)).astype(dtype)


for _batch, _dt in (((), F64), ((2,), F64), ((), F32), ((2, 1), F64)):
    a = _spd(3, _batch, _dt, seed=1)
    grad = (0,) if _dt == F64 else ()
    case(f"inv[{_batch},{_dt}]", tnp.linalg.inv, np.linalg.inv, a, grad_argnums=grad,
         why="LAPACK inv and solve(a, I) round differently", **ulps(np.linalg.inv, a))
    case(f"det[{_batch},{_dt}]", tnp.linalg.det, np.linalg.det, a, grad_argnums=grad)
    case(f"slogdet[{_batch},{_dt}]", lambda x: tuple(tnp.linalg.slogdet(x)),
         lambda x: tuple(np.linalg.slogdet(x)), a, grad_argnums=grad)
    case(f"cholesky[{_batch},{_dt}]", tnp.linalg.cholesky, np.linalg.cholesky, a,
         grad_argnums=grad, grad_rtol=1e-5)
    case(f"cholesky[upper,{_batch},{_dt}]", lambda x: tnp.linalg.cholesky(x, upper=True),
         lambda x: np.linalg.cholesky(x, upper=True), a, rtol=4e-16 if _dt == F64 else 2e-7,
         why="NumPy factors the upper triangle directly; tracegrad transposes the lower")
case("det[i32]", tnp.linalg.det, np.linalg.det, rand((3, 3), I32, -3, 3))
case("inv[i64]", tnp.linalg.inv, np.linalg.inv, np.array([[2, 1], [1, 3]]))
for _sa, _sb in (((3, 3), (3,)), ((3, 3), (3, 2)), ((2, 3, 3), (3,)), ((2, 3, 3), (3, 1)),
                 ((2, 1, 3, 3), (4, 3, 2)), ((3, 3), (2, 3, 1))):
    case(f"solve[{_sa},{_sb}]", tnp.linalg.solve, np.linalg.solve, _spd(3, _sa[:-2], seed=2),
         rand(_sb, seed=3), grad_argnums=(0, 1))
case("solve[i32,f32]", tnp.linalg.solve, np.linalg.solve, np.array([[2, 1], [1, 3]], I32),
     rand((2,), F32))

# -- diagonals, triangles, padding ---------------------------------------------------------------

for _k in (0, 1, -2, 5):
    case(f"diag[1-D,k={_k}]", lambda v, k=_k: tnp.diag(v, k), lambda v, k=_k: np.diag(v, k),
         rand((3,)), grad_argnums=(0,))
    case(f"diag[2-D,k={_k}]", lambda v, k=_k: tnp.diag(v, k), lambda v, k=_k: np.diag(v, k),
         rand((3, 4)), grad_argnums=(0,))
case("diag[bool]", tnp.diag, np.diag, rand((3,), BOOL))
case("diag[empty]", tnp.diag, np.diag, rand((0,)))
for _offset, _a1, _a2 in ((0, 0, 1), (1, 0, 1), (-1, 1, 2), (2, 2, 0), (0, -1, -3), (-9, 0, 1)):
    case(f"diagonal[{_offset},{_a1},{_a2}]",
         lambda a, o=_offset, i=_a1, j=_a2: tnp.diagonal(a, o, i, j),
         lambda a, o=_offset, i=_a1, j=_a2: np.diagonal(a, o, i, j), X345, grad_argnums=(0,))
    case(f"trace[{_offset},{_a1},{_a2}]",
         lambda a, o=_offset, i=_a1, j=_a2: tnp.trace(a, o, i, j),
         lambda a, o=_offset, i=_a1, j=_a2: np.trace(a, o, i, j), X345, grad_argnums=(0,))
case("trace[i32]", tnp.trace, np.trace, rand((3, 3), I32))
for _name in ("triu", "tril"):
    for _k, _shape, _dt in ((0, (3, 4), F64), (1, (2, 3, 3), F64), (-1, (4, 2), I32),
                            (0, (3,), F64), (2, (2, 3), BOOL)):
        f, r = getattr(tnp, _name), getattr(np, _name)
        case(f"{_name}[k={_k},{_shape},{_dt}]", lambda a, f=f, k=_k: f(a, k),
             lambda a, r=r, k=_k: r(a, k), rand(_shape, _dt),
             grad_argnums=(0,) if _dt == F64 else ())

for _mode in ("constant", "edge", "reflect", "symmetric", "wrap"):
    for _width in (1, (2, 1), ((1, 0), (3, 2)), ((0, 7), (5, 0)), ((4, 9), (0, 0))):
        x = rand((3, 4), seed=9)
        case(f"pad[{_mode},{_width}]", lambda a, w=_width, m=_mode: tnp.pad(a, w, m),
             lambda a, w=_width, m=_mode: np.pad(a, w, m), x, grad_argnums=(0,))
    case(f"pad[{_mode},i32,1-D]", lambda a, m=_mode: tnp.pad(a, (3, 5), m),
         lambda a, m=_mode: np.pad(a, (3, 5), m), rand((3,), I32))
    case(f"pad[{_mode},size 1]", lambda a, m=_mode: tnp.pad(a, 2, m),
         lambda a, m=_mode: np.pad(a, 2, m), rand((1, 2)))
case("pad[constant values]", lambda a: tnp.pad(a, ((1, 2), (2, 1)), constant_values=((1, 2),
                                                                                     (3, 4))),
     lambda a: np.pad(a, ((1, 2), (2, 1)), constant_values=((1, 2), (3, 4))), rand((2, 2)))
case("pad[constant value 2.5 into i32]", lambda a: tnp.pad(a, 1, constant_values=2.5),
     lambda a: np.pad(a, 1, constant_values=2.5), rand((2,), I32))

# -- tracegrad.nn --------------------------------------------------------------------------------

WIDE = np.array([-1000.0, -30.0, -2.0, -0.5, 0.0, 0.5, 2.0, 30.0, 1000.0])
LOGISTIC = "the logistic primitive evaluates exp(-|x|) branches; SciPy 1/(1+exp(-x))"
NN = {
    "sigmoid": (nn.sigmoid, scipy.special.expit, 2e-16, LOGISTIC),
    "log_sigmoid": (nn.log_sigmoid, scipy.special.log_expit, 5e-16,
                    "log1p(exp(-|x|)) against SciPy's own branches"),
    "softplus": (nn.softplus, lambda x: np.logaddexp(x, 0.0), 5e-16,
                 "NumPy's logaddexp has its own branches"),
    "relu": (nn.relu, lambda x: np.maximum(x, 0.0), 0, ""),
    "elu": (nn.elu, lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0))), 0, ""),
    "gelu": (nn.gelu, lambda x: x * 0.5 * (1 + scipy.special.erf(x / np.sqrt(2))), 2e-16,
             "x / sqrt(2) is computed as x * (1 / sqrt(2))"),
    "gelu[tanh]": (lambda x: nn.gelu(x, approximate=True), lambda x: 0.5 * x * (1 + np.tanh(
        np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))), 4e-16, "association of the constants"),
    "softmax": (nn.softmax, lambda x: scipy.special.softmax(x, axis=-1), 4e-16,
                "SciPy normalises differently"),
    "log_softmax": (nn.log_softmax, lambda x: scipy.special.log_softmax(x, axis=-1), 4e-16,
                    "SciPy subtracts the max in another order"),
    "logsumexp": (nn.logsumexp, scipy.special.logsumexp, 4e-16,
                  "SciPy sums the shifted exponentials in another order"),
}
for _name, (_fn, _ref, _rtol, _why) in NN.items():
    smooth = _name not in ("relu", "elu")
    case(f"nn.{_name}[wide]", _fn, _ref, WIDE, rtol=_rtol, atol=1e-300 if _rtol else 0,
         why=_why)
    case(f"nn.{_name}[3x4]", _fn, _ref, rand((3, 4), seed=10), rtol=_rtol, why=_why,
         grad_argnums=(0,) if smooth or _name == "elu" else ())
    case(f"nn.{_name}[f32]", _fn, lambda x, r=_ref: r(x.astype(F64)).astype(F32),
         rand((5,), F32, seed=11), rtol=1e-6, atol=1e-30,
         why="a few float32 operations against float64 rounded once")
    case(f"nn.{_name}[i32]", _fn, (lambda x: np.maximum(x, 0)) if _name == "relu" else (
        lambda x, r=_ref: r(x.astype(F64))), rand((5,), I32, -3, 3), rtol=_rtol, why=_why)
for _axis in (0, -1, 1):
    for _name in ("softmax", "log_softmax"):
        f, r = getattr(nn, _name), getattr(scipy.special, _name)
        case(f"nn.{_name}[axis={_axis}]", lambda x, f=f, a=_axis: f(x, axis=a),
             lambda x, r=r, a=_axis: r(x, axis=a), X234,
             rtol=4e-16, why="SciPy normalises in another order", grad_argnums=(0,))
for _axis, _keep in ((None, False), (None, True), (1, False), ((0, 2), True), (-1, False)):
    case(f"nn.logsumexp[axis={_axis},keepdims={_keep}]",
         lambda x, a=_axis, k=_keep: nn.logsumexp(x, a, k),
         lambda x, a=_axis, k=_keep: scipy.special.logsumexp(x, a, keepdims=k), X234,
         rtol=4e-16, why="SciPy sums the shifted exponentials in another order",
         grad_argnums=(0,))
case("nn.logsumexp[-inf rows]", lambda x: nn.logsumexp(x, axis=1),
     lambda x: scipy.special.logsumexp(x, axis=1),
     np.array([[-np.inf, -np.inf], [np.inf, 1.0], [0.0, 1.0]]), rtol=4e-16,
     why="SciPy sums the shifted exponentials in another order")
for _depth, _labels in ((4, np.array([0, 3, 1, 5, -1])), (3, np.array([[2, 0], [1, 1]], I32)),
                        (2, np.array(1))):
    case(f"nn.one_hot[{_depth},{_labels.shape}]", lambda x, d=_depth: nn.one_hot(x, d),
         lambda x, d=_depth: (x[..., None] == np.arange(d)).astype(F64), _labels)
case("nn.one_hot[f32]", lambda x: nn.one_hot(x, 3, dtype=F32),
     lambda x: (x[..., None] == np.arange(3)).astype(F32), np.array([2, 0]))

# -- gradient rows for the API functions the rows above check only for values --------------
# (random float64 inputs: no ties for max/min, nothing within the step of relu's kink)

for _name in ("true_divide", "maximum", "minimum", "fmax", "fmin"):
    case(f"{_name}[f64,broadcast,grad]", getattr(tnp, _name), getattr(np, _name),
         rand((3, 1), F64, 0.5, 3, seed=20), rand((1, 4), F64, 0.5, 3, seed=21),
         grad_argnums=(0, 1))
for _name in ("max", "min", "amax", "amin"):
    f, r = getattr(tnp, _name), getattr(np, _name)
    for _axis, _keep in ((None, False), (1, True), ((0, 2), False)):
        case(f"{_name}[f64,axis={_axis},keepdims={_keep},grad]",
             lambda a, f=f, ax=_axis, k=_keep: f(a, axis=ax, keepdims=k),
             lambda a, r=r, ax=_axis, k=_keep: r(a, axis=ax, keepdims=k), X234, grad_argnums=(0,))
case("sqrt[f64,grad]", tnp.sqrt, np.sqrt, rand((3, 4), F64, 0.2, 4), grad_argnums=(0,))
case("ravel[f64,grad]", tnp.ravel, np.ravel, X234, grad_argnums=(0,))
case("swapaxes[f64,grad]", lambda a: tnp.swapaxes(a, 0, -1), lambda a: np.swapaxes(a, 0, -1),
     X234, grad_argnums=(0,))
case("moveaxis[f64,grad]", lambda a: tnp.moveaxis(a, (0, 1), (-1, 0)),
     lambda a: np.moveaxis(a, (0, 1), (-1, 0)), X234, grad_argnums=(0,))
for _name in ("hstack", "vstack"):
    f, r = getattr(tnp, _name), getattr(np, _name)
    case(f"{_name}[f64,grad]", lambda a, b, f=f: f([a, b, a]), lambda a, b, r=r: r([a, b, a]),
         rand((2, 3), seed=22), rand((2, 3), seed=23), grad_argnums=(0, 1))
case("full[array fill,grad]", lambda v: tnp.full((3, 2), v), lambda v: np.full((3, 2), v),
     rand((2,), seed=24), grad_argnums=(0,))
case("full_like[traced fill,grad]", lambda a, v: tnp.full_like(a, v) * a,
     lambda a, v: np.full_like(a, v) * a, rand((2, 3), seed=25), rand((), seed=26),
     grad_argnums=(0, 1))
case("nn.relu[away from 0,grad]", nn.relu, lambda x: np.maximum(x, 0.0),
     np.array([[-1.5, 0.25, 2.0], [0.5, -0.75, -2.0]]), grad_argnums=(0,))
