"""polyfit's `RankWarning`: NumPy warns when the fit is rank-deficient (and `full` is
False); tracegrad does where the values are known, and not inside a trace, where the rank
is a value of each run (`full=True` returns it)."""

import warnings

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp

X = np.array([1.0, 1.0, 1.0, 2.0])  # two distinct points: rank 2 for a cubic's 4 columns
Y = np.array([1.0, 2.0, 3.0, 4.0])


@pytest.mark.parametrize("call", [
    lambda: tnp.polyfit(X, Y, 3),
    lambda: tnp.polyfit(tg.constant(X), tg.constant(Y), 3),
    lambda: np.polyfit(tg.constant(X), Y, 3),  # through NumPy's dispatch
    lambda: tnp.polyfit(X, Y, 3, w=np.ones(4)),
], ids=["numpy-in", "eager", "np-dispatch", "weights"])
def test_a_rank_deficient_fit_warns_as_numpy_does(call):
    with pytest.warns(np.exceptions.RankWarning, match="poorly conditioned") as numpy_said:
        expected = np.polyfit(X, Y, 3)
    with pytest.warns(np.exceptions.RankWarning, match="poorly conditioned") as said:
        got = call()
    assert [w.category for w in said] == [w.category for w in numpy_said]
    assert said[0].filename == __file__  # the user's line
    np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-10, atol=1e-12)


def test_no_warning_for_a_full_rank_fit_full_output_or_inside_a_trace(numpy_backend):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tnp.polyfit(X, Y, 1)
        np.polyfit(X, Y, 1)
        c, _, rank, _, _ = tnp.polyfit(X, Y, 3, full=True)  # NumPy: no warning with full
        np.polyfit(X, Y, 3, full=True)
        assert int(rank) == 2
        traced = tg.function(lambda x, y: tnp.polyfit(x, y, 3))(X, Y)
    with pytest.warns(np.exceptions.RankWarning):
        np.testing.assert_allclose(traced, np.polyfit(X, Y, 3), rtol=1e-10, atol=1e-12)
