"""Float sums in blocks (docs/numba.md, "Float sums"): NumPy's pairwise order within each
block of SUM_BLOCK elements, block sums combined pairwise; the same bits whether the operand
is an array or fused into the loop, every run; NumPy's bits up to one block (and for 2**k
blocks), within the pairwise error bound beyond."""

import re
import sys

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp

nb = pytest.importorskip("tracegrad.backends.numba")
helpers = pytest.importorskip("tracegrad.backends.numba.helpers")
B = helpers.SUM_BLOCK


def blocked_sum(x):
    """The documented order, in NumPy: np.sum of each block (NumPy's pairwise order), the
    block sums combined by a binary counter (level l: the sum of 2**l blocks), then the
    levels left over added earliest blocks first."""
    x = np.asarray(x)
    if x.size <= B:
        return np.sum(x)
    levels = {}
    for k, lo in enumerate(range(0, x.size, B)):
        s, lvl = np.sum(x[lo:lo + B]), 0
        while k & 1:
            s = levels.pop(lvl) + s
            k >>= 1
            lvl += 1
        levels[lvl] = s
    total = None
    for lvl in sorted(levels, reverse=True):
        total = levels[lvl] if total is None else total + levels[lvl]
    return total


def sums(x):
    """The sum of an array (a helper call) and of a fused operand (the blocked loop)."""
    return tnp.sum(x), tnp.sum(x * 1.0 + 0.0)


SIZES = [0, 1, 7, 100, B - 1, B, B + 1, 3 * B + 5, 4 * B, 8 * B, 100_003]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_sums_follow_the_documented_blocked_pairwise_order(dtype):
    f = tg.function(sums, backend="numba")
    for n in SIZES:
        x = np.random.default_rng(n).standard_normal(n).astype(dtype) * 1e3 + 1.0
        want = blocked_sum(x)
        for got in f(x):
            np.testing.assert_array_equal(got, want, err_msg=f"n={n}")


def test_sums_up_to_one_block_or_of_two_to_the_k_blocks_are_numpy_bit_for_bit():
    f = tg.function(sums, backend="numba")
    for n in [1, 9, 128, 129, 1000, B, 2 * B, 16 * B]:
        x = np.random.default_rng(n).standard_normal(n)
        for got in f(x):
            assert got == np.sum(x), n


def test_longer_sums_are_within_the_pairwise_error_bound_of_numpy():
    """Beyond one block the order differs from NumPy's; both are pairwise sums, so each is
    within eps * log2(n) * sum(|x|) of the exact sum (the bound asserted here, doubled)."""
    f = tg.function(sums, backend="numba")
    eps = np.finfo(np.float64).eps
    for n in [B + 1, 5 * B + 3, 100_003, 1_000_000]:
        x = np.random.default_rng(n).standard_normal(n)
        exact = float(np.sum(x.astype(np.longdouble)))
        bound = 2 * eps * np.log2(n) * np.sum(np.abs(x))
        for got in f(x):
            assert abs(float(got) - exact) <= bound, n
            assert abs(float(got) - float(np.sum(x))) <= bound, n


def test_row_sums_longer_than_a_block_are_blocked_per_row():
    x = np.random.default_rng(3).standard_normal((5, 3 * B + 17))

    def rows(x):
        return tnp.sum(x, axis=1), tnp.sum(tnp.exp(x), axis=1), tnp.max(tnp.exp(x), axis=1)
    got = tg.function(rows, backend="numba")(x)
    np.testing.assert_array_equal(got[0], [blocked_sum(r) for r in x])
    np.testing.assert_array_equal(got[1], [blocked_sum(r) for r in np.asarray(
        tg.function(tnp.exp, backend="numba")(x))])
    np.testing.assert_array_equal(got[2], np.max(np.asarray(
        tg.function(tnp.exp, backend="numba")(x)), axis=1))


def test_a_fused_max_in_blocks_propagates_nan_from_any_block():
    x = np.random.default_rng(4).standard_normal(5 * B)
    x[3 * B + 2] = np.nan
    got = tg.function(lambda x: (tnp.max(x * 2.0), tnp.min(x * 2.0)), backend="numba")(x)
    assert np.isnan(got[0]) and np.isnan(got[1])


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_the_row_max_and_min_run_in_vector_lanes_with_numpys_values(dtype):
    """`_rowmax`/`_rowmin` (a whole array's max/min, block by block): one running value
    updated by LLVM's maximum/minimum, which the loop vectorizer keeps in vector lanes;
    NaN anywhere gives NaN, infinities and every length and offset NumPy's values."""
    from numba import njit, types

    tg.function(lambda x: tnp.max(x * 2.0), backend="numba")(np.ones(3))  # the helpers
    mod = sys.modules[helpers.MODULE]
    s = helpers.SUFFIX[np.dtype(dtype)]
    rng = np.random.default_rng(5)
    for k in ("max", "min"):
        row = getattr(mod, f"_row{k}_{s}")
        for n in (1, 7, 8, 9, 100, B):
            x = rng.standard_normal(n + 3).astype(dtype)
            for lo in (0, 3):
                assert row(x, lo, n) == getattr(np, k)(x[lo:lo + n])
            y = x.copy()
            y[n // 2] = np.inf if k == "max" else -np.inf
            assert row(y, 0, n) == getattr(np, k)(y[:n])
            y[n - 1] = np.nan
            assert np.isnan(row(y, 0, n))
        ty = types.Array(types.float64 if dtype == "float64" else types.float32, 1, "C")
        # compiled here: code loaded from a warm kernel cache has no LLVM text
        sig = (ty, types.int64, types.int64)
        fresh = njit(row.py_func)
        fresh.compile(sig)
        llvm = fresh.inspect_llvm(sig)
        assert re.search(rf"llvm\.{k}imum\.v\d+f(64|32)", llvm)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_the_pairwise_helper_is_numpys_order_on_contiguous_and_strided_rows(dtype):
    """`_pairwise` (its leaves' 8 running sums as one 8-lane vector, a whole block as eight
    leaves) against NumPy's pairwise sum of the same elements, for rows read in place and
    rows read with a stride."""
    import sys

    tg.function(sums, backend="numba")(np.ones(3, dtype))  # the helper module is loaded
    pairwise = getattr(sys.modules[helpers.MODULE], f"_pairwise_{'f64' if dtype == 'float64' else 'f32'}")
    base = np.random.default_rng(5).standard_normal(3 * 6000).astype(dtype) * 1e3 + 1.0
    for n in [1, 7, 8, 9, 127, 128, 129, 1000, B, B + 8, 5000]:
        for x in (base[:n], base[::3][:n]):
            want = np.sum(np.ascontiguousarray(x))
            assert pairwise(x, 0, n) == want, (n, x.strides)
            assert pairwise(base[: n + 5], 5, n) == np.sum(base[5: n + 5]), n
