"""The ``autoscaler`` argument parser: one subcommand per command module, each adding its own."""

from __future__ import annotations

import argparse

from autoscaler.app.cli import drf, explain, jobs, replay, report, store


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="autoscaler",
        description="Deadline-aware, energy-saving capacity provisioning for Hadoop/EMR clusters.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in (replay, jobs, explain, store, report, drf):
        group.add_parsers(commands)
    return parser
