"""The numba backend's kernel cache: one kernel per function across sizes, a disk cache
that a fresh process reuses without compiling, and safe recovery from corrupt entries,
unwritable directories and two processes filling one entry at once."""

from __future__ import annotations

import contextlib
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


# A kernel split into parts (`split.py`) whose loop nests are functions of the module
# (`fusion.OUTLINE_OPS`): the entry calls its parts, and they call the nests, by `_direct`.
DIRECT_SCRIPT = textwrap.dedent("""
    import json, warnings
    import numpy as np
    import tracegrad as tg, tracegrad.numpy as tnp
    from tracegrad.backends import numba as nb
    tg.config.background_compile = False

    def f(a, b):
        s = tnp.sum(a, axis=0)
        for k in range(3):
            a = tnp.tanh(a * 2.0 + b) * tnp.sin(a) + 0.1 * k
            s = s + tnp.sum(a * a, axis=0)
        return a, s

    a, b = np.linspace(-1, 1, 15).reshape(5, 3), np.linspace(0, 1, 3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = tg.function(f, backend="numba")(a, b)
    want = tg.function(f, backend="numpy")(a, b)
    ok = all(bool(np.allclose(g, w, rtol=1e-13, atol=0)) for g, w in zip(got, want))
    source = tg.compiled_source(tg.trace(f)(a, b))
    print(json.dumps({"ok": ok, **nb.cache_info(),
                      "parts": source.count("_direct(kernel_part"),
                      "nests": source.count("_direct(nest"),
                      "warnings": [str(w.message) for w in caught]}))
""")
DIRECT_ENV = {"TRACEGRAD_NUMBA_SPLIT_ABOVE": "12", "TRACEGRAD_NUMBA_SPLIT_LINES": "12",
              "TRACEGRAD_NUMBA_OUTLINE_OPS": "2"}


def test_a_kernel_calling_its_parts_directly_is_loaded_from_a_warm_cache(tmp_path):
    first = run_script(tmp_path, DIRECT_SCRIPT, **DIRECT_ENV)
    assert first["ok"] and first["compiled"] == 1 and first["parts"] >= 3, first
    assert first["nests"] >= 1 and not first["warnings"], first
    # a fresh process loads the callees' machine code before their callers' (loading a
    # caller first would leave its calls unresolved: the process crashed)
    again = run_script(tmp_path, DIRECT_SCRIPT, **DIRECT_ENV)
    assert again["ok"] and again["compiled"] == 0 and again["disk_hits"] == 1, again
    assert not again["warnings"]


# a loop nest's code, translated to LLVM IR (llvmgen.py); a part's, compiled by Numba
@pytest.mark.parametrize("pattern", ["*-nest1-*.tgll", "__pycache__/*.kernel_part1-*.nbc"])
def test_a_callee_whose_cached_code_is_gone_is_compiled_again(tmp_path, pattern):
    run_script(tmp_path, DIRECT_SCRIPT, **DIRECT_ENV)
    files = sorted(glob.glob(str(tmp_path / "numba" / pattern)))
    assert files
    for path in files:
        os.unlink(path)
    result = run_script(tmp_path, DIRECT_SCRIPT, **DIRECT_ENV)
    assert result["ok"] and not result["warnings"], result
    again = run_script(tmp_path, DIRECT_SCRIPT, **DIRECT_ENV)
    assert again["ok"] and again["compiled"] == 0 and again["disk_hits"] == 1, again


def test_a_part_is_compiled_once_not_again_in_its_caller(fresh_cache, monkeypatch):
    from tracegrad.backends.numba import fusion, split

    monkeypatch.setattr(split, "SPLIT_ABOVE", 12)
    monkeypatch.setattr(split, "SPLIT_LINES", 12)
    monkeypatch.setattr(fusion, "OUTLINE_OPS", 2)
    monkeypatch.setattr(tg.config, "background_compile", False)

    def f(a):
        for _ in range(3):
            a = tnp.tanh(a * 2.0) + tnp.sum(a, axis=0)
        return a

    a = np.linspace(-1.0, 1.0, 6).reshape(2, 3)
    np.testing.assert_allclose(tg.function(f, backend="numba")(a),
                               tg.function(f, backend="numpy")(a), rtol=1e-13)
    from tests.backends._codegen_probe import kernel_module

    module = kernel_module(tg.compiled_source(tg.trace(f)(a)))
    entry, part = module.kernel, module.kernel_part0
    entry_ir = next(iter(entry.overloads.values())).library.get_llvm_str()
    part_ir = next(iter(part.overloads.values())).library.get_llvm_str()
    # the entry declares its parts' symbols and defines none of their code
    assert any(line.startswith("declare") and "@tg_direct." in line
               for line in entry_ir.splitlines())
    assert not any(line.startswith("define") and "kernel_part" in line
                   for line in entry_ir.splitlines())
    assert any(line.startswith("define") and "kernel_part0" in line
               for line in part_ir.splitlines())
    assert "cpython" not in part_ir  # called only by generated code: no Python wrapper


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


def test_a_file_another_process_writes_after_a_missed_read_is_not_rebuilt(tmp_path,
                                                                          monkeypatch):
    """Two processes fill one entry: one finds no file, the other writes it before the
    first goes on. The file is not 'corrupt': purging it would pull it from under a
    process loading it (Numba then finds no file to cache against, as a Dask worker did)."""
    from tracegrad.backends.numba import cache

    source = ("import numpy as np\nfrom numba import njit\n\n\n"
              '@njit(cache=True, error_model="numpy", nogil=True)\n'
              "def kernel(a0):\n    return a0[0] + 1.0\n")
    key = cache.kernel_key(source, "(float64[::1],)")
    name = "tg_race_" + key
    path = os.path.join(str(tmp_path), name + ".py")
    read = cache._module_text
    written = []  # the inode of the other process's file

    def missed_then_written(p, k, src):
        if not written:  # the read misses; the other process links the file now
            cache._write_once(path, cache._header(key, source) + source)
            written.append(os.stat(path).st_ino)
            return cache.MISSING
        return read(p, k, src)

    monkeypatch.setattr(cache, "_module_text", missed_then_written)
    rebuilt = cache.STATS["rebuilt"]
    with warnings_as_errors():  # no "corrupt" warning
        module = cache._load_file(str(tmp_path), name, key, source, True)
    assert os.stat(path).st_ino == written[0]  # the other process's file, not purged
    assert cache.STATS["rebuilt"] == rebuilt
    assert module.kernel(np.array([2.0])) == 3.0
    sys.modules.pop(name, None)


@contextlib.contextmanager
def warnings_as_errors():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


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


# -- faults: damaged, foreign and untrusted files, full and read-only directories, killed
# writers, other versions. Each recovers with at most a warning and the right answer.


def _numba_files(cache_dir, suffix):
    return glob.glob(str(cache_dir / "numba" / "__pycache__" / f"tg_*{suffix}"))


def _truncate_module(cache_dir):
    (path,) = kernel_files(cache_dir)
    text = open(path).read()
    with open(path, "w") as f:
        f.write(text[: len(text) // 2])


def _foreign_module(cache_dir):
    # Code that is not tracegrad's under a kernel's name, with a header whose digest is
    # right: the digest alone would let it run.
    (path,) = kernel_files(cache_dir)
    key = open(path).readline().split()[3]
    body = (open(path).read().split("\n", 1)[1]
            + f"\nopen({str(cache_dir / 'pwned')!r}, 'w').close()\n")
    with open(path, "w") as f:
        f.write(nb.cache._header(key, body) + body)


def _truncate_numba_data(cache_dir):
    for path in _numba_files(cache_dir, ".nbc"):
        with open(path, "r+b") as f:
            f.truncate(os.path.getsize(path) // 3)


def _stray_files(cache_dir):
    d = cache_dir / "numba"
    (d / "notes.txt").write_text("not a kernel")
    (d / "tg_0123456789abcdef0123456789abcdef.py").write_text("raise SystemExit(3)\n")
    (d / "__pycache__" / "tg_junk.kernel-9.py311.nbi").write_bytes(b"\x80\x04junk")


@pytest.mark.parametrize("damage, warns", [
    (_truncate_module, "corrupt or not tracegrad's own code"),
    (_foreign_module, "corrupt or not tracegrad's own code"),
    (_truncate_numba_data, "could not be loaded"),
    (_stray_files, None),
])
def test_a_damaged_or_foreign_cache_file_is_rebuilt(tmp_path, damage, warns):
    run_script(tmp_path)
    damage(tmp_path)
    result = run_script(tmp_path)
    assert result["ok"], result
    assert not (tmp_path / "pwned").exists(), "code from the cache ran"
    if warns is None:
        assert not result["warnings"] and result["disk_hits"] == 1, result
    else:
        assert result["rebuilt"] == 1 and any(warns in w for w in result["warnings"]), result
    again = run_script(tmp_path)
    assert again["ok"] and again["compiled"] == 0 and not again["warnings"], again


def test_cache_directories_are_created_private(tmp_path):
    base = tmp_path / "home" / "cache"
    assert run_script(base)["ok"]
    for d in (tmp_path / "home", base, base / "numba", base / "numba" / "__pycache__"):
        assert d.stat().st_mode & 0o777 == 0o700, (d, oct(d.stat().st_mode))


def test_a_cache_directory_others_can_read_is_made_private(tmp_path):
    d = tmp_path / "numba"
    d.mkdir()
    d.chmod(0o755)  # as tracegrad made them before
    assert run_script(tmp_path)["ok"]
    assert d.stat().st_mode & 0o777 == 0o700


@pytest.mark.parametrize("where", ["numba", "numba/__pycache__"])
@pytest.mark.parametrize("mode", [0o777, 0o770])
def test_a_cache_directory_others_can_write_is_refused(tmp_path, where, mode):
    run_script(tmp_path)
    (tmp_path / where).chmod(mode)
    _foreign_module(tmp_path)  # what another user could have put there
    result = run_script(tmp_path)
    assert result["ok"] and result["compiled"] == 1 and result["disk_hits"] == 0, result
    assert any("is refused" in w and "writable by" in w for w in result["warnings"]), result
    assert not (tmp_path / "pwned").exists()


def test_a_cache_directory_of_another_user_is_refused(tmp_path):
    run_script(tmp_path)
    if os.geteuid() == 0:  # root may hand the directory to another user
        os.chown(tmp_path / "numba", 4242, -1)
        result = run_script(tmp_path)
    else:  # this process plays another user
        result = run_script(tmp_path, "import os\nos.geteuid = lambda: 4242\n" + SCRIPT)
    assert result["ok"] and result["compiled"] == 1, result
    assert any("owned by uid" in w for w in result["warnings"]), result


def test_a_numba_file_of_another_user_is_deleted(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("only root can make a file of another user")
    run_script(tmp_path)
    (index,) = [p for p in _numba_files(tmp_path, ".nbi") if "helpers" not in p]
    os.chown(index, 4242, -1)
    result = run_script(tmp_path)
    assert result["ok"] and result["rebuilt"] == 1, result
    assert any("is not trusted" in w for w in result["warnings"]), result
    again = run_script(tmp_path)
    assert again["ok"] and again["disk_hits"] == 1 and not again["warnings"], again


@contextlib.contextmanager
def _read_only(d):
    """`d` read-only: its mode, or for root (who writes anyway) a read-only bind mount."""
    if os.geteuid() != 0:
        for sub in (d / "numba", d / "numba" / "__pycache__"):
            sub.chmod(0o555)
        yield
        return
    mount = subprocess.run(["mount", "--bind", str(d), str(d)], capture_output=True,
                           check=False)
    if mount.returncode:
        pytest.skip(f"root without mount privileges cannot make a read-only directory: "
                    f"{mount.stderr!r}")
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(d)], check=True)
        yield
    finally:
        subprocess.run(["umount", str(d)], check=True)


def test_a_read_only_cache_directory_works_with_a_warning(tmp_path):
    run_script(tmp_path)
    with _read_only(tmp_path):
        result = run_script(tmp_path)
    assert result["ok"] and any("not writable" in w for w in result["warnings"]), result


# The process may write no byte to any file (RLIMIT_FSIZE 0: writes fail with EFBIG, as
# on a full disk).
FULL_DISK = textwrap.dedent("""
    import resource, signal
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
""")


@pytest.mark.parametrize("warm_sources", [False, True])
def test_a_full_cache_directory_compiles_in_memory(tmp_path, warm_sources):
    if warm_sources:  # the modules are there, Numba's files are not
        run_script(tmp_path)
        for f in glob.glob(str(tmp_path / "numba" / "__pycache__" / "*")):
            os.unlink(f)
    result = run_script(tmp_path, FULL_DISK + SCRIPT)
    assert result["ok"] and result["compiled"] == 1, result
    assert any("compiling this kernel in memory" in w for w in result["warnings"]), result
    after = run_script(tmp_path)
    assert after["ok"] and after["compiled"] + after["disk_hits"] == 1, after


def _killed_at(point: str) -> str:
    """A prelude that SIGKILLs the process at `point` of writing the cache."""
    return textwrap.dedent(f"""
        import os, signal
        point = {point!r}
        if point == "before-link":  # a kernel's temp file written, not linked
            real_link = os.link
            def link(src, dst):
                if "tg_helpers" not in dst:
                    os.kill(os.getpid(), signal.SIGKILL)
                return real_link(src, dst)
            os.link = link
        else:  # Numba wrote its index, not the machine code it names
            from numba.core import caching
            real_save = caching.IndexDataCacheFile._save_data
            def save_data(self, name, data):
                if "tg_helpers" not in name:
                    os.kill(os.getpid(), signal.SIGKILL)
                return real_save(self, name, data)
            caching.IndexDataCacheFile._save_data = save_data
    """)


def _run_killed(cache_dir, script):
    env = dict(os.environ, TRACEGRAD_CACHE_DIR=str(cache_dir))
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          timeout=300, check=False)
    assert proc.returncode == -9, proc.stderr


@pytest.mark.parametrize("point", ["before-link", "before-machine-code"])
def test_a_process_killed_while_writing_leaves_a_usable_cache(tmp_path, point):
    _run_killed(tmp_path, _killed_at(point) + SCRIPT)
    result = run_script(tmp_path)
    assert result["ok"] and result["compiled"] == 1 and not result["warnings"], result
    again = run_script(tmp_path)
    assert again["ok"] and again["disk_hits"] == 1 and not again["warnings"], again


KILLS = int(os.environ.get("TRACEGRAD_CACHE_KILLS", "20" if os.environ.get(
    "TRACEGRAD_SLOW", "") not in ("", "0") else "3"))


def test_processes_killed_at_random_times_while_compiling(tmp_path):
    # SIGKILL after a random delay over the whole run (import, trace, write, compile,
    # Numba's writes); then one process must still get the right answer.
    import random
    import time

    env = dict(os.environ, TRACEGRAD_CACHE_DIR=str(tmp_path))
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    start = time.perf_counter()
    run_script(tmp_path / "timing")
    whole = time.perf_counter() - start
    rng = random.Random(13)
    for _ in range(KILLS):
        proc = subprocess.Popen([sys.executable, "-c", SCRIPT], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.3, 1.0) * whole)
        proc.kill()
        proc.wait(timeout=60)
        for f in glob.glob(str(tmp_path / "numba" / "**" / "*"), recursive=True):
            assert os.stat(f).st_mode & 0o022 == 0, f
    result = run_script(tmp_path)
    assert result["ok"], result
    assert all("could not be loaded" in w or "corrupt" in w for w in result["warnings"])
    again = run_script(tmp_path)
    assert again["ok"] and again["disk_hits"] == 1 and not again["warnings"], again


def test_a_numba_index_of_another_numba_version_is_recompiled(tmp_path):
    import pickle

    run_script(tmp_path)
    for path in _numba_files(tmp_path, ".nbi"):
        with open(path, "rb") as f:
            pickle.load(f)  # the version
            rest = f.read()
        with open(path, "wb") as f:
            pickle.dump("0.1.0", f)
            f.write(rest)
    result = run_script(tmp_path)
    assert result["ok"] and result["compiled"] == 1, result
    again = run_script(tmp_path)
    assert again["ok"] and again["disk_hits"] == 1 and not again["warnings"], again


def test_a_cache_of_another_tracegrad_version_is_not_read(tmp_path):
    other = ("from tracegrad.backends.numba import cache\n"
             "cache._versions = (lambda real: lambda: real() + ';tracegrad=0.0.1')"
             "(cache._versions)\n")
    first = run_script(tmp_path, other + SCRIPT)
    second = run_script(tmp_path)
    assert first["ok"] and second["ok"] and first["compiled"] == second["compiled"] == 1
    assert len(kernel_files(tmp_path)) == 2 and not second["warnings"]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_processes_saving_two_signatures_of_one_function_at_once_keep_both(tmp_path,
                                                                            monkeypatch):
    # Numba reads a function's index, picks a data file name not in it, and writes both:
    # two processes at once would pick the same name (forks.py runs such processes)
    from numba.core import caching

    from tracegrad.backends.numba import cache

    cache._lock_index_saves()
    original = caching.IndexDataCacheFile._save_index

    def slow(self, overloads):  # widen the window between reading and writing the index
        import time

        time.sleep(0.3)
        original(self, overloads)

    monkeypatch.setattr(caching.IndexDataCacheFile, "_save_index", slow)
    index = caching.IndexDataCacheFile(str(tmp_path), "f-1.py311", ("stamp", 1))
    pids = []
    for key in ("sig a", "sig b"):
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            try:
                index.save(key, key.upper())
            finally:
                os._exit(0)
        pids.append(pid)
    for pid in pids:
        os.waitpid(pid, 0)
    assert index.load("sig a") == "SIG A" and index.load("sig b") == "SIG B"
