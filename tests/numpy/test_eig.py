"""`tnp.linalg.eig` and `eigvals` (the eig primitive) and `tnp.roots`: values against NumPy
on both backends (eigenvalues as sorted sets, eigenvectors by their residual and up to
phase), gradients of phase-invariant functions against central differences, jvp, vmap
against a loop, and errors naming the function."""

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tests.finite_diff import central_difference, complex_gradient
from tracegrad.errors import InvalidArgumentError, ShapeError

RNG = np.random.default_rng(26)
A = RNG.normal(size=(4, 4))  # real, with a complex pair
A_SYM = A + A.T
Z = RNG.normal(size=(3, 3)) + 1j * RNG.normal(size=(3, 3))
BATCH = RNG.normal(size=(2, 3, 5, 5))


def _sorted(w):
    w = np.asarray(w)
    return np.sort_complex(np.round(w, 10)) if w.ndim == 1 else np.stack(
        [_sorted(x) for x in w])


def _check_pairs(a, w, v, tol=1e-12):
    """Every column of `v` has unit norm and `a v = w v`."""
    a, w, v = np.asarray(a), np.asarray(w), np.asarray(v)
    np.testing.assert_allclose(np.linalg.norm(v, axis=-2), 1.0, atol=tol * 10)
    scale = max(1.0, float(np.abs(a).max()))
    np.testing.assert_allclose(a @ v, v * w[..., None, :], atol=tol * 100 * scale)


def test_a_real_matrix_has_a_complex_pair():
    assert np.abs(np.linalg.eigvals(A).imag).max() > 0.1


@pytest.mark.parametrize("a", [A, A_SYM, Z, BATCH], ids=["real", "symmetric", "complex", "batch"])
def test_eig_matches_numpy(backend, a):
    w, v = tg.function(tnp.linalg.eig)(a)
    w0 = np.linalg.eigvals(a)
    assert w.dtype == v.dtype == np.complex128
    np.testing.assert_allclose(_sorted(w), _sorted(w0), atol=1e-9)
    _check_pairs(a, w, v)
    # up to phase, the eigenvectors are NumPy's
    _, v0 = np.linalg.eig(a)
    overlap = np.abs(np.sum(np.conj(np.asarray(v)) * v0, axis=-2))
    np.testing.assert_allclose(overlap, 1.0, atol=1e-9)


def test_eig_eager_plain_and_dispatch_results():
    res = np.linalg.eig(tg.constant(A))
    assert isinstance(res, tnp.linalg.EigResult)
    np.testing.assert_allclose(np.asarray(res.eigenvalues), tnp.linalg.eigvals(A))
    w, v = tnp.linalg.eig(A)
    assert isinstance(w, np.ndarray) and w.dtype == np.complex128
    assert tnp.linalg.eig(A).eigenvalues is not None
    # real input with all eigenvalues real: complex still (NumPy 2.4 returns float64)
    assert tnp.linalg.eigvals(A_SYM).dtype == np.complex128
    np.testing.assert_allclose(tnp.linalg.eigvals(np.eye(3, dtype=np.int64)), np.ones(3))


def test_eig_dtypes(backend):
    for a, out in ((A.astype(np.float32), np.complex64), (Z.astype(np.complex64), np.complex64)):
        w, v = tg.function(tnp.linalg.eig)(a)
        assert w.dtype == v.dtype == out
        _check_pairs(a, w, v, tol=1e-6)


def test_eig_of_an_empty_matrix(backend):
    w, v = tg.function(tnp.linalg.eig)(np.zeros((2, 0, 0)))
    assert w.shape == (2, 0) and v.shape == (2, 0, 0)


W = RNG.normal(size=(5, 5))


def _rebuild(lib, a):
    """V diag(w) V^-1, which is `a` again."""
    w, v = lib.linalg.eig(a)
    return v @ (w[..., :, None] * lib.linalg.inv(v))


def _weights(a):
    return W[: a.shape[-1], : a.shape[-1]]


# real losses invariant to each eigenvector's phase (and to the eigenvalues' order)
LOSSES = {
    "sum |w|^2": lambda lib, a: lib.sum(lib.abs(lib.linalg.eigvals(a)) ** 2),
    "real parts cubed": lambda lib, a: lib.sum(lib.real(lib.linalg.eigvals(a)) ** 3),
    "|v|^2": lambda lib, a: lib.sum(lib.abs(lib.linalg.eig(a)[1]) ** 2 * _weights(a)),
    "V diag(w) V^-1": lambda lib, a: lib.real(lib.trace(_rebuild(lib, a) @ _weights(a))),
}


@pytest.mark.parametrize("name", list(LOSSES))
def test_eig_gradients_of_real_matrices(numpy_backend, name):
    loss = LOSSES[name]
    g = tg.grad(lambda a: loss(tnp, a))(A)
    assert g.dtype == np.float64
    np.testing.assert_allclose(g, central_difference(lambda a: loss(np, a), A), atol=1e-6)


@pytest.mark.parametrize("name", list(LOSSES))
def test_eig_gradients_of_complex_matrices(numpy_backend, name):
    loss = LOSSES[name]
    g = tg.grad(lambda a: loss(tnp, a))(Z)
    np.testing.assert_allclose(g, complex_gradient(lambda a: loss(np, a), Z), atol=1e-6)


def test_eig_gradient_on_numba_matches_numpy():
    loss = LOSSES["|v|^2"]
    grads = [tg.function(tg.grad(lambda a: loss(tnp, a)), backend=b)(BATCH[0, 0])
             for b in ("numpy", "numba")]
    np.testing.assert_allclose(grads[1], grads[0], atol=1e-10)


def test_eigvals_jvp_is_the_directional_derivative(numpy_backend):
    t = RNG.normal(size=A.shape)
    _, dw = tg.jvp(tnp.linalg.eigvals, (A,), (t,))
    h = 1e-6
    fd = (np.linalg.eigvals(A + h * t) - np.linalg.eigvals(A - h * t)) / (2 * h)
    np.testing.assert_allclose(dw, fd, atol=1e-6)


def test_eig_vmap_matches_a_loop(numpy_backend):
    w, v = tg.vmap(tg.vmap(tnp.linalg.eig))(BATCH)
    for i in np.ndindex(BATCH.shape[:2]):
        wi, vi = tnp.linalg.eig(BATCH[i])
        np.testing.assert_allclose(w[i], wi, atol=1e-12)
        np.testing.assert_allclose(v[i], vi, atol=1e-12)
    g = tg.vmap(tg.grad(lambda a: LOSSES["sum |w|^2"](tnp, a)))(BATCH[0])
    for i in range(BATCH.shape[1]):
        np.testing.assert_allclose(g[i], tg.grad(lambda a: LOSSES["sum |w|^2"](tnp, a))(
            BATCH[0, i]), atol=1e-12)


def test_eig_of_nan_raises_linalg_error_naming_eig(backend):
    with pytest.raises(np.linalg.LinAlgError, match="eig"):
        tg.function(tnp.linalg.eig)(np.full((2, 2), np.nan))


@pytest.mark.parametrize("fn", [tnp.linalg.eig, tnp.linalg.eigvals])
def test_eig_refuses_non_square_input_naming_the_function(fn):
    with pytest.raises(ShapeError, match=fn.__name__):
        fn(np.ones((2, 3)))
    with pytest.raises(ShapeError, match=fn.__name__):
        fn(np.ones(3))


# -- roots ---------------------------------------------------------------------------------------

POLYS = [[1.0, -3.0, 2.0], [0.0, 0.0, 1.0, 2.0, 3.0, 0.0, 0.0], [2.0, 0.0, 1.0, 4.0, -1.0],
         [0.0, 0.0], [5.0], [0.0, 3.0, 0.0], [1, 2, 3], [1 + 1j, 2.0, 3j]]


@pytest.mark.parametrize("p", POLYS, ids=[str(p) for p in POLYS])
def test_roots_match_numpy(p):
    for got in (tnp.roots(p), tnp.roots(tg.constant(p)).numpy()):
        want = np.roots(p)
        assert got.dtype == np.result_type(want, np.complex64)
        np.testing.assert_allclose(_sorted(got), _sorted(want), atol=1e-12)
        # NumPy's trailing-zero roots come last
        trailing = len(p) - 1 - int(np.flatnonzero(p)[-1]) if np.any(p) else 0
        if trailing:
            np.testing.assert_array_equal(got[-trailing:], 0)


def test_roots_of_float32_are_complex64():
    assert tnp.roots(np.array([1.0, 2.0, 3.0], np.float32)).dtype == np.complex64


def test_roots_traced_needs_strip_zeros_false(backend):
    with pytest.raises(InvalidArgumentError, match="roots: .*strip_zeros=False"):
        tg.function(tnp.roots)(np.ones(3))
    got = tg.function(lambda p: tnp.roots(p, strip_zeros=False))(np.array([1.0, -3.0, 2.0, 0.0]))
    np.testing.assert_allclose(_sorted(got), [0, 1, 2], atol=1e-12)


def test_roots_gradient_through_eigvals(numpy_backend):
    p = np.array([2.0, 0.0, 1.0, 4.0, -1.0])

    def loss(lib, p):
        return lib.sum(lib.abs(lib.roots(p) if lib is np else lib.roots(p, strip_zeros=False))
                       ** 2)

    g = tg.grad(lambda p: loss(tnp, p))(p)
    np.testing.assert_allclose(g, central_difference(lambda p: loss(np, p), p), atol=1e-6)


def test_roots_refuses_a_matrix():
    with pytest.raises(ShapeError, match="roots"):
        tnp.roots(np.ones((2, 2)))


# -- tracegrad.scipy.linalg.eig, eigvals -----------------------------------------------------


def test_scipy_eig_and_eigvals_match_scipy_up_to_phase():
    import scipy.linalg

    import tracegrad.scipy.linalg as tsl

    w, vl, vr = tsl.eig(A, left=True)
    w0, vl0, vr0 = scipy.linalg.eig(A, left=True)
    np.testing.assert_allclose(w, w0, atol=1e-12)
    np.testing.assert_allclose(np.abs(vl), np.abs(vl0), atol=1e-12)
    np.testing.assert_allclose(np.abs(vr), np.abs(vr0), atol=1e-12)
    np.testing.assert_allclose(np.conj(vl.T) @ A, w[:, None] * np.conj(vl.T), atol=1e-12)
    np.testing.assert_allclose(tsl.eig(A, right=False), w0, atol=1e-12)
    np.testing.assert_allclose(tsl.eigvals(A, homogeneous_eigvals=True),
                               scipy.linalg.eigvals(A, homogeneous_eigvals=True), atol=1e-12)
    with pytest.raises(tg.errors.UnsupportedOpError, match="eigvals: the generalized"):
        tsl.eigvals(A, np.eye(4))


def test_scipy_eig_left_vectors_gradient(numpy_backend):
    import scipy.linalg

    import tracegrad.scipy.linalg as tsl

    def loss(lib, a):
        vl = lib.eig(a, left=True)[1]
        return np.sum(np.abs(vl) ** 2 * W[:4, :4]) if lib is scipy.linalg else \
            tnp.sum(tnp.abs(vl) ** 2 * W[:4, :4])

    g = tg.grad(lambda a: loss(tsl, a))(A)
    np.testing.assert_allclose(g, central_difference(lambda a: loss(scipy.linalg, a), A),
                               atol=1e-6)
