"""One daemon per store: an exclusive advisory lock on ``<store's real path>.lock``, released when the process ends.

The lock file is named from the store's real path (``os.path.realpath``: symlinks followed, the path
made absolute and normal), so every name of the store reaches the same lock: a symlink, a relative
path, ``./x/../jobs.db``. A hard link is a second real path, and SQLite names the WAL after the path
it is given, so two processes on two hard links of one store would each keep their own ``-wal`` and
corrupt it; the lock therefore refuses a store file with more than one link rather than lock one name
of it. What is not covered: the same folder mounted at two places (a bind mount; a network file system
mounted on two hosts, where SQLite's WAL does not work at all), and a copy of the file, which is
another store.

The holder may leave a note in the lock file (``StoreLock(path, note=...)``): the daemon writes its
clock's frame there (see ``autoscaler.adapters.clock``), so that ``submit`` stamps a job on the
daemon's clock. ``held_note`` reads it only while the lock is held: a dead daemon's note is stale.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

from autoscaler.core.errors import ConfigError

LOCK_SUFFIX = ".lock"
TAKE_WAIT_S = 0.5
"""How long the lock is tried for (seconds) before another holder is taken to be a daemon: ``held_note``
holds it shared for a moment, and a daemon starting then must not take that for a second daemon."""


def lock_path(store_path: str | os.PathLike) -> Path:
    """The lock file of the store at ``store_path``: ``<realpath>.lock``, the same for every name of it."""
    return Path(os.path.realpath(store_path) + LOCK_SUFFIX)


class StoreLock:
    """``with StoreLock(store_path):`` holds the lock or raises ConfigError at once, naming the file:
    another process holds it, or the store file has more than one hard link.

    The kernel drops the lock when the process dies, even by SIGKILL, so a crashed daemon
    never blocks its restart.
    """

    def __init__(self, store_path: str | os.PathLike, note: bytes | None = None) -> None:
        self.store_path = Path(store_path)
        self.path = lock_path(store_path)
        self.note = note
        self._fd: int | None = None

    def __enter__(self) -> "StoreLock":
        try:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise ConfigError(f"{self.path}: cannot create the store's lock file: {exc.strerror or exc}") from None
        if not _take(self._fd, TAKE_WAIT_S):
            self._release()
            raise ConfigError(f"{self.path}: another daemon is running on this store; stop it first") from None
        try:
            links = os.stat(self.store_path).st_nlink
        except FileNotFoundError:
            links = 1  # a store yet to be created
        if links > 1:
            self._release()
            raise ConfigError(hard_links_text(self.store_path, "a daemon on another name of it would not see this lock, and SQLite would keep a second WAL for it"))
        os.ftruncate(self._fd, 0)
        if self.note is not None:
            os.pwrite(self._fd, self.note, 0)
        return self

    def __exit__(self, *exc_info) -> None:
        self._release()

    def _release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def _take(fd: int, wait_s: float) -> bool:
    """Take ``fd``'s lock exclusively, trying for up to ``wait_s`` seconds; False if still held then."""
    give_up_s = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= give_up_s:
                return False
            time.sleep(0.02)


def held_note(store_path: str | os.PathLike) -> bytes | None:
    """The note in the lock file of the store at ``store_path`` while some process holds the lock (a
    running daemon, or a restore, which leaves none: b""); None when no one holds it or there is no
    lock file. See ``_holder_note``."""
    return _holder_note(lock_path(store_path))


def held_by_a_process(path: str | os.PathLike) -> bool:
    """Whether a process (this one too, through another open file) holds an exclusive advisory lock
    (``flock``) on the file at ``path``: a daemon's store lock, or a copy being staged. False when
    there is no such file or it cannot be opened. See ``_holder_note``."""
    return _holder_note(path) is not None


def _holder_note(path: str | os.PathLike) -> bytes | None:
    """What the file at ``path`` holds (its first 4,096 bytes; b"" if it cannot be read so) while a
    process holds an exclusive ``flock`` on it; None when none does, there is no such file, or its
    file system has no flock. Holds it shared for an instant to find out, so two probes never take
    each other for a holder, and a starting daemon waits the instant out (``TAKE_WAIT_S``)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        try:
            return os.pread(fd, 4096, 0)
        except OSError:
            return b""
    except OSError:
        return None  # a file system without flock: no lock to see
    finally:
        os.close(fd)  # drops the instant's lock with it
    return None


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

