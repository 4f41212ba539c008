"""Compiled and transformed functions pickle, and unpickle in another process: a
`tg.Function` by reference to its Python function, a `ConcreteFunction` as its IR, which a
fresh process compiles once or loads from its disk kernel cache."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp
from tracegrad.errors import ArgumentTypeError, InvalidArgumentError, ShapeError, UsageError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

W = np.array([0.3, 0.2])
X = np.arange(6.0).reshape(3, 2) / 5


def loss(w, x):
    return tnp.sum(tnp.tanh(x @ w) ** 2)


def loss_numpy(w, x):
    return np.sum(np.tanh(x @ w) ** 2)


def grad_numpy(w, x):
    t = np.tanh(x @ w)
    return x.T @ (2 * t * (1 - t ** 2))


def roundtrip(obj):
    return pickle.loads(pickle.dumps(obj))


def test_function_of_a_tracegrad_numpy_function_pickles():
    f = roundtrip(tg.function(tnp.sin, backend="numpy"))
    assert isinstance(f, tg.Function) and f.tracing_count == 0
    np.testing.assert_allclose(f(np.array([0.5, 1.0])), np.sin([0.5, 1.0]), rtol=1e-15)


def test_function_pickles_with_its_options_and_traces_again():
    f = tg.function(loss, static_argnums=(), backend="numpy", reduce_retracing=True)
    f(W, X)
    g = roundtrip(f)
    assert g.python_function is loss
    assert (g._backend, g._reduce_retracing, g.tracing_count) == ("numpy", True, 0)
    np.testing.assert_allclose(g(W, X), loss_numpy(W, X), rtol=1e-14)
    assert g.tracing_count == 1


def test_transformed_functions_pickle_as_transform_function_and_options():
    f = tg.function(loss)
    vg = roundtrip(tg.value_and_grad(f, argnums=(0,)))
    value, (gw,) = vg(W, X)
    np.testing.assert_allclose(value, loss_numpy(W, X), rtol=1e-14)
    np.testing.assert_allclose(gw, grad_numpy(W, X), rtol=1e-13)
    np.testing.assert_allclose(roundtrip(tg.grad(loss))(W, X), grad_numpy(W, X), rtol=1e-13)
    per_example = roundtrip(tg.vmap(tg.grad(loss), in_axes=(None, 0)))(W, X[:, None, :])
    np.testing.assert_allclose(per_example, [grad_numpy(W, x[None]) for x in X], rtol=1e-13)
    jac = roundtrip(tg.jacobian(tnp.tanh))(W)
    np.testing.assert_allclose(jac, np.diag(1 - np.tanh(W) ** 2), rtol=1e-15)
    bjac = roundtrip(tg.batch_jacobian(tnp.tanh))(X)
    np.testing.assert_allclose(bjac[2], np.diag(1 - np.tanh(X[2]) ** 2), rtol=1e-15)


def test_vjp_pullback_pickles_with_its_primals():
    out, vjp_fn = tg.vjp(loss, W, X)
    gw, gx = roundtrip(vjp_fn)(2.0)
    np.testing.assert_allclose(gw, 2 * grad_numpy(W, X), rtol=1e-13)
    np.testing.assert_allclose(gx, vjp_fn(2.0)[1], rtol=1e-15)


def test_lambda_and_closure_pickle_with_cloudpickle():
    cloudpickle = pytest.importorskip("cloudpickle")
    scale = 3.0
    f = tg.grad(tg.function(lambda x: scale * tnp.sum(x ** 2)))
    g = cloudpickle.loads(cloudpickle.dumps(f))
    np.testing.assert_allclose(g(np.array([1.0, -2.0])), [6.0, -12.0], rtol=1e-15)


def test_concrete_function_travels_as_its_graph_and_signature():
    c = tg.function(loss).get_concrete_function(W, tg.TensorSpec((None, 2)))
    d = roundtrip(c)
    assert d.graph is not c.graph and str(d.graph) == str(c.graph)
    assert d.structured_input_signature == c.structured_input_signature
    np.testing.assert_allclose(d(W, X), loss_numpy(W, X), rtol=1e-14)
    np.testing.assert_allclose(d(W, x=X[:1]), loss_numpy(W, X[:1]), rtol=1e-14)
    # unpickled twice in one process: one function, compiled once
    assert roundtrip(c) is d
    with pytest.raises(ShapeError, match="loss: argument x has shape"):
        d(W, np.zeros((3, 4)))
    with pytest.raises(ArgumentTypeError, match="loss"):
        d(W, X, X)


def test_concrete_function_carries_its_constants():
    w = np.array([2.0, -1.0])
    c = tg.function(lambda x: tnp.sum(x * w)).get_concrete_function(np.ones(2))
    np.testing.assert_allclose(roundtrip(c)(np.array([3.0, 4.0])), 2.0, rtol=1e-15)


def test_concrete_function_reading_a_variable_refuses_to_pickle():
    v = tg.Variable(np.ones(2))
    c = tg.function(lambda x: tnp.sum(x * v)).get_concrete_function(np.ones(2))
    with pytest.raises(UsageError, match="reads a Variable"):
        pickle.dumps(c)


def test_version_mismatch_is_a_clear_error():
    rebuild, args = tg.function(loss).get_concrete_function(W, X).__reduce__()
    with pytest.raises(InvalidArgumentError,
                       match=r"pickled by tracegrad 0\.0\.1 .* runs tracegrad 0\.1\.0"):
        rebuild("0.0.1", *args[1:])


# The child unpickles what the parent sent, calls it, and prints results and cache counters;
# it has no access to this test module.
CHILD = textwrap.dedent("""
    import json, pickle, sys
    import numpy as np
    from tracegrad.backends import numba as nb
    w, x, concrete, vg = pickle.loads(sys.stdin.buffer.read())
    value, grad = vg(w, x)
    print(json.dumps({"loss": float(concrete(w, x)), "value": float(value),
                      "grad": grad.tolist(), "tests_imported": "test_pickle" in sys.modules,
                      **nb.cache_info()}))
""")


def run_child(payload: bytes, cache_dir) -> dict:
    env = dict(os.environ, TRACEGRAD_CACHE_DIR=str(cache_dir), PYTHONPATH=ROOT,
               TRACEGRAD_BACKEND="numba")
    proc = subprocess.run([sys.executable, "-c", CHILD], input=payload, env=env,
                          capture_output=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr.decode()
    return json.loads(proc.stdout.decode().splitlines()[-1])


def test_fresh_process_compiles_once_then_loads_from_the_disk_cache(tmp_path):
    cloudpickle = pytest.importorskip("cloudpickle")
    concrete = tg.function(loss, backend="numba").get_concrete_function(W, X)
    # by value, as Dask ships functions: the child does not import this module
    vg = tg.value_and_grad(lambda w, x: tnp.sum(tnp.tanh(x @ w) ** 2))
    payload = cloudpickle.dumps((W, X, concrete, vg))
    cold = run_child(payload, tmp_path)
    warm = run_child(payload, tmp_path)
    for out in (cold, warm):
        np.testing.assert_allclose(out["loss"], loss_numpy(W, X), rtol=1e-14)
        np.testing.assert_allclose(out["value"], loss_numpy(W, X), rtol=1e-14)
        np.testing.assert_allclose(out["grad"], grad_numpy(W, X), rtol=1e-13)
        assert not out["tests_imported"]
    assert cold["compiled"] == 2 and cold["disk_hits"] == 0
    assert warm["compiled"] == 0 and warm["disk_hits"] == 2
