"""A module over about 600 lines says at its top why it is one module (the house rule of
docs/architecture.md): a long file without a reason is one to split."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LONG_LINES = 600


def test_every_long_module_says_why_it_is_one():
    unexplained = []
    for path in sorted((REPO / "autoscaler").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if text.count("\n") <= LONG_LINES:
            continue
        docstring = ast.get_docstring(ast.parse(text)) or ""
        if "one module:" not in docstring:
            unexplained.append(f"{path.relative_to(REPO)} ({text.count(chr(10)):,} lines)")
    assert not unexplained, f"over {LONG_LINES} lines with no 'one module: <why>' in the module docstring: {unexplained}"
