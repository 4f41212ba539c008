"""The helper functions generated kernels call, in one shared module of their own.

The module's text is fixed by this file (its templates instantiated for every dtype they
serve); it is written to the kernel cache directory as `tg_helpers_<digest>.py` and each
kernel module imports what it uses from it by that name, so the digest is part of every
kernel's source (and cache key) and the helpers are compiled once per process, and
cached on disk, instead of once per kernel. Scalar helpers are compiled once and inlined
into each kernel by LLVM (`forceinline=True`: loops over them still vectorize), not at Numba
IR level (`inline="always"` re-typed and re-lowered the helper's body at every call site,
which doubled the compile time of kernels that call exp, log or tanh a few times).
"""

from __future__ import annotations

import hashlib

from tracegrad.backends import blas_threads
from tracegrad.backends.numba import incomplete, vecmath, vecmath_special, vecmath_trig
from tracegrad.core import dtypes
from tracegrad.ops import random_bits

# Numba has no float16 on the CPU: kernels hold float16 values in float32 (each exactly a
# float16 value, every result rounded by `_f16`), and the call path converts at the boundary.
NB_TYPE = {dt: f"np.{dt.name}" for dt in dtypes.SUPPORTED} | {
    dtypes.bool_: "np.bool_", dtypes.float16: "np.float32"}
SUFFIX = dict(dtypes.SHORT_NAMES) | {dtypes.bool_: "b"}
# The dtype a kernel stores a tensor of each dtype in.
STORAGE = {dt: dt for dt in dtypes.SUPPORTED} | {dtypes.float16: dtypes.float32}

# The block of a float sum: summed in NumPy's pairwise order, blocks combined pairwise
# (`bsum` below). A multiple of 128 (NumPy's pairwise leaf) times a power of two, so a sum
# of 2**k blocks is in NumPy's order too; 8 KiB of float64 stays in the L1 cache.
SUM_BLOCK = 1024

# np.linalg's det, slogdet and solve in Numba raise LinAlgError on a matrix holding NaN or
# inf, where NumPy's LAPACK calls return what LAPACK computes (NaN, inf or even finite
# values): such matrices go to NumPy itself, in object mode ({N}: the dtype's name).
_LAPACK = """
def _lapack(name, *args):
    with np.errstate(all="ignore"):
        return getattr(np.linalg, name)(*args)
"""

_LINALG = """
@njit(cache=True, error_model="numpy")
def _det_{S}(a):
    if np.isfinite(a).all():
        saved = _blas_one(a.size * a.shape[0])
        r = np.linalg.det(a)
        _blas_restore(saved)
        return r
    with objmode(r="{N}"):
        r = _lapack("det", a)
    return r


@njit(cache=True, error_model="numpy")
def _slogdet_{S}(a):
    if np.isfinite(a).all():
        saved = _blas_one(a.size * a.shape[0])
        r = np.linalg.slogdet(a)
        _blas_restore(saved)
        return r
    with objmode(sign="{N}", logdet="{RN}"):
        sign, logdet = _lapack("slogdet", a)
    return sign, logdet


@njit(cache=True, error_model="numpy")
def _solve_{S}(a, b):
    if np.isfinite(a).all() and np.isfinite(b).all():
        saved = _blas_one(a.size * (a.shape[0] + b.shape[1]))
        r = np.linalg.solve(a, b)  # LinAlgError: the executor restores the count
        _blas_restore(saved)
        return r
    with objmode(r="{N}[:, :]"):
        r = _lapack("solve", a, b)
    return r
"""

_DECOMPOSITIONS = """

# qr, eigh, svd and expm compute in double precision ({W}), as NumPy does for float32
# input

@njit(cache=True, error_model="numpy")
def _qr_{S}(a, q, r, full):
    # complete: the factorization of a padded with zero columns to a square matrix (its
    # extra Householder reflections are identities)
    m, n = a.shape
    if full and m > n:
        p = np.zeros((m, m), dtype={W})
        p[:, :n] = a
        qq, rr = np.linalg.qr(p)
        q[:, :] = qq
        r[:, :] = rr[:, :n]
    else:
        qq, rr = np.linalg.qr(a.astype({W}))
        q[:, :] = qq
        r[:, :] = rr


@njit(cache=True, error_model="numpy")
def _eigh_{S}(a, w, v, lower):
    # each matrix of the batch a (b, n, n) by LAPACK's syevd/heevd (_evd_{WS}), its workspace
    # queried and allocated once: the triangle eigh reads is copied into `s` in Fortran
    # order, as NumPy gives it to LAPACK (the other triangle is neither read nor written),
    # the diagonal's real part; the eigenvectors are the columns of `s` in Fortran order.
    # Non-finite input or no convergence: NaN.
    b, n = a.shape[0], a.shape[1]
    if b == 0 or n == 0:
        return
    s = np.empty((n, n), dtype={W})
    ww = np.empty(n, dtype=np.float64)
    flags = np.empty(2, np.uint8)
    flags[0] = 86  # jobz: V
    flags[1] = 76 if lower else 85  # uplo: L / U
    ints = np.full(5, -1, np.int32)  # n, lwork, lrwork, liwork, info
    ints[0] = n
    work = np.empty(1, dtype={W})
    rwork = np.zeros(1, dtype=np.float64)  # dsyevd has none: its size stays 0
    iwork = np.empty(1, dtype=np.int32)
    _evd_{WS}(flags, ints, s, ww, work, rwork, iwork)  # the workspace query
    ints[1], ints[2], ints[3] = int(work[0].real), int(rwork[0]), iwork[0]
    work = np.empty(ints[1], dtype={W})
    rwork = np.empty(max(ints[2], 1), dtype=np.float64)
    iwork = np.empty(ints[3], dtype=np.int32)
    for k in range(b):
        x = a[k]
        finite = True
        for i in range(n):
            lo, hi = (0, i) if lower else (i + 1, n)
            for j in range(lo, hi):
                y = x[i, j]
                s[j, i] = y
                finite &= np.isfinite(y)
            s[i, i] = x[i, i].real
            finite &= np.isfinite(x[i, i].real)
        r = _evd_{WS}(flags, ints, s, ww, work, rwork, iwork) if finite else -1
        if r != 0:
            w[k, :] = np.nan
            v[k, :, :] = np.nan
            continue
        w[k, :] = ww
        for i in range(n):
            for j in range(n):
                v[k, i, j] = s[j, i]


_getrf_{S} = _LAPACK_ROUTINES.numba_xxgetrf(from_dtype(np.dtype({T})))
_GETRF_KIND_{S} = ord(get_blas_kind(from_dtype(np.dtype({T}))))


@njit(cache=True, error_model="numpy")
def _lu_{S}(a, lu, piv, perm, flag):
    # LAPACK's getrf (through Numba's binding of SciPy's LAPACK) on a Fortran-ordered copy
    m, n = a.shape
    k = min(m, n)
    f = np.empty((n, m), dtype={T})
    for i in range(m):
        for j in range(n):
            f[j, i] = a[i, j]
    ipiv = np.empty(max(k, 1), dtype=np.int32)
    if k > 0:
        saved = _blas_one(m * n * k)
        _getrf_{S}(_GETRF_KIND_{S}, m, n, f.ctypes, m, ipiv.ctypes)
        _blas_restore(saved)
    for i in range(m):
        for j in range(n):
            lu[i, j] = f[j, i]
        perm[i] = i
    for i in range(k):
        p = ipiv[i] - 1
        piv[i] = p
        perm[i], perm[p] = perm[p], perm[i]


_potrf_{S} = _LAPACK_ROUTINES.numba_xxpotrf(from_dtype(np.dtype({T})))


@njit(cache=True, error_model="numpy")
def _cholesky_{S}(a, out):
    # LAPACK's potrf in place on a copy of a's lower triangle, the upper one zeroed (read in
    # Fortran order it is the upper triangle of a's conjugate, whose factor L^H read as rows
    # is L), as Numba's np.linalg.cholesky but for its copies and column-wise zeroing
    n = a.shape[0]
    for i in range(n):
        for j in range(i + 1):
            out[i, j] = a[i, j]
        for j in range(i + 1, n):
            out[i, j] = 0
    if n == 0:
        return
    r = _potrf_{S}(_GETRF_KIND_{S}, 85, n, out.ctypes, n)  # 85: 'U'
    _dummy_liveness_func([out.size])
    if r != 0:
        raise np.linalg.LinAlgError("Matrix is not positive definite.")


@njit(cache=True, error_model="numpy")
def _expm_{S}(a, out, flag):
    out[:, :] = _expm64(a.astype({W}))


@njit(cache=True, error_model="numpy")
def _svd_{S}(a, u, s, vh, full):
    uu, ss, vv = np.linalg.svd(a.astype({W}), full_matrices=full)
    u[:, :] = uu
    s[:] = ss
    vh[:, :] = vv
"""

# eig: LAPACK's geev (Numba's binding of SciPy's LAPACK, in double precision) on a copy in
# Fortran order; eigenvector j is column j of VR, which is row j of the C-ordered `vr`. For
# real operands a complex pair (wi > 0, then its conjugate) shares the rows j, j + 1: the
# real and imaginary parts of the first one's eigenvector. Raises (tag, 0) for infs or NaNs,
# (tag, 1) when geev does not converge.
_EIG = """
_RGEEV = _LAPACK_ROUTINES.numba_ez_rgeev(from_dtype(np.dtype(np.float64)))
_CGEEV = _LAPACK_ROUTINES.numba_ez_cgeev(from_dtype(np.dtype(np.complex128)))
_GEEV_D, _GEEV_Z, _GEEV_N, _GEEV_V = ord("d"), ord("z"), ord("N"), ord("V")


# eigh's LAPACK calls (SciPy's dsyevd and zheevd, `_lapack_` below: the kernel imports
# them), arguments as in Fortran, by pointer: `ints` holds n, lwork, lrwork, liwork and
# the returned info; lwork = -1 queries the workspace sizes into work[0], rwork[0] and
# iwork[0]. `s` is overwritten, `ww` receives the eigenvalues.
@njit(cache=True, **_OPTS)
def _evd_D(flags, ints, s, ww, work, rwork, iwork):
    _lapack_dsyevd(flags[0:].ctypes, flags[1:].ctypes, ints[0:].ctypes, s.ctypes,
                   ints[0:].ctypes, ww.ctypes, work.ctypes, ints[1:].ctypes, iwork.ctypes,
                   ints[3:].ctypes, ints[4:].ctypes)
    return ints[4]


@njit(cache=True, **_OPTS)
def _evd_Z(flags, ints, s, ww, work, rwork, iwork):
    _lapack_zheevd(flags[0:].ctypes, flags[1:].ctypes, ints[0:].ctypes, s.ctypes,
                   ints[0:].ctypes, ww.ctypes, work.ctypes, ints[1:].ctypes, rwork.ctypes,
                   ints[2:].ctypes, iwork.ctypes, ints[3:].ctypes, ints[4:].ctypes)
    return ints[4]


@njit(cache=True, error_model="numpy")
def _geev_inputs(a, zero, tag):
    # a in Fortran order, and geev's VL (not computed) and VR, all of zero's type
    n = a.shape[0]
    f = np.zeros((n, n)) + zero
    for i in range(n):
        for j in range(n):
            f[j, i] = a[i, j]
    if not np.isfinite(f).all():
        raise ValueError(tag, 0)
    return f, np.zeros((n, 1)) + zero, np.zeros((n, n)) + zero


@njit(cache=True, error_model="numpy")
def _eig_r(a, w, v, tag):
    n = a.shape[0]
    if n == 0:
        return
    f, vl, vr = _geev_inputs(a, 0.0, tag)
    wr = np.empty(n, dtype=np.float64)
    wi = np.empty(n, dtype=np.float64)
    r = _RGEEV(_GEEV_D, _GEEV_N, _GEEV_V, n, f.ctypes, n, wr.ctypes, wi.ctypes, vl.ctypes, 1,
               vr.ctypes, n)
    _dummy_liveness_func([f.size, vl.size, wr.size, wi.size, vr.size])
    if r != 0:
        raise ValueError(tag, 1)
    j = 0
    while j < n:
        if wi[j] == 0.0:
            w[j] = wr[j]
            for i in range(n):
                v[i, j] = vr[j, i]
            j += 1
        else:
            w[j] = complex(wr[j], wi[j])
            w[j + 1] = complex(wr[j + 1], wi[j + 1])
            for i in range(n):
                v[i, j] = complex(vr[j, i], vr[j + 1, i])
                v[i, j + 1] = complex(vr[j, i], -vr[j + 1, i])
            j += 2


@njit(cache=True, error_model="numpy")
def _eig_c(a, w, v, tag):
    n = a.shape[0]
    if n == 0:
        return
    f, vl, vr = _geev_inputs(a, 0j, tag)
    ww = np.empty(n, dtype=np.complex128)
    r = _CGEEV(_GEEV_Z, _GEEV_N, _GEEV_V, n, f.ctypes, n, ww.ctypes, vl.ctypes, 1, vr.ctypes, n)
    _dummy_liveness_func([f.size, vl.size, ww.size, vr.size])
    if r != 0:
        raise ValueError(tag, 1)
    for j in range(n):
        w[j] = ww[j]
        for i in range(n):
            v[i, j] = vr[j, i]
"""

# -- templates: {T} is the Numba type, {S} the dtype suffix --------------------------------------

_HELPERS = {
    "linalg": _LINALG,
    "decompositions": _DECOMPOSITIONS,
    "max_f": """
@njit(cache=True, forceinline=True, **_OPTS)
def _max_{S}(a, b):
    return a if (a > b or a != a) else b
""",
    "min_f": """
@njit(cache=True, forceinline=True, **_OPTS)
def _min_{S}(a, b):
    return a if (a < b or a != a) else b
""",
    "sign_f": """
@njit(cache=True, forceinline=True, **_OPTS)
def _sign_{S}(a):
    if a > 0:
        return {T}(1.0)
    if a < 0:
        return {T}(-1.0)
    if a == 0:
        return {T}(0.0)
    return a
""",
    "logistic": """
@njit(cache=True, forceinline=True, **_OPTS)
def _logistic_{S}(x):
    e = {T}(_exp_v(-np.abs(np.float64(x))))
    one = {T}(1.0)
    if x >= 0:
        return one / (one + e)
    return e / (one + e)
""",
    # NumPy's npy_divmod: the floor quotient and the remainder with the divisor's sign.
    "floordiv_f": """
@njit(cache=True, forceinline=True, **_OPTS)
def _floordiv_{S}(a, b):
    if b == 0:
        return a / b
    mod = np.fmod(a, b)
    div = (a - mod) / b
    if mod:
        if (b < 0) != (mod < 0):
            div -= {T}(1.0)
    if div:
        floordiv = np.floor(div)
        if div - floordiv > {T}(0.5):
            floordiv += {T}(1.0)
        return floordiv
    return {T}(0.0) * (a / b)  # a zero with the sign of the quotient
""",
    "mod_f": """
@njit(cache=True, forceinline=True, **_OPTS)
def _mod_{S}(a, b):
    mod = np.fmod(a, b)
    if b == 0:
        return mod
    if mod:
        if (b < 0) != (mod < 0):
            mod += b
    else:
        mod = {T}(-0.0) if b < 0 else {T}(0.0)
    return mod
""",
    # Integers: division by zero gives 0 (as NumPy); MIN // -1 wraps instead of trapping.
    "floordiv_i": """
@njit(cache=True, forceinline=True, **_OPTS)
def _floordiv_{S}(a, b):
    if b == 0:
        return a - a
    if b == -1:
        return -a
    return a // b
""",
    "mod_i": """
@njit(cache=True, forceinline=True, **_OPTS)
def _mod_{S}(a, b):
    if b == 0 or b == -1:
        return a - a
    return a % b
""",
    # NumPy's npy_gcd: Euclid's algorithm on the absolute values.
    "gcd_i": """
@njit(cache=True, forceinline=True, **_OPTS)
def _gcd_{S}(a, b):
    a = abs(a)
    b = abs(b)
    while b != 0:
        a, b = b, a % b
    return a
""",
    # NumPy's pairwise summation (same blocks, same order: bit-identical sums). Its
    # recursion is unrolled with explicit stacks (cached recursive functions crash Numba).
    "pairwise": """
@njit(cache=True, **_OPTS)
def _pwleaf_{S}(a, lo, n):
    # a slice indexed from 0: no negative-index wraparound in the loop (4-5x faster)
    b = a[lo:lo + n]
    if n < 8:
        res = {T}(0.0)
        for i in range(n):
            res += b[i]
        return res
    m = n - n % 8
    res = _pwlanes_{S}(b, 0, m)
    for i in range(m, n):
        res += b[i]
    return res


@njit(cache=True, forceinline=True, **_OPTS)
def _pwlanes_{S}(a, lo, m):
    # the leaf's 8 running sums over m elements (a multiple of 8), added as NumPy does
    r0, r1, r2, r3, r4, r5, r6, r7 = _lanes8(a, lo, m)
    return ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))


@njit(cache=True, **_OPTS)
def _pairwise_{S}(a, lo, n):
    if n <= 128:
        return _pwleaf_{S}(a, lo, n)
    if n == 1024:  # a whole block: NumPy halves it into eight leaves of 128
        return ((_pwlanes_{S}(a, lo, 128) + _pwlanes_{S}(a, lo + 128, 128)) +
                (_pwlanes_{S}(a, lo + 256, 128) + _pwlanes_{S}(a, lo + 384, 128))) + \
            ((_pwlanes_{S}(a, lo + 512, 128) + _pwlanes_{S}(a, lo + 640, 128)) +
             (_pwlanes_{S}(a, lo + 768, 128) + _pwlanes_{S}(a, lo + 896, 128)))
    los = np.empty(128, dtype=np.int64)
    ns = np.empty(128, dtype=np.int64)
    done = np.zeros(128, dtype=np.bool_)
    vals = np.empty(128, dtype={T})
    sp, vp = 1, 0
    los[0], ns[0] = lo, n
    while sp > 0:
        sp -= 1
        l, m = los[sp], ns[sp]
        if m <= 128:
            vals[vp] = _pwleaf_{S}(a, l, m)
            vp += 1
        elif done[sp]:
            vals[vp - 2] = vals[vp - 2] + vals[vp - 1]
            vp -= 1
        else:
            n2 = m // 2
            n2 -= n2 % 8
            done[sp] = True
            los[sp + 1], ns[sp + 1], done[sp + 1] = l + n2, m - n2, False
            los[sp + 2], ns[sp + 2], done[sp + 2] = l, n2, False
            sp += 3
    return vals[0]
""",
    # Blocked pairwise sums (docs/numba.md, "Float sums"): NumPy's pairwise sum within each
    # block of SUM_BLOCK elements, block sums combined pairwise by a binary counter: block
    # k's sum is added into `stk` (level l holds the sum of 2**l consecutive blocks), and
    # `_bfinish` adds the levels left over, earliest blocks first. The order depends only on
    # the length: deterministic, and NumPy's own for lengths up to one block.
    "bsum": """
@njit(cache=True, forceinline=True, **_OPTS)
def _bpush_{S}(stk, k, s):
    lvl = 0
    while k & 1:
        s = stk[lvl] + s
        k >>= 1
        lvl += 1
    stk[lvl] = s


@njit(cache=True, forceinline=True, **_OPTS)
def _bfinish_{S}(stk, nb):
    if nb == 0:
        return {T}(0.0)
    lvl = 63
    while not (nb >> lvl) & 1:
        lvl -= 1
    res = stk[lvl]
    for l in range(lvl - 1, -1, -1):
        if (nb >> l) & 1:
            res = res + stk[l]
    return res


@njit(cache=True, **_OPTS)
def _bsum_{S}(a, lo, n):
    if n <= SUM_BLOCK:
        return _pairwise_{S}(a, lo, n)
    stk = np.empty(64, dtype={T})
    nb = (n + SUM_BLOCK - 1) // SUM_BLOCK
    for k in range(nb):
        s = lo + k * SUM_BLOCK
        _bpush_{S}(stk, k, _pairwise_{S}(a, s, min(SUM_BLOCK, lo + n - s)))
    return _bfinish_{S}(stk, nb)
""",
    # The float16 value nearest `x` (a float64 or float32), ties to even, as a float32.
    "f16": """
@njit(cache=True, forceinline=True, **_OPTS)
def _f16(x):
    a = abs(np.float64(x))
    if a >= 65520.0 or a != a:  # past the midpoint of 65504 and 65536, or inf, or NaN
        return np.float32(x) if a != a else np.float32(np.copysign(np.inf, x))
    e = math.frexp(a)[1] - 11  # the exponent of an ulp of a's binade
    ulp = math.ldexp(1.0, e if e > -24 else -24)
    return np.float32(np.rint(np.float64(x) / ulp) * ulp)
""",
    # Exponentiation by squaring with wrap-around, as NumPy's integer power.
    "ipow": """
@njit(cache=True, forceinline=True, **_OPTS)
def _ipow_{S}(a, b):
    out = a - a + 1
    while b > 0:
        if b & 1:
            out *= a
        a *= a
        b >>= 1
    return out
""",
}

# NaN-propagating max / min of a row with 8 independent lanes (so it vectorizes).
_ROW_EXTREME = """
@njit(cache=True, **_OPTS)
def _row{K}_{S}(a, lo, n):
    res = {T}({INIT})
    for i in range(lo, lo + n):
        res = _v{K}_{S}(res, a[i])
    return res
"""
_HELPERS["rowmax"] = _ROW_EXTREME.replace("{K}", "max").replace("{INIT}", "-np.inf")
_HELPERS["rowmin"] = _ROW_EXTREME.replace("{K}", "min").replace("{INIT}", "np.inf")

# NaN-propagating max / min of two floats as LLVM's llvm.maximum / llvm.minimum: a running
# value updated in a loop by these is a reduction LLVM's vectorizer recognizes (one running
# value per vector lane), where `_max_{S}`'s compare-and-select is not.
_LANE_EXTREME = """
@_intrinsic
def _v{K}_{S}(typingctx, a, b):
    if a != b or not isinstance(a, _nbtypes.Float):
        return None

    def codegen(context, builder, sig, args):
        t = context.get_value_type(sig.return_type)
        name = "llvm.{LLK}.f64" if t == _llir.DoubleType() else "llvm.{LLK}.f32"
        fn = _cgutils.get_or_insert_function(builder.module, _llir.FunctionType(t, [t, t]),
                                             name)
        return builder.call(fn, args)
    return a(a, b), codegen
"""
_HELPERS["vmax_f"] = _LANE_EXTREME.replace("{K}", "max").replace("{LLK}", "maximum")
_HELPERS["vmin_f"] = _LANE_EXTREME.replace("{K}", "min").replace("{LLK}", "minimum")

# Batched BLAS products o[k] = a[k] @ b[k] (`.T`: BLAS's transpose flag). One compiled,
# disk-cached function per transpose pattern: Numba's np.dot is costly to type and lower,
# ~0.2-0.4 s per call site when written into each kernel.
# (Not `_gemm_`'s calls: Numba's np.dot computes a product with one row or one column
# otherwise, in other last bits.)
_BDOT = """
@njit(cache=True, **_OPTS)
def _bdot_{TR}_{S}(a, b, o):
    kk = a.shape[{KA}]
    if _no_products(o, kk):
        return
    saved = _blas_one(o[0].size * kk)
    for k in range(o.shape[0]):
        np.dot(a[k]{TA}, b[k]{TB}, o[k])
    _blas_restore(saved)
"""
for _tr in ("nn", "nt", "tn", "tt"):
    _HELPERS["bdot_" + _tr] = (_BDOT.replace("{TR}", _tr)
                               .replace("{KA}", "1" if _tr[0] == "t" else "2")
                               .replace("{TA}", ".T" if _tr[0] == "t" else "")
                               .replace("{TB}", ".T" if _tr[1] == "t" else ""))

# The batched products o (batch, m, n) of kk terms each when there is nothing to multiply:
# True, and o written (zeros when kk is 0), when o is empty or kk is 0.
_NO_PRODUCTS = """
@njit(cache=True, forceinline=True, **_OPTS)
def _no_products(o, kk):
    if o.size == 0:
        return True
    if kk == 0:
        o[...] = 0
        return True
    return False
"""

# One matrix or vector product o = a @ b, through BLAS (a or b may be a transposed view).
_HELPERS["dot"] = """
@njit(cache=True, **_OPTS)
def _dot_{S}(a, b, o):
    saved = _blas_one(o.size * a.shape[a.ndim - 1])
    np.dot(a, b, o)
    _blas_restore(saved)
"""

# Small matrix-vector products (SMALL_DOT elements of the matrix at most) as loops: below
# that size BLAS's call costs more than the arithmetic. `mv`: o = a @ x, four rows at a
# time (each read of x[j] serves four sums), each row's sum vectorized (reassociated);
# `vm`: o = x @ a, the rows of `a` scaled and added (in order).
_HELPERS["mv"] = """
@njit(cache=True, forceinline=True, fastmath=_REASSOC, **_OPTS)
def _mv_{S}(a, x, o):
    n, k = a.shape
    m = n - n % 4
    for i in range(0, m, 4):
        s0 = s1 = s2 = s3 = {T}(0)
        for j in range(k):
            xj = x[j]
            s0 += a[i, j] * xj
            s1 += a[i + 1, j] * xj
            s2 += a[i + 2, j] * xj
            s3 += a[i + 3, j] * xj
        o[i] = s0
        o[i + 1] = s1
        o[i + 2] = s2
        o[i + 3] = s3
    for i in range(m, n):
        s = {T}(0)
        for j in range(k):
            s += a[i, j] * x[j]
        o[i] = s
"""
_HELPERS["vm"] = """
@njit(cache=True, **_OPTS)
def _vm_{S}(x, a, o):
    for j in range(a.shape[1]):
        o[j] = {T}(0)
    for i in range(a.shape[0]):
        xi = x[i]
        for j in range(a.shape[1]):
            o[j] += xi * a[i, j]
"""
SMALL_DOT = 4096

# A C-contiguous array viewed with another C shape, built inline from the same data pointer.
# Numba's `reshape` is a call whose result LLVM cannot trace back to the kernel's noalias
# arguments, so loops over reshaped views needed run-time alias checks, and the vectorizer
# gives up when it cannot build them (loops with table gathers: sin, cos, pow ran 5x slower).
_CVIEW = """
import functools as _functools
from numba.core import cgutils as _cgutils
from llvmlite import ir as _llir
from numba.core.imputils import impl_ret_borrowed as _borrowed


@_intrinsic
def _cview(typingctx, a, shape):
    if not isinstance(a, _nbtypes.Array) or a.layout != "C":
        return None
    ret = _nbtypes.Array(a.dtype, len(shape), "C")

    def codegen(context, builder, sig, args):
        src = context.make_array(sig.args[0])(context, builder, args[0])
        out = context.make_array(ret)(context, builder)
        dims = _cgutils.unpack_tuple(builder, args[1], len(shape))
        strides, step = [], src.itemsize
        for d in reversed(dims):
            strides.insert(0, step)
            step = builder.mul(step, d)
        context.populate_array(out, data=src.data, shape=dims, strides=strides,
                               itemsize=src.itemsize, meminfo=src.meminfo, parent=src.parent)
        return _borrowed(context, builder, ret, out._getvalue())
    return ret(a, shape), codegen


# `np.transpose(a, axes)` as a view, without Numba's own: its first use in a process
# compiled a permutation routine with checks whose messages pull in Numba's string
# formatting and hashing (about 3 s, never cached on disk; a child compile paid it again).
# The axes are run-time values; constant at every call site, the selects fold away.
@_intrinsic
def _tview(typingctx, a, axes):
    if not (isinstance(a, _nbtypes.Array) and isinstance(axes, _nbtypes.BaseTuple)
            and len(axes) == a.ndim and all(isinstance(t, _nbtypes.Integer) for t in axes)):
        return None
    ret = _nbtypes.Array(a.dtype, a.ndim, "A")

    def codegen(context, builder, sig, args):
        n = sig.args[0].ndim
        src = context.make_array(sig.args[0])(context, builder, args[0])
        out = context.make_array(ret)(context, builder)
        shape = _cgutils.unpack_tuple(builder, src.shape, n)
        strides = _cgutils.unpack_tuple(builder, src.strides, n)
        picks = [context.cast(builder, v, t, _nbtypes.intp) for v, t in
                 zip(_cgutils.unpack_tuple(builder, args[1], n), sig.args[1], strict=True)]
        dims, steps = [], []
        for pick in picks:
            dim, step = shape[0], strides[0]
            for k in range(1, n):
                hit = builder.icmp_signed("==", pick, context.get_constant(_nbtypes.intp, k))
                dim = builder.select(hit, shape[k], dim)
                step = builder.select(hit, strides[k], step)
            dims.append(dim)
            steps.append(step)
        context.populate_array(out, data=src.data, shape=dims, strides=steps,
                               itemsize=src.itemsize, meminfo=src.meminfo, parent=src.parent)
        return _borrowed(context, builder, ret, out._getvalue())
    return ret(a, axes), codegen


def _same_c(dst, src):
    return isinstance(dst, _nbtypes.Array) and isinstance(src, _nbtypes.Array) and \
        dst.layout == "C" and src.layout == "C" and dst.dtype == src.dtype


# NumPy's pairwise leaf keeps 8 running sums, of elements i = j (mod 8): here one vector of
# 8 lanes, `m` elements from `lo` (m a multiple of 8, at least 8), the same additions in the
# same order (Numba left the 8 scalar chains unvectorized: LLVM may not reassociate them).
@_intrinsic
def _lanes8(typingctx, b, lo, m):
    if not isinstance(b, _nbtypes.Array) or b.ndim != 1 or \
            b.dtype not in (_nbtypes.float64, _nbtypes.float32):
        return None
    ret = _nbtypes.UniTuple(b.dtype, 8)

    def codegen(context, builder, sig, args):
        arr = context.make_array(sig.args[0])(context, builder, args[0])
        off = context.cast(builder, args[1], sig.args[1], _nbtypes.intp)
        count = context.cast(builder, args[2], sig.args[2], _nbtypes.intp)
        elt = context.get_value_type(sig.args[0].dtype)
        vec = _llir.VectorType(elt, 8)
        size = context.get_abi_sizeof(elt)
        contiguous = sig.args[0].layout == "C"
        stride = None if contiguous else _cgutils.unpack_tuple(builder, arr.strides, 1)[0]
        lane = [_llir.Constant(_llir.IntType(32), j) for j in range(8)]

        def load(start):  # elements start .. start + 7 as a vector
            start = builder.add(start, off)
            if contiguous:
                ptr = builder.bitcast(builder.gep(arr.data, [start]), vec.as_pointer())
                return builder.load(ptr, align=size)
            v = _llir.Constant(vec, _llir.Undefined)
            base = builder.bitcast(arr.data, _cgutils.voidptr_t)
            for j in range(8):
                at = builder.mul(builder.add(start, _llir.Constant(start.type, j)), stride)
                p = builder.bitcast(builder.gep(base, [at]), elt.as_pointer())
                v = builder.insert_element(v, builder.load(p), lane[j])
            return v

        one = _llir.Constant(count.type, 1)
        acc = _cgutils.alloca_once(builder, vec)
        builder.store(load(_llir.Constant(count.type, 0)), acc)
        blocks = builder.sdiv(count, _llir.Constant(count.type, 8))
        with _cgutils.for_range_slice(builder, one, blocks, one) as (k, _):
            start = builder.mul(k, _llir.Constant(count.type, 8))
            builder.store(builder.fadd(builder.load(acc), load(start)), acc)
        v = builder.load(acc)
        return context.make_tuple(builder, ret, [builder.extract_element(v, j) for j in lane])
    return ret(b, lo, m), codegen


# A loop's carries and history rows copied as one memcpy of C-contiguous data (the
# generated nests cost Numba's front end a loop each; LLVM made them memcpy anyway).
@_intrinsic
def _ccopy(typingctx, dst, src):
    if not _same_c(dst, src):
        return None

    def codegen(context, builder, sig, args):
        d = context.make_array(sig.args[0])(context, builder, args[0])
        s = context.make_array(sig.args[1])(context, builder, args[1])
        _cgutils.raw_memcpy(builder, d.data, s.data, s.nitems, s.itemsize)
        return context.get_dummy_value()
    return _nbtypes.none(dst, src), codegen


@_intrinsic
def _crow(typingctx, dst, row, src):
    if not _same_c(dst, src) or dst.ndim != src.ndim + 1 or \
            not isinstance(row, _nbtypes.Integer):
        return None

    def codegen(context, builder, sig, args):
        d = context.make_array(sig.args[0])(context, builder, args[0])
        s = context.make_array(sig.args[2])(context, builder, args[2])
        stride = _cgutils.unpack_tuple(builder, d.strides, sig.args[0].ndim)[0]
        at = builder.mul(context.cast(builder, args[1], sig.args[1], _nbtypes.intp), stride)
        base = builder.bitcast(d.data, _cgutils.voidptr_t)
        _cgutils.raw_memcpy(builder, builder.gep(base, [at]), s.data, s.nitems, s.itemsize)
        return context.get_dummy_value()
    return _nbtypes.none(dst, row, src), codegen
"""

# A call of a function of the generated module that is compiled once. Numba links a
# callee's code into every caller and optimizes and compiles it again there, at every level
# of the call chain (an LSTM gradient's backward step was compiled 3 times, its loop nests
# 4). `_direct(f, (args...))` calls `f`'s own machine code instead, through a symbol named
# after `f`'s module (a digest of its code), name and argument types: the same name in
# every process, so a caller's cached code finds `f` whenever `f` was loaded first
# (`_direct_compile`, called for a cached module's callees in order: cache.py).
_DIRECT = """
import hashlib as _hashlib

import llvmlite.binding as _llvm

from tracegrad.backends.numba import llvmgen as _llvmgen
from tracegrad.backends.numba.forks import typed_elsewhere as _typed_elsewhere
from tracegrad.backends.numba.forks import typed_only as _typed_only


def _direct_symbol(disp, argtys):
    key = f"{disp.py_func.__module__}.{disp.py_func.__name__}{tuple(argtys)}"
    return "tg_direct." + _hashlib.sha256(key.encode()).hexdigest()[:32]


def _direct_compile(disp, argtys):  # compiled, its machine code registered: (cres, symbol)
    argtys = tuple(argtys)
    name = _direct_symbol(disp, argtys)
    if _llvmgen.load_or_compile(disp, argtys, name) is not None:
        return None, name  # translated to LLVM IR (llvmgen.py)
    disp.compile(argtys)
    cres = disp.overloads[argtys]
    address = cres.library.get_pointer_to_function(cres.fndesc.mangled_name)
    if not address:
        raise RuntimeError(f"no machine code for {disp.py_func.__name__}{argtys}")
    _llvm.add_symbol(name, address)
    return cres, name


def _direct_typed(fn, args, declared):
    # `(restype, codegen)` of a `_direct` call; `declared`: its return type when the caller
    # knows it (the callee is then not typed here when another process compiles it)
    argtys = tuple(_nbtypes.unliteral(t) for t in args.types)
    symbol = _direct_symbol(fn.dispatcher, argtys)
    found = _llvmgen.load_or_compile(fn.dispatcher, argtys, symbol,
                                     "call" if declared is None else "step")
    if found is not None:  # translated to LLVM IR (llvmgen.py)
        picks = found.returns
        if (picks is None) != (declared is None) or (picks is not None and tuple(
                argtys[k] for k in picks) != tuple(declared)[:-1]):
            raise TypeError(f"tracegrad: {fn.dispatcher.py_func.__name__} returns "
                            f"{picks}, declared {declared} (a tracegrad bug)")

        def translated(context, builder, sig, llargs):
            values = [builder.extract_value(llargs[1], i) for i in range(len(argtys))]
            count = _llvmgen.call(context, builder, argtys, values, symbol)
            if picks is None:
                return context.get_dummy_value()
            items = [values[k] for k in picks]
            for k, v in zip(picks, items):
                context.nrt.incref(builder, argtys[k], v)
            return context.make_tuple(builder, sig.return_type, items + [count])
        return (_nbtypes.none if declared is None else declared), translated
    elsewhere = _typed_elsewhere(fn.dispatcher, argtys, declared)  # forks.py
    if elsewhere is None:
        cres, name = _direct_compile(fn.dispatcher, argtys)
        restype = cres.signature.return_type
        if declared is not None and declared != restype:
            raise TypeError(f"tracegrad: {fn.dispatcher.py_func.__name__} returns {restype}, "
                            f"declared {declared} (a tracegrad bug)")
    else:
        restype, name = elsewhere

    def codegen(context, builder, sig, llargs):
        if _typed_only(fn.dispatcher, argtys):  # (its typing remembered: forks.py)
            _direct_compile(fn.dispatcher, argtys)
        values = [builder.extract_value(llargs[1], i) for i in range(len(argtys))]
        fnty = context.call_conv.get_function_type(restype, argtys)
        callee = _cgutils.get_or_insert_function(builder.module, fnty, name)
        status, res = context.call_conv.call_function(builder, callee, restype, argtys,
                                                      values)
        with _cgutils.if_unlikely(builder, status.is_error):
            context.call_conv.return_status_propagate(builder, status)
        return res
    return restype, codegen


@_intrinsic
def _direct(typingctx, fn, args):
    if not isinstance(fn, _nbtypes.Dispatcher) or not isinstance(args, _nbtypes.BaseTuple):
        return None
    restype, codegen = _direct_typed(fn, args, None)
    return restype(fn, args), codegen


@_intrinsic
def _direct_step(typingctx, fn, args, first, count):
    # a loop's step (control.py): it returns its carries, arguments `first` to
    # `first + count - 1`, and the iteration count
    if not isinstance(fn, _nbtypes.Dispatcher) or not isinstance(args, _nbtypes.BaseTuple) \
            or not isinstance(first, _nbtypes.IntegerLiteral) \
            or not isinstance(count, _nbtypes.IntegerLiteral):
        return None
    a, m = first.literal_value, count.literal_value
    carries = [_nbtypes.unliteral(t) for t in args.types[a:a + m]]
    declared = _nbtypes.BaseTuple.from_types(carries + [_nbtypes.int64])
    restype, codegen = _direct_typed(fn, args, declared)
    return restype(fn, args, first, count), codegen
"""

# The checks of serial kernels raise through these (`CodeGen.index_stmt`, `check_stmt`).
_RAISES = """
@njit(cache=True, forceinline=True, **_OPTS)
def _index(e, n, tag):
    g = np.int64(e)
    if g < 0:
        g += n
    if g < 0 or g >= n:
        raise IndexError(tag, np.int64(e), n)
    return g


@njit(cache=True, **_OPTS)
def _value_error(tag):
    raise ValueError(tag)
"""

_PIVOTS = """
@njit(cache=True, **_OPTS)
def _pivperm(pivots, out, tag):
    m = out.shape[0]
    for i in range(m):
        out[i] = i
    for i in range(pivots.shape[0]):
        p = pivots[i]
        if p < 0 or p >= m:
            raise ValueError(tag, p)
        out[i], out[p] = out[p], out[i]
"""

# expm by Higham's (2005) scaling and squaring with Padé approximants of degree 3 to 13
_EXPM = """
_PADE = (
    (120.0, 60.0, 12.0, 1.0),
    (30240.0, 15120.0, 3360.0, 420.0, 30.0, 1.0),
    (17297280.0, 8648640.0, 1995840.0, 277200.0, 25200.0, 1512.0, 56.0, 1.0),
    (17643225600.0, 8821612800.0, 2075673600.0, 302702400.0, 30270240.0, 2162160.0,
     110880.0, 3960.0, 90.0, 1.0),
)
_PADE13 = (64764752532480000.0, 32382376266240000.0, 7771770303897600.0,
           1187353796428800.0, 129060195264000.0, 10559470521600.0, 670442572800.0,
           33522128640.0, 1323241920.0, 40840800.0, 960960.0, 16380.0, 182.0, 1.0)
_THETA = (1.495585217958292e-2, 2.539398330063230e-1, 9.504178996162932e-1,
          2.097847961257068)
_THETA13 = 5.371920351148152


@njit(cache=True, error_model="numpy")
def _pade_low(a, b):
    # (U, V) of the Padé approximant with coefficients b (degree 3, 5, 7 or 9)
    n = a.shape[0]
    eye = np.eye(n).astype(a.dtype)
    a2 = a @ a
    power = eye
    u = b[1] * eye
    v = b[0] * eye
    for j in range(1, (len(b) + 1) // 2):
        power = power @ a2
        u = u + b[2 * j + 1] * power
        v = v + b[2 * j] * power
    return a @ u, v


@njit(cache=True, error_model="numpy")
def _expm64(a):
    n = a.shape[0]
    if n == 0:
        return a.copy()
    if not np.isfinite(a).all():
        return np.full_like(a, np.nan)
    norm = np.abs(a).sum(axis=0).max()
    s = 0
    if norm <= _THETA[3]:
        if norm <= _THETA[0]:
            u, v = _pade_low(a, _PADE[0])
        elif norm <= _THETA[1]:
            u, v = _pade_low(a, _PADE[1])
        elif norm <= _THETA[2]:
            u, v = _pade_low(a, _PADE[2])
        else:
            u, v = _pade_low(a, _PADE[3])
        return np.linalg.solve(v - u, v + u)
    if norm > _THETA13:
        s = int(np.ceil(np.log2(norm / _THETA13)))
    a = a * 2.0 ** -s
    b = _PADE13
    eye = np.eye(n).astype(a.dtype)
    a2 = a @ a
    a4 = a2 @ a2
    a6 = a4 @ a2
    u = a @ (a6 @ (b[13] * a6 + b[11] * a4 + b[9] * a2)
             + b[7] * a6 + b[5] * a4 + b[3] * a2 + b[1] * eye)
    v = (a6 @ (b[12] * a6 + b[10] * a4 + b[8] * a2)
         + b[6] * a6 + b[4] * a4 + b[2] * a2 + b[0] * eye)
    r = np.linalg.solve(v - u, v + u)
    for _ in range(s):
        r = r @ r
    return r
"""

# BLAS's triangular solve and product on C-ordered matrices, for one BLAS prefix P (d s z c)
# and its dtype: out = op(a)^-1 @ b (left) or b @ op(a)^-1 (trsm), out = op(a) @ b or
# b @ op(a) (trmm), op(a) = a.T if trans. Read by BLAS's column-major convention, a C-ordered
# matrix is its transpose, so a left solve is BLAS's right solve of the transposes (and the
# other way round), with the triangle swapped.
_TRSM = """
@njit(cache=True, **_OPTS)
def _trsm_{P}(a, b, out, lower, trans, unit, left, tag):
    n = a.shape[0]
    if not unit:
        for i in range(n):
            if a[i, i] == 0:
                raise ValueError(tag, i)
    _triangular_{P}(a, b, out, lower, trans, unit, left, False)


@njit(cache=True, **_OPTS)
def _trmm_{P}(a, b, out, lower, trans, left):
    _triangular_{P}(a, b, out, lower, trans, False, left, True)


@njit(cache=True, **_OPTS)
def _triangular_{P}(a, b, out, lower, trans, unit, left, product):
    n = a.shape[0]
    out[:, :] = b
    rows, cols = out.shape
    if rows == 0 or cols == 0:
        return
    m = np.ascontiguousarray(a)
    flags = np.empty(4, np.uint8)
    flags[0] = 82 if left else 76  # side: R / L
    flags[1] = 85 if lower else 76  # uplo: U / L
    flags[2] = 84 if trans else 78  # transa: T / N
    flags[3] = 85 if unit else 78  # diag: U / N
    sizes = np.empty(4, np.int32)
    sizes[0] = cols
    sizes[1] = rows
    sizes[2] = max(1, n)
    sizes[3] = cols
    alpha = np.ones(1, np.{N})
    saved = _blas_one(rows * cols * n)
    if product:
        _blas_{P}trmm(flags[0:].ctypes, flags[1:].ctypes, flags[2:].ctypes, flags[3:].ctypes,
                      sizes[0:].ctypes, sizes[1:].ctypes, alpha.ctypes, m.ctypes,
                      sizes[2:].ctypes, out.ctypes, sizes[3:].ctypes)
    else:
        _blas_{P}trsm(flags[0:].ctypes, flags[1:].ctypes, flags[2:].ctypes, flags[3:].ctypes,
                      sizes[0:].ctypes, sizes[1:].ctypes, alpha.ctypes, m.ctypes,
                      sizes[2:].ctypes, out.ctypes, sizes[3:].ctypes)
    _blas_restore(saved)
"""

# Batched products o[k] = a[k] @ b[k] on strided 3-d views (a matrix of `a` or `b` is a
# slice of a larger array: each has one unit stride, the other its leading dimension), by
# BLAS's gemm on the slices as they are, no copy. Read by BLAS's column-major convention, the
# C-ordered o[k] is o[k].T = b[k].T @ a[k].T; a matrix whose rows are consecutive is, for
# BLAS, its transpose with the row stride as leading dimension.
_GEMM = """
@njit(cache=True, **_OPTS)
def _gemm_{P}(a, b, o):
    nb, m, n = o.shape
    kk = a.shape[2]
    if _no_products(o, kk):
        return
    s = a.itemsize
    if not (a.strides[2] == s or a.strides[1] == s) or not (b.strides[2] == s or
                                                            b.strides[1] == s):
        for k in range(nb):  # (a view with no unit stride: gemm cannot read it)
            np.dot(np.ascontiguousarray(a[k]), np.ascontiguousarray(b[k]), o[k])
        return
    flags = np.empty(2, np.uint8)
    sizes = np.empty(6, np.int32)
    sizes[0] = n
    sizes[1] = m
    sizes[2] = kk
    sizes[5] = n
    if b.strides[2] == s:  # b[k]'s rows consecutive: b[k].T for BLAS
        flags[0] = 78
        sizes[3] = max(b.strides[1] // s, n, 1)
    else:
        flags[0] = 84
        sizes[3] = max(b.strides[2] // s, kk, 1)
    if a.strides[2] == s:
        flags[1] = 78
        sizes[4] = max(a.strides[1] // s, kk, 1)
    else:
        flags[1] = 84
        sizes[4] = max(a.strides[2] // s, m, 1)
    alpha = np.ones(1, np.{N})
    beta = np.zeros(1, np.{N})
    saved = _blas_one(m * n * kk)  # (one product's work: the policy's)
    for k in range(nb):
        _blas_{P}gemm(flags[0:].ctypes, flags[1:].ctypes, sizes[0:].ctypes, sizes[1:].ctypes,
                      sizes[2:].ctypes, alpha.ctypes, b[k].ctypes, sizes[3:].ctypes,
                      a[k].ctypes, sizes[4:].ctypes, beta.ctypes, o[k].ctypes,
                      sizes[5:].ctypes)
    _blas_restore(saved)
"""

# The BLAS thread policy (tracegrad.backends.blas_threads): a product of fewer than
# SMALL_PRODUCT multiply-adds runs on one BLAS thread. `_blas_one(work)` lowers the
# library's count to 1 for such a product and returns the count to restore (0: none).
# Bound at import to the library's own get/set functions (no-ops when it has none).
_BLAS_THREADS = """
def _blas_thread_functions():
    import llvmlite.binding as llvm
    from numba import cfunc, types

    from tracegrad.backends import blas_threads

    addresses = blas_threads.addresses()
    if addresses is None:
        addresses = (cfunc(types.intc())(lambda: 1).address,
                     cfunc(types.void(types.intc))(lambda n: None).address)
    else:
        blas_threads.sync()
    llvm.add_symbol("tg_blas_get_threads", addresses[0])
    llvm.add_symbol("tg_blas_set_threads", addresses[1])
    return (types.ExternalFunction("tg_blas_get_threads", types.intc()),
            types.ExternalFunction("tg_blas_set_threads", types.void(types.intc)))


_blas_get_threads, _blas_set_threads = _blas_thread_functions()
_SMALL_PRODUCT = {SMALL}


@njit(cache=True, forceinline=True, **_OPTS)
def _blas_one(work):
    if work < _SMALL_PRODUCT:
        n = _blas_get_threads()
        if n > 1:
            _blas_set_threads(1)
            return n
    return 0


@njit(cache=True, forceinline=True, **_OPTS)
def _blas_restore(saved):
    if saved > 0:
        _blas_set_threads(saved)
"""

# SciPy's compiled special functions (scipy.special.cython_special), called from kernels as
# Numba external functions of doubles: `from <this module> import _cs_gammaln` binds one on
# first use (SciPy is imported then, not with this module). Cython's fused functions are
# exported under mangled names; the double one is picked by its C signature. SciPy's BLAS
# and LAPACK (scipy.linalg.cython_blas, cython_lapack) the same way: `_blas_dtrsm` binds
# dtrsm, `_lapack_dsyevd` dsyevd, pointers in.
_CYTHON_SPECIAL = """
def _cython_special(name):
    import llvmlite.binding as llvm
    import scipy.special.cython_special as cs
    from numba import types
    from numba.extending import get_cython_function_address

    for mangled in (name, "__pyx_fuse_0" + name, "__pyx_fuse_1" + name):
        capsule = cs.__pyx_capi__.get(mangled)
        signature = repr(capsule).split('"')[1] if capsule is not None else ""
        if signature.startswith("double (double"):
            break
    else:
        raise AttributeError(name)
    nargs = signature.split("(", 1)[1].count("double")
    symbol = "tg_cython_special_" + name
    llvm.add_symbol(symbol, get_cython_function_address("scipy.special.cython_special", mangled))
    # the last C argument is Cython's skip-dispatch flag: kernels pass 0
    return types.ExternalFunction(symbol, types.float64(*[types.float64] * nargs, types.intc))


def _cython_fortran(module, name, nargs):
    import llvmlite.binding as llvm
    from numba import types
    from numba.extending import get_cython_function_address

    symbol = "tg_cython_" + name
    llvm.add_symbol(symbol, get_cython_function_address("scipy.linalg." + module, name))
    # Fortran's calling convention: every argument by pointer
    return types.ExternalFunction(symbol, types.void(*[types.voidptr] * nargs))


_BLAS_ARGS = {"trsm": 11, "trmm": 11, "gemm": 13}
_LAPACK_ARGS = {"syevd": 11, "heevd": 13}


def __getattr__(attr):
    if attr.startswith("_cs_"):
        fn = globals()[attr] = _cython_special(attr[4:])
    elif attr.startswith("_blas_"):
        fn = globals()[attr] = _cython_fortran("cython_blas", attr[6:], _BLAS_ARGS[attr[7:]])
    elif attr.startswith("_lapack_"):
        fn = globals()[attr] = _cython_fortran("cython_lapack", attr[8:],
                                               _LAPACK_ARGS[attr[9:]])
    elif attr.startswith("_rf_"):  # rocket-fft's transforms (imported on first use)
        import rocket_fft

        fn = globals()[attr] = getattr(rocket_fft, attr[4:])
    else:
        raise AttributeError(attr)
    return fn
"""

# The Hurwitz zeta function zeta(s, q) = sum_k (q + k)^-s (cython_special does not export
# it): the terms below q + k = 16 summed, the rest by the Euler-Maclaurin formula with the
# Bernoulli numbers B_2 .. B_24 (remainder below 1e-17 relative for s < 40). For s < 1 the
# series diverges (NaN), at s == 1 and non-positive integer q it is infinite, as SciPy's.
_ZETA = """
_ZETA_B = np.array([1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6,
                    -3617 / 510, 43867 / 798, -174611 / 330, 854513 / 138,
                    -236364091 / 2730])


@njit(cache=True, **_OPTS)
def _zeta(s, q):
    if s != s or q != q or s < 1.0:
        return np.nan
    if s == 1.0 or (q <= 0.0 and q == np.floor(q)):
        return np.inf
    total = 0.0
    while q < 16.0:
        total += q ** -s
        q += 1.0
    total += q ** (1.0 - s) / (s - 1.0) + 0.5 * q ** -s
    # term j: B_2j / (2j)! s (s + 1) ... (s + 2j - 2) q^(-s - 2j + 1)
    factor = s * q ** (-s - 1.0)
    inv_q2 = 1.0 / (q * q)
    fact = 2.0
    for j in range(1, 13):
        term = _ZETA_B[j - 1] / fact * factor
        total += term
        if abs(term) < 1e-17 * abs(total):
            break
        factor *= (s + 2 * j - 1) * (s + 2 * j) * inv_q2
        fact *= (2 * j + 1) * (2 * j + 2)
    return total
"""



def _threefry_source() -> str:
    """`_threefry2x32(k0, k1, x0, x1)`: ops/random_bits.py's block, its rounds unrolled, in
    uint32 (each sum truncated: Numba widens uint32 arithmetic), packed into a uint64."""
    ks = ("k0", "k1", "k2")
    lines = ["@njit(cache=True, forceinline=True, **_OPTS)",
             "def _threefry2x32(k0, k1, x0, x1):",
             f"    k2 = k0 ^ k1 ^ np.uint32({random_bits.PARITY:#x})",
             "    x0 = np.uint32(x0 + k0)",
             "    x1 = np.uint32(x1 + k1)"]
    for r in range(random_bits.ROUNDS):
        d = random_bits.ROTATIONS[r % 8]
        lines += ["    x0 = np.uint32(x0 + x1)",
                  f"    x1 = np.uint32((x1 << np.uint32({d})) | (x1 >> np.uint32({32 - d}))) ^ x0"]
        if r % 4 == 3:  # key injection s
            s = r // 4 + 1
            lines += [f"    x0 = np.uint32(x0 + {ks[s % 3]})",
                      f"    x1 = np.uint32(x1 + np.uint32({ks[(s + 1) % 3]} + np.uint32({s})))"]
    lines.append("    return (np.uint64(x0) << np.uint64(32)) | np.uint64(x1)")
    return "\n" + "\n".join(lines) + "\n"


_HELPERS["threefry"] = _threefry_source()

# Complex numbers in NumPy's lexicographic order: the real parts decide unless equal (and an
# imaginary NaN makes a real-part decision false); max/min keep a NaN of the first operand.
_ORDER = """
@njit(cache=True, forceinline=True, **_OPTS)
def _{K}_{S}(a, b):
    return (a.real {STRICT} b.real and a.imag == a.imag and b.imag == b.imag) or (
        a.real == b.real and a.imag {OP} b.imag)
"""
_COMPLEX = {
    kind + "_c": _ORDER.replace("{K}", kind).replace("{STRICT}", op[0]).replace("{OP}", op)
    for kind, op in (("lt", "<"), ("le", "<="), ("gt", ">"), ("ge", ">="))
}
_EXTREMUM = """
@njit(cache=True, forceinline=True, **_OPTS)
def _{K}_{S}(a, b):
    if a.real != a.real or a.imag != a.imag or _{ORDER}_{S}(a, b):
        return a
    return b
"""
_COMPLEX.update({
    kind + "_c": _EXTREMUM.replace("{K}", kind).replace("{ORDER}", order)
    for kind, order in (("max", "ge"), ("min", "le"))
})
_COMPLEX.update({
    # A stable merge sort of complex numbers in NumPy's order: the numbers without NaN
    # lexicographically, then those with a NaN imaginary part (by real part), a NaN real part
    # (by imaginary part), and both.
    "argsort_c": """
@njit(cache=True, forceinline=True, **_OPTS)
def _sort_less_{S}(a, b):
    ca = 2 * (a.real != a.real) + (a.imag != a.imag)
    cb = 2 * (b.real != b.real) + (b.imag != b.imag)
    if ca != cb:
        return ca < cb
    if ca == 0:
        return a.real < b.real or (a.real == b.real and a.imag < b.imag)
    if ca == 1:
        return a.real < b.real
    return ca == 2 and a.imag < b.imag


@njit(cache=True, **_OPTS)
def _argsort_{S}(a):
    n = a.shape[0]
    perm = np.arange(n)
    tmp = np.empty(n, np.int64)
    width = 1
    while width < n:
        for lo in range(0, n, 2 * width):
            mid, hi = min(lo + width, n), min(lo + 2 * width, n)
            i, j, k = lo, mid, lo
            while i < mid and j < hi:
                if _sort_less_{S}(a[perm[j]], a[perm[i]]):
                    tmp[k] = perm[j]
                    j += 1
                else:
                    tmp[k] = perm[i]
                    i += 1
                k += 1
            while i < mid:
                tmp[k] = perm[i]
                i += 1
                k += 1
            while j < hi:
                tmp[k] = perm[j]
                j += 1
                k += 1
        perm, tmp = tmp, perm
        width *= 2
    return perm
""",
    # NumPy's complex division (Smith's algorithm in the operands' precision); a zero divisor
    # gives infinities or NaN, where Numba's `/` raises ZeroDivisionError.
    "div_c": """
@njit(cache=True, forceinline=True, **_OPTS)
def _div_{S}(a, b):
    ar, ai, br, bi = a.real, a.imag, b.real, b.imag
    abr, abi = abs(br), abs(bi)
    if abr >= abi:
        if abr == 0 and abi == 0:
            return {T}(complex(ar / abr, ai / abr))
        rat = bi / br
        scl = {R}(1.0) / (br + bi * rat)
        return {T}(complex((ar + ai * rat) * scl, (ai - ar * rat) * scl))
    rat = br / bi
    scl = {R}(1.0) / (bi + br * rat)
    return {T}(complex((ar * rat + ai) * scl, (ai * rat - ar) * scl))
""",
    # |z| (NumPy's hypot) as sqrt(x^2 + y^2), which vectorizes (libm's hypot is a call per
    # element, ten times slower), within 2 ulp of it; rescaled where x^2 + y^2 would overflow
    # or lose bits to underflow; inf if either part is infinite, else NaN if either is NaN.
    "abs_c": """
@njit(cache=True, forceinline=True, **_OPTS)
def _abs_{S}(z):
    x, y = abs(z.real), abs(z.imag)
    s = x * x + y * y
    r = math.sqrt(s)
    if not (s < 1e300 and s > 1e-300):
        m, n = (x, y) if x > y else (y, x)
        q = n / m
        r = m * math.sqrt(1.0 + q * q)
        if m == 0.0:
            r = 0.0
        if x != x or y != y:
            r = np.nan
        if x == np.inf or y == np.inf:
            r = np.inf
    return r
""",
    # exp(x + iy) = e^x (cos y + i sin y) from the vector math's exp and sin/cos (one range
    # reduction, the fast one below its limit), with NumPy's values where a part is zero,
    # infinite or NaN, and e^(x/2) squared past e^x's overflow (a small cos y can keep the
    # product finite).
    "exp_c": """
@njit(cache=True, forceinline=True, **_OPTS)
def _exp_{S}(z):
    x, y = z.real, z.imag
    if abs(y) < 823549.0:
        s, c = _sin_cos_fast_v(y)
    else:
        s, c = _sin_cos_v(y)
    e = _exp_v(x)
    re, im = e * c, e * s
    if x > 709.0:
        h = _exp_v(0.5 * x)
        re, im = (h * c) * h, (h * s) * h
    if y == 0.0:
        re, im = e, y
    elif y - y != 0.0:
        if x == np.inf:
            re, im = x, np.nan
        elif x == -np.inf:
            re, im = 0.0, math.copysign(0.0, y)
    return complex(re, im)
""",
    # The principal square root as C99's csqrt (Kahan's algorithm, NumPy's): scaled near
    # overflow and below the normal range, with C99's values at zeros, infinities and NaN.
    "sqrt_c": """
@njit(cache=True, forceinline=True, **_OPTS)
def _sqrt_{S}(z):
    a, b = z.real, z.imag
    if a == 0.0 and b == 0.0:
        return complex(0.0, b)
    if b == np.inf or b == -np.inf:
        return complex(np.inf, b)
    if a != a:
        return complex(a, (b - b) / (b - b))
    if a == np.inf:
        return complex(a, math.copysign(b - b, b))
    if a == -np.inf:
        return complex(abs(b - b), math.copysign(np.inf, b))
    scale = 1.0
    if abs(a) >= 7.446288774449766e307 or abs(b) >= 7.446288774449766e307:
        a, b, scale = a * 0.25, b * 0.25, 2.0
    elif abs(a) < 8.900295434028806e-308 and abs(b) < 8.900295434028806e-308:
        a, b, scale = a * 18014398509481984.0, b * 18014398509481984.0, 7.450580596923828e-09
    if a >= 0.0:
        t = math.sqrt((a + math.hypot(a, b)) * 0.5)
        return complex(t * scale, b / (2.0 * t) * scale)
    t = math.sqrt((-a + math.hypot(a, b)) * 0.5)
    return complex(abs(b) / (2.0 * t) * scale, math.copysign(t, b) * scale)
""",
    # NumPy 2's sign of a complex number, z / |z|: 0 at 0, a unit along an infinite part,
    # NaN where both parts are infinite or one is NaN.
    "sign_c": """
@njit(cache=True, forceinline=True, **_OPTS)
def _sign_{S}(z):
    x, y = z.real, z.imag
    r = _abs_{S}(z)
    if r != r:
        return complex(np.nan, np.nan)
    if r == np.inf:
        if x == np.inf or x == -np.inf:
            if y == np.inf or y == -np.inf:
                return complex(np.nan, np.nan)
            return complex(math.copysign(1.0, x), 0.0)
        return complex(0.0, math.copysign(1.0, y))
    if r == 0.0:
        return complex(0.0, 0.0)
    return complex(x / r, y / r)
""",
    # NumPy's complex expm1: exact near 0, where exp(z) - 1 cancels.
    "expm1_c": """
@njit(cache=True, forceinline=True, **_OPTS)
def _expm1_{S}(z):
    h = math.sin(z.imag / 2)
    return complex(math.expm1(z.real) * math.cos(z.imag) - 2 * h * h,
                   math.exp(z.real) * math.sin(z.imag))
""",
    # tanh(x + iy) = (sinh x cosh x + i sin y cos y) / (sinh^2 x + cos^2 y); past |x| = 20 the
    # real part rounds to +-1 and the imaginary part is 4 sin y cos y e^-2|x| (no overflow).
    "tanh_c": """
@njit(cache=True, forceinline=True, **_OPTS)
def _tanh_{S}(z):
    x, y = z.real, z.imag
    s, c = math.sin(y), math.cos(y)
    if abs(x) > 20.0:
        return complex(math.copysign(1.0, x), 4.0 * s * c * math.exp(-2.0 * abs(x)))
    sh = math.sinh(x)
    d = sh * sh + c * c
    return complex(sh * math.cosh(x) / d, s * c / d)
""",
    # NumPy's complex power: 1 for a zero exponent, 0 for a zero base and an exponent of
    # positive real part (NaN for the others), repeated squaring for integer exponents below 100, exp(b log a) otherwise.
    "ipow_c": """
@njit(cache=True, forceinline=True, **_OPTS)
def _ipow_{S}(a, n):
    if n == 0:
        return complex(1.0, 0.0)
    if n == 1:
        return a
    if n == 2:
        return a * a
    if n == 3:
        return a * a * a
    m = -n if n < 0 else n
    r = complex(1.0, 0.0)
    p = a
    while True:
        if m & 1:
            r = r * p
        m >>= 1
        if m == 0:
            break
        p = p * p
    if n < 0:
        return _div_c128(complex(1.0, 0.0), r)
    return r
""",
    "pow_c": """
@njit(cache=True, forceinline=True, **_OPTS)
def _pow_{S}(a, b):
    if b.real == 0.0 and b.imag == 0.0:
        return complex(1.0, 0.0)
    if a.real == 0.0 and a.imag == 0.0:
        if b.real > 0.0:
            return complex(0.0, 0.0)
        return complex(np.nan, np.nan)
    if b.imag == 0.0 and b.real == math.floor(b.real) and abs(b.real) < 100.0:
        return _ipow_{S}(a, int(b.real))
    return np.exp(b * np.log(a))
""",
})
_HELPERS.update(_COMPLEX)

# template -> the dtypes it is instantiated for (None: once, no dtype)
_FLOATS = (dtypes.float64, dtypes.float32, dtypes.float16)
_INTS = tuple(dtypes.SIGNED + dtypes.UNSIGNED)
_CPLX = (dtypes.complex128, dtypes.complex64)
_C128 = (dtypes.complex128,)
_INEXACT = _FLOATS + _CPLX
# dtype -> (BLAS prefix, the NumPy name of the dtype BLAS computes in); float16 is held as
# float32 in kernels
BLAS_PREFIX = {dtypes.float64: ("d", "float64"), dtypes.float32: ("s", "float32"),
               dtypes.float16: ("s", "float32"),
               dtypes.complex128: ("z", "complex128"), dtypes.complex64: ("c", "complex64")}
_INSTANCES = {
    "max_f": _FLOATS, "min_f": _FLOATS, "sign_f": _FLOATS, "logistic": _FLOATS,
    "floordiv_f": _FLOATS, "mod_f": _FLOATS, "pairwise": _FLOATS, "bsum": _FLOATS,
    "rowmax": _FLOATS,
    "rowmin": _FLOATS,
    "vmax_f": _FLOATS, "vmin_f": _FLOATS,
    "floordiv_i": _INTS, "mod_i": _INTS, "f16": None,
    "gcd_i": _INTS, "ipow": (dtypes.int64,),
    "dot": _INEXACT, "mv": _INEXACT, "vm": _INEXACT,
    "bdot_nn": _INEXACT, "bdot_nt": _INEXACT, "bdot_tn": _INEXACT, "bdot_tt": _INEXACT,
    "linalg": _INEXACT, "decompositions": _INEXACT, "threefry": None,
    "lt_c": _CPLX, "le_c": _CPLX, "gt_c": _CPLX, "ge_c": _CPLX, "max_c": _CPLX,
    "min_c": _CPLX, "div_c": _CPLX, "argsort_c": _CPLX, "abs_c": _C128, "sign_c": _C128, "sqrt_c": _C128, "exp_c": _C128,
    "expm1_c": _C128, "tanh_c": _C128, "ipow_c": _C128, "pow_c": _C128,
}


def _module_source() -> str:
    parts = [
        "# tracegrad: helper functions of generated Numba kernels (written once, never edited)",
        "import math",
        "import numpy as np",
        "from numba import njit, objmode",
        "from numba.np.linalg import _LAPACK as _LapackRoutines, get_blas_kind",
        "from numba.np.linalg import _dummy_liveness_func",
        "from numba.np.numpy_support import from_dtype",
        "_LAPACK_ROUTINES = _LapackRoutines()",
        "",
        '_OPTS = dict(error_model="numpy", nogil=True)',
        '_REASSOC = {"reassoc", "contract"}  # sums that may be reordered (vectorized)',
        f"SUM_BLOCK = {SUM_BLOCK}",
        *vecmath.TEMPLATES.values(),
        *vecmath_trig.TEMPLATES.values(),
        *vecmath_special.TEMPLATES.values(),
        _CVIEW,
        _DIRECT,
        _BLAS_THREADS.replace("{SMALL}", str(blas_threads.SMALL_PRODUCT)),
        _NO_PRODUCTS,
        _LAPACK,
        _EXPM,
        _CYTHON_SPECIAL,
        _ZETA,
        incomplete.SOURCE,
    ]
    for kind, dts in _INSTANCES.items():
        if dts is None:
            parts.append(_HELPERS[kind])
        else:
            parts += [_HELPERS[kind].format(T=NB_TYPE[dt], S=SUFFIX[dt], N=dt.name,
                                            R=NB_TYPE[dtypes.real_dtype(dt)],
                                            RN=dtypes.real_dtype(dt).name,
                                            W="np.complex128" if dtypes.is_complex(dt)
                                            else "np.float64",
                                            WS="Z" if dtypes.is_complex(dt) else "D")
                      for dt in dts]
    parts += [_RAISES, _PIVOTS, _EIG]
    parts += [_TRSM.format(P=p, N=n) for p, n in dict(BLAS_PREFIX.values()).items()]
    parts += [_GEMM.format(P=p, N=n) for p, n in dict(BLAS_PREFIX.values()).items()]
    parts += [_CALLED.format(name=name, args=args) for name, args in _INLINED]
    return "\n".join(parts)


# Every vector-math helper `_<f>_v` has a twin `_<f>_vc` that is called, not inlined: the
# full-reduction re-run of a sin/cos/tan nest (taken only for arguments past 823549) calls
# these, so LLVM optimizes one copy of each function instead of one per use.
_CALLED = """
@njit(cache=True, **_OPTS)
def {name}c({args}):
    return {name}({args})
"""


# `(name, arguments)` of each forced-inline `_<f>_v` function, in the module's order
_INLINED = vecmath.INLINED + vecmath_trig.INLINED + vecmath_special.INLINED
SOURCE = _module_source()
CALLED = {name: name + "c" for name, _ in _INLINED}  # a helper -> its called twin
FAST = vecmath_trig.FAST  # a sin/cos/tan helper -> its twin with the fast range reduction
FULL = {fast: full for full, fast in FAST.items()}
MODULE = "tg_helpers_" + hashlib.sha256(SOURCE.encode()).hexdigest()[:16]


def helper(helpers: dict, kind: str, dtype) -> str:
    """The name of helper `kind` for `dtype`, recorded in `helpers` (names to import)."""
    s = SUFFIX[dtype]
    if kind.endswith(("_f", "_i", "_c")):
        name = "_" + kind.rsplit("_", 1)[0] + "_" + s
    else:
        name = f"_{kind}_{s}"
    helpers[name] = None
    return name


def vector_math(name: str, helpers: dict) -> str:
    """The branch-free float64 helper `_<name>_v` of vecmath.py, recorded in `helpers`."""
    helpers[f"_{name}_v"] = None
    return f"_{name}_v"
