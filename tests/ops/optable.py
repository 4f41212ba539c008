"""The systematic op table: one row per (op, shapes, dtypes) case.

Every check (values vs NumPy, abstract_eval vs impl, gradients vs finite differences,
the numba backend vs the numpy backend) is generated from these rows.

A `Case`:
- `name`: the test id, e.g. "add[3x4,4]" or "reduce_sum[axes=(0,)]".
- `fn(*arrays)`: the computation under test, written with `tracegrad.numpy` / `tracegrad.nn`
  / `tracegrad.ops`; it must run traced, eagerly on tg.Tensors and on plain NumPy.
- `reference(*arrays)`: the same computation in plain NumPy/SciPy (the oracle).
- `args`: the input arrays (NumPy), already in the case's dtypes.
- `grad_argnums`: which args to differentiate (float args only); () for no gradient check.
- `rtol`, `atol`: tolerance of the value check (0 means exact).
- `grad_rtol`: tolerance of the finite-difference gradient check.
- `primitive`: the primitive name the case exercises, if it targets one (for the
  completeness tests: every primitive has at least one case).
- `why`: why the row needs a tolerance (NumPy computes the value in another order ...).
- `numpy_in_numpy_out`: called on NumPy arrays (nothing recording), `fn` returns NumPy
  (True for every tracegrad.numpy / tracegrad.nn / tracegrad.ops function).

The rows live in `optable_primitives.py` (each primitive through `tracegrad.ops` or the
thinnest `tracegrad.numpy` function over it), `optable_numpy.py` (tracegrad.numpy's
elementwise functions, reductions and creation: dtypes, weak scalars, broadcasting, axes,
empty arrays), `optable_dtypes.py` (the narrower integers and float16), `optable_complex.py`
(complex64 and complex128) and
`optable_arrays.py` (shapes, indexing, at[], products, linalg, pad, nn), and the
compositions over them in `optable_composites.py`, `optable_sequences.py`,
`optable_datadep.py` and `optable_sets.py`; the special functions in `optable_special.py`;
the Fourier transforms in `optable_fft.py`; `eig` and `roots` in `optable_eig.py`; the
convolutions (`conv`, `tracegrad.scipy.signal`) in `optable_signal.py`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import zlib
from collections.abc import Callable

import numpy as np

from tracegrad.core.state import state


@dataclasses.dataclass
class Case:
    name: str
    fn: Callable
    reference: Callable
    args: tuple
    grad_argnums: tuple = ()
    rtol: float = 0.0
    atol: float = 0.0
    grad_rtol: float = 1e-6
    primitive: str | None = None
    why: str = ""
    numpy_in_numpy_out: bool = True

    def __repr__(self):
        return self.name

    @property
    def weak_args(self) -> bool:
        """Whether an argument is a Python int or float (traced as a weak scalar; vmap and
        the fuzzer's stacked arguments would make it a strong array)."""
        return any(type(a) in (int, float) for a in self.args)


CASES: list[Case] = []


def case(name, fn, reference, *args, **options) -> Case:
    c = Case(name, fn, reference, tuple(args), **options)
    CASES.append(c)
    return c


def rand(shape, dtype="float64", low=-2.0, high=2.0, seed=0):
    """Deterministic random input of `shape` and `dtype` in [low, high)."""
    r = np.random.default_rng(zlib.crc32(repr((tuple(shape), str(dtype), low, high, seed)).encode()))
    if np.dtype(dtype).kind == "f":
        return r.uniform(low, high, size=shape).astype(dtype)
    if np.dtype(dtype).kind == "c":  # real and imaginary parts in [low, high)
        parts = r.uniform(low, high, size=(2, *shape))
        return (parts[0] + 1j * parts[1]).astype(dtype)
    if np.dtype(dtype).kind == "b":
        return r.random(size=shape) < 0.5
    return r.integers(int(low), int(high) + 1, size=shape).astype(dtype)


F64, F32, I64, I32, BOOL = "float64", "float32", "int64", "int32", "bool"
C128, C64 = "complex128", "complex64"


class Recorder:
    """The minimal tape: every op run eagerly on tensors, in order (`.records`)."""

    def __init__(self):
        self.records = []

    def record(self, op):
        self.records.append(op)

    def variable_accessed(self, variable, tensor):
        pass


@contextlib.contextmanager
def recording():
    """A `Recorder` on the active tapes while the block runs: eager ops take their recorded
    path (the eager fast paths, which skip recording, are off)."""
    recorder = Recorder()
    state.tapes.append(recorder)
    try:
        yield recorder
    finally:
        state.tapes.remove(recorder)


def ulps(reference, *args, n=4) -> dict:
    """`atol` of `n` ulps of the largest value `reference(*args)` takes (0 for integer
    results): for sums of products that NumPy adds in another order."""
    out = np.asarray(reference(*args))
    if out.dtype.kind != "f" or out.size == 0:
        return {"atol": 0.0}
    return {"atol": n * float(np.finfo(out.dtype).eps) * float(np.max(np.abs(out)))}


def shape_id(shape) -> str:
    return "x".join(map(str, shape)) if shape else "s"


def sample_rows(cases) -> list:
    """The rows the numba backend checks by default (CI): up to three rows per primitive
    and every 16th other row."""
    per_primitive: dict = {}
    rows = []
    for k, c in enumerate(cases):
        if c.primitive is not None:
            per_primitive[c.primitive] = per_primitive.get(c.primitive, 0) + 1
            if per_primitive[c.primitive] <= 3:
                rows.append(c)
        elif k % 16 == 0:
            rows.append(c)
    return rows


from tests.ops import (  # noqa: F401
    optable_arrays,
    optable_complex,
    optable_composites,
    optable_datadep,
    optable_dtypes,
    optable_eig,
    optable_fft,
    optable_functions,
    optable_linalg,
    optable_numpy,
    optable_primitives,
    optable_random,
    optable_sequences,
    optable_sets,
    optable_signal,
    optable_special,
)
