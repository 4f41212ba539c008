"""Three NumPy programs written by others, loaded from the installed packages with only
`np` rebound to tracegrad.numpy (examples/with_numpy.py): their values equal NumPy's on
both backends, eagerly and traced, and their gradients central differences."""

import sys

import black_scholes
import chebyshev_clenshaw
import logistic_descent
import numpy as np
import numpy.polynomial.chebyshev as chebyshev
import pytest
from numba.tests.test_parfors import lr_impl

import tracegrad as tg
import tracegrad.numpy as tnp

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1]))
from finite_diff import central_difference  # noqa: E402


def _lr_numpy(Y, X, w, n):
    return lr_impl(Y, X, np.array(w), n)  # NumPy updates `w` in place


PROGRAMS = {
    "chebval2d": (chebyshev_clenshaw.chebval2d, chebyshev.chebval2d,
                  chebyshev_clenshaw.data(points=30), (0, 1, 2), ()),
    "black_scholes": (black_scholes.black_scholes, black_scholes.black_scholes_numpy,
                      black_scholes.data(options=16), (0, 1, 2, 3, 4), ()),
    "lr_impl": (logistic_descent.train, _lr_numpy, (*logistic_descent.data(rows=12)[:3], 6),
                (1, 2), (3,)),
}


def _tuple(out):
    return out if isinstance(out, tuple) else (out,)


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("name", PROGRAMS)
def test_values_equal_numpys_traced_on_both_backends(name, backend):
    program, reference, args, _, static = PROGRAMS[name]
    got = tg.function(program, static_argnums=static, backend=backend)(*args)
    for g, w in zip(_tuple(got), _tuple(reference(*args)), strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("name", PROGRAMS)
def test_values_equal_numpys_eagerly_and_on_numpy_input(name):
    program, reference, args, _, _ = PROGRAMS[name]
    want = _tuple(reference(*args))
    eager = [tg.constant(a) if isinstance(a, np.ndarray) else a for a in args]
    for out, kind in ((program(*eager), tg.Tensor), (program(*args), np.ndarray)):
        for g, w in zip(_tuple(out), want, strict=True):
            assert isinstance(g, kind)
            np.testing.assert_array_equal(np.asarray(g), w)


@pytest.mark.parametrize("name, backend", [(name, "numpy") for name in PROGRAMS]
                         + [("black_scholes", "numba")])
def test_gradients_equal_central_differences(name, backend):
    program, reference, args, argnums, static = PROGRAMS[name]

    def total(*a):
        return sum(tnp.sum(o) for o in _tuple(program(*a)))

    # the numba backend on one program: compiling gradients through unrolled loops takes
    # it tens of seconds (docs/performance.md)
    grads = tg.function(tg.grad(total, argnums=argnums), static_argnums=static,
                        backend=backend)(*args)
    for k, g in zip(argnums, grads, strict=True):
        def along(v, k=k):
            return sum(np.sum(o) for o in _tuple(reference(*args[:k], v, *args[k + 1:])))

        fd = central_difference(along, args[k])
        np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-6 * max(1.0, np.abs(fd).max()))


def test_black_scholes_delta_is_the_normal_cdf_approximation_of_d1():
    S, X, T, R, V = black_scholes.data(options=8)
    delta = tg.grad(lambda s: tnp.sum(black_scholes.black_scholes(s, X, T, R, V)[0]))(S)
    from numba.tests.test_blackscholes import cnd_array
    d1 = (np.log(S / X) + (R + 0.5 * V * V) * T) / (V * np.sqrt(T))
    # the call's delta is N(d1) for the exact normal CDF; with the polynomial N it is
    # N(d1) plus terms of the polynomial's error, which is below 1e-7
    np.testing.assert_allclose(delta, cnd_array(d1), atol=1e-6)


def test_docs_programs_example_runs():
    import pathlib
    import re

    doc = pathlib.Path(__file__).resolve().parents[2] / "docs" / "programs.md"
    (block,) = re.findall(r"```python\n(.*?)```", doc.read_text(), flags=re.DOTALL)
    namespace = {}
    exec(compile(block, str(doc), "exec"), namespace)  # noqa: S102 - the doc's example
    assert namespace["dc"].shape == (3, 4)
