"""Every kind of input array: a compiled function (both backends), an eager
tracegrad.numpy op and `tg.grad` take strided views, negative strides, Fortran order,
read-only, non-native byte orders, 0-d, size 0, np.memmap, objects with `__array__` and
DLPack producers, and give what NumPy gives on a native contiguous copy; unsupported
dtypes are a DTypeError naming the argument (or, eagerly, the op).

Reductions over more than 2^31 elements (a broadcast view, so no memory) run on the numpy
backend, eagerly and in a gradient; on the numba backend, whose executor copies a view
into a C-contiguous array, they run with `TRACEGRAD_SLOW=1` (2 GB of bools, a few seconds).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tracegrad.errors import DTypeError

SLOW = os.environ.get("TRACEGRAD_SLOW", "") not in ("", "0")
BASE = np.arange(24.0).reshape(4, 6) / 7 - 1.5


class ArrayLike:
    """Another library's array, seen through `__array__` only."""

    def __init__(self, value):
        self._value = value

    def __array__(self, dtype=None, copy=None):
        return self._value if dtype is None else self._value.astype(dtype)


class DLPackOnly:
    """Another library's array, seen through DLPack only."""

    def __init__(self, value):
        self._value = value

    def __dlpack__(self, **kwargs):
        return self._value.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._value.__dlpack_device__()


def _read_only():
    x = BASE.copy()
    x.flags.writeable = False
    return x


def _memmap(tmp_path):
    m = np.memmap(tmp_path / "x.dat", dtype=np.float64, mode="w+", shape=BASE.shape)
    m[:] = BASE
    m.flush()
    return np.memmap(tmp_path / "x.dat", dtype=np.float64, mode="r", shape=BASE.shape)


KINDS = {
    "contiguous": lambda tmp: BASE.copy(),
    "strided view": lambda tmp: np.arange(48.0).reshape(4, 12)[:, ::2] / 7,
    "negative strides": lambda tmp: BASE[::-1, ::-2],
    "fortran order": lambda tmp: np.asfortranarray(BASE),
    "read-only": lambda tmp: _read_only(),
    "big-endian float64": lambda tmp: BASE.astype(">f8"),
    "big-endian float32 view": lambda tmp: BASE.astype(">f4")[:, 1::2],
    "big-endian int32": lambda tmp: np.arange(-6, 6).reshape(3, 4).astype(">i4"),
    "0-d": lambda tmp: np.array(0.75),
    "size 0": lambda tmp: np.zeros((0, 3)),
    "memmap": _memmap,
    "__array__": lambda tmp: ArrayLike(BASE[:, ::2]),
    "np.from_dlpack": lambda tmp: np.from_dlpack(BASE[::-1]),
    "DLPack producer": lambda tmp: DLPackOnly(BASE[:, 1::2]),
}

# (mode, backend): eager ops have no backend.
MODES = [("function", "numpy"), ("function", "numba"), ("grad", "numpy"), ("grad", "numba"),
         ("eager", None)]


def values(x):
    return tnp.multiply(tnp.cos(x), x), tnp.sum(x), tnp.transpose(x) * 2


def reference_values(a):
    return np.cos(a) * a, np.sum(a), np.transpose(a) * 2


def loss(x):
    return tnp.sum(tnp.multiply(tnp.sin(x), x))


def run(mode, backend, fn, *args):
    if mode == "eager":
        return fn(*args)
    saved = tg.config.backend
    tg.config.backend = backend  # what tg.grad of a plain function compiles with
    try:
        return (tg.function(fn, backend=backend) if mode == "function" else tg.grad(fn))(*args)
    finally:
        tg.config.backend = saved


def reference(x) -> np.ndarray:
    """A native, C-contiguous NumPy copy of input `x`."""
    a = np.from_dlpack(x) if isinstance(x, DLPackOnly) else np.asarray(x)
    return np.array(a, dtype=a.dtype.newbyteorder("="), order="C")


@pytest.mark.parametrize(("mode", "backend"), MODES)
@pytest.mark.parametrize("kind", list(KINDS))
def test_every_kind_of_input_array_gives_numpys_answer(kind, mode, backend, tmp_path):
    x = KINDS[kind](tmp_path)
    a = reference(x)
    if mode == "grad":
        if a.dtype.kind != "f":
            with pytest.raises(DTypeError, match="argument 0 has a leaf of dtype int32"):
                run(mode, backend, loss, x)
            return
        got = [run(mode, backend, loss, x)]
        expected = [np.cos(a) * a + np.sin(a)]
    else:
        got = run(mode, backend, values, x)
        expected = reference_values(a)
    for g, e in zip(got, expected, strict=True):
        g = np.asarray(g)
        assert g.shape == e.shape
        assert g.dtype == e.dtype and g.dtype.isnative
        np.testing.assert_allclose(g, e, rtol=1e-6 if e.dtype == np.float32 else 1e-12)


def test_a_byte_swapped_array_does_not_share_the_fast_call_path():
    f = tg.function(lambda x: x + 1, backend="numpy")
    swapped = BASE.astype(">f8")
    for _ in range(2):
        out = f(swapped)
        assert out.dtype == np.float64 and out.dtype.isnative
        np.testing.assert_array_equal(out, BASE + 1)
    assert len(f._fast) == 0  # a converted argument is never fed as it is
    np.testing.assert_array_equal(f(BASE), BASE + 1)
    assert len(f._fast) == 1 and f.tracing_count == 1


UNSUPPORTED = {
    "complex256": BASE.astype(np.clongdouble),
    "object": BASE.astype(object),
    "str32": np.array(["a", "b"]),
    "float128": BASE.astype(np.longdouble),
    "timedelta64": np.arange(4).astype("m8[s]"),
}


@pytest.mark.parametrize(("mode", "backend"), MODES)
@pytest.mark.parametrize("name", list(UNSUPPORTED))
def test_an_unsupported_dtype_is_an_error_naming_the_argument(name, mode, backend):
    # eagerly, the op that meets the array is named ("sin: ..."); compiled, the argument
    expected = "sin" if mode == "eager" else f"argument x has dtype {name}"
    with pytest.raises(DTypeError, match=expected) as info:
        run(mode, backend, loss, UNSUPPORTED[name])
    assert "dtype(" not in str(info.value)
    if mode != "eager":
        assert __file__ in str(info.value)


def test_a_torch_tensor_is_read_through_its_array_interfaces():
    torch = pytest.importorskip("torch")
    t = torch.linspace(-1, 1, 7, dtype=torch.float64)[::2]
    a = t.numpy().copy()
    np.testing.assert_allclose(tg.function(loss)(t), np.sum(np.sin(a) * a), rtol=1e-12)
    np.testing.assert_allclose(loss(t), np.sum(np.sin(a) * a), rtol=1e-12)
    np.testing.assert_allclose(tg.grad(loss)(t), np.cos(a) * a + np.sin(a), rtol=1e-12)


# -- more than 2^31 elements -------------------------------------------------------------------

N = 2**31 + 5


def scaled_sum(s, x):
    return tnp.sum(x) * s


@pytest.mark.parametrize(("mode", "backend"), [("function", "numpy"), ("grad", "numpy"),
                                               ("eager", None)])
def test_a_reduction_over_more_than_2_31_elements(mode, backend):
    big = np.broadcast_to(np.float64(1.5), (N,))  # 16 GB if it were materialized
    # 1.5 * N and every partial sum of 1.5s are exact in float64
    assert run(mode, backend, scaled_sum, 2.0, big) == (1.5 * N if mode == "grad" else 3.0 * N)


@pytest.mark.skipif(not SLOW, reason="2 GB and seconds: TRACEGRAD_SLOW=1")
@pytest.mark.parametrize("mode", ["function", "grad"])
def test_a_numba_kernel_loops_over_more_than_2_31_elements(mode):
    big = np.broadcast_to(np.True_, (N,))  # the executor copies it: one byte per element
    assert run(mode, "numba", scaled_sum, 2.0, big) == (N if mode == "grad" else 2.0 * N)
