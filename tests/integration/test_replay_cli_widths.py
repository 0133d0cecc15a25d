"""`autoscaler replay --containers-per-node N` through the command line: follow's capacity (x = m = L)
in each slot is the sum of w over the jobs active in it, w worked by hand from §V-A's task counts."""

from __future__ import annotations

import json

from autoscaler.app.cli import main
from autoscaler.core.model import MIB

BLOCK = 128 * MIB
SLOT_S = 3600


def test_follow_runs_w_nodes_for_each_job_of_the_trace(tmp_path, capsys):
    # Three jobs of at most 5 blocks (minutes long, each inside its hour), submitted at hours 0, 2 and 4:
    #   job a: S = 5 blocks (X = 5 mappers), S'' = 1 MiB (Y = 1):  w = ceil(5 / 2) = 3
    #   job b: S = 1 MiB (X = 1), S'' = 3 blocks (Y = 3):            w = ceil(3 / 2) = 2
    #   job c: S = 1 MiB, S'' = 1 MiB:                              w = ceil(1 / 2) = 1
    trace = tmp_path / "wide.tsv"
    trace.write_text(
        f"a\t0\t0\t{5 * BLOCK}\t{MIB}\t{MIB}\n"
        f"b\t{2 * SLOT_S}\t{2 * SLOT_S}\t{MIB}\t{MIB}\t{3 * BLOCK}\n"
        f"c\t{4 * SLOT_S}\t{2 * SLOT_S}\t{MIB}\t{MIB}\t{MIB}\n"
    )
    argv = ["replay", "--trace", str(trace), "--slot-s", str(SLOT_S), "--deadline", "1h", "--format", "json"]
    assert main([*argv, "--containers-per-node", "2"]) == 0
    wide = json.loads(capsys.readouterr().out)["policies"]["follow"]["m"]
    assert main(argv) == 0
    narrow = json.loads(capsys.readouterr().out)["policies"]["follow"]["m"]
    assert [round(m) for m in narrow[:5]] == [1, 0, 1, 0, 1]  # one node a job, in its hour
    assert [round(m) for m in wide[:5]] == [3, 0, 2, 0, 1]
    assert sum(wide) == 3 + 2 + 1 and sum(narrow) == 3


def test_a_containers_per_node_that_is_not_a_whole_number_is_refused_naming_the_flag(tmp_path, capsys):
    trace = tmp_path / "one.tsv"
    trace.write_text(f"a\t0\t0\t{MIB}\t{MIB}\t{MIB}\n")
    for bad in ("0", "1.5", "-2", "many"):
        try:
            status = main(["replay", "--trace", str(trace), "--containers-per-node", bad])
        except SystemExit as stop:
            status = stop.code
        assert status == 2
        assert "--containers-per-node" in capsys.readouterr().err
