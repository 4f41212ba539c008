"""NumPy protocol dispatch: `np.sin(t)`, `np.sum(t, axis=1)`, `np.dot(a, t)` on tensors.

`__array_ufunc__` and `__array_function__` route NumPy calls that involve a `tg.Tensor`
or `tg.Variable` to tracegrad.numpy. Arguments are matched by name against NumPy's own
signature. Nothing else leaves the tape or the trace: a function tracegrad lacks, or an
argument it does not take (`out=`, `where=`, `initial=` ...), raises UnsupportedOpError
naming the NumPy function — traced, eager and under a tape alike — except the functions
that return no array and so have no gradient to lose: the dtype queries (`TYPE_QUERIES`,
answered from the tensors' types, traced too) and, on concrete values only, the
comparisons and printers of `VALUE_QUERIES`. `np.asarray(t)` / `t.numpy()` leave tracegrad
on purpose (`__array__`). See docs/numpy.md, "NumPy functions on tensors".
"""

from __future__ import annotations

import inspect

import numpy as np

import tracegrad.numpy as tnp
from tracegrad.core.ir import GraphTensor, Tensor
from tracegrad.core.state import state
from tracegrad.core.variables import Variable
from tracegrad.errors import UnsupportedOpError
from tracegrad.numpy._ufuncs import UFUNCS

UFUNC_CALLS = {
    **UFUNCS, np.matmul: tnp.matmul,
    np.trunc: tnp.trunc, np.signbit: tnp.signbit, np.copysign: tnp.copysign,
    np.heaviside: tnp.heaviside, np.fabs: tnp.fabs, np.hypot: tnp.hypot, np.cbrt: tnp.cbrt,
    np.fmod: tnp.fmod, np.divmod: tnp.divmod, np.modf: tnp.modf, np.ldexp: tnp.ldexp,
    np.frexp: tnp.frexp, np.deg2rad: tnp.deg2rad, np.radians: tnp.radians,
    np.rad2deg: tnp.rad2deg, np.degrees: tnp.degrees, np.float_power: tnp.float_power,
    np.conjugate: tnp.conjugate, np.vecdot: tnp.vecdot, np.matvec: tnp.matvec,
    np.vecmat: tnp.vecmat,
    np.gcd: tnp.gcd, np.lcm: tnp.lcm, np.nextafter: tnp.nextafter, np.spacing: tnp.spacing,
}

# ufunc.reduce / ufunc.accumulate as the tracegrad function and its NumPy-default axis.
REDUCE = {
    np.add: tnp.sum, np.multiply: tnp.prod, np.maximum: tnp.max, np.minimum: tnp.min,
    np.logical_and: tnp.all, np.logical_or: tnp.any,
}
ACCUMULATE = {np.add: tnp.cumsum, np.multiply: tnp.cumprod}

FUNCTIONS = {
    np.sum: tnp.sum, np.mean: tnp.mean, np.prod: tnp.prod, np.max: tnp.max,
    np.min: tnp.min, np.amax: tnp.amax, np.amin: tnp.amin, np.argmax: tnp.argmax,
    np.argmin: tnp.argmin, np.var: tnp.var, np.std: tnp.std, np.cumsum: tnp.cumsum,
    np.cumprod: tnp.cumprod, np.any: tnp.any, np.all: tnp.all,
    np.round: tnp.round, np.around: tnp.round, np.clip: tnp.clip, np.where: tnp.where,
    np.dot: tnp.dot, np.vdot: tnp.vdot, np.inner: tnp.inner, np.outer: tnp.outer,
    np.tensordot: tnp.tensordot, np.einsum: tnp.einsum,
    np.reshape: tnp.reshape, np.ravel: tnp.ravel, np.transpose: tnp.transpose,
    np.swapaxes: tnp.swapaxes, np.moveaxis: tnp.moveaxis, np.expand_dims: tnp.expand_dims,
    np.squeeze: tnp.squeeze, np.broadcast_to: tnp.broadcast_to,
    np.concatenate: tnp.concatenate, np.stack: tnp.stack, np.hstack: tnp.hstack,
    np.vstack: tnp.vstack, np.split: tnp.split, np.tile: tnp.tile, np.repeat: tnp.repeat,
    np.flip: tnp.flip, np.take: tnp.take, np.take_along_axis: tnp.take_along_axis,
    np.pad: tnp.pad, np.zeros_like: tnp.zeros_like, np.ones_like: tnp.ones_like,
    np.full_like: tnp.full_like, np.diag: tnp.diag, np.diagonal: tnp.diagonal,
    np.trace: tnp.trace, np.triu: tnp.triu, np.tril: tnp.tril, np.astype: tnp.astype,
    np.sort: tnp.sort, np.argsort: tnp.argsort, np.nonzero: tnp.nonzero,
    np.argwhere: tnp.argwhere, np.flatnonzero: tnp.flatnonzero, np.extract: tnp.extract,
    np.compress: tnp.compress,
    np.unique: tnp.unique, np.unique_all: tnp.unique_all, np.unique_counts: tnp.unique_counts,
    np.unique_inverse: tnp.unique_inverse, np.unique_values: tnp.unique_values,
    np.intersect1d: tnp.intersect1d, np.setdiff1d: tnp.setdiff1d, np.union1d: tnp.union1d,
    np.setxor1d: tnp.setxor1d, np.trim_zeros: tnp.trim_zeros, np.bincount: tnp.bincount,
    np.histogram: tnp.histogram, np.histogram_bin_edges: tnp.histogram_bin_edges,
    np.histogram2d: tnp.histogram2d, np.histogramdd: tnp.histogramdd,
    np.packbits: tnp.packbits, np.unpackbits: tnp.unpackbits,
    np.linspace: tnp.linspace, np.shape: tnp.shape, np.ndim: tnp.ndim, np.size: tnp.size,
    np.sinc: tnp.sinc, np.angle: tnp.angle, np.real: tnp.real, np.imag: tnp.imag,
    np.iscomplex: tnp.iscomplex, np.isreal: tnp.isreal, np.isposinf: tnp.isposinf,
    np.isneginf: tnp.isneginf, np.nan_to_num: tnp.nan_to_num, np.isclose: tnp.isclose,
    np.matrix_transpose: tnp.matrix_transpose, np.unstack: tnp.unstack,
    np.rollaxis: tnp.rollaxis, np.atleast_3d: tnp.atleast_3d,
    np.column_stack: tnp.column_stack, np.dstack: tnp.dstack, np.array_split: tnp.array_split,
    np.hsplit: tnp.hsplit, np.vsplit: tnp.vsplit, np.dsplit: tnp.dsplit,
    np.fliplr: tnp.fliplr, np.flipud: tnp.flipud, np.rot90: tnp.rot90, np.roll: tnp.roll,
    np.append: tnp.append, np.delete: tnp.delete, np.resize: tnp.resize,
    np.diagflat: tnp.diagflat, np.broadcast_arrays: tnp.broadcast_arrays,
    np.meshgrid: tnp.meshgrid, np.ix_: tnp.ix_, np.block: tnp.block,
    np.nansum: tnp.nansum, np.nanprod: tnp.nanprod, np.nancumsum: tnp.nancumsum,
    np.nancumprod: tnp.nancumprod, np.nanmax: tnp.nanmax, np.nanmin: tnp.nanmin,
    np.nanargmax: tnp.nanargmax, np.nanargmin: tnp.nanargmin, np.nanmean: tnp.nanmean,
    np.nanvar: tnp.nanvar, np.nanstd: tnp.nanstd, np.ptp: tnp.ptp,
    np.count_nonzero: tnp.count_nonzero, np.average: tnp.average,
    np.quantile: tnp.quantile, np.percentile: tnp.percentile, np.median: tnp.median,
    np.diff: tnp.diff, np.ediff1d: tnp.ediff1d, np.cumulative_sum: tnp.cumulative_sum,
    np.cumulative_prod: tnp.cumulative_prod,
    np.convolve: tnp.convolve, np.correlate: tnp.correlate, np.cross: tnp.cross, np.kron: tnp.kron,
    np.vander: tnp.vander, np.trapezoid: tnp.trapezoid, np.polyval: tnp.polyval,
    np.polyadd: tnp.polyadd, np.polysub: tnp.polysub, np.polymul: tnp.polymul,
    np.polyder: tnp.polyder, np.polyint: tnp.polyint, np.interp: tnp.interp,
    np.searchsorted: tnp.searchsorted, np.digitize: tnp.digitize, np.cov: tnp.cov,
    np.corrcoef: tnp.corrcoef, np.empty_like: tnp.empty_like, np.copy: tnp.copy,
    np.tril_indices_from: tnp.tril_indices_from, np.triu_indices_from: tnp.triu_indices_from,
    np.diag_indices_from: tnp.diag_indices_from, np.select: tnp.select, np.choose: tnp.choose,
    np.isin: tnp.isin, np.insert: tnp.insert, np.gradient: tnp.gradient, np.unwrap: tnp.unwrap,
    np.nanquantile: tnp.nanquantile, np.nanpercentile: tnp.nanpercentile,
    np.nanmedian: tnp.nanmedian, np.logspace: tnp.logspace, np.geomspace: tnp.geomspace,
    np.partition: tnp.partition, np.argpartition: tnp.argpartition, np.lexsort: tnp.lexsort,
    np.ravel_multi_index: tnp.ravel_multi_index, np.unravel_index: tnp.unravel_index,
    np.put: tnp.put, np.put_along_axis: tnp.put_along_axis, np.place: tnp.place,
    np.fill_diagonal: tnp.fill_diagonal, np.piecewise: tnp.piecewise,
    np.apply_along_axis: tnp.apply_along_axis, np.apply_over_axes: tnp.apply_over_axes,
    np.einsum_path: tnp.einsum_path, np.poly: tnp.poly, np.polydiv: tnp.polydiv,
    np.polyfit: tnp.polyfit, np.roots: tnp.roots,
    np.i0: tnp.i0,
    np.linalg.norm: tnp.linalg.norm, np.linalg.inv: tnp.linalg.inv,
    np.linalg.solve: tnp.linalg.solve, np.linalg.det: tnp.linalg.det,
    np.linalg.slogdet: tnp.linalg.slogdet, np.linalg.cholesky: tnp.linalg.cholesky,
    **{getattr(np.linalg, name): getattr(tnp.linalg, name) for name in tnp.linalg.NUMPY_NAMES
       if hasattr(np.linalg, name)},
    **{getattr(np.fft, name): getattr(tnp.fft, name) for name in tnp.fft.__all__},
}

# Functions of the tensors' dtypes only (shape, ndim and size are tnp functions above).
TYPE_QUERIES = frozenset({
    np.result_type, np.can_cast, np.common_type, np.iscomplexobj, np.isrealobj,
})
# Functions that read values and return a Python bool or str: eager tensors only.
VALUE_QUERIES = frozenset({
    np.allclose, np.array_equal, np.array_equiv, np.array_repr, np.array_str,
    np.array2string,
})

_SIGNATURES: dict = {}


def _signature(fn):
    sig = _SIGNATURES.get(fn)
    if sig is None:
        sig = _SIGNATURES[fn] = inspect.signature(fn)
    return sig


def _symbolic(args) -> bool:
    if state.graph is not None:
        return True
    for a in args:
        if isinstance(a, GraphTensor):
            return True
        if isinstance(a, (list, tuple)) and _symbolic(a):
            return True
    return False


def _numpy_name(func) -> str:
    module = getattr(func, "__module__", None) or "numpy"
    if module.startswith("numpy._core") or module == "numpy":
        module = "numpy"
    return f"{module}.{func.__name__}"


def _unsupported(name: str, detail: str = "", fix: str = ""):
    fix = fix or ("use a tracegrad.numpy function, or np.asarray(t) / t.numpy() to leave "
                  "tracegrad on purpose")
    return UnsupportedOpError(
        f"{name}{detail} is not supported by tracegrad on a tg.Tensor or tg.Variable "
        f"(NumPy would compute it on the values, and its result would drop the gradient); "
        f"{fix}"
    )


def _to_numpy(x):
    """`x` with the tensors in it as NumPy arrays (concrete tensors only)."""
    if isinstance(x, (Tensor, Variable)):
        return np.asarray(x)
    if isinstance(x, (list, tuple)):
        return type(x)(_to_numpy(e) for e in x) if not hasattr(x, "_fields") else x
    if isinstance(x, dict):
        return {k: _to_numpy(v) for k, v in x.items()}
    return x


def _type_of(x):
    """`x` with each tensor replaced by a NumPy value of its dtype (a Python scalar for a
    weakly typed one, as NumPy sees Python scalars), for the dtype queries."""
    if isinstance(x, (Tensor, Variable)):
        value = np.zeros((), x.dtype)
        return value.item() if getattr(x, "weak_type", False) else value
    if isinstance(x, (list, tuple)) and not hasattr(x, "_fields"):
        return type(x)(_type_of(e) for e in x)
    if isinstance(x, dict):
        return {k: _type_of(v) for k, v in x.items()}
    return x


def _is_default(value, default) -> bool:
    if default is inspect.Parameter.empty:
        return False
    if value is default:
        return True
    return type(default) in (str, bool, int, float) and type(value) is type(default) and \
        value == default


def _translate(func, fn, args, kwargs):
    """`(args, kwargs)` for `fn` from a call of NumPy's `func` (matched by parameter name),
    and what `fn` lacks when it cannot take the call."""
    try:
        bound = _signature(func).bind(*args, **kwargs)
    except TypeError as e:
        return None, f" ({e})"
    mine = _signature(fn).parameters
    pos, kw, extra = [], {}, []
    for name, value in bound.arguments.items():
        param = bound.signature.parameters[name]
        if param.kind is param.VAR_POSITIONAL:
            pos.extend(value)
        elif param.kind is param.VAR_KEYWORD:
            for k, v in value.items():
                if k in mine:
                    kw[k] = v
                else:
                    extra.append(k)
        elif name in mine:
            kw[name] = value
        elif not _is_default(value, param.default):
            extra.append(name)
    if extra:
        return None, f" with {', '.join(f'{e}=' for e in extra)}"
    return (pos, kw), ""


def _no_out(kwargs) -> bool:
    out = kwargs.get("out")
    return out is None or all(o is None for o in out)


def _outer(fn, a, b):
    """`ufunc.outer(a, b)`: `fn` of `a` with `b.ndim` trailing size-1 dims and `b`."""
    nd_a, nd_b = tnp.ndim(a), tnp.ndim(b)
    return fn(tnp.expand_dims(a, tuple(range(nd_a, nd_a + nd_b))), b)


def array_ufunc(self, ufunc, method, *inputs, **kwargs):
    if not kwargs and method == "__call__":  # the hot path: np.sin(t), t1 + t2 via NumPy
        fn = UFUNC_CALLS.get(ufunc)
        if fn is not None:
            return fn(*inputs)
    name = f"numpy.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
    kw = {k: v for k, v in kwargs.items() if k != "out"} if _no_out(kwargs) else None
    fn = UFUNC_CALLS.get(ufunc)
    if kw == {} and fn is not None:
        if method == "__call__":
            return fn(*inputs)
        if method == "outer" and ufunc.nin == 2 and len(inputs) == 2:
            return _outer(fn, *inputs)
    if kw is not None and method in ("reduce", "accumulate") and len(inputs) == 1:
        fn = (REDUCE if method == "reduce" else ACCUMULATE).get(ufunc)
        allowed = {"axis", "dtype", "keepdims"} if method == "reduce" else {"axis", "dtype"}
        if fn in (tnp.max, tnp.min, tnp.all, tnp.any) and kw.get("dtype") is None:
            kw.pop("dtype", None)
            allowed = {"axis", "keepdims"}
        if fn is not None and set(kw) <= allowed:
            kw.setdefault("axis", 0)
            return fn(inputs[0], **kw)
    detail = f" with {', '.join(f'{k}=' for k in sorted(kwargs))}" if kwargs else ""
    fix = ("tensors are immutable: use tnp.at(x)[idx].add(v) (or .set(v)), which returns "
           "the updated array" if method == "at" else "" if _no_out(kwargs) else
           "out= writes into an array, and tensors are immutable: use the result "
           "(`u = np.add(u, v)`; where u is a view x[idx] whose change x should see, "
           "`x = tnp.at(x)[idx].add(v)`)")
    raise _unsupported(name, detail, fix)


def array_function(self, func, types, args, kwargs):
    fn = FUNCTIONS.get(func)
    detail = ""
    if fn is not None:
        call, detail = _translate(func, fn, args, kwargs)
        if call is not None:
            return fn(*call[0], **call[1])
    elif func in TYPE_QUERIES:
        return func(*_type_of(args), **_type_of(kwargs))
    elif func in VALUE_QUERIES:
        if not (_symbolic(args) or _symbolic(tuple(kwargs.values()))):
            return func(*_to_numpy(args), **_to_numpy(kwargs))
        raise UnsupportedOpError(
            f"{_numpy_name(func)} reads the values of a traced Tensor, which are only known "
            "when the compiled function runs; compute it outside the traced function, or "
            "with tracegrad.numpy functions inside it"
        )
    raise _unsupported(_numpy_name(func), detail)


def install():
    for cls in (Tensor, Variable):
        cls.__array_ufunc__ = array_ufunc
        cls.__array_function__ = array_function
