"""Every Python block of docs/scipy.md runs as written (in order, one namespace)."""

import pathlib
import re

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "scipy.md"


def test_docs_scipy_examples_run():
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.DOTALL)
    assert blocks
    namespace = {}
    for i, block in enumerate(blocks):
        exec(compile(block, f"{DOC}:block{i}", "exec"), namespace)  # noqa: S102
