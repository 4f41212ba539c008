"""Random numbers from functional keys, in JAX's style: `key`, `split`, `fold_in` and the
samplers, every one a composition over the Threefry-2x32 primitive (`threefry2x32`).

A key is a uint32 array of shape (2,) (JAX's raw key layout), an ordinary argument of a
traced function: a new key is a new value, not a new trace. Element `i` (row-major) of a
sample of shape `shape` is a function of the key and the counter `i` alone, so one key
gives the same bits eagerly or traced, on every backend, in every process, and `vmap` over
keys gives one sample per key. The bits are JAX's (`jax_threefry_partitionable`, JAX's
default since 0.5): `key`, `split`, `fold_in`, `bits` and `uniform` give JAX's values.
docs/random.md says how each sampler is computed.
"""

from __future__ import annotations

import functools
import math

import numpy as np

import tracegrad.numpy as tnp
from tracegrad import ops
from tracegrad.core import dtypes
from tracegrad.core.ir import EagerTensor
from tracegrad.core.shapes import normalize_axis
from tracegrad.errors import DTypeError, InvalidArgumentError, ShapeError
from tracegrad.numpy import linalg
from tracegrad.numpy._core import as_eager, dtype_arg, dtype_of, read, shape_of
from tracegrad.transforms.control_flow import while_loop
from tracegrad.transforms.custom_rules import custom_jvp

__all__ = [
    "PRNGKey", "bernoulli", "beta", "bits", "categorical", "choice", "dirichlet",
    "exponential", "fold_in", "gamma", "key", "multivariate_normal", "normal", "permutation",
    "randint", "split", "truncated_normal", "uniform",
]

_MASK32 = 0xFFFFFFFF

# -- keys --------------------------------------------------------------------------------------


def key(seed) -> np.ndarray:
    """A key from an integer seed: uint32 `[seed >> 32, seed & 0xFFFFFFFF]` of a Python int as
    a 64-bit two's complement integer, of an integer scalar in its own width (JAX's
    `PRNGKey`).

    >>> tracegrad.random.key(42)  # array([ 0, 42], dtype=uint32)
    """
    seed = read(seed)
    if type(seed) is int:
        if not -(2**63) <= seed < 2**64:
            raise InvalidArgumentError(f"key: seed {seed} does not fit 64 bits")
        return np.array([(seed >> 32) & _MASK32, seed & _MASK32], np.uint32)
    dt = dtype_of(seed)[0]
    if shape_of(seed) != () or not (dtypes.is_int(dt) or dt == dtypes.bool_):
        raise DTypeError(f"key: the seed must be an integer scalar, not {dt.name}"
                         f"{list(shape_of(seed))}")
    if dtypes.bits(dt) < 64:  # a narrower seed's high word is 0, as JAX's
        seed = tnp.astype(seed, np.dtype(f"uint{dtypes.bits(dt)}"))
    seed = tnp.astype(seed, np.uint64)
    return tnp.stack([tnp.astype(tnp.right_shift(seed, np.uint64(32)), np.uint32),
                      tnp.astype(seed, np.uint32)])


PRNGKey = key


def _key(k, op: str):
    """The key argument `k` read and checked: a uint32 array of shape (2,)."""
    k = read(k)
    dt = dtype_of(k)[0]
    if dt != dtypes.uint32 or tuple(shape_of(k)) != (2,):
        raise InvalidArgumentError(
            f"{op}: a key is a uint32 array of shape (2,) (from tracegrad.random.key), not "
            f"{dt.name}{list(shape_of(k))}; vmap a function over an array of keys")
    return k


def _like_key(x, k):
    """An array argument `x` as an eager tensor when the key is one (so the result is one)."""
    return as_eager(x) if isinstance(k, EagerTensor) else x


def _shape(shape, op: str) -> tuple:
    if shape is None:
        return ()
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    if any(not isinstance(d, (int, np.integer)) or d < 0 for d in shape):
        raise ShapeError(f"{op}: shape must be a tuple of non-negative ints, not {shape}")
    return tuple(int(d) for d in shape)


def _blocks(k, shape: tuple):
    """The Threefry block (a uint64) of key `k` and each counter `i < prod(shape)`, shaped
    `shape`: element i's counter words are (i >> 32, i & 0xFFFFFFFF)."""
    n = math.prod(shape)
    if n >= 2**32:
        raise ShapeError(f"tracegrad.random: a sample of {n} elements is too large (at most "
                         "2**32 - 1 per key; split the key)")
    k0 = tnp.broadcast_to(k[0], shape)
    k1 = tnp.broadcast_to(k[1], shape)
    lo = np.uint32(0)
    stride = 1
    for d in reversed(range(len(shape))):
        i = ops.iota(dtype=dtypes.uint32, shape=shape, dimension=d)
        lo = tnp.add(lo, i if stride == 1 else tnp.multiply(i, np.uint32(stride)))
        stride *= shape[d]
    lo = tnp.broadcast_to(lo, shape)
    return ops.threefry2x32(k0, k1, tnp.broadcast_to(np.uint32(0), shape), lo)


def _words(blocks):
    """The two uint32 words of uint64 blocks (first, second)."""
    return (tnp.astype(tnp.right_shift(blocks, np.uint64(32)), np.uint32),
            tnp.astype(blocks, np.uint32))


def split(key, num: int = 2):
    """`num` new keys from `key`, independent of it and of each other: uint32 `(num, 2)`.

    >>> k1, k2 = tracegrad.random.split(tracegrad.random.key(0))
    """
    k = _key(key, "split")
    hi, lo = _words(_blocks(k, (_shape(num, "split")[0],)))
    return tnp.stack([hi, lo], axis=1)


def fold_in(key, data):
    """A new key from `key` and an integer `data` (a step number, a worker's rank).

    >>> k = tracegrad.random.fold_in(tracegrad.random.key(0), 7)
    """
    k = _key(key, "fold_in")
    data = read(data)
    if type(data) is int:
        data = np.uint32(data & _MASK32)
    elif not dtypes.is_int(dtype_of(data)[0]) or shape_of(data) != ():
        raise DTypeError(f"fold_in: data must be an integer scalar, not "
                         f"{dtype_of(data)[0].name}{list(shape_of(data))}")
    else:
        data = tnp.astype(data, np.uint32)
    b = ops.threefry2x32(k[0], k[1], np.uint32(0), tnp.asarray(data))
    return tnp.stack(_words(b))


# -- bits and uniform ----------------------------------------------------------------------------


def bits(key, shape=(), dtype=np.uint32):
    """Uniformly distributed random bits: unsigned integers of `dtype` (uint8 ... uint64).

    >>> tracegrad.random.bits(k, (3,))  # three uint32
    """
    k = _key(key, "bits")
    dt = dtype_arg(dtype, "bits")
    if not dtypes.is_unsigned(dt):
        raise DTypeError(f"bits: dtype must be an unsigned integer dtype, not {dt.name}")
    b = _blocks(k, _shape(shape, "bits"))
    if dt == dtypes.uint64:
        return b
    hi, lo = _words(b)
    return tnp.astype(tnp.bitwise_xor(hi, lo), dt)


def _float_dtype(dtype, op: str) -> np.dtype:
    dt = dtype_arg(dtype, op) if dtype is not None else dtypes.float64
    if not dtypes.is_float(dt):
        raise DTypeError(f"{op}: dtype must be a float dtype, not {dt.name}")
    return dt


def _unit(k, shape, dt):
    """Uniform floats of `dt` in [0, 1), JAX's: the top mantissa-width bits (52 of the 64
    for float64, 23 of the 32 for float32, 10 of the 16 for float16) times 2**-width."""
    return _flat(lambda n: _flat_unit(k, n, dt), shape)


def _flat_unit(k, shape, dt):
    b = _blocks(k, shape)
    if dt == dtypes.float64:
        return tnp.multiply(tnp.astype(tnp.right_shift(b, np.uint64(12)), dt), 2.0**-52)
    hi, lo = _words(b)
    word = tnp.bitwise_xor(hi, lo)
    if dt == dtypes.float16:  # JAX's 16 bits: the word's low half, 10 mantissa bits
        m = tnp.right_shift(tnp.astype(word, np.uint16), np.uint16(6))
        return tnp.multiply(tnp.astype(m, dt), np.float16(2.0**-10))
    m = tnp.right_shift(word, np.uint32(9))
    return tnp.multiply(tnp.astype(m, dt), np.float32(2.0**-23))


def _flat(draw, shape: tuple):
    """`draw((n,))` of the n elements of `shape`, reshaped to `shape` (the same values: element
    i's counter is i either way). Drawn flat, a compiled sample is one flat loop of its own
    (the counter is the loop index), which vectorizes; drawn in its shape it would join the
    loop nest of its consumers, whose innermost dim may be too narrow to vectorize."""
    out = draw((math.prod(shape),))
    return out if len(shape) == 1 else tnp.reshape(out, shape)


def _open_unit(k, shape):
    """Uniform float64 in the open interval (0, 1), symmetric: (m + 1/2) 2**-52 for the
    top 52 bits m of each block, so `u` and `1 - u` are both exact and nonzero."""
    def draw(n):
        m = tnp.astype(tnp.right_shift(_blocks(k, n), np.uint64(12)), np.float64)
        return tnp.multiply(tnp.add(m, 0.5), 2.0**-52)
    return _flat(draw, shape)


def uniform(key, shape=(), dtype=None, minval=0.0, maxval=1.0):
    """Uniform floats in [minval, maxval) (float64 by default), JAX's values for its dtype.

    >>> tracegrad.random.uniform(k, (2, 3), minval=-1.0, maxval=1.0)
    """
    k = _key(key, "uniform")
    dt = _float_dtype(dtype, "uniform")
    shape = _shape(shape, "uniform")
    lo, hi = tnp.asarray(minval, dtype=dt), tnp.asarray(maxval, dtype=dt)
    u = tnp.add(tnp.multiply(_unit(k, shape, dt), tnp.subtract(hi, lo)), lo)
    return tnp.maximum(lo, u)


# -- normal: the inverse of the normal CDF (Wichura's AS 241, PPND16) -----------------------------

_AS241 = {
    "a": (3.3871328727963666080, 1.3314166789178437745e2, 1.9715909503065514427e3,
          1.3731693765509461125e4, 4.5921953931549871457e4, 6.7265770927008700853e4,
          3.3430575583588128105e4, 2.5090809287301226727e3),
    "b": (1.0, 4.2313330701600911252e1, 6.8718700749205790830e2, 5.3941960214247511077e3,
          2.1213794301586595867e4, 3.9307895800092710610e4, 2.8729085735721942674e4,
          5.2264952788528545610e3),
    "c": (1.42343711074968357734, 4.63033784615654529590, 5.76949722146069140550,
          3.64784832476320460504, 1.27045825245236838258, 2.41780725177450611770e-1,
          2.27238449892691845833e-2, 7.74545014278341407640e-4),
    "d": (1.0, 2.05319162663775882187, 1.67638483018380384940, 6.89767334985100004550e-1,
          1.48103976427480074590e-1, 1.51986665636164571966e-2, 5.47593808499534494600e-4,
          1.05075007164441684324e-9),
    "e": (6.65790464350110377720, 5.46378491116411436990, 1.78482653991729133580,
          2.96560571828504891230e-1, 2.65321895265761230930e-2, 1.24266094738807843860e-3,
          2.71155556874348757815e-5, 2.01033439929228813265e-7),
    "f": (1.0, 5.99832206555887937690e-1, 1.36929880922735805310e-1,
          1.48753612908506148525e-2, 7.86869131145613259100e-4, 1.84631831751005468180e-5,
          1.42151175831644588870e-7, 2.04426310338993978564e-15),
}


def _poly(coefs, x):
    """sum(coefs[i] * x**i), by Horner's rule (coefficients may be arrays)."""
    out = coefs[-1]
    for c in reversed(coefs[:-1]):
        out = tnp.add(tnp.multiply(out, x), c)
    return out


def _ndtri(u):
    """The standard normal quantile of float64 `u` in (0, 1), to about 1e-16 (AS 241).
    Branch-free: each element picks its region's coefficients, then evaluates one rational
    function (one division, and the three regions in one fused loop)."""
    q = tnp.subtract(u, 0.5)
    central = tnp.abs(q) <= 0.425
    r = tnp.sqrt(tnp.negative(tnp.log(tnp.minimum(u, tnp.subtract(1.0, u)))))
    near = r <= 5.0
    x = tnp.where(central, tnp.subtract(0.180625, tnp.multiply(q, q)),
                  tnp.subtract(r, tnp.where(near, 1.6, 5.0)))

    def pick(a, c, e):
        return [ai if ai == ci == ei else tnp.where(central, ai, tnp.where(near, ci, ei))
                for ai, ci, ei in zip(_AS241[a], _AS241[c], _AS241[e], strict=True)]

    z = tnp.divide(_poly(pick("a", "c", "e"), x), _poly(pick("b", "d", "f"), x))
    return tnp.where(central, tnp.multiply(q, z), tnp.where(q < 0, tnp.negative(z), z))


def normal(key, shape=(), dtype=None):
    """Standard normal floats (float64 by default): the normal quantile of a uniform in
    (0, 1) made of 52 bits, so |x| < 8.3.

    >>> mu + sigma * tracegrad.random.normal(k, (100,))  # differentiable in mu and sigma
    """
    k = _key(key, "normal")
    dt = _float_dtype(dtype, "normal")
    return _flat(lambda n: tnp.astype(_ndtri(_open_unit(k, n)), dt), _shape(shape, "normal"))


# -- samplers over uniform and normal ------------------------------------------------------------


def _sample_shape(shape, *params, op: str) -> tuple:
    """`shape`, or the broadcast shape of the parameters when None; the parameters must
    broadcast to `shape`."""
    return _broadcast_into(shape, np.broadcast_shapes(*(shape_of(p) for p in params)), op)


def _broadcast_into(shape, pshape: tuple, op: str) -> tuple:
    """`shape` (`pshape` when None), to which `pshape` must broadcast."""
    if shape is None:
        return tuple(pshape)
    shape = _shape(shape, op)
    try:
        np.broadcast_shapes(pshape, shape)
    except ValueError:
        raise ShapeError(f"{op}: parameters of shape {pshape} do not broadcast to shape "
                         f"{shape}") from None
    if np.broadcast_shapes(pshape, shape) != shape:
        raise ShapeError(f"{op}: parameters of shape {pshape} do not broadcast to shape "
                         f"{shape}")
    return shape


def _param(x, dt):
    """A float parameter as an array of dtype `dt`."""
    return tnp.asarray(read(x), dtype=dt)


def _param_dtype(dtype, *params, op: str):
    """`dtype`, or the float dtype the parameters promote to (float64 for Python numbers)."""
    if dtype is not None:
        return _float_dtype(dtype, op)
    dts = [dtype_of(read(p))[0] for p in params if not isinstance(p, (int, float))]
    dt = np.result_type(*dts, np.float16) if dts else dtypes.float64
    return dt if dtypes.is_float(dt) else dtypes.float64


def bernoulli(key, p=0.5, shape=None):
    """Booleans that are True with probability `p` (shape: `p`'s by default).

    >>> tracegrad.random.bernoulli(k, 0.3, (1000,))
    """
    k = _key(key, "bernoulli")
    p = read(p)
    shape = _sample_shape(shape, p, op="bernoulli")
    dt = _param_dtype(None, p, op="bernoulli")
    return tnp.less(_unit(k, shape, dt), _param(p, dt))


def exponential(key, shape=(), dtype=None):
    """Standard exponential floats (rate 1): `-log1p(-u)` of a uniform `u` in [0, 1).

    >>> tracegrad.random.exponential(k, (3,)) / rate
    """
    k = _key(key, "exponential")
    dt = _float_dtype(dtype, "exponential")
    return tnp.negative(tnp.log1p(tnp.negative(_unit(k, _shape(shape, "exponential"), dt))))


def _gumbel(k, shape):
    """Standard Gumbel float64 noise: `-log(-log(u))` of a uniform `u` in (0, 1)."""
    return tnp.negative(tnp.log(tnp.negative(tnp.log(_open_unit(k, shape)))))


def categorical(key, logits, axis: int = -1, shape=None):
    """Indices drawn along `axis` with probabilities `softmax(logits, axis)` (the Gumbel-max
    trick); the result has `shape` (default: `logits`' shape without `axis`), to which
    the other dims of `logits` broadcast.

    >>> tracegrad.random.categorical(k, tnp.log(np.array([0.2, 0.8])), shape=(100,))
    """
    k = _key(key, "categorical")
    logits = read(logits)
    nd = len(shape_of(logits))
    if nd == 0:
        raise ShapeError("categorical: logits must have at least one dim")
    axis = normalize_axis(axis, nd, "categorical")
    moved = tnp.moveaxis(logits, axis, -1)
    batch = shape_of(moved)[:-1]
    shape = _broadcast_into(shape, tuple(batch), "categorical")
    noise = _gumbel(k, shape + (shape_of(moved)[-1],))
    return tnp.argmax(tnp.add(moved, noise), axis=-1)


def randint(key, shape, minval, maxval, dtype=np.int64):
    """Uniform integers in [minval, maxval) of `dtype` (`minval` where `maxval <= minval`;
    bounds clipped to the dtype's range, so `maxval` past its maximum includes it): a
    64-bit block modulo the range's size (bias below size / 2**64).

    >>> tracegrad.random.randint(k, (5,), 0, 10)
    """
    k = _key(key, "randint")
    dt = dtype_arg(dtype, "randint")
    if not dtypes.is_int(dt):
        raise DTypeError(f"randint: dtype must be an integer dtype, not {dt.name}")
    shape = _shape(shape, "randint")
    info = np.iinfo(dt)
    top = min(info.max, 2**63 - 2)
    lo = tnp.clip(tnp.asarray(read(minval), dtype=np.int64), info.min, top)
    hi = tnp.clip(tnp.asarray(read(maxval), dtype=np.int64), info.min, top + 1)
    lo, hi = tnp.broadcast_to(lo, shape), tnp.broadcast_to(hi, shape)
    lo64, hi64 = tnp.astype(lo, np.uint64), tnp.astype(hi, np.uint64)
    span = tnp.where(tnp.greater(hi, lo), tnp.subtract(hi64, lo64), np.uint64(1))
    r = tnp.add(lo64, tnp.remainder(_blocks(k, shape), span))
    return tnp.astype(r, dt)


def permutation(key, x, axis: int = 0, independent: bool = False):
    """`x` shuffled along `axis` (an int `n`: a shuffled `arange(n)`); `independent`
    shuffles each slice along `axis` on its own. Sorts by 64-bit random keys.

    >>> tracegrad.random.permutation(k, 10)
    """
    k = _key(key, "permutation")
    x = read(x)
    if isinstance(x, (int, np.integer)) or (shape_of(x) == () and dtypes.is_int(dtype_of(x)[0])):
        n = int(x)
        return tnp.argsort(_blocks(k, (n,)), stable=True)
    nd = len(shape_of(x))
    if nd == 0:
        raise ShapeError("permutation: x must be an int or an array of at least one dim")
    axis = normalize_axis(axis, nd, "permutation")
    x = _like_key(x, k)
    if independent:
        order = tnp.argsort(_blocks(k, tuple(shape_of(x))), axis=axis, stable=True)
        return tnp.take_along_axis(x, order, axis=axis)
    order = tnp.argsort(_blocks(k, (shape_of(x)[axis],)), stable=True)
    return tnp.take(x, order, axis=axis)


def choice(key, a, shape=(), replace: bool = True, p=None, axis: int = 0):
    """Elements of `a` along `axis` (an int `a`: of `arange(a)`) drawn with probabilities
    `p` (uniform by default), with or without replacement; `shape` replaces `axis`.

    >>> tracegrad.random.choice(k, 5, (3,), replace=False)
    """
    k = _key(key, "choice")
    shape = _shape(shape, "choice")
    a = read(a)
    if isinstance(a, (int, np.integer)):
        n, values = int(a), None
    else:
        if len(shape_of(a)) == 0:
            raise ShapeError("choice: a must be an int or an array of at least one dim")
        axis = normalize_axis(axis, len(shape_of(a)), "choice")
        n, values = shape_of(a)[axis], a
    m = math.prod(shape)
    if p is not None:
        p = read(p)
        if tuple(shape_of(p)) != (n,):
            raise ShapeError(f"choice: p must have shape ({n},), not {shape_of(p)}")
    if replace:
        if p is None:
            idx = randint(k, shape, 0, n)
        else:
            cdf = tnp.cumsum(p)
            u = tnp.multiply(_unit(k, shape, dtypes.float64), cdf[-1])
            idx = tnp.minimum(tnp.searchsorted(cdf, u, side="right"), n - 1)
    else:
        if m > n:
            raise InvalidArgumentError(f"choice: cannot take {m} samples from {n} elements "
                                       "without replacement")
        if p is None:
            order = permutation(k, n)
        else:
            order = tnp.argsort(tnp.negative(tnp.add(_gumbel(k, (n,)), tnp.log(p))),
                                stable=True)
        idx = tnp.reshape(order[:m], shape)
    return idx if values is None else tnp.take(_like_key(values, k), idx, axis=axis)


def truncated_normal(key, lower, upper, shape=None, dtype=None):
    """Standard normal floats truncated to [lower, upper]: the normal quantile of a uniform
    between the bounds' CDF values (computed in the lower tail, reflected above 0).

    >>> tracegrad.random.truncated_normal(k, -1.0, 2.0, (100,))
    """
    k = _key(key, "truncated_normal")
    lower, upper = read(lower), read(upper)
    dt = _param_dtype(dtype, lower, upper, op="truncated_normal")
    shape = _sample_shape(shape, lower, upper, op="truncated_normal")
    lo, hi = (tnp.broadcast_to(_param(v, dtypes.float64), shape) for v in (lower, upper))
    flip = tnp.greater(lo, 0.0)
    a, b = tnp.where(flip, tnp.negative(hi), lo), tnp.where(flip, tnp.negative(lo), hi)
    pa, pb = _normal_cdf(a), _normal_cdf(b)
    q = tnp.add(pa, tnp.multiply(_open_unit(k, shape), tnp.subtract(pb, pa)))
    z = _ndtri(tnp.clip(q, 2.0**-1074, 1.0 - 2.0**-53))
    z = tnp.clip(tnp.where(flip, tnp.negative(z), z), lo, hi)
    return tnp.astype(z, dt)


def _normal_cdf(x):
    return tnp.multiply(0.5, tnp.add(1.0, ops.erf(tnp.multiply(x, 1 / math.sqrt(2.0)))))


def multivariate_normal(key, mean, cov, shape=None, dtype=None, method: str = "cholesky"):
    """Normal vectors of mean `mean` (..., n) and covariance `cov` (..., n, n): `mean + L z`
    for a factor `L L^T = cov` (`method`: "cholesky", "eigh" or "svd") and standard normal
    `z`; `shape` (default: the broadcast batch shape) gets the trailing dim n.

    >>> tracegrad.random.multivariate_normal(k, np.zeros(2), np.eye(2), (100,))
    """
    k = _key(key, "multivariate_normal")
    mean, cov = read(mean), read(cov)
    ms, cs = tuple(shape_of(mean)), tuple(shape_of(cov))
    if len(ms) < 1 or len(cs) < 2 or cs[-2:] != (ms[-1], ms[-1]):
        raise ShapeError(f"multivariate_normal: mean (..., n) and cov (..., n, n) expected, "
                         f"got {ms} and {cs}")
    dt = _param_dtype(dtype, mean, cov, op="multivariate_normal")
    batch = np.broadcast_shapes(ms[:-1], cs[:-2])
    shape = _broadcast_into(shape, tuple(batch), "multivariate_normal")
    if method == "cholesky":
        factor = linalg.cholesky(cov)
    elif method == "eigh":
        w, v = linalg.eigh(cov)
        factor = tnp.multiply(v, tnp.expand_dims(tnp.sqrt(tnp.maximum(w, 0.0)), -2))
    elif method == "svd":
        u, s, _ = linalg.svd(cov)
        factor = tnp.multiply(u, tnp.expand_dims(tnp.sqrt(s), -2))
    else:
        raise InvalidArgumentError(f"multivariate_normal: method must be 'cholesky', 'eigh' "
                                   f"or 'svd', not {method!r}")
    z = normal(k, shape + (ms[-1],))
    x = tnp.add(mean, tnp.squeeze(tnp.matmul(factor, tnp.expand_dims(z, -1)), -1))
    return tnp.astype(x, dt)


# -- gamma, beta, dirichlet: Marsaglia and Tsang's method, implicit reparameterization -------------

_ATTEMPTS = 8  # Marsaglia-Tsang candidates per sample; each is accepted w.p. > 0.95


@functools.cache
def _laguerre():
    """Gauss-Laguerre nodes and weights for the upper-tail integral of `_gamma_dlogx_da`."""
    return np.polynomial.laguerre.laggauss(32)


def _digamma(a):
    """The digamma function of float64 `a > 0`: the recurrence up to a + 6, then the
    asymptotic series (absolute error below 1e-13)."""
    shift = 0.0
    for j in range(6):
        shift = tnp.add(shift, tnp.divide(1.0, tnp.add(a, float(j))))
    z = tnp.add(a, 6.0)
    iz2 = tnp.divide(1.0, tnp.multiply(z, z))
    tail = _poly((1 / 12, -1 / 120, 1 / 252, -1 / 240, 1 / 132, -691 / 32760, 1 / 12), iz2)
    psi = tnp.subtract(tnp.subtract(tnp.log(z), tnp.divide(0.5, z)), tnp.multiply(iz2, tail))
    return tnp.subtract(psi, shift)


def _gamma_dlogx_da(a, log_x):
    """d log x / d a of a Gamma(a, 1) sample `x` (given by its log) at a fixed value of its
    CDF P(a, x): the implicit reparameterization gradient -(dP/da) / (x p(x; a)). Below
    a + 2 sqrt(a) + 3 the series of dP/da over x p (summed until its terms are negligible;
    its limit as x underflows to 0 is its first term), above it dQ/da / (x p) as the
    integral of (log(x + s) - digamma(a)) (1 + s/x)^(a-1) e^-s over s > 0, over x
    (Gauss-Laguerre, scaled to the integrand's decay)."""
    psi = _digamma(a)
    x = tnp.exp(log_x)
    split_at = tnp.add(tnp.multiply(2.0, tnp.sqrt(a)), tnp.add(a, 3.0))
    upper = tnp.greater_equal(x, split_at)

    # the series: sum_n w_n (log x - digamma(a + n + 1)), w_n = x^n / (a (a+1) ... (a+n))
    xl, lxl = tnp.where(upper, a, x), tnp.where(upper, tnp.log(a), log_x)
    w = tnp.divide(1.0, a)
    s = tnp.divide(1.0, a)
    term = tnp.multiply(w, tnp.subtract(tnp.subtract(lxl, psi), s))

    def more(n, w, s, term, total):
        big = tnp.greater(tnp.abs(term), tnp.multiply(1e-17, tnp.abs(total)))
        return tnp.logical_and(tnp.any(big), tnp.less(n, 100000.0))

    def step(n, w, s, term, total):
        n = tnp.add(n, 1.0)
        an = tnp.add(a, n)
        w = tnp.multiply(w, tnp.divide(xl, an))
        s = tnp.add(s, tnp.divide(1.0, an))
        term = tnp.multiply(w, tnp.subtract(tnp.subtract(lxl, psi), s))
        return n, w, s, term, tnp.add(total, term)

    series = while_loop(more, step, (np.float64(0.0), w, s, term, term))[4]

    xu = tnp.expand_dims(tnp.where(upper, x, split_at), -1)
    a1 = tnp.expand_dims(tnp.subtract(a, 1.0), -1)
    lam = tnp.subtract(1.0, tnp.divide(a1, xu))
    nodes, weights = _laguerre()
    t = tnp.divide(nodes, lam)
    r = tnp.divide(t, xu)
    g = tnp.multiply(tnp.subtract(tnp.log(tnp.add(xu, t)), tnp.expand_dims(psi, -1)),
                     tnp.exp(tnp.multiply(a1, tnp.subtract(tnp.log1p(r), r))))
    integral = tnp.sum(tnp.divide(tnp.multiply(weights, g), tnp.multiply(lam, xu)), axis=-1)
    return tnp.where(upper, integral, tnp.negative(series))


def _log_gamma_draw(k, a):
    """The log of Gamma(a, 1) samples (float64 `a` > 0, the sample's shape): Marsaglia and
    Tsang's method on `_ATTEMPTS` candidates (the first accepted one), and for a < 1 the
    sample for a + 1 times u^(1/a), in log space."""
    kn, ku, kb = split(k, 3)
    shape = tuple(shape_of(a))
    boost = tnp.less(a, 1.0)
    d = tnp.subtract(tnp.where(boost, tnp.add(a, 1.0), a), 1 / 3)
    c = tnp.divide(1.0, tnp.sqrt(tnp.multiply(9.0, d)))
    de, ce = tnp.expand_dims(d, -1), tnp.expand_dims(c, -1)
    x = normal(kn, shape + (_ATTEMPTS,))
    u = _open_unit(ku, shape + (_ATTEMPTS,))
    v = tnp.power(tnp.add(1.0, tnp.multiply(ce, x)), 3)
    positive = tnp.greater(v, 0.0)
    v = tnp.where(positive, v, 1.0)
    bound = tnp.add(tnp.multiply(0.5, tnp.multiply(x, x)),
                    tnp.multiply(de, tnp.add(tnp.subtract(1.0, v), tnp.log(v))))
    accept = tnp.logical_and(positive, tnp.less(tnp.log(u), bound))
    first = tnp.expand_dims(tnp.argmax(accept, axis=-1), -1)
    v = tnp.squeeze(tnp.take_along_axis(v, first, axis=-1), -1)
    log_g = tnp.add(tnp.log(d), tnp.log(v))
    log_boost = tnp.divide(tnp.log(_open_unit(kb, shape)), a)
    return tnp.where(boost, tnp.add(log_g, log_boost), log_g)


def _log_gamma_rule(k, primals, tangents):
    (a,), (ta,) = primals, tangents
    log_x = _log_gamma(k, a)
    return log_x, tnp.multiply(ta, _gamma_dlogx_da(a, log_x))


_log_gamma = custom_jvp(_log_gamma_draw, nondiff_argnums=(0,))
_log_gamma.defjvp(_log_gamma_rule)


def _shape_params(key, params, shape, dtype, op):
    """(key, float64 parameters broadcast to the sample's shape, shape, result dtype)."""
    k = _key(key, op)
    params = [read(p) for p in params]
    dt = _param_dtype(dtype, *params, op=op)
    shape = _sample_shape(shape, *params, op=op)
    return k, [tnp.broadcast_to(_param(p, dtypes.float64), shape) for p in params], shape, dt


def gamma(key, a, shape=None, dtype=None):
    """Gamma(a, 1) floats (shape: `a`'s by default); differentiable in `a` by implicit
    reparameterization, as JAX's.

    >>> tracegrad.random.gamma(k, 2.5, (100,)) / rate
    """
    k, (a,), _, dt = _shape_params(key, (a,), shape, dtype, "gamma")
    return tnp.astype(tnp.exp(_log_gamma(k, a)), dt)


def beta(key, a, b, shape=None, dtype=None):
    """Beta(a, b) floats, `X / (X + Y)` of Gamma(a) and Gamma(b) samples (in log space);
    differentiable in `a` and `b`.

    >>> tracegrad.random.beta(k, 2.0, 3.0, (100,))
    """
    k, (a, b), _, dt = _shape_params(key, (a, b), shape, dtype, "beta")
    ka, kb = split(k)
    la, lb = _log_gamma(ka, a), _log_gamma(kb, b)
    return tnp.astype(tnp.exp(tnp.subtract(la, tnp.logaddexp(la, lb))), dt)


def dirichlet(key, alpha, shape=None, dtype=None):
    """Dirichlet(alpha) vectors (alpha: (..., n)), normalized Gamma(alpha_i) samples (in log
    space); `shape` (default: alpha's batch shape) gets the trailing dim n. Differentiable
    in `alpha`.

    >>> tracegrad.random.dirichlet(k, np.array([1.0, 2.0, 3.0]), (100,))
    """
    k = _key(key, "dirichlet")
    alpha = read(alpha)
    ashape = tuple(shape_of(alpha))
    if len(ashape) < 1:
        raise ShapeError("dirichlet: alpha must have at least one dim")
    dt = _param_dtype(dtype, alpha, op="dirichlet")
    shape = _broadcast_into(shape, ashape[:-1], "dirichlet") + ashape[-1:]
    logs = _log_gamma(k, tnp.broadcast_to(_param(alpha, dtypes.float64), shape))
    norm = tnp.max(logs, axis=-1, keepdims=True)
    e = tnp.exp(tnp.subtract(logs, norm))
    return tnp.astype(tnp.divide(e, tnp.sum(e, axis=-1, keepdims=True)), dt)
