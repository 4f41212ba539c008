"""Random compositions: programs of smooth ops, broadcasting, reductions and shape ops,
differentiated with tg.grad (traced) and through a tape, against finite differences."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import tracegrad as tg
import tracegrad.numpy as tnp

UNARY = {
    "sin": (tnp.sin, np.sin),
    "tanh": (tnp.tanh, np.tanh),
    "exp_neg_sq": (lambda a: tnp.exp(-a * a), lambda a: np.exp(-a * a)),
    "softplus": (lambda a: tnp.log(1.0 + tnp.exp(a)), lambda a: np.log1p(np.exp(a))),
    "square": (lambda a: a * a, lambda a: a * a),
    "cumsum": (lambda a: tnp.cumsum(a, axis=-1), lambda a: np.cumsum(a, axis=-1)),
    "flip": (lambda a: tnp.flip(a, axis=-1), lambda a: np.flip(a, axis=-1)),
    "row_sum": (lambda a: tnp.sum(a, axis=-1, keepdims=True),
                lambda a: np.sum(a, axis=-1, keepdims=True)),
}
BINARY = {
    "add": (lambda a, b: a + b, np.add),
    "mul": (lambda a, b: a * b, np.multiply),
    "sub": (lambda a, b: a - b, np.subtract),
    "div": (lambda a, b: a / (1.5 + b * b), lambda a, b: a / (1.5 + b * b)),
    "hypot": (lambda a, b: tnp.sqrt(1.0 + a * a + b * b),
              lambda a, b: np.sqrt(1.0 + a * a + b * b)),
}

# A program: a list of steps over a growing list of values (x is value 0, shape (3, 4));
# each step applies an op to earlier values, the result is appended.
step = st.one_of(
    st.tuples(st.just("u"), st.sampled_from(sorted(UNARY)), st.integers(0, 100)),
    st.tuples(st.just("b"), st.sampled_from(sorted(BINARY)), st.integers(0, 100),
              st.integers(0, 100)),
)
programs = st.lists(step, min_size=1, max_size=7)


def run(program, x, lib):
    values = [x]
    for s in program:
        if s[0] == "u":
            fn = UNARY[s[1]][lib]
            values.append(fn(values[s[2] % len(values)]))
        else:
            fn = BINARY[s[1]][lib]
            values.append(fn(values[s[2] % len(values)], values[s[3] % len(values)]))
    total = values[-1]
    return tnp.sum(total * total) if lib == 0 else np.sum(total * total)


def numeric_directional(program, x, v, h=1e-3):
    def at(t):
        return run(program, x + t * v, 1)

    def central(step):
        return (at(step) - at(-step)) / (2 * step)

    return (4 * central(h / 2) - central(h)) / 3


X = np.random.default_rng(0).uniform(-1, 1, (3, 4))
V = np.random.default_rng(1).standard_normal((3, 4))


@settings(max_examples=60, deadline=None)
@given(programs)
def test_random_programs_traced_and_taped(program):
    g = tg.grad(lambda x: run(program, x, 0))(X)
    expected = numeric_directional(program, X, V)
    scale = np.linalg.norm(g) * np.linalg.norm(V)
    # the differences' rounding: about eps * |f| / h, whatever the gradient's size
    rounding = 1e-10 * (1 + abs(run(program, X, 1)))
    assert abs(float(np.sum(g * V)) - expected) <= 1e-7 * scale + rounding
    x = tg.constant(X)
    with tg.GradientTape() as tape:
        tape.watch(x)
        y = run(program, x, 0)
    np.testing.assert_allclose(tape.gradient(y, x).numpy(), g, rtol=1e-12, atol=1e-12)


@settings(max_examples=30, deadline=None)
@given(programs)
def test_random_programs_second_order(program):
    # d/dt <grad f(X + t V), V> == <H V, V>, the second directional derivative
    f = lambda x: run(program, x, 0)  # noqa: E731
    (hv,) = tg.hvp(f, (X,), (V,))
    g = tg.grad(f)

    def at(t):
        return float(np.sum(g(X + t * V) * V))

    def central(step):
        return (at(step) - at(-step)) / (2 * step)

    expected = (4 * central(5e-4) - central(1e-3)) / 3
    scale = np.linalg.norm(hv) * np.linalg.norm(V)
    rounding = 1e-9 * (1 + abs(at(0.0)))  # the differences' rounding, as above
    assert abs(float(np.sum(hv * V)) - expected) <= 1e-6 * scale + rounding
