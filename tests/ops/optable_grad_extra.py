"""Gradient rows for the op table: every differentiable primitive, at the primitive level.

`EXTRA_CASES` are `optable.Case` rows (not added to `optable.CASES`, so the other table
checks do not run them twice) written with `tracegrad.ops` wrappers, so that each row
exercises its primitive's gradient rule directly, in the variants the rule has to get
right: both operands of binary ops, broadcasting and size-1 dims, strides and interior
padding, repeated indices, zeros in products, every flag of `triangular_solve`, batches.
Inputs keep clear of kinks and singularities by more than the finite-difference step.
"""

from __future__ import annotations

import itertools

import numpy as np
import scipy.linalg
import scipy.special

from tests.ops.optable import Case, rand
from tracegrad import ops

EXTRA_CASES: list[Case] = []


def row(name, fn, reference, *args, grad_argnums=(0,), primitive=None, grad_rtol=1e-6):
    EXTRA_CASES.append(Case(name, fn, reference, tuple(args), grad_argnums=grad_argnums,
                            rtol=1e-12, atol=1e-12, grad_rtol=grad_rtol,
                            primitive=primitive or name.split("[")[0]))


def away_from_zero(shape, low=0.3, high=2.0, seed=0):
    """Values in +-[low, high): clear of the kinks at zero (abs, sign-dependent rules)."""
    r = np.random.default_rng(seed)
    return rand(shape, low=low, high=high, seed=seed) * r.choice([-1.0, 1.0], size=shape)


# -- unary elementwise ---------------------------------------------------------------------

UNARY = {
    # name: (reference, low, high)
    "neg": (np.negative, -2, 2),
    "exp": (np.exp, -2, 2),
    "exp2": (np.exp2, -2, 2),
    "expm1": (np.expm1, -2, 2),
    "log": (np.log, 0.3, 3),
    "log2": (np.log2, 0.3, 3),
    "log10": (np.log10, 0.3, 3),
    "log1p": (np.log1p, -0.6, 2),
    "sqrt": (np.sqrt, 0.3, 3),
    "sin": (np.sin, -3, 3),
    "cos": (np.cos, -3, 3),
    "tan": (np.tan, -1.2, 1.2),
    "asin": (np.arcsin, -0.9, 0.9),
    "acos": (np.arccos, -0.9, 0.9),
    "atan": (np.arctan, -3, 3),
    "sinh": (np.sinh, -2, 2),
    "cosh": (np.cosh, -2, 2),
    "tanh": (np.tanh, -2, 2),
    "asinh": (np.arcsinh, -3, 3),
    "acosh": (np.arccosh, 1.2, 3),
    "atanh": (np.arctanh, -0.9, 0.9),
    "logistic": (scipy.special.expit, -4, 4),
    "erf": (scipy.special.erf, -2, 2),
}

for _name, (_ref, _low, _high) in UNARY.items():
    _prim = ops.get_primitive(_name)
    row(f"{_name}[3x4]", _prim.bind, _ref, rand((3, 4), low=_low, high=_high))

row("abs[3x4]", ops.abs_, np.abs, away_from_zero((3, 4)))

for _y in (0, 1, 2, 3, -2):
    row(f"integer_pow[y={_y}]", lambda x, y=_y: ops.integer_pow(x, y=y),
        lambda x, y=_y: x ** float(y), away_from_zero((5,)), primitive="integer_pow")

row("convert_element_type[f64->f64]",
    lambda x: ops.convert_element_type(x, new_dtype=np.dtype("float64")), lambda x: x * 1.0,
    rand((4,)))

# -- binary elementwise --------------------------------------------------------------------

_x, _y = rand((3, 4), seed=1), rand((3, 4), seed=2)
row("add[3x4]", ops.add, np.add, _x, _y, grad_argnums=(0, 1))
row("sub[3x4]", ops.sub, np.subtract, _x, _y, grad_argnums=(0, 1))
row("mul[3x4]", ops.mul, np.multiply, _x, _y, grad_argnums=(0, 1))
row("mul[x,x]", lambda x: ops.mul(x, x), lambda x: x * x, _x, primitive="mul")
row("div[3x4]", ops.div, np.true_divide, _x, away_from_zero((3, 4), 0.5), grad_argnums=(0, 1))
row("mod[3x4]", ops.mod, np.mod, rand((3, 4), low=-3, high=3, seed=3),
    rand((3, 4), low=0.7, high=1.3, seed=4) * np.array([1.0, -1.0, 1.0, -1.0]),
    grad_argnums=(0, 1))
row("pow[3x4]", ops.pow_, np.power, rand((3, 4), low=0.3, high=2.0),
    rand((3, 4), low=-2.0, high=2.0, seed=5), grad_argnums=(0, 1))
row("pow[negative base, base only]", lambda x: ops.pow_(x, ops.full_like(x, 3.0)),
    lambda x: x ** 3.0, away_from_zero((6,)), primitive="pow")
row("max[3x4]", ops.max_, np.maximum, _x, _y, grad_argnums=(0, 1))
row("min[3x4]", ops.min_, np.minimum, _x, _y, grad_argnums=(0, 1))
row("atan2[3x4]", ops.atan2, np.arctan2, _x, away_from_zero((3, 4), seed=6), grad_argnums=(0, 1))
row("select[3x4]", ops.select, np.where, rand((3, 4), "bool"), _x, _y, grad_argnums=(1, 2))

# -- shape ops -----------------------------------------------------------------------------

row("broadcast_in_dim[3->2x3]",
    lambda x: ops.broadcast_in_dim(x, shape=(2, 3), broadcast_dimensions=(1,)),
    lambda x: np.broadcast_to(x, (2, 3)), rand((3,)))
row("broadcast_in_dim[3x1->3x4x2]",
    lambda x: ops.broadcast_in_dim(x, shape=(3, 4, 2), broadcast_dimensions=(0, 1)),
    lambda x: np.broadcast_to(x[:, :, None], (3, 4, 2)), rand((3, 1)))
row("reshape[2x3->3x2]", lambda x: ops.reshape(x, new_sizes=(3, 2)),
    lambda x: x.reshape(3, 2), rand((2, 3)))
row("transpose[2x3x4]", lambda x: ops.transpose(x, permutation=(2, 0, 1)),
    lambda x: np.transpose(x, (2, 0, 1)), rand((2, 3, 4)))
row("slice[strided]",
    lambda x: ops.slice(x, start_indices=(1, 0), limit_indices=(5, 5), strides=(2, 3)),
    lambda x: x[1:5:2, 0:5:3], rand((6, 5)))
row("slice[empty]",
    lambda x: ops.slice(x, start_indices=(2, 0), limit_indices=(2, 3), strides=(1, 1)),
    lambda x: x[2:2, 0:3], rand((4, 3)))
row("rev[3x4]", lambda x: ops.rev(x, dimensions=(0, 1)), lambda x: x[::-1, ::-1], rand((3, 4)))


def _np_pad(x, value, config):
    shape = tuple(lo + hi + n + max(n - 1, 0) * i for n, (lo, hi, i) in zip(x.shape, config))
    out = np.full(shape, value)
    out[tuple(slice(lo, lo + n + max(n - 1, 0) * i, i + 1)
              for n, (lo, hi, i) in zip(x.shape, config))] = x
    return out


_PAD = ((1, 2, 1), (0, 1, 0))
row("pad[interior]", lambda x, v: ops.pad(x, v, padding_config=_PAD),
    lambda x, v: _np_pad(x, v, _PAD), rand((3, 2)), np.array(0.5), grad_argnums=(0, 1))
row("concatenate[3 operands]", lambda a, b, c: ops.concatenate(a, b, c, dimension=1),
    lambda a, b, c: np.concatenate([a, b, c], axis=1), rand((2, 1)), rand((2, 3), seed=1),
    rand((2, 2), seed=2), grad_argnums=(0, 1, 2))

# -- reductions ----------------------------------------------------------------------------

_r = rand((3, 4, 2), seed=7)
row("reduce_sum[axes=(0,2)]", lambda x: ops.reduce_sum(x, axes=(0, 2)),
    lambda x: x.sum(axis=(0, 2)), _r)
row("reduce_sum[keepdims]", lambda x: ops.reduce_sum(x, axes=(1,), keepdims=True),
    lambda x: x.sum(axis=1, keepdims=True), _r)
row("reduce_prod[axis=1]", lambda x: ops.reduce_prod(x, axes=(1,)),
    lambda x: x.prod(axis=1), _r)
_zeros = rand((3, 4), seed=8)
_zeros[0, 1] = 0.0
_zeros[1, 0] = _zeros[1, 3] = 0.0
row("reduce_prod[zeros]", lambda x: ops.reduce_prod(x, axes=(1,)),
    lambda x: x.prod(axis=1), _zeros)
row("reduce_prod[axes=(0,2), keepdims]", lambda x: ops.reduce_prod(x, axes=(0, 2), keepdims=True),
    lambda x: x.prod(axis=(0, 2), keepdims=True), _r)
row("reduce_max[axes=(1,)]", lambda x: ops.reduce_max(x, axes=(1,)),
    lambda x: x.max(axis=1), _r)
row("reduce_min[axes=(0,2)]", lambda x: ops.reduce_min(x, axes=(0, 2)),
    lambda x: x.min(axis=(0, 2)), _r)
row("cumsum[axis=1]", lambda x: ops.cumsum(x, axis=1), lambda x: np.cumsum(x, axis=1), _r)
row("cumsum[reverse]", lambda x: ops.cumsum(x, axis=0, reverse=True),
    lambda x: np.flip(np.cumsum(np.flip(x, 0), axis=0), 0), _r)
_cp = rand((2, 7), seed=9)
_cp[0, 2] = 0.0
_cp[1, 1] = _cp[1, 5] = 0.0
row("cumprod[axis=1, zeros]", lambda x: ops.cumprod(x, axis=1),
    lambda x: np.cumprod(x, axis=1), _cp)
row("cumprod[reverse, zeros]", lambda x: ops.cumprod(x, axis=1, reverse=True),
    lambda x: np.flip(np.cumprod(np.flip(x, 1), axis=1), 1), _cp)
row("sort[axis=0]", lambda x: ops.sort(x, axis=0), lambda x: np.sort(x, axis=0), _r)
row("sort[1-D]", lambda x: ops.sort(x, axis=0), lambda x: np.sort(x), rand((9,), seed=10))

# -- indexing ------------------------------------------------------------------------------

_idx = np.array([0, 2, 2, -1])
row("gather[axis=0, repeated]", lambda x: ops.gather(x, _idx, axis=0),
    lambda x: np.take(x, _idx, axis=0), rand((5, 3)))
row("gather[axis=1, 2-D indices]", lambda x: ops.gather(x, np.array([[1, 0], [2, 2]]), axis=1),
    lambda x: np.take(x, np.array([[1, 0], [2, 2]]), axis=1), rand((2, 3, 2)))


def _np_scatter_add(x, u):
    out = x.copy()
    np.add.at(out, (slice(None), _idx), u)
    return out


def _np_scatter(x, u):
    out = x.copy()
    out[:, _idx] = u
    return out


row("scatter_add[repeated]", lambda x, u: ops.scatter_add(x, _idx, u, axis=1), _np_scatter_add,
    rand((2, 5)), rand((2, 4), seed=1), grad_argnums=(0, 1))
row("scatter[repeated]", lambda x, u: ops.scatter(x, _idx, u, axis=1), _np_scatter,
    rand((2, 5)), rand((2, 4), seed=1), grad_argnums=(0, 1))

# -- contractions and linear algebra -------------------------------------------------------

row("dot_general[matmul]",
    lambda a, b: ops.dot_general(a, b, dimension_numbers=(((1,), (0,)), ((), ()))),
    np.matmul, rand((3, 4)), rand((4, 2), seed=1), grad_argnums=(0, 1))
row("dot_general[batched]",
    lambda a, b: ops.dot_general(a, b, dimension_numbers=(((2,), (1,)), ((0,), (0,)))),
    np.matmul, rand((2, 3, 4)), rand((2, 4, 5), seed=1), grad_argnums=(0, 1))
row("dot_general[crossed contraction]",
    lambda a, b: ops.dot_general(a, b, dimension_numbers=(((1, 2), (2, 0)), ((), ()))),
    lambda a, b: np.einsum("ijk,kmj->im", a, b), rand((2, 3, 4)), rand((4, 5, 3), seed=1),
    grad_argnums=(0, 1))
row("dot_general[inner batch dims]",
    lambda a, b: ops.dot_general(a, b, dimension_numbers=(((2,), (1,)), ((1,), (0,)))),
    lambda a, b: np.einsum("ibk,bkj->bij", a, b), rand((3, 2, 4)), rand((2, 4, 5), seed=1),
    grad_argnums=(0, 1))


def _spd(shape, seed=0):
    n = shape[-1]
    a = rand(shape, seed=seed)
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


def _sym(a):
    return ops.mul(ops.add(a, ops.transpose(a, permutation=(0, 2, 1))), ops.full_like(a, 0.5))


row("cholesky[batched]", lambda a: ops.cholesky(_sym(a)),
    lambda a: np.linalg.cholesky(0.5 * (a + np.swapaxes(a, -1, -2))), _spd((2, 3, 3)))


def _np_triangular_solve(a, b, left_side, lower, transpose_a, unit_diagonal):
    out = np.empty_like(b)
    for i in range(a.shape[0]):
        if left_side:
            out[i] = scipy.linalg.solve_triangular(a[i], b[i], trans=int(transpose_a),
                                                   lower=lower, unit_diagonal=unit_diagonal)
        else:
            out[i] = scipy.linalg.solve_triangular(
                a[i], b[i].T, trans=1 - int(transpose_a), lower=lower,
                unit_diagonal=unit_diagonal).T
    return out


_tri = rand((2, 3, 3), seed=11) + 3 * np.eye(3)
for _flags in itertools.product((True, False), repeat=4):
    _kw = dict(zip(("left_side", "lower", "transpose_a", "unit_diagonal"), _flags))
    _b = rand((2, 3, 2) if _kw["left_side"] else (2, 2, 3), seed=12)
    row("triangular_solve[" + ",".join(k for k, v in _kw.items() if v) + "]",
        lambda a, b, kw=_kw: ops.triangular_solve(a, b, **kw),
        lambda a, b, kw=_kw: _np_triangular_solve(a, b, **kw), _tri, _b, grad_argnums=(0, 1),
        primitive="triangular_solve")

row("solve[batched]", ops.solve, np.linalg.solve, rand((2, 3, 3), seed=13) + 3 * np.eye(3),
    rand((2, 3, 2), seed=14), grad_argnums=(0, 1))
row("det[3x3]", ops.det, np.linalg.det, rand((3, 3), seed=15))
row("det[batched]", ops.det, np.linalg.det, rand((2, 3, 3), seed=16))
row("slogdet[batched]", lambda a: ops.slogdet(a)[1], lambda a: np.linalg.slogdet(a)[1],
    rand((2, 3, 3), seed=17))
