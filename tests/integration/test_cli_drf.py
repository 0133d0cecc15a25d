"""`autoscaler drf` end to end: table and JSON output, ratios, the YARN file, the plot and bad CSVs."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from autoscaler.app.cli import main

# The unit tests' hand-worked example: x^3 = (4/9, 4/9, 1/3).
HAND_CSV = "agent,cpu,mem\nj1,0.2,0.1\nj2,0.1,0.4\n\nj3,0.3,0.3\n"


@pytest.fixture
def hand_csv(tmp_path):
    path = tmp_path / "demands.csv"
    path.write_text(HAND_CSV)
    return path


def test_json_is_the_only_stdout_and_holds_every_step(hand_csv, tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "autoscaler", "drf", "--demands", str(hand_csv), "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    document = json.loads(proc.stdout)
    assert document["resources"] == ["cpu", "mem"]
    assert [s["k"] for s in document["steps"]] == [1, 2, 3]
    assert [s["M"] for s in document["steps"]] == pytest.approx([1 / 3, 4 / 9, 1 / 3])
    assert document["steps"][-1]["x"] == pytest.approx([4 / 9, 4 / 9, 1 / 3])
    assert "ratios" not in document


def test_ratios_yarn_file_and_plot(hand_csv, tmp_path, capsys):
    yarn, plot = tmp_path / "out" / "fair-scheduler.xml", tmp_path / "ratios.png"
    code = main(["drf", "--demands", str(hand_csv), "--n", "4", "--format", "json", "--ratios", "--yarn-out", str(yarn), "--plot", str(plot)])
    assert code == 0
    document = json.loads(capsys.readouterr().out)
    assert document["n"] == 4
    # n = 4: step 1 caps at 1/4, so M^1 = 1/4; the capped maxmin ratio of one agent is 1.
    assert document["steps"][0]["M"] == pytest.approx(0.25)
    first = document["ratios"][0]
    assert first["k"] == 1 and first["maxmin_capped"] == pytest.approx(1, abs=1e-6)
    assert first["maxmin_full"] == pytest.approx(0.25, abs=1e-6)
    queues = ET.parse(yarn).getroot().findall("queue")
    weights = {q.get("name"): float(q.find("weight").text) for q in queues}
    final = document["steps"][-1]["x"]
    assert weights == pytest.approx({"j1": 4 * final[0], "j2": 4 * final[1], "j3": 4 * final[2]}, rel=1e-5)
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_table_output(hand_csv, capsys):
    assert main(["drf", "--demands", str(hand_csv)]) == 0
    text = capsys.readouterr().out
    assert "0.444444" in text and "j3" in text


@pytest.mark.parametrize(
    ("content", "line", "message"),
    [
        ("name,cpu\na,1\n", 1, "header"),
        ("agent,cpu,cpu\na,1,1\n", 1, "distinct"),
        ("agent,cpu,mem\na,1\n", 2, "expected 3 columns"),
        ("agent,cpu,mem\na,1,0\nb,x,1\n", 3, "'b', cpu: expected a number"),
        ("agent,cpu,mem\na,1,-0.5\n", 2, "'a', mem: expected a finite number >= 0"),
        ("agent,cpu,mem\na,1,nan\n", 2, "finite"),
        ("agent,cpu,mem\na,0,0\n", 2, "all zero"),
        ("agent,cpu,mem\na,1,0\n\na,0,1\n", 4, "duplicate agent 'a' \\(first on line 2\\)"),
    ],
)
def test_bad_csv_is_one_line_naming_file_and_line(tmp_path, capsys, content, line, message):
    path = tmp_path / "bad.csv"
    path.write_text(content)
    yarn = tmp_path / "never.xml"
    assert main(["drf", "--demands", str(path), "--yarn-out", str(yarn)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err.strip()
    assert "\n" not in err
    assert err.startswith(f"autoscaler: error: {path}:{line}: ")
    assert re.search(message, err)
    assert not yarn.exists()


def test_n_below_the_row_count_and_empty_file_are_refused(hand_csv, tmp_path, capsys):
    assert main(["drf", "--demands", str(hand_csv), "--n", "2"]) == 2
    assert "--n" in capsys.readouterr().err
    empty = tmp_path / "empty.csv"
    empty.write_text("agent,cpu\n")
    assert main(["drf", "--demands", str(empty)]) == 2
    assert "no agents" in capsys.readouterr().err


def test_a_demand_csv_with_a_byte_order_mark_is_read(tmp_path, capsys):
    from autoscaler.app.cli import main

    path = tmp_path / "demands.csv"
    path.write_bytes("\ufeffagent,cpu,mem\na,1,0.5\nb,0.5,1\n".encode("utf-8"))
    assert main(["drf", "--demands", str(path), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["resources"] == ["cpu", "mem"]
