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

from tracegrad.backends.numba import vecmath, vecmath_trig
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
        return np.linalg.det(a)
    with objmode(r="{N}"):
        r = _lapack("det", a)
    return r


@njit(cache=True, error_model="numpy")
def _slogdet_{S}(a):
    if np.isfinite(a).all():
        return np.linalg.slogdet(a)
    with objmode(sign="{N}", logdet="{N}"):
        sign, logdet = _lapack("slogdet", a)
    return sign, logdet


@njit(cache=True, error_model="numpy")
def _solve_{S}(a, b):
    if np.isfinite(a).all() and np.isfinite(b).all():
        return np.linalg.solve(a, b)
    with objmode(r="{N}[:, :]"):
        r = _lapack("solve", a, b)
    return r


# qr, eigh and svd compute in float64, as NumPy does for float32 input

@njit(cache=True, error_model="numpy")
def _qr_{S}(a, q, r, full):
    # complete: the factorization of a padded with zero columns to a square matrix (its
    # extra Householder reflections are identities)
    m, n = a.shape
    if full and m > n:
        p = np.zeros((m, m), dtype=np.float64)
        p[:, :n] = a
        qq, rr = np.linalg.qr(p)
        q[:, :] = qq
        r[:, :] = rr[:, :n]
    else:
        qq, rr = np.linalg.qr(a.astype(np.float64))
        q[:, :] = qq
        r[:, :] = rr


@njit(cache=True, error_model="numpy")
def _eigh_{S}(a, w, v, lower):
    # the triangle eigh reads, mirrored (Numba's eigh checks the whole matrix is finite)
    n = a.shape[0]
    s = np.empty((n, n), dtype=np.float64)
    for i in range(n):
        for j in range(i + 1):
            x = a[i, j] if lower else a[j, i]
            s[i, j] = x
            s[j, i] = x
    if not np.isfinite(s).all():
        w[:] = np.nan
        v[:, :] = np.nan
        return
    ww, vv = np.linalg.eigh(s)
    w[:] = ww
    v[:, :] = vv


@njit(cache=True, error_model="numpy")
def _svd_{S}(a, u, s, vh, full):
    uu, ss, vv = np.linalg.svd(a.astype(np.float64), full_matrices=full)
    u[:, :] = uu
    s[:] = ss
    vh[:, :] = vv
"""

# -- templates: {T} is the Numba type, {S} the dtype suffix --------------------------------------

_HELPERS = {
    "linalg": _LINALG,
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
    r0, r1, r2, r3 = b[0], b[1], b[2], b[3]
    r4, r5, r6, r7 = b[4], b[5], b[6], b[7]
    m = n - n % 8
    for k in range(1, m // 8):
        i = 8 * k
        r0 += b[i]
        r1 += b[i + 1]
        r2 += b[i + 2]
        r3 += b[i + 3]
        r4 += b[i + 4]
        r5 += b[i + 5]
        r6 += b[i + 6]
        r7 += b[i + 7]
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    for i in range(m, n):
        res += b[i]
    return res


@njit(cache=True, **_OPTS)
def _pairwise_{S}(a, lo, n):
    if n <= 128:
        return _pwleaf_{S}(a, lo, n)
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
    b = a[lo:lo + n]
    m = n - n % 8
    r0 = r1 = r2 = r3 = r4 = r5 = r6 = r7 = {T}({INIT})
    for k in range(m // 8):
        i = 8 * k
        r0 = _{K}_{S}(r0, b[i])
        r1 = _{K}_{S}(r1, b[i + 1])
        r2 = _{K}_{S}(r2, b[i + 2])
        r3 = _{K}_{S}(r3, b[i + 3])
        r4 = _{K}_{S}(r4, b[i + 4])
        r5 = _{K}_{S}(r5, b[i + 5])
        r6 = _{K}_{S}(r6, b[i + 6])
        r7 = _{K}_{S}(r7, b[i + 7])
    res = _{K}_{S}(_{K}_{S}(_{K}_{S}(r0, r1), _{K}_{S}(r2, r3)),
                   _{K}_{S}(_{K}_{S}(r4, r5), _{K}_{S}(r6, r7)))
    for i in range(m, n):
        res = _{K}_{S}(res, b[i])
    return res
"""
_HELPERS["rowmax"] = _ROW_EXTREME.replace("{K}", "max").replace("{INIT}", "-np.inf")
_HELPERS["rowmin"] = _ROW_EXTREME.replace("{K}", "min").replace("{INIT}", "np.inf")

# Batched BLAS products o[k] = a[k] @ b[k] (`.T`: BLAS's transpose flag). One compiled,
# disk-cached function per transpose pattern: Numba's np.dot is costly to type and lower,
# ~0.2-0.4 s per call site when written into each kernel.
_BDOT = """
@njit(cache=True, **_OPTS)
def _bdot_{TR}_{S}(a, b, o):
    for k in range(o.shape[0]):
        np.dot(a[k]{TA}, b[k]{TB}, o[k])
"""
for _tr in ("nn", "nt", "tn", "tt"):
    _HELPERS["bdot_" + _tr] = (_BDOT.replace("{TR}", _tr)
                               .replace("{TA}", ".T" if _tr[0] == "t" else "")
                               .replace("{TB}", ".T" if _tr[1] == "t" else ""))

# One matrix or vector product o = a @ b, through BLAS (a or b may be a transposed view).
_HELPERS["dot"] = """
@njit(cache=True, **_OPTS)
def _dot_{S}(a, b, o):
    np.dot(a, b, o)
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
"""

_TRISOLVE = """
@njit(cache=True, **_OPTS)
def _trisolve(a, b, out, lower, trans, unit, tag):
    # solves M @ out = b, M = a.T if trans else a (lower-triangular when lower != trans)
    n = a.shape[0]
    low = lower != trans
    for c in range(b.shape[1]):
        for step in range(n):
            i = step if low else n - 1 - step
            s = b[i, c]
            lo, hi = (0, i) if low else (i + 1, n)
            for j in range(lo, hi):
                m = a[j, i] if trans else a[i, j]
                s -= m * out[j, c]
            if not unit:
                if a[i, i] == 0:
                    raise ValueError(tag, i)
                s = s / a[i, i]
            out[i, c] = s
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

# template -> the dtypes it is instantiated for (None: once, no dtype)
_FLOATS = (dtypes.float64, dtypes.float32, dtypes.float16)
_INTS = tuple(dtypes.SIGNED + dtypes.UNSIGNED)
_INSTANCES = {
    "max_f": _FLOATS, "min_f": _FLOATS, "sign_f": _FLOATS, "logistic": _FLOATS,
    "floordiv_f": _FLOATS, "mod_f": _FLOATS, "pairwise": _FLOATS, "bsum": _FLOATS,
    "rowmax": _FLOATS,
    "rowmin": _FLOATS,
    "floordiv_i": _INTS, "mod_i": _INTS, "f16": None,
    "gcd_i": _INTS, "ipow": (dtypes.int64,),
    "dot": _FLOATS, "mv": _FLOATS, "vm": _FLOATS,
    "bdot_nn": _FLOATS, "bdot_nt": _FLOATS, "bdot_tn": _FLOATS, "bdot_tt": _FLOATS,
    "linalg": _FLOATS, "threefry": None,
}


def _module_source() -> str:
    parts = [
        "# tracegrad: helper functions of generated Numba kernels (written once, never edited)",
        "import math",
        "import numpy as np",
        "from numba import njit, objmode",
        "",
        '_OPTS = dict(error_model="numpy", nogil=True)',
        '_REASSOC = {"reassoc", "contract"}  # sums that may be reordered (vectorized)',
        f"SUM_BLOCK = {SUM_BLOCK}",
        *vecmath.TEMPLATES.values(),
        *vecmath_trig.TEMPLATES.values(),
        _CVIEW,
        _LAPACK,
    ]
    for kind, dts in _INSTANCES.items():
        if dts is None:
            parts.append(_HELPERS[kind])
        else:
            parts += [_HELPERS[kind].format(T=NB_TYPE[dt], S=SUFFIX[dt], N=dt.name)
                      for dt in dts]
    parts.append(_TRISOLVE)
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
_INLINED = vecmath.INLINED + vecmath_trig.INLINED
SOURCE = _module_source()
CALLED = {name: name + "c" for name, _ in _INLINED}  # a helper -> its called twin
FAST = vecmath_trig.FAST  # a sin/cos/tan helper -> its twin with the fast range reduction
FULL = {fast: full for full, fast in FAST.items()}
MODULE = "tg_helpers_" + hashlib.sha256(SOURCE.encode()).hexdigest()[:16]


def helper(helpers: dict, kind: str, dtype) -> str:
    """The name of helper `kind` for `dtype`, recorded in `helpers` (names to import)."""
    s = SUFFIX[dtype]
    if kind.endswith(("_f", "_i")):
        name = "_" + kind.rsplit("_", 1)[0] + "_" + s
    else:
        name = f"_{kind}_{s}"
    helpers[name] = None
    return name


def vector_math(name: str, helpers: dict) -> str:
    """The branch-free float64 helper `_<name>_v` of vecmath.py, recorded in `helpers`."""
    helpers[f"_{name}_v"] = None
    return f"_{name}_v"
