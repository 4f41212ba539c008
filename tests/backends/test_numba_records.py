"""Generated code is built as records and rendered once (docs/numba.md, "Code as records"):
the code generator's modules never edit or parse text they emitted, and rendered kernels
have every slot filled."""

from __future__ import annotations

import ast
import pathlib

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.numpy as tnp

nb = pytest.importorskip("tracegrad.backends.numba")
from tracegrad.backends.numba import fusion, helpers, records

PACKAGE = pathlib.Path(records.__file__).parent
# the modules that build and render the generated code (helpers.py instantiates the helper
# module's own templates with `str.replace`, but finds no names in text: no `re`)
CODEGEN_MODULES = ("codegen.py", "records.py", "remap.py")
# calls that edit or search text
TEXT_EDITS = {"replace", "index", "sub", "findall", "finditer", "match", "search", "lstrip",
              "strip"}


def _text_edits(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""]
            found += [f"line {node.lineno}: imports re" for n in names if n == "re"]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in TEXT_EDITS and (node.args or node.func.attr != "index"):
            found.append(f"line {node.lineno}: .{node.func.attr}(")
    return found


@pytest.mark.parametrize("module", CODEGEN_MODULES)
def test_the_code_generator_does_not_edit_or_search_text(module):
    path = PACKAGE / module
    assert _text_edits(ast.parse(path.read_text(), str(path))) == []


def test_the_helper_module_finds_no_names_in_text():
    path = PACKAGE / "helpers.py"
    assert [e for e in _text_edits(ast.parse(path.read_text())) if "imports" in e] == []


def test_the_text_check_finds_edits():
    src = "import re\nlines[i] = line.replace('_fast_v(', '_v(')\nk = lines.index(x)\n"
    assert len(_text_edits(ast.parse(src))) == 3


def test_a_statement_knows_its_names_and_renders_renamed():
    stmt = records.Stmt("{v3} = _exp_v({a0}[{i1}]) + {v2}", ("v3",))
    assert stmt.names == ("v3", "a0", "i1", "v2") and stmt.defines == {"v3"}
    assert stmt.text() == "v3 = _exp_v(a0[i1]) + v2"
    assert stmt.text(records.Names(v3="v3_f", i1="i1_f")) == "v3_f = _exp_v(a0[i1_f]) + v2"
    comment = records.Comment("# %0 = exp %a {x=1}")
    assert comment.text(records.Names(a="b")) == "# %0 = exp %a {x=1}" and comment.names == ()


def test_outlining_numbers_names_from_the_records():
    lines = [records.Line("", records.Stmt("{t1} = np.empty(({n0},))", ("t1",), alloc=True)),
             records.Line("", records.Comment("# %1 = exp %a")),
             records.Line("", records.Stmt("for {i2} in range({n0}):", ("i2",))),
             records.Line("    ", records.Stmt("{v3} = _exp_v({a0}[{i2}])", ("v3",))),
             records.Line("    ", records.Stmt("{t1}[{i2}] = {v3}"))]
    allocs, comments, body, params = records.outline(lines)
    assert [a.text() for a in allocs] == ["t1 = np.empty((n0,))"]
    assert [c.text() for c in comments] == ["# %1 = exp %a"]
    assert body == ["for l0 in range(p0):", "    l1 = _exp_v(p1[l0])", "    p2[l0] = l1"]
    assert params == ["n0", "a0", "t1"]


def test_the_helpers_know_their_vector_math_functions():
    tree = ast.parse(helpers.SOURCE)
    inlined = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name.endswith("_v") and any(
                kw.arg == "forceinline" for d in node.decorator_list
                if isinstance(d, ast.Call) for kw in d.keywords):
            inlined.append((node.name, ", ".join(a.arg for a in node.args.args)))
    assert list(helpers._INLINED) == inlined
    assert set(helpers.CALLED.values()) <= {n.name for n in tree.body
                                           if isinstance(n, ast.FunctionDef)}
    assert all(fast in dict(inlined) and full in dict(inlined)
               for full, fast in helpers.FAST.items())


def _chain(n):
    def fn(a):
        y = a
        for k in range(n):
            y = (tnp.sin(y) + tnp.cos(y) * tnp.tan(y)) * (1.0 + 0.01 * (k % 3))
        return tnp.sum(y * y), y
    return fn


@pytest.mark.parametrize("n", [1, fusion.OUTLINE_OPS // 4])
@pytest.mark.parametrize("shape", [(40,), (5, 8)])
def test_rendered_kernels_are_python_with_every_slot_filled(n, shape):
    x = np.linspace(-2.0, 2.0, int(np.prod(shape))).reshape(shape)
    graph = tg.optimize(tg.trace(_chain(n))(x))
    source = nb.generate_source(graph)
    ast.parse(source)
    code = [line.split("#")[0] for line in source.splitlines()]
    assert not any("{" in line or "}" in line for line in code), source
    assert "_sin_cos_fast_v(" in source and "_trig_huge(" in source
    # each op's IR line is a comment above its code, once per nest
    assert source.count("= sin %") >= n
    assert ("def nest" in source) == (n > 1)
