"""NumPy's own functions on tensors reach slice 2's compositions (docs/numpy.md): `np.NAME(t)`
gives tracegrad's result as a tensor, eagerly, traced and recorded on a tape."""

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp

X = np.array([[0.5, 1.5, -2.0, 0.25], [3.0, 0.25, 1.0, -1.0], [1.0, -0.5, 2.0, 0.75]])
V = np.array([0.5, -1.0, 2.0])
XP = np.array([-1.0, 0.0, 0.5, 2.0])

CALLS = {
    "convolve": lambda t: np.convolve(t[0], V, "same"),
    "correlate": lambda t: np.correlate(t[0], V, mode="full"),
    "cross": lambda t: np.cross(t[:, :3], V),
    "kron": lambda t: np.kron(t, V),
    "vander": lambda t: np.vander(t[0], 3),
    "trapezoid": lambda t: np.trapezoid(t, dx=0.5, axis=0),
    "polyval": lambda t: np.polyval(V, t),
    "polyadd": lambda t: np.polyadd(t[0], V),
    "polysub": lambda t: np.polysub(V, t[0]),
    "polymul": lambda t: np.polymul(t[0], V),
    "polyder": lambda t: np.polyder(t[0], 2),
    "polyint": lambda t: np.polyint(t[0], k=1.0),
    "interp": lambda t: np.interp(t, XP, [0.0, 1.0, -1.0, 2.0]),
    "searchsorted": lambda t: np.searchsorted(XP, t, side="right"),
    "digitize": lambda t: np.digitize(t, XP),
    "cov": lambda t: np.cov(t, rowvar=False),
    "corrcoef": lambda t: np.corrcoef(t),
    "empty_like": lambda t: np.empty_like(t),
    "copy": lambda t: np.copy(t),
    "tril_indices_from": lambda t: t[np.tril_indices_from(t, 1)],
    "triu_indices_from": lambda t: t[np.triu_indices_from(t)],
    "diag_indices_from": lambda t: t[:3, :3][np.diag_indices_from(t[:3, :3])],
    "select": lambda t: np.select([t > 1, t < 0], [t, -t], 0.5),
    "choose": lambda t: np.choose(np.array([1, 0, 1, 0]), [t[0], t[1]]),
    "isin": lambda t: np.isin(t, [0.25, 1.0]),
    "insert": lambda t: np.insert(t, 1, 9.0, axis=1),
    "gradient": lambda t: np.gradient(t, axis=1),
    "unwrap": lambda t: np.unwrap(t * 3.0),
    "nanquantile": lambda t: np.nanquantile(t, 0.3, axis=0),
    "nanpercentile": lambda t: np.nanpercentile(t, [10.0, 90.0], axis=1),
    "nanmedian": lambda t: np.nanmedian(t, axis=0),
    "logspace": lambda t: np.logspace(t[0, 0], 2.0, 3),
    "geomspace": lambda t: np.geomspace(t[0, 0], 8.0, 3),
    "vecdot": lambda t: np.vecdot(t, t),
    "matvec": lambda t: np.matvec(t[:, :3], V),
    "vecmat": lambda t: np.vecmat(V, t),
}


def _numpy(name):
    """The same call on the NumPy array."""
    return CALLS[name](X)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_numpy_function_on_a_tensor_runs_tracegrad(name):
    want = _numpy(name)
    got = CALLS[name](tg.constant(X))
    assert isinstance(got, tg.Tensor), type(got)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-13, atol=1e-13)
    assert got.numpy().dtype == np.asarray(want).dtype
    traced = tg.function(CALLS[name], backend="numpy")(X)
    np.testing.assert_allclose(np.asarray(traced), want, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("name", ["convolve", "polyval", "interp", "cov", "nanmedian",
                                  "trapezoid", "kron", "select", "insert", "vecdot"])
def test_numpy_function_on_a_variable_is_recorded(name):
    x = X + 0.0123  # off the kinks (interp's sample points, select's bounds)
    v = tg.Variable(x)
    with tg.GradientTape() as tape:
        y = tnp.sum(CALLS[name](v))
    g = tape.gradient(y, v).numpy()
    eps = 1e-6
    for idx in [(0, 0), (1, 2), (2, 1)]:
        d = np.zeros_like(x)
        d[idx] = eps
        fd = (np.sum(CALLS[name](x + d)) - np.sum(CALLS[name](x - d))) / (2 * eps)
        assert g[idx] == pytest.approx(fd, rel=1e-5, abs=1e-7), idx
