"""`tracegrad dump`: graphs of functions and their transforms; one-line errors with status 2."""

import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import tracegrad as tg
from tracegrad.cli import TRANSFORMS, main
from tracegrad.core.ir import FuncGraph
from tracegrad.transforms.evaluate import evaluate

MODEL = '''
import numpy as np
import tracegrad.numpy as tnp


def loss(x, y):
    return tnp.sum(tnp.sin(x) * y)


def scaled(x, factor, mode="sum"):
    if mode == "sum":
        return tnp.sum(x) * factor
    return x * factor


def pair(x):
    return {"a": tnp.sin(x), "b": (tnp.cos(x),)}


def branchy(x):
    if tnp.sum(x):
        return x
    return -x


def raises(x):
    raise ValueError("the model is broken\\non two lines")


def needs_kw(x, *, scale):
    return x * scale


class Net:
    @staticmethod
    def forward(x):
        return tnp.exp(x)


def first(x):
    return x


def stacked(x, *xs, scale=1.0):
    return tnp.sum(tnp.stack((x,) + xs)) * scale


NOT_A_FUNCTION = 3
'''

LOSS_TEXT = """\
func @loss(%x: f64[3], %y: f64[3]) -> (f64[]) {
  %0 = sin %x : f64[3]
  %1 = mul %0, %y : f64[3]
  %2 = reduce_sum %1 {axes=(0,), keepdims=False} : f64[]
  return %2
}
"""

X = np.array([0.3, -1.2, 2.0])
Y = np.array([1.5, 0.5, -2.0])


@pytest.fixture
def model(tmp_path, monkeypatch):
    path = tmp_path / "model.py"
    path.write_text(MODEL)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the CLI adds the model's folder
    yield "model.py"
    sys.modules.pop("model", None)


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def error(capsys, *argv) -> str:
    """Run argv expecting bad input: status 2, exactly one stderr line, nothing on stdout."""
    code, out, err = run(capsys, *argv)
    assert code == 2, (out, err)
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("tracegrad dump: error: ")
    return lines[0][len("tracegrad dump: error: "):]


def graph_of(capsys, *argv) -> FuncGraph:
    """The graph printed by a successful dump, loaded back from JSON."""
    code, out, err = run(capsys, *argv, "--format", "json")
    assert code == 0, err
    return FuncGraph.from_json(out)


# -- traced graphs ---------------------------------------------------------------------------


def test_dump_prints_the_text_form(model, capsys):
    code, out, err = run(capsys, "dump", "model.py:loss", "--arg", "f64[3]", "--arg", "f64[3]")
    assert (code, out, err) == (0, LOSS_TEXT, "")


def test_dump_with_locations_names_the_model_lines(model, capsys):
    code, out, _ = run(capsys, "dump", "model.py:loss", "--arg", "f64[3]", "--arg", "f64[3]",
                       "--locations")
    line = MODEL.splitlines().index("    return tnp.sum(tnp.sin(x) * y)") + 1
    assert code == 0 and out.count(f"# model.py:{line}\n") == 3


def test_dump_module_function(model, capsys, monkeypatch):
    # the `tracegrad` console script, unlike `python -m`, starts without the folder on sys.path
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", os.getcwd())])
    code, out, _ = run(capsys, "dump", "model:loss", "--arg", "f64[3]", "--arg", "f64[3]")
    assert code == 0 and out == LOSS_TEXT


def test_dump_attribute_path_and_numpy_function(model, capsys):
    code, out, _ = run(capsys, "dump", "model.py:Net.forward", "--arg", "f32[2]")
    assert code == 0 and "  %0 = exp %x : f32[2]\n" in out
    code, out, _ = run(capsys, "dump", "numpy:cos", "--arg", "f64[None,2]")
    assert code == 0 and out.startswith("func @cos(%x: f64[?,2]) -> (f64[?,2]) {")


@pytest.mark.parametrize("spec,type_", [
    ("f64[3,4]", "f64[3,4]"), ("f32[None,8]", "f32[?,8]"), ("i64[]", "i64[]"),
    ("bool[5]", "bool[5]"), ("i32[?, 2]", "i32[?,2]"), ("float32[1]", "f32[1]"),
])
def test_arg_specs(model, capsys, spec, type_):
    code, out, err = run(capsys, "dump", "model.py:first", "--arg", spec)
    assert code == 0, err
    assert out == f"func @first(%x: {type_}) -> ({type_}) {{\n  return %x\n}}\n"


def test_static_arguments_are_baked_in(model, capsys):
    g = graph_of(capsys, "dump", "model.py:scaled", "--arg", "f64[None,2]",
                 "--static", "factor=2.5", "--static", "mode=each")
    assert [t.name for t in g.inputs] == ["x"]
    x = np.arange(6.0).reshape(3, 2)
    np.testing.assert_array_equal(evaluate(g, x)[0], x * 2.5)
    g = graph_of(capsys, "dump", "model.py:scaled", "--arg", "f64[3]", "--arg", "f64[]")
    assert evaluate(g, X, np.array(3.0))[0] == pytest.approx(X.sum() * 3.0)
    g = graph_of(capsys, "dump", "model.py:needs_kw", "--arg", "f64[3]", "--static",
                 "scale=(2)")
    np.testing.assert_array_equal(evaluate(g, X)[0], X * 2)


def test_var_positional_parameters_take_the_extra_args(model, capsys):
    g = graph_of(capsys, "dump", "model.py:stacked", "--arg", "f64[2]", "--arg", "f64[2]",
                 "--arg", "f64[2]", "--static", "scale=3")
    assert [t.name for t in g.inputs] == ["x", "xs_0", "xs_1"]
    a, b, c = np.array([1.0, 2.0]), np.array([3.0, 4.0]), np.array([5.0, -6.0])
    assert evaluate(g, a, b, c)[0] == 3 * (a.sum() + b.sum() + c.sum())
    g = graph_of(capsys, "dump", "model.py:stacked", "--arg", "f64[2]")
    assert evaluate(g, a)[0] == a.sum()


def test_output_formats(model, capsys, tmp_path):
    argv = ["dump", "model.py:loss", "--arg", "f64[3]", "--arg", "f64[3]"]
    code, out, _ = run(capsys, *argv, "--format", "json")
    assert code == 0 and json.loads(out)["format"] == "tracegrad.graph"
    assert str(FuncGraph.from_json(out)) + "\n" == LOSS_TEXT
    code, out, _ = run(capsys, *argv, "--format", "dot")
    assert code == 0 and out.startswith('digraph "loss" {') and out.endswith("}\n")
    target = tmp_path / "out" / "g.txt"
    target.parent.mkdir()
    code, out, _ = run(capsys, *argv, "-o", str(target))
    assert (code, out) == (0, "") and target.read_text() == LOSS_TEXT


def test_traced_graph_computes_the_function(model, capsys):
    g = graph_of(capsys, "dump", "model.py:loss", "--arg", "f64[3]", "--arg", "f64[3]")
    assert evaluate(g, X, Y)[0] == pytest.approx(np.sum(np.sin(X) * Y), rel=1e-15)


# -- transforms ------------------------------------------------------------------------------


def _check_transform(capsys, name, argv, check):
    """`check(graph)` when tg has the transform; otherwise the one-line "not available"."""
    argv = ["dump", *argv, "--transform", name]
    if hasattr(tg, name):
        check(graph_of(capsys, *argv))
    else:
        msg = error(capsys, *argv)
        assert msg == (f"--transform {name} is not available in this version of tracegrad "
                       f"(tg.{name} does not exist)")


LOSS = ["model.py:loss", "--arg", "f64[3]", "--arg", "f64[3]"]


def test_transform_grad(model, capsys):
    def check(g):
        np.testing.assert_allclose(evaluate(g, X, Y)[0], np.cos(X) * Y, rtol=1e-14)

    _check_transform(capsys, "grad", LOSS, check)

    def check_both(g):
        gx, gy = evaluate(g, X, Y)
        np.testing.assert_allclose(gx, np.cos(X) * Y, rtol=1e-14)
        np.testing.assert_allclose(gy, np.sin(X), rtol=1e-14)

    _check_transform(capsys, "grad", [*LOSS, "--argnums", "0,1"], check_both)


def test_transform_value_and_grad(model, capsys):
    def check(g):
        value, gy = evaluate(g, X, Y)
        assert value == pytest.approx(np.sum(np.sin(X) * Y), rel=1e-14)
        np.testing.assert_allclose(gy, np.sin(X), rtol=1e-14)

    _check_transform(capsys, "value_and_grad", [*LOSS, "--argnums", "1"], check)


def test_transform_vjp(model, capsys):
    def check(g):
        assert [t.name for t in g.inputs] == ["x", "y", "cotangent"]
        gx, gy = evaluate(g, X, Y, np.array(2.0))
        np.testing.assert_allclose(gx, 2 * np.cos(X) * Y, rtol=1e-14)
        np.testing.assert_allclose(gy, 2 * np.sin(X), rtol=1e-14)

    _check_transform(capsys, "vjp", LOSS, check)

    def check_structured(g):
        ct_a, ct_b = np.array([1.0, 2.0, 3.0]), np.array([-1.0, 0.5, 2.0])
        (gx,) = evaluate(g, X, ct_a, ct_b)
        np.testing.assert_allclose(gx, ct_a * np.cos(X) - ct_b * np.sin(X), rtol=1e-14)

    _check_transform(capsys, "vjp", ["model.py:pair", "--arg", "f64[3]"], check_structured)


@pytest.mark.parametrize("name", TRANSFORMS)
def test_missing_transform_is_one_clear_line(model, capsys, monkeypatch, name):
    monkeypatch.delattr(tg, name, raising=False)
    assert error(capsys, "dump", *LOSS, "--transform", name) == (
        f"--transform {name} is not available in this version of tracegrad "
        f"(tg.{name} does not exist)")


# -- stages ----------------------------------------------------------------------------------


def test_stage_optimized(model, capsys):
    argv = ["dump", *LOSS, "--stage", "optimized"]
    if hasattr(tg, "optimize"):
        g = graph_of(capsys, *argv)
        assert evaluate(g, X, Y)[0] == pytest.approx(np.sum(np.sin(X) * Y), rel=1e-14)
    else:
        assert "--stage optimized is not available" in error(capsys, *argv)


def test_stage_compiled(model, capsys):
    argv = ["dump", *LOSS, "--stage", "compiled"]
    if hasattr(tg, "compiled_source"):
        code, out, err = run(capsys, *argv)
        assert code == 0 and "def " in out, err
        compile(out, "<compiled>", "exec")
    else:
        assert "--stage compiled is not available" in error(capsys, *argv)
    assert error(capsys, *argv, "--format", "json") == (
        "--stage compiled prints Python source: use --format text")


def test_missing_stage_is_one_clear_line(model, capsys, monkeypatch):
    monkeypatch.delattr(tg, "optimize", raising=False)
    assert error(capsys, "dump", *LOSS, "--stage", "optimized") == (
        "--stage optimized is not available in this version of tracegrad "
        "(tg.optimize does not exist)")


# -- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize("argv,message", [
    (["model.py:loss", "--arg", "f64[3]"],
     "loss() takes 2 traced argument(s) (x, y), got 1 --arg"),
    (["model.py:loss", "--arg", "f64[3]"] * 1 + ["--arg", "f64[3]", "--arg", "f64[3]"],
     "loss() takes 2 traced argument(s) (x, y), got 3 --arg"),
    (["model.py:scaled", "--arg", "f64[3]", "--arg", "f64[]", "--arg", "f64[]", "--arg",
      "f64[]"], "scaled() takes 2 to 3 traced argument(s) (x, factor, mode), got 4 --arg"),
    (["model.py:nope", "--arg", "f64[3]"], "model.py has no attribute 'nope'"),
    (["model.py:NOT_A_FUNCTION"], "model.py:NOT_A_FUNCTION is not a function (an int)"),
    (["missing.py:f", "--arg", "f64[3]"], "file not found: missing.py"),
    (["no_such_module_xyz:f"], "no module named 'no_such_module_xyz'"),
    (["loss"], "bad target 'loss': expected FILE.py:FUNC or MODULE:FUNC"),
    (["model.py:loss", "--arg", "f64[3,x]", "--arg", "f64[3]"],
     "bad --arg 'f64[3,x]': dim 'x' is not a size, None or ?"),
    (["model.py:loss", "--arg", "f64", "--arg", "f64[3]"],
     "bad --arg 'f64': expected DTYPE[DIMS] such as f64[3,4], f32[None,8], i64[] or bool[5]"),
    (["model.py:loss", "--arg", "f128[3]", "--arg", "f64[3]"],
     "bad --arg 'f128[3]': TensorSpec: dtype 'f128' is not supported"),
    (["model.py:scaled", "--arg", "f64[3]", "--static", "factor"],
     "bad --static 'factor': expected NAME=VALUE"),
    (["model.py:scaled", "--arg", "f64[3]", "--static", "factr=2"],
     "--static factr: scaled() has no parameter 'factr'"),
    (["model.py:needs_kw", "--arg", "f64[3]"],
     "needs_kw() needs keyword argument(s) scale: pass them with --static NAME=VALUE"),
    ([*LOSS, "--transform", "grad", "--argnums", "a"],
     "bad --argnums 'a': expected integers such as 0 or 0,2"),
    ([*LOSS, "--transform", "grad", "--argnums", "2"],
     "--argnums 2 is out of range for 2 traced argument(s)"),
    ([*LOSS, "--argnums", "0"], "--argnums applies to a --transform"),
    ([*LOSS, "--transform", "hess"], "argument --transform: invalid choice: 'hess'"),
    ([*LOSS, "--format", "dot", "--locations"], "--locations applies to --format text"),
    ([*LOSS, "-o", "/nonexistent-dir/x.txt"], "cannot write /nonexistent-dir/x.txt"),
    (["model.py:loss", "--arg", "f64[3]", "--arg", "f64[4]"],
     "tracing loss failed: ShapeError:"),
    (["model.py:raises", "--arg", "f64[3]"],
     "tracing raises failed: ValueError: the model is broken on two lines"),
    (["model.py:branchy", "--arg", "f64[3]"], "tracing branchy failed: TracerBoolError:"),
])
def test_bad_input_is_one_line_with_status_2(model, capsys, argv, message):
    assert message in error(capsys, "dump", *argv)


def test_tracer_bool_error_names_the_users_line(model, capsys):
    msg = error(capsys, "dump", "model.py:branchy", "--arg", "f64[3]")
    line = MODEL.splitlines().index("    if tnp.sum(x):") + 1
    assert f"model.py:{line}" in msg and "tg.cond" in msg


def test_custom_gradient_graph_round_trips_through_json(model, capsys, tmp_path):
    (tmp_path / "custom.py").write_text(
        "import tracegrad as tg\n"
        "import tracegrad.numpy as tnp\n\n"
        "@tg.custom_gradient\n"
        "def clipped(x):\n"
        "    return tnp.sin(x), lambda g: g * 0.5\n"
    )
    code, out, _ = run(capsys, "dump", "custom.py:clipped", "--arg", "f64[3]")
    assert code == 0 and "custom_gradient" in out
    code, text, _ = run(capsys, "dump", "custom.py:clipped", "--arg", "f64[3]", "--format", "json")
    assert code == 0
    graph = tg.FuncGraph.from_json(text)
    # written out, the gradient function (traced only when asked for) is in the op
    assert "grad_graph=func @clipped_grad" in str(graph) and "grad_graph" not in out
    assert str(tg.FuncGraph.from_json(graph.to_json())) == str(graph)


def test_file_that_fails_to_import(tmp_path, capsys):
    bad = tmp_path / "broken.py"
    bad.write_text("import numpy\n1 / 0\n")
    assert error(capsys, "dump", f"{bad}:f") == (
        f"importing {bad} failed: ZeroDivisionError: division by zero")


def test_traceback_option_shows_the_cause(model, capsys):
    code, out, err = run(capsys, "dump", "model.py:raises", "--arg", "f64[3]", "--traceback")
    assert code == 2 and "Traceback" in err and 'raise ValueError("the model is broken' in err
    assert err.splitlines()[-1].startswith("tracegrad dump: error: tracing raises failed")


def test_no_command_prints_help_and_fails(capsys):
    code, out, err = run(capsys)
    assert code == 2 and "dump" in err and out == ""


# -- as a program ----------------------------------------------------------------------------


def _program(cmd, cwd):
    env = dict(os.environ)
    root = str(pathlib.Path(tg.__file__).resolve().parents[1])
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300, env=env)


def test_python_dash_m_tracegrad(model):
    run_ = _program([sys.executable, "-m", "tracegrad", *["dump", *LOSS]], os.getcwd())
    assert (run_.returncode, run_.stdout, run_.stderr) == (0, LOSS_TEXT, "")


def test_console_script(model):
    script = pathlib.Path(sys.executable).with_name("tracegrad")
    assert script.exists(), f"the console script is not installed: pip install -e . ({script})"
    ok = _program([str(script), "dump", *LOSS], os.getcwd())
    assert (ok.returncode, ok.stdout, ok.stderr) == (0, LOSS_TEXT, "")
    bad = _program([str(script), "dump", "model.py:loss", "--arg", "f64[3]"], os.getcwd())
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr == ("tracegrad dump: error: loss() takes 2 traced argument(s) (x, y), "
                          "got 1 --arg\n")
