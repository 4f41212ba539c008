"""`assign`: a `Variable` update inside a traced function (the op that carries the effect).

`%new = assign %current, %value {variable='w'}` says "the Variable named `w`, whose value
in program order is `%current`, holds `%value` from here on". As a value it is `%value`
(with the Variable's type); the effect — the Variable's buffer holding the final value
after a successful call — is applied by the function layer from the graph's outputs (a
traced function returns, after its own results, the final value of every Variable it
assigns: docs/variables.md). `%current` is an order edge: it chains the updates of one
Variable in program order, so no pass can reorder two of them.

Eager `Variable.assign` does not record on tapes, so neither does a traced one, and the
op passes no gradient (a read after a write is a new value, as eagerly).
"""

from __future__ import annotations

from tracegrad.core.op import Primitive
from tracegrad.core.types import TensorType
from tracegrad.ops._batching import batch_elementwise
from tracegrad.ops._families import dims_elementwise, nondifferentiable, same_dtype, same_shape

assign_p = Primitive("assign")
"""`assign(current, value, *, variable)`: `value`, as the Variable `variable`'s new value.
`current` and `value` have the Variable's shape and dtype."""


@assign_p.def_abstract_eval
def _assign_abstract_eval(current, value, *, variable):
    shape = same_shape(f"assign to Variable {variable!r}", current, value)
    dtype = same_dtype(f"assign to Variable {variable!r}", current, value)
    return TensorType(shape, dtype)


@assign_p.def_impl
def _assign_impl(current, value, *, variable):
    return value


batch_elementwise(assign_p)
assign_p.def_dims(dims_elementwise)  # current, value and result have one shape
nondifferentiable(assign_p)


def assign(current, value, *, variable: str):
    """The Variable named `variable` (whose value is `current`) holds `value` from here on;
    returns the new value. `Variable.assign` inside a `tg.function` binds it."""
    return assign_p.bind(current, value, variable=variable)
