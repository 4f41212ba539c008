"""`import tracegrad` stays light: the heavy libraries load when first needed."""

import subprocess
import sys


def _python(code: str) -> str:
    """What a fresh Python process running `code` prints."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_import_loads_neither_numba_nor_scipy_nor_dask():
    out = _python("import sys, tracegrad, tracegrad.numpy; "
                  "print(sorted(m for m in ('numba', 'scipy', 'llvmlite', 'dask', 'distributed') "
                  "if m in sys.modules))")
    assert out == "[]"


def test_scipy_backed_impls_load_it_on_first_use():
    import numpy as np

    import tracegrad as tg
    from tracegrad import ops

    np.testing.assert_allclose(np.asarray(ops.erf(tg.constant(np.array([0.5, -1.0])))),
                               [0.5204998778130465, -0.8427007929497149], rtol=1e-15)
    a = np.array([[2.0, 0.0], [1.0, 4.0]])
    x = ops.triangular_solve(tg.constant(a), tg.constant(np.array([[2.0], [9.0]])),
                             left_side=True, lower=True)
    np.testing.assert_allclose(np.asarray(x), [[1.0], [2.0]], rtol=1e-15)


def test_tracegrad_dask_without_dask_names_the_extra():
    out = _python("import sys; sys.modules['dask'] = None\n"
                  "try:\n    import tracegrad.dask\n"
                  "except ImportError as e:\n    print(type(e).__name__, e)")
    assert out.startswith("ImportError tracegrad.dask needs Dask")
    assert 'pip install -e ".[dask]"' in out
