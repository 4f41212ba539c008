"""Op-table rows for the random bit generator's primitive, threefry2x32, against a
plain-Python Threefry-2x32 (20 rounds) on Python ints."""

from __future__ import annotations

import numpy as np

from tests.ops.optable import case, rand
from tracegrad import ops

_ROT = (13, 15, 26, 6, 17, 29, 16, 24)
_M = 0xFFFFFFFF


def _threefry_int(k0, k1, x0, x1):
    """One Threefry-2x32 block on Python ints, as Random123's threefry2x32_R(20)."""
    ks = (k0, k1, k0 ^ k1 ^ 0x1BD11BDA)
    x0, x1 = (x0 + ks[0]) & _M, (x1 + ks[1]) & _M
    for r in range(20):
        x0 = (x0 + x1) & _M
        x1 = ((x1 << _ROT[r % 8]) | (x1 >> (32 - _ROT[r % 8]))) & _M
        x1 ^= x0
        if r % 4 == 3:
            s = r // 4 + 1
            x0 = (x0 + ks[s % 3]) & _M
            x1 = (x1 + ks[(s + 1) % 3] + s) & _M
    return (x0 << 32) | x1


def _reference(*words):
    shape = np.broadcast_shapes(*(w.shape for w in words))
    flat = [np.broadcast_to(w, shape).ravel().tolist() for w in words]
    out = np.array([_threefry_int(*e) for e in zip(*flat, strict=True)], np.uint64)
    return out.reshape(shape)[()]  # rank 0: a NumPy scalar, as NumPy's functions return


def _words(shape, seed):
    return [rand(shape, "uint32", 0, 2**32 - 1, seed=seed + i) for i in range(4)]


case("threefry2x32[3x5]", ops.threefry2x32, _reference, *_words((3, 5), 900),
     primitive="threefry2x32")
case("threefry2x32[edges]", ops.threefry2x32, _reference,
     *(np.array([0, _M, 0, _M, 1, 0x80000000], np.uint32)[p] for p in
       (np.arange(6), np.arange(6)[::-1], np.roll(np.arange(6), 1), np.roll(np.arange(6), 3))),
     primitive="threefry2x32")
case("threefry2x32[scalar]", ops.threefry2x32, _reference, *_words((), 910),
     primitive="threefry2x32")
