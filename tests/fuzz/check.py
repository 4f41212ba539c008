"""What the fuzzer checks on each program: the numpy backend equals eager execution bit for
bit (NaN where NaN, signed zeros alike; programs of inexact ops within the bounds below
when not: NumPy's SIMD loops differ in the last bits from its strided ones), a
`TensorSpec` signature with None dims gives the same values at other sizes, the numba
backend equals the numpy backend (bit for bit on programs of exact ops, see docs/numba.md
"Semantics match the NumPy reference", up to the signs of zeros the optimizer's
`x + 0 -> x` may change, docs/passes.md; else within the op table's backend bounds:
float64 1e-12 relative, float32 4 ulp or 1e-5 relative), and float64 gradients of smooth
programs equal central finite differences (relative 1e-5, absolute 1e-6 times 1 + the
largest difference quotient)."""

from __future__ import annotations

import collections
import contextlib

import numpy as np

import tracegrad as tg
import tracegrad.numpy as tnp
from tests.backends._util import assert_close_backends, assert_same, parts
from tests.finite_diff import central_difference
from tests.fuzz.programs import Program
from tracegrad.core.ir import FuncGraph
from tracegrad.errors import ShapeError, TracegradError
from tracegrad.function import compile_graph
from tracegrad.passes import optimize
from tracegrad.transforms.evaluate import Interpreter

GRAD_RTOL, GRAD_ATOL = 1e-5, 1e-6
STATS = collections.Counter()  # how often a check took its fallback


def _arrays(out):
    return [np.asarray(o) for o in out]


def assert_bitwise(got, want, what, signed_zeros=True):
    """Same count, dtypes, shapes, NaN positions, and the other values bit for bit (signs of
    zeros too, unless not `signed_zeros`)."""
    assert len(got) == len(want), f"{what}: {len(got)} outputs, expected {len(want)}"
    for k, (g, w) in enumerate(zip(_arrays(got), _arrays(want), strict=True)):
        where = f"{what}, output {k}"
        if w.dtype.kind == "c" and (g.dtype, g.shape) == (w.dtype, w.shape):
            g, w = parts(g), parts(w)
        if w.dtype.kind != "f" or (g.dtype, g.shape) != (w.dtype, w.shape):
            assert_same(g, w, what=where)  # exact for integers and bools
            continue
        if not signed_zeros:
            g, w = np.asarray(g + 0.0), np.asarray(w + 0.0)  # -0.0 + 0.0 is +0.0
        nan = np.isnan(w)
        np.testing.assert_array_equal(np.isnan(g), nan, err_msg=f"{where}: NaN positions")
        bits = f"i{w.dtype.itemsize}"
        assert np.array_equal(g[~nan].view(bits), w[~nan].view(bits)), \
            f"{where}: not bit for bit\n got {g.tolist()}\n expected {w.tolist()}"


def assert_same_as_eager(program: Program, got, want, what):
    """Bit for bit; programs of inexact ops within the backend bounds when not: NumPy's
    float loops for exp, log, tan, arcsin ... give other last bits on contiguous (SIMD) and
    strided arrays, and a trace may lay out an intermediate otherwise than eager execution
    (a reversed scan's ys are a view of its history)."""
    try:
        assert_bitwise(got, want, what)
    except AssertionError:
        if program.exact:
            raise
        assert_close_backends(_arrays(got), _arrays(want))


@contextlib.contextmanager
def default_backend(name):
    """`tg.config.backend` is `name` in the block (eager tg.grad, vmap, jacobian compile
    their graphs with it)."""
    saved, tg.config.backend = tg.config.backend, name
    try:
        yield
    finally:
        tg.config.backend = saved


def eager(program: Program, inputs):
    with np.errstate(all="ignore"), default_backend("numpy"):
        return _arrays(program(*[tg.constant(x) for x in inputs]))


def check_backends(program: Program, numba: bool = False) -> None:
    want = eager(program, program.inputs)
    with np.errstate(all="ignore"), default_backend("numpy"):
        traced = tg.function(program, backend="numpy")(*program.inputs)
    assert_same_as_eager(program, traced, want, "numpy backend vs eager")
    if program.dynamic:
        with default_backend("numpy"):
            check_signature(program)
    if numba:
        with np.errstate(all="ignore"), default_backend("numba"):
            got = tg.function(program, backend="numba")(*program.inputs)
        if program.exact:
            # (the optimizer's x + 0 -> x and sum over no axes -> x may change a zero's
            # sign, docs/passes.md)
            assert_bitwise(got, traced, "numba vs numpy backend", signed_zeros=False)
            return
        try:
            assert_close_backends(_arrays(got), _arrays(traced))
        except AssertionError:
            # rounding within an op's bound can be amplified by a later ill-conditioned op
            # (1 - tanh(x)**2 at large x): then each op alone must be within its bound
            check_ops_alone(program, program.inputs, traced)
            STATS["ops alone"] += 1


def check_ops_alone(fn, inputs, want) -> None:
    """Each op of the graph the numba backend compiles for `fn` (the optimized trace), run
    alone by the numba backend on the operands the numpy backend gave it, is within the
    backend bounds of the numpy result. The ops are independent outputs of one kernel; the
    numpy run of the optimized graph must give `want` bit for bit (passes keep bits,
    docs/passes.md)."""
    concrete = tg.function(fn, backend="numba").get_concrete_function(*inputs)
    graph = optimize(concrete.graph)
    interp = Interpreter(graph)
    env = list(inputs) + [np.asarray(c._value) for c, _ in graph.captures]
    env += [None] * (interp.n_slots - len(env))
    records = []
    with np.errstate(all="ignore"):
        for op, impl, attrs, ins, outs, *_ in interp.plan:
            args = [env[i] for i in ins]
            res = impl(*args, **attrs)
            res = [np.asarray(r) for r in (res if op.primitive.multiple_results else [res])]
            for i, r in zip(outs, res, strict=True):
                env[i] = r
            if args:  # (constants are no computation)
                records.append((op, args, res))
    assert_bitwise([env[i] for i in interp.out_slots], want, "optimized graph, numpy")
    alone = FuncGraph("ops_alone")
    with alone.as_default():
        outs = []
        for op, _, _ in records:
            r = op.primitive.bind(*(alone.add_input(t.type) for t in op.inputs), **op.attrs)
            outs.extend(r if op.primitive.multiple_results else [r])
        alone.outputs = [alone.to_tensor(o) for o in outs]
    with np.errstate(all="ignore"):
        got = compile_graph(alone, "numba")([a for _, args, _ in records for a in args])
    assert_close_backends(got, [r for _, _, res in records for r in res], graph=alone)


def _resized(program: Program, size: int):
    out = []
    for x, axes in zip(program.inputs, program.dynamic, strict=True):
        for a in axes:
            x = np.resize(np.moveaxis(x, a, 0), (size,) + tuple(np.delete(x.shape, a)))
            x = np.moveaxis(x, 0, a)
        out.append(np.array(x))
    return out


def check_signature(program: Program) -> None:
    """One trace with the dynamic axes None serves the inputs' own sizes and others (0, 1,
    4): the values are eager execution's, and where eager raises a tracegrad error (shapes
    that no longer broadcast) so does the traced call. Where a None dim is 1 at run time
    the traced call may raise ShapeError instead of broadcasting, as documented."""
    spec = [tg.TensorSpec([None if a in axes else n for a, n in enumerate(x.shape)], x.dtype)
            for x, axes in zip(program.inputs, program.dynamic, strict=True)]
    f = tg.function(program, input_signature=spec, backend="numpy")
    for size in (None, 0, 1, 4):
        inputs = program.inputs if size is None else _resized(program, size)
        try:
            want = eager(program, inputs)
        except TracegradError:
            try:
                with np.errstate(all="ignore"):
                    f(*inputs)
            except TracegradError:
                continue
            raise AssertionError(f"signature, size {size}: eager raises, the trace does not")
        try:
            with np.errstate(all="ignore"):
                got = f(*inputs)
        except ShapeError:
            if _size_one_dynamic(program, inputs):
                continue  # unknown dims meeting are taken equal (docs/numpy.md "Unknown dims")
            raise
        assert_same_as_eager(program, got, want, f"signature with None dims, size {size}")


def _size_one_dynamic(program: Program, inputs) -> bool:
    """Whether an input has size 1 along one of its None dims: it does not broadcast
    against another unknown dim (the traced op raises ShapeError where eager broadcasts)."""
    return any(x.shape[a] == 1 for x, axes in zip(inputs, program.dynamic, strict=True)
               for a in axes)


def _weights(outputs):
    rng = np.random.default_rng(0)
    return [rng.standard_normal(np.shape(o)) for o in outputs]


def check_gradient(program: Program) -> None:
    """tg.grad of sum(w * outputs) over every input equals central differences."""
    weights = _weights(eager(program, program.inputs))

    def loss(*xs):
        return sum((tnp.sum(o * w) for o, w in zip(program(*xs), weights, strict=True)),
                   0.0)

    n = len(program.inputs)
    with default_backend("numpy"):
        _check_gradient(program, loss, n)


def _check_gradient(program, loss, n):
    grads = tg.grad(loss, argnums=tuple(range(n)))(*program.inputs)
    value = tg.function(loss, backend="numpy")
    for i, (x, g) in enumerate(zip(program.inputs, grads, strict=True)):
        def at(xi, i=i):
            xs = list(program.inputs)
            xs[i] = xi
            return value(*xs)
        fd = central_difference(at, x)
        g = np.asarray(g)
        atol = GRAD_ATOL * (1.0 + float(np.max(np.abs(fd), initial=0.0)))
        np.testing.assert_allclose(g, fd, rtol=GRAD_RTOL, atol=atol,
                                   err_msg=f"gradient of input {i} vs central differences")
