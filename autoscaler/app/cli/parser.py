"""The ``autoscaler`` argument parser: one subcommand per command module, each adding its own; and
how a message echoes what was given on the command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable

from autoscaler.app.cli import compare, drf, explain, jobs, replay, report, serve, store
from autoscaler.app.cli.arguments import HelpFormatter
from autoscaler.core.readable import ECHO_MAX_CHARS, echo_text


def shortened(message: str, given: Iterable[str]) -> str:
    """``message`` with every value of ``given`` (the command line's words) longer than
    :data:`ECHO_MAX_CHARS` cut to its first ECHO_MAX_CHARS characters and its length, wherever the
    message quotes it: whole, as the value of ``--flag=value``, stripped, or one item of a comma list."""
    long_values = set()
    for word in given:
        value = word.split("=", 1)[1] if word.startswith("--") and "=" in word else word
        for form in (value, value.strip(), *(item.strip() for item in value.split(","))):
            if len(form) > ECHO_MAX_CHARS:
                long_values.add(form)
    for value in sorted(long_values, key=len, reverse=True):
        start, length = value[:ECHO_MAX_CHARS], f"({len(value):,} characters)"
        message = message.replace(repr(value), echo_text(value)).replace(value, f"{start}... {length}")
    return message


class Parser(argparse.ArgumentParser):
    """argparse's parser (and, through ``add_subparsers``, its subcommands'), whose usage errors echo
    a long value by its start and length (:func:`shortened`)."""

    _given: tuple[str, ...] = ()

    def parse_known_args(self, args=None, namespace=None):
        self._given = tuple(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def error(self, message: str):
        super().error(shortened(message, self._given))


class CommandParser(Parser):
    """A command's parser (``autoscaler replay``, ``autoscaler store backup`` ...): its help shows
    the defaults (:class:`~autoscaler.app.cli.arguments.HelpFormatter`), so no command has to ask.
    A command's own actions are CommandParsers too (``add_subparsers`` makes its parser's type)."""

    def __init__(self, *args, formatter_class=HelpFormatter, **kwargs) -> None:
        super().__init__(*args, formatter_class=formatter_class, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="autoscaler",
        description="Deadline-aware, energy-saving capacity provisioning for Hadoop/EMR clusters.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=CommandParser)
    for group in (replay, compare, jobs, explain, store, report, drf, serve):
        group.add_parsers(commands)
    return parser
