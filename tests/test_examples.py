"""The runnable examples run and print what they promise."""

import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest
from finite_diff import central_difference

import tracegrad as tg
from tracegrad import random as tr

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"


def run(name, **env):
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / name)], capture_output=True, text=True, timeout=600,
        env={**os.environ, **env},
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_quickstart_gradient_matches_the_analytic_one():
    out = run("quickstart.py")
    got = re.search(r"d loss / dx     = \[(.*?)\]", out, re.S).group(1).split()
    want = re.search(r"cos\(x\) \* y      = \[(.*?)\]", out, re.S).group(1).split()
    assert got == want
    assert "traced 1 time" in out


def test_train_mlp_reduces_the_loss():
    out = run("train_mlp.py", TRAIN_STEPS="1200")
    losses = [float(v) for v in re.findall(r"loss (\d+\.\d+)", out)]
    assert losses[-1] < 0.5 * losses[0]
    assert "traced 1 time(s)" in out


def test_train_variables_reduces_the_loss_in_one_traced_kernel():
    out = run("train_variables.py", TRAIN_STEPS="1200")
    losses = [float(v) for v in re.findall(r"loss (\d+\.\d+)", out)]
    assert losses[-1] < 0.1 * losses[0]
    assert float(re.findall(r"accuracy (\S+)", out)[-1]) > 0.95
    assert "1201 updates; the traced step has 13 assign ops and compiles to 1 kernel(s)" in out
    assert "traced 1 time(s)" in out


def test_eager_tape_example_values():
    out = run("eager_tape.py")
    assert "w = [ 1.5 -2.   0.5]  b = 0.3" in out
    assert "dy/dx = 27.0  d2y/dx2 = 18.0" in out
    assert "d/dx log1pexp(100) = 1.0" in out
    grads = re.search(r"gradient w.r.t. w2 \[(.*?)\]  analytic \[(.*?)\]", out)
    assert grads.group(1).split() == grads.group(2).split()


def test_per_example_grads_match_the_loop_and_are_faster():
    out = run("per_example_grads.py")
    errors = [float(e) for e in re.findall(r"max \|vmap - loop\| = (\S+)", out)]
    assert len(errors) == 4 and max(errors) < 1e-12
    assert "they equal the gradient of the summed loss" in out
    vmap_ms, loop_ms = map(float, re.search(
        r"vmap\(grad\) (\S+) ms, Python loop of grad (\S+) ms", out).groups())
    assert vmap_ms < loop_ms


def test_newton_converges_quadratically_to_the_numpy_solution():
    out = run("newton.py")
    norms = [float(v) for v in re.findall(r"^step \d+ .* \|grad\| (\S+)$", out, re.M)]
    assert norms[-1] < 1e-10 and len(norms) <= 8
    assert norms[-1] < norms[-2] ** 1.5  # quadratic convergence
    assert float(re.search(r"max \|w - w_numpy\| = (\S+),", out).group(1)) < 1e-12


def test_gaussian_process_fits_its_hyperparameters_by_gradient():
    out = run("gaussian_process.py", GP_POINTS="120")
    assert float(re.search(r"max relative error (\S+)", out).group(1)) < 1e-6
    before, after = map(float, re.search(r"likelihood (\S+) -> (\S+) in", out).groups())
    assert after < before - 100
    noise = re.search(r"noise +fitted (\S+) +true (\S+)", out).groups()
    assert abs(float(noise[0]) / float(noise[1]) - 1) < 0.3
    start, fitted = map(float, re.search(r"RMSE (\S+) \(start\) -> (\S+)", out).groups())
    assert fitted < start


def test_fft_deconvolution_differentiates_through_the_transforms():
    out = run("fft_deconvolution.py")
    assert float(re.search(r"derivative of .*: max error (\S+)", out).group(1)) < 1e-12
    assert float(re.search(r"by hand\| = (\S+)", out).group(1)) < 1e-13
    first, last = map(float, re.search(r"loss (\S+) -> (\S+) in", out).groups())
    assert last < 1e-3 * first
    assert "traced 1 time(s)" in out


@pytest.mark.parametrize("name", ["numpy_interop.py", "eager_overhead.py"])
def test_other_examples_run(name):
    assert run(name)


ROOT = EXAMPLES.parent


def _python_blocks(path):
    return re.findall(r"^```python\n(.*?)^```", path.read_text(), flags=re.DOTALL | re.MULTILINE)


def test_readme_example_prints_the_ir_it_shows(capsys):
    readme = ROOT / "README.md"
    (block,) = _python_blocks(readme)
    exec(compile(block, f"{readme}:block0", "exec"), {})  # noqa: S102 (the README's example)
    shown = re.search(r"^```\n(func @loss.*?)^```", readme.read_text(),
                      flags=re.DOTALL | re.MULTILINE).group(1)
    assert capsys.readouterr().out == shown


def test_function_doc_examples_run():
    doc = ROOT / "docs" / "function.md"
    namespace = {}
    for i, block in enumerate(_python_blocks(doc)):
        exec(compile(block, f"{doc}:block{i}", "exec"), namespace)  # noqa: S102
    assert namespace["step"].tracing_count == 1


def test_fitting_doc_examples_run():
    doc = ROOT / "docs" / "fitting.md"
    namespace = {}
    blocks = _python_blocks(doc)
    for i, block in enumerate(blocks):
        exec(compile(block, f"{doc}:block{i}", "exec"), namespace)  # noqa: S102
    assert len(blocks) == 4 and namespace["train_step"].tracing_count == 1


def test_fit_scipy_reaches_the_finite_difference_fit_in_fewer_evaluations():
    out = run("fit_scipy.py", FIT_ROWS="2000")
    ours = re.search(r"trust-krylov: (\d+) evaluations.*success (\w+)", out)
    theirs = re.search(r"finite differences: (\d+) evaluations.*success (\w+)", out)
    assert ours.group(2) == theirs.group(2) == "True"
    assert 10 * int(ours.group(1)) < int(theirs.group(1))
    assert float(re.search(r"between the two fits\| = (\S+);", out).group(1)) < 1e-3


def test_rkhs_fits_with_its_kernel_primitive_in_one_trace():
    out = run("rkhs.py", RKHS_STEPS="300")
    first, last = map(float, re.search(r"loss (\S+) -> (\S+) after", out).groups())
    assert last < 0.1 * first
    assert "traced 1 time(s)" in out


def test_ode_sensitivity_derivatives_match_finite_differences():
    out = run("ode_sensitivity.py")
    assert "1 while op" in out
    errors = [float(e) for e in re.findall(r"rel err (\S+)", out)]
    assert len(errors) == 2 and max(errors) < 1e-7
    assert float(re.search(r"max \|J - FD\| = (\S+);", out).group(1)) < 1e-8
    exact = re.search(r"relative differences dE/dx0 (\S+), dE/dc (\S+), Jacobian (\S+)$", out,
                      re.M).groups()
    assert max(map(float, exact)) < 1e-12


def test_control_flow_doc_examples_run_and_print_the_ir_shown(capsys):
    doc = ROOT / "docs" / "control_flow.md"
    blocks = _python_blocks(doc)
    assert blocks
    namespace = {}
    for i, block in enumerate(blocks):
        exec(compile(block, f"{doc}:block{i}", "exec"), namespace)  # noqa: S102
    shown = re.search(r"^```\n(func @damp.*?)^```", doc.read_text(),
                      flags=re.DOTALL | re.MULTILINE).group(1)
    assert capsys.readouterr().out == shown


def test_dask_logistic_regression_descends_with_the_numpy_gradient():
    pytest.importorskip("dask.distributed")
    out = run("dask_logistic_regression.py", DASK_LR_ROWS="20000", DASK_LR_CHUNK="6000",
              DASK_LR_STEPS="10")
    assert "in 4 chunks on 2 worker processes" in out
    diff = float(re.search(r"max \|tracegrad - dask.array NumPy\| = (\S+)", out).group(1))
    assert diff < 1e-9
    losses = [float(v) for v in re.findall(r"mean loss (\d+\.\d+)", out)]
    assert losses[0] == pytest.approx(np.log(2), abs=1e-6)  # w = 0: every row log 2
    assert losses[-1] < 0.6 * losses[0]
    assert float(re.search(r"accuracy (\S+)", out).group(1)) > 0.8


@pytest.mark.parametrize("name, programs", [("chebyshev_clenshaw.py", 2), ("black_scholes.py", 1),
                                            ("logistic_descent.py", 1)])
def test_programs_written_by_others_give_numpys_values_and_gradients(name, programs):
    out = run(name, TRACEGRAD_BACKEND="numpy")  # the numba backend: tests/programs
    found = re.findall(r"max \|tracegrad - NumPy\| = (\S+); gradient vs central differences: "
                       r"max rel err (\S+)", out)
    assert len(found) == programs
    assert all(float(v) == 0.0 and float(g) < 1e-5 for v, g in found)


def test_vae_raises_the_elbo_in_one_trace():
    out = run("vae.py", VAE_STEPS="800", OPENBLAS_NUM_THREADS="1")
    elbos = [float(v) for v in re.findall(r"ELBO +(\S+)", out)]
    assert len(elbos) == 3 and elbos[-1] > elbos[0] + 30
    assert "traced 1 time(s)" in out


def test_vae_elbo_gradient_matches_central_differences_at_a_fixed_key():
    sys.path.insert(0, str(EXAMPLES))
    try:
        import vae
    finally:
        sys.path.remove(str(EXAMPLES))
    rng = np.random.default_rng(1)
    x = vae.make_data(rng, 64)
    params = vae.init(rng)
    params["log_sigma"] = np.array(-1.0)
    key = tr.key(3)
    vector, unravel = tg.tree.ravel(params)
    value_and_grad = tg.function(tg.value_and_grad(vae.neg_elbo), backend="numpy")
    elbo = tg.function(vae.neg_elbo, backend="numpy")
    value, grads = value_and_grad(params, x, key)
    assert np.isclose(value, elbo(params, x, key), rtol=1e-12)
    g = tg.tree.ravel(grads)[0]
    for v in rng.standard_normal((4, vector.size)):
        want = central_difference(lambda t, v=v: elbo(unravel(vector + t[()] * v), x, key),
                                  0.0, h=1e-5)
        np.testing.assert_allclose(g @ v, want, rtol=1e-6, atol=1e-5)
