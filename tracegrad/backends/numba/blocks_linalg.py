"""Numba code for dot_general (BLAS through `np.dot` for floats, trmm for a Cholesky
factor's products, loops otherwise), the linear-algebra primitives (LAPACK or `np.linalg`
per matrix, BLAS's trsm for triangular_solve), the Fourier transforms (rocket-fft) and the
n-d convolution (a loop nest), each with its lowering record (lowering.py)."""

from __future__ import annotations

import itertools
import math
from functools import partial

import numpy as np

from tracegrad.backends.numba.blocks import _prod
from tracegrad.backends.numba.helpers import BLAS_PREFIX, SMALL_DOT, helper
from tracegrad.backends.numba.lowering import BLOCK, COSTLY, Lowering, register
from tracegrad.backends.numba.records import Stmt, name_of
from tracegrad.backends.numba.scalars import NB_TYPE, literal, typed
from tracegrad.core import dtypes, shapes
from tracegrad.ops import convolution, decompositions, fourier, linalg

# -- dot_general --------------------------------------------------------------------------------


def _layout(ndim, batch, free, contract, want):
    """The axis orders of a BLAS operand: `(batch, rows, cols)` and `(batch, cols, rows)`
    for `want` "fc" (free then contract) or "cf"."""
    first, second = (free, contract) if want == "fc" else (contract, free)
    return list(batch) + list(first) + list(second), list(batch) + list(second) + list(first)


def _operand_dims(op, k: int):
    """`(operand, batch, free, contract)` axes of operand `k` of dot_general `op`."""
    x = op.inputs[k]
    (c, b) = [numbers[k] for numbers in op.attrs["dimension_numbers"]]
    return x, b, [i for i in range(x.ndim) if i not in c and i not in b], c


def _viewed(op, k: int) -> bool:
    """Whether operand `k` of dot_general `op` is a `(batch, rows, cols)` view for BLAS
    as it is (or transposed)."""
    x, b, free, c = _operand_dims(op, k)
    return list(range(x.ndim)) in _layout(x.ndim, b, free, c, "fc" if k == 0 else "cf")


def _strided(op) -> bool:
    """Whether dot_general `op` is a batch of products of one batch, free and contracted
    axis each whose operands are not both views, and whose matrices (slices along the
    batch axis) each have a unit stride (the batch axis is not last): BLAS's gemm reads
    each slice as it is (`_gemm`), with its leading dimension, where a copy to the layout
    of a view would cost more than the products (a GMM's gradient of its precision
    factors, 25 products of 10 x 1000 by 1000 x 10 read from two (1000, 25, 10) arrays)."""
    if not all(x.ndim == 3 for x in op.inputs) or _viewed(op, 0) and _viewed(op, 1):
        return False
    return all(len(b) == 1 and b[0] != 2 for _, b, _, _ in (_operand_dims(op, 0),
                                                            _operand_dims(op, 1)))


def copies_operand(op, k: int) -> bool:
    """Whether the BLAS block of dot_general `op` copies operand `k` to another layout
    (`_canonical`): then that operand, when computed, can be computed into the copy."""
    (lhs, rhs), t = op.inputs, op.outputs[0]
    if not (dtypes.is_inexact(t.dtype) and lhs.ndim and rhs.ndim and t.ndim):
        return False
    (lc, rc), (lb, rb) = op.attrs["dimension_numbers"]
    if not lb and len(lc) == 1 and lhs.ndim <= 2 and rhs.ndim <= 2:
        return False  # `_matrix_product`: the arrays as they are
    return not _strided(op) and not _viewed(op, k)


def _canonical(cg, x, batch, free, contract, want):
    """A 3-d view `(batch, rows, cols)` of array `x` for BLAS, copying when its layout does
    not allow a view (a computed `x` left virtual by fusion.py is computed into the copy);
    `want` is "fc" (free then contract) or "cf". Returns (expr, transposed): `transposed`
    means the view is `(batch, cols, rows)` and must be used as `.T`."""
    xd = cg.dims(x)
    b = _prod([xd[i] for i in batch])
    f = _prod([xd[i] for i in free])
    c = _prod([xd[i] for i in contract])
    fd, sd = (f, c) if want == "fc" else (c, f)
    order, swapped = _layout(x.ndim, batch, free, contract, want)
    if order == list(range(x.ndim)):
        return f"{cg.array(x)}.reshape(({b}, {fd}, {sd}))", False
    if swapped == list(range(x.ndim)):
        return f"{cg.array(x)}.reshape(({b}, {sd}, {fd}))", True
    buf = cg.fresh("perm")
    shape = ", ".join(xd[i] for i in order)
    cg.emit(f"{buf} = np.empty(({shape},), dtype={NB_TYPE[x.dtype]})")
    nest = cg.new_nest([xd[i] for i in order])
    loop = nest.index()
    idx = [None] * x.ndim
    for pos, a in enumerate(order):
        idx[a] = loop[pos]
    v, _ = cg.elem(x, idx, nest)
    nest.stmt(frozenset(range(x.ndim)), f"{buf}[{', '.join(nest.vars)}] = {v}")
    cg.add_nest(nest)
    return f"{buf}.reshape(({b}, {fd}, {sd}))", False


def _dot_general(cg, op):
    (lhs, rhs), t = op.inputs, op.outputs[0]
    (lc, rc), (lb, rb) = op.attrs["dimension_numbers"]
    lf = [i for i in range(lhs.ndim) if i not in lc and i not in lb]
    rf = [i for i in range(rhs.ndim) if i not in rc and i not in rb]
    blas = dtypes.is_inexact(t.dtype) and lhs.ndim and rhs.ndim and t.ndim
    if not blas:
        _dot_loops(cg, op, lf, rf)
        return
    if not lb and len(lc) == 1 and lhs.ndim <= 2 and rhs.ndim <= 2:
        _matrix_product(cg, lhs, rhs, lc[0], rc[0], t)
        return
    if _strided(op) and all(cg.refs[id(x)].kind == "arr" for x in op.inputs):
        _gemm(cg, op)
        return
    a, at = _canonical(cg, lhs, lb, lf, lc, "fc")
    b, bt = _canonical(cg, rhs, rb, rf, rc, "cf")
    td = cg.dims(t)
    target = cg.alloc(t)
    nb = len(lb)
    bsz = _prod(td[:nb])
    m = _prod(td[nb:nb + len(lf)])
    n = _prod(td[nb + len(lf):])
    av, bv, ov = cg.fresh("A"), cg.fresh("B"), cg.fresh("O")
    cg.emit(f"{av} = {a}\n{bv} = {b}\n{ov} = {target}.reshape(({bsz}, {m}, {n}))")
    fn = helper(cg.helpers, "bdot_" + "nt"[at] + "nt"[bt], t.dtype)
    cg.emit(f"{fn}({av}, {bv}, {ov})")


def _gemm(cg, op):
    """A `_strided` product: each operand transposed to `(batch, rows, cols)` (a view of
    the array), gemm on each slice."""
    views = []
    for k in (0, 1):
        x, b, free, c = _operand_dims(op, k)
        order = [*b, *(free + list(c) if k == 0 else list(c) + free)]
        views.append(cg.transposed(cg.array(x), order))
    t = op.outputs[0]
    prefix = BLAS_PREFIX[t.dtype][0]
    cg.helpers[f"_gemm_{prefix}"] = cg.helpers[f"_blas_{prefix}gemm"] = None
    cg.emit(f"_gemm_{prefix}({views[0]}, {views[1]}, {cg.alloc(t)})")


# A float contraction of at most this many terms (over dims of known size) is evaluated
# inside its consumers' loops, its terms unrolled, when fusion.py does not store it: a
# product with a short inner dimension is bound by storing its result (kmeans' 10000 x 1000
# distances over 16 coordinates: 80 MB written and read back for a row minimum).
SMALL_CONTRACTION = 16
# A nest whose innermost loop reads one operand of such a contraction while the other's
# elements, loaded once per row of the outermost loop, stay in registers runs that many rows
# at once (`Nest.jam`): each element of the first operand loaded serves them all.
JAM = 2


def contraction_terms(op) -> int | None:
    """The number of terms of each element of dot_general `op` (None: a dim of unknown
    size)."""
    (lc, _), _ = op.attrs["dimension_numbers"]
    return shapes.size([op.inputs[0].shape[i] for i in lc])


def _small_contraction(op) -> bool:
    t = op.outputs[0]
    terms = contraction_terms(op)
    return (t.dtype in (dtypes.float32, dtypes.float64) and terms is not None
            and terms <= SMALL_CONTRACTION and all(x.dtype == t.dtype for x in op.inputs)
            and not _strided_matrix_vector(op))


def _strided_matrix_vector(op) -> bool:
    """Whether `op` is a matrix-vector product whose rows the loop over its result would
    read across (`W @ h`, W row-major): one loop has no outer one to make a contiguous copy
    for (`Nest.contiguous`), and its strided reads keep it from vectorizing, the consumers'
    work too (an RNN step's tanh ran scalar, 3x slower); the product helper computes it."""
    if op.outputs[0].ndim != 1:
        return False
    (lc, rc), (lb, rb) = op.attrs["dimension_numbers"]
    for x, contracted, batch in zip(op.inputs, (lc, rc), (lb, rb), strict=True):
        free = [a for a in range(x.ndim) if a not in contracted and a not in batch]
        if free:
            return free[-1] != x.ndim - 1
    return False


def _dot_element(cg, op, t, idx, nest):
    """Element `idx` of a small contraction: its terms' products added in order."""
    (lhs, rhs) = op.inputs
    (lc, rc), (lb, rb) = op.attrs["dimension_numbers"]
    lf = [i for i in range(lhs.ndim) if i not in lc and i not in lb]
    rf = [i for i in range(rhs.ndim) if i not in rc and i not in rb]
    li, ri = [None] * lhs.ndim, [None] * rhs.ndim
    for k, (i, j) in enumerate(zip(lb, rb, strict=True)):
        li[i] = ri[j] = idx[k]
    for k, i in enumerate(lf):
        li[i] = idx[len(lb) + k]
    for k, j in enumerate(rf):
        ri[j] = idx[len(lb) + len(lf) + k]
    lhs_read = _contiguous_read(cg, lhs, lc, li, nest)
    rhs_read = _contiguous_read(cg, rhs, rc, ri, nest)
    terms, deps, inner = [], frozenset(), len(nest.dims) - 1
    for at in itertools.product(*(range(lhs.shape[i]) for i in lc)):
        for i, j, c in zip(lc, rc, at, strict=True):
            li[i] = ri[j] = (str(c), frozenset())
        a, da = _bound(cg, nest, *lhs_read(li))
        b, db = _bound(cg, nest, *rhs_read(ri))
        terms.append((a, b))
        deps |= da | db
        if inner > 0 and ((0 in da and inner not in da and inner in db and 0 not in db) or
                          (0 in db and inner not in db and inner in da and 0 not in da)):
            nest.jam = JAM
    var = cg.fresh("v")
    nest.stmt(deps, f"{var} = {_terms_sum(cg, terms, t.dtype)}", op, (name_of(var),))
    return var, deps


def _terms_sum(cg, terms, dt) -> str:
    """The sum of products `terms` ((a, b) pairs) in order: float64 products added with one
    rounding each (`_fma`, one instruction), float32 ones multiplied and added."""
    if not terms:
        return literal(0, dt)
    if dt != dtypes.float64:
        return " + ".join(f"{a} * {b}" for a, b in terms)
    cg.helpers["_fma"] = None
    expr = f"{terms[0][0]} * {terms[0][1]}"
    for a, b in terms[1:]:
        expr = f"_fma({a}, {b}, {expr})"
    return expr


def _bound(cg, nest, expr, deps):
    """A read `expr` made a local at the depth of its `deps` (an operand element that
    does not change in the innermost loop is loaded once outside it)."""
    if "[" not in expr:
        return expr, deps
    var = cg.fresh("v")
    nest.stmt(deps, f"{var} = {expr}", defines=(name_of(var),))
    return var, deps


def _contiguous_read(cg, x, contract, index, nest):
    """How `_dot_element` reads operand `x` (`read(index) -> (expr, deps)`): an array read
    with a stride by the nest's innermost loop (and again by an outer one) is read from a
    copy with the contracted axes first and the walked ones last (`Nest.contiguous`), so
    that the innermost loop reads consecutive elements (and vectorizes); a computed operand
    reads its arrays that way, and a cheap stored one read once may be recomputed
    (`CodeGen._recomputed`)."""
    ref = cg.refs.get(id(x))
    if ref is not None and ref.kind == "arr":
        read = nest.contiguous(ref.name, cg.dims(x), index, contract)
        if read is not None:
            return read

    def computed(idx):
        was, nest.contiguous_reads = nest.contiguous_reads, True
        try:
            return cg.elem(x, idx, nest)
        finally:
            nest.contiguous_reads = was
    return computed


register(linalg.dot_general_p, Lowering(BLOCK, cost=COSTLY, emit=_dot_general, needs_array=True,
                                        fuses_if=_small_contraction, element=_dot_element))


def _matrix_product(cg, lhs, rhs, lc, rc, t):
    """A matrix or vector product on the arrays (or their transposes) as they are: loops
    for a small matrix-vector product, BLAS's triangular product when one matrix is a
    Cholesky factor (zero above its diagonal) and the other is read as it is, BLAS's general
    one otherwise."""
    a, b, out = cg.array(lhs), cg.array(rhs), cg.alloc(t)
    if lhs.ndim == rhs.ndim == 2 and t.dtype in BLAS_PREFIX:
        if _cholesky_factor(lhs) and rc == 0:  # op(L) @ b
            return _trmm(cg, a, b, out, t, trans=lc == 0, left=True)
        if _cholesky_factor(rhs) and lc == 1:  # a @ op(L)
            return _trmm(cg, b, a, out, t, trans=rc == 1, left=False)
    matrix = lhs if lhs.ndim == 2 else rhs
    small = lhs.ndim + rhs.ndim == 3 and None not in matrix.shape and \
        math.prod(matrix.shape) <= SMALL_DOT
    if small and rhs.ndim == 1:  # a @ x, or a.T @ x = x @ a
        kind, args = ("mv", (a, b)) if lc == 1 else ("vm", (b, a))
    elif small and lhs.ndim == 1:  # x @ a, or x @ a.T = a @ x
        kind, args = ("vm", (a, b)) if rc == 0 else ("mv", (b, a))
    else:
        kind = "dot"
        args = (a + (".T" if lhs.ndim == 2 and lc == 0 else ""),
                b + (".T" if rhs.ndim == 2 and rc == 1 else ""))
    cg.emit(f"{helper(cg.helpers, kind, t.dtype)}({', '.join(args)}, {out})")


def _cholesky_factor(x) -> bool:
    return x.op is not None and x.op.primitive is linalg.cholesky_p


def _trmm(cg, tri, other, out, t, trans, left):
    """out = op(tri) @ other (`left`) or other @ op(tri), tri lower-triangular."""
    prefix = _blas_triangular(cg, t.dtype)
    cg.emit(f"_trmm_{prefix}({tri}, {other}, {out}, True, {trans}, {left})")


def _blas_triangular(cg, dtype) -> str:
    """The BLAS prefix of `dtype`, its triangular solve and product helpers imported."""
    prefix = BLAS_PREFIX[dtype][0]
    for imported in (f"_trsm_{prefix}", f"_trmm_{prefix}", f"_blas_{prefix}trsm",
                     f"_blas_{prefix}trmm"):
        cg.helpers[imported] = None
    return prefix


def _dot_loops(cg, op, lf, rf):
    """dot_general as loops (integers, bools, rank-0 operands): an accumulating nest."""
    (lhs, rhs), t = op.inputs, op.outputs[0]
    (lc, rc), (lb, rb) = op.attrs["dimension_numbers"]
    ld = cg.dims(lhs)
    dims = list(cg.dims(t)) + [ld[i] for i in lc]
    nest = cg.new_nest(dims)
    loop = nest.index()
    nb, nl = len(lb), len(lf)
    li, ri = [None] * lhs.ndim, [None] * rhs.ndim
    for k, (i, j) in enumerate(zip(lb, rb)):
        li[i] = ri[j] = loop[k]
    for k, i in enumerate(lf):
        li[i] = loop[nb + k]
    for k, j in enumerate(rf):
        ri[j] = loop[nb + nl + k]
    for k, (i, j) in enumerate(zip(lc, rc)):
        li[i] = ri[j] = loop[t.ndim + k]
    acc_dt = dtypes.int64 if t.dtype == dtypes.int32 else t.dtype
    if t.dtype == dtypes.float32:
        acc_dt = dtypes.float32
    acc = cg.fresh("acc")
    d = t.ndim
    nest.pre[d].append(f"{acc} = {literal(0, acc_dt)}")
    a, _ = cg.elem(lhs, li, nest)
    b, _ = cg.elem(rhs, ri, nest)
    if t.dtype == dtypes.bool_:
        upd = f"{acc} = {acc} | ({a} & {b})"
    else:
        upd = f"{acc} = {typed(f'{acc} + {a} * {b}', acc_dt)}"
    nest.stmt(frozenset(range(len(dims))), upd)
    result = typed(acc, t.dtype) if acc_dt != t.dtype else acc
    if t.ndim == 0:
        cg.add_nest(nest)
        cg.set_scalar(t, result)
        return
    target = cg.alloc(t)
    parts = ", ".join("0" if dd == "1" else v for v, dd in zip(nest.vars, cg.dims(t)))
    nest.post[d].append(f"{target}[{parts}] = {result}")
    cg.add_nest(nest)


# -- linear algebra -----------------------------------------------------------------------------


def _batched(cg, x, mat_dims=2):
    """`(batch size expr, 3-d view of array x)`: the leading dims flattened."""
    xd = cg.dims(x)
    b = _prod(xd[:-mat_dims])
    return b, f"{cg.array(x)}.reshape(({b}, {', '.join(xd[-mat_dims:])}))"


def _cholesky(cg, op):
    (a,), t = op.inputs, op.outputs[0]
    b, av = _batched(cg, a)
    target = cg.alloc(t)
    _, ov = _batched_target(cg, target, t)
    k = cg.fresh("k")
    fn = helper(cg.helpers, "cholesky_f", t.dtype)
    cg.emit(f"for {k} in range({b}):\n    {fn}({av}[{k}], {ov}[{k}])")


register(linalg.cholesky_p, Lowering(BLOCK, emit=_cholesky, needs_array=True, linalg=True))


def _batched_target(cg, target, t, mat_dims=2):
    td = cg.dims(t)
    b = _prod(td[:-mat_dims]) if mat_dims else _prod(td)
    inner = ", ".join(td[-mat_dims:]) if mat_dims else ""
    view = cg.fresh("V")
    cg.emit(f"{view} = {target}.reshape(({b}, {inner}))" if mat_dims else
            f"{view} = {target}.reshape(({b},))")
    return b, view


def _solve(cg, op):
    (a, rhs), t = op.inputs, op.outputs[0]
    b, av = _batched(cg, a)
    _, bv = _batched(cg, rhs)
    target = cg.alloc(t)
    _, ov = _batched_target(cg, target, t)
    k = cg.fresh("k")
    solve = helper(cg.helpers, "solve_f", t.dtype)  # (NumPy's result on NaN and inf)
    cg.emit(f"for {k} in range({b}):\n    {ov}[{k}] = {solve}({av}[{k}], {bv}[{k}])")


register(linalg.solve_p, Lowering(BLOCK, emit=_solve, needs_array=True, linalg=True))


def _triangular_solve(cg, op):
    (a, rhs), t = op.inputs, op.outputs[0]
    at = op.attrs
    b, av = _batched(cg, a)
    _, bv = _batched(cg, rhs)
    target = cg.alloc(t)
    _, ov = _batched_target(cg, target, t)
    prefix = _blas_triangular(cg, t.dtype)
    k = cg.fresh("k")
    args = (at.get("lower", True), at.get("transpose_a", False),
            at.get("unit_diagonal", False), at.get("left_side", True), cg.tag_arg(op))
    cg.emit(f"for {k} in range({b}):\n"
            f"    _trsm_{prefix}({av}[{k}], {bv}[{k}], {ov}[{k}], {', '.join(map(str, args))})")


def _singular(args, where):
    return np.linalg.LinAlgError(
        f"triangular_solve: singular matrix: zero on the diagonal at row {args[0]} {where}")


register(linalg.triangular_solve_p, Lowering(BLOCK, emit=_triangular_solve,
                                             needs_array=True, error=_singular))


def _det(cg, op, log):
    """det, or slogdet (`log`)."""
    (a,), outs = op.inputs, op.outputs
    b, av = _batched(cg, a)
    k = cg.fresh("k")
    # (NumPy's result on NaN and inf)
    fn = helper(cg.helpers, "slogdet_f" if log else "det_f", a.dtype)
    if outs[0].ndim == 0:
        m = f"{cg.array(a)}.reshape(({', '.join(cg.dims(a))}))"
        if not log:
            cg.set_scalar(outs[0], f"{fn}({m})")
        else:
            pair = cg.fresh("sl")
            cg.emit(f"{pair} = {fn}({m})")
            cg.set_scalar(outs[0], f"{pair}[0]")
            cg.set_scalar(outs[1], f"{pair}[1]")
        return
    views = []
    for t in outs:
        target = cg.alloc(t)
        views.append(_batched_target(cg, target, t, mat_dims=0)[1])
    if not log:
        body = f"{views[0]}[{k}] = {fn}({av}[{k}])"
    else:
        body = f"{views[0]}[{k}], {views[1]}[{k}] = {fn}({av}[{k}])"
    cg.emit(f"for {k} in range({b}):\n    {body}")


register(linalg.det_p, Lowering(BLOCK, emit=partial(_det, log=False),
                                needs_array=True, linalg=True))
register(linalg.slogdet_p, Lowering(BLOCK, emit=partial(_det, log=True),
                                    needs_array=True, linalg=True))


def _decomposition(cg, op, kind, flag, whole=False):
    """qr, eigh, eig, svd, lu or expm: helper `kind` per matrix (`whole`: once, on the
    batch), writing each result in place; `flag` the attribute it takes (a function of the
    attributes; eig takes its raise tag)."""
    (a,), outs = op.inputs, op.outputs
    b, av = _batched(cg, a)
    views = [_batched_target(cg, cg.alloc(t), t, mat_dims=t.ndim - a.ndim + 2)[1]
             for t in outs]
    if kind == "eig":
        fn = "_eig_c" if dtypes.is_complex(a.dtype) else "_eig_r"
        cg.helpers[fn] = None
        tag = cg.tag_arg(op)
        flag = lambda at: tag  # noqa: E731
    else:
        fn = helper(cg.helpers, kind + "_f", a.dtype)
    if whole:
        cg.emit(f"{fn}({av}, {', '.join(views)}, {flag(op.attrs)})")
        return
    k = cg.fresh("k")
    args = ", ".join(f"{v}[{k}]" for v in views)
    cg.emit(f"for {k} in range({b}):\n    {fn}({av}[{k}], {args}, {flag(op.attrs)})")


register(decompositions.qr_p, Lowering(
    BLOCK, emit=partial(_decomposition, kind="qr",
                        flag=lambda at: at.get("full_matrices", False)),
    needs_array=True, linalg=True))


def _eigh(cg, op):
    """eigh: one helper call for the batch (it allocates LAPACK's workspace once), with the
    LAPACK routine it calls imported (helpers.py binds it then)."""
    cg.helpers["_lapack_zheevd" if dtypes.is_complex(op.inputs[0].dtype) else
               "_lapack_dsyevd"] = None
    _decomposition(cg, op, "eigh", lambda at: at.get("lower", True), whole=True)


register(decompositions.eigh_p, Lowering(BLOCK, emit=_eigh, needs_array=True, linalg=True))


def _eig_error(args, where):
    what = "array must not contain infs or NaNs" if args[0] == 0 else \
        "eigenvalues did not converge"
    return np.linalg.LinAlgError(f"eig: {what} {where}")


register(decompositions.eig_p, Lowering(
    BLOCK, emit=partial(_decomposition, kind="eig", flag=None), needs_array=True, linalg=True,
    error=_eig_error))
register(decompositions.svd_p, Lowering(
    BLOCK, emit=partial(_decomposition, kind="svd",
                        flag=lambda at: at.get("full_matrices", False)),
    needs_array=True, linalg=True))
register(decompositions.lu_p, Lowering(
    BLOCK, emit=partial(_decomposition, kind="lu", flag=lambda at: 0), needs_array=True,
    linalg=True))
register(decompositions.expm_p, Lowering(
    BLOCK, emit=partial(_decomposition, kind="expm", flag=lambda at: 0), needs_array=True,
    linalg=True))


def _pivots_to_permutation(cg, op):
    (p,), t = op.inputs, op.outputs[0]
    b, pv = _batched(cg, p, mat_dims=1)
    _, ov = _batched_target(cg, cg.alloc(t), t, mat_dims=1)
    cg.helpers["_pivperm"] = None
    k = cg.fresh("k")
    cg.emit(f"for {k} in range({b}):\n    _pivperm({pv}[{k}], {ov}[{k}], {cg.tag_arg(op)})")


def _bad_pivot(args, where):
    return IndexError(f"lu_pivots_to_permutation: pivot {args[0]} is out of bounds {where}")


register(decompositions.lu_pivots_to_permutation_p, Lowering(
    BLOCK, emit=_pivots_to_permutation, needs_array=True, error=_bad_pivot))


# -- fft ----------------------------------------------------------------------------------------

# rocket-fft's low-level transforms (DUCC0's, NumPy's pocketfft successor) write into the
# result array, over any axes of any length known only at run time, unscaled (fct=1), on one
# thread: c2c(in, out, axes, forward, fct, nthreads), r2c and c2r alike.
_FFT_CALLS = {"fft": ("c2c", True), "ifft": ("c2c", False), "rfft": ("r2c", True),
              "irfft": ("c2r", False)}


def _fft(cg, op):
    (x,), t = op.inputs, op.outputs[0]
    call, forward = _FFT_CALLS[op.attrs["fft_type"]]
    name = "_rf_" + call
    cg.helpers[name] = None
    axes = cg.fresh("ax")
    listed = ", ".join(str(x.ndim + a) for a in op.attrs["axes"])
    cg.emit(f"{axes} = np.array([{listed}], dtype=np.int64)")
    cg.emit(f"{name}({cg.array(x)}, {cg.alloc(t)}, {axes}, {forward}, 1.0, 1)")


register(fourier.fft_p, Lowering(BLOCK, emit=_fft, needs_array=True))


# -- conv ---------------------------------------------------------------------------------------


# a last kernel dim up to this long is unrolled: each output element of the interior (where
# every kernel point falls inside the input) takes all its products in one statement
CONV_UNROLL = 16


def _conv(cg, op):
    # Per (batch, image, out channel): the output block zeroed, then for each in channel and
    # point of the outer kernel dims, the output row along the last spatial dim gains the
    # products of the input row with the kernel's last dim: unrolled over that dim in the
    # interior, an axpy per kernel point at the edges, every range clipped to the padded
    # input (no test in the innermost loops).
    (lhs, rhs), t = op.inputs, op.outputs[0]
    padding = op.attrs["padding"]
    ns = len(padding)
    nb = lhs.ndim - 2 - ns
    ld, rd = cg.dims(lhs), cg.dims(rhs)
    b, n, ci, co = _prod(list(ld[:nb])), ld[nb], ld[nb + 1], rd[nb]
    spatial, kernel, out = lhs.shape[nb + 2:], rhs.shape[nb + 2:], t.shape[nb + 2:]
    lv, rv, yv = cg.fresh("cl"), cg.fresh("cr"), cg.fresh("cy")
    shape = ", ".join
    cg.emit(f"{lv} = {cg.array(lhs)}.reshape(({b}, {n}, {ci}, {shape(map(str, spatial))}))")
    cg.emit(f"{rv} = {cg.array(rhs)}.reshape(({b}, {co}, {ci}, {shape(map(str, kernel))}))")
    cg.emit(f"{yv} = {cg.alloc(t)}.reshape(({b}, {n}, {co}, {shape(map(str, out))}))")
    bi, ni, oi, ii, w, yrow, lrow = (cg.fresh(p) for p in ("cb", "cn", "co", "ci", "cw",
                                                            "cyr", "clr"))
    xs = [cg.fresh("cx") for _ in range(ns)]
    ks = [cg.fresh("ck") for _ in range(ns)]
    js = [cg.fresh("cj") for _ in range(ns - 1)]
    code = [(0, f"for {bi} in range({b}):"), (1, f"for {ni} in range({n}):"),
            (2, f"for {oi} in range({co}):"), (3, f"{yv}[{bi}, {ni}, {oi}] = 0"),
            (3, f"for {ii} in range({ci}):")]
    level = 4
    for d in range(ns - 1):
        lo = padding[d][0]
        code += [(level, f"for {xs[d]} in range({out[d]}):"),
                 (level + 1, f"for {ks[d]} in range(max(0, {lo} - {xs[d]}), "
                             f"min({kernel[d]}, {spatial[d] + lo} - {xs[d]})):"),
                 (level + 2, f"{js[d]} = {xs[d]} + {ks[d]} - ({lo})")]
        level += 2
    row = ", ".join(xs[:-1])
    code += [(level, f"{yrow} = {yv}[{bi}, {ni}, {oi}{', ' + row if row else ''}]"),
             (level, f"{lrow} = {lv}[{bi}, {ni}, {ii}{''.join(', ' + j for j in js)}]")]
    lo, size, width, length = padding[-1][0], spatial[-1], kernel[-1], out[-1]
    x, k = xs[-1], ks[-1]

    def weight(last):
        return f"{rv}[{bi}, {oi}, {ii}, {', '.join(ks[:-1] + [last])}]"

    def axpy(first, stop):
        return [(level + 1, f"for {x} in range(max({first}, {lo} - {k}), "
                            f"min({stop}, {size + lo} - {k})):"),
                (level + 2, f"{yrow}[{x}] += {w} * {lrow}[{x} + {k} - ({lo})]")]

    first, stop = max(0, lo), min(length, size + lo - width + 1)
    edges = [(level, f"for {k} in range({width}):"), (level + 1, f"{w} = {weight(k)}")]
    if width <= CONV_UNROLL and first < stop:
        ws = [cg.fresh("cw") for _ in range(width)]
        terms = " + ".join(f"{ws[j]} * {lrow}[{x} + ({j - lo})]" for j in range(width))
        code += [(level, f"{ws[j]} = {weight(str(j))}") for j in range(width)]
        code += [(level, f"for {x} in range({first}, {stop}):"), (level + 1,
                 f"{yrow}[{x}] += {terms}")]
        code += edges + axpy(0, first) + axpy(stop, length)
    else:
        code += edges + axpy(0, length)
    cg.emit("\n".join("    " * depth + line for depth, line in code))


register(convolution.conv_p, Lowering(BLOCK, emit=_conv, needs_array=True))
