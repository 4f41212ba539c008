"""Every Python block of docs/tape.md runs as written (in order, one namespace)."""

import pathlib
import re

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "tape.md"


def test_docs_tape_examples_run():
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.DOTALL)
    assert len(blocks) >= 10
    namespace = {}
    for i, block in enumerate(blocks):
        code = compile(block, f"{DOC}:block{i}", "exec")
        exec(code, namespace)  # noqa: S102  (the documentation's own examples)
