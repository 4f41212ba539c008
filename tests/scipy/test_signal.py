"""tracegrad.scipy.signal beyond the op table (tests/ops/optable_signal.py: values against
scipy.signal, gradients, batching and both backends): every shape class of every mode and
method against SciPy, the numba backend on a convnet-sized batch, and bad input."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import scipy.signal

import tracegrad as tg
import tracegrad.numpy as tnp
import tracegrad.scipy.signal as ts
from tracegrad import errors, ops

R = np.random.default_rng(0)
# shape classes: larger/smaller/equal in every dim, odd and even kernels, mixed (valid fails)
SHAPES = [((7,), (3,)), ((7,), (4,)), ((3,), (8,)), ((4,), (4,)), ((1,), (5,)),
          ((7, 4), (3, 2)), ((3, 6), (4, 6)), ((6, 3), (3, 5)), ((5, 4, 6), (2, 3, 3)),
          ((2, 3, 2), (3, 4, 5))]
DTYPES = (np.float64, np.float32, np.complex128, np.int64)


def _operands(s1, s2, dtype):
    a, b = R.normal(size=s1) * 3, R.normal(size=s2) * 3
    if np.dtype(dtype).kind == "c":
        a, b = a + 1j * R.normal(size=s1), b + 1j * R.normal(size=s2)
    return a.astype(dtype), b.astype(dtype)


def _same(ours, theirs, dtype):
    ours = np.asarray(ours)
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
    tol = 1e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(ours, theirs, rtol=tol, atol=tol * (np.abs(theirs).max() + 1))


@pytest.mark.parametrize("s1,s2", SHAPES, ids=[f"{a}-{b}" for a, b in SHAPES])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_convolve_correlate_match_scipy(s1, s2, dtype):
    a, b = _operands(s1, s2, dtype)
    for name in ("convolve", "correlate"):
        for mode in ("full", "same", "valid"):
            for method in ("direct", "fft", "auto"):
                try:
                    want = getattr(scipy.signal, name)(a, b, mode=mode, method=method)
                except ValueError:
                    with pytest.raises(errors.ShapeError, match="valid"):
                        getattr(ts, name)(a, b, mode=mode, method=method)
                    continue
                _same(getattr(ts, name)(a, b, mode=mode, method=method), want, dtype)


@pytest.mark.parametrize("s1,s2", [s for s in SHAPES if len(s[0]) == 2])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_2d_boundaries_match_scipy(s1, s2, dtype):
    a, b = _operands(s1, s2, dtype)
    for name in ("convolve2d", "correlate2d"):
        for mode in ("full", "same", "valid"):
            for boundary, fill in (("fill", 0), ("fill", 2.5), ("wrap", 0), ("symm", 0)):
                try:
                    want = getattr(scipy.signal, name)(a, b, mode, boundary, fill)
                except ValueError:
                    with pytest.raises(errors.ShapeError, match="valid"):
                        getattr(ts, name)(a, b, mode, boundary, fill)
                    continue
                _same(getattr(ts, name)(a, b, mode, boundary, fill), want, dtype)


@pytest.mark.parametrize("axes", [None, -1, (1, 2), [0, 2]])
@pytest.mark.parametrize("mode", ["full", "same", "valid"])
def test_fftconvolve_axes_match_scipy(axes, mode):
    a, b = R.normal(size=(3, 5, 7)), R.normal(size=(3, 1, 4))
    _same(ts.fftconvolve(a, b, mode, axes), scipy.signal.fftconvolve(a, b, mode, axes),
          np.float64)


@pytest.mark.parametrize("kind", ["linear", "constant"])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_detrend_matches_scipy(kind, axis):
    x = R.normal(size=(6, 9)) + np.arange(9) * 0.7
    _same(ts.detrend(x, axis=axis, type=kind), scipy.signal.detrend(x, axis=axis, type=kind),
          np.float64)


def test_numba_convnet_layer_gradients_match_numpy():
    # a convnet's second layer: 6 -> 16 channels, 5x5 kernels, a batch of 32 12x12 images
    x, w = R.normal(size=(32, 6, 12, 12)), R.normal(size=(16, 6, 5, 5))
    c = R.normal(size=(32, 16, 8, 8))

    def loss(x, w):
        return tnp.sum(tnp.tanh(ops.conv(x, w, padding=((0, 0), (0, 0)))) * c)

    grads = tg.grad(loss, argnums=(0, 1))
    want = tg.function(grads, backend="numpy")(x, w)
    got = tg.function(grads, backend="numba")(x, w)
    for g, e in zip(got, want, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-10, atol=1e-10)


def test_vmap_over_images_and_kernels():
    a, b = R.normal(size=(4, 9, 7)), R.normal(size=(4, 3, 2))
    for in_axes in ((0, 0), (0, None), (None, 0)):
        got = tg.vmap(lambda a, b: ts.correlate(a, b, "same"), in_axes=in_axes)(
            a if in_axes[0] == 0 else a[0], b if in_axes[1] == 0 else b[0])
        want = np.stack([scipy.signal.correlate(a[i] if in_axes[0] == 0 else a[0],
                                                b[i] if in_axes[1] == 0 else b[0], "same")
                         for i in range(4)])
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_prod_of_a_shape_is_static_while_tracing():
    @tg.function
    def flatten(x):
        return x.reshape((x.shape[0], tnp.prod(x.shape[1:])))

    assert flatten(np.ones((2, 3, 4))).shape == (2, 12)


def test_sum_and_prod_of_python_ints_are_numpy_values_while_tracing():
    seen = []

    @tg.function
    def f(x):
        seen.extend([tnp.prod(x.shape), tnp.prod(()), tnp.sum(x.shape), tnp.sum([])])
        return x

    f(np.ones((2, 3)))
    want = [np.prod((2, 3)), np.prod(()), np.sum((2, 3)), np.sum([])]
    assert [type(v) for v in seen] == [type(v) for v in want]  # static NumPy values
    assert seen == want


def _line(offset=1):
    return f"{__file__}:{sys._getframe(1).f_lineno + offset}"


def test_bad_input_names_the_op_and_line():
    a, b = np.ones((4, 4)), np.ones(3)
    where = _line(3)
    with pytest.raises(errors.ShapeError, match="convolve: in1 and in2 should have the same "
                       "dimensionality") as info:
        ts.convolve(a, b)
    assert where in str(info.value)
    with pytest.raises(errors.InvalidArgumentError, match="correlate: mode must be one of"):
        ts.correlate(b, b, mode="circular")
    with pytest.raises(errors.InvalidArgumentError, match="convolve: method must be one of"):
        ts.convolve(b, b, method="winograd")
    with pytest.raises(errors.InvalidArgumentError, match="convolve2d: boundary must be one"):
        ts.convolve2d(a, a, boundary="reflect")
    with pytest.raises(errors.ShapeError, match="correlate2d: in1 and in2 should have both "
                       "2-D arrays"):
        ts.correlate2d(b, b)
    with pytest.raises(errors.ShapeError, match="one must be at least as large"):
        ts.convolve(np.ones((3, 5)), np.ones((4, 2)), mode="valid")
    with pytest.raises(errors.UnsupportedOpError, match="detrend: breakpoints"):
        ts.detrend(b, bp=[1])

    @tg.function
    def traced(x):
        return ts.convolve(x, np.ones((2, 2)))

    where = _line(-2)  # the line of the call inside the traced function
    with pytest.raises(errors.ShapeError, match="same dimensionality") as info:
        traced(np.ones(5))
    assert where in str(info.value)
    with pytest.raises(errors.ShapeError, match="conv: batch and input-channel dims"):
        ops.conv(np.ones((1, 2, 5)), np.ones((1, 3, 2)), padding=((0, 0),))


def test_numba_conv_with_unknown_image_and_channel_counts():
    pad = ((1, 0), (2, 2))
    f = tg.function(lambda x, w: ops.conv(x, w, padding=pad), backend="numba",
                    input_signature=[tg.TensorSpec([None, None, 6, 5]),
                                     tg.TensorSpec([None, None, 3, 2])])
    for n, ci, co in ((2, 3, 4), (1, 2, 5)):
        x, w = R.normal(size=(n, ci, 6, 5)), R.normal(size=(co, ci, 3, 2))
        np.testing.assert_allclose(f(x, w), tg.function(
            lambda x, w: ops.conv(x, w, padding=pad), backend="numpy")(x, w), rtol=1e-12,
            atol=1e-12)


def test_vmapped_convolution_is_one_conv_op():
    batched = tg.vmap(lambda a, b: ts.convolve(a, b, "same"))
    graph = tg.trace(batched)(tg.TensorSpec([4, 9, 7]), tg.TensorSpec([4, 3, 2]))
    assert [op.primitive.name for op in graph.operations].count("conv") == 1


@pytest.mark.parametrize("batched", ["images", "kernels"])
def test_vmap_with_a_shared_operand_does_not_copy_it(batched):
    # one batched operand merges its batch into the image or out-channel dim: one conv
    # product, no broadcast of the shared operand per example
    x, w = R.normal(size=(6, 2, 3, 8, 7)), R.normal(size=(6, 4, 3, 3, 2))
    pad = ((1, 1), (0, 1))
    if batched == "images":
        f, arg, loop = (lambda x: ops.conv(x, w[0], padding=pad)), x, [
            ops.conv(x[i], w[0], padding=pad) for i in range(6)]
    else:
        f, arg, loop = (lambda w: ops.conv(x[0], w, padding=pad)), w, [
            ops.conv(x[0], w[i], padding=pad) for i in range(6)]
    graph = tg.trace(tg.vmap(f))(tg.TensorSpec(arg.shape))
    names = [op.primitive.name for op in graph.operations]
    assert names.count("conv") == 1 and "broadcast_in_dim" not in names, names
    np.testing.assert_allclose(tg.vmap(f)(arg), np.stack(loop), rtol=1e-12, atol=1e-12)


def test_numba_row_split_kernel_of_convolutions(monkeypatch):
    # conv is aligned (ops.ALIGNED) along its images: a batch of images, or a vmap of 1-D
    # signals, runs as the numba backend's row-split kernel, with the numpy backend's values
    from tracegrad.backends import threads
    from tracegrad.backends.numba import parallel

    monkeypatch.setattr(tg.config, "background_compile", False)
    monkeypatch.setattr(tg.config, "parallel", None)
    monkeypatch.setattr(threads, "num_threads", 2)
    monkeypatch.setattr(parallel, "PARALLEL_MIN_ELEMENTS", 1000)
    w, k = R.normal(size=(4, 3, 3, 3)), R.normal(size=(7,))
    for f, x in ((lambda x: tnp.tanh(ops.conv(x, w, padding=((1, 1), (1, 1)))),
                  R.normal(size=(40, 3, 8, 8))),
                 (tg.vmap(lambda a: ts.correlate(a, k, "same", method="direct")),
                  R.normal(size=(50, 30)))):
        fn = tg.function(f, backend="numba")
        got = fn(x)
        ex = fn.get_concrete_function(x).executor
        assert "rows_part(" in (ex._parallel_ex or ex).source
        np.testing.assert_allclose(got, tg.function(f, backend="numpy")(x), rtol=1e-12,
                                   atol=1e-12)


def test_numpy_convolve_is_one_conv_op():
    # tnp.convolve/correlate are the correlation scipy.signal's direct method is: one conv
    for mode in ("full", "same", "valid"):
        for f in (tnp.convolve, tnp.correlate):
            graph = tg.trace(lambda a, v, f=f, m=mode: f(a, v, m))(
                tg.TensorSpec([9]), tg.TensorSpec([4]))
            names = [op.primitive.name for op in graph.operations]
            assert names.count("conv") == 1 and "dot_general" not in names, names
