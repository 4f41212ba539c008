"""The branch-free float64 libm of generated kernels (vecmath.py) against NumPy, over every range.

The kernels call these instead of libm so that their loops vectorize; they must stay within
a few ulp of NumPy everywhere (huge arguments, subnormals, signed zeros, inf, NaN, each
function's hard spots) and keep the loops free of calls.
"""

import math
import re
import sys

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tests.backends._codegen_probe import PACKED as _PACKED, sin_kernel_facts
from tracegrad import ops

MAX_ULP = 4

# name -> (tracegrad function, NumPy oracle)
UNARY = {
    "exp": (tnp.exp, np.exp), "expm1": (tnp.expm1, np.expm1), "exp2": (tnp.exp2, np.exp2),
    "log": (tnp.log, np.log), "log1p": (tnp.log1p, np.log1p), "log2": (tnp.log2, np.log2),
    "log10": (tnp.log10, np.log10), "sin": (tnp.sin, np.sin), "cos": (tnp.cos, np.cos),
    "tan": (tnp.tan, np.tan), "asin": (tnp.arcsin, np.arcsin), "acos": (tnp.arccos, np.arccos),
    "atan": (tnp.arctan, np.arctan), "sinh": (tnp.sinh, np.sinh), "cosh": (tnp.cosh, np.cosh),
    "tanh": (tnp.tanh, np.tanh), "asinh": (tnp.arcsinh, np.arcsinh),
    "acosh": (tnp.arccosh, np.arccosh), "atanh": (tnp.arctanh, np.arctanh),
    "erf": (ops.erf, np.vectorize(math.erf, otypes=[np.float64])),
}
_COMPILED = {}


def _ulp_error(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.abs(got - want) / np.spacing(np.abs(want))
    return np.where(same, 0.0, err)  # NaN against a number stays NaN: fails `<=`


def _compiled(name, dtype=tnp.float64):
    key = (name, dtype)
    if key not in _COMPILED:
        fn = UNARY[name][0]
        f = tg.function(lambda x: fn(x), backend="numba")
        _COMPILED[key] = f.get_concrete_function(tg.TensorSpec([None], dtype))
    return _COMPILED[key]


def _check(name, x):
    x = np.asarray(x, np.float64)
    with np.errstate(all="ignore"):
        want = UNARY[name][1](x)
    got = np.asarray(_compiled(name)(x))
    err = _ulp_error(got, want)
    worst = int(np.argmax(np.nan_to_num(err, nan=np.inf)))
    assert not err[worst] > MAX_ULP, (name, x[worst], got[worst], want[worst], err[worst])
    zero = want == 0
    np.testing.assert_array_equal(np.signbit(got[zero]), np.signbit(want[zero]))


def _wide(rng, n=40_000):
    """Finite doubles of every exponent (subnormals too) and both signs."""
    mant = rng.uniform(1.0, 2.0, n)
    expo = rng.integers(-1074, 1024, n)
    return np.ldexp(mant, expo) * rng.choice([-1.0, 1.0], n)


def _near(rng, at, n=10_000, lo=-16, hi=-1):
    """Points at +- 10**U(lo, hi) around each of `at` (relative to it when it is not 0)."""
    at = np.asarray(at, np.float64)
    d = 10.0 ** rng.uniform(lo, hi, (len(at), n)) * rng.choice([-1.0, 1.0], (len(at), n))
    scale = np.where(at == 0, 1.0, np.abs(at))[:, None]
    return (at[:, None] + d * scale).ravel()


@pytest.mark.parametrize("name", sorted(UNARY))
def test_every_exponent_and_sign(name):
    _check(name, _wide(np.random.default_rng(11)))


@pytest.mark.parametrize("name", sorted(UNARY))
def test_moderate_arguments(name):
    rng = np.random.default_rng(5)
    _check(name, np.concatenate([rng.uniform(-1, 1, 20_000), rng.uniform(-12, 12, 20_000),
                                 rng.uniform(-800, 800, 10_000)]))


def _HALF_PIS(r):
    return np.concatenate([np.arange(1, 20_000), r.integers(1, 10**12, 10_000)]) * (np.pi / 2)


_HARD = {
    "exp": lambda r: [_near(r, [-745.13, -708.4, 709.78]), r.uniform(-746, 710, 20_000)],
    "expm1": lambda r: [_near(r, [0.0], lo=-300, hi=0), _near(r, [np.log(2) / 2, -0.35, 1.0]),
                        r.uniform(-40, 0, 10_000), r.uniform(35, 709.78, 5_000)],
    "exp2": lambda r: [r.uniform(-1076, 1024, 20_000), _near(r, [-1074.0, -1022.0, 1023.5, 1.0])],
    "log": lambda r: [_near(r, [1.0]), 10.0 ** r.uniform(-320, 308, 10_000)],
    "log1p": lambda r: [_near(r, [0.0], lo=-300, hi=0), -1.0 + 10.0 ** r.uniform(-16, 0, 10_000),
                        r.uniform(-1, 3, 10_000), 10.0 ** r.uniform(0, 308, 5_000)],
    "log2": lambda r: [_near(r, [1.0, 0.5, 2.0]), 2.0 ** np.arange(-1074, 1024)],
    "log10": lambda r: [_near(r, [1.0, 0.1, 10.0]), 10.0 ** np.arange(-300, 301)],
    # near multiples of pi/2 the results are tiny (or huge): the reduction must carry pi/2
    # far beyond double precision
    "sin": lambda r: [_HALF_PIS(r), _near(r, [0.0], lo=-300, hi=0)],
    "cos": lambda r: [_HALF_PIS(r), r.uniform(-1e7, 1e7, 10_000)],
    "tan": lambda r: [_HALF_PIS(r), np.arange(1, 20_000) * (np.pi / 4),
                      r.uniform(-1e7, 1e7, 10_000), r.uniform(823_000, 824_000, 5_000)],
    "asin": lambda r: [_near(r, [1.0, -1.0, 0.5, -0.5, 0.0]), r.uniform(-1, 1, 20_000)],
    "acos": lambda r: [_near(r, [1.0, -1.0, 0.5, -0.5, 0.0]), r.uniform(-1, 1, 20_000)],
    "atan": lambda r: [_near(r, [np.sqrt(2) - 1, np.sqrt(2) + 1, 1.0, 0.0]),
                       10.0 ** r.uniform(-20, 300, 10_000)],
    "sinh": lambda r: [_near(r, [1.0, -1.0, 0.0, 710.47]), r.uniform(-711, 711, 10_000)],
    "cosh": lambda r: [_near(r, [0.0, 1.0, 710.47, -710.47]), r.uniform(-711, 711, 10_000)],
    "tanh": lambda r: [_near(r, [0.0, 0.55, 19.0]), r.uniform(-25, 25, 20_000)],
    "asinh": lambda r: [_near(r, [0.0, 2.0, -2.0, 2.0**28], lo=-300),
                        10.0 ** r.uniform(-10, 300, 10_000)],
    "acosh": lambda r: [1.0 + 10.0 ** r.uniform(-16, 0.5, 20_000), _near(r, [2.0, 2.0**28]),
                        10.0 ** r.uniform(0, 308, 5_000)],
    "atanh": lambda r: [_near(r, [1.0, -1.0, 0.5, -0.5]), _near(r, [0.0], lo=-300, hi=0),
                        r.uniform(-1, 1, 10_000)],
    "erf": lambda r: [_near(r, [0.0], lo=-300, hi=0), _near(r, [0.75, -0.75, 5.9, 6.0, 1.0]),
                      r.uniform(-7, 7, 20_000)],
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_hard_spots(name):
    _check(name, np.concatenate(_HARD[name](np.random.default_rng(2))))


@pytest.mark.parametrize("name", ["sin", "cos", "tan"])
def test_the_fast_reduction_is_the_full_one_below_its_limit(name):
    # a loop whose arguments are all below TRIG_FAST_LIMIT runs only the Cody-Waite
    # reduction; one that meets a larger argument runs again with the full reduction: the
    # same bits for every element the fast pass could compute
    from tracegrad.backends.numba.vecmath_trig import TRIG_FAST_LIMIT

    r = np.random.default_rng(8)
    k = np.concatenate([np.arange(1, 5_000), r.integers(1, int(TRIG_FAST_LIMIT / 1.6), 5_000)])
    x = np.concatenate([_near(r, k * (np.pi / 2), n=2), r.uniform(-TRIG_FAST_LIMIT,
                                                                  TRIG_FAST_LIMIT, 5_000)])
    x = x[np.abs(x) < TRIG_FAST_LIMIT]
    _check(name, x)
    fast = np.asarray(_compiled(name)(x))
    for big in (1e10, np.inf, TRIG_FAST_LIMIT):
        full = np.asarray(_compiled(name)(np.append(x, big)))
        np.testing.assert_array_equal(full[:-1], fast)
    assert "_fast_v(" in tg.compiled_source(_compiled(name).graph)


_SPECIALS = np.array([
    0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -5e-324, 2.2250738585072014e-308, 1e-300,
    -1e-300, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 1.0 - 2.0**-53, 1.0 + 2.0**-52, -1.0 + 2.0**-53,
    np.pi, -np.pi / 2, 1e-8, 3e-8, 0.75, 5.9, 6.0, 19.0, 30.0, -30.0, 40.0, -60.0, 268435456.0,
    709.78, 709.79, 710.47, 710.48, -745.1, -746.0, 1023.99, 1024.0, -1074.0, -1075.0,
    823548.9, 823549.1, 1e300, -1e300, 1.7976931348623157e308, -1.7976931348623157e308])


@pytest.mark.parametrize("name", sorted(UNARY))
def test_special_values(name):
    _check(name, _SPECIALS)


def test_log2_of_powers_of_two_is_exact():
    x = 2.0 ** np.arange(-1074, 1024)
    np.testing.assert_array_equal(np.asarray(_compiled("log2")(x)), np.arange(-1074, 1024))


@pytest.mark.parametrize("dtype", ["float32"])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_float32_rounds_the_float64_result(name, dtype):
    with np.errstate(all="ignore"):
        x = np.concatenate([np.random.default_rng(4).uniform(-3, 3, 5_000),
                            _SPECIALS]).astype(np.float32)
        want = UNARY[name][1](x.astype(np.float64)).astype(np.float32)
    got = np.asarray(_compiled(name, tnp.float32)(x))
    assert got.dtype == np.float32
    np.testing.assert_array_max_ulp(got, want, maxulp=1)


# -- pow and atan2 -------------------------------------------------------------------------------

_POW = {}


def _pow(x, y):
    if "f" not in _POW:
        f = tg.function(lambda a, b: tnp.power(a, b), backend="numba")
        spec = tg.TensorSpec([None], tnp.float64)
        _POW["f"] = f.get_concrete_function(spec, spec)
    x, y = (np.ascontiguousarray(v, np.float64) for v in np.broadcast_arrays(x, y))
    return x, y, np.asarray(_POW["f"](x, y))


def _check_pow(x, y):
    x, y, got = _pow(x, y)
    with np.errstate(all="ignore"):
        want = np.power(x, y)
    err = _ulp_error(got, want)
    worst = int(np.argmax(np.nan_to_num(err, nan=np.inf)))
    assert not err[worst] > MAX_ULP, (x[worst], y[worst], got[worst], want[worst])
    signed = ~np.isnan(want)
    np.testing.assert_array_equal(np.signbit(got[signed]), np.signbit(want[signed]))


_POW_SPECIALS = np.array([0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, 0.25, 1.5,
                          -2.5, np.inf, -np.inf, np.nan, 5e-324, -5e-324, 1e308, -1e308,
                          2.0**53, -(2.0**53) - 2, 2.0**53 + 1, 1e-308, 0.7])


def test_pow_special_values_follow_numpy():
    x, y = np.meshgrid(_POW_SPECIALS, _POW_SPECIALS)
    _check_pow(x.ravel(), y.ravel())
    _, _, got = _pow([0.0, -0.0, np.nan, 1.0], [0.0, -0.0, 0.0, np.nan])
    np.testing.assert_array_equal(got, [1.0, 1.0, 1.0, 1.0])


def test_pow_every_exponent():
    rng = np.random.default_rng(6)
    x = np.abs(_wide(rng))
    _check_pow(x, rng.uniform(-1, 1, x.size))
    _check_pow(x, rng.uniform(-1e-3, 1e-3, x.size))
    _check_pow(x, rng.choice([0.5, 1.5, -0.5, 2.5, 1 / 3], x.size))


def test_pow_results_over_the_whole_range():
    # y log x spread over [-750, 712]: subnormal results, overflow and everything between
    rng = np.random.default_rng(7)
    x = np.exp(rng.uniform(-700, 700, 40_000))
    _check_pow(x, rng.uniform(-750, 712, x.size) / np.log(x))


def test_pow_near_one_with_huge_exponents():
    # |y log x| up to ~700 with x within 1e-12 of 1: log x must be good to ~2**-62 relative
    rng = np.random.default_rng(8)
    _check_pow(1.0 + rng.uniform(-1e-6, 1e-6, 20_000), rng.uniform(-7e8, 7e8, 20_000))
    _check_pow(1.0 + rng.uniform(-1e-12, 1e-12, 20_000), rng.uniform(-5e14, 5e14, 20_000))
    _check_pow(rng.uniform(0.5, 2, 20_000), rng.choice([1e300, -1e300, 2.0**60], 20_000))


def test_pow_negative_bases_with_integer_exponents():
    rng = np.random.default_rng(9)
    _check_pow(rng.uniform(-10, 10, 20_000), rng.integers(-300, 300, 20_000).astype(float))
    _check_pow(-np.abs(_wide(rng, 20_000)), rng.integers(-3, 4, 20_000).astype(float))
    _check_pow(rng.uniform(-3, -0.1, 20_000), rng.uniform(-3, 3, 20_000))  # NaN


def test_integer_pow_beyond_products_matches_numpy():
    x = np.concatenate([np.random.default_rng(1).uniform(-3, 3, 10_000), _POW_SPECIALS])
    for y in (5, -5, 7, 12, -31):
        f = tg.function(lambda a, y=y: ops.integer_pow(a, y=y), backend="numba")
        with np.errstate(all="ignore"):
            want = np.power(x, float(y))
        got = np.asarray(f(x))
        assert _ulp_error(got, want).max() <= MAX_ULP
        signed = ~np.isnan(want)
        np.testing.assert_array_equal(np.signbit(got[signed]), np.signbit(want[signed]))


def test_atan2_signs_zeros_and_infinities_follow_numpy():
    v = np.array([0.0, -0.0, 1.0, -1.0, 1e-300, -1e-300, 5e-324, 1e300, -1e300, 3.0, -2.5,
                  np.inf, -np.inf, np.nan])
    y, x = (a.ravel() for a in np.meshgrid(v, v))
    f = tg.function(lambda a, b: tnp.arctan2(a, b), backend="numba")
    got = np.asarray(f(y, x))
    want = np.arctan2(y, x)
    assert _ulp_error(got, want).max() <= MAX_ULP
    signed = ~np.isnan(want)
    np.testing.assert_array_equal(np.signbit(got[signed]), np.signbit(want[signed]))
    rng = np.random.default_rng(10)
    y, x = _wide(rng), _wide(rng)
    got = np.asarray(f(y, x))
    assert _ulp_error(got, np.arctan2(y, x)).max() <= MAX_ULP
    y, x = rng.uniform(-5, 5, 40_000), rng.uniform(-5, 5, 40_000)
    assert _ulp_error(np.asarray(f(y, x)), np.arctan2(y, x)).max() <= MAX_ULP


# -- the loops vectorize -------------------------------------------------------------------------

_LIBM = ("exp|exp2|expm1|log|log2|log10|log1p|sin|cos|tan|asin|acos|atan|atan2|sinh|cosh|"
         "tanh|asinh|acosh|atanh|erf|pow|sincos")


def _helper_module():
    from tracegrad.backends.numba import helpers

    _compiled("exp")(np.ones(2))  # loads the helper module under its digest name
    return sys.modules[helpers.MODULE]


@pytest.mark.parametrize("name", sorted({f"_{n}_v" for n in UNARY} | {"_pow_v", "_atan2_v",
                                                                        "_logistic_f64"}
                                        | {f"_{n}_fast_v" for n in ("sin", "cos", "tan")}))
def test_loop_over_the_helper_is_vectorized_and_calls_nothing(name):
    import numba

    fn = getattr(_helper_module(), name)
    if name in ("_pow_v", "_atan2_v"):
        def loop(x, out):
            for i in range(x.shape[0]):
                out[i] = fn(x[i], x[i] + 1.0)
    else:
        def loop(x, out):
            for i in range(x.shape[0]):
                out[i] = fn(x[i])
    jitted = numba.njit(loop, error_model="numpy")
    jitted(np.linspace(0.1, 0.9, 64), np.empty(64))
    assert_vectorized(jitted, name)


def assert_vectorized(jitted, name: str) -> None:
    """`jitted`'s loop uses packed double arithmetic and calls no libm function."""
    asm = "\n".join(jitted.inspect_asm().values())
    assert _PACKED.search(asm), f"{name}: no packed double arithmetic, the loop is scalar"
    assert not re.search(rf"\$({_LIBM})\b", asm), f"{name}: the loop calls libm"


def test_kernels_call_the_helpers_not_libm():
    f = tg.function(lambda x: (ops.erf(x) + tnp.log1p(x) + tnp.arctan2(x, x) + x ** 1.5
                               + tnp.tan(x) + tnp.arccosh(x + 2.0)), backend="numba")
    graph = f.get_concrete_function(tg.TensorSpec([None], tnp.float64)).graph
    source = tg.compiled_source(graph)
    # tan: the fast reduction, and the full one in the re-run for huge arguments
    for helper in ("_erf_v(", "_log1p_v(", "_atan2_v(", "_pow_v(", "_tan_fast_v(", "_tan_v(",
                   "_acosh_v("):
        assert helper in source
    assert not re.search(r"\b(np|math)\.(arctan2|log1p|erf|tan|arccosh|power)\(", source)
    assert "**" not in source
    x = np.random.default_rng(0).uniform(0.1, 3, 1000)
    want = (np.vectorize(math.erf)(x) + np.log1p(x) + np.arctan2(x, x) + x ** 1.5 + np.tan(x)
            + np.arccosh(x + 2.0))
    np.testing.assert_allclose(np.asarray(f(x)), want, rtol=1e-14)


# The vectorizer's choices differ by CPU (AVX-512 Intel cores gather the sin table with
# vgatherqpd; AVX2 AMD cores load it with scalar loads, gathers being slow there), so these
# tests assert what must hold on every x86-64 vector unit, for the host and for the other
# kind of unit, compiled in a subprocess with Numba's target set to it (never run).


def _features() -> list:
    import llvmlite.binding as ll

    return ll.get_host_cpu_features().flatten().split(",")


def _other_unit():
    """(label, NUMBA_CPU_NAME, NUMBA_CPU_FEATURES) of the vector unit the host does not have:
    an AVX2-only AMD core on an AVX-512 host, an AVX-512 Intel core on an AVX2 host."""
    wide = ("avx512", "amx", "avx10")
    feats = _features()
    if "+avx512f" in feats:
        narrow = [("-" + f[1:]) if f.startswith("+") and f[1:].startswith(wide) else f
                  for f in feats]
        return "avx2 (znver3)", "znver3", ",".join(narrow)
    extra = ["+avx512f", "+avx512dq", "+avx512bw", "+avx512vl", "+avx512cd"]
    kept = [f for f in feats if f.lstrip("+-") not in {e[1:] for e in extra}]
    return "avx512 (skylake-avx512)", "skylake-avx512", ",".join(kept + extra)


_SHAPES = [(6,), (4, 5), (2, 3, 4)]


def _host_label() -> str:
    return "avx512" if "+avx512f" in _features() else "avx2" if "+avx2" in _features() else "sse"


def _assert_vectorized(facts, where):
    # a vector loop body with packed double arithmetic on wide registers, and no run-time
    # alias checks: the views of the arguments kept their no-alias facts (with Numba's
    # reshape they lost them, and this loop did not vectorize at all)
    assert facts["vector_loop"], f"{where}: the loop was not vectorized ({facts})"
    assert not facts["alias_checks"], f"{where}: the loop needs run-time alias checks ({facts})"
    assert {"ymm", "zmm"} & set(facts["packed_widths"]), f"{where}: no packed ymm/zmm ({facts})"


@pytest.mark.parametrize("shape", _SHAPES)
def test_sin_loop_vectorizes_over_collapsed_views_on_the_host(shape, tmp_path, monkeypatch):
    from tracegrad.backends import numba as nb

    # compiled here, not loaded from a disk cache (cached machine code has no assembly text)
    monkeypatch.setenv("TRACEGRAD_CACHE_DIR", str(tmp_path))
    nb.clear_memory_cache()
    # a 2-d or 3-d elementwise loop runs over flat views of the arrays; the views must keep
    # the arguments' no-alias facts or the vectorizer gives up on the table reads of sin
    _assert_vectorized(sin_kernel_facts(shape), f"host ({_host_label()}), shape {shape}")
    f = tg.function(lambda a: tnp.sin(a) * 3.0 + 1.0, backend="numba")
    x = np.linspace(-2.0, 2.0, int(np.prod(shape))).reshape(shape)
    np.testing.assert_allclose(np.asarray(f(x)), np.sin(x) * 3.0 + 1.0, rtol=1e-15)


def test_sin_loop_vectorizes_over_collapsed_views_on_the_other_vector_unit(tmp_path):
    import json
    import os
    import subprocess

    label, cpu, features = _other_unit()
    env = dict(os.environ, TRACEGRAD_CACHE_DIR=str(tmp_path), NUMBA_CPU_NAME=cpu,
               NUMBA_CPU_FEATURES=features)
    probe = os.path.join(os.path.dirname(__file__), "_codegen_probe.py")
    args = ["x".join(map(str, s)) for s in _SHAPES]
    out = subprocess.run([sys.executable, probe, *args], env=env, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["target"]["cpu"] == cpu
    assert report["target"]["avx512f"] == ("+avx512f" in features.split(","))
    for shape, facts in zip(_SHAPES, report["kernels"], strict=True):
        _assert_vectorized(facts, f"target {label}, shape {shape}")
        if not report["target"]["avx512f"]:
            assert "zmm" not in facts["packed_widths"], f"{label}: zmm code for an AVX2 target"


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 10, 12, 14])
def test_estrin_evaluates_the_polynomial_in_a_short_chain(n):
    """`vecmath.estrin` writes the same polynomial as `horner`, in about log2(n) + 2
    dependent steps: the value within rounding of the exact one, for every length."""
    from fractions import Fraction

    from tracegrad.backends.numba.vecmath import estrin, horner

    coefs = [repr(1.0 / (k + 1) * (-1) ** k) for k in range(n)]
    fma = {"_fma": lambda a, b, c: a * b + c}
    for x in (0.3, -0.7, 1.9):
        values = {}
        for scheme in (estrin, horner):
            scope = dict(fma, r=x)
            exec(scheme("r", coefs).replace("\n    ", "\n").strip(), scope)  # noqa: S102
            values[scheme.__name__] = scope["p"]
        exact = sum(Fraction(float(c)) * Fraction(x) ** k for k, c in enumerate(coefs))
        scale = sum(abs(float(c)) * abs(x) ** k for k, c in enumerate(coefs))
        for v in values.values():
            assert abs(Fraction(v) - exact) <= 4 * n * 2.0 ** -52 * scale
    fmas = estrin("r", coefs).count("_fma(")  # n - 1 fused multiply-adds, as Horner ...
    assert fmas == n - 1
    chain = len([line for line in estrin("r", coefs).splitlines() if "_x" in line.split("=")[0]])
    assert chain <= max(0, math.ceil(math.log2(n)) - 1)  # ... and the powers r**2, r**4, ...
