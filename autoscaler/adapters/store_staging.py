"""The temporary file a backup or restore writes its copy into, beside the file it is to become.

A copy is staged as ``.<target name>.<8 random characters><suffix>`` in the target's folder (so
that renaming it onto the target is atomic), with SQLite's ``-wal``, ``-shm`` or ``-journal`` beside
it while it is written. A process killed while copying leaves them; the next copy to the same
target removes them. Which are left by a dead process is known from an advisory lock, not from
their age: the process writing a staged file holds ``flock`` on it until it is renamed or removed,
and the kernel drops that lock when the process dies, even by SIGKILL. A staged file whose lock can
be taken has no writer, and only such files (regular files owned by this user) are removed.
"""

from __future__ import annotations

import fcntl
import os
import re
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from autoscaler.adapters.store_files import os_store_error

SQLITE_SIDE_SUFFIXES = ("-journal", "-wal", "-shm")
_RANDOM = "[a-z0-9_]{8}"  # what tempfile.mkstemp puts between prefix and suffix


@contextmanager
def staged_file(target: Path, named: Path, suffix: str, what: str) -> Iterator[Path]:
    """An empty file to stage a copy of ``target`` in, held (``flock``) for as long as the block
    runs and removed after it with its SQLite side files (once renamed onto ``target`` it is gone
    already). Files a killed copy to the same ``target`` left are removed first (see the module).
    A failure to make it is a StoreError naming ``named`` and ``what`` could not be done."""
    remove_stale(target, suffix)
    fd, staged = _make_held(target, named, suffix, what)
    try:
        yield staged
    finally:
        for side in ("", *SQLITE_SIDE_SUFFIXES):
            Path(f"{staged}{side}").unlink(missing_ok=True)
        os.close(fd)  # the lock goes with it, only after the files are gone


def remove_stale(target: Path, suffix: str) -> list[Path]:
    """Remove the staged files, with their side files, that copies to ``target`` with ``suffix``
    (".tmp": a backup; ".restore.tmp": a restore) left when they were killed; returns those removed.
    A staged file whose writer still holds its lock is kept, and so are its side files."""
    pattern = re.compile(rf"\.{re.escape(target.name)}\.{_RANDOM}{re.escape(suffix)}")
    try:
        names = os.listdir(target.parent)
    except OSError:
        return []
    removed = []
    for name in sorted(n for n in names if pattern.fullmatch(n)):
        staged = target.parent / name
        if _remove_if_unheld(staged):
            removed.append(staged)
    bases = {name for name in names if pattern.fullmatch(name)}
    for name in names:
        for side in SQLITE_SIDE_SUFFIXES:
            # The side files of a staged file that is gone (its writer removes the file first).
            if name.endswith(side) and pattern.fullmatch(name[: -len(side)]) and name[: -len(side)] not in bases:
                if _ours(target.parent / name):
                    (target.parent / name).unlink(missing_ok=True)
                    removed.append(target.parent / name)
    return removed


def _make_held(target: Path, named: Path, suffix: str, what: str) -> tuple[int, Path]:
    for _ in range(8):
        try:
            fd, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=suffix)
        except OSError as exc:
            raise os_store_error(named, exc, what) from None
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            still_ours = os.stat(name).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            still_ours = False
        if still_ours:
            return fd, Path(name)
        # Another copy's clean-up took it for a dead one's between mkstemp and flock: make another.
        os.close(fd)
    raise os_store_error(named, OSError(0, "the staged file kept being removed"), what)


def _remove_if_unheld(staged: Path) -> bool:
    try:
        fd = os.open(staged, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode) or status.st_uid != os.geteuid():
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False  # its writer is alive
        for side in SQLITE_SIDE_SUFFIXES:
            Path(f"{staged}{side}").unlink(missing_ok=True)
        staged.unlink(missing_ok=True)
        return True
    finally:
        os.close(fd)


def _ours(path: Path) -> bool:
    try:
        status = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(status.st_mode) and status.st_uid == os.geteuid()
