"""Python values in compiled code and transforms: Python ints and floats are weak traced
scalars that compare, count and mix as NumPy's int64/float64 do; Python bools, None and
strings are static (part of the trace key, usable in `if`); loop and branch structures
compare lists and tuples alike."""

from __future__ import annotations

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tests.finite_diff import central_difference
from tracegrad.errors import ArgumentTypeError, DTypeError

# -- Python ints: weak traced scalars -----------------------------------------------------------


def test_int_argument_compared_to_a_literal(backend):
    f = tg.function(lambda n: tnp.where(n > 2, 1.0, 0.0))
    assert f(3) == 1.0 and f(2) == 0.0 and f(-7) == 0.0
    assert f.tracing_count == 1  # a new value does not retrace
    assert str(f.get_concrete_function(3).graph.inputs[0].type) == "~i64[]"


def test_int_argument_equality_mixes_with_an_array(backend):
    f = tg.function(lambda n, x: x * (n == 0))
    np.testing.assert_array_equal(f(3, np.ones(2)), np.zeros(2))
    np.testing.assert_array_equal(f(0, np.full(2, 1.5)), np.full(2, 1.5))
    assert f(0, np.ones(2, np.float32)).dtype == np.float32  # bool * f32 -> f32, as NumPy


def test_int_argument_counts_a_while_loop(backend):
    f = tg.function(lambda k: tg.while_loop(lambda i, _: i < 10,
                                            lambda i, c: (i + 1, c + 1), (k, 0))[1])
    assert f(2) == 8 and f(10) == 0 and f(-5) == 15
    assert f(2).dtype == np.int64
    assert f.tracing_count == 1


@pytest.mark.parametrize("op, expected_dtype", [
    (lambda a, b: a + b, np.int64), (lambda a, b: a // b, np.int64),
    (lambda a, b: a % b, np.int64), (lambda a, b: a / b, np.float64),
    (lambda a, b: a ** b, np.int64), (lambda a, b: a < b, np.bool_),
    (lambda a, b: a != b, np.bool_), (lambda a, b: a >= b, np.bool_),
])
def test_two_int_arguments_compute_as_numpy_int64(op, expected_dtype, backend):
    f = tg.function(op)
    for a, b in ((7, 2), (-7, 3), (2, 5)):
        want = op(np.int64(a), np.int64(b))
        got = f(a, b)
        assert got.dtype == expected_dtype and got == want


def test_weak_float_argument_keeps_a_float32_array(backend):
    f = tg.function(lambda s, x: (x * s, s > 1.0, s + 1))
    x = np.arange(3, dtype=np.float32)
    y, flag, t = f(2.5, x)
    assert y.dtype == np.float32 and flag.dtype == np.bool_ and t.dtype == np.float64
    np.testing.assert_array_equal(y, x * np.float32(2.5))
    assert flag and t == 3.5


def test_int_argument_indexes_and_slices(backend):
    f = tg.function(lambda x, i: x[i] + x[i + 1])
    x = np.arange(5.0)
    assert f(x, 1) == 3.0 and f(x, 3) == 7.0 and f.tracing_count == 1


def test_eager_python_scalars_compare_as_numpy():
    assert tnp.greater(3, 2) == np.greater(3, 2)
    assert tnp.equal(3, 3).dtype == np.bool_
    assert tnp.add(2, 3).dtype == np.int64


# -- Python bools, None and strings: static --------------------------------------------------


def _scaled(x, training=False):
    return x * 2 if training else x


def test_bool_flag_of_a_function_is_static(backend):
    f = tg.function(_scaled)
    assert f(1.5, training=True) == 3.0
    assert f(1.5, training=False) == 1.5
    assert f(1.5, True) == 3.0
    assert f.tracing_count == 2  # one trace per value, not per call
    assert f(4.0, training=True) == 8.0 and f.tracing_count == 2
    assert [t.type.dtype for t in f.get_concrete_function(1.5, True).graph.inputs] == [
        np.float64]  # the flag is no input of the graph


def test_none_and_str_arguments_are_static(backend):
    f = tg.function(lambda x, mask=None, mode="sum": (
        tnp.sum(x if mask is None else x * mask) if mode == "sum" else tnp.max(x)))
    x = np.array([1.0, 5.0, 2.0])
    assert f(x) == 8.0
    assert f(x, np.array([1.0, 0.0, 1.0])) == 3.0
    assert f(x, None, "max") == 5.0
    assert f.tracing_count == 3


def test_bool_static_under_every_transform(backend):
    x = np.array([0.5, -1.0])
    assert tg.grad(_scaled)(1.0, training=True) == 2.0
    assert tg.grad(_scaled)(1.0, False) == 1.0
    assert tg.value_and_grad(_scaled)(1.0, True) == (2.0, 2.0)
    np.testing.assert_array_equal(tg.jacobian(_scaled)(x, True), 2 * np.eye(2))
    np.testing.assert_array_equal(tg.vmap(_scaled, in_axes=(0, None))(x, True), 2 * x)
    cube = lambda v, flag: tnp.sum(v ** 3) if flag else tnp.sum(v)
    np.testing.assert_allclose(tg.hessian(cube)(x, True), np.diag(6 * x))
    np.testing.assert_array_equal(tg.hessian(cube)(x, False), np.zeros((2, 2)))


def test_bool_primal_of_vjp_jvp_hvp_is_static_with_no_gradient(backend):
    x = np.array([0.5, -1.0])
    out, vjp_fn = tg.vjp(_scaled, x, True)
    np.testing.assert_array_equal(out, 2 * x)
    gx, gflag = vjp_fn(np.ones(2))
    np.testing.assert_array_equal(gx, [2.0, 2.0])
    assert gflag is None
    out, tangent = tg.jvp(_scaled, (x, True), (np.ones(2), None))
    np.testing.assert_array_equal(tangent, [2.0, 2.0])
    hv = tg.hvp(lambda v, flag: tnp.sum(v ** 3) if flag else 0.0, (x, True), (np.ones(2), None))
    np.testing.assert_allclose(hv[0], 6 * x)
    assert hv[1] is None


def test_bool_static_matches_finite_differences():
    f = lambda x, squash: tnp.sum(tnp.tanh(x) if squash else x ** 2)
    x = np.array([0.3, -1.2, 2.0])
    for squash in (True, False):
        fd = central_difference(lambda v, s=squash: float(f(v, s)), x)
        np.testing.assert_allclose(tg.grad(f)(x, squash), fd, rtol=1e-7)


def test_differentiating_a_bool_argument_is_a_dtype_error():
    with pytest.raises(DTypeError, match="argument 1"):
        tg.grad(_scaled, argnums=1)(1.0, True)


def test_bool_for_a_bool_spec_of_an_input_signature_is_an_array(backend):
    f = tg.function(lambda x, flag: tnp.where(flag, x, -x),
                    input_signature=[tg.TensorSpec([2]), tg.TensorSpec([], "bool")])
    np.testing.assert_array_equal(f(np.ones(2), True), np.ones(2))
    np.testing.assert_array_equal(f(np.ones(2), False), -np.ones(2))
    assert f.tracing_count == 1


def test_traced_bool_is_still_refused_by_if():
    with pytest.raises(tg.errors.TracerBoolError):
        tg.function(lambda x: x if x > 0 else -x)(1.0)


# -- structures of loop variables: lists and tuples alike ----------------------------------


def test_tf_documented_while_loop_with_a_list_of_loop_vars(backend):
    """TF's own example: loop_vars a list, body_fn returning a tuple."""
    x, y = tg.constant(2.0), tg.constant(3.0)
    for run in (lambda a, b: tg.while_loop(lambda v, _: v < 45.0, lambda v, w: (v * w, w), [a, b]),
                tg.function(lambda a, b: tg.while_loop(lambda v, _: v < 45.0,
                                                       lambda v, w: (v * w, w), [a, b]))):
        out = run(x, y)
        assert isinstance(out, list) and len(out) == 2  # the structure of loop_vars
        assert float(out[0]) == 54.0 and float(out[1]) == 3.0


def test_tuple_loop_vars_with_a_body_returning_a_list(backend):
    f = tg.function(lambda n: tg.while_loop(lambda i, s: i < n, lambda i, s: [i + 1, s * 2.0],
                                            (0, 1.0)))
    out = f(5)
    assert isinstance(out, tuple) and out[1] == 32.0


def test_scan_and_cond_accept_lists_for_tuples(backend):
    scan = tg.function(lambda xs: tg.scan(lambda c, x: ([c[0] + x, c[1] * x], x), (0.0, 1.0), xs))
    carry, ys = scan(np.arange(1.0, 4.0))
    assert isinstance(carry, tuple) and carry == (6.0, 6.0)
    np.testing.assert_array_equal(ys, [1.0, 2.0, 3.0])
    carry, _ = tg.scan(lambda c, x: ([c[0] + x], x), (0.0,), np.arange(3.0))
    assert isinstance(carry, tuple) and float(carry[0]) == 3.0
    cond = tg.function(lambda p, x: tg.cond(p > 0, lambda: (x, 2 * x), lambda: [x, -x]))
    out = cond(-1.0, np.ones(2))
    assert isinstance(out, tuple)
    np.testing.assert_array_equal(out[1], -np.ones(2))


def test_real_structure_differences_name_both_structures():
    with pytest.raises(ArgumentTypeError, match=r"loop_vars is \[\*, \*\], body_fn's result "
                                                r"is \{'a': \*, 'b': \*\}"):
        tg.function(lambda a, b: tg.while_loop(lambda v, _: v < 4.0, lambda v, w: {"a": v, "b": w},
                                               [a, b]))(1.0, 2.0)
    with pytest.raises(ArgumentTypeError, match=r"loop_vars is \[\*, \*\], body_fn's result is "
                                                r"\(\*, \*, \*\)"):
        tg.while_loop(lambda v, _: v < 4.0, lambda v, w: (v + 1, w, w), [1.0, 2.0])


def test_repeated_calls_with_bool_flags_take_the_short_path_correctly(backend):
    """A call of arrays, numbers and bools takes the short call path from its second call:
    the flags pick the trace, the others are fed (eagerly on a tape too)."""
    f = tg.function(lambda x, s, flag: x * s if flag else x - s)
    x = np.arange(3.0)
    for _ in range(3):
        np.testing.assert_array_equal(f(x, 2.0, True), 2 * x)
        np.testing.assert_array_equal(f(x, 2.0, False), x - 2)
    assert f.tracing_count == 2 and len(f._fast) == 2
    t = tg.constant(x)
    for _ in range(2):
        with tg.GradientTape() as tape:
            tape.watch(t)
            y = tnp.sum(f(t, 3.0, True))
        np.testing.assert_array_equal(tape.gradient(y, t).numpy(), [3.0, 3.0, 3.0])
