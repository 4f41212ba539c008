"""Random programs for the fuzzer: DAGs of steps drawn from the op table's families
(elementwise, broadcasting, reductions, indexing and `at[]`, shape ops, products,
cumulative ops, linear algebra on 0- to 3-row matrices and batches, every row of
`tests/ops`), transforms (grad, vjp, tape,
vmap, jacobian) and control flow (cond, fori_loop, while_loop, scan).

A program is built by running it: each drawn step is applied eagerly (on `tg.constant`s) to
the values so far, so the generator knows every shape and dtype, and a step NumPy itself
rejects is dropped. A step tracegrad rejects (a `TracegradError`) while NumPy computes it
in dtypes tracegrad has is a finding (`InvalidRejection`).

`smooth=True` draws float64 programs of differentiable steps whose arguments are squashed
into the op's domain (for the finite-difference check); otherwise inputs hold NaN, +-inf
and -0.0 and ops take their arguments as they come.
"""

from __future__ import annotations

import dataclasses
import operator
import traceback
from collections.abc import Callable

import numpy as np
from hypothesis import strategies as st

import tracegrad as tg
import tracegrad.numpy as tnp
from tests.ops.optable import CASES, F32, F64, I32, I64, BOOL
from tests.ops.optable_numpy import AXES
from tests.ops.optable_primitives import BINARY, SMOOTH, UNARY
from tracegrad.core import dtypes, tree
from tracegrad.errors import TracegradError

SUPPORTED = set(dtypes.SUPPORTED)
# Raw inputs: mostly the five common dtypes, now and then a narrower or a complex one.
INPUT_DTYPES = (F64, F64, F32, I64, I32, BOOL, F64, F32, I64, "int8", "uint8", "uint16",
                "float16", "complex128", "complex64")
SPECIALS = (np.nan, np.inf, -np.inf, -0.0, 0.0, 1e300, -1e-310)
SIZES = (0, 1, 2, 3)


class InvalidRejection(AssertionError):
    """tracegrad raised one of its errors on a step NumPy computes."""


@dataclasses.dataclass
class Step:
    name: str
    fn: Callable          # fn(*argument values) -> a tensor or a tuple of tensors
    args: tuple           # indices into the program's values
    exact: bool = True    # the numba backend is bit-exact on it (docs/numba.md)
    ref: Callable | None = None  # the step in NumPy, when it has a NumPy counterpart


@dataclasses.dataclass
class Program:
    inputs: list          # NumPy arrays
    steps: list
    smooth: bool
    dynamic: tuple = ()   # per input: the axes a TensorSpec leaves None

    def __call__(self, *inputs):
        values = list(inputs)
        for s in self.steps:
            values.extend(_leaves(s.fn(*(values[i] for i in s.args))))
        return values[len(inputs):]

    @property
    def exact(self) -> bool:
        """Whether the numba backend is bit-exact on every step: not where float16 values
        meet float16 functions or reductions (docs/numpy.md, "float16")."""
        return all(s.exact for s in self.steps) and not self.has_float16 and not (
            self.has_complex)

    @property
    def has_complex(self) -> bool:
        """Complex values: the numba backend's complex functions (and `abs`) are within a
        few ulp of NumPy's, not bit-exact (docs/numpy.md, "Complex numbers")."""
        return any(a.dtype.kind == "c" for a in self.inputs) or any(
            s.name.startswith("astype(complex") for s in self.steps)

    @property
    def has_float16(self) -> bool:
        return any(a.dtype == np.float16 for a in self.inputs) or any(
            s.name == "astype(float16)" for s in self.steps)

    def __repr__(self):
        lines = [f"  in{k}: {a.dtype}{list(a.shape)} = {a.tolist()!r}"
                 for k, a in enumerate(self.inputs)]
        lines += [f"  {s.name}{s.args}" for s in self.steps]
        kind = "smooth" if self.smooth else "raw"
        return f"Program({kind}, dynamic={self.dynamic}\n" + "\n".join(lines) + ")"


def _leaves(out):
    return tree.flatten(out)[0] if isinstance(out, (tuple, list)) else [out]


# -- inputs --------------------------------------------------------------------------------------

def _shapes():
    return st.lists(st.sampled_from(SIZES), min_size=0, max_size=3).map(tuple)


@st.composite
def input_array(draw, smooth):
    shape = draw(_shapes())
    if smooth:
        shape = tuple(max(n, 1) for n in shape)
        return np.random.default_rng(draw(st.integers(0, 2**32 - 1))).uniform(
            -1.5, 1.5, shape)
    dtype = draw(st.sampled_from(INPUT_DTYPES))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if dtype == BOOL:
        return rng.random(shape) < 0.5
    if np.dtype(dtype).kind in "iu":
        return rng.integers(0 if np.dtype(dtype).kind == "u" else -4, 5, shape).astype(dtype)
    x = rng.uniform(-3, 3, shape).astype(dtype)
    if np.dtype(dtype).kind == "c":
        x.imag = rng.uniform(-3, 3, shape)
    if x.size and draw(st.booleans()):
        with np.errstate(all="ignore"):
            special = draw(st.sampled_from(SPECIALS))
            x.flat[rng.integers(0, x.size)] = (
                complex(0.5, special) if x.dtype.kind == "c" and draw(st.booleans())
                else special)
    return x


# -- helpers the steps use -----------------------------------------------------------------------

def _into(x, lo, hi):
    """x squashed smoothly into the open interval (lo, hi)."""
    mid, half = (lo + hi) / 2, 0.45 * (hi - lo)
    return mid + half * tnp.tanh(x)


def _fit(x, shape, dtype, m=tnp):
    """x's elements repeated (or cut) into `shape`, cast to `dtype` (a gather, a reshape,
    a cast): how a table row of fixed shape takes any earlier value (`m`: tnp, or np for
    the NumPy counterpart)."""
    n = int(np.prod(shape, dtype=np.int64))
    flat = m.ravel(x)
    size = int(np.prod(x.shape))
    taken = m.take(flat, np.arange(n) % size) if n else flat[:0]
    return m.reshape(taken, shape).astype(dtype)


def _smooth_chain(names):
    def g(x):
        for n in names:
            lo, hi = UNARY[n][2:]
            x = UNARY[n][0](_into(x, lo, hi))
        return x
    return g


def _is_float(v):
    return np.dtype(v.dtype).kind == "f"


# -- the families --------------------------------------------------------------------------------

def unary(draw, values, smooth, dynamic):
    names = sorted(SMOOTH) if smooth else sorted(UNARY)
    name = draw(st.sampled_from(names))
    k = draw(st.integers(0, len(values) - 1))
    fn, _, lo, hi = UNARY[name]
    if smooth:
        return Step(f"{name}(into)", lambda x: fn(_into(x, lo, hi)), (k,), exact=False)
    exact = name in ("neg", "sign", "abs", "floor", "ceil", "round", "sqrt")
    return Step(name, fn, (k,), exact=exact, ref=UNARY[name][1])


_SMOOTH_BINARY = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul,
    "div": lambda a, b: a / _into(b, 0.5, 3.0),
    "pow": lambda a, b: tnp.power(_into(a, 0.5, 2.0), b),
    "atan2": lambda a, b: tnp.arctan2(a, _into(b, 0.5, 3.0)),
}


def binary(draw, values, smooth, dynamic):
    k = draw(st.integers(0, len(values) - 1))
    fits = [j for j, v in enumerate(values) if _broadcasts(v.shape, values[k].shape)]
    j = draw(st.sampled_from(fits))
    if smooth:
        name = draw(st.sampled_from(sorted(_SMOOTH_BINARY)))
        return Step(name, _SMOOTH_BINARY[name], (k, j), exact=name in ("add", "sub", "mul"))
    name = draw(st.sampled_from(sorted(BINARY)))
    exact = name not in ("pow", "atan2")
    return Step(name, BINARY[name][0], (k, j), exact=exact, ref=BINARY[name][1])


SCALARS = (2, -1, 0, 2.5, -0.0, True, float("nan"), float("inf"), 1.5j)


def scalar(draw, values, smooth, dynamic):
    """A binary op between a value and a weak Python scalar (either side), a cast, or a
    `where` over values."""
    k = draw(st.integers(0, len(values) - 1))
    how = draw(st.sampled_from(("scalar", "astype", "where")))
    if smooth:
        c = draw(st.sampled_from((2, -1, 0.5, 2.5)))
        name = draw(st.sampled_from(("add", "sub", "mul")))
        op = _SMOOTH_BINARY[name]
        if draw(st.booleans()):
            return Step(f"{name}(x, {c})", lambda x: op(x, c), (k,), exact=False)
        return Step(f"{name}({c}, x)", lambda x: op(c, x), (k,), exact=False)
    if how == "astype":
        dtype = draw(st.sampled_from((F64, F32, I64, I32, BOOL, "float16", "complex128")))
        return Step(f"astype({dtype})", lambda x: x.astype(dtype), (k,),
                    ref=lambda x: x.astype(dtype))
    if how == "where":
        j = draw(st.integers(0, len(values) - 1))
        if not _broadcasts(values[k].shape, values[j].shape):
            return None
        return Step("where(x > 0, x, y)", lambda x, y: tnp.where(x > 0, x, y), (k, j),
                    ref=lambda x, y: np.where(x > 0, x, y))
    c = draw(st.sampled_from(SCALARS))
    name = draw(st.sampled_from(sorted(BINARY)))
    fn, ref = BINARY[name][:2]
    exact = name not in ("pow", "atan2")
    if draw(st.booleans()):
        return Step(f"{name}(x, {c!r})", lambda x: fn(x, c), (k,), exact=exact,
                    ref=lambda x: ref(x, c))
    return Step(f"{name}({c!r}, x)", lambda x: fn(c, x), (k,), exact=exact,
                ref=lambda x: ref(c, x))


def _broadcasts(a, b):
    try:
        np.broadcast_shapes(tuple(a), tuple(b))
        return True
    except ValueError:
        return False


_REDUCTIONS = ("sum", "mean", "prod", "max", "min", "amax", "any", "all", "argmax", "argmin",
               "cumsum", "cumprod", "sort", "argsort", "var", "std")
# No max or sort when smooth: tile and repeat make ties, where the derivative has a kink.
_SMOOTH_REDUCTIONS = ("sum", "mean", "prod", "cumsum", "cumprod", "var")
_ONE_AXIS = ("argmax", "argmin", "cumsum", "cumprod", "sort", "argsort")


def _valid_axes(axes, ndim) -> bool:
    if axes is None:
        return True
    axes = np.atleast_1d(np.array(axes, dtype=np.int64))
    return bool(np.all((-ndim <= axes) & (axes < ndim))) and len(
        set((axes % max(ndim, 1)).tolist())) == axes.size


def reduction(draw, values, smooth, dynamic):
    k = draw(st.integers(0, len(values) - 1))
    ndim = len(values[k].shape)
    name = draw(st.sampled_from(_SMOOTH_REDUCTIONS if smooth else _REDUCTIONS))
    f, ref = getattr(tnp, name), getattr(np, name)
    if name in _ONE_AXIS:
        axes = [a for a in (None, 0, -1) if _valid_axes(a, ndim)]
        if name in ("sort", "argsort"):
            axes = [a for a in axes if a is not None]
        if not axes:
            return None
        axis = draw(st.sampled_from(axes))
        return Step(f"{name}(axis={axis})", lambda x: f(x, axis=axis), (k,),
                    ref=lambda x: ref(x, axis=axis))
    axis = draw(st.sampled_from([a for a in AXES if _valid_axes(a, ndim)]))
    keep = draw(st.booleans())
    if name == "prod" and smooth:
        return Step(f"prod(into,axis={axis})", lambda x: f(_into(x, 0.5, 1.5), axis=axis,
                                                             keepdims=keep), (k,))
    return Step(f"{name}(axis={axis},keepdims={keep})",
                lambda x: f(x, axis=axis, keepdims=keep), (k,),
                ref=lambda x: ref(x, axis=axis, keepdims=keep))


def _index(draw, shape):
    """A basic or advanced index into an array of `shape`."""
    key = []
    for n in shape:
        kind = draw(st.sampled_from(("all", "int", "slice", "list", "none")))
        if kind == "int" and n:
            key.append(draw(st.integers(-n, n - 1)))
        elif kind == "slice":
            step = draw(st.sampled_from((1, 2, -1, -2)))
            key.append(slice(draw(st.integers(-4, 4)), draw(st.one_of(st.none(),
                                                                       st.integers(-4, 4))),
                             step))
        elif kind == "list" and n:
            key.append(draw(st.lists(st.integers(-n, n - 1), min_size=1, max_size=3)))
        elif kind == "none":
            key.append(None)
            key.append(slice(None))
        else:
            key.append(slice(None))
    if draw(st.booleans()) and key:
        key = [Ellipsis] + key[1:]
    return tuple(key)


def indexing(draw, values, smooth, dynamic):
    k = draw(st.integers(0, len(values) - 1))
    shape = values[k].shape
    key = _index(draw, shape)
    if sum(isinstance(i, list) for i in key) > 1:
        key = tuple(i if not isinstance(i, list) else i[:1] for i in key)
    how = draw(st.sampled_from(("get", "at.get", "set", "add")))
    if how == "get":
        return Step(f"getitem[{key}]", lambda x: x[key], (k,), ref=lambda x: x[key])
    if how == "at.get":
        return Step(f"at[{key}].get", lambda x: tnp.at(x)[key].get(), (k,),
                    ref=lambda x: x[key])
    j = draw(st.integers(0, len(values) - 1))
    if None in key:
        key = tuple(i for i in key if i is not None)
    try:
        target = np.empty(tuple(shape))[key].shape
    except IndexError:
        return None
    if not _broadcasts(values[j].shape, target) or \
            np.broadcast_shapes(tuple(values[j].shape), target) != target:
        return None
    return Step(f"at[{key}].{how}", lambda x, u: getattr(tnp.at(x)[key], how)(u), (k, j))


def shape_op(draw, values, smooth, dynamic):
    k = draw(st.integers(0, len(values) - 1))
    shape = tuple(values[k].shape)
    ndim = len(shape)
    ops = ["ravel", "expand_dims", "flip", "tile", "concat_self", "stack_self", "broadcast"]
    if ndim >= 2:
        ops += ["transpose", "swapaxes", "reshape"]
    if 1 in shape:
        ops.append("squeeze")
    if ndim:
        ops += ["repeat"]
    op = draw(st.sampled_from(ops))
    if op == "ravel":
        return Step("ravel", tnp.ravel, (k,))
    if op == "expand_dims":
        a = draw(st.integers(-ndim - 1, ndim))
        return Step(f"expand_dims({a})", lambda x: tnp.expand_dims(x, a), (k,))
    if op == "flip":
        a = draw(st.sampled_from([None] + list(range(-ndim, ndim))))
        return Step(f"flip({a})", lambda x: tnp.flip(x, a), (k,))
    if op == "tile":
        reps = tuple(draw(st.lists(st.integers(0, 2), min_size=1, max_size=2)))
        return Step(f"tile({reps})", lambda x: tnp.tile(x, reps), (k,))
    if op == "concat_self":
        a = draw(st.sampled_from([None] + list(range(-ndim, ndim))))
        return Step(f"concatenate(x, flip(x), {a})",
                    lambda x: tnp.concatenate([x, tnp.flip(x)], a), (k,))
    if op == "stack_self":
        a = draw(st.integers(-ndim - 1, ndim))
        return Step(f"stack(x, -x, {a})", lambda x: tnp.stack([x, x * 2], a), (k,))
    if op == "broadcast":
        new = (draw(st.sampled_from((0, 1, 2))),) + shape
        return Step(f"broadcast_to({new})", lambda x: tnp.broadcast_to(x, new), (k,))
    if op == "transpose":
        perm = tuple(draw(st.permutations(range(ndim))))
        return Step(f"transpose({perm})", lambda x: tnp.transpose(x, perm), (k,))
    if op == "swapaxes":
        a, b = draw(st.integers(-ndim, ndim - 1)), draw(st.integers(-ndim, ndim - 1))
        return Step(f"swapaxes({a},{b})", lambda x: tnp.swapaxes(x, a, b), (k,))
    if op == "reshape":
        new = (shape[0] * shape[1], -1) if 0 not in shape else (shape[0] * shape[1],) + \
            shape[2:]
        return Step(f"reshape({new})", lambda x: tnp.reshape(x, new), (k,))
    if op == "squeeze":
        return Step("squeeze", tnp.squeeze, (k,))
    reps = draw(st.integers(0, 2))
    a = draw(st.sampled_from([None] + list(range(-ndim, ndim))))
    return Step(f"repeat({reps},{a})", lambda x: tnp.repeat(x, reps, a), (k,))


def product(draw, values, smooth, dynamic):
    k = draw(st.integers(0, len(values) - 1))
    shape = tuple(values[k].shape)
    if not shape:
        return None
    j = draw(st.integers(0, len(values) - 1))
    m = draw(st.sampled_from((0, 1, 3)))
    how = draw(st.sampled_from(("matmul", "einsum", "tensordot")))
    n = shape[-1]
    dtype = F64 if smooth else values[k].dtype
    if how == "matmul":
        return Step(f"matmul(x, fit(y, {n}x{m}))", lambda x, y: tnp.matmul(
            x, _fit(y, (n, m), dtype)), (k, j), exact=False)
    if how == "einsum":
        letters = "abc"[:len(shape)]
        spec = f"{letters},{letters[-1]}z->z{letters[:-1]}"
        return Step(f"einsum({spec})", lambda x, y: tnp.einsum(spec, x, _fit(y, (n, m), dtype)),
                    (k, j), exact=False)
    return Step("tensordot(x, y, 0)", lambda x, y: tnp.tensordot(x, _fit(y, (2,), dtype), 0),
                (k, j), exact=False)


_LINALG = ("inv", "det", "slogdet", "solve", "cholesky", "norm")


def _matrix(x, batch, n, dtype, how, smooth, m):
    """x fitted into a (batch of) n x n matrices made well conditioned, 2 I + 0.3 tanh(them)
    (raw: plus a - a, NaN where a is NaN or inf: a singular matrix's det, ~1e-16 or exactly 0
    from different LAPACK calls, is not within an op bound); for cholesky: a a^T + I
    (symmetric positive definite when finite)."""
    a = _fit(x, (*batch, n, n), dtype, m)
    a = 2 * m.eye(n, dtype=dtype) + 0.3 * m.tanh(a) + (0 if smooth else a - a)
    if how == "cholesky":
        a = m.matmul(a, m.swapaxes(a, -1, -2)) + m.eye(n, dtype=dtype)
    return a


def _linalg_call(how, a, b, m):
    if how == "solve":
        return m.linalg.solve(a, b)
    if how == "slogdet":
        return tuple(m.linalg.slogdet(a))
    return getattr(m.linalg, how)(a)


def linalg(draw, values, smooth, dynamic):
    """tnp.linalg on (batches of) square matrices of 0 to 3 rows made of earlier values."""
    ks = [k for k, v in enumerate(values) if np.prod(v.shape) > 0]
    if not ks:
        return None
    k, j = draw(st.sampled_from(ks)), draw(st.sampled_from(ks))
    how = draw(st.sampled_from(_LINALG))
    batch = draw(st.sampled_from(((), (2,), (0,))))
    n = draw(st.sampled_from((0, 1, 2, 3)))
    dtype = F32 if not smooth and values[k].dtype == F32 else F64

    def call(x, y, m=tnp):
        with np.errstate(all="ignore"):
            a = _matrix(x, batch, n, dtype, how, smooth, m)
            return _linalg_call(how, a, _fit(y, (*batch, n, 2), dtype, m), m)
    return Step(f"linalg.{how}({batch}+{n}x{n})", call, (k, j), exact=False,
                ref=lambda x, y: call(x, y, np))


# Table rows the fuzzer takes as ops: the rest have no inputs, bind an effect or a callee.
_ROW_EXCLUDED = {"assign", "custom_gradient", "call", "constant", "iota", "dim_size"}
ROWS = [c for c in CASES if c.args and not c.weak_args and c.primitive not in _ROW_EXCLUDED]
SMOOTH_ROWS = [c for c in ROWS if c.grad_argnums and c.primitive not in ("max", "min", "mod")
               and "max" not in c.name and "min" not in c.name]


def table_row(draw, values, smooth, dynamic):
    """A row of the op table applied to earlier values fitted to the row's argument shapes
    (smooth: the row's own sample times 1 + 0.05 tanh(value), inside its domain), its own
    samples for the other arguments."""
    row = draw(st.sampled_from(SMOOTH_ROWS if smooth else ROWS))
    args, fns = [], []
    for i, a in enumerate(row.args):
        a = np.asarray(a)
        use = draw(st.booleans()) and (not smooth or i in row.grad_argnums) and a.size
        if not use:
            fns.append(None)
            continue
        k = draw(st.integers(0, len(values) - 1))
        if not values[k].shape or 0 in values[k].shape:
            fns.append(None)
            continue
        args.append(k)
        if smooth:
            fns.append(lambda v, a=a: a * (1 + 0.05 * tnp.tanh(_fit(v, a.shape, a.dtype))))
        else:
            fns.append(lambda v, a=a: _fit(v, a.shape, a.dtype))

    def fn(*vs):
        # (the row's own samples as tensors too: the table runs rows on tensors or on NumPy
        # arrays, not mixed; NumPy's a[i] cannot take a traced i)
        it = iter(vs)
        return row.fn(*(tg.constant(a) if f is None else f(next(it))
                        for a, f in zip(row.args, fns, strict=True)))

    return Step(f"row {row.name}", fn, tuple(args), exact=False)


def transform(draw, values, smooth, dynamic):
    floats = [k for k, v in enumerate(values) if _is_float(v)]
    if not floats:
        return None
    k = draw(st.sampled_from(floats))
    names = draw(st.lists(st.sampled_from(("sin", "tanh", "exp", "atan", "log1p")), min_size=1,
                          max_size=2))
    g = _smooth_chain(names)
    # (jacobian's result shape is the input's: it needs static dims)
    how = draw(st.sampled_from(("grad", "vjp", "tape", "vmap") + ((
        "jacobian",) if not dynamic else ())))
    label = f"{how}({'.'.join(names)})"
    if how == "grad":
        return Step(label, lambda x: tg.grad(lambda y: tnp.sum(g(y)))(x), (k,), exact=False)
    if how == "vjp":
        def vjp(x):
            out, pullback = tg.vjp(g, x)
            return out, pullback(out * 0.5)[0]
        return Step(label, vjp, (k,), exact=False)
    if how == "tape":
        def taped(x):
            with tg.GradientTape() as tape:
                tape.watch(x)
                y = tnp.sum(g(x) * x)
            return tape.gradient(y, x)
        return Step(label, taped, (k,), exact=False)
    if how == "vmap":
        if not values[k].shape:
            return None
        return Step(label, lambda x: tg.vmap(lambda r: tnp.sum(g(r)) * r)(x), (k,),
                    exact=False)
    if np.prod(values[k].shape) > 8:
        return None
    return Step(label, lambda x: tg.jacobian(g)(x), (k,), exact=False)


def control(draw, values, smooth, dynamic):
    floats = [k for k, v in enumerate(values) if _is_float(v)]
    if not floats:
        return None
    k = draw(st.sampled_from(floats))
    names = draw(st.lists(st.sampled_from(("sin", "tanh", "atan")), min_size=1, max_size=2))
    g = _smooth_chain(names)
    how = draw(st.sampled_from(("cond", "fori_loop", "while_loop", "scan")))
    label = f"{how}({'.'.join(names)})"
    if how == "cond":
        return Step(label, lambda x: tg.cond(tnp.sum(x) > 0.25, g, lambda v: v * v - 1.0,
                                              operands=(x,)), (k,), exact=False)
    if how == "fori_loop":
        n = draw(st.integers(0, 4))
        return Step(f"{label},{n}", lambda x: tg.fori_loop(
            0, n, lambda i, c: c + 0.1 * g(c) * (i % 2).astype(c.dtype), x), (k,), exact=False)
    if how == "while_loop":
        # a data-dependent trip count (at most 5): halve until the sum is small
        def loop(x):
            return tg.while_loop(lambda i, c: (i < 5) & (tnp.sum(c * c) > 0.5),
                                 lambda i, c: (i + 1, 0.5 * g(c) + 0.25 * c), (0, x))[1]
        return Step(label, loop, (k,), exact=False)
    rev, m = draw(st.booleans()), draw(st.sampled_from((0, 1, 3)))

    def scanned(x):
        # over m rows of x's shape: a known length (a scan needs one), rows of x's dims
        return tg.scan(lambda c, r: (c * 0.5 + g(r), c * r), x * 0.1,
                       tnp.stack([x, x * 0.5, -x])[:m], reverse=rev)
    return Step(f"{label},rows={m},reverse={rev}", scanned, (k,), exact=False)


FAMILIES = {"unary": unary, "binary": binary, "scalar": scalar, "reduction": reduction,
            "indexing": indexing, "shape": shape_op, "product": product, "row": table_row,
            "linalg": linalg, "transform": transform, "control": control}
DYNAMIC_FAMILIES = ("unary", "binary", "scalar", "reduction", "transform", "control")


def _numpy_accepts(step, values) -> bool:
    """Whether NumPy computes `step` on the same values in dtypes tracegrad has."""
    if step.ref is None:
        return False
    try:
        with np.errstate(all="ignore"):
            outs = _leaves(step.ref(*(np.asarray(values[i]) for i in step.args)))
    except Exception:  # noqa: BLE001 - NumPy rejects the step too
        return False
    return all(np.asarray(o).dtype in SUPPORTED for o in outs) and all(
        np.asarray(values[i]).dtype in SUPPORTED for i in step.args)


@st.composite
def programs(draw, smooth=False, dynamic=False, max_steps=8, on_error=None):
    """Programs of 1-3 inputs and up to `max_steps` steps; a step that crashes or is
    rejected while NumPy computes it raises, or, with `on_error`, is reported to
    `on_error(description)` and dropped (the long run keeps going)."""
    inputs = [draw(input_array(smooth)) for _ in range(draw(st.integers(1, 3)))]
    dyn = ()
    if dynamic:
        dyn = tuple(tuple(a for a in range(x.ndim) if draw(st.booleans())) for x in inputs)
    values = [tg.constant(x) for x in inputs]
    saved, tg.config.backend = tg.config.backend, "numpy"  # eager transforms compile
    try:
        steps = _steps(draw, values, smooth, dynamic, max_steps, on_error)
    finally:
        tg.config.backend = saved
    return Program(inputs, steps, smooth, dyn)


def _steps(draw, values, smooth, dynamic, max_steps, on_error):
    steps = []
    families = DYNAMIC_FAMILIES if dynamic else sorted(FAMILIES)
    for _ in range(draw(st.integers(1, max_steps))):
        step = FAMILIES[draw(st.sampled_from(families))](draw, values, smooth, dynamic)
        if step is None:
            continue
        try:
            with np.errstate(all="ignore"):
                outs = _leaves(step.fn(*(values[i] for i in step.args)))
        except Exception as e:  # noqa: BLE001 - sorted below
            try:
                _sort_error(e, step, values)
            except Exception:
                if on_error is None:
                    raise
                on_error(f"{step.name}{step.args} on {[values[i] for i in step.args]}\n"
                         + traceback.format_exc())
            continue
        if smooth and not all(_is_float(o) and np.isfinite(np.asarray(o)).all() for o in outs):
            continue  # (a NaN output, e.g. var of an empty slice, has no finite differences)
        values.extend(outs)
        steps.append(step)
    return steps


def _sort_error(e, step, values):
    """Re-raise `e` if it is a finding: not an error tracegrad reports nor one NumPy raises
    too (a crash), or tracegrad's rejection of a step NumPy computes."""
    accepted = _numpy_accepts(step, values)
    if not isinstance(e, (TracegradError, np.linalg.LinAlgError)) and (
            step.ref is None or accepted):
        raise e
    if isinstance(e, TracegradError) and accepted:
        raise InvalidRejection(f"{step.name}{step.args} on {[values[i] for i in step.args]}"
                               f": {type(e).__name__}: {e}") from e
