"""Control-flow passes (`passes/loops.py`): unused carries, consts and cond operands go,
invariant ops leave loops (only those that cannot raise), constant predicates inline; values
stay bit-equal on loops that run zero times, once, many times and a data-dependent number
of times, and on the graphs of the public API and of their gradients."""

import numpy as np
import pytest
from finite_diff import central_difference, central_jacobian
from passgraphs import build, check_equivalent, const, names

import tracegrad as tg
import tracegrad.numpy as tnp
from tracegrad import ops, passes
from tracegrad.core.types import TensorType
from tracegrad.core.verify import verify
from tracegrad.ops.control_flow import cond_p, while_p
from tracegrad.passes import simplify_control_flow
from tracegrad.passes.loops import HOIST_ALWAYS, HOIST_STATIC
from tracegrad.transforms.control_flow import build_graph
from tracegrad.transforms.evaluate import evaluate

F3, I64 = TensorType.parse("f64[3]"), TensorType.parse("i64[]")
RNG = np.random.default_rng(7)


def same(before, after, *args):
    """`after` verifies, keeps the signature and gives bit-equal results to `before` on
    `args`."""
    verify(after)
    assert [(t.type, t.name) for t in after.inputs] == [(t.type, t.name) for t in before.inputs]
    assert [t.type for t in after.outputs] == [t.type for t in before.outputs]
    want, got = evaluate(before, *args), evaluate(after, *args)
    for w, g in zip(want, got, strict=True):
        assert w.dtype == g.dtype
        np.testing.assert_array_equal(g, w)


def check(before, after, *cases):
    """`check_equivalent`, and equal values on each tuple of arguments in `cases`."""
    check_equivalent(before, after)
    for args in cases:
        same(before, after, *args)


def whiles(graph):
    return [op for op in graph.operations if op.primitive is while_p]


def the(graph, prim=while_p):
    (op,) = [op for op in graph.operations if op.primitive is prim]
    return op


def consts(op):
    return [t.type for t in op.inputs[:op.attrs["num_consts"]]]


def carries(op):
    return [t.type for t in op.inputs[op.attrs["num_consts"]:]]


def body(op):
    return names(op.attrs["body_graph"])


def while_op(consts_, init, cond_fn, body_fn, **attrs):
    """A `while` op bound directly (for `keep_history`): `cond_fn` and `body_fn` take
    `(*consts, *carry)`."""
    types = [t.type for t in (*consts_, *init)]
    return while_p.bind(*consts_, *init, cond_graph=build_graph("cond", types, cond_fn),
                        body_graph=build_graph("body", types, body_fn),
                        num_consts=len(consts_), **attrs)


def x3():
    return RNG.normal(size=3)


TRIPS = (0, 1, 4, -2)  # a loop bound n: zero times, once, several, zero again


# -- unused carries -------------------------------------------------------------------------------


def three_carries(update_s, cond_extra=None):
    """`(i, s, p)` while `i < n`; `p` is never returned; `update_s(s, p)`."""
    def body_(g, x, n):
        def cond_fn(i, s, p):
            return i < n if cond_extra is None else (i < n) & cond_extra(p)

        _, s, _ = tg.while_loop(cond_fn, lambda i, s, p: (i + 1, update_s(s, p), p * s + 1.0),
                                (0, x, x))
        return s

    return build(["f64[3]", "i64[]"], body_)


def test_a_carry_nothing_reads_is_removed():
    g = three_carries(lambda s, p: tnp.sin(s))
    out = simplify_control_flow(g)
    op = the(out)
    assert carries(op) == [I64, F3]
    assert "mul" not in body(op)
    check(g, out, *[(x3(), np.int64(n)) for n in TRIPS])


def test_maximum_iterations_stays_with_a_pruned_loop():
    def body_(g, x, n):
        _, s, _ = tg.while_loop(lambda i, s, p: i < n, lambda i, s, p: (i + 1, s * 1.5, p - s),
                                (0, x, x), maximum_iterations=3)
        return s

    g = build(["f64[3]", "i64[]"], body_)
    out = simplify_control_flow(g)
    assert the(out).attrs["maximum_iterations"] == 3 and len(carries(the(out))) == 2
    check(g, out, *[(x3(), np.int64(n)) for n in (*TRIPS, 10)])


@pytest.mark.parametrize("g", [
    three_carries(lambda s, p: s + p),  # the kept carry reads p
    three_carries(lambda s, p: tnp.sin(s), cond_extra=lambda p: tnp.sum(p) < 50.0),  # cond
], ids=["body-reads-it", "condition-reads-it"])
def test_a_carry_that_a_kept_carry_or_the_condition_reads_stays(g):
    out = simplify_control_flow(g)
    assert carries(the(out)) == [I64, F3, F3]
    check(g, out, *[(x3(), np.int64(n)) for n in TRIPS])


def test_carries_are_removed_transitively():
    def body_(g, x, n):
        # q feeds p, p feeds nothing that is used: both go; r feeds s: r stays
        _, s, _, _, _ = tg.while_loop(
            lambda i, s, p, q, r: i < n,
            lambda i, s, p, q, r: (i + 1, s + r, p + q, tnp.cos(q), r * 0.5), (0, x, x, x, x))
        return s

    g = build(["f64[3]", "i64[]"], body_)
    out = simplify_control_flow(g)
    assert carries(the(out)) == [I64, F3, F3]
    assert "cos" not in body(the(out))
    check(g, out, *[(x3(), np.int64(n)) for n in TRIPS])


def _history_loop(uses):
    """`(i, s, p)` with `keep_history=True` while `i < n`; returns the results `uses` picks
    from `(i, s, p, count, hist_i, hist_s, hist_p)`."""
    def body_(g, x, n):
        outs = while_op([n], [const(g, 0, "int64"), x, x], lambda n, i, s, p: i < n,
                        lambda n, i, s, p: [i + 1, tnp.sin(s), p * s], keep_history=True)
        return [outs[k] for k in uses]

    return build(["f64[3]", "i64[]"], body_)


@pytest.mark.parametrize("uses,kept,history", [
    ((3, 5), 2, True),      # the count and s's history: p goes, the history stays
    ((6,), 3, True),        # p's history is read: p stays
    ((1,), 2, False),       # only s's final value: no history is built any more
    ((4,), 1, True),        # only i's history: s and p go
], ids=["count-and-history", "history-of-p", "final-only", "history-of-i"])
def test_keep_history_loops_keep_what_their_histories_need(uses, kept, history):
    g = _history_loop(uses)
    out = simplify_control_flow(g)
    op = the(out)
    assert len(carries(op)) == kept
    assert bool(op.attrs.get("keep_history")) is history
    assert len(op.outputs) == kept + (1 + kept if history else 0)
    check(g, out, *[(x3(), np.int64(n)) for n in TRIPS])


# -- carries that never change, consts ------------------------------------------------------------


def test_a_carry_the_body_passes_through_becomes_a_const():
    g = tg.trace(lambda x, n: tg.fori_loop(0, n, lambda i, v: v * 2.0, x))(
        tg.TensorSpec([3]), tg.TensorSpec([], "int64"))  # fori_loop carries its upper bound
    assert len(carries(the(g))) == 3
    out = simplify_control_flow(g)
    op = the(out)
    assert consts(op) == [I64] and carries(op) == [I64, F3]
    check(g, out, *[(x3(), np.int64(n)) for n in TRIPS])


def test_the_final_value_of_a_carry_passed_through_is_its_initial_value():
    def body_(g, x, n):
        _, k, v = tg.while_loop(lambda i, k, v: i < k, lambda i, k, v: (i + 1, k, v * 2.0),
                                (0, n, x))
        return [k, v]

    g = build(["f64[3]", "i64[]"], body_)
    out = simplify_control_flow(g)
    assert out.outputs[0] is out.inputs[1]
    check(g, out, *[(x3(), np.int64(n)) for n in TRIPS])


def test_a_carry_passed_through_whose_history_is_read_stays_a_carry():
    def body_(g, x, n):
        outs = while_op([], [const(g, 0, "int64"), n, x], lambda i, k, v: i < k,
                        lambda i, k, v: [i + 1, k, v * 2.0], keep_history=True)
        return [outs[2], outs[5]]  # v, and k's history

    g = build(["f64[3]", "i64[]"], body_)
    out = simplify_control_flow(g)
    assert len(carries(the(out))) == 3
    check(g, out, *[(x3(), np.int64(n)) for n in TRIPS])


def test_unread_consts_go_and_a_value_passed_twice_is_passed_once():
    def body_(g, x, y, n):
        _, v = while_op([x, y, x, n], [const(g, 0, "int64"), x],
                        lambda x, y, x2, n, i, v: i < n,
                        lambda x, y, x2, n, i, v: [i + 1, v * x + v * x2])  # y: unread
        return v

    g = build(["f64[3]", "f64[3]", "i64[]"], body_)
    out = simplify_control_flow(g)
    op = the(out)
    assert consts(op) == [F3, I64]  # x once, n; y gone
    assert op.inputs[0] is out.inputs[0] and op.inputs[1] is out.inputs[2]
    check(g, out, *[(x3(), x3(), np.int64(n)) for n in TRIPS])


# -- loop-invariant code motion ---------------------------------------------------------------


def test_invariant_ops_are_computed_once_before_the_loop():
    def f(x, a, n):
        return tg.fori_loop(0, n, lambda i, v: v * tnp.cos(a) + tnp.sum(a * a), x)

    g = tg.trace(f)(tg.TensorSpec([3]), tg.TensorSpec([3]), tg.TensorSpec([], "int64"))
    out = passes.optimize(g)
    op = the(out)
    assert {"cos", "reduce_sum"} <= set(names(out))
    # i + 1, v * c + s: the scalar s is broadcast in the loop, where it fuses
    assert body(op) == ["constant", "add", "mul", "broadcast_in_dim", "add"]
    assert consts(op)[1:] == [F3, TensorType.parse("f64[]")]
    check(g, out, *[(x3(), x3(), np.int64(n)) for n in TRIPS])


def test_a_broadcast_moves_only_with_an_op_that_reads_it():
    def f(x, a, b, n):  # a * 2 moves, its broadcast stays; broadcast(a) * b moves whole
        return tg.fori_loop(0, n, lambda i, v: v + a * 2.0 + a * b, x)

    g = tg.trace(f)(tg.TensorSpec([3]), tg.TensorSpec([]), tg.TensorSpec([3]),
                    tg.TensorSpec([], "int64"))
    out = passes.optimize(g)
    op = the(out)
    assert body(op).count("broadcast_in_dim") == 1 and "mul" not in body(op)
    assert consts(op)[1:] == [TensorType.parse("f64[]"), F3]
    check(g, out, *[(x3(), np.float64(1.5), x3(), np.int64(n)) for n in TRIPS])


def test_invariant_ops_leave_the_condition_too():
    def f(x, a):
        return tg.while_loop(lambda v: tnp.sum(v) < tnp.sum(tnp.exp(a)), lambda v: v + 1.0,
                             (x,))[0]

    g = tg.trace(f)(tg.TensorSpec([3]), tg.TensorSpec([3]))
    out = passes.optimize(g)
    assert names(the(out).attrs["cond_graph"]) == ["reduce_sum", "lt"]
    check(g, out, (np.full(3, 5.0), np.zeros(3)), (np.zeros(3), np.ones(3)))


def test_hoisting_keeps_nan_and_inf():
    def f(x, a):
        return tg.fori_loop(0, 3, lambda i, v: v + tnp.log(a) / a, x)

    g = tg.trace(f)(tg.TensorSpec([3]), tg.TensorSpec([3]))
    out = passes.optimize(g)
    assert "log" in names(out) and "log" not in body(the(out))
    check(g, out, (x3(), np.array([-1.0, 0.0, 2.0])))


def test_an_invariant_value_returned_by_the_body_is_a_const():
    g = tg.trace(lambda x, a, n: tg.fori_loop(0, n, lambda i, v: tnp.sin(a), x))(
        tg.TensorSpec([3]), tg.TensorSpec([3]), tg.TensorSpec([], "int64"))
    out = passes.optimize(g)
    assert body(the(out)) == ["constant", "add"]
    check(g, out, *[(x3(), x3(), np.int64(n)) for n in TRIPS])


def test_invariant_ops_leave_nested_loops_one_level_a_round():
    def f(x, a, n):
        inner = lambda i, v: v + tnp.sin(a)  # noqa: E731
        return tg.fori_loop(0, n, lambda i, v: tg.fori_loop(0, n, inner, v) * 0.5, x)

    g = tg.trace(f)(tg.TensorSpec([3]), tg.TensorSpec([3]), tg.TensorSpec([], "int64"))
    out = passes.optimize(g)
    assert "sin" in names(out)
    outer = the(out)
    inner_op = the(outer.attrs["body_graph"])
    assert "sin" not in body(outer) and "sin" not in body(inner_op)
    check(g, out, *[(x3(), x3(), np.int64(n)) for n in TRIPS])


def _zero_trip(fn, specs, args):
    """`fn` traced into a loop that runs zero times on `args`: its optimized graph runs
    without raising (as the traced one does) and gives the same values."""
    g = tg.trace(fn)(*specs)
    out = passes.optimize(g)
    same(g, out, *args)
    return out


def test_an_op_that_can_raise_stays_in_a_loop_that_may_not_run():
    # x[k] with k out of bounds raises where it runs: not before a loop that runs 0 times
    out = _zero_trip(lambda x, k, n: tg.fori_loop(0, n, lambda i, v: v + x[k], x),
                     [tg.TensorSpec([3]), tg.TensorSpec([], "int64"),
                      tg.TensorSpec([], "int64")], (x3(), np.int64(7), np.int64(0)))
    assert "gather" in body(the(out))
    spd = np.eye(2)
    out = _zero_trip(lambda a, n: tg.fori_loop(0, n, lambda i, v: v + ops.cholesky(a), a),
                     [tg.TensorSpec([2, 2]), tg.TensorSpec([], "int64")],
                     (-spd, np.int64(0)))
    assert "cholesky" in body(the(out))


def test_integer_pow_stays_float_pow_leaves():
    def f(v0, a, b, x, y, n):
        return tg.fori_loop(0, n, lambda i, c: (c[0] + a ** b, c[1] + x ** y), (v0, x))

    specs = [tg.TensorSpec([], "int64")] * 3 + [tg.TensorSpec([3])] * 2 + \
        [tg.TensorSpec([], "int64")]
    out = _zero_trip(f, specs, (np.int64(0), np.int64(2), np.int64(-1), x3(), x3(),
                                np.int64(0)))
    assert [op.name for op in out.operations].count("pow") == 1  # the float one
    assert body(the(out)).count("pow") == 1  # the integer one: 2 ** -1 raises in NumPy


def test_with_unknown_dims_only_ops_that_cannot_mismatch_leave():
    def f(x, y, n):  # x * y and max(x) can fail (sizes differ, x empty); sin, sum cannot
        return tg.fori_loop(0, n, lambda i, v: v + tnp.sum(tnp.sin(x)) + tnp.sum(x * y)
                            + tnp.max(x), 0.0)

    specs = [tg.TensorSpec([None]), tg.TensorSpec([None]), tg.TensorSpec([], "int64")]
    out = _zero_trip(f, specs, (np.ones(3), np.ones(4), np.int64(0)))
    same(tg.trace(f)(*specs), out, np.zeros(0), np.zeros(0), np.int64(0))
    assert "sin" not in body(the(out)) and "sin" in names(out)
    assert {"mul", "reduce_max"} <= set(body(the(out)))
    g = tg.trace(f)(*specs)
    for graph in (g, out):  # when the loop runs, both raise
        with pytest.raises(tg.errors.ShapeError):
            evaluate(graph, np.ones(3), np.ones(4), np.int64(1))
    check(g, out, *[(x3(), x3(), np.int64(n)) for n in TRIPS])


def test_the_allow_lists_hold_no_op_that_can_raise():
    risky = {"gather", "scatter", "scatter_add", "cholesky", "triangular_solve", "solve",
             "det", "slogdet", "while", "cond", "call", "custom_gradient", "argmax", "argmin"}
    assert not {p.name for p in HOIST_ALWAYS | HOIST_STATIC} & risky
    assert not HOIST_ALWAYS & HOIST_STATIC


# -- cond -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("flag", [True, False])
def test_a_constant_predicate_inlines_the_chosen_branch(flag):
    g = build(["f64[3]"], lambda g, x: tg.cond(const(g, flag, "bool"), lambda: tnp.sin(x),
                                                  lambda: x * 2.0))
    out = simplify_control_flow(g)
    assert names(out) == (["sin"] if flag else ["constant", "broadcast_in_dim", "mul"])
    check(g, out)


def test_a_predicate_folded_to_a_constant_inlines_in_optimize():
    g = build(["f64[3]"], lambda g, x: tg.cond(ops.gt(const(g, 1.0), const(g, 0.0)),
                                                  lambda: tnp.sin(x), lambda: x * 2.0))
    out = passes.optimize(g)
    assert names(out) == ["sin"]
    check(g, out)


def test_unused_cond_operands_and_results_go():
    def body_(g, x, y, z):
        a, _ = tg.cond(tnp.sum(x) > 0, lambda: (x * 2.0, tnp.exp(y)), lambda: (-x, y * y))
        b, c = tg.cond(tnp.sum(z) > 0, lambda x, z: (tnp.sin(x), z), lambda x, z: (x, z),
                       operands=(x, z))
        d = tg.cond(tnp.sum(x) < 1, lambda u, v, w: u * v, lambda u, v, w: v, operands=(x, x, y))
        return [a, b, c, d]

    g = build(["f64[3]", "f64[3]", "f64[3]"], body_)
    out = simplify_control_flow(g)
    first, second, third = [op for op in out.operations if op.primitive is cond_p]
    x, y, z = out.inputs
    assert first.inputs[1] is x and len(first.inputs) == 2  # y and exp(y) gone
    assert len(first.outputs) == 1
    assert second.inputs[1] is x and len(second.inputs) == 2  # z passed through
    assert out.outputs[2] is z
    assert third.inputs[1] is x and len(third.inputs) == 2  # x passed once, y unread
    check(g, out, (x3(), x3(), x3()), (-np.ones(3), x3(), -np.ones(3)))


def test_a_cond_whose_predicate_is_not_constant_and_uses_everything_stays():
    g = build(["f64[3]"], lambda g, x: tg.cond(tnp.sum(x) > 0, lambda: tnp.sin(x),
                                                  lambda: x * 2.0))
    out = simplify_control_flow(g)
    assert str(out) == str(passes.dce(g))


# -- the public API and gradients --------------------------------------------------------------


def euler(x, steps=5):
    return tg.fori_loop(0, steps, lambda i, v: v + 0.01 * tnp.sin(v), x)


def scan_product(xs):
    c, _ = tg.scan(lambda c, x: (c * tnp.sin(x), c + x), 1.0, xs)
    return c


def newton_sqrt(a):
    x, _ = tg.while_loop(lambda x, k: tnp.abs(x * x - a) > 1e-10 * a,
                         lambda x, k: (0.5 * (x + a / x), k + 1), (a, 0))
    return x


def piecewise(x, y):
    return tnp.sum(tg.cond(x[0] > 0, lambda: x * tnp.exp(y), lambda: x + 1.0))


def test_the_gradients_replay_loop_drops_the_carries_nobody_reads():
    g = tg.trace(tg.grad(lambda v: tnp.sum(euler(v))))(tg.TensorSpec([3]))
    out = passes.optimize(g)
    replay, back = whiles(out)
    assert replay.attrs["keep_history"]
    assert consts(replay) == [I64] and carries(replay) == [I64, F3]  # the bound is a const
    assert consts(back) == [TensorType.parse("f64[?,3]")]  # the only history it reads
    check(g, out)


def test_a_scans_gradient_keeps_no_history_of_its_outputs():
    g = tg.trace(tg.grad(scan_product))(tg.TensorSpec([4]))
    out = passes.optimize(g)
    assert len(whiles(out)) == 2  # the replay and the backward loop: no forward scan left
    replay = whiles(out)[0]
    # the index, c and sin(x) (stored for the backward loop, which reads no sin), no y
    assert carries(replay) == [I64, TensorType.parse("f64[]"), TensorType.parse("f64[]")]
    assert "sin" not in names(whiles(out)[1].attrs["body_graph"])
    check(g, out)


def test_a_dynamic_trip_count_loops_gradient():
    g = tg.trace(tg.grad(newton_sqrt))(tg.TensorSpec([]))
    out = passes.optimize(g)
    replay = whiles(out)[0]
    # the iteration count k is gone; x and a / x (stored for the backward loop)
    assert carries(replay) == [TensorType.parse("f64[]")] * 2
    # x * x - a compared with 1e-10 * a, computed once before the loop
    assert names(replay.attrs["cond_graph"]) == ["mul", "sub", "abs", "gt"]
    for a in (2.0, 9.0, 1e6):
        same(g, out, np.float64(a))


def test_a_conds_gradient_computes_only_the_gradients_asked_for():
    g = tg.trace(tg.grad(piecewise))(tg.TensorSpec([2]), tg.TensorSpec([2]))
    out = passes.optimize(g)
    op = the(out, cond_p)
    assert len(op.outputs) == 1 and len(op.inputs) == 3  # the pred, y, the cotangent
    check(g, out, (np.array([1.0, 2.0]), np.ones(2)), (np.array([-1.0, 2.0]), np.ones(2)))


@pytest.mark.parametrize("fn,specs", [
    (lambda v: euler(v), [[3]]),
    (tg.grad(lambda v: tnp.sum(euler(v))), [[3]]),
    (tg.hessian(lambda v: tnp.sum(euler(v, 3))), [[2]]),
    (scan_product, [[4]]),
    (tg.grad(scan_product), [[4]]),
    (tg.grad(newton_sqrt), [[]]),
    (tg.vmap(tg.grad(newton_sqrt)), [[3]]),
    (tg.grad(piecewise, argnums=(0, 1)), [[2], [2]]),
    (lambda x: tg.vmap(lambda r: tg.fori_loop(0, 3, lambda i, v: v * tnp.cos(x), r))(
        tnp.outer(x, x)), [[3]]),
], ids=["euler", "grad-euler", "hessian-euler", "scan", "grad-scan", "grad-newton",
        "vmap-grad-newton", "grad-cond", "vmap-fori"])
def test_optimize_keeps_values_of_control_flow_graphs_and_is_idempotent(fn, specs):
    g = tg.trace(fn)(*[tg.TensorSpec(s) for s in specs])
    text = str(g)
    out = passes.optimize(g)
    assert str(g) == text  # pure
    assert str(passes.optimize(out)) == str(out)
    for _ in range(3):  # positive: newton_sqrt's loop runs forever on a negative a
        same(g, out, *[np.abs(RNG.normal(size=s)) + 0.5 for s in specs])


# -- random loops ---------------------------------------------------------------------------------


def _random_loop(rng):
    """A loop `i < n` with random consts and carries, random bodies (pass-throughs, reads of
    other carries and consts, invariant subexpressions), random used results and history."""
    k, m = int(rng.integers(0, 3)), int(rng.integers(1, 4))
    history = bool(rng.random() < 0.4)

    def expr(pool):
        a, b = pool[rng.integers(len(pool))], pool[rng.integers(len(pool))]
        choice = rng.integers(5)
        if choice == 0:
            return a
        if choice == 1:
            return a + tnp.sin(b)
        if choice == 2:
            return a * 0.5 + tnp.sum(b * b)
        if choice == 3:
            return tnp.cos(a) * b
        return tnp.exp(-tnp.abs(a))

    def body_fn(n, *v):
        cs, i, cs2 = list(v[:k]), v[k], list(v[k + 1:])
        pool_c = cs or [tnp.zeros(2)]
        outs = [i + 1]
        for j, c in enumerate(cs2):
            if rng.random() < 0.3:
                outs.append(c)  # passed through
            else:
                outs.append(expr(cs2 + pool_c) * 0.5 + expr(pool_c))
        return outs

    reads_carry = rng.random() < 0.3

    def cond_fn(n, *v):
        go = v[k] < n
        if reads_carry:
            go = go & (tnp.sum(v[-1]) < 1e6)
        return go

    def body_(g, n, *xs):
        cs, init = list(xs[:k]), list(xs[k:])
        outs = while_op([n, *cs], [const(g, 0, "int64"), *init], cond_fn,
                        lambda n, *v: body_fn(n, *v), keep_history=history)
        picked = [t for t in outs if rng.random() < 0.5]
        return picked or [outs[-1]]

    return build(["i64[]"] + ["f64[2]"] * (k + m), body_)


@pytest.mark.parametrize("seed", range(30))
def test_random_loops_keep_their_values(seed):
    rng = np.random.default_rng(seed)
    g = _random_loop(rng)
    for out in (simplify_control_flow(g), passes.optimize(g)):
        n_in = len(g.inputs) - 1
        cases = [(np.int64(n), *[rng.normal(size=2) for _ in range(n_in)]) for n in TRIPS]
        check(g, out, *cases)
    assert str(passes.optimize(out)) == str(out)


def test_rewritten_loops_and_conds_run_on_every_backend(backend):
    def f(x, a, n):
        def body_(i, c):
            v, p = c
            return v * tnp.cos(a) + tnp.sum(a * a) * 0.01, p * v  # p: nobody reads it
        v, _ = tg.fori_loop(0, n, body_, (x, x))
        w, _ = tg.cond(tnp.sum(v) > 0, lambda: (v * 2.0, tnp.exp(a)), lambda: (-v, a))
        return w

    def f_np(x, a, n):
        v = x
        for _ in range(n):
            v = v * np.cos(a) + np.sum(a * a) * 0.01
        return v * 2.0 if np.sum(v) > 0 else -v

    fn = tg.function(f)
    for n in (0, 1, 7):
        x, a = x3(), x3()
        np.testing.assert_allclose(fn(x, a, np.int64(n)), f_np(x, a, n), rtol=1e-13)
    np.testing.assert_allclose(tg.function(tg.grad(lambda v: tnp.sum(euler(v))))(x),
                               tg.grad(lambda v: tnp.sum(euler(v)))(x), rtol=1e-13)


def test_a_loop_and_its_gradients_replay_run_once():
    def euler(x):
        return tg.fori_loop(0, 40, lambda i, v: v + 0.01 * tnp.sin(v), x)

    def whiles(g):
        return [op.attrs.get("keep_history", False) for op in g.operations
                if op.primitive is while_p]

    vg = tg.value_and_grad(lambda x: tnp.sum(euler(x) ** 2))
    before = tg.trace(vg)(tg.TensorSpec([3]))
    assert whiles(before) == [False, True, False]  # the loop, its replay, the backward loop
    after = passes.optimize(before)
    assert whiles(after) == [True, False]  # the loop keeps the history the replay read
    x = RNG.normal(size=3)
    same(before, after, x)
    v, g = vg(x)

    def loss(v):
        for _ in range(40):
            v = v + 0.01 * np.sin(v)
        return np.sum(v ** 2)

    assert np.isclose(v, loss(x), rtol=1e-15)
    np.testing.assert_allclose(g, central_difference(loss, x), rtol=1e-6)
    # a loop the same in all but its history, on other operands, stays its own
    two = tg.trace(lambda x: (euler(x), tg.grad(lambda y: tnp.sum(euler(y)))(x * 2.0)))(
        tg.TensorSpec([3]))
    assert whiles(passes.optimize(two)) == [False, True, False]


def rows_scan(w, x):
    """A recurrence reading slices of the const `w` (rows 0, 1 and a 2x2 block)."""
    def step(c, xi):
        c = tnp.tanh(c * w[0] + xi * w[1]) + tnp.sum(w[2:, :2]) * c
        return c, tnp.sum(c * c)
    _, ys = tg.scan(step, w[0] * 0.5, x)
    return tnp.sum(ys)


def test_an_accumulator_of_padded_blocks_sums_the_blocks_unpadded():
    """The gradient of a loop reading slices of a const accumulates one carry per slice,
    padded into the whole gradient once after the loop (not a zero-filled [4,3] array per
    slice per step)."""
    w, x = RNG.normal(size=(4, 3)) * 0.5, RNG.normal(size=(6, 3))
    g = tg.trace(tg.grad(rows_scan))(tg.TensorSpec([4, 3]), tg.TensorSpec([6, 3]))
    out = passes.optimize(g)
    back = whiles(out)[-1]
    assert "pad" not in names(back.attrs["body_graph"])
    accs = [t.type for t in back.outputs[1:]]
    for shape in ("f64[3]", "f64[2,2]"):
        assert TensorType.parse(shape) in accs
    assert TensorType.parse("f64[4,3]") not in accs
    verify(out)
    (want,), (got,) = evaluate(g, w, x), evaluate(out, w, x)
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-15)

    def loss(w):
        c, total = w[0] * 0.5, 0.0
        for xi in x:
            c = np.tanh(c * w[0] + xi * w[1]) + np.sum(w[2:, :2]) * c
            total += np.sum(c * c)
        return total

    np.testing.assert_allclose(got, central_difference(loss, w), rtol=1e-6, atol=1e-8)
    compiled = tg.function(tg.grad(rows_scan))(w, x)
    np.testing.assert_allclose(compiled, want, rtol=1e-13)


def test_an_accumulator_read_in_the_loop_is_not_split():
    """A carry the body reads besides its own update is not an accumulator."""
    def f(w):
        return tg.fori_loop(0, 3, lambda i, a: a + tnp.pad(w[:2] * a[:2], (0, 2)), w)

    g = tg.trace(f)(tg.TensorSpec([4]))
    out = passes.optimize(g)
    assert carries(whiles(out)[0])[1:] == [TensorType.parse("f64[4]")]
    w = RNG.normal(size=4)
    same(g, out, w)


def gated(w, xs):
    """An LSTM-like step: sigmoid and tanh gates of the carry and the row."""
    def step(c, x):
        gate = 1.0 / (1.0 + tnp.exp(-(c * w[0] + x)))
        c = gate * c + (1.0 - gate) * tnp.tanh(c * w[1] + x)
        return c, tnp.sum(c * x)
    c, ys = tg.scan(step, w[2], xs)
    return tnp.sum(ys) + tnp.sum(c * c)


def gated_np(w, xs):
    c, total = w[2].copy(), 0.0
    for x in xs:
        gate = 1.0 / (1.0 + np.exp(-(c * w[0] + x)))
        c = gate * c + (1.0 - gate) * np.tanh(c * w[1] + x)
        total += np.sum(c * x)
    return total + np.sum(c * c)


def test_a_loops_gradient_reads_the_costly_values_its_forward_loop_stored():
    """value_and_grad of a scan runs the forward step once: the loop stores the results of
    its exp, division and tanh as more carries, and the backward loop reads their history
    instead of computing them again (it has no transcendental; its divisions are the
    gradient's own)."""
    w, xs = RNG.normal(size=(3, 4)) * 0.5, RNG.normal(size=(7, 4))
    vg = tg.value_and_grad(gated)
    g = tg.trace(vg)(tg.TensorSpec([3, 4]), tg.TensorSpec([7, 4]))
    out = passes.optimize(g)
    forward, back = whiles(out)
    assert sorted(names(forward.attrs["body_graph"])).count("tanh") == 1
    assert not {"exp", "tanh"} & set(names(back.attrs["body_graph"]))
    assert len(carries(forward)) > 3  # the index, c, the last y, and the stored values
    verify(out)
    want, got = evaluate(g, w, xs), evaluate(out, w, xs)
    for a, b in zip(want, got, strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-14, atol=1e-15)
    v, grad = want
    assert np.isclose(v, gated_np(w, xs), rtol=1e-14)
    np.testing.assert_allclose(grad, central_difference(lambda u: gated_np(u, xs), w),
                               rtol=1e-6, atol=1e-8)
    numba_v, numba_g = tg.function(vg)(w, xs)
    assert np.isclose(numba_v, v, rtol=1e-13)
    np.testing.assert_allclose(numba_g, grad, rtol=1e-12, atol=1e-14)
    # second order through the stored values: the hessian against differences of the grad
    spec = tg.TensorSpec([12])
    hess = tg.trace(tg.hessian(lambda u: gated(u.reshape(3, 4), xs)))(spec)
    grad_at = tg.trace(tg.grad(lambda u: gated(u.reshape(3, 4), xs)))(spec)
    (h,) = evaluate(passes.optimize(hess), w.ravel())
    fd2 = central_jacobian(lambda u: evaluate(grad_at, u)[0], w.ravel())
    np.testing.assert_allclose(h, fd2.T, rtol=1e-5, atol=1e-7)
    # per-example gradients of the same scan
    batch = RNG.normal(size=(2, 3, 4)) * 0.5
    per_example = tg.trace(tg.vmap(tg.grad(gated), in_axes=(0, None)))(
        tg.TensorSpec([2, 3, 4]), tg.TensorSpec([7, 4]))
    (per,) = evaluate(passes.optimize(per_example), batch, xs)
    for b, p in zip(batch, per, strict=True):
        np.testing.assert_allclose(p, evaluate(g, b, xs)[1], rtol=1e-12)
