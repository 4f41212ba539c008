"""shapes: NumPy broadcasting with unknown (None) dims, and axis normalisation."""

import itertools

import numpy as np
import pytest
from numpy.lib.array_utils import normalize_axis_index

from tracegrad.core import shapes
from tracegrad.errors import ShapeError

KNOWN = [(), (1,), (3,), (1, 3), (2, 1), (2, 3), (4, 1, 3), (0,), (1, 0), (5, 2, 1, 3)]


@pytest.mark.parametrize("a,b", list(itertools.product(KNOWN, KNOWN)), ids=str)
def test_known_shapes_broadcast_as_numpy(a, b):
    try:
        expected = np.broadcast_shapes(a, b)
    except ValueError:
        with pytest.raises(ShapeError, match="cannot be broadcast together"):
            shapes.broadcast_shapes(a, b)
    else:
        assert shapes.broadcast_shapes(a, b) == expected


@pytest.mark.parametrize("a,b,expected", [
    ((None,), (1,), (None,)),
    ((None,), (3,), (3,)),
    ((3,), (None,), (3,)),
    ((None,), (None,), (None,)),
    ((None, 1), (1, 4), (None, 4)),
    ((2, None), (3,), (2, 3)),
    ((), (None, None), (None, None)),
    ((None, 3), (5, 1, 1), (5, None, 3)),
])
def test_unknown_dims_broadcast_as_some_size(a, b, expected):
    assert shapes.broadcast_shapes(a, b) == expected
    assert shapes.broadcast_shapes(b, a) == expected


def test_many_shapes_and_one_shape():
    assert shapes.broadcast_shapes((3, 1), (1, 4), (2, 1, 1)) == (2, 3, 4)
    assert shapes.broadcast_shapes([2, None]) == (2, None)


def test_broadcast_error_names_the_op_and_shapes():
    with pytest.raises(ShapeError, match=r"^add: shapes \[2,3\] and \[4\] cannot be broadcast"):
        shapes.broadcast_shapes((2, 3), (4,), op="add")
    with pytest.raises(ShapeError, match=r"\[\?,3\] and \[2\]"):
        shapes.broadcast_shapes((None, 3), (2,))


def test_shape_helpers():
    assert shapes.shape_str((None, 3)) == "[?,3]" and shapes.shape_str(()) == "[]"
    assert shapes.size((2, 3)) == 6 and shapes.size(()) == 1 and shapes.size((2, None)) is None
    assert shapes.is_known((1, 2)) and not shapes.is_known((None,))
    assert shapes.shapes_compatible((None, 3), (2, 3))
    assert not shapes.shapes_compatible((2, 3), (3, 3))
    assert not shapes.shapes_compatible((3,), (3, 1))


@pytest.mark.parametrize("ndim", [1, 2, 4])
def test_normalize_axis_matches_numpy(ndim):
    for axis in range(-ndim, ndim):
        assert shapes.normalize_axis(axis, ndim) == normalize_axis_index(axis, ndim)


@pytest.mark.parametrize("axis,ndim", [(2, 2), (-3, 2), (0, 0), (1, 0)])
def test_axis_out_of_bounds(axis, ndim):
    with pytest.raises(ShapeError, match=f"^sum: axis {axis} is out of bounds for an array of "
                                         f"rank {ndim}"):
        shapes.normalize_axis(axis, ndim, op="sum")


def test_axis_must_be_an_integer():
    with pytest.raises(ShapeError, match="axis must be an integer, got None"):
        shapes.normalize_axis(None, 2)
    assert shapes.normalize_axis(np.int64(-1), 3) == 2


def test_normalize_axes():
    assert shapes.normalize_axes(None, 3) == (0, 1, 2)
    assert shapes.normalize_axes(-1, 3) == (2,)
    assert shapes.normalize_axes((2, -3), 3) == (0, 2)
    assert shapes.normalize_axes([1], 2) == (1,)
    assert shapes.normalize_axes((), 2) == ()
    with pytest.raises(ShapeError, match=r"^mean: repeated axis in \(0, -2\)"):
        shapes.normalize_axes((0, -2), 2, op="mean")
    with pytest.raises(ShapeError, match="axis 3 is out of bounds"):
        shapes.normalize_axes((0, 3), 3)
