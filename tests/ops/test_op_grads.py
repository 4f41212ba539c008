"""The op table's gradient column: every row with `grad_argnums` is checked against float64
central finite differences of its NumPy reference, in random directions, through the traced
`tg.vjp` (on each backend under test) and through `backprop` over eagerly recorded ops; and
every differentiable primitive has a gradient rule and a checked row.

Traced on the numba backend, the default run (CI) compiles the gradients of the rows
`sample_rows` picks (up to three rows per primitive, every 16th other row: gradient graphs
are made of the same primitives, whose lowerings the value rows check one by one);
`TRACEGRAD_NUMBA_OPTABLE=full` compiles every row's (about 1240 kernels)."""

from __future__ import annotations

import os

import numpy as np
import pytest

import tracegrad as tg
from tests.conftest import TEST_BACKENDS
from tests.ops.optable import CASES, sample_rows
from tests.ops.optable_grad_extra import EXTRA_CASES
from tracegrad.core import tree
from tracegrad.core.ir import EagerTensor
from tracegrad.core.op import REGISTRY
from tracegrad.core.state import state
from tracegrad.ops import NONDIFFERENTIABLE
from tracegrad.transforms.backprop import backprop

GRAD_CASES = [c for c in CASES + EXTRA_CASES if c.grad_argnums]

# Primitives with a gradient rule but no finite-difference row, and why.
NO_FD_ROW = {
    "constant": "has no inputs",
    "stop_gradient": "its gradient is zero by definition, not the identity's (tested in "
                     "tests/transforms/test_gradients.py)",
    "custom_gradient": "its gradient is the user's function "
                       "(tests/transforms/test_custom_gradient.py)",
    "call": "its gradient is its callee's (tests/transforms/test_tape_function.py)",
    **dict.fromkeys(("igamma_grad_a", "betainc_grad_a", "betainc_grad_b"),
                    "the derivative of igamma or betainc in a shape, which has no gradient "
                    "of its own (None): its values are checked against central "
                    "differences of SciPy's function"),
}

STEP = 1e-4  # central differences with one Richardson step: error O(STEP^4)

# Complex values are pairs of reals: inner products are real ones, <u, v> = Re(sum(conj(u) v)),
# and a complex argument or result gets complex directions and cotangents. The gradient of
# sum(<cotangent, f(x)>) in this sense is the seeds' dL/dx + i dL/dy.


def inner(u, v) -> float:
    """The real inner product of two arrays (complex ones as pairs of reals)."""
    return float(np.sum(np.real(np.conj(u) * v)))


def random_like(x, rng):
    """Standard normal values of `x`'s shape, complex for a complex `x`."""
    shape = np.shape(x)
    if np.asarray(x).dtype.kind == "c":
        return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    return rng.standard_normal(shape)


def _float_leaves(out):
    leaves, _ = tree.flatten(out)
    return [np.asarray(x, dtype=np.complex128 if np.asarray(x).dtype.kind == "c"
                       else np.float64) for x in leaves]


def _directional(reference, args, argnums, direction, cotangents):
    """d/dt sum(cotangent * reference(args + t * direction)) at t = 0, by Richardson-
    extrapolated central differences in float64."""
    def at(t):
        moved = list(args)
        for i, v in zip(argnums, direction, strict=True):
            a = np.asarray(args[i])
            moved[i] = a.astype(np.complex128 if a.dtype.kind == "c" else np.float64) + t * v
        outs = _float_leaves(reference(*moved))
        return sum(inner(u, o) for o, u in zip(outs, cotangents, strict=True))

    def central(h):
        return (at(h) - at(-h)) / (2 * h)

    return (4 * central(STEP / 2) - central(STEP)) / 3


def _random_cotangents(out, rng):
    leaves, _ = tree.flatten(out)
    return [random_like(x, rng) if np.asarray(x).dtype.kind in "fc"
            else np.zeros(np.shape(x)) for x in leaves]


def _vjp_traced(case, cotangents):
    """Gradients of sum(cotangents * fn(args)) for the rows's grad_argnums, via tg.vjp."""
    args = list(case.args)

    def fn(*diff):
        full = list(args)
        for i, d in zip(case.grad_argnums, diff, strict=True):
            full[i] = d
        return case.fn(*full)

    out, vjp_fn = tg.vjp(fn, *[args[i] for i in case.grad_argnums])
    _, out_def = tree.flatten(out)
    cts = [ct.astype(np.asarray(o).dtype) for ct, o in zip(cotangents, tree.flatten(out)[0])]
    return [np.asarray(g) for g in vjp_fn(tree.unflatten(out_def, cts))]


class _Recorder:
    """The minimal tape: every op run eagerly on tensors, in order."""

    def __init__(self):
        self.records = []

    def record(self, op):
        self.records.append(op)

    def variable_accessed(self, variable, tensor):
        pass


def _vjp_eager(case, cotangents):
    """The same gradients by `backprop` over the ops recorded while `fn` ran eagerly."""
    args = list(case.args)
    xs = [EagerTensor(np.asarray(args[i])) for i in case.grad_argnums]
    for i, x in zip(case.grad_argnums, xs, strict=True):
        args[i] = x
    recorder = _Recorder()
    state.tapes.append(recorder)
    try:
        out = case.fn(*args)
    finally:
        state.tapes.remove(recorder)
    leaves, _ = tree.flatten(out)
    ys = [y for y in leaves if np.asarray(y).dtype.kind in "fc"]
    cts = [EagerTensor(ct.astype(np.asarray(y).dtype))
           for y, ct in zip(leaves, cotangents, strict=True)
           if np.asarray(y).dtype.kind in "fc"]
    grads = backprop(recorder.records, ys, xs, cts, unconnected_gradients="zero")
    return [np.asarray(g) for g in grads]


def _check(case, how, seed=0):
    rng = np.random.default_rng(seed)
    out = case.reference(*case.args)
    for _ in range(3):
        cotangents = _random_cotangents(out, rng)
        grads = how(case, cotangents)
        direction = [random_like(case.args[i], rng) for i in case.grad_argnums]
        for g, i in zip(grads, case.grad_argnums, strict=True):
            assert g.shape == np.shape(case.args[i]), f"gradient shape for arg {i}"
            assert g.dtype == np.asarray(case.args[i]).dtype, f"gradient dtype for arg {i}"
            assert np.all(np.isfinite(g)), f"non-finite gradient for arg {i}: {g}"
        analytic = sum(inner(g, v) for g, v in zip(grads, direction, strict=True))
        numeric = _directional(case.reference, case.args, case.grad_argnums, direction,
                               cotangents)
        bound = sum(float(np.linalg.norm(g) * np.linalg.norm(v))
                    for g, v in zip(grads, direction, strict=True))
        assert abs(analytic - numeric) <= case.grad_rtol * bound + 1e-10, (
            f"{case.name}: <grad, v> = {analytic!r}, finite differences {numeric!r}"
        )


_TRACED = [(c, "numpy") for c in GRAD_CASES] * ("numpy" in TEST_BACKENDS) + [
    (c, "numba") for c in (GRAD_CASES if os.environ.get("TRACEGRAD_NUMBA_OPTABLE") == "full"
                           else sample_rows(GRAD_CASES))] * ("numba" in TEST_BACKENDS)


@pytest.mark.parametrize("case, backend", _TRACED, ids=[f"{b}-{c.name}" for c, b in _TRACED])
def test_gradient_matches_finite_differences_traced(case, backend, monkeypatch):
    monkeypatch.setattr(tg.config, "backend", backend)
    _check(case, _vjp_traced)


@pytest.mark.parametrize("case", GRAD_CASES, ids=lambda c: c.name)
def test_gradient_matches_finite_differences_eager(case):
    _check(case, _vjp_eager)


def _primitives_of(case) -> set[str]:
    diff = [case.args[i] for i in case.grad_argnums]

    def fn(*d):
        full = list(case.args)
        for i, x in zip(case.grad_argnums, d, strict=True):
            full[i] = x
        return case.fn(*full)

    graph = tg.trace(fn)(*diff)
    return {op.primitive.name for op in graph.operations}


def _ships_with_tracegrad(prim) -> bool:
    """Whether `prim` is one of tracegrad's (tests may register primitives of their own)."""
    return getattr(prim.abstract_eval, "__module__", "").startswith("tracegrad.")


def test_every_differentiable_primitive_has_a_rule_and_a_checked_row():
    covered = set()
    for case in GRAD_CASES:
        covered |= _primitives_of(case)
    missing_rule, missing_row = [], []
    for name, prim in REGISTRY.items():
        if prim in NONDIFFERENTIABLE or not _ships_with_tracegrad(prim):
            continue
        if prim.grad is None:
            missing_rule.append(name)
        elif name not in covered and name not in NO_FD_ROW:
            missing_row.append(name)
    assert not missing_rule, f"primitives without a gradient rule: {sorted(missing_rule)}"
    assert not missing_row, f"differentiable primitives without a checked row: {missing_row}"


def test_nondifferentiable_primitives_give_no_gradient():
    for prim in NONDIFFERENTIABLE:
        assert prim.grad is not None, f"{prim.name}: mark it with nondifferentiable()"
