"""The examples of docs/autodiff.md run and their assertions hold."""

import pathlib
import re

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "autodiff.md"


def test_autodiff_doc_examples_run():
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert len(blocks) >= 3
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), namespace)  # noqa: S102
