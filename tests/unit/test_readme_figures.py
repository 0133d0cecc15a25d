"""The README and docs/ cannot drift: their figures are those benchmarks/readme_figures.py computes.

The cheap figure groups (a few seconds of CPU) are checked in the default run, the slow ones
(hold+carbon's LP per slot) under ``pytest -m slow``; the script's docstring says which is which.
After a change of behaviour, ``python benchmarks/readme_figures.py --write`` rewrites them.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))
import readme_figures  # noqa: E402

README_TEXT = (REPO / "README.md").read_text(encoding="utf-8")
TEXTS = {path: path.read_text(encoding="utf-8") for path in readme_figures.documents()}
FIX = "run `python benchmarks/readme_figures.py --write` and commit README.md and docs/"


def _assert_readme_shows(cost: str) -> None:
    figures = readme_figures.compute(cost)
    readme_figures.check_names(TEXTS, figures)
    changes = readme_figures.diff(TEXTS, figures)
    assert not changes, f"the documentation's figures differ from what the commands give ({FIX}):\n{changes}"


def test_the_readme_shows_the_cheap_figures_the_commands_give():
    _assert_readme_shows("cheap")


@pytest.mark.slow
def test_the_readme_shows_the_slow_figures_the_commands_give():
    _assert_readme_shows("slow")


def test_every_marker_in_the_readme_names_a_group_figure_and_each_group_figure_is_marked():
    readme_figures.check_names(TEXTS, {name: "" for group in readme_figures.GROUPS.values() for name in group.names})


def test_rewrite_replaces_only_the_marked_text_and_keeps_a_table_on_its_own_lines():
    text = (
        "Saved <!-- figures:saving -->12.0 %<!-- /figures:saving --> today.\n\n"
        "<!-- figures:table -->\n| a |\n|---|\n| 1 |\n<!-- /figures:table -->\nafter\n"
    )
    new = readme_figures.rewrite(text, {"saving": "63.3 %", "table": "| a |\n|---|\n| 2 |"})
    assert new == (
        "Saved <!-- figures:saving -->63.3 %<!-- /figures:saving --> today.\n\n"
        "<!-- figures:table -->\n| a |\n|---|\n| 2 |\n<!-- /figures:table -->\nafter\n"
    )
    assert readme_figures.readme_figures(new) == {"saving": "63.3 %", "table": "| a |\n|---|\n| 2 |"}
    assert readme_figures.diff(new, {"saving": "63.3 %"}) == ""
    assert "+Saved <!-- figures:saving -->1 %" in readme_figures.diff(new, {"saving": "1 %"})


def test_a_figure_without_a_marker_and_a_marker_twice_are_refused():
    with pytest.raises(readme_figures.FigureError, match="no marker for overload-table"):
        readme_figures.check_names("no markers here", {"overload-table": "| x |"})
    twice = "x <!-- figures:a -->1<!-- /figures:a --> <!-- figures:a -->2<!-- /figures:a -->"
    with pytest.raises(readme_figures.FigureError, match="figures:a is marked twice"):
        readme_figures.readme_figures(twice)
    at_line_start = "one\n  <!-- figures:c -->3 %<!-- /figures:c --> saved"
    with pytest.raises(readme_figures.FigureError, match="README.md:2: figures:c starts a line"):
        readme_figures.readme_figures(at_line_start)
    with pytest.raises(readme_figures.FigureError, match="marks figures no group computes: b"):
        readme_figures.check_names("x <!-- figures:b -->1<!-- /figures:b -->", {})


def test_check_exits_1_with_a_diff_and_write_makes_it_agree(tmp_path, monkeypatch, capsys):
    readme = tmp_path / "README.md"
    readme.write_text("x <!-- figures:one -->1<!-- /figures:one --> y\n", encoding="utf-8")
    monkeypatch.setattr(readme_figures, "GROUPS", {"tiny": readme_figures.Group("cheap", lambda: {"one": "2"}, ("one",))})
    assert readme_figures.main(["--check", "--readme", str(readme)]) == 1
    assert "+x <!-- figures:one -->2<!-- /figures:one --> y" in capsys.readouterr().out
    assert readme_figures.main(["--write", "--readme", str(readme)]) == 0
    assert readme.read_text(encoding="utf-8") == "x <!-- figures:one -->2<!-- /figures:one --> y\n"
    assert readme_figures.main(["--check", "--readme", str(readme)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["README.md"]  # the staged copy was renamed into place


def test_the_front_page_repeats_a_figure_of_the_docs_and_both_are_checked(tmp_path):
    # One name marked in two files is computed once and written to both; a stale copy in either is a diff.
    front, results = tmp_path / "README.md", tmp_path / "results.md"
    marked = "hold uses <!-- figures:saving -->1 %<!-- /figures:saving --> less\n"
    texts = {front: marked, results: "Results: " + marked}
    changes = readme_figures.diff(texts, {"saving": "2 %"})
    assert changes.count("+hold uses <!-- figures:saving -->2 %") == 1 and changes.count("+Results: hold uses") == 1
    assert readme_figures.diff({front: marked, results: marked}, {"saving": "1 %"}) == ""
