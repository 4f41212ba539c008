"""The examples of docs/autodiff.md and of the autodiff docstrings run and hold."""

import doctest
import pathlib
import re

import numpy as np

import tracegrad as tg
import tracegrad.autodiff
import tracegrad.numpy as tnp
import tracegrad.transforms.autodiff
from tracegrad.transforms.backprop import GRADIENT_REGISTRY

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "autodiff.md"


def test_autodiff_doc_examples_run():
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.DOTALL)
    assert len(blocks) >= 3
    namespace: dict = {}
    GRADIENT_REGISTRY.pop("straight_through", None)  # the example registers it
    try:
        for block in blocks:
            exec(compile(block, str(DOC), "exec"), namespace)  # noqa: S102
    finally:
        GRADIENT_REGISTRY.pop("straight_through", None)


def test_docstring_examples():
    GRADIENT_REGISTRY.pop("clipped_sin", None)
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    try:
        for module in (tracegrad.autodiff, tracegrad.transforms.autodiff):
            for test in finder.find(module, globs={"tg": tg, "tnp": tnp, "np": np}):
                if not test.name.endswith("gradient_override_map"):  # a fragment
                    runner.run(test)
    finally:
        GRADIENT_REGISTRY.pop("clipped_sin", None)
    assert runner.failures == 0 and runner.tries >= 7
