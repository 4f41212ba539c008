"""Loop nests and loop steps translated to LLVM IR directly (llvmgen.py): the translation
computes what Numba's compile of the same function computes, raises the same errors, is
cached on disk beside the kernel, and leaves to Numba what it does not know."""

from __future__ import annotations

import ctypes
import importlib.util
import re
import textwrap

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp

nb = pytest.importorskip("tracegrad.backends.numba")
from tests.backends.test_numba_cache import run_script  # noqa: E402
from tests.finite_diff import central_difference  # noqa: E402
from tracegrad.backends.numba import fusion, llvmgen  # noqa: E402

# -- the translator on functions of its own ----------------------------------------------

SOURCE = '''
import numpy as np


def ints(out, k):
    out[0] = k // 4
    out[1] = k % 4
    out[2] = (k - 7) // 3
    out[3] = (k - 7) % 3
    out[4] = min(k, 3)
    out[5] = max(k, 3)
    out[6] = abs(k - 10)
    out[7] = np.int64(np.float64(k) * 0.75)
    out[8] = np.uint64(k + 1) * 2


def floats(out, x, y):
    out[0] = x / y
    out[1] = -x * y + 1
    out[2] = abs(x - y)
    out[3] = x if x > y else y
    out[4] = np.float64(np.float32(x))
    out[5] = 1.0 if (x > 0.0 and y > 0.0) or x != x else 0.0
    out[6] = 2.0 if not x < y else 3.0


def wrap(out, a, i):
    # a negative signed index counts from the end, an unsigned one does not wrap
    out[0] = a[i]
    out[1] = a[-1]
    out[2] = a[np.uint64(i + 5)]


def loops(out, a, n):
    s = 0.0
    for i in range(n):
        if i == 3:
            continue
        if i > 6:
            break
        s += a[i]
    out[0] = s
    t = 0.0
    for i in range(n - 1, -1, -2):
        t = t * 2.0 + a[i]
    out[1] = t
    k = 0
    while k < n and a[k] < 5.0:
        k += 1
    out[2] = k


def grid(out, a):
    for i in range(a.shape[0]):
        for j in range(a.shape[1]):
            out[j, i] = a[i, j] * (i + 1) - j


def not_known(out, a):
    out[:] = a


def copies(dst, src, k, n):
    for i in range(n):
        dst[k, i] = src[i]


def copy_1d(dst, src, n):
    for i in range(n):
        dst[i] = src[i]


def allocs(out, n, m):
    b = np.empty(n)
    for k in range(n):
        b[k] = k
    c = np.empty(m)
    c[0] = b[n - 1]
    out[0] = c[0]
'''


@pytest.fixture(scope="module")
def module(tmp_path_factory):
    path = tmp_path_factory.mktemp("llvmgen") / "tg_llvmgen_probe.py"
    path.write_text(SOURCE)
    spec = importlib.util.spec_from_file_location("tg_llvmgen_probe", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    import sys

    sys.modules["tg_llvmgen_probe"] = mod
    yield mod
    sys.modules.pop("tg_llvmgen_probe", None)


def _typeof(v):
    from numba import typeof

    return typeof(v)


def _flat(v):
    if isinstance(v, np.ndarray):
        return ([None, None, v.size, v.itemsize, v.ctypes.data_as(ctypes.c_void_p)]
                + list(v.shape) + list(v.strides))
    return [v]


def _ctype(v):
    if isinstance(v, (bool, np.bool_)):
        return ctypes.c_int8
    if isinstance(v, (float, np.floating)):
        return ctypes.c_float if isinstance(v, np.float32) else ctypes.c_double
    return ctypes.c_int64


def run_translated(fn, *args):
    """Call `fn` translated for the Numba types of `args` (arrays changed in place); its
    return code and `err` slots."""
    argtys = tuple(_typeof(a) for a in args)
    symbol = f"tg_test.{fn.__name__}.{abs(hash(argtys))}"
    text, libraries, returns, _ = llvmgen.translate(fn, argtys, symbol, None)
    library = llvmgen._compile(text, libraries, symbol)
    address = library.get_pointer_to_function(symbol)
    ctypes_args, values = [ctypes.c_void_p, ctypes.c_void_p], []
    for a in args:
        for v in _flat(a):
            if isinstance(a, np.ndarray):
                ctypes_args.append(ctypes.c_void_p if v is None or not isinstance(v, int)
                                   else ctypes.c_int64)
            else:
                ctypes_args.append(_ctype(a))
            values.append(v)
    proto = ctypes.CFUNCTYPE(ctypes.c_int32, *ctypes_args)(address)
    err, ret = (ctypes.c_int64 * 3)(), ctypes.c_int64()
    rc = proto(ctypes.cast(err, ctypes.c_void_p), ctypes.cast(ctypes.pointer(ret),
                                                               ctypes.c_void_p), *values)
    return rc, list(err), returns, library


@pytest.mark.parametrize("k", [-9, -4, -1, 0, 1, 5, 13])
def test_int_arithmetic_is_pythons(module, k):
    out = np.zeros(9, dtype=np.int64)
    rc, _, returns, _ = run_translated(module.ints, out, k)
    assert rc == 0 and returns is None
    assert out.tolist() == [k // 4, k % 4, (k - 7) // 3, (k - 7) % 3, min(k, 3), max(k, 3),
                            abs(k - 10), int(k * 0.75), (k + 1) * 2]


@pytest.mark.parametrize("x, y", [(1.5, -0.25), (-2.0, 3.0), (0.1, 0.1), (np.nan, 1.0),
                                  (1.0, 0.0)])
def test_float_arithmetic_and_comparisons(module, x, y):
    out = np.zeros(7)
    with np.errstate(all="ignore"):
        rc, *_ = run_translated(module.floats, out, x, y)
        want = np.zeros(7)
        module.floats(want, np.float64(x), np.float64(y))
    assert rc == 0
    np.testing.assert_array_equal(out, want)


def test_negative_indices_wrap_and_unsigned_ones_do_not(module):
    a = np.arange(10.0) * 1.5
    out = np.zeros(3)
    run_translated(module.wrap, out, a, -3)
    assert out.tolist() == [a[-3], a[-1], a[2]]
    run_translated(module.wrap, out, a, 2)
    assert out.tolist() == [a[2], a[-1], a[7]]


@pytest.mark.parametrize("n", [0, 1, 4, 9])
def test_for_while_break_and_continue(module, n):
    a = np.array([1.0, 2.0, 4.0, 8.0, 16.0, 0.5, 0.25, 3.0, 7.0])
    out, want = np.zeros(3), np.zeros(3)
    run_translated(module.loops, out, a, n)
    module.loops(want, a, n)
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("order", ["C", "F"])
def test_strided_and_contiguous_arrays(module, order):
    a = np.asarray(np.arange(12.0).reshape(3, 4), order=order)
    view = np.arange(24.0).reshape(4, 6)[::2, 1::2]  # layout A
    for src in (a, view):
        out, want = np.zeros(src.shape[::-1]), np.zeros(src.shape[::-1])
        run_translated(module.grid, out, src)
        module.grid(want, src)
        np.testing.assert_array_equal(out, want)


def test_every_return_frees_the_buffers_at_one_exit(module):
    import resource

    argtys = (_typeof(np.zeros(1)), _typeof(1), _typeof(1))
    text = llvmgen.translate(module.allocs, argtys, "tg_test.allocs_text", None)[0]
    assert text.count("call void @free(") == 2  # not repeated at each error's return
    out = np.zeros(1)
    assert run_translated(module.allocs, out, 1 << 20, 1)[0] == 0
    assert out[0] == (1 << 20) - 1
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for _ in range(60):  # the second buffer cannot be had: the first (8 MB) is freed
        assert run_translated(module.allocs, out, 1 << 20, 1 << 58)[0] == llvmgen.MEMORY_ERROR
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss < 200_000  # KiB


@pytest.mark.parametrize("n", [0, 1, 5, 14])
def test_a_copy_loop_is_one_memmove(module, n):
    src = np.arange(1.0, 15.0)
    dst, want = np.zeros((3, 14)), np.zeros((3, 14))
    module.copies(want, src, 2, n)
    assert run_translated(module.copies, dst, src, 2, n)[0] == 0
    np.testing.assert_array_equal(dst, want)
    argtys = tuple(_typeof(v) for v in (dst, src, 2, n))
    text = llvmgen.translate(module.copies, argtys, "tg_test.copies_text", None)[0]
    assert "llvm.memmove" in text
    # strided: a loop as before
    dst, want = np.zeros((3, 28))[:, ::2], np.zeros((3, 28))[:, ::2]
    module.copies(want, src, 1, n)
    assert run_translated(module.copies, dst, src, 1, n)[0] == 0
    np.testing.assert_array_equal(dst, want)


@pytest.mark.parametrize("ahead", [True, False])
def test_a_copy_onto_its_own_source_is_pythons(module, ahead):
    # copied forward onto a later part of its source, a loop repeats what it copied first
    # (memmove would not); onto an earlier part, it shifts
    buf, want = np.arange(10.0), np.arange(10.0)
    views = (lambda b: (b[1:], b[:-1])) if ahead else (lambda b: (b[:-1], b[1:]))
    module.copy_1d(*views(want), 9)
    assert run_translated(module.copy_1d, *views(buf), 9)[0] == 0
    np.testing.assert_array_equal(buf, want)
    assert len(set(want.tolist())) == (1 if ahead else 9)


def test_what_it_does_not_know_is_left_to_numba(module):
    with pytest.raises(llvmgen.Unsupported):
        llvmgen.translate(module.not_known, (_typeof(np.zeros(3)), _typeof(np.zeros(3))),
                          "tg_test.not_known", None)


# -- kernels: nests and steps ------------------------------------------------------------

def rnn_loss(w, xs):
    def step(h, x):
        h = tnp.tanh(h * w[0] + x * w[1] + w[2])
        return h, tnp.sum(tnp.exp(-h * h)) + tnp.sum(tnp.log1p(h * h) * x)
    _, ys = tg.scan(step, tnp.zeros(w.shape[1]), xs)
    return tnp.sum(ys)


RNG = np.random.default_rng(3)
W = RNG.standard_normal((3, 5)) * 0.5
XS = RNG.standard_normal((11, 5))


@pytest.mark.parametrize("outline", [False, True])
def test_steps_and_nests_match_numpy_and_finite_differences(monkeypatch, outline):
    if outline:
        monkeypatch.setattr(fusion, "OUTLINE_OPS", 0)
    f = tg.value_and_grad(rnn_loss)
    got = tg.function(f, backend="numba")(W, XS)
    want = tg.function(f, backend="numpy")(W, XS)
    assert float(got[0]) == pytest.approx(float(want[0]), rel=1e-13)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(got[1], central_difference(
        lambda w: float(tg.function(rnn_loss, backend="numpy")(w, XS)), W), rtol=1e-6)


def test_an_index_error_in_a_translated_step_names_the_op_and_line():
    def f(x, n):
        return tg.fori_loop(0, n, lambda i, s: s + tnp.take(x, 2 * i) * s, 1.0)  # this line

    g = tg.function(f, backend="numba")
    assert g(np.arange(8.0), 4) == tg.function(f, backend="numpy")(np.arange(8.0), 4)
    with pytest.raises(tg.errors.TracegradIndexError,
                       match=r"gather: index 8 .*test_numba_llvmgen.py:"):
        g(np.arange(8.0), 6)


SCRIPT = textwrap.dedent("""
    import json, re
    import numpy as np
    import tracegrad as tg, tracegrad.numpy as tnp
    from tracegrad.backends import numba as nb
    from tracegrad.backends.numba import llvmgen

    def loss(w, xs):
        def step(h, x):
            h = tnp.tanh(h * w[0] + x * w[1])
            return h, tnp.sum(tnp.exp(h) * h) + tnp.sum(tnp.log1p(h * h))
        return tnp.sum(tg.scan(step, tnp.zeros(3), xs)[1])

    w, xs = np.linspace(-1, 1, 6).reshape(2, 3), np.linspace(0, 2, 21).reshape(7, 3)
    f = tg.value_and_grad(loss)
    got = tg.function(f, backend="numba")(w, xs)
    want = tg.function(f, backend="numpy")(w, xs)
    ok = bool(np.allclose(got[0], want[0], rtol=1e-13)) and bool(
        np.allclose(got[1], want[1], rtol=1e-12, atol=1e-14))
    source = tg.compiled_source(tg.trace(f)(w, xs))
    callees = len(set(re.findall(r"_direct(?:_step)?\\((\\w+),", source)))
    print(json.dumps({"ok": ok, "callees": callees, **nb.cache_info(), **llvmgen.STATS}))
""")
OUTLINED = {"TRACEGRAD_NUMBA_OUTLINE_OPS": "0"}  # the steps' loop nests are functions too


def test_steps_and_nests_are_translated_and_cached_beside_the_kernel(tmp_path):
    first = run_script(tmp_path, SCRIPT, **OUTLINED)
    assert first["ok"] and first["compiled"] == 1 and first["callees"] >= 4, first
    assert first["translated"] == first["callees"] and not first["unsupported"], first
    assert len(list((tmp_path / "numba").glob("*.tgll"))) == first["callees"]
    again = run_script(tmp_path, SCRIPT, **OUTLINED)  # a new process: all from the cache
    assert again["ok"] and again["compiled"] == 0 and again["disk_hits"] == 1, again
    assert again["translated"] == 0 and again["loaded"] == first["callees"], again
    for path in (tmp_path / "numba").glob("*.tgll"):  # gone: compiled anew, still right
        path.unlink()
    third = run_script(tmp_path, SCRIPT, **OUTLINED)
    assert third["ok"] and third["translated"] == first["callees"], third
    for path in (tmp_path / "numba").glob("*.tgll"):  # unreadable: the same
        path.write_bytes(b"not a cache entry")
    fourth = run_script(tmp_path, SCRIPT, **OUTLINED)
    assert fourth["ok"] and fourth["translated"] == first["callees"], fourth


# -- the helper module's scalar functions, translated and inlined ---------------------

PROBES = np.array([0.0, -0.0, 1e-310, -1e-310, 2.2250738585072014e-308, 1e-20, 0.3, -0.7,
                   1.0, -1.0, 2.5, -3.75, 17.0, -30.5, 88.7, -100.25, 709.78, 709.79,
                   -745.2, -746.5, 1e300, -1e300, np.inf, -np.inf, np.nan, 0.5, 0.6931,
                   1.4142135623730951, 0.7071067811865476, 3.141592653589793])


def _helpers_module():
    import sys

    from tracegrad.backends.numba import helpers

    tg.function(lambda x: tnp.tanh(tnp.exp(x)), backend="numba")(np.ones(3))  # loaded
    return sys.modules[helpers.MODULE]


def test_scalar_helpers_translated_give_numbas_bits(module):
    from numba import types
    from numba.core.registry import CPUDispatcher

    mod = _helpers_module()
    names = sorted(n for n, v in vars(mod).items() if isinstance(v, CPUDispatcher)
                   and n.endswith("_v") and v.targetoptions.get("forceinline"))
    translated = []
    for name in names:
        try:
            llvmgen._helper_ir(getattr(mod, name), (types.float64,))
        except llvmgen.Unsupported:
            continue
        translated.append(name)
    assert {"_exp_v", "_log_v", "_tanh_v", "_expm1_v"} <= set(translated), translated
    for name in translated:
        vars(module)[name] = getattr(mod, name)
        src = (f"def apply{name}(out, x):\n    for i in range(x.shape[0]):\n"
               f"        out[i] = {name}(x[i])\n")
        exec(compile(src, module.__file__, "exec"), vars(module))  # noqa: S102
        fn = vars(module)[f"apply{name}"]
        fn.__module__ = module.__name__
        import inspect
        import linecache

        lines = src.splitlines(True)
        linecache.cache[f"<probe {name}>"] = (len(src), None, lines, f"<probe {name}>")
        fn.__code__ = fn.__code__.replace(co_filename=f"<probe {name}>")
        assert inspect.getsource(fn) == src
        out = np.zeros_like(PROBES)
        rc, *_ = run_translated(fn, out, PROBES)
        with np.errstate(all="ignore"):
            want = np.array([getattr(mod, name)(x) for x in PROBES])
        assert rc == 0
        np.testing.assert_array_equal(out.view(np.int64), want.view(np.int64), err_msg=name)


# -- whole entries: a kernel's body as one part, translated --------------------------------

@pytest.fixture
def entries_translated(monkeypatch, tmp_path):
    """Every kernel's entry made one part (split.py), so its body is translated too."""
    from tracegrad.backends.numba import split

    monkeypatch.setattr(split, "ENTRY_LINES", 1)
    monkeypatch.setenv("TRACEGRAD_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(llvmgen, "_OF_FUNCTION", {})
    nb.clear_memory_cache()
    yield
    nb.clear_memory_cache()


def _entry_translated() -> bool:
    """Whether a kernel run since the fixture ran its body translated (its one part)."""
    return any(name == "kernel_part0" for _, name in llvmgen._OF_FUNCTION)


@pytest.mark.parametrize("n", [1, 7, 8, 9, 127, 128, 129, 1000, 1024, 1025, 4099, 100_003])
def test_sums_in_a_translated_entry_are_numbas_bits(entries_translated, monkeypatch, n):
    x = np.random.default_rng(n).standard_normal(n) * 1e3

    def f(v):
        return tnp.sum(v), tnp.sum(v * v), tnp.max(v), tnp.sum(v.reshape(1, -1), axis=1)

    got = tg.function(f, backend="numba")(x)
    assert _entry_translated()
    monkeypatch.setattr(llvmgen, "ENABLED", False)  # Numba compiles the same source
    nb.clear_memory_cache()
    want = tg.function(f, backend="numba")(x)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(np.asarray(a).view(np.int64),
                                      np.asarray(b).view(np.int64))
    if n <= 1024:  # one block: NumPy's pairwise order
        assert float(got[0]) == float(np.sum(x)) and float(got[1]) == float(np.sum(x * x))


def _program(w, x, idx):
    h = tnp.tanh(x @ w[:4] + w[4])
    parts = tnp.concatenate([h[:, :2] * 2.0, tnp.exp(-h[:, 1:]), h[::-1, :1]], axis=1)
    picked = tnp.take(parts, idx, axis=0)
    s = tnp.sum(picked * picked) + tnp.sum(tnp.log1p(parts * parts), axis=0)[1]
    return s / (1.0 + tnp.mean(parts)), tnp.cumsum(parts, axis=0)[-1]


def test_a_translated_entry_matches_numpy_with_gradients(entries_translated):
    rng = np.random.default_rng(11)
    w, x = rng.standard_normal((5, 3)), rng.standard_normal((6, 4))
    idx = np.array([0, 5, 2, 2, -1])
    for f in (_program, tg.value_and_grad(lambda w, x, i: _program(w, x, i)[0])):
        g = tg.function(f, backend="numba")
        got = g(w, x, idx)
        want = tg.function(f, backend="numpy")(w, x, idx)
        for a, b in zip(tg.tree.flatten(got)[0], tg.tree.flatten(want)[0]):
            np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-14)
        assert _entry_translated()
    with pytest.raises(tg.errors.TracegradIndexError, match=r"test_numba_llvmgen.py:"):
        tg.function(_program, backend="numba")(w, x, np.array([0, 6]))


def test_a_translated_entry_runs_a_scan_and_frees_its_buffers(entries_translated):
    f = tg.function(tg.value_and_grad(rnn_loss), backend="numba")
    want = tg.function(tg.value_and_grad(rnn_loss), backend="numpy")(W, XS)
    f(W, XS)
    assert _entry_translated()
    import resource

    for k in range(300):
        got = f(W, XS)
        if k == 50:
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss < 20_000  # KiB
    assert float(got[0]) == pytest.approx(float(want[0]), rel=1e-13)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-12, atol=1e-14)


def test_a_helper_that_may_raise_leaves_its_caller_to_numba(entries_translated):
    # int power raises on a negative exponent (a Numba helper's ValueError): the entry
    # calling it is not translated, and the error is the one Numba raises
    f = tg.function(lambda a, b: a ** b + a, backend="numba")
    a = np.array([1, 2, 3, -4])
    np.testing.assert_array_equal(f(a, np.array([0, 1, 2, 3])), a ** np.array([0, 1, 2, 3]) + a)
    assert not _entry_translated()
    with pytest.raises(ValueError, match="integers to negative integer powers"):
        f(a, np.array([0, -1, 2, 3]))


def test_a_kernel_compiled_again_into_another_cache_leaves_its_entries_there(
        entries_translated, monkeypatch, tmp_path):
    # the same process compiles the same module twice: its translated functions, loaded
    # already, are translated again, so the second cache holds every entry its kernel needs
    f = tg.value_and_grad(rnn_loss)
    want = tg.function(f, backend="numpy")(W, XS)
    tg.function(f, backend="numba")(W, XS)
    first = sorted(p.name for p in (tmp_path / "numba").glob("*.tgll"))
    assert first
    monkeypatch.setenv("TRACEGRAD_CACHE_DIR", str(tmp_path / "other"))
    nb.clear_memory_cache()
    got = tg.function(f, backend="numba")(W, XS)
    assert sorted(p.name for p in (tmp_path / "other" / "numba").glob("*.tgll")) == first
    assert float(got[0]) == pytest.approx(float(want[0]), rel=1e-13)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-12, atol=1e-14)
