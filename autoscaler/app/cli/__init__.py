"""Command line: ``autoscaler replay | sweep | submit | jobs | run | explain | store | report | drf``.

Results go to stdout; progress, notes and errors go to stderr, so that
``--format json`` output can be piped. An input or parameter error prints one
line naming the input and exits with status 2.

One module per command group (replay and sweep; submit, jobs and run; explain; store; report;
drf), each adding its own subcommands; ``parser`` joins them, ``arguments`` holds what their
flags share. The names other code imports are re-exported here.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from rich.console import Console

from autoscaler.app.cli.arguments import deadline_slots, in_flags, parse_deadlines
from autoscaler.app.cli.drf import read_demands_csv
from autoscaler.app.cli.jobs import END_OF_OPTIONS
from autoscaler.app.cli.parser import build_parser, shortened
from autoscaler.app.cli.trace_inputs import load_workload
from autoscaler.core.errors import AutoscalerError, ConfigError

__all__ = ["build_parser", "deadline_slots", "load_workload", "main", "parse_deadlines", "read_demands_csv"]


def _check_out_folder(folder: Path | None) -> None:
    """Refuse an --out that cannot be a folder before any work is done."""
    if folder is not None and folder.exists() and not folder.is_dir():
        raise ConfigError(f"--out: {folder} exists and is not a folder")


_DASH_VALUE_OPTIONS = ("--deadline", "--deadlines", "--since", "--until", "--slot")
"""Options whose value may begin with a dash and a digit ('-1h', '12-1' is fine, '-1-12' is not)."""


def _attach_dash_values(argv: list[str]) -> list[str]:
    """'--deadline -1h' as '--deadline=-1h': argparse takes '-1h' for an unknown option and says only
    'expected one argument'; attached, the value reaches the check that says what is wrong with it.
    Everything from --command, --args or '--' on is left as it is (it is the job's own command line)."""
    attached: list[str] = []
    i = 0
    while i < len(argv):
        if argv[i] in ("--command", "--args"):
            # The job's command line: its own '--' must reach --command, not end submit's options.
            return attached + argv[i : i + 1] + [END_OF_OPTIONS if word == "--" else word for word in argv[i + 1 :]]
        if argv[i] == "--":
            return attached + argv[i:]
        if argv[i] in _DASH_VALUE_OPTIONS and i + 1 < len(argv) and re.match(r"-\d", argv[i + 1]):
            attached.append(f"{argv[i]}={argv[i + 1]}")
            i += 2
            continue
        attached.append(argv[i])
        i += 1
    return attached


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    given = _attach_dash_values(sys.argv[1:] if argv is None else list(argv))
    args = parser.parse_args(given)
    # Every string printed is plain text: file names, line numbers (bad.tsv:100: is an emoji code to
    # rich), job names and messages carry colons and brackets that rich would take for markup.
    plain = {"markup": False, "emoji": False}
    out = Console(**plain)
    if not out.is_terminal:
        # Piped or redirected: rich would assume 80 columns and squeeze the tables.
        out = Console(width=240, **plain)
    err = Console(stderr=True, **plain)
    if not err.is_terminal:
        err = Console(stderr=True, width=200, **plain)
    try:
        _check_out_folder(getattr(args, "out", None))
        return args.handler(args, out, err)
    except KeyboardInterrupt:
        err.print("autoscaler: interrupted; no output files were changed", highlight=False)
        return 130
    except AutoscalerError as exc:
        # 2 for bad input or a wrong setting (a restart cannot mend it); 75 (EX_TEMPFAIL) for an AWS
        # outage that outlasted the start-up wait. deploy/autoscaler.service restarts on 75, not 2.
        # The core names the fields it checks (`days`); the user reads the flags they typed (--days).
        # The subcommand's name (submit's own positional `command`, the step's argv, shadows it there).
        command = args.command if isinstance(args.command, str) else None
        err.print(f"autoscaler: error: {shortened(in_flags(str(exc), command), given)}", markup=False, highlight=False, soft_wrap=True)
        return exc.exit_status
    except OSError as exc:
        err.print(f"autoscaler: error: {shortened(str(exc), given)}", markup=False, highlight=False, soft_wrap=True)
        return 2


if __name__ == "__main__":
    sys.exit(main())
