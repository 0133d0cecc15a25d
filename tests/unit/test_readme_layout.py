"""docs/architecture.md's Layout section names exactly the modules of the tree, and every path the
README and docs/ quote exists: when a module is split, moved or added, these say which lines to change."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README_TEXT = (REPO / "README.md").read_text(encoding="utf-8")
LAYOUT_TEXT = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
DOCS = {path.relative_to(REPO): path.read_text(encoding="utf-8") for path in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]}

LISTED_FOLDERS = ("autoscaler", "energy", "cloudwatch", "benchmarks")
FILE_NAME = re.compile(r"[\w./-]+\.(?:py|sh|toml|json|csv|service)\b")


def layout_names(text: str) -> set[str]:
    """The files and folders the README's Layout code block names, as paths from the repository root.

    A line at the left margin names a folder (``energy/``) or a file in it; a line indented by a
    few spaces names a file or a subfolder (``policies/``) of the folder above; a line indented
    further continues the entry above. Every ``name.ext`` on a line is taken relative to its entry."""
    section = re.split(r"^## Layout\n", text, maxsplit=1, flags=re.MULTILINE)[1].split("\n## ", 1)[0]
    block = section.split("```", 2)[1]
    names: set[str] = set()
    folder = base = ""
    for line in block.splitlines():
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" "))
        first, _, rest = line.strip().partition(" ")
        if indent == 0:
            folder = base = first if first.endswith("/") else first.rsplit("/", 1)[0] + "/"
            names.add(first)
            line = rest
        elif indent <= 8:
            base = folder + first if first.endswith("/") else folder
        if base:
            names.add(base)
        names.update(base + name for name in FILE_NAME.findall(line))
    return names


def tree_names() -> set[str]:
    """The modules a reader must find in the Layout: every module of the packages and benchmarks,
    the deploy files, the test folders and the tests' shared modules (not each test file)."""
    names: set[str] = set()
    for top in LISTED_FOLDERS:
        for path in (REPO / top).rglob("*.py"):
            if path.name not in ("__init__.py", "__main__.py") and "__pycache__" not in path.parts:
                names.add(path.relative_to(REPO).as_posix())
                names.add(path.parent.relative_to(REPO).as_posix() + "/")
    names.update(f"deploy/{path.name}" for path in (REPO / "deploy").iterdir() if path.is_file())
    names.add("deploy/")
    names.add("autoscaler/data/")
    for path in (REPO / "tests").rglob("*.py"):
        if "__pycache__" in path.parts:
            continue
        names.add(path.parent.relative_to(REPO).as_posix() + "/")
        if not path.name.startswith("test_") and path.name not in ("conftest.py", "__init__.py"):
            names.add(path.relative_to(REPO).as_posix())
    return names


def test_the_layout_section_names_every_module_of_the_tree_and_nothing_else():
    named, tree = layout_names(LAYOUT_TEXT), tree_names()
    assert not tree - named, f"in the tree but not in docs/architecture.md's Layout section: {sorted(tree - named)}"
    assert not named - tree, f"named in docs/architecture.md's Layout section but not in the tree: {sorted(named - tree)}"


def test_the_layout_reader_resolves_entries_subfolders_and_continuations():
    text = (
        "## Layout\n\n```\n"
        "pkg/core/          the core\n"
        "  model.py         types\n"
        "  policies/        a.py, b.py,\n"
        "                   c.py\n"
        "pkg/app/cli.py     the command line; compose.py the root\n"
        "tools/             x.sh (uses y.py)\n"
        "```\n\n## Next\n"
    )
    assert layout_names(text) == {
        "pkg/core/", "pkg/core/model.py", "pkg/core/policies/", "pkg/core/policies/a.py", "pkg/core/policies/b.py",
        "pkg/core/policies/c.py", "pkg/app/", "pkg/app/cli.py", "pkg/app/compose.py", "tools/", "tools/x.sh", "tools/y.py",
    }  # fmt: skip


def test_every_path_the_readme_and_the_docs_quote_exists():
    for name, text in DOCS.items():
        quoted = set(re.findall(r"(?<![/\w.])((?:autoscaler|energy|cloudwatch|deploy|benchmarks|tests|docs)/[\w./-]*\w)", text))
        missing = sorted(path for path in quoted if not (REPO / path).exists())
        assert not missing, f"{name} names paths that are not in the tree: {missing}"


def test_every_link_between_the_pages_reaches_a_page_and_a_heading():
    # [text](docs/page.md#anchor), [text](page.md), [text](#anchor): the page exists and has the heading.
    def slug(title: str) -> str:
        return re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")

    anchors = {name: {slug(h) for h in re.findall(r"^#{1,6} (.+)$", text, flags=re.MULTILINE)} for name, text in DOCS.items()}
    broken = []
    for name, text in DOCS.items():
        for target, anchor in re.findall(r"\]\((?!https?:)([^)#\s]*)(?:#([^)\s]+))?\)", text):
            page = (REPO / name).parent.joinpath(target).resolve().relative_to(REPO) if target else name
            if not (REPO / page).exists() or (anchor and anchor not in anchors.get(page, set())):
                broken.append(f"{name}: ({target}#{anchor})")
    assert not broken, broken
