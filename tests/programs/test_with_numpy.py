"""examples/with_numpy.py rebinds `np` in a program and in the helpers it reaches."""

import types

import numpy as np
import pytest
from with_numpy import with_numpy

import tracegrad as tg
import tracegrad.numpy as tnp

_MODULE = types.ModuleType("fakepkg.programs")
exec(  # noqa: S102 - a program module made here, as if imported
    "import numpy as np\n"
    "from numpy import asarray\n"
    "import numpy.linalg\n"
    "def helper(x):\n    return np.sin(x)\n"
    "def recursive(x, n):\n    return x if n == 0 else recursive(np.cos(x), n - 1)\n"
    "def program(x):\n"
    "    y = helper(asarray(x)) + numpy.linalg.norm(x)\n"
    "    return [np.exp(v) for v in (y,)][0] + recursive(x, 2)\n",
    _MODULE.__dict__)
_MODULE.__dict__["__name__"] = "fakepkg.programs"
for _f in ("helper", "recursive", "program"):
    _MODULE.__dict__[_f].__module__ = "fakepkg.programs"


def _reference(x):
    return np.exp(np.sin(x) + np.linalg.norm(x)) + np.cos(np.cos(x))


@pytest.mark.parametrize("namespace", [tnp, np])
def test_program_helpers_imports_and_comprehensions_are_rebound(namespace):
    program = with_numpy(_MODULE.program, namespace)
    x = np.linspace(0.1, 0.9, 5)
    run = tg.function(program, backend="numpy") if namespace is tnp else program
    np.testing.assert_allclose(run(x), _reference(x), rtol=1e-14)
    if namespace is tnp:
        assert isinstance(program(tg.constant(x)), tg.Tensor)
        g = program.__globals__
        assert g["np"] is tnp and g["asarray"] is tnp.asarray
        assert g["helper"].__globals__["np"] is tnp
        assert g["recursive"].__globals__["recursive"] is g["recursive"]


def test_the_original_program_is_untouched():
    with_numpy(_MODULE.program, tnp)
    assert _MODULE.program.__globals__["np"] is np
    assert type(_MODULE.program(np.ones(2))) is np.ndarray


def test_modules_of_the_programs_package_are_rebound_lazily():
    import numpy.polynomial.chebyshev as chebyshev

    chebval2d = with_numpy(chebyshev.chebval2d, tnp)
    pu = chebval2d.__globals__["pu"]
    assert pu is not chebyshev.pu and pu._valnd.__globals__["np"] is tnp
    assert chebyshev.pu._valnd.__globals__["np"] is np
