"""`tg.config.vector_width`: the vector width LLVM prefers for the loops of numba kernels
(a function attribute of each generated function). 512 gives zmm code on an AVX-512 host,
256 never does, and the elementwise values are the same bits at every width."""

import os
import subprocess
import sys

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tests.backends._codegen_probe import sin_kernel_facts, target
from tracegrad import backends
from tracegrad.errors import InvalidArgumentError

nb = pytest.importorskip("tracegrad.backends.numba")


def _chain(x):
    return tnp.exp(x) * tnp.tanh(x) + tnp.sin(x) * 3.0


@pytest.mark.parametrize("bits", [256, 512])
def test_the_setting_sets_the_register_width_of_the_loops(bits, tmp_path, monkeypatch):
    # compiled here, not loaded from a disk cache (cached machine code has no assembly text)
    monkeypatch.setenv("TRACEGRAD_CACHE_DIR", str(tmp_path))
    nb.clear_memory_cache()
    monkeypatch.setattr(tg.config, "vector_width", bits)
    widths = set(sin_kernel_facts((4, 300))["packed_widths"])
    assert {"ymm", "zmm"} & widths, widths
    assert ("zmm" in widths) == (bits == 512 and target()["avx512f"]), widths


def test_values_are_the_same_bits_at_every_width(monkeypatch):
    x = np.random.default_rng(3).uniform(-20.0, 20.0, 5000)
    x[[7, 4000]] = [1e9, -np.inf]  # a block redone with the full sin reduction
    got = {}
    for bits in (None, 256, 512):
        monkeypatch.setattr(tg.config, "vector_width", bits)
        f = tg.function(_chain, backend="numba")
        source = tg.compiled_source(f.get_concrete_function(x).graph)
        assert (f"_vector_width_{bits}()" in source) == (bits is not None), source
        got[bits] = np.asarray(f(x))
    for bits in (256, 512):
        np.testing.assert_array_equal(got[bits].view(np.int64), got[None].view(np.int64))
    with np.errstate(all="ignore"):
        want = np.exp(x) * np.tanh(x) + np.sin(x) * 3.0
    np.testing.assert_allclose(got[None], want, rtol=1e-14)


@pytest.mark.parametrize("bad", [384, 0, True, "512", 512.0001])
def test_other_widths_are_refused(bad, monkeypatch):
    monkeypatch.setattr(backends, "vector_width", None)
    with pytest.raises(InvalidArgumentError, match="vector_width must be 256, 512 or None"):
        tg.config.vector_width = bad
    assert tg.config.vector_width is None


@pytest.mark.parametrize("env, want", [("512", "512"), ("", "None")])
def test_the_environment_variable_sets_it_at_import(env, want):
    code = "import tracegrad as tg; print(tg.config.vector_width)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, TRACEGRAD_VECTOR_WIDTH=env), timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == want
