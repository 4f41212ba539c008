"""`tracegrad dump --transform jvp|jacobian|batch_jacobian|hessian|vmap`: the graphs' types
and values at every stage and format, the transform's ops labelled, and one clear line for a
function or spec the transform cannot take."""

import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

import tracegrad as tg
from tracegrad.cli import main
from tracegrad.transforms.evaluate import evaluate

MODEL = '''
import tracegrad.numpy as tnp


def loss(x, y):
    return tnp.sum(tnp.sin(x) * y)


def layer(w, x):
    return tnp.tanh(x @ w)


def both(x):
    return tnp.sin(x), tnp.sum(x * x)
'''
ROSENBROCK = str(pathlib.Path(__file__).resolve().parents[2] / "examples" / "models.py")

rng = np.random.default_rng(7)
X, Y = rng.normal(size=3), rng.normal(size=3)
W = rng.normal(size=(3, 4))
XB, YB = rng.normal(size=(5, 3)), rng.normal(size=(5, 3))


@pytest.fixture
def model(tmp_path, monkeypatch):
    (tmp_path / "model.py").write_text(MODEL)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the CLI adds the model's folder
    yield "model.py"
    sys.modules.pop("model", None)


def run(capsys, *argv):
    code = main(["dump", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def dumped(capsys, *argv) -> str:
    code, out, err = run(capsys, *argv)
    assert (code, err) == (0, ""), err
    return out


def graph_of(capsys, *argv) -> tg.FuncGraph:
    return tg.FuncGraph.from_json(dumped(capsys, *argv, "--format", "json"))


def error(capsys, *argv) -> str:
    """Run argv expecting bad input: status 2, exactly one stderr line, nothing on stdout."""
    code, out, err = run(capsys, *argv)
    assert (code, out) == (2, ""), (out, err)
    (line,) = err.splitlines()
    assert line.startswith("tracegrad dump: error: ")
    return line[len("tracegrad dump: error: "):]


LOSS = ["model.py:loss", "--arg", "f64[3]", "--arg", "f64[3]"]
LAYER = ["model.py:layer", "--arg", "f64[3,4]", "--arg", "f64[3]"]  # f64[3] -> f64[4]
BATCH = ["model.py:layer", "--arg", "f64[3,4]", "--arg", "f64[5,3]"]  # [5, 3] -> [5, 4]


# -- the graphs' types -----------------------------------------------------------------------


@pytest.mark.parametrize(("argv", "header"), [
    ([*LOSS, "--transform", "jvp"],
     ("func @jvp_loss(%x: f64[3], %y: f64[3], %tangent_x: f64[3], %tangent_y: f64[3]) "
      "-> (f64[], f64[])")),
    ([*LOSS, "--transform", "jvp", "--argnums", "1"],
     "func @jvp_loss(%x: f64[3], %y: f64[3], %tangent_y: f64[3]) -> (f64[], f64[])"),
    (["model.py:layer", "--arg", "f64[3,4]", "--arg", "f64[None,3]", "--transform", "jvp"],
     ("func @jvp_layer(%w: f64[3,4], %x: f64[?,3], %tangent_w: f64[3,4], %tangent_x: f64[?,3]) "
      "-> (f64[?,4], f64[?,4])")),
    (["model.py:both", "--arg", "f64[3]", "--transform", "jvp"],
     "func @jvp_both(%x: f64[3], %tangent_x: f64[3]) -> (f64[3], f64[], f64[3], f64[])"),
    ([*LAYER, "--transform", "jacobian", "--argnums", "1"],
     "func @jacobian_layer(%w: f64[3,4], %x: f64[3]) -> (f64[4,3])"),
    ([*LAYER, "--transform", "jacobian"],
     "func @jacobian_layer(%w: f64[3,4], %x: f64[3]) -> (f64[4,3,4])"),
    ([*LAYER, "--transform", "jacobian", "--argnums", "0,1"],
     "func @jacobian_layer(%w: f64[3,4], %x: f64[3]) -> (f64[4,3,4], f64[4,3])"),
    (["model.py:both", "--arg", "f64[3]", "--transform", "jacobian"],
     "func @jacobian_both(%x: f64[3]) -> (f64[3,3], f64[3])"),
    ([*BATCH, "--transform", "batch_jacobian", "--argnums", "1"],
     "func @batch_jacobian_layer(%w: f64[3,4], %x: f64[5,3]) -> (f64[5,4,3])"),
    (["model.py:layer", "--arg", "f64[3,4]", "--arg", "f64[None,3]", "--transform",
      "batch_jacobian", "--argnums", "-1"],
     "func @batch_jacobian_layer(%w: f64[3,4], %x: f64[?,3]) -> (f64[?,4,3])"),
    ([*LOSS, "--transform", "hessian"], "func @hessian_loss(%x: f64[3], %y: f64[3]) -> (f64[3,3])"),
    ([*LOSS, "--transform", "hessian", "--argnums", "0,1"],
     "func @hessian_loss(%x: f64[3], %y: f64[3]) -> (f64[3,3], f64[3,3], f64[3,3], f64[3,3])"),
    ([f"{ROSENBROCK}:rosenbrock", "--arg", "f64[5]", "--transform", "hessian"],
     "func @hessian_rosenbrock(%x: f64[5]) -> (f64[5,5])"),
    ([*LAYER, "--transform", "hessian", "--argnums", "1"],
     "func @hessian_layer(%w: f64[3,4], %x: f64[3]) -> (f64[4,3,3])"),
    (["model.py:loss", "--arg", "f64[5,3]", "--arg", "f64[5,3]", "--transform", "vmap"],
     "func @vmap_loss(%x: f64[5,3], %y: f64[5,3]) -> (f64[5])"),
    (["model.py:loss", "--arg", "f64[5,3]", "--arg", "f64[3]", "--transform", "vmap",
      "--argnums", "0"], "func @vmap_loss(%x: f64[5,3], %y: f64[3]) -> (f64[5])"),
    (["model.py:loss", "--arg", "f64[None,3]", "--arg", "f64[None,3]", "--transform", "vmap"],
     "func @vmap_loss(%x: f64[?,3], %y: f64[?,3]) -> (f64[?])"),
    (["model.py:both", "--arg", "f64[2,3]", "--transform", "vmap"],
     "func @vmap_both(%x: f64[2,3]) -> (f64[2,3], f64[2])"),
])
def test_transform_graph_header(model, capsys, argv, header):
    assert dumped(capsys, *argv).splitlines()[0] == header + " {"


# -- the graphs' values, traced and optimized ------------------------------------------------


STAGES = ["traced", "optimized"]


@pytest.mark.parametrize("stage", STAGES)
def test_jvp_graph_computes_the_value_and_its_tangent(model, capsys, stage):
    tx, ty = rng.normal(size=3), rng.normal(size=3)
    g = graph_of(capsys, *LOSS, "--transform", "jvp", "--stage", stage)
    value, tangent = evaluate(g, X, Y, tx, ty)
    assert value == pytest.approx(np.sum(np.sin(X) * Y), rel=1e-14)
    assert tangent == pytest.approx(np.sum(np.cos(X) * tx * Y + np.sin(X) * ty), rel=1e-13)
    g = graph_of(capsys, *LOSS, "--transform", "jvp", "--argnums", "0", "--stage", stage)
    assert evaluate(g, X, Y, tx)[1] == pytest.approx(np.sum(np.cos(X) * tx * Y), rel=1e-13)


@pytest.mark.parametrize("stage", STAGES)
def test_jacobian_graph_is_output_dims_then_argument_dims(model, capsys, stage):
    g = graph_of(capsys, *LAYER, "--transform", "jacobian", "--argnums", "0,1", "--stage", stage)
    jw, jx = evaluate(g, W, X)
    s = 1 - np.tanh(X @ W) ** 2  # [4]
    np.testing.assert_allclose(jx, s[:, None] * W.T, rtol=1e-13)  # d y_i / d x_j
    want_w = np.einsum("i,j,ik->kji", s, X, np.eye(4))  # d y_k / d w_ji = s_k x_j [i == k]
    np.testing.assert_allclose(jw, want_w, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("stage", STAGES)
def test_batch_jacobian_graph_is_one_jacobian_per_row(model, capsys, stage):
    g = graph_of(capsys, *BATCH, "--transform", "batch_jacobian", "--argnums", "1",
                 "--stage", stage)
    (got,) = evaluate(g, W, XB)
    want = np.stack([(1 - np.tanh(row @ W) ** 2)[:, None] * W.T for row in XB])
    np.testing.assert_allclose(got, want, rtol=1e-13)


@pytest.mark.parametrize("stage", STAGES)
def test_hessian_graph_blocks_row_by_row(model, capsys, stage):
    g = graph_of(capsys, *LOSS, "--transform", "hessian", "--argnums", "0,1", "--stage", stage)
    hxx, hxy, hyx, hyy = evaluate(g, X, Y)
    np.testing.assert_allclose(hxx, np.diag(-np.sin(X) * Y), rtol=1e-14)
    np.testing.assert_allclose(hxy, np.diag(np.cos(X)), rtol=1e-14)
    np.testing.assert_allclose(hyx, np.diag(np.cos(X)), rtol=1e-14)
    np.testing.assert_array_equal(hyy, np.zeros((3, 3)))


@pytest.mark.parametrize("stage", STAGES)
def test_hessian_of_a_vector_output_is_one_block_per_output(model, capsys, stage):
    (got,) = evaluate(graph_of(capsys, *LAYER, "--transform", "hessian", "--argnums", "1",
                               "--stage", stage), W, X)
    t = np.tanh(X @ W)  # d2 tanh(x @ w[:, k]) = -2 t (1 - t^2) w[:, k] w[:, k]^T
    want = np.einsum("k,ik,jk->kij", -2 * t * (1 - t ** 2), W, W)
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("stage", STAGES)
def test_hessian_of_the_example_rosenbrock(model, capsys, stage):
    x = np.array([1.0, -0.5, 2.0, 0.3, -1.2])
    (got,) = evaluate(graph_of(capsys, f"{ROSENBROCK}:rosenbrock", "--arg", "f64[5]",
                               "--transform", "hessian", "--stage", stage), x)
    want = np.diag(np.r_[1200 * x[:-1] ** 2 - 400 * x[1:] + 2, 0.0] + np.r_[0.0, [200] * 4])
    want += np.diag(-400 * x[:-1], 1) + np.diag(-400 * x[:-1], -1)
    np.testing.assert_allclose(got, want, rtol=1e-13)


@pytest.mark.parametrize("stage", STAGES)
def test_vmap_graph_maps_axis_0_of_the_argnums(model, capsys, stage):
    g = graph_of(capsys, "model.py:loss", "--arg", "f64[5,3]", "--arg", "f64[5,3]",
                 "--transform", "vmap", "--stage", stage)
    np.testing.assert_allclose(evaluate(g, XB, YB)[0],
                               [np.sum(np.sin(x) * y) for x, y in zip(XB, YB, strict=True)],
                               rtol=1e-14)
    g = graph_of(capsys, "model.py:loss", "--arg", "f64[None,3]", "--arg", "f64[3]",
                 "--transform", "vmap", "--argnums", "0", "--stage", stage)
    np.testing.assert_allclose(evaluate(g, XB[:2], Y)[0],
                               [np.sum(np.sin(x) * Y) for x in XB[:2]], rtol=1e-14)


# -- every stage and format ------------------------------------------------------------------


CASES = {
    "jvp": LOSS,
    "jacobian": [*LAYER, "--argnums", "0,1"],
    "batch_jacobian": [*BATCH, "--argnums", "1"],
    "hessian": [*LOSS, "--argnums", "0,1"],
    "vmap": ["model.py:loss", "--arg", "f64[5,3]", "--arg", "f64[3]", "--argnums", "0"],
}


@pytest.mark.parametrize("transform", CASES)
@pytest.mark.parametrize("stage", STAGES)
def test_text_json_and_dot_show_the_same_graph(model, capsys, transform, stage):
    argv = [*CASES[transform], "--transform", transform, "--stage", stage]
    text = dumped(capsys, *argv)
    name = re.match(r"func @(\w+)\(", text).group(1)
    assert name == f"{transform}_{CASES[transform][0].split(':')[1]}"
    assert str(tg.FuncGraph.from_json(dumped(capsys, *argv, "--format", "json"))) + "\n" == text
    assert str(tg.FuncGraph.parse(text)) + "\n" == text
    dot = dumped(capsys, *argv, "--format", "dot")
    assert dot.startswith(f'digraph "{name}" {{') and dot.endswith("}\n")


@pytest.mark.parametrize("transform", CASES)
def test_stage_compiled_prints_the_generated_source(model, capsys, transform):
    argv = [*CASES[transform], "--transform", transform]
    header = dumped(capsys, *argv, "--stage", "optimized").splitlines()[0].removesuffix(" {")
    source = dumped(capsys, *argv, "--stage", "compiled")
    assert source.splitlines()[0] == f"# tracegrad numba kernel for: {header}"
    assert "\ndef kernel(" in source
    compile(source, "<compiled>", "exec")
    assert error(capsys, *argv, "--stage", "compiled", "--format", "json") == (
        "--stage compiled prints Python source: use --format text")


@pytest.mark.parametrize("transform", CASES)
def test_locations_tell_the_models_ops_from_the_transforms(model, capsys, transform):
    argv = CASES[transform] if transform != "hessian" else [  # one that keeps forward ops
        f"{ROSENBROCK}:rosenbrock", "--arg", "f64[5]"]
    text = dumped(capsys, *argv, "--transform", transform, "--locations")
    where = {line.rpartition("    # ")[2] for line in text.splitlines()[1:-2]}  # the ops
    label = f"<{transform}>"
    theirs = {w for w in where if re.fullmatch(r"models?\.py:\d+", w)}
    assert theirs and where - theirs <= {label}, where
    # vmap re-emits each of the model's ops with its line; the others add their own ops
    assert (label in where) == (transform != "vmap"), where
    g = graph_of(capsys, *argv, "--transform", transform)
    files = {os.path.basename(op.source.rpartition(":")[0]) or op.source for op in g.operations}
    assert files - {"model.py", "models.py"} <= {label}, files


# -- what a transform cannot take ------------------------------------------------------------


@pytest.mark.parametrize(("argv", "message"), [
    ([*LOSS, "--transform", "batch_jacobian"],
     ("--transform batch_jacobian needs x of rank >= 2, got --arg f64[3]: give it the batch dim "
      "first, [b, x...]")),
    (["model.py:loss", "--arg", "f64[5,3]", "--arg", "f64[5,3]", "--transform",
      "batch_jacobian"],
     ("tracing batch_jacobian of loss failed: ShapeError: Shape must be at least rank 2 but is "
      "rank 0: the target shape ()")),
    ([*BATCH, "--transform", "batch_jacobian"],
     ("tracing batch_jacobian of layer failed: ShapeError: Need first dimension of target "
      "shape ((5, 4)) and source shape ((3, 4)) to match.")),
    ([*BATCH, "--transform", "batch_jacobian", "--argnums", "0,1"],
     "--transform batch_jacobian takes one --argnums"),
    (["model.py:loss", "--arg", "f64[5,3]", "--arg", "f64[]", "--transform", "vmap"],
     ("--transform vmap needs y of rank >= 1, got --arg f64[]: give it the batch dim first "
      "(vmap maps axis 0), or leave it out of --argnums")),
    (["model.py:loss", "--arg", "f64[5,3]", "--arg", "f64[4,3]", "--transform", "vmap"],
     ("tracing vmap of loss failed: ShapeError: vmap: the mapped axes have different sizes "
      "[5, 4]")),
    (["model.py:layer", "--arg", "f64[3,4]", "--arg", "f64[None,3]", "--transform",
      "jacobian", "--argnums", "1"],
     ("tracing jacobian of layer failed: ShapeError: jacobian: the output has unknown dims "
      "[?,4]")),
    (["model.py:loss", "--arg", "i64[3]", "--arg", "f64[3]", "--transform", "jvp"],
     "tracing jvp of loss failed: DTypeError: jvp: argument 0 has a leaf of dtype int64"),
    (["model.py:loss", "--arg", "i64[3]", "--arg", "f64[3]", "--transform", "hessian"],
     ("tracing hessian of loss failed: DTypeError: hessian: argument 0 has a leaf of dtype "
      "int64")),
    ([*LAYER, "--transform", "jacobian", "--argnums", "2"],
     "--argnums 2 is out of range for 2 traced argument(s)"),
])
def test_what_the_transform_cannot_take_is_one_line(model, capsys, argv, message):
    msg = error(capsys, *argv)
    assert message in msg
    # the transform was applied by the command line, not at a line of this file
    assert "(at " not in msg and "test_cli_transforms" not in msg


def test_an_error_inside_the_function_keeps_its_line(model, capsys):
    msg = error(capsys, "model.py:loss", "--arg", "f64[3]", "--arg", "f64[4]", "--transform",
                "hessian")
    line = MODEL.splitlines().index("    return tnp.sum(tnp.sin(x) * y)") + 1
    assert msg.startswith("tracing hessian of loss failed: ShapeError: multiply: shapes [3] "
                          "and [4] cannot be broadcast together (at ")
    assert msg.endswith(f"model.py:{line})")


def test_console_script_labels_the_transforms_ops_and_errors(model):
    script = pathlib.Path(sys.executable).with_name("tracegrad")
    env = dict(os.environ)
    env["PYTHONPATH"] = (str(pathlib.Path(tg.__file__).resolve().parents[1]) + os.pathsep
                         + env.get("PYTHONPATH", ""))
    ok = subprocess.run([str(script), "dump", *LAYER, "--transform", "jacobian", "--locations"],
                        check=False, capture_output=True, text=True, timeout=300, env=env)
    assert ok.returncode == 0 and "# <jacobian>\n" in ok.stdout and "# tracegrad:" not in ok.stdout
    bad = subprocess.run([str(script), "dump", "model.py:loss", "--arg", "i64[3]", "--arg",
                          "f64[3]", "--transform", "hessian"],
                         check=False, capture_output=True, text=True, timeout=300, env=env)
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.startswith("tracegrad dump: error: tracing hessian of loss failed: ")
    assert "(at " not in bad.stderr
