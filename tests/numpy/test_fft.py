"""tnp.fft beyond the op table (tests/ops/optable_fft.py): NumPy's dtypes for every input
dtype, `np.fft.X(tensor)` dispatch, errors naming the function, sizes unknown at trace
time (one numba kernel for every size), the numba kernel cache in a fresh process, and
gradients of spectral losses (odd and even lengths, padded and trimmed, Hessians) against
central differences."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tests.backends.test_numba_cache import run_script
from tests.finite_diff import central_difference, central_jacobian, complex_gradient
from tracegrad.errors import (
    DTypeError,
    InvalidArgumentError,
    NotDifferentiableError,
    ShapeError,
    UnsupportedOpError,
)

nb = pytest.importorskip("tracegrad.backends.numba")

ONE_D = ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft")
N_D = ("fft2", "ifft2", "rfft2", "irfft2", "fftn", "ifftn", "rfftn", "irfftn")
REAL_ONLY = ("rfft", "ihfft", "rfft2", "rfftn")


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int32", "int64", "bool",
                                   "complex64", "complex128"])
def test_result_dtypes_are_numpys(dtype):
    x = (np.arange(12).reshape(3, 4) % 3).astype(dtype)
    for name in ONE_D + N_D:
        if name in REAL_ONLY and x.dtype.kind == "c":
            continue
        got, want = getattr(tnp.fft, name)(x), getattr(np.fft, name)(x)
        assert got.dtype == want.dtype, name
        tol = 1e-3 if want.dtype in (np.complex64, np.float32) else 1e-12
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=name)


def test_numpy_functions_on_tensors_dispatch_to_tnp_fft():
    x = np.random.default_rng(0).standard_normal((4, 6))
    t = tg.constant(x)
    for name in ONE_D + N_D + ("fftshift", "ifftshift"):
        got = getattr(np.fft, name)(t)
        assert isinstance(got, tg.Tensor), name
        np.testing.assert_allclose(np.asarray(got), getattr(np.fft, name)(x), rtol=1e-12,
                                   atol=1e-12, err_msg=name)


def test_numba_backend_matches_numpy_on_every_function():
    """One kernel holding every transform (their numba code, sampled once, not per row)."""
    x = np.random.default_rng(1).standard_normal((5, 6))
    z = x + 1j * np.random.default_rng(2).standard_normal((5, 6))

    def every(x, z, lib):
        f = lib.fft
        return (f.fft(z, 8), f.ifft(z, 3, axis=0, norm="ortho"), f.rfft(x, 5),
                f.irfft(z, 9, norm="forward"), f.hfft(z), f.ihfft(x, 7), f.fft2(z, s=(3, 7)),
                f.ifftn(z), f.rfft2(x, norm="ortho"), f.irfftn(z, s=(4, 4), axes=(0, 1)), f.rfftn(
                    x.astype(np.float32)), f.fftshift(x), f.ifftshift(z, axes=0))

    got = tg.function(lambda x, z: every(x, z, tnp), backend="numba")(x, z)
    for k, (g, w) in enumerate(zip(got, every(x, z, np), strict=True)):
        assert g.dtype == w.dtype and g.shape == w.shape, k
        tol = 1e-5 if w.dtype == np.complex64 else 1e-12
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol, err_msg=str(k))


def test_unknown_sizes_one_kernel_for_every_size(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACEGRAD_CACHE_DIR", str(tmp_path))
    nb.clear_memory_cache()

    @tg.function(backend="numba", input_signature=[tg.TensorSpec([None, None])])
    def f(x):
        spectrum = tnp.fft.rfft(x, norm="ortho")
        return (tnp.fft.irfft(spectrum), tnp.fft.fft(x, n=6), tnp.fft.ifft(x, norm="forward"),
                tnp.sum(tnp.abs(spectrum) ** 2), tnp.fft.fftshift(x), tnp.fft.ifftshift(x))

    before = nb.cache_info()["compiled"]
    for shape in ((2, 7), (3, 8), (1, 4), (2, 9)):
        x = np.random.default_rng(sum(shape)).standard_normal(shape)
        s = np.fft.rfft(x, norm="ortho")
        want = (np.fft.irfft(s), np.fft.fft(x, 6), np.fft.ifft(x, norm="forward"),
                np.sum(np.abs(s) ** 2), np.fft.fftshift(x), np.fft.ifftshift(x))
        for g, w in zip(f(x), want, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)
    assert f.tracing_count == 1
    assert nb.cache_info()["compiled"] - before == 1
    nb.clear_memory_cache()


def test_real_transform_gradient_needs_the_length_when_traced():
    f = tg.function(tg.grad(lambda x: tnp.sum(tnp.abs(tnp.fft.rfft(x)) ** 2)),
                    input_signature=[tg.TensorSpec([None])], backend="numpy")
    with pytest.raises(NotDifferentiableError, match="fft: the gradient of a real transform"):
        f(np.ones(4))


def test_fresh_process_loads_the_fft_kernels_from_the_cache(tmp_path):
    script = textwrap.dedent("""
        import json
        import numpy as np
        import tracegrad as tg, tracegrad.numpy as tnp
        from tracegrad.backends import numba as nb

        def loss(x):
            return tnp.sum(tnp.abs(tnp.fft.rfft(x)) ** 2) + tnp.sum(tnp.real(
                tnp.fft.ifft2(tnp.fft.fft(x[:, None] * x))))

        x = np.linspace(-1, 1, 10)
        value = tg.function(loss, backend="numba")(x)
        grad = tg.function(tg.grad(loss), backend="numba")(x)
        want = np.sum(np.abs(np.fft.rfft(x)) ** 2) + np.sum(np.real(
            np.fft.ifft2(np.fft.fft(x[:, None] * x))))
        print(json.dumps({"ok": bool(np.isclose(value, want)) and grad.shape == (10,),
                          "grad": grad.tolist(), **nb.cache_info()}))
    """)
    first = run_script(tmp_path, script)
    assert first["ok"] and first["compiled"] == 2 and first["disk_hits"] == 0
    second = run_script(tmp_path, script)
    assert second["ok"] and second["compiled"] == 0 and second["disk_hits"] == 2
    assert second["grad"] == first["grad"]


@pytest.mark.parametrize("n", [7, 8])
def test_gradient_of_a_spectral_loss_matches_finite_differences(n):
    x = np.random.default_rng(n).standard_normal(n)
    weights = np.linspace(0.5, 2.0, 6)

    def loss(lib):
        def f(x):
            spectrum = lib.fft.rfft(x, 10, norm="ortho")  # padded
            trimmed = lib.fft.irfft(spectrum * weights, 5)  # trimmed
            return lib.sum(lib.abs(spectrum) ** 2 * weights) + lib.sum(trimmed ** 3)
        return f

    for backend in ("numpy", "numba"):
        g = tg.function(tg.grad(loss(tnp)), backend=backend)(x)
        np.testing.assert_allclose(g, central_difference(loss(np), x), rtol=1e-6, atol=1e-8)
    hessian = tg.function(tg.hessian(loss(tnp)), backend="numpy")(x)
    np.testing.assert_allclose(hessian, central_jacobian(
        tg.function(tg.grad(loss(tnp)), backend="numpy"), x), rtol=1e-5, atol=1e-6)


def test_gradient_of_a_complex_input_matches_complex_differences():
    z = np.random.default_rng(3).standard_normal((3, 5)) + 1j

    def loss(lib):
        return lambda z: lib.sum(lib.abs(lib.fft.hfft(lib.fft.fft2(z, norm="forward"))) ** 1.5)

    g = tg.function(tg.grad(loss(tnp)), backend="numba")(z)
    np.testing.assert_allclose(g, complex_gradient(loss(np), z), rtol=1e-6, atol=1e-8)


def test_vmap_matches_a_loop():
    x = np.random.default_rng(4).standard_normal((4, 3, 6))
    f = tg.function(tg.vmap(lambda a: tnp.fft.irfft2(tnp.fft.rfft2(a, s=(4, 6)) * 2.0, s=(3, 5))),
                    backend="numba")
    want = np.stack([np.fft.irfft2(np.fft.rfft2(a, s=(4, 6)) * 2.0, s=(3, 5)) for a in x])
    np.testing.assert_allclose(f(x), want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(("call", "error", "message"), [
    (lambda: tnp.fft.fft(np.ones(4), norm="both"), InvalidArgumentError,
     'fft: Invalid norm value both; should be "backward", "ortho" or "forward"'),
    (lambda: tnp.fft.rfft(np.ones(4), n=0), InvalidArgumentError,
     r"rfft: Invalid number of FFT data points \(0\) specified"),
    (lambda: tnp.fft.fft(np.ones((2, 0))), InvalidArgumentError,
     r"fft: Invalid number of FFT data points \(0\)"),
    (lambda: tnp.fft.irfft(np.ones(1)), InvalidArgumentError,
     r"irfft: Invalid number of FFT data points \(0\)"),
    (lambda: tnp.fft.rfft(np.ones(4, complex)), DTypeError, "rfft: the input must be real"),
    (lambda: tnp.fft.ihfft(np.ones(4, complex)), DTypeError, "ihfft: the input must be real"),
    (lambda: tnp.fft.fft(np.ones(4), axis=1), ShapeError, "fft"),
    (lambda: tnp.fft.fftn(np.ones((3, 3)), s=(2,), axes=(0, 1)), InvalidArgumentError,
     "fftn: Shape and axes have different lengths"),
    (lambda: tnp.fft.fft(np.float64(3.0)), ShapeError, "fft: a 0-dimensional array"),
    (lambda: tnp.fft.ifft(np.ones(4), out=np.ones(4, complex)), UnsupportedOpError,
     "ifft: out= is not supported"),
    (lambda: tnp.fft.fftshift(np.ones(3), axes=2), ShapeError, "fftshift"),
    (lambda: tnp.fft.fft2(np.ones(3)), ShapeError, "fft2"),
])
def test_errors_name_the_function(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_s_without_axes_warns_as_numpy_does():
    with pytest.warns(DeprecationWarning, match="fftn: `axes` should not be `None`"):
        got = tnp.fft.fftn(np.ones((2, 3)), s=(4,))
    np.testing.assert_allclose(got, np.fft.fftn(np.ones((2, 3)), s=(4,), axes=(1,)))


def test_frequencies_follow_the_spacing_gradient():
    d = np.asarray(0.3)
    g = tg.function(tg.grad(lambda d: tnp.sum(tnp.fft.fftfreq(9, d) ** 2)), backend="numpy")(d)
    np.testing.assert_allclose(
        g, central_difference(lambda d: np.sum(np.fft.fftfreq(9, d) ** 2), d), rtol=1e-7)
    assert tnp.fft.rfftfreq(8).dtype == np.fft.rfftfreq(8).dtype
