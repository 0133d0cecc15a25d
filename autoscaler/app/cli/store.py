"""``autoscaler store backup|restore|check``: the job store file's copies and its check."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from autoscaler.app.cli.arguments import add_store_arguments, open_store, settings_or_none


def add_parsers(commands) -> None:
    """The store command and its actions."""
    store = commands.add_parser(
        "store",
        help="back up, restore or check the job store file",
        description="backup DEST: copy the store to a new file with SQLite's online backup API, consistent while a "
        "daemon writes. restore SRC: replace the store with the backup SRC (checked first), while no daemon runs "
        "on it and nothing else has it open; the replaced files are kept beside it. check: read the whole store "
        "with SQLite's quick_check. Each prints the jobs and the last slot of the store it made or read.",
    )
    store_actions = store.add_subparsers(dest="store_action", required=True, metavar="ACTION")
    store_backup = store_actions.add_parser("backup", help="copy the store to a new file")
    add_store_arguments(store_backup)
    store_backup.add_argument("dest", type=Path, metavar="DEST", help="the backup file to write (refused if it exists)")
    store_backup.add_argument("--force", action="store_true", help="replace DEST if it exists")
    store_restore = store_actions.add_parser("restore", help="replace the store with a backup")
    add_store_arguments(store_restore)
    store_restore.add_argument("source", type=Path, metavar="SRC", help="the backup file to restore (a store written by store backup)")
    store_restore.add_argument("--force", action="store_true", help="restore even when the store has what SRC lacks (jobs submitted after it, slots decided since)")
    store_check = store_actions.add_parser("check", help="check the whole store file and summarise it")
    add_store_arguments(store_check)
    store.set_defaults(handler=_run_store)


def _run_store(args: argparse.Namespace, out: Console, err: Console) -> int:
    from autoscaler.adapters.sqlite_store import check_store, restore_store

    settings = settings_or_none(args.config)
    path = args.store or (settings.store_path if settings else Path("autoscaler.db"))
    if args.store_action == "backup":
        store, _ = open_store(args, must_exist=True)
        with store, err.status("backing up the store"):
            summary = store.backup(args.dest, force=args.force)
        out.print(f"backed up {path} to {args.dest}: {summary.text()}", markup=False, highlight=False, soft_wrap=True)
    elif args.store_action == "restore":
        with err.status("restoring the store"):
            result = restore_store(args.source, path, force=args.force)
        out.print(f"restored {path} from {args.source}: {result.summary.text()}", markup=False, highlight=False, soft_wrap=True)
        if result.lacking:
            err.print(f"the replaced store had what the backup lacks: {result.lacking}", markup=False, highlight=False, soft_wrap=True)
        if result.kept:
            err.print(f"the replaced store is kept as {', '.join(map(str, result.kept))}", markup=False, highlight=False, soft_wrap=True)
    else:
        with err.status("checking the store"):
            summary = check_store(path, "--store" if args.store else "store_path")
        out.print(f"{path}: ok (quick_check of every page): {summary.text()}", markup=False, highlight=False, soft_wrap=True)
    return 0
