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
            raise ConfigError(
                f"{self.store_path}: the job store file has {links} hard links; a daemon on another name of it would "
                f"not see this lock, and SQLite would keep a second WAL for it: remove the other links "
                f"(find / -samefile {self.store_path})"
            )
        return self

    def __exit__(self, *exc_info) -> None:
        self._release()

    def _release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
