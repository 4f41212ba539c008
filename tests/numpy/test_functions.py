"""Semantics the op table cannot show: errors, data-dependent shapes, no-op skipping,
stability of argsort, the graphs some functions build."""

from __future__ import annotations

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tracegrad.errors import DTypeError, InvalidArgumentError, ShapeError, UnsupportedOpError


def ops_of(fn, *args):
    return [op.primitive.name for op in tg.trace(fn)(*args).operations]


def test_no_ops_are_skipped():
    x = np.ones((2, 3))
    assert ops_of(lambda a: tnp.transpose(a[0]), x) == ["slice", "reshape"]
    assert ops_of(lambda a: tnp.reshape(a, (2, 3)), x) == []
    assert ops_of(lambda a: tnp.astype(a, "float64"), x) == []
    assert ops_of(lambda a: tnp.transpose(a, (0, 1)), x) == []
    # `a[:, :]` is a view of `a` (NumPy's), so a new tensor: one reshape, which simplify drops
    assert ops_of(lambda a: a[:, :], x) == ["reshape"]
    optimized = tg.optimize(tg.trace(lambda a: a[:, :] * 2)(x))
    assert "reshape" not in [op.primitive.name for op in optimized.operations]
    assert ops_of(lambda a: a + a, x) == ["add"]
    assert ops_of(lambda a: tnp.squeeze(a), x) == []


def test_weak_scalar_broadcasts_without_a_cast():
    names = ops_of(lambda a: a * 2.0, np.ones(3, np.float32))
    assert names == ["constant", "broadcast_in_dim", "mul"]


def test_where_with_one_argument_needs_size_when_traced():
    x = tg.constant([0.0, 3.0, 0.0, 1.0])
    (idx,) = tnp.where(x)
    np.testing.assert_array_equal(idx.numpy(), [1, 3])
    rows, _ = tnp.nonzero(np.eye(2))
    np.testing.assert_array_equal(rows, [0, 1])
    with pytest.raises(InvalidArgumentError, match=r"where\(condition\).*size="):
        tg.function(lambda a: tnp.where(a), backend="numpy")(np.ones(2))


def test_bad_norm_orders():
    with pytest.raises(ValueError):
        tnp.linalg.norm(np.ones(3), "fro")
    with pytest.raises(ValueError):
        tnp.linalg.norm(np.eye(2), 3)
    with pytest.raises(ValueError):
        tnp.linalg.norm(np.eye(2), axis=(0, 0))


def test_linalg_shape_errors():
    with pytest.raises(ShapeError, match="square"):
        tnp.linalg.inv(np.ones((2, 3)))
    with pytest.raises(ShapeError, match="two-dimensional"):
        tnp.linalg.det(np.ones(3))


def test_pad_errors():
    with pytest.raises(UnsupportedOpError, match="mean"):
        tnp.pad(np.ones(3), 1, mode="mean")
    with pytest.raises(ValueError, match="negative"):
        tnp.pad(np.ones(3), -1)
    with pytest.raises(ValueError, match="empty axis"):
        tnp.pad(np.ones((0, 2)), 1, mode="wrap")


@pytest.mark.parametrize("spec, shapes, match", [
    ("ij,jk", [(2, 3)], "operand"),
    ("ij->k", [(2, 3)], "appears in no input"),
    ("...i->i", [(2, 3)], r"\.\.\."),
    ("ij,jk", [(2, 3), (4, 5)], "sizes"),
    ("ijk", [(2, 3)], "do not match"),
    ("ij->ii", [(2, 3)], "repeat"),
])
def test_einsum_errors(spec, shapes, match):
    with pytest.raises(ShapeError, match=match):
        tnp.einsum(spec, *[np.ones(s) for s in shapes])


def test_shape_errors_name_the_function_and_line():
    cases = [
        (lambda: tnp.split(np.ones(5), 2), "split"),
        (lambda: tnp.squeeze(np.ones((2, 1)), 0), "squeeze"),
        (lambda: tnp.concatenate([np.float64(1.0), np.float64(2.0)]), "concatenate"),
        (lambda: tnp.matmul(np.ones(2), 3.0), "matmul"),
        (lambda: tnp.max(np.ones((0, 2)), axis=0), "reduce_max"),
        (lambda: tnp.reshape(np.ones(6), (4, 2)), "reshape"),
        (lambda: tnp.sum(np.ones((2, 2)), axis=(0, -2)), "sum"),
        (lambda: tnp.broadcast_to(np.ones(3), (2, 4)), "broadcast"),
        (lambda: tnp.stack([np.ones(2), np.ones(3)]), "stack"),
        (lambda: tnp.add(tg.constant(np.ones(2)), np.ones(3)), "add"),
    ]
    for fn, name in cases:
        with pytest.raises(ShapeError, match=name):
            fn()
    with pytest.raises(ShapeError) as info:
        tnp.sum(tg.constant(np.ones(2)), axis=3)
    assert "test_functions.py" in str(info.value)


def test_transpose_with_bad_axes():
    with pytest.raises(ValueError):
        tnp.transpose(np.ones((2, 3)), (0, 0))


def test_dtype_errors():
    with pytest.raises(DTypeError, match="round"):
        tnp.round(np.array([True]))
    with pytest.raises(DTypeError, match="take"):
        tnp.take(np.ones(3), np.array([0.5]))
    with pytest.raises(DTypeError, match="asarray"):
        tnp.asarray(np.ones(2), dtype="clongdouble")


def test_ranges_need_static_bounds_and_shapes():
    with pytest.raises(ShapeError, match="data-dependent"):
        tg.function(lambda n: tnp.arange(n), backend="numpy")(np.int64(3))
    with pytest.raises(ShapeError, match="zeros_like"):
        tg.function(lambda a: tnp.zeros((a.shape[0], 2)), backend="numpy",
                    input_signature=[tg.TensorSpec([None])])(np.ones(2))
    with pytest.raises(ShapeError, match="data-dependent"):
        tg.function(lambda r: tnp.repeat(np.ones(2), r), backend="numpy")(np.array([1, 2]))


def test_argsort_is_stable():
    x = np.array([2, 1, 2, 1, 0, 2])
    np.testing.assert_array_equal(tnp.argsort(tg.constant(x)).numpy(),
                                  np.argsort(x, kind="stable"))
    np.testing.assert_array_equal(tnp.argsort(-x), np.argsort(-x, kind="stable"))


def test_lists_of_tensors_are_stacked():
    a, b = tg.constant([1.0, 2.0]), tg.constant([3.0, 4.0])
    np.testing.assert_array_equal(tnp.asarray([a, b]).numpy(), [[1, 2], [3, 4]])
    np.testing.assert_array_equal(tnp.sum([a, b], axis=0).numpy(), [4.0, 6.0])


def test_linspace_retstep_traced():
    f = tg.function(lambda a: tnp.linspace(a, a + 1.0, 5, retstep=True), backend="numpy")
    y, step = f(np.float64(2.0))
    np.testing.assert_array_equal(y, np.linspace(2.0, 3.0, 5))
    assert step == 0.25


def test_split_returns_a_list_and_flip_every_axis():
    parts = tnp.split(tg.constant(np.arange(6.0)), [2, 3])
    assert [p.shape for p in parts] == [(2,), (1,), (3,)]
    np.testing.assert_array_equal(tnp.flip(tg.constant(np.eye(2)[:1])).numpy(), [[0.0, 1.0]])


@pytest.mark.parametrize("fn", [tnp.stack, tnp.concatenate, tnp.hstack, tnp.vstack,
                                lambda arrays: tnp.einsum("", *arrays)])
def test_joining_nothing_is_a_value_error(fn):
    with pytest.raises(ValueError, match="at least one|no operands"):
        fn([])


def test_integer_to_a_negative_integer_power_is_a_value_error_as_in_numpy():
    with pytest.raises(ValueError, match="negative integer powers"):
        tg.constant([2, 3]) ** -1
    np.testing.assert_array_equal((tg.constant([2.0, 4.0]) ** -1).numpy(), [0.5, 0.25])
