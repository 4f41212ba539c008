"""The numba backend's qr, eigh and svd: one kernel for every matrix size (the sizes
unknown when traced), NumPy's values, and what non-finite matrices give."""

from __future__ import annotations

import numpy as np
import pytest
from finite_diff import central_difference

import tracegrad as tg
import tracegrad.numpy as tnp
from tracegrad import ops

pytest.importorskip("tracegrad.backends.numba")


def _all(a, s):
    q, r = ops.qr(a)
    qc, rc = ops.qr(a, full_matrices=True)
    u, sv, vh = ops.svd(a)
    uf, _, vhf = ops.svd(a, full_matrices=True)
    w, v = ops.eigh(s)
    wu, vu = ops.eigh(s, lower=False)
    return q, r, qc, rc, u, sv, vh, uf, vhf, w, v, wu, vu


def test_one_kernel_serves_every_size_and_matches_numpy():
    spec = [tg.TensorSpec([None, None, None]), tg.TensorSpec([None, None, None])]
    compiled = tg.function(_all, input_signature=spec, backend="numba")
    reference = tg.function(_all, input_signature=spec, backend="numpy")
    rng = np.random.default_rng(0)
    for batch, m, n in ((2, 5, 3), (1, 3, 5), (3, 4, 4), (0, 2, 3)):
        a = rng.standard_normal((batch, m, n))
        s = rng.standard_normal((batch, m, m))
        for k, (got, want) in enumerate(zip(compiled(a, s), reference(a, s), strict=True)):
            assert got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-13,
                                       err_msg=f"output {k} of {a.shape}")
    assert compiled.tracing_count == 1


def test_float32_is_computed_in_float64_as_numpy_does():
    a = np.random.default_rng(1).standard_normal((4, 3)).astype(np.float32)
    f = tg.function(lambda x: ops.svd(x)[1], backend="numba")
    got = f(a)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, np.linalg.svd(a, compute_uv=False))


def test_non_finite_matrices():
    a = np.array([[1.0, np.nan], [2.0, 3.0]])  # NaN above the diagonal
    eigh = tg.function(lambda x: ops.eigh(x), backend="numba")
    for got, want in zip(eigh(a), np.linalg.eigh(a), strict=True):  # the lower triangle
        np.testing.assert_allclose(got, want, rtol=1e-15)
    w, v = eigh(a.T)
    assert np.isnan(w).all() and np.isnan(v).all()
    with pytest.raises(np.linalg.LinAlgError):
        tg.function(lambda x: ops.svd(x), backend="numba")(a)


def _hermitian_input(rng, shape, dtype):
    a = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal(shape)
    return a.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128, np.complex64])
def test_eigh_one_kernel_every_size_both_triangles(dtype):
    # LAPACK's syevd/heevd called on the batch with its workspace sized once per call: sizes
    # whose workspaces differ (n = 1 and n past the divide-and-conquer's 25) in one kernel,
    # each triangle, NumPy's eigenvectors (the same LAPACK input: same signs)
    def both(a):
        return (*ops.eigh(a), *ops.eigh(a, lower=False))

    f = tg.function(both, input_signature=[tg.TensorSpec([None, None, None], dtype)],
                    backend="numba")
    rng = np.random.default_rng(2)
    single = np.dtype(dtype) in (np.float32, np.complex64)
    for batch, n in ((3, 4), (2, 1), (2, 40), (0, 3), (1, 0), (3, 4)):
        a = _hermitian_input(rng, (batch, n, n), dtype)
        got = f(a)
        want = (*np.linalg.eigh(a), *np.linalg.eigh(a, UPLO="U"))
        for k, (g, w) in enumerate(zip(got, want, strict=True)):
            assert g.dtype == w.dtype and g.shape == w.shape
            # float32 and complex64 are computed in double and rounded, as NumPy does; the
            # two backends' LAPACK builds (SciPy's, NumPy's) may differ in how they round
            np.testing.assert_allclose(g, w, rtol=2e-4 if single else 1e-11,
                                       atol=2e-4 if single else 1e-11,
                                       err_msg=f"output {k} of {a.shape}")
    assert f.tracing_count == 1


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
@pytest.mark.parametrize("lower", [True, False])
def test_eigh_reads_only_its_triangle(dtype, lower):
    # the other triangle (NaN here) and the imaginary part of the diagonal are not read;
    # a NaN or inf in the triangle read gives NaN results for that matrix only
    rng = np.random.default_rng(3)
    a = _hermitian_input(rng, (3, 5, 5), dtype)
    a = a + np.conj(np.swapaxes(a, -1, -2))
    clean = np.linalg.eigh(a, UPLO="L" if lower else "U")
    other = np.triu_indices(5, 1) if lower else np.tril_indices(5, -1)
    dirty = a.copy()
    dirty[:, other[0], other[1]] = np.nan
    if np.dtype(dtype).kind == "c":
        dirty[:, range(5), range(5)] += 7j
    dirty[2, 3, 3] = np.inf
    eigh = tg.function(lambda x: ops.eigh(x, lower=lower), backend="numba")
    w, v = eigh(dirty)
    np.testing.assert_allclose(w[:2], clean[0][:2], rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(v[:2], clean[1][:2], rtol=1e-13, atol=1e-13)
    assert np.isnan(w[2]).all() and np.isnan(v[2]).all()


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
@pytest.mark.parametrize("lower", [True, False])
def test_eigenvalue_gradient_on_the_triangle_read(backend, dtype, lower):
    # d sum(c * w) / da for symmetric (Hermitian) da is G = V diag(c) V^H; eigh reads one
    # triangle, which carries G + G^H off the diagonal and G's real diagonal
    rng = np.random.default_rng(4)
    a = _hermitian_input(rng, (2, 4, 4), dtype)
    a = a + np.conj(np.swapaxes(a, -1, -2))
    c = np.array([1.0, -2.0, 0.5, 3.0])
    uplo = "L" if lower else "U"
    g = tg.function(tg.grad(lambda x: tnp.sum(tnp.linalg.eigh(x, UPLO=uplo)[0] * c)),
                    backend=backend)(a)
    w, v = np.linalg.eigh(a, UPLO=uplo)
    big = (v * c) @ np.conj(np.swapaxes(v, -1, -2))
    tri = np.tril if lower else np.triu
    want = tri(big + np.conj(np.swapaxes(big, -1, -2)), -1 if lower else 1) + \
        np.real(big) * np.eye(4)
    np.testing.assert_allclose(g, want, rtol=1e-12, atol=1e-12)
    # against central differences of the triangle read (real input)
    if dtype == np.float64:
        fd = central_difference(lambda x: np.linalg.eigh(x, UPLO=uplo)[0] * c, a)
        np.testing.assert_allclose(g, fd, atol=1e-7)


def test_real_eigh_reads_no_uninitialised_workspace_size(monkeypatch):
    """LAPACK's dsyevd has no rwork, so the workspace query leaves it as allocated: the real
    helper must not size an allocation from it (run in Python, its fresh arrays filled with
    NaN as uninitialised memory may be)."""
    import sys
    import types

    from tracegrad.backends.numba import helpers

    monkeypatch.setattr(tg.config, "background_compile", False)
    a = np.random.default_rng(6).standard_normal((2, 4, 4))
    a = a + np.swapaxes(a, 1, 2)
    tg.function(lambda x: ops.eigh(x)[0], backend="numba")(a)  # loads the helper module
    mod = sys.modules[helpers.MODULE]

    def empty(shape, dtype=float):
        return np.full(shape, np.nan if np.dtype(dtype).kind in "fc" else 0, dtype)

    monkeypatch.setitem(mod._eigh_f64.py_func.__globals__, "np",
                        types.SimpleNamespace(**{**vars(np), "empty": empty}))
    w, v = np.empty((2, 4)), np.empty((2, 4, 4))
    mod._eigh_f64.py_func(a, w, v, True)
    want_w, want_v = np.linalg.eigh(a)
    np.testing.assert_allclose(w, want_w, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.abs(v), np.abs(want_v), rtol=1e-10, atol=1e-12)
