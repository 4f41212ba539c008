"""The counter-based random bit generator of `tracegrad.random`: Threefry-2x32 with 20 rounds
(Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011) as one elementwise
primitive, so that each element's bits are a pure function of its key and counter words.
"""

from __future__ import annotations

import numpy as np

from tracegrad.core import dtypes
from tracegrad.core.op import Primitive
from tracegrad.core.types import TensorType
from tracegrad.errors import DTypeError
from tracegrad.ops._batching import batch_elementwise
from tracegrad.ops._families import elementwise, nondifferentiable, same_shape

# The rotation distances of Threefry-2x32, round r using ROTATIONS[r % 8], and the parity
# constant of its third key word (Random123's SKEIN_KS_PARITY32).
ROTATIONS = (13, 15, 26, 6, 17, 29, 16, 24)
PARITY = 0x1BD11BDA
ROUNDS = 20

threefry2x32_p = Primitive("threefry2x32")
"""`threefry2x32(k0, k1, x0, x1)`: the Threefry-2x32 block (20 rounds) of the key words
`(k0, k1)` and counter words `(x0, x1)`, all uint32 of one shape, its two result words
packed into one uint64 (the first word high)."""


@threefry2x32_p.def_abstract_eval
def _threefry_abstract_eval(k0, k1, x0, x1):
    for t in (k0, k1, x0, x1):
        if t.dtype != dtypes.uint32:
            raise DTypeError(f"threefry2x32: operands must be uint32, got {t.dtype.name}")
    return TensorType(same_shape("threefry2x32", k0, k1, x0, x1), dtypes.uint64)


def _rotl(x, r):
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


@threefry2x32_p.def_impl
def _threefry_impl(k0, k1, x0, x1):
    shape = np.broadcast_shapes(k0.shape, k1.shape, x0.shape, x1.shape)
    k0, k1, x0, x1 = (np.array(np.broadcast_to(a, shape), np.uint32, ndmin=1)
                      for a in (k0, k1, x0, x1))
    ks = (k0, k1, k0 ^ k1 ^ np.uint32(PARITY))
    x0 = x0 + ks[0]
    x1 = x1 + ks[1]
    for r in range(ROUNDS):
        x0 += x1
        x1 = _rotl(x1, ROTATIONS[r % 8])
        x1 ^= x0
        if r % 4 == 3:  # key injection s after rounds 4s - 1
            s = r // 4 + 1
            x0 += ks[s % 3]
            x1 += ks[(s + 1) % 3] + np.uint32(s)
    out = (x0.astype(np.uint64) << np.uint64(32)) | x1.astype(np.uint64)
    return out.reshape(shape)


elementwise(threefry2x32_p)
batch_elementwise(threefry2x32_p)
nondifferentiable(threefry2x32_p)
