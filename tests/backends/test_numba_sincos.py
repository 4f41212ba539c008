"""sin and cos of one operand in one fused loop share a range reduction: the nest calls
`_sin_cos_fast_v` once (the re-run for huge arguments `_sin_cos_v`), never `_sin_fast_v`
and `_cos_fast_v` separately, and the values are bit for bit those of the separate
functions (the same reduction and polynomials), within MAX_ULP of NumPy."""

import re
import sys

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tests.backends.test_numba_vector_math import (_HALF_PIS, _SPECIALS, MAX_ULP, _near,
                                                   _ulp_error, _wide, assert_vectorized)

pytest.importorskip("tracegrad.backends.numba")


def _calls(source: str, helper: str) -> int:
    return len(re.findall(rf"\b{helper}\(", source))


def _sin_cos(x):
    return tnp.sin(x) * 2.0 + tnp.cos(x), tnp.cos(x) - tnp.sin(x)


def _domain():
    r = np.random.default_rng(21)
    return np.concatenate([_wide(r), _HALF_PIS(r), _near(r, [0.0], lo=-300, hi=0),
                           r.uniform(-1e7, 1e7, 10_000), r.uniform(823_000, 824_000, 5_000),
                           _SPECIALS])


def _same_bits(got, want):
    got, want = np.asarray(got), np.asarray(want)
    diff = np.flatnonzero(got.view(np.int64) != want.view(np.int64))
    assert diff.size == 0, (diff[:5], got[diff[:5]], want[diff[:5]])


def test_a_nest_with_sin_and_cos_of_one_operand_reduces_it_once():
    f = tg.function(_sin_cos, backend="numba")
    graph = f.get_concrete_function(tg.TensorSpec([None], tnp.float64)).graph
    source = tg.compiled_source(graph)
    fast, rerun = source.split("    if big", 1)
    assert _calls(fast, "_sin_cos_fast_v") == 1, source
    assert _calls(fast, "_sin_fast_v") == _calls(fast, "_cos_fast_v") == 0, source
    assert _calls(rerun, "_sin_cos_v") == 1 and _calls(rerun, "_sin_v") == 0, source
    assert _calls(fast, "_trig_huge") == 1, source


def test_the_gradient_of_sin_shares_its_reduction_with_the_value():
    f = tg.function(tg.value_and_grad(lambda x: tnp.sum(tnp.tanh(x) * tnp.sin(x) + x ** 2)),
                    backend="numba")
    source = tg.compiled_source(f.get_concrete_function(np.ones(100)).graph)
    fast = source.split("    if big", 1)[0]
    assert _calls(fast, "_sin_cos_fast_v") == 1, source
    assert _calls(fast, "_sin_fast_v") == _calls(fast, "_cos_fast_v") == 0, source


@pytest.mark.parametrize("huge", [False, True])
def test_shared_sin_and_cos_are_the_separate_ones_bit_for_bit(huge):
    x = _domain()
    if not huge:  # only the fast reduction runs
        x = x[np.abs(x) < 823_549.0]
    assert (np.abs(x[np.isfinite(x)]) >= 823_549.0).any() == huge
    got = tg.function(lambda x: (tnp.sin(x), tnp.cos(x)), backend="numba")(x)
    sin = tg.function(tnp.sin, backend="numba")(x)
    cos = tg.function(tnp.cos, backend="numba")(x)
    _same_bits(got[0], sin)
    _same_bits(got[1], cos)
    with np.errstate(all="ignore"):
        for g, want in ((got[0], np.sin(x)), (got[1], np.cos(x))):
            err = _ulp_error(g, want)
            assert not np.nanmax(np.nan_to_num(err, nan=np.inf)) > MAX_ULP
    both = tg.function(_sin_cos, backend="numba")(x)
    _same_bits(both[0], np.asarray(sin) * 2.0 + np.asarray(cos))
    _same_bits(both[1], np.asarray(cos) - np.asarray(sin))


def test_the_helpers_return_the_separate_helpers_values():
    import numba

    from tracegrad.backends.numba import helpers

    tg.function(lambda x: tnp.sin(x) + tnp.cos(x), backend="numba")(np.ones(2))
    mod = sys.modules[helpers.MODULE]
    for pair, sin, cos in ((mod._sin_cos_fast_v, mod._sin_fast_v, mod._cos_fast_v),
                           (mod._sin_cos_v, mod._sin_v, mod._cos_v)):
        @numba.njit(error_model="numpy")
        def run(x, s, c, s1, c1):
            for i in range(x.shape[0]):
                p = pair(x[i])
                s[i], c[i] = p[0], p[1]
                s1[i], c1[i] = sin(x[i]), cos(x[i])

        x = _domain()
        s, c, s1, c1 = (np.empty_like(x) for _ in range(4))
        run(x, s, c, s1, c1)
        _same_bits(s, s1)
        _same_bits(c, c1)


def test_a_loop_over_the_pair_is_vectorized_and_calls_nothing():
    import numba

    from tracegrad.backends.numba import helpers

    tg.function(lambda x: tnp.sin(x) + tnp.cos(x), backend="numba")(np.ones(2))
    pair = sys.modules[helpers.MODULE]._sin_cos_fast_v

    @numba.njit(error_model="numpy")
    def loop(x, s, c):
        for i in range(x.shape[0]):
            p = pair(x[i])
            s[i], c[i] = p[0], p[1]

    loop(np.linspace(0.1, 0.9, 64), np.empty(64), np.empty(64))
    assert_vectorized(loop, "_sin_cos_fast_v")
