"""One daemon per store: an exclusive advisory lock on ``<store>.lock``, released when the process ends."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from autoscaler.errors import ConfigError


class StoreLock:
    """``with StoreLock(store_path):`` holds the lock or raises ConfigError at once, naming the file.

    The kernel drops the lock when the process dies, even by SIGKILL, so a crashed daemon
    never blocks its restart.
    """

    def __init__(self, store_path: str | os.PathLike) -> None:
        self.path = Path(f"{os.fspath(store_path)}.lock")
        self._fd: int | None = None

    def __enter__(self) -> "StoreLock":
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._fd)
            self._fd = None
            raise ConfigError(f"{self.path}: another daemon is running on this store; stop it first") from None
        return self

    def __exit__(self, *exc_info) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
