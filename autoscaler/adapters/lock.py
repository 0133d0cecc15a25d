"""One daemon per store: an exclusive advisory lock on ``<store's real path>.lock``, released when the process ends.

The lock file is named from the store's real path (``os.path.realpath``: symlinks followed, the path
made absolute and normal), so every name of the store reaches the same lock: a symlink, a relative
path, ``./x/../jobs.db``. A hard link is a second real path, and SQLite names the WAL after the path
it is given, so two processes on two hard links of one store would each keep their own ``-wal`` and
corrupt it; the lock therefore refuses a store file with more than one link rather than lock one name
of it. What is not covered: the same folder mounted at two places (a bind mount; a network file system
mounted on two hosts, where SQLite's WAL does not work at all), and a copy of the file, which is
another store.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from autoscaler.core.errors import ConfigError

LOCK_SUFFIX = ".lock"


def lock_path(store_path: str | os.PathLike) -> Path:
    """The lock file of the store at ``store_path``: ``<realpath>.lock``, the same for every name of it."""
    return Path(os.path.realpath(store_path) + LOCK_SUFFIX)


class StoreLock:
    """``with StoreLock(store_path):`` holds the lock or raises ConfigError at once, naming the file:
    another process holds it, or the store file has more than one hard link.

    The kernel drops the lock when the process dies, even by SIGKILL, so a crashed daemon
    never blocks its restart.
    """

    def __init__(self, store_path: str | os.PathLike) -> None:
        self.store_path = Path(store_path)
        self.path = lock_path(store_path)
        self._fd: int | None = None

    def __enter__(self) -> "StoreLock":
        try:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise ConfigError(f"{self.path}: cannot create the store's lock file: {exc.strerror or exc}") from None
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._release()
            raise ConfigError(f"{self.path}: another daemon is running on this store; stop it first") from None
        try:
            links = os.stat(self.store_path).st_nlink
        except FileNotFoundError:
            links = 1  # a store yet to be created
        if links > 1:
            self._release()
            raise ConfigError(hard_links_text(self.store_path, "a daemon on another name of it would not see this lock, and SQLite would keep a second WAL for it"))
        return self

    def __exit__(self, *exc_info) -> None:
        self._release()

    def _release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def hard_links_text(store_path: str | os.PathLike, why: str) -> str:
    """Why a store file with more than one hard link is refused (``why``), the other names found
    near it (see ``other_names``), and what to do: make each a copy of its own with ``autoscaler
    store backup --force`` (a copy made with ``cp -al`` stays a copy), or remove it."""
    real = Path(os.path.realpath(store_path))
    links = os.stat(real).st_nlink
    others = other_names(real)
    named = f" (the other: {others[0]})" if len(others) == 1 else f" (others: {', '.join(map(str, others))})" if others else ""
    text = f"{store_path}: the job store file has {links} hard links{named}; {why}. "
    if others:
        remedies = "; ".join(f"`autoscaler store backup --force --store {store_path} {other}`" for other in others)
        text += f"Make each other name a copy of its own (as a copy made with `cp -al` was meant to be): {remedies}, or remove it"
    if len(others) < links - 1:
        text += (" Find the other names" if not others else "; find the rest") + f" with `find {_mount_point(real)} -xdev -samefile {real}`"
        text += ", then make each a copy of its own (`autoscaler store backup --force --store STORE OTHER`) or remove it"
    return text


def other_names(real: Path, most_folders: int = 1000) -> list[Path]:
    """The other hard links of the file ``real`` found where a copy is usually put: in its folder,
    and under the same name in the folders beside its folder (``cp -al data data.snapshot``); at
    most ``most_folders`` folders are looked in."""
    status = os.stat(real)
    found = []

    def same(path: Path) -> bool:
        try:
            other = os.stat(path, follow_symlinks=False)
        except OSError:
            return False
        return (other.st_ino, other.st_dev) == (status.st_ino, status.st_dev) and path != real

    try:
        found += sorted(entry for entry in real.parent.iterdir() if same(entry))
        siblings = sorted(entry for entry in real.parent.parent.iterdir() if entry != real.parent and entry.is_dir())
    except OSError:
        return found
    found += [folder / real.name for folder in siblings[:most_folders] if same(folder / real.name)]
    return found


def _mount_point(path: Path) -> Path:
    while not os.path.ismount(path) and path != path.parent:
        path = path.parent
    return path

