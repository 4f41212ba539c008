"""The numba backend's qr, eigh and svd: one kernel for every matrix size (the sizes
unknown when traced), NumPy's values, and what non-finite matrices give."""

from __future__ import annotations

import numpy as np
import pytest

import tracegrad as tg
from tracegrad import ops

pytest.importorskip("tracegrad.backends.numba")


def _all(a, s):
    q, r = ops.qr(a)
    qc, rc = ops.qr(a, full_matrices=True)
    u, sv, vh = ops.svd(a)
    uf, _, vhf = ops.svd(a, full_matrices=True)
    w, v = ops.eigh(s)
    wu, vu = ops.eigh(s, lower=False)
    # the upper triangle is mirrored and factored as a lower one: LAPACK's vectors for UPLO="U"
    # may have other signs, so their squares are compared
    return q, r, qc, rc, u, sv, vh, uf, vhf, w, v, wu, ops.mul(vu, vu)


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
