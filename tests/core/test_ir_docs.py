"""docs/ir.md documents every registered primitive, and its IR examples parse and print back."""

import importlib
import pathlib
import pkgutil
import re

import pytest
from ir_corpus import call_primitive

import tracegrad
import tracegrad.ops
from tracegrad.core.ir import FuncGraph
from tracegrad.core.op import REGISTRY

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "ir.md"


def _all_primitives() -> set[str]:
    for module in pkgutil.walk_packages(tracegrad.ops.__path__, "tracegrad.ops."):
        importlib.import_module(module.name)
    return set(REGISTRY)


def _documented() -> list[str]:
    """The names in backticks in the headings of the "Primitives" section."""
    text = DOC.read_text()
    section = text[text.index("\n## Primitives\n"):]
    names = []
    for line in section.splitlines():
        if line.startswith("### "):
            names += re.findall(r"`([^`]+)`", line)
    return names


def test_every_registered_primitive_is_documented():
    missing = sorted(_all_primitives() - set(_documented()))
    assert not missing, (
        f"primitives missing from docs/ir.md: {missing}; add a '### `name`' heading under "
        "'## Primitives' with its operands, attributes and result type"
    )


def test_every_documented_primitive_exists_once():
    names = _documented()
    assert len(names) == len(set(names)), "a primitive is documented twice"
    assert not set(names) - _all_primitives(), "docs/ir.md documents unknown primitives"


def _examples() -> list[str]:
    return re.findall(r"```ir\n(.*?)```", DOC.read_text(), re.DOTALL)


def test_the_doc_has_ir_examples():
    assert len(_examples()) >= 2


@pytest.mark.parametrize("example", _examples(), ids=lambda e: e.split("(")[0])
def test_ir_examples_parse_and_print_back(example):
    with call_primitive():
        assert str(FuncGraph.parse(example)) + "\n" == example
