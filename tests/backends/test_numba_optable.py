"""The numba backend against the numpy backend on every row of the op table.

Rows are compiled in groups (one graph, one kernel per group) to keep compilation
affordable; a group that fails is re-run row by row to name the failing rows. Every row
runs with `TRACEGRAD_NUMBA_OPTABLE=full` (about 12 minutes cold on 2 cores); the default
run (CI) takes up to three rows per primitive, every 16th other row and every row with a weak
scalar argument.
Float64 results agree within 1e-12 relative, float32 within a few ulp (or 1e-5 relative
where BLAS or a libm differ in the last bits), integers and bools exactly.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from tests.backends._util import assert_close_backends, check_rows_in_groups, graph_and_inputs
from tests.ops.optable import CASES, sample_rows
from tracegrad.transforms.evaluate import Interpreter

nb = pytest.importorskip("tracegrad.backends.numba")

GROUP_SIZE = 48
FULL = os.environ.get("TRACEGRAD_NUMBA_OPTABLE") == "full"


# Weak-scalar rows (Python int/float arguments) always run: their dtypes are the promotion
# rules themselves.
ROWS = CASES if FULL else sample_rows([c for c in CASES if not c.weak_args]) + [
    c for c in CASES if c.weak_args]
GROUPS = [ROWS[i:i + GROUP_SIZE] for i in range(0, len(ROWS), GROUP_SIZE)]


def _check(cases):
    graph, arrays = graph_and_inputs(cases)
    with np.errstate(all="ignore"):
        want = Interpreter(graph)(arrays)
    got = nb.compile_graph(graph)(arrays)
    assert_close_backends(got, want, graph)


@pytest.mark.parametrize("group", range(len(GROUPS)),
                         ids=[f"{g[0].name}..{g[-1].name}" for g in GROUPS])
def test_numba_matches_numpy_backend(group):
    check_rows_in_groups(GROUPS[group], _check)
