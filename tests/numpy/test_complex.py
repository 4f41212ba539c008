"""Complex numbers in tracegrad.numpy: dtypes and promotion, values of every function that
takes them against NumPy (eager, traced on both backends), the parts and tests of complex
arrays, NumPy's lexicographic order, and the errors NumPy raises."""

import warnings

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tracegrad.errors import DTypeError, TracerBoolError

RNG = np.random.default_rng(7)
Z = np.array([1 + 2j, 3 - 1j, -0.5 + 0.25j, 0j, 1e-9 + 2e-9j, 40 - 3j, -2 - 0j, 0.3j])
W = RNG.normal(size=Z.shape) + 1j * RNG.normal(size=Z.shape)


def _run(fn, *args, backend):
    """`fn` on tracegrad operands: eagerly on tensors, or traced with `backend`."""
    if backend == "eager":
        return fn(tnp, *[tg.constant(a) for a in args])
    return tg.function(lambda *a: fn(tnp, *a), backend=backend)(*args)


def _check(got, want, what, rtol=1e-13):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    assert got.shape == want.shape, what
    if want.dtype.kind in "fc" and rtol:
        if want.dtype in (np.complex64, np.float32):
            rtol = max(rtol, 2e-6)
        np.testing.assert_allclose(got, want, rtol=rtol, atol=0, equal_nan=True, err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


# (name, function of (np, z, w), relative tolerance against NumPy)
CASES = [
    ("add", lambda np, z, w: z + w, 0), ("sub", lambda np, z, w: z - w, 0),
    ("mul", lambda np, z, w: z * w, 1e-15), ("div", lambda np, z, w: z / (w + 0.5), 1e-15),
    ("neg", lambda np, z, w: -z, 0), ("scalar", lambda np, z, w: 2.5j * z + (1 - 1j), 1e-15),
    ("exp", lambda np, z, w: np.exp(z), 1e-14), ("exp2", lambda np, z, w: np.exp2(z), 1e-14),
    ("expm1", lambda np, z, w: np.expm1(z), 1e-14), ("log", lambda np, z, w: np.log(w), 1e-14),
    ("log2", lambda np, z, w: np.log2(w), 1e-14), ("log10", lambda np, z, w: np.log10(w), 1e-14),
    ("log1p", lambda np, z, w: np.log1p(w), 1e-14), ("sqrt", lambda np, z, w: np.sqrt(z), 1e-15),
    ("sin", lambda np, z, w: np.sin(w), 1e-14), ("cos", lambda np, z, w: np.cos(w), 1e-14),
    ("tan", lambda np, z, w: np.tan(w), 1e-14), ("arcsin", lambda np, z, w: np.arcsin(z), 1e-14),
    ("arccos", lambda np, z, w: np.arccos(z), 1e-14),
    ("arctan", lambda np, z, w: np.arctan(w), 1e-14),
    ("sinh", lambda np, z, w: np.sinh(w), 1e-14), ("cosh", lambda np, z, w: np.cosh(w), 1e-14),
    ("tanh", lambda np, z, w: np.tanh(z * 30), 1e-14),
    ("arcsinh", lambda np, z, w: np.arcsinh(z), 1e-14),
    ("arccosh", lambda np, z, w: np.arccosh(z), 1e-14),
    ("arctanh", lambda np, z, w: np.arctanh(w / 3), 1e-14),
    ("abs", lambda np, z, w: np.abs(z), 1e-15), ("sign", lambda np, z, w: np.sign(z), 1e-15),
    ("square", lambda np, z, w: np.square(z), 1e-15),
    ("reciprocal", lambda np, z, w: np.reciprocal(w), 1e-15),
    ("int_pow", lambda np, z, w: w ** 7, 1e-14), ("neg_pow", lambda np, z, w: w ** -3, 1e-14),
    ("float_pow", lambda np, z, w: w ** 2.5, 1e-14),
    ("complex_pow", lambda np, z, w: (w + 2) ** (0.5 - 0.25j), 1e-14),
    ("zero_pow", lambda np, z, w: np.power(z, w * 0), 0),
    ("eq", lambda np, z, w: z == z[::-1], 0), ("ne", lambda np, z, w: z != w, 0),
    ("lt", lambda np, z, w: z < z[::-1], 0), ("le", lambda np, z, w: z <= z[::-1], 0),
    ("gt", lambda np, z, w: z > w, 0), ("ge", lambda np, z, w: z >= w, 0),
    ("maximum", lambda np, z, w: np.maximum(z, w), 0),
    ("minimum", lambda np, z, w: np.minimum(z, z[::-1]), 0),
    ("isfinite", lambda np, z, w: np.isfinite(z / z.real), 0),
    ("isnan", lambda np, z, w: np.isnan(z / z.real), 0),
    ("where", lambda np, z, w: np.where(np.abs(z) > 1, z, 0), 0),
    ("sum", lambda np, z, w: np.sum(z * w), 1e-14), ("prod", lambda np, z, w: np.prod(w), 1e-14),
    ("mean", lambda np, z, w: np.mean(z), 1e-14), ("var", lambda np, z, w: np.var(w), 1e-14),
    ("std", lambda np, z, w: np.std(w, ddof=1), 1e-14),
    ("cumsum", lambda np, z, w: np.cumsum(w), 1e-14),
    ("cumprod", lambda np, z, w: np.cumprod(w), 1e-14),
    ("dot", lambda np, z, w: np.dot(z, w), 1e-14),
    ("matmul", lambda np, z, w: np.outer(z, w) @ w, 1e-13),
    ("vdot", lambda np, z, w: np.vdot(z, w), 1e-14),
    ("einsum", lambda np, z, w: np.einsum("i,j->ij", z, w), 1e-15),
    ("real", lambda np, z, w: np.real(z), 0), ("imag", lambda np, z, w: np.imag(z), 0),
    ("conj", lambda np, z, w: np.conj(z), 0), ("conjugate", lambda np, z, w: np.conjugate(z), 0),
    ("angle", lambda np, z, w: np.angle(z), 1e-15),
    ("angle_deg", lambda np, z, w: np.angle(w, deg=True), 1e-15),
    ("iscomplex", lambda np, z, w: np.iscomplex(z), 0),
    ("isreal", lambda np, z, w: np.isreal(z), 0),
    ("nan_to_num", lambda np, z, w: np.nan_to_num(z / z.real), 0),
    ("to_float", lambda np, z, w: np.asarray(z).astype(np.float64), 0),
    ("to_int", lambda np, z, w: np.asarray(w * 10).astype(np.int32), 0),
    ("to_bool", lambda np, z, w: np.asarray(z).astype(bool), 0),
    ("to_c64", lambda np, z, w: np.asarray(w).astype(np.complex64) * 2, 0),
    ("from_float", lambda np, z, w: np.asarray(w.real).astype(np.complex128) + 1j, 0),
    ("sort_complex", lambda np, z, w: np.sort_complex(z), 0),
    ("reshape_index", lambda np, z, w: np.reshape(z, (2, 4))[:, ::-1].T[1:], 0),
    ("concatenate", lambda np, z, w: np.concatenate([z, w[:3]]), 0),
    ("take", lambda np, z, w: np.take(z, np.array([3, 0, 0])), 0),
]


@pytest.mark.parametrize("backend", ["eager", "numpy"])
@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
@pytest.mark.parametrize("name,fn,rtol", CASES, ids=[c[0] for c in CASES])
def test_values_equal_numpys(name, fn, rtol, dtype, backend):
    z, w = Z.astype(dtype), W.astype(dtype)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
        want = fn(np, z, w)
        got = _run(fn, z, w, backend=backend)
    _check(got, want, f"{name} {np.dtype(dtype).name} {backend}", rtol)


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
def test_values_equal_numpys_in_one_numba_kernel(dtype):
    # every case of CASES as an output of one compiled function (one compile, not one each)
    z, w = Z.astype(dtype), W.astype(dtype)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
        want = [fn(np, z, w) for _, fn, _ in CASES]
        got = _run(lambda np_, z, w: tuple(fn(np_, z, w) for _, fn, _ in CASES), z, w,
                   backend="numba")
    assert len(got) == len(CASES)
    for (name, _, rtol), g, x in zip(CASES, got, want, strict=True):
        _check(g, x, f"{name} {np.dtype(dtype).name} numba", rtol)


WEAK = [True, 1, 1.5, 2j]


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint32", "int64", "float16", "float32",
                                   "float64", "complex64", "complex128"])
def test_promotion_with_python_complex_and_complex_arrays_is_numpys(dtype):
    x = np.ones(2, dtype)
    for other in [*WEAK, np.ones(2, np.complex64), np.ones(2, np.complex128)]:
        want = (x + other).dtype
        assert tnp.add(x, other).dtype == want, (dtype, other)
        got = tg.function(lambda a, o=other: tnp.multiply(a, o))(x)
        assert got.dtype == (x * other).dtype, (dtype, other)


def test_python_complex_scalars_are_weak_arguments_and_literals():
    f = tg.function(lambda z, s: z * s)
    z = np.ones(2, np.complex64)
    assert f(z, 2j).dtype == np.complex64
    np.testing.assert_array_equal(f(z, 3 + 1j), z * (3 + 1j))
    assert f.tracing_count == 1  # a new complex value: no retrace
    a = tnp.asarray([1 + 2j, 3])
    assert a.dtype == np.complex128
    np.testing.assert_array_equal(a, [1 + 2j, 3])
    assert tnp.zeros(2, dtype=tnp.complex64).dtype == np.complex64
    assert tg.constant(1j).dtype == np.complex128
    assert tnp.full(3, 1 - 1j).dtype == np.complex128


def test_tensor_parts_and_methods():
    t = tg.constant(Z)
    np.testing.assert_array_equal(t.real, Z.real)
    np.testing.assert_array_equal(t.imag, Z.imag)
    np.testing.assert_array_equal(t.conj(), Z.conj())
    np.testing.assert_array_equal(t.conjugate(), Z.conj())
    r = tg.constant(np.arange(3.0))
    np.testing.assert_array_equal(r.imag, np.zeros(3))
    assert r.conj() is r or np.array_equal(r.conj(), r)

    @tg.function
    def parts(z):
        return z.real * z.imag + abs(z)

    np.testing.assert_allclose(parts(Z), Z.real * Z.imag + np.abs(Z), rtol=1e-15)


def test_complexness_tests():
    assert tnp.iscomplexobj(tg.constant(Z)) and not tnp.isrealobj(Z)
    assert tnp.isrealobj(np.ones(2)) and not tnp.iscomplexobj(np.ones(2))
    assert np.iscomplexobj(tg.constant(Z))  # the NumPy function on a tensor
    almost = Z.real + 1e-20j
    got = tnp.real_if_close(tg.constant(almost))
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, Z.real)
    assert tnp.real_if_close(tg.constant(Z)).dtype == np.complex128
    with pytest.raises(TracerBoolError, match="real_if_close"):
        tg.function(tnp.real_if_close)(Z)
    for dt in ("int8", "uint16", "int32", "float32", "bool"):
        x = np.array([3, 1, 2]).astype(dt)
        got = tnp.sort_complex(x)
        assert got.dtype == np.sort_complex(x).dtype
        np.testing.assert_array_equal(got, np.sort_complex(x))


def test_lexicographic_order_with_nans_is_numpys_on_both_backends():
    nan = np.nan
    a = np.array([1 + 1j, 1 + 1j, complex(nan, 0), complex(0, nan), 2 + 0j, complex(1, nan), 3j])
    b = np.array([1 + 2j, 0 + 5j, 1 + 1j, 0 + 1j, complex(nan, 1), complex(2, 0), 3j])
    fns = (np.less, np.less_equal, np.greater, np.greater_equal, np.maximum, np.minimum,
           np.fmax, np.fmin)
    for backend in ("numpy", "numba"):
        got = tg.function(lambda x, y: [getattr(tnp, fn.__name__)(x, y) for fn in fns],
                          backend=backend)(a, b)
        for fn, g in zip(fns, got, strict=True):
            _check(g, fn(a, b), f"{fn.__name__} {backend}", rtol=0)


def test_numpys_errors_for_complex():
    z = tg.constant(Z)
    for fn in (tnp.floor, tnp.ceil, tnp.trunc, tnp.signbit):
        with pytest.raises(DTypeError, match=fn.__name__):
            fn(z)
    with pytest.raises(DTypeError, match="floor_divide"):
        z // 2
    with pytest.raises(DTypeError, match="isposinf"):
        tnp.isposinf(z)
    with pytest.raises(DTypeError, match="arctan2"):
        tg.function(lambda a: tnp.arctan2(a, a))(Z)
    with pytest.raises(DTypeError, match="floor"):
        tg.function(lambda a: tnp.floor(a))(Z)


def test_complex_values_in_the_ir_round_trip():
    def f(z, x):
        return tnp.exp(1j * x) * z + (2 - 3j) + np.array([1 + 1j, complex(np.nan, np.inf)],
                                                           np.complex64)

    g = tg.trace(f)(tg.TensorSpec([2], "complex64"), tg.TensorSpec([2], "float32"))
    text = str(g)
    assert "c64[2]" in text and "nan+infj" in text
    assert str(tg.FuncGraph.parse(text)) == text
    assert str(tg.FuncGraph.from_json(g.to_json())) == text


def test_sorting_and_extrema_in_numpys_order_on_both_backends():
    nan = np.nan
    rng = np.random.default_rng(0)
    z = np.array([3 + 1j, 1 + 2j, complex(nan, 1), 1 + 1j, complex(1, nan), complex(nan, nan),
                  complex(nan, 0), -1 + 5j, 1 + 1j, 0j, complex(-np.inf, 2), complex(2, nan)])
    z = np.concatenate([z, rng.integers(-2, 3, 30) + 1j * rng.integers(-2, 3, 30)])
    finite = z[np.isfinite(z)]
    cases = [(np.sort, z), (np.argsort, z), (np.max, finite), (np.min, z), (np.argmax, finite),
             (np.argmin, finite), (np.argmax, z)]
    for dtype in (np.complex128, np.complex64):
        xs = [x.astype(dtype) for _, x in cases]
        wants = [fn(x, kind="stable") if fn in (np.sort, np.argsort) else fn(x)
                 for (fn, _), x in zip(cases, xs, strict=True)]
        m = z[:12].reshape(3, 4).astype(dtype)

        def all_cases(m, *xs):  # one compile for every case
            return [tnp.max(m, axis=1)] + [getattr(tnp, fn.__name__)(x)
                                           for (fn, _), x in zip(cases, xs, strict=True)]

        for backend in ("numpy", "numba"):
            got = tg.function(all_cases, backend=backend)(m, *xs)
            _check(got[0], np.max(m, axis=1), f"max axis=1 {backend}", rtol=0)
            for (fn, _), g, want in zip(cases, got[1:], wants, strict=True):
                _check(g, want, f"{fn.__name__} {backend}", rtol=0)
