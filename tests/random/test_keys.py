"""Keys and bits of tracegrad.random: Threefry-2x32 against Random123's known answers, JAX's
key/split/fold_in/bits/uniform values, errors, and the warning for np.random in a trace."""

import ast
import subprocess
import sys
import warnings

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tracegrad import ops
from tracegrad import random as tr
from tracegrad.errors import DTypeError, FrozenRandomWarning, InvalidArgumentError, ShapeError

# Functions run on the numpy backend unless a test names the numba backend.
pytestmark = pytest.mark.usefixtures("numpy_backend")

U32 = np.uint32

# Random123's kat_vectors for threefry2x32_20: (counter, key) -> result words.
KAT = [
    ((0x00000000, 0x00000000), (0x00000000, 0x00000000), (0x6B200159, 0x99BA4EFE)),
    ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
    ((0x243F6A88, 0x85A308D3), (0x13198A2E, 0x03707344), (0xC4923A9C, 0x483DF7A0)),
]


@pytest.mark.parametrize("backend", ["eager", "numpy", "numba"])
def test_threefry_gives_random123s_known_answers(backend):
    ctr, key, want = (np.array(list(v), U32).T for v in zip(*KAT, strict=True))
    args = (key[0], key[1], ctr[0], ctr[1])
    f = ops.threefry2x32 if backend == "eager" else tg.function(ops.threefry2x32,
                                                                 backend=backend)
    got = np.asarray(f(*args))
    assert np.array_equal(got >> np.uint64(32), want[0])
    assert np.array_equal(got & np.uint64(0xFFFFFFFF), want[1])


# Values of jax.random (0.10.2, x64, jax_threefry_partitionable=True, JAX's default).
def test_keys_and_bits_are_jaxs():
    k = tr.key(42)
    assert np.array_equal(k, [0, 42]) and k.dtype == U32
    assert np.array_equal(tr.PRNGKey(-3), [4294967295, 4294967293])
    assert np.array_equal(tr.key(np.int32(-3)), [0, 4294967293])  # its own width
    assert np.array_equal(tr.split(k, 3), [[1832780943, 270669613], [64467757, 2916123636],
                                           [2465931498, 255383827]])
    assert np.array_equal(tr.fold_in(k, 7), [2547012911, 1371500959])
    assert np.array_equal(tr.bits(k, (2, 3)), [[2098992034, 2919706841, 2646866425],
                                              [2409546199, 1935504149, 2516274904]])
    assert np.array_equal(tr.bits(k, (3,), np.uint64),
                          np.array([7871734211187709741, 276886910877598708,
                                    10591095138341673235], np.uint64))
    assert tr.uniform(k, (4,)).tolist() == [0.4267275666499091, 0.015010069515314584,
                                            0.5741444178995352, 0.7298188969046309]
    assert tr.uniform(k, (4,), np.float32).tolist() == [
        0.48870956897735596, 0.6797971725463867, 0.6162714958190918, 0.5610160827636719]


def test_jax_agrees_where_installed():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jk = jax.random.PRNGKey(2**40 + 5)
    k = tr.key(2**40 + 5)
    assert np.array_equal(k, np.asarray(jax.random.key_data(jk)))
    assert np.array_equal(tr.split(k, 5), np.asarray(jax.random.split(jk, 5)))
    assert np.array_equal(tr.bits(k, (3, 4, 5)),
                          np.asarray(jax.random.bits(jk, (3, 4, 5), "uint32")))
    for dt in ("float64", "float32", "float16"):
        assert np.array_equal(tr.uniform(k, (7, 3), dt),
                              np.asarray(jax.random.uniform(jk, (7, 3), dt)))
    for dt in ("uint8", "uint16", "uint64"):
        assert np.array_equal(tr.bits(k, (9,), dt), np.asarray(jax.random.bits(jk, (9,), dt)))
    assert np.array_equal(tr.fold_in(k, 2**31 + 5), np.asarray(jax.random.fold_in(jk, 2**31 + 5)))


def test_a_traced_seed_makes_the_same_key():
    f = tg.function(tr.key)
    for seed in (0, 7, -1, 2**40 + 3):
        assert np.array_equal(f(np.int64(seed)), tr.key(seed))


def test_a_new_key_does_not_retrace():
    f = tg.function(lambda k: tr.normal(k, (3,)))
    a, b = f(tr.key(0)), f(tr.key(1))
    assert f.tracing_count == 1
    assert np.array_equal(a, tr.normal(tr.key(0), (3,)))
    assert not np.array_equal(a, b)


def test_split_is_fold_in_of_each_index_as_jaxs():
    keys = np.asarray(tr.split(tr.key(0), 4))
    assert len({tuple(r) for r in keys}) == 4
    assert all(np.array_equal(keys[i], tr.fold_in(tr.key(0), i)) for i in range(4))
    assert not np.array_equal(tr.split(tr.key(0), 1)[0], tr.key(0))


def test_every_element_depends_on_its_index_alone():
    """A sample's element i is the same in a sample of any shape with >= i + 1 elements."""
    k = tr.key(9)
    assert np.array_equal(tr.bits(k, (12,)), np.ravel(tr.bits(k, (3, 4))))
    assert np.array_equal(tr.normal(k, (5,)), tr.normal(k, (20,))[:5])


def test_bad_keys_name_the_function():
    with pytest.raises(InvalidArgumentError, match="normal: a key is a uint32 array"):
        tr.normal(np.array([1, 2]), (3,))
    with pytest.raises(InvalidArgumentError, match="uniform: a key"):
        tr.uniform(tr.split(tr.key(0), 2))
    with pytest.raises(DTypeError, match="bits: dtype must be an unsigned"):
        tr.bits(tr.key(0), (2,), np.int32)
    with pytest.raises(DTypeError, match="normal: dtype must be a float"):
        tr.normal(tr.key(0), (2,), np.int64)
    with pytest.raises(ShapeError, match="uniform: shape"):
        tr.uniform(tr.key(0), (-1,))
    with pytest.raises(DTypeError, match="key: the seed"):
        tr.key(np.array([1, 2]))
    with pytest.raises(InvalidArgumentError, match="choice: cannot take 4 samples from 3"):
        tr.choice(tr.key(0), 3, (4,), replace=False)


def test_numpy_random_in_a_trace_warns_once_per_function():
    @tg.function
    def f(x):
        return x + np.random.normal(size=x.shape)

    @tg.function
    def g(x):
        return x + np.random.default_rng(0).standard_normal(x.shape)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        f(np.zeros(2))
        f(np.zeros(3))  # traced again: no second warning
        g(np.zeros(2))
    frozen = [w for w in caught if issubclass(w.category, FrozenRandomWarning)]
    assert len(frozen) == 2
    assert "np.random.normal called while tracing f" in str(frozen[0].message)
    assert "tracegrad.random" in str(frozen[0].message)
    assert frozen[0].filename == __file__
    assert "np.random.default_rng called while tracing g" in str(frozen[1].message)


def test_numpy_random_is_numpys_own_outside_traces():
    before = np.random.normal
    tg.function(lambda x: tnp.sin(x))(np.zeros(2))
    assert np.random.normal is before
    assert getattr(np.random.normal, "__self__", None) is not None  # RandomState's method


def test_another_process_draws_the_same_numbers():
    code = ("import numpy as np; from tracegrad import random as tr; "
            "print(repr(tr.normal(tr.fold_in(tr.key(3), 9), (4,)).tolist()))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert ast.literal_eval(out.strip()) == tr.normal(tr.fold_in(tr.key(3), 9), (4,)).tolist()
