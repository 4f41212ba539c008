"""The numba backend's loop fusion: sibling reductions (and elementwise roots) over one
iteration space share a loop nest and give the numpy backend's values; a very long
elementwise region is split into several loops of at most MAX_FUSED_OPS fused ops, still
in one module."""

import re

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tests.backends._util import assert_close_backends

nb = pytest.importorskip("tracegrad.backends.numba")
fusion = pytest.importorskip("tracegrad.backends.numba.fusion")


def siblings(x):
    """Five reductions of x: the row max, the column sum and the whole abs-max are
    independent siblings; the log-sum-exp and the variance read earlier results."""
    m = tnp.max(x, axis=-1, keepdims=True)
    lse = tnp.log(tnp.sum(tnp.exp(x - m), axis=-1))
    mu = tnp.mean(x, axis=0)
    var = tnp.mean((x - mu) ** 2, axis=0)
    return m, lse, tnp.sum(x, axis=0), var, tnp.max(tnp.abs(x)), tnp.min(x * 2.0, axis=0)


def int_siblings(x):
    return (tnp.max(x, axis=1), tnp.sum(x, axis=0), tnp.min(x), tnp.sum(x * 3, axis=1),
            tnp.max(x, axis=0, keepdims=True))


def both_backends(fn, *arrays, input_signature=None):
    got = tg.function(fn, backend="numba", input_signature=input_signature)(*arrays)
    want = tg.function(fn, backend="numpy", input_signature=input_signature)(*arrays)
    assert_close_backends([np.asarray(g) for g in got], [np.asarray(w) for w in want])


def source_of(fn, *arrays) -> str:
    graph = tg.function(fn, backend="numba").get_concrete_function(*arrays).graph
    return tg.compiled_source(graph)


def outer_loops(source: str) -> int:
    """The number of loop nests at the entry function's top level."""
    return sum(1 for line in source.splitlines() if line.startswith("    for "))


@pytest.mark.parametrize("shape", [(7, 5), (1, 9), (6, 1), (1, 1), (0, 4), (3, 0), (40, 33)])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_sibling_reductions_match_the_numpy_backend(shape, dtype):
    x = np.random.default_rng(0).standard_normal(shape).astype(dtype)
    if x.size == 0:  # max/min of nothing has no value: keep the sums and the variance
        def fn(x):
            return tnp.sum(x, axis=0), tnp.sum(x * x, axis=1), tnp.mean(x, axis=0)
        both_backends(fn, x)
        return
    both_backends(siblings, x)


@pytest.mark.parametrize("dtype", ["int64", "int32"])
@pytest.mark.parametrize("shape", [(6, 5), (1, 4), (5, 1)])
def test_integer_sibling_reductions_match_the_numpy_backend(shape, dtype):
    x = np.random.default_rng(1).integers(-50, 50, size=shape).astype(dtype)
    both_backends(int_siblings, x)


def test_bool_and_product_sibling_reductions_match_the_numpy_backend():
    r = np.random.default_rng(8)
    x, b = r.integers(-3, 4, size=(6, 5)), r.random((6, 5)) < 0.5

    def fn(x, b):
        return (tnp.prod(x, axis=0), tnp.any(b, axis=1), tnp.all(b), tnp.any(b, axis=0),
                tnp.prod(x * 1.5, axis=1), tnp.max(x * 1.5))
    both_backends(fn, x, b)


def test_sibling_reductions_with_unknown_dims():
    spec = [tg.TensorSpec((None, None), "float64")]
    for shape in [(5, 8), (1, 3), (9, 1)]:
        x = np.random.default_rng(2).standard_normal(shape)
        both_backends(siblings, x, input_signature=spec)


def test_sibling_reductions_of_a_3d_operand_with_keepdims():
    x = np.random.default_rng(3).standard_normal((4, 6, 5))

    def fn(x):
        y = tnp.tanh(x)
        return (tnp.sum(y, axis=(1, 2), keepdims=True), tnp.max(y, axis=(0, 1, 2)),
                tnp.sum(y, axis=0), tnp.max(y, axis=2, keepdims=True), tnp.min(y))
    both_backends(fn, x)


def test_nan_propagates_through_fused_whole_max():
    x = np.random.default_rng(4).standard_normal((6, 7))
    x[3, 2] = np.nan
    both_backends(lambda x: (tnp.max(x), tnp.min(tnp.abs(x)), tnp.sum(x, axis=0)), x)


def test_independent_reductions_of_one_array_share_one_loop():
    x = np.random.default_rng(5).standard_normal((30, 20))

    def fn(x):  # row max, column sum, whole abs-max: one pass over x
        return tnp.max(x, axis=1), tnp.sum(x, axis=0), tnp.max(tnp.abs(x))
    source = source_of(fn, x)
    assert outer_loops(source) == 2, source  # the column sum's zero fill, then the pass
    assert "_rowmax_f64(part" in source  # the whole max reduces per-column values
    both_backends(fn, x)


def test_a_reduction_reading_a_sibling_result_gets_its_own_loop():
    x = np.random.default_rng(6).standard_normal((12, 9))

    def fn(x):
        mu = tnp.mean(x, axis=0)
        return mu, tnp.sum((x - mu) ** 2, axis=0)
    source = source_of(fn, x)
    nests = source.split("\n    for ")[1:]
    sums = [len(re.findall(r"(\w+)\[(\w+)\] = \1\[\2\] \+", n)) for n in nests]
    assert sorted(sums) == [0, 0, 0, 1, 1], source  # fills, the mean's division, 2 passes
    both_backends(fn, x)


def test_a_row_reduction_of_a_stored_value_is_not_fused_into_its_loop():
    """exp(x) is a stored output; its row sums read whole rows of it (a helper call
    before the row is written if they shared the loop)."""
    x = np.random.default_rng(7).standard_normal((8, 11))

    def fn(x):
        e = tnp.exp(x)
        return e, tnp.sum(e, axis=1), tnp.max(e, axis=1)
    both_backends(fn, x)


def chain(steps):
    def f(x):
        for k in range(steps):
            if k % 2:
                x = tnp.sin(x) * 0.9 + x * 0.1
            else:
                x = tnp.tanh(x) * 0.8 - x * 0.05
        return x
    return f


def test_long_elementwise_chain_is_split_into_loops_of_capped_size(monkeypatch):
    monkeypatch.setattr(fusion, "MAX_FUSED_OPS", 16)
    x = np.linspace(-2.0, 2.0, 37)
    source = source_of(chain(20), x)  # 80 ops, and broadcasts of scalars (which count none)
    # loops in the entry's body, no function outlined (the body may be one part: split.py)
    assert source.count("@njit(") == 1 + source.count("def kernel_part0(")
    assert outer_loops(source) >= 80 // 16
    assert all(line.count("# %") <= 16 for line in source.split("    for ")[1:]), source
    both_backends(chain(20), x)


def test_broadcasts_of_scalars_do_not_count_towards_the_cap(monkeypatch):
    """12 ops, each with a scalar of its own broadcast to x's shape: one loop under a cap of
    16 (a broadcast of a scalar emits no code)."""
    monkeypatch.setattr(fusion, "MAX_FUSED_OPS", 16)
    x = np.linspace(-1.0, 1.0, 9)

    def f(x):
        for k in range(6):
            x = x * (1.0 + k / 10) + k / 7
        return x
    source = source_of(f, x)
    assert outer_loops(source) == 1, source
    both_backends(f, x)


def test_a_nest_stores_at_most_max_nest_values(monkeypatch):
    """20 values of one iteration space: one loop nest without the cap, nests of at most
    MAX_NEST_VALUES values with it (LLVM checks every stored array against the others at
    run time), the same numbers either way."""
    x = np.linspace(-2.0, 2.0, 37)

    def f(x):
        return [tnp.sin(x * (k + 1.0)) + k for k in range(20)]

    monkeypatch.setattr(fusion, "MAX_NEST_VALUES", 10**9)
    assert outer_loops(source_of(f, x)) == 1
    monkeypatch.setattr(fusion, "MAX_NEST_VALUES", 8)
    source = source_of(f, x)
    assert outer_loops(source) == 3, source
    nests = re.split(r"^    for ", source, flags=re.M)[1:]
    stores = [len(set(re.findall(r"^\s+(out\d+)\[", nest, re.M))) for nest in nests]
    assert stores == [8, 8, 4], source
    both_backends(f, x)


@pytest.mark.parametrize("cap", [None, 64, 128])
def test_a_huge_chain_generates_one_module(cap, monkeypatch):
    if cap is not None:
        monkeypatch.setattr(fusion, "MAX_FUSED_OPS", cap)
    x = np.linspace(-2.0, 2.0, 5)
    graph = tg.optimize(tg.function(chain(400), backend="numba")
                        .get_concrete_function(x).graph)
    assert len(graph.operations) > 1500
    source = nb.generate_source(graph)  # a single region this deep overflowed the stack
    # one module: the entry function and its loop nests, outlined (past OUTLINE_OPS)
    nests = re.findall(r"^def nest\d+\(", source, re.M)
    assert source.count("@njit(") == 1 + len(nests) and source.count("def kernel(") == 1
    calls = len(re.findall(r"^    _direct\(nest\d+, ", source[source.index("def kernel("):],
                           re.M))
    assert outer_loops(source) + calls >= len(graph.operations) // fusion.MAX_FUSED_OPS


def _count_calls(source: str, helper: str) -> int:
    """The calls of `helper` in `source`; the copies of a written-out short row (names with
    the suffix `_1`, `_2`...: `Nest.unroll`) are its first copy's, each for one element."""
    return sum(len(re.findall(rf"\b{helper}\(", line)) for line in source.splitlines()
               if not re.match(r"\s*[a-z]+\d+_[1-9]\d* = ", line))


def test_a_costly_value_broadcast_into_a_larger_loop_is_computed_once():
    # exp(v) broadcast over 200 rows: stored once, not evaluated for every row (a cheap
    # value, 2 * v, is still fused into the loop that reads it)
    def fn(m, v):
        return m * tnp.exp(v) + m * (2.0 * v)

    m, v = np.random.default_rng(1).standard_normal((200, 30)), np.linspace(-1, 1, 30)
    source = source_of(fn, m, v)
    nest = source[source.index("for "):]
    first_loop, rest = nest.split("\n    for ", 1) if "\n    for " in nest else (nest, "")
    assert _count_calls(first_loop, "_exp_v") == 1 and "_exp_v" not in rest
    assert outer_loops(source) == 2  # exp over v, then the [200, 30] loop
    both_backends(fn, m, v)
    # unknown sizes: the broadcast may repeat elements, so the exp is still stored
    both_backends(fn, m, v, input_signature=[tg.TensorSpec([None, None]),
                                             tg.TensorSpec([None])])


def test_a_random_sample_read_by_the_forward_and_the_backward_pass_is_drawn_once():
    # z = mu + exp(logvar / 2) * eps, then a matrix product: eps is read by z's loop and by
    # the loop of logvar's gradient; recomputed, the Threefry block would run in both
    from tracegrad import random as tr

    def loss(mu, logvar, w, key):
        eps = tr.normal(key, mu.shape)
        return tnp.sum(tnp.tanh((mu + tnp.exp(0.5 * logvar) * eps) @ w))

    fn = tg.grad(loss, argnums=(0, 1))
    rng = np.random.default_rng(2)
    args = (rng.standard_normal((16, 2)), rng.standard_normal((16, 2)),
            rng.standard_normal((2, 8)), tr.key(5))
    assert source_of(fn, *args).count("_threefry2x32(") == 1
    # a sample read by one loop stays fused into it, unless its rows are too narrow to
    # vectorize: then it is drawn in a flat loop of its own
    assert source_of(lambda k: tr.normal(k, (4, 16)) * 2.0, args[3]).count("\n    for ") == 1
    assert source_of(lambda k: tr.normal(k, (4, 3)) * 2.0, args[3]).count("\n    for ") == 2
    both_backends(fn, *args)


def two_layer_scan(w, xs):
    """A two-layer recurrent step: each layer's tanh is read by the next layer, by the new
    state (a stack) and, for the last one, by the step's loss."""
    def step(carry, x):
        a = tnp.tanh(x * w[0] + carry[0])
        b = tnp.tanh(a * w[1] + carry[1])
        return tnp.stack([a, b]), tnp.sum(tnp.exp(b))
    _, ys = tg.scan(step, tnp.zeros((2, 8)), xs)
    return tnp.sum(ys)


def test_a_small_costly_value_read_by_several_nests_of_a_loop_step_is_computed_once():
    # stored once (Fusion._store_shared_values) instead of recomputed by the stack's pieces,
    # the next layer and the loss (and in the backward step by every gradient's nest): the
    # step's two tanh and one exp, once forward and once in the backward step
    rng = np.random.default_rng(3)
    w, xs = rng.standard_normal((2, 8)), rng.standard_normal((5, 8))
    source = source_of(two_layer_scan, w, xs)
    assert _count_calls(source, "_tanh_v") + _count_calls(source, "_exp_v") == 3
    vg = tg.value_and_grad(two_layer_scan)
    source = source_of(vg, w, xs)
    assert _count_calls(source, "_tanh_v") + _count_calls(source, "_exp_v") <= 6
    both_backends(lambda w, xs: (vg(w, xs)[0], vg(w, xs)[1]), w, xs)
    # large values are still recomputed (docs/numba.md, "Elementwise regions are loops")
    big = rng.standard_normal((2, fusion._SMALL_SHARED + 1))
    xb = rng.standard_normal((3, fusion._SMALL_SHARED + 1))

    def wide(w, xs):
        def step(carry, x):
            a = tnp.tanh(x * w[0] + carry[0])
            b = tnp.tanh(a * w[1] + carry[1])
            return tnp.stack([a, b]), tnp.sum(tnp.exp(b))
        return tnp.sum(tg.scan(step, tnp.zeros(big.shape), xs)[1])
    assert _count_calls(source_of(wide, big, xb), "_tanh_v") > 2



def logsumexp(x):
    m = tnp.max(x)
    return m + tnp.log(tnp.sum(tnp.exp(x - m)))


@pytest.mark.parametrize("n", [fusion._SMALL_SHARED * 3 + 5, 100_003])
def test_a_large_transcendental_reduced_before_the_gradient_reads_it_is_computed_once(n):
    """The gradient of a log-sum-exp multiplies each exp by 1/sum(exp): its loop cannot be
    the sum's, so the exp the sum's loop evaluates is stored and read back, not evaluated
    again (Fusion._store_shared_values; the larger part of the gradient's time)."""
    x = np.random.default_rng(5).standard_normal(n) * 3.0
    fn = tg.value_and_grad(logsumexp)
    source = source_of(fn, x)
    assert _count_calls(source, "_exp_v") == 1, source
    value, grad = tg.function(fn, backend="numba")(x)
    e = np.exp(x - x.max())
    np.testing.assert_allclose(value, x.max() + np.log(e.sum()), rtol=1e-13)
    np.testing.assert_allclose(grad, e / e.sum(), rtol=1e-12, atol=1e-300)
    both_backends(lambda x: tuple(fn(x)), x)


def test_a_large_value_whose_ends_share_a_loop_or_cost_little_is_not_stored():
    """Stored only where it saves a transcendental: sum(exp(x)) and its gradient exp(x)
    are one loop evaluating exp once, with no array of x's size but the gradient; a
    quotient reduced before the gradient reads it is recomputed (a division costs less
    than storing a float64 and reading it back)."""
    n = fusion._SMALL_SHARED * 3 + 5
    x = np.random.default_rng(6).random(n) + 0.5
    source = source_of(tg.value_and_grad(lambda x: tnp.sum(tnp.exp(x))), x)
    assert outer_loops(source) == 1 and _count_calls(source, "_exp_v") == 1, source
    assert "np.empty(n" not in source, source

    def quotient(x):
        q = 1.0 / (x + 1.0)
        return tnp.sum(q) * tnp.sum(q * q)
    fn = tg.value_and_grad(quotient)
    source = source_of(fn, x)
    assert "np.empty(n" not in source and "ws" not in source.split("def kernel")[1].split(
        ":")[0], source
    both_backends(lambda x: tuple(fn(x)), x)


def w2(x):
    return tnp.sum(tnp.tanh(x) * tnp.sin(x) + x ** 2)


@pytest.mark.parametrize("known", [True, False])
def test_a_sum_and_the_gradient_of_one_array_are_one_pass_with_each_value_once(known):
    """value_and_grad of sum(tanh(x) sin(x) + x**2): one loop over x (the sum in blocks, no
    buffer of x's size), tanh evaluated once per element and sin and cos together from one
    range reduction (test_numba_sincos.py). With an unknown size too: the gradient's
    `dim_size` of x, a scalar, is computed before the loop instead of closing it."""
    x = np.random.default_rng(8).standard_normal(5000)
    fn = tg.value_and_grad(w2)
    arg = x if known else tg.TensorSpec([None])
    graph = tg.function(fn, backend="numba").get_concrete_function(arg).graph
    assert ("dim_size" in str(graph)) != known, graph
    source = tg.compiled_source(graph)
    fast = source[:source.index("    if big")]  # the re-run with the full sin/cos reduction
    assert outer_loops(fast) == 1, source
    for helper in ("_tanh_v", "_sin_cos_fast_v"):
        assert _count_calls(fast, helper) == 1, source
    assert _count_calls(fast, "_sin_fast_v") == _count_calls(fast, "_cos_fast_v") == 0, source
    assert "np.empty(n" not in source and "np.empty(1024" in source, source
    both_backends(fn, x)


def _trig_flags(source: str) -> dict:
    """Each flag counting huge trig arguments (`big<k>`) -> "block" when it is reset and
    tested inside a `for` loop over blocks (only the block that counts one is run again),
    "nest" when it is tested after the loops (the whole nest is)."""
    import ast

    found = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare) and \
                isinstance(node.test.left, ast.Name) and node.test.left.id.startswith("big"):
            found.setdefault(node.test.left.id, "nest")
        if isinstance(node, ast.For) and isinstance(node.target, ast.Name) and \
                node.target.id.startswith("kb"):
            body = node.body
            resets = {b.targets[0].id for b in body if isinstance(b, ast.Assign)
                      and isinstance(b.targets[0], ast.Name) and b.targets[0].id.startswith("big")}
            tests = {b.test.left.id for b in body if isinstance(b, ast.If)
                     and isinstance(b.test, ast.Compare) and isinstance(b.test.left, ast.Name)}
            for flag in resets & tests:
                found[flag] = "block"
    return found


def test_a_huge_sin_argument_redoes_only_its_block_and_the_block_sum():
    """An argument beyond the fast sin/cos reduction runs its block of the innermost loop
    again with the full reduction (not the whole loop): the sum fused into the loop sums
    that block again and the gradient's block is rewritten; the values are the full
    reduction's everywhere (the same bits as the fast one below its limit)."""
    x = np.random.default_rng(9).standard_normal(5000)
    x[[5, 2500, 4999]] = [1e7, -3e9, np.inf]
    fn = tg.value_and_grad(w2)
    source = source_of(fn, x)
    assert set(_trig_flags(source).values()) == {"block"}, source
    got = tg.function(fn, backend="numba")(x)
    want = tg.function(fn, backend="numpy")(x)
    np.testing.assert_allclose(got[0], want[0], rtol=4 * np.finfo(float).eps * np.log2(x.size))
    assert_close_backends([np.asarray(got[1])], [np.asarray(want[1])])
    y = x.copy()
    y[[5, 2500, 4999]] = 0.5  # the elements the fast reduction is right for: the same bits
    alone = np.asarray(tg.function(fn, backend="numba")(y)[1])
    keep = np.ones(x.size, bool)
    keep[[5, 2500, 4999]] = False
    assert (np.asarray(got[1])[keep].view(np.int64) == alone[keep].view(np.int64)).all()


@pytest.mark.parametrize("case", ["rows", "columns", "max", "size_one", "tan", "cumsum"])
def test_huge_trig_arguments_in_every_nest_layout(case):
    """Rows summed in blocks redo a block; a sum down the columns, a max or a cumulative
    sum accumulates in the innermost loop, so a huge argument re-runs the whole nest; a
    nest whose inner dims have size 1 runs its last other loop in blocks. Values match the
    numpy backend."""
    r = np.random.default_rng(10)
    x, y = r.standard_normal((7, 1500)), r.standard_normal(1500)
    x[3, 1100], x[6, 0], y[900] = 4e6, -1e300, 2e8
    fns = {
        "rows": (lambda x, y: (tnp.sum(tnp.sin(x) * y, axis=1),), {"block"}),
        "columns": (lambda x, y: (tnp.sum(tnp.cos(x) + y, axis=0),), {"nest"}),
        "max": (lambda x, y: (tnp.max(tnp.sin(x * y)),), {"nest"}),
        "size_one": (lambda x, y: (tnp.sin(x[:, :1]) * y,), {"block"}),
        "tan": (lambda x, y: (tnp.tan(x) * y, tnp.sum(tnp.sin(y))), {"block"}),
        # a block's own nest (cumsum accumulates along the row): the whole nest
        "cumsum": (lambda x, y: (tnp.cumsum(tnp.sin(x) ** 2 + 1.0, axis=1) * y,), {"nest"}),
    }
    fn, layouts = fns[case]
    source = source_of(fn, x, y)
    assert set(_trig_flags(source).values()) == layouts, source
    both_backends(fn, x, y)


def test_values_stored_at_the_cap_share_one_nest_instead_of_recomputing_their_region(
        monkeypatch):
    """A cut at the cap stores the operands of an op (`exp(-x*x) * 0.5` and `x * 0.3`),
    which read one long region; they share a nest (up to twice the cap) instead of each
    evaluating that region in a nest of its own: every tanh and exp of the chain is
    evaluated once per element. Values match the numpy backend."""
    monkeypatch.setattr(fusion, "MAX_FUSED_OPS", 32)
    order = np.random.default_rng(0).integers(0, 2, 40)

    def f(x):
        for k in order:
            x = tnp.tanh(x) * 0.8 - x * 0.05 if k else tnp.exp(-x * x) * 0.5 + x * 0.3
        return x

    x = np.linspace(-2.0, 2.0, 513)
    source = source_of(f, x)
    assert _count_calls(source, "_tanh_v") == (order == 1).sum(), source
    assert _count_calls(source, "_exp_v") == (order == 0).sum(), source
    both_backends(lambda x: (f(x),), x)


def sin_tanh_chain(steps):
    """The compile-time chain of issue 12: `sin(x)*0.9 + x*0.1` / `tanh(x)*0.8 - x*0.05`."""
    def f(x):
        for k in range(steps):
            x = tnp.sin(x) * 0.9 + x * 0.1 if k % 2 == 0 else tnp.tanh(x) * 0.8 - x * 0.05
        return x
    return f


def redone_blocks(source: str) -> list:
    """The body of each `if <flag> != 0:` (a block run again with the full reduction)."""
    lines = source.split("\n")
    found = []
    for k, line in enumerate(lines):
        if re.fullmatch(r"\s*if \w+ != 0:", line):
            indent = len(line) - len(line.lstrip())
            body = []
            for after in lines[k + 1:]:
                if after.strip() and len(after) - len(after.lstrip()) <= indent:
                    break
                body.append(after)
            found.append("\n".join(body))
    return found


def _assigned(source: str) -> dict:
    """How many statements assign (`=`, or a `for` target) each name, per function."""
    import ast

    counts: dict = {}
    for fn in ast.parse(source).body:
        if not isinstance(fn, ast.FunctionDef):
            continue
        for node in ast.walk(fn):
            targets = node.targets if isinstance(node, ast.Assign) else \
                [node.target] if isinstance(node, ast.For) else []
            for t in targets:
                if isinstance(t, ast.Name):
                    key = (fn.name, t.id)
                    counts[key] = counts.get(key, 0) + 1
    return counts


@pytest.mark.parametrize("outline", [False, True])
def test_a_long_sin_chain_assigns_each_name_once_and_its_rerun_calls_the_helpers(
        outline, monkeypatch):
    """A chain longer than a loop nest's cap, with arguments past the fast sin reduction:
    the re-run of each nest with the full reduction has names of its own (Numba's SSA
    repair of a name assigned twice walks the whole function: a quadratic compile time),
    counts nothing and, in a large kernel (outlined nests), calls the helpers' called twins
    (`_sin_vc`: LLVM optimizes one copy, not one per use); values match the numpy backend."""
    monkeypatch.setattr(fusion, "OUTLINE_OPS", 256 if outline else 10**9)
    x = np.linspace(-3.0, 3.0, 301)
    x[[7, 150]] = [1e7, -3e12]
    fn = sin_tanh_chain(2 * fusion.MAX_FUSED_OPS // 4 + 10)
    source = source_of(fn, x)
    assert bool(re.search(r"^def nest", source, re.M)) == outline
    twice = {n: c for n, c in _assigned(source).items() if c > 1}
    assert not twice, twice
    reruns = redone_blocks(source)
    assert len(reruns) >= (2 if outline else 3)  # outlined nests of equal code are one
    for rerun in reruns:  # outlined (a large kernel): the helpers are called, not inlined
        called = "_sin_vc(" in rerun and "_tanh_vc(" in rerun
        inlined = "_sin_v(" in rerun and "_tanh_v(" in rerun
        assert (called, inlined) == (outline, not outline), rerun
        assert "_fast_v(" not in rerun and "_trig_huge" not in rerun
    both_backends(fn, x)


def test_a_long_chain_is_outlined_loop_nests_the_same_code_compiled_once(monkeypatch):
    """Past OUTLINE_OPS fused ops, each elementwise loop nest is a function of the module
    (names numbered, so nests with the same code are one function), called by the kernel
    with the buffers it allocates; values match the numpy backend. Below it, one function."""
    cg = pytest.importorskip("tracegrad.backends.numba.codegen")
    x = np.linspace(-3.0, 3.0, 257)
    x[11] = 2e6
    nests = 8  # loop nests of the chain
    fn = sin_tanh_chain(nests * fusion.MAX_FUSED_OPS // 4)
    monkeypatch.setattr(fusion, "OUTLINE_OPS", 2 * fusion.MAX_FUSED_OPS)
    source = source_of(fn, x)
    kernel = source[source.index("def kernel("):]
    defs = re.findall(r"^def (nest\d+)\(", source, re.M)
    calls = re.findall(r"^    _direct\((nest\d+), ", kernel, re.M)
    assert len(calls) >= nests and set(calls) == set(defs), source
    assert len(defs) < len(calls) / 2, defs  # the chain repeats: the nests are few
    assert "for " not in kernel and "_sin_fast_v(" not in kernel
    both_backends(fn, x)
    small = source_of(sin_tanh_chain(fusion.MAX_FUSED_OPS // 8), x)
    assert not re.search(r"^def nest", small, re.M) and cg.ENTRY in small


@pytest.mark.parametrize("shape", [(6, 2), (3, 16), (1, 5), (4, 1), (2, 3, 2), (0, 3)])
def test_a_computed_vector_unflattened_by_a_reshape(shape):
    # fused as a remap at the row-major linear index (wide rows), or stored and viewed
    # (rows narrower than a vector register, a costly vector)
    n = int(np.prod(shape))

    def fn(v, y):
        return tnp.sum(tnp.reshape(tnp.log1p(tnp.exp(v)), shape) * y, axis=-1)

    rng = np.random.default_rng(3)
    v, y = rng.standard_normal(n), rng.standard_normal(shape)
    both_backends(fn, v, y)
    both_backends(fn, v, y, input_signature=[tg.TensorSpec([None]),
                                             tg.TensorSpec([None] * len(shape))])


def test_a_costly_vector_unflattened_into_narrow_rows_is_stored_once():
    def fn(v, y):
        return tnp.sum(tnp.reshape(tnp.log1p(tnp.exp(v)), y.shape) * y, axis=1)

    narrow = source_of(fn, np.ones(16), np.ones((8, 2)))
    assert narrow.count("_exp_v(") == 1 and outer_loops(narrow) == 2
    assert outer_loops(source_of(fn, np.ones(16), np.ones((2, 8)))) == 1
