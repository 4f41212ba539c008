"""The numba backend's kernel cache: one kernel per function across sizes, a disk cache
that a fresh process reuses without compiling, and safe recovery from corrupt entries,
unwritable directories and two processes filling one entry at once."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tracegrad.core.op import REGISTRY

nb = pytest.importorskip("tracegrad.backends.numba")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# A script that compiles one function in a fresh process and prints the cache counters.
SCRIPT = textwrap.dedent("""
    import json, sys, warnings
    import numpy as np
    import tracegrad as tg, tracegrad.numpy as tnp
    from tracegrad.backends import numba as nb
    warnings.simplefilter("always")

    @tg.function(backend="numba")
    def f(x, y):
        return tnp.sum(tnp.tanh(x) * y + 0.5, axis=-1)

    x = np.linspace(-1, 1, 12).reshape(3, 4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = f(x, x[0])
    ok = bool(np.allclose(out, np.sum(np.tanh(x) * x[0] + 0.5, axis=-1)))
    print(json.dumps({"ok": ok, **nb.cache_info(),
                      "warnings": [str(w.message) for w in caught]}))
""")


def kernel_files(cache_dir):
    """The generated kernel modules in `cache_dir` (not the shared helper module)."""
    return [p for p in glob.glob(os.path.join(str(cache_dir), "numba", "tg_*.py"))
            if not os.path.basename(p).startswith("tg_helpers_")]


def run_script(cache_dir, script=SCRIPT, **env_vars):
    """`script`'s JSON line, run with `cache_dir` and `env_vars` (None removes a variable)."""
    env = dict(os.environ, TRACEGRAD_CACHE_DIR=str(cache_dir), **env_vars)
    env = {k: v for k, v in env.items() if v is not None}
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """An empty cache directory for this test, and an empty in-memory cache."""
    monkeypatch.setenv("TRACEGRAD_CACHE_DIR", str(tmp_path / "cache"))
    nb.clear_memory_cache()
    yield tmp_path / "cache"
    nb.clear_memory_cache()


def test_one_kernel_serves_every_size(fresh_cache):
    @tg.function(backend="numba")
    def f(x):
        return tnp.exp(x) / tnp.sum(tnp.exp(x), axis=-1, keepdims=True)

    before = nb.cache_info()
    for n in (3, 5, 8):
        x = np.linspace(0, 1, 2 * n).reshape(2, n)
        np.testing.assert_allclose(f(x), np.exp(x) / np.exp(x).sum(-1, keepdims=True),
                                   rtol=1e-13)
    after = nb.cache_info()
    assert f.tracing_count == 3
    assert after["compiled"] - before["compiled"] == 1
    assert after["memory_hits"] - before["memory_hits"] == 2
    assert len(kernel_files(fresh_cache)) == 1


def test_generated_source_has_no_sizes():
    def f(x):
        return tnp.mean(tnp.sin(x[1:]) * 2.5, axis=0)

    sources = [nb.generate_source(tg.optimize(tg.trace(f)(np.ones((n, 2 * n)))))
               for n in (4, 7)]
    assert sources[0] != sources[1]  # the IR comments name the shapes ...
    code = {"\n".join(line for line in s.splitlines() if not line.lstrip().startswith("#"))
            for s in sources}
    assert len(code) == 1  # ... the code does not


def test_fresh_process_with_a_warm_cache_does_not_compile(tmp_path):
    first = run_script(tmp_path)
    assert first["ok"] and first["compiled"] == 1 and first["disk_hits"] == 0
    second = run_script(tmp_path)
    assert second["ok"] and second["compiled"] == 0 and second["disk_hits"] == 1
    assert not second["warnings"]


# SCRIPT, also saying which CPU Numba compiled for and, when it compiled, which vector
# registers the kernel's packed arithmetic uses.
TARGET_SCRIPT = SCRIPT.replace("print(json.dumps({", """
from tests.backends._codegen_probe import facts, kernel_module, target
widths = None
if nb.cache_info()["compiled"]:
    graph = f.get_concrete_function(x, x[0]).graph
    widths = facts(kernel_module(tg.compiled_source(graph)).kernel)["packed_widths"]
print(json.dumps({"target": target(), "widths": widths,""")


def _narrower_target(features: str) -> dict:
    """Numba's target settings for a CPU without the widest vector unit of `features`: the
    same features less AVX-512, or x86-64-v2 (SSE4.2, no AVX) when AVX-512 is not there."""
    feats = features.split(",")
    if "+avx512f" not in feats:
        return {"NUMBA_CPU_NAME": "x86-64-v2", "NUMBA_CPU_FEATURES": "+sse4.2"}
    narrow = [("-" + f[1:]) if f[1:].startswith("avx512") else f for f in feats]
    return {"NUMBA_CPU_NAME": "x86-64", "NUMBA_CPU_FEATURES": ",".join(narrow)}


def test_a_cache_shared_between_cpus_never_loads_code_built_for_another(tmp_path):
    # One cache directory used by processes compiling for different CPUs (as a network
    # home or a container image is used by different machines): Numba's index keys
    # machine code by (target triple, CPU name, CPU features), so each target compiles its
    # own code next to the others' and later loads only its own; tracegrad's files are
    # source text, the same for every CPU.
    generic = {"NUMBA_CPU_NAME": "generic", "NUMBA_CPU_FEATURES": None}
    host = run_script(tmp_path, TARGET_SCRIPT)
    assert host["ok"] and host["compiled"] == 1 and host["disk_hits"] == 0
    narrow = _narrower_target(host["target"]["features"])
    for env in (generic, narrow):
        other = run_script(tmp_path, TARGET_SCRIPT, **env)
        assert other["target"]["cpu"] == env["NUMBA_CPU_NAME"]
        assert other["ok"] and other["compiled"] == 1 and other["disk_hits"] == 0, other
        assert not other["warnings"]
        if env is generic:  # x86-64 baseline: SSE2 only
            assert set(other["widths"]) <= {"xmm"}, other
        elif host["target"]["avx512f"]:
            assert not other["target"]["avx512f"] and "zmm" not in other["widths"], other
        else:
            assert not other["target"]["avx2"] and "ymm" not in other["widths"], other
    for env in ({}, generic, narrow):  # each finds its own code now
        again = run_script(tmp_path, TARGET_SCRIPT, **env)
        assert again["ok"] and again["compiled"] == 0 and again["disk_hits"] == 1, (env, again)
    assert len(kernel_files(tmp_path)) == 1


def test_corrupt_module_file_is_rebuilt_with_a_warning(tmp_path):
    run_script(tmp_path)
    (path,) = kernel_files(tmp_path)
    with open(path, "a") as f:
        f.write("\nraise SystemExit('tampered')\n")
    result = run_script(tmp_path)
    assert result["ok"] and result["rebuilt"] == 1 and result["compiled"] == 1
    assert any("corrupt" in w for w in result["warnings"])
    again = run_script(tmp_path)
    assert again["ok"] and again["compiled"] == 0 and not again["warnings"]


def test_corrupt_numba_cache_is_rebuilt_with_a_warning(tmp_path):
    run_script(tmp_path)
    for path in glob.glob(str(tmp_path / "numba" / "__pycache__" / "*.nbi")):
        with open(path, "r+b") as f:
            f.seek(20)
            f.write(b"\x00garbage\xff" * 8)
    result = run_script(tmp_path)
    assert result["ok"] and result["rebuilt"] == 1
    assert any("could not be loaded" in w for w in result["warnings"])
    again = run_script(tmp_path)
    assert again["ok"] and again["compiled"] == 0 and again["disk_hits"] == 1


def test_unwritable_cache_dir_works_with_a_warning(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    result = run_script(blocker / "cache")
    assert result["ok"] and result["compiled"] == 1
    assert any("not writable" in w for w in result["warnings"])


def test_two_processes_fill_one_entry_at_once(tmp_path):
    env = dict(os.environ, TRACEGRAD_CACHE_DIR=str(tmp_path))
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    procs = [subprocess.Popen([sys.executable, "-c", SCRIPT], env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for _ in range(2)]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        result = json.loads(out.strip().splitlines()[-1])
        assert result["ok"] and not result["warnings"]
    assert len(kernel_files(tmp_path)) == 1
    after = run_script(tmp_path)
    assert after["ok"] and after["compiled"] == 0


def test_every_primitive_has_numba_code():
    missing = set(REGISTRY) - nb.supported_primitives()
    assert not missing, f"primitives without Numba code: {sorted(missing)}"


def test_generated_source_is_one_module_with_ir_lines():
    def f(x, w):
        h = tnp.tanh(x @ w)
        return tnp.sum(h * h), tnp.argmax(h, axis=1)

    graph = tg.optimize(tg.trace(f)(np.ones((3, 4)), np.ones((4, 2))))
    src = tg.compiled_source(tg.trace(f)(np.ones((3, 4)), np.ones((4, 2))))
    assert src.count("@njit(cache=True") == 1 and src.count("def kernel(") == 1
    for line in str(graph).splitlines()[1:-2]:
        assert "# " + line.strip() in src, line
    compile(src, "<generated>", "exec")


def test_calls_and_custom_gradient_boundaries_are_inlined():
    inner = tg.function(lambda x: tnp.sin(x) * 2.0, backend="numba")

    @tg.custom_gradient
    def clipped(x):
        return tnp.exp(x), lambda g: g

    def outer(x):
        return inner(x) + clipped(x)

    x = np.linspace(-1, 1, 5)
    graph = tg.trace(outer)(x)
    got = nb.compile_graph(graph)([x])[0]
    np.testing.assert_allclose(got, np.sin(x) * 2.0 + np.exp(x), rtol=1e-13)
