"""What the op-table rows of tests/ops/optable_functions.py cannot say: the partition
property of `partition`/`argpartition`; NumPy's in-place updates on NumPy arrays and the
`inplace=False` rule on tensors; the checks `ravel_multi_index(mode="raise")` and
`unravel_index` make on concrete indices and what they do on traced ones; `polydiv`'s
remainder; `einsum_path`; errors naming the function; NumPy calls reaching these through
`__array_function__`/`__array_ufunc__`; and nextafter, spacing, gcd and lcm bit for bit on
the numba backend."""

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tracegrad.core.ir import EagerTensor
from tracegrad.errors import InvalidArgumentError, ShapeError, UnsupportedOpError

RNG = np.random.default_rng(24)
X = np.round(RNG.normal(size=(4, 9)), 1)  # rounded: ties
X[1, 3] = np.nan


def _check_partitioned(p, a, kth, axis):
    """`p` is a partition of `a` along `axis` around each of `kth`."""
    p = np.moveaxis(np.asarray(p), axis, -1)
    want = np.moveaxis(np.partition(a, kth, axis), axis, -1)
    np.testing.assert_array_equal(np.sort(p, -1), np.sort(want, -1))
    for k in np.atleast_1d(kth) % p.shape[-1]:
        np.testing.assert_array_equal(p[..., k], want[..., k])
        pivot = p[..., k:k + 1]
        left, right = p[..., :k], p[..., k + 1:]
        # NaNs sort last: compare as if they were +inf
        big = np.where(np.isnan(pivot), np.inf, pivot)
        assert np.all(np.where(np.isnan(left), np.inf, left) <= big)
        assert np.all((np.where(np.isnan(right), np.inf, right) >= big) | np.isnan(pivot))


@pytest.mark.parametrize("kth,axis", [(4, -1), ([0, 3, 8], 1), (-2, -1), (2, 0), ([1, 2], 0)])
@pytest.mark.parametrize("kind", ["numpy", "eager", "traced"])
def test_partition_and_argpartition_partition_around_kth(kth, axis, kind):
    run = {"numpy": lambda f, x: f(x), "eager": lambda f, x: f(tg.constant(x)).numpy(),
           "traced": lambda f, x: tg.function(f)(x)}[kind]
    _check_partitioned(run(lambda a: tnp.partition(a, kth, axis), X), X, kth, axis)
    idx = run(lambda a: tnp.argpartition(a, kth, axis), X)
    assert idx.dtype == np.int64
    _check_partitioned(np.take_along_axis(X, idx, axis), X, kth, axis)


def test_partition_checks_kth():
    with pytest.raises(InvalidArgumentError, match=r"partition: kth\(=9\) out of bounds"):
        tnp.partition(X, 9)
    with pytest.raises(InvalidArgumentError, match="argpartition: kth"):
        tnp.argpartition(X, [0, -10])
    with pytest.raises(InvalidArgumentError, match="static integers"):
        tnp.partition(X, 1.5)


def test_lexsort_errors():
    with pytest.raises(InvalidArgumentError, match="lexsort: need a sequence of keys"):
        tnp.lexsort([])
    with pytest.raises(ShapeError, match="lexsort: all keys need to be the same shape"):
        tnp.lexsort([np.arange(3), np.arange(4)])


# -- index conversion -------------------------------------------------------------------------


def test_ravel_multi_index_raise_checks_concrete_indices():
    idx = (np.array([3, 6]), np.array([4, 6]))
    for arg in (idx, tuple(tg.constant(i) for i in idx)):
        with pytest.raises(InvalidArgumentError, match="ravel_multi_index: invalid entry"):
            tnp.ravel_multi_index(arg, (7, 6))
    with pytest.raises(ValueError):  # as NumPy's error type
        tnp.ravel_multi_index((np.array([-1]), np.array([0])), (7, 6))
    assert tnp.ravel_multi_index(tg.constant(np.array([[3, 6], [4, 5]])), (7, 6)).numpy(
    ).tolist() == [22, 41]


def test_ravel_multi_index_raise_on_traced_indices_asks_for_wrap_or_clip():
    f = tg.function(lambda i, j: tnp.ravel_multi_index((i, j), (7, 6)))
    with pytest.raises(InvalidArgumentError, match="mode='wrap' or mode='clip'"):
        f(np.array([1]), np.array([2]))


def test_ravel_multi_index_checks_its_arguments():
    with pytest.raises(InvalidArgumentError, match="sequence of length 2"):
        tnp.ravel_multi_index((np.array([1]),), (7, 6))
    with pytest.raises(InvalidArgumentError, match="mode must be"):
        tnp.ravel_multi_index((np.array([1]), np.array([1])), (7, 6), mode="nope")
    with pytest.raises(tg.errors.DTypeError, match="only int indices"):
        tnp.ravel_multi_index((np.array([1.0]), np.array([1])), (7, 6))


def test_unravel_index_raises_on_concrete_and_clips_traced_indices():
    for i in (np.array([5, 42]), tg.constant(np.array([-1]))):
        with pytest.raises(InvalidArgumentError, match="unravel_index: index"):
            tnp.unravel_index(i, (7, 6))
    got = tg.function(lambda i: tnp.unravel_index(i, (7, 6)))(np.array([-3, 5, 42, 99]))
    want = np.unravel_index(np.array([0, 5, 41, 41]), (7, 6))
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


# -- in-place updates ---------------------------------------------------------------------------

UPDATES = {
    "put": (lambda a, inplace: tnp.put(a, [0, 5], [7.0, 8.0], inplace=inplace),
            lambda a: np.put(a, [0, 5], [7.0, 8.0])),
    "put_along_axis": (
        lambda a, inplace: tnp.put_along_axis(a, np.array([[1], [0]]), 7.0, 1, inplace=inplace),
        lambda a: np.put_along_axis(a, np.array([[1], [0]]), 7.0, 1)),
    "place": (lambda a, inplace: tnp.place(a, a > 2, [7.0, 8.0], inplace=inplace),
              lambda a: np.place(a, a > 2, [7.0, 8.0])),
    "fill_diagonal": (lambda a, inplace: tnp.fill_diagonal(a, 7.0, inplace=inplace),
                      lambda a: np.fill_diagonal(a, 7.0)),
}


@pytest.mark.parametrize("name", UPDATES)
def test_updates_change_numpy_arrays_in_place(name):
    fn, reference = UPDATES[name]
    a, want = np.arange(6.0).reshape(2, 3), np.arange(6.0).reshape(2, 3)
    reference(want)
    assert fn(a, True) is None
    np.testing.assert_array_equal(a, want)
    b = np.arange(6.0).reshape(2, 3)
    out = fn(b, False)  # a new array; b unchanged
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(b, np.arange(6.0).reshape(2, 3))


@pytest.mark.parametrize("name", UPDATES)
def test_updates_on_tensors_need_inplace_false(name):
    fn, reference = UPDATES[name]
    t = tg.constant(np.arange(6.0).reshape(2, 3))
    with pytest.raises(UnsupportedOpError, match=f"{name}: tensors are immutable.*inplace=False"):
        fn(t, True)
    with pytest.raises(UnsupportedOpError, match="inplace=False"):
        tg.function(lambda a: fn(a, True))(np.arange(6.0).reshape(2, 3))
    with pytest.raises(UnsupportedOpError, match=f"{name}: tensors are immutable"):
        reference(t)  # NumPy's own function on a tensor: the same error
    out = fn(t, False)
    assert isinstance(out, EagerTensor)
    np.testing.assert_array_equal(t.numpy(), np.arange(6.0).reshape(2, 3))


def test_put_gradient_reaches_array_and_values():
    ga, gv = tg.grad(lambda a, v: tnp.sum(tnp.put(a, [1, 1, 3], v, inplace=False) ** 2),
                     argnums=(0, 1))(np.arange(4.0), np.array([2.0, 3.0, 5.0]))
    np.testing.assert_array_equal(ga, [0.0, 0.0, 4.0, 0.0])  # written positions get none
    np.testing.assert_array_equal(gv, [0.0, 6.0, 10.0])      # the last write to 1 wins


def test_update_errors_name_the_function():
    with pytest.raises(ShapeError, match="fill_diagonal: array must be at least 2-d"):
        tnp.fill_diagonal(np.zeros(3), 1.0, inplace=False)
    with pytest.raises(ShapeError, match="fill_diagonal: all dimensions"):
        tnp.fill_diagonal(np.zeros((2, 3, 2)), 1.0, inplace=False)
    with pytest.raises(InvalidArgumentError, match="place: cannot insert from an empty"):
        tnp.place(tg.constant(np.zeros(3)), np.array([True, False, False]), [], inplace=False)
    with pytest.raises(ShapeError, match="place: mask and data must be the same size"):
        tnp.place(np.zeros(3), np.array([True]), [1.0], inplace=False)


# -- functions of functions, polynomials ---------------------------------------------------------


def test_function_argument_errors():
    with pytest.raises(InvalidArgumentError, match="piecewise: with 1 condition"):
        tnp.piecewise(X, [X > 0], [1.0, 2.0, 3.0])
    with pytest.raises(InvalidArgumentError, match="apply_along_axis: cannot apply"):
        tnp.apply_along_axis(tnp.sum, 1, np.zeros((0, 3)))
    with pytest.raises(ShapeError, match="apply_over_axes: function is not returning"):
        tnp.apply_over_axes(lambda a, ax: tnp.sum(a), X, 0)
    f = tnp.frompyfunc(lambda a, b: a + b, 2, 1)
    assert (f.nin, f.nout, f.nargs) == (2, 1, 3)
    with pytest.raises(InvalidArgumentError, match="takes 2 arguments"):
        f(X)
    with pytest.raises(InvalidArgumentError, match="kaiser: M must be a Python int"):
        tnp.kaiser(4.5, 2.0)


def test_piecewise_and_apply_along_axis_from_numpy_on_tensors():
    t = tg.constant(X[0])
    got = np.piecewise(t, [t < 0], [lambda v: -v, lambda v: v])
    np.testing.assert_array_equal(got.numpy(), np.abs(X[0]))
    got = np.apply_along_axis(np.sum, 0, tg.constant(np.arange(6.0).reshape(2, 3)))
    np.testing.assert_array_equal(got.numpy(), [3.0, 5.0, 7.0])


@pytest.mark.parametrize("optimize", ["greedy", "optimal", False])
def test_einsum_path_is_numpys_on_the_shapes(optimize):
    a, b, c = np.ones((2, 3)), np.ones((3, 4)), np.ones((4, 5))
    want = np.einsum_path("ij,jk,kl->il", a, b, c, optimize=optimize)
    assert tnp.einsum_path("ij,jk,kl->il", tg.constant(a), b, c, optimize=optimize) == want
    assert np.einsum_path("ij,jk,kl->il", a, tg.constant(b), c, optimize=optimize) == want

    @tg.function
    def traced(x):
        assert tnp.einsum_path("ij,jk,kl->il", x, b, c, optimize=optimize) == want
        return x

    traced(a)


def test_poly_edges():
    assert tnp.poly([]) == np.poly([]) == 1.0
    m = np.array([[1.0, 2.0], [-3.0, 4.0]])  # complex eigenvalues, a real polynomial
    np.testing.assert_allclose(tnp.poly(tg.constant(m)).numpy(), np.poly(m), atol=1e-13)
    with pytest.raises(ShapeError, match="poly: input must be 1d"):
        tnp.poly(np.zeros((2, 3)))


def test_polydiv_remainder_is_trimmed_like_numpys_where_values_are_known():
    u, v = np.array([1.0, 3.0, 3.0, 1.0]), np.array([1.0, 1.0])  # (x+1)^3 / (x+1): r = 0
    for got in (tnp.polydiv(u, v), [x.numpy() for x in tnp.polydiv(tg.constant(u), v)]):
        for g, w in zip(got, np.polydiv(u, v), strict=True):
            np.testing.assert_array_equal(g, w)
    u32, v32 = np.float32([1.3, 2.1, -0.7, 0.2, 5.0]), np.float32([0.3, -1.1])
    for g, w in zip(tnp.polydiv(tg.constant(u32), v32), np.polydiv(u32, v32), strict=True):
        np.testing.assert_array_equal(g.numpy(), w)  # float32: NumPy keeps its ~1e-7 "zeros"
    # traced: the remainder keeps len(v) - 1 entries, whatever their values
    q, r = tg.function(tnp.polydiv)(u, v)
    np.testing.assert_array_equal(q, np.polydiv(u, v)[0])
    np.testing.assert_array_equal(r, [0.0])


# -- ufuncs -------------------------------------------------------------------------------------


def test_numpy_ufuncs_reach_tracegrad():
    a, b = tg.constant(np.array([12, -18, 0])), np.array([8, 12, 0])
    np.testing.assert_array_equal(np.gcd(a, b).numpy(), np.gcd(a.numpy(), b))
    np.testing.assert_array_equal(np.lcm(a, b).numpy(), np.lcm(a.numpy(), b))
    x = tg.constant(np.array([1.0, 0.0, -2.0]))
    np.testing.assert_array_equal(np.nextafter(x, 0.0).numpy(), np.nextafter(x.numpy(), 0.0))
    np.testing.assert_array_equal(np.spacing(x).numpy(), np.spacing(x.numpy()))
    np.testing.assert_array_equal(np.i0(x).numpy(), np.i0(x.numpy()))
    with pytest.raises(tg.errors.DTypeError, match="gcd"):
        tnp.gcd(np.array([1.0]), 2)
    flags = np.array([True, False])  # NumPy computes these in float16
    got = tnp.nextafter(flags, flags[::-1])
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, np.nextafter(flags, flags[::-1]))


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_float16_nextafter_and_spacing_are_numpys_bits(backend):
    bits = np.arange(0, 2 ** 16, 7, dtype=np.uint16)
    x = bits.view(np.float16)
    x = x[np.isfinite(x)]
    with np.errstate(all="ignore"):
        expected = np.spacing(x)
        toward = np.nextafter(x, np.float16(0))
    np.testing.assert_array_equal(tg.function(tnp.spacing, backend=backend)(x).view(np.uint16),
                                  expected.view(np.uint16))
    got = tg.function(lambda v: tnp.nextafter(v, np.float16(0)), backend=backend)(x)
    np.testing.assert_array_equal(got.view(np.uint16), toward.view(np.uint16))


def test_i0_gradient_is_i1():
    import scipy.special

    x = np.concatenate([-np.geomspace(1e-3, 700.0, 40), [0.0], np.geomspace(1e-3, 700.0, 40)])
    want = np.sign(x) * scipy.special.i1(np.abs(x))
    np.testing.assert_allclose(tg.vmap(tg.grad(tnp.i0))(x), want, rtol=4e-15, atol=0)
    v = tg.Variable(x)
    with tg.GradientTape() as tape:
        y = tnp.sum(tnp.i0(v))
    np.testing.assert_allclose(tape.gradient(y, v).numpy(), want, rtol=4e-15, atol=0)
    # i1' through the gradient's own composition
    np.testing.assert_allclose(tg.grad(tg.grad(tnp.i0))(2.5), scipy.special.ivp(1, 2.5),
                               rtol=1e-14)
    np.testing.assert_allclose(tg.grad(tg.grad(tnp.i0))(20.0), scipy.special.ivp(1, 20.0),
                               rtol=1e-14)


def _edges(dt):
    fi = np.finfo(dt)
    return np.array([0.0, -0.0, 1.0, -1.0, 0.5, 3.3, fi.max, -fi.max, fi.tiny, -fi.tiny,
                     fi.smallest_subnormal, -fi.smallest_subnormal, np.inf, -np.inf, np.nan], dt)


@pytest.mark.parametrize("dt", [np.float64, np.float32])
def test_nextafter_and_spacing_bit_for_bit_on_numba(dt):
    x, y = (g.ravel() for g in np.meshgrid(_edges(dt), _edges(dt)))
    f = tg.function(lambda a, b: (tnp.nextafter(a, b), tnp.spacing(a)), backend="numba")
    got = f(x, y)
    with np.errstate(all="ignore"):
        want = np.nextafter(x, y), np.spacing(x)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == dt
        np.testing.assert_array_equal(g.view(f"i{g.itemsize}"), w.view(f"i{w.itemsize}"))


def test_gcd_lcm_on_numba():
    a = np.array([0, 0, -4, 6, 12, -7, 2**40, 35, 1, -1])
    b = np.array([0, 5, 6, -4, 18, 0, 3 * 2**20, -21, 1, 0])
    f = tg.function(lambda a, b: (tnp.gcd(a, b), tnp.lcm(a, b)), backend="numba")
    for dt in (np.int64, np.int32):
        x, y = a.astype(dt) % 1000 if dt == np.int32 else a, b.astype(dt)
        for g, w in zip(f(x, y), (np.gcd(x, y), np.lcm(x, y)), strict=True):
            assert g.dtype == w.dtype
            np.testing.assert_array_equal(g, w)
