"""The files beside a job store's database and the words for what goes wrong with them.

SQLite keeps ``<store>-wal``, ``<store>-shm`` (and, in rollback-journal mode, ``<store>-journal``)
beside the file; this program adds ``<store>.lock`` (one daemon per store: ``adapters.lock``) and
``<store>.created``, the marker that tells a store that was there and is gone from a new one. All
are named from the store's real path. SQLite's and the OS's failures come out as StoreError naming
the store, with "disk full: <path> (N bytes free on its file system)" when that is why.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import sqlite3
import stat
import time
from pathlib import Path

from autoscaler.adapters.files import write_all_atomic
from autoscaler.adapters.lock import LOCK_SUFFIX
from autoscaler.adapters.store_schema import APPLICATION, APPLICATION_ID, is_number
from autoscaler.core.errors import AutoscalerError, StoreError
from autoscaler.core.readable import utc_text

MARKER_SUFFIX = ".created"
"""The marker beside a store (``<store's real path>.created``): JSON with the creation time."""

SIDE_FILES = {
    "-wal": "WAL",
    "-shm": "shared-memory index",
    "-journal": "rollback journal",
    LOCK_SUFFIX: "daemon lock",
    MARKER_SUFFIX: "marker",
}
"""The files beside a store, by the suffix added to its real path: SQLite's, then this program's."""

BUSY_TIMEOUT_S = 30.0

LOW_SPACE_BYTES = 2**20
"""Below this much free space an SQLite I/O error is read as a full disk (SQLite reports ENOSPC
while growing the -shm file as a "disk I/O error", not SQLITE_FULL)."""


def sqlite_uri(path: Path, query: str) -> str:
    # as_uri() percent-encodes '?', '#' and '%', which SQLite would otherwise read as URI syntax.
    return f"{path.resolve().as_uri()}?{query}"


def beside(real: Path, suffix: str) -> Path:
    return Path(f"{real}{suffix}")


def side_file_role(path: str | os.PathLike, store_path: str | os.PathLike) -> str | None:
    """What ``path`` (any name of it: symlinks followed) is to the store at ``store_path``: one of
    ``SIDE_FILES``' roles ("WAL", "marker" ...), or None if it is none of its side files."""
    real, store = os.path.realpath(path), os.path.realpath(store_path)
    return next((role for suffix, role in SIDE_FILES.items() if real == store + suffix), None)


def side_file_of(path: str | os.PathLike) -> tuple[str, Path] | None:
    """The role (one of ``SIDE_FILES``') and the file it would serve, if ``path`` (any name of it:
    symlinks followed; it need not exist) is named as a side file of an existing file: its real path
    is that file's plus a side file's suffix (``b.db.lock`` beside ``b.db``); None otherwise.
    Replacing such a file takes a store's commits or guards: a daemon keeps its lock on the
    replaced lock file while the next daemon locks the new one."""
    real = os.path.realpath(path)
    for suffix, role in SIDE_FILES.items():
        base = real[: -len(suffix)]
        if real.endswith(suffix) and base and os.path.isfile(base):
            return role, Path(base)
    return None


def file_bytes(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


# -- the marker beside a store ---------------------------------------------------------------


def marker_path(store_path: str | os.PathLike) -> Path:
    """The marker of the store at ``store_path``: ``<realpath>.created``, the same for every name of it."""
    return Path(os.path.realpath(store_path) + MARKER_SUFFIX)


def read_marker(marker: Path) -> dict | None:
    """The marker's document (``created_s`` or ``first_seen_s``, ``restored_s``, ``restored_from``:
    Unix seconds and paths); None if there is none, {} if it cannot be read as one."""
    try:
        text = marker.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError):
        return {}
    try:
        document = json.loads(text)
    except json.JSONDecodeError:
        return {}
    return document if isinstance(document, dict) else {}


def new_marker(path: Path) -> dict:
    now_s = time.time()
    return {
        "application": APPLICATION,
        "application_id": APPLICATION_ID,
        "store": os.path.realpath(path),
        "created_s": now_s,
        "created": utc_text(now_s),
    }


def write_marker(marker: Path, document: dict) -> None:
    try:
        write_all_atomic({marker: json.dumps(document, indent=1) + "\n"})
    except AutoscalerError as exc:
        free = free_bytes(marker)
        if free is not None and free < LOW_SPACE_BYTES:
            raise StoreError(f"{disk_full_text(marker, free)}: cannot write the store's marker") from None
        raise StoreError(f"{marker}: the store's marker: {exc}") from None


def created_text(marker: dict | None) -> str:
    marker = marker or {}
    for key, words in (("created_s", "created on"), ("first_seen_s", "first seen on")):
        if is_number(marker.get(key)):
            return f"{words} {utc_text(marker[key])}"
    return "created (when, its marker does not say)"


# -- errors ------------------------------------------------------------------------------------


def store_error(path: Path, exc: sqlite3.Error, doing: str | None) -> StoreError:
    """SQLite's error as StoreError naming ``path``; "disk full: ..." for SQLITE_FULL, and for an I/O
    error on a file system with almost no space left; for SQLite's "unable to open database file"
    and "attempt to write a readonly database", the file or folder this user cannot write or read
    (``access_problem``) when that is why."""
    code = getattr(exc, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    if primary in (sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_PERM):
        problem = access_problem(path)
        if problem:
            return StoreError(f"{path}: {doing or 'cannot use the job store'}: {problem} (SQLite: {exc})")
    said = f"{doing} ({exc})" if doing else str(exc)
    if primary == sqlite3.SQLITE_FULL or primary == sqlite3.SQLITE_IOERR:
        free = free_bytes(path)
        if primary == sqlite3.SQLITE_FULL or (free is not None and free < LOW_SPACE_BYTES):
            return StoreError(f"{disk_full_text(path, free)}: {said}; nothing was written")
    return StoreError(f"{path}: {doing}: {exc}" if doing else f"{path}: {exc}")


def os_store_error(path: Path, exc: OSError, doing: str) -> StoreError:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return StoreError(f"{disk_full_text(path, free_bytes(path))}: {doing} ({exc.strerror})")
    return StoreError(f"{path}: {doing}: {exc.strerror or exc}")


def disk_full_text(path: Path, free: int | None) -> str:
    room = "free space unknown" if free is None else f"{free:,} bytes free on its file system"
    return f"disk full: {path} ({room})"


def free_bytes(path: Path) -> int | None:
    """Bytes free to this user on the file system of ``path`` (its nearest existing folder), or None."""
    folder = Path(os.path.realpath(path)).parent
    while not folder.is_dir() and folder != folder.parent:
        folder = folder.parent
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return None


def access_problem(path: str | os.PathLike) -> str | None:
    """What this user may not do that SQLite needs to use the store at ``path``, as words naming the
    file or folder and what to do, or None if nothing is in the way. SQLite needs to enter the
    folder, read the store file (and write it, to change it), and write ``<store>-wal`` and
    ``<store>-shm`` (reading a store in WAL mode too), making them in the folder when they are not
    there, as it makes a new store's file."""
    real = Path(os.path.realpath(path))
    folder = real.parent
    who = f"this user (uid {os.geteuid()})"
    if not os.access(folder, os.X_OK):
        return f"folder {folder} cannot be entered by {who}; give this user access to it, or move the store"
    wanted = [real] + [beside(real, suffix) for suffix in ("-wal", "-shm")]
    missing = [name.name for name in wanted if not os.path.lexists(name)]
    if missing and not os.access(folder, os.W_OK):
        kind = " (a read-only file system)" if _read_only_file_system(folder) else ""
        needs = ", ".join(missing[:-1]) + f" and {missing[-1]}" if len(missing) > 1 else missing[0]
        return (
            f"folder {folder} cannot be written by {who}{kind}: SQLite makes {needs} in it, beside the store; "
            "give this user write access to the folder, or move the store to a folder it can write"
        )
    for name in wanted:
        if os.path.lexists(name):
            for mode, verb, access in ((os.R_OK, "read", "read"), (os.W_OK, "written", "write")):
                if not os.access(name, mode):
                    return f"{name} cannot be {verb} by {who}{_owner_text(name)}; give this user {access} access to it"
    return None


def _owner_text(path: Path) -> str:
    try:
        status = os.stat(path)
    except OSError:
        return ""
    return f"; it is owned by uid {status.st_uid}, mode {stat.S_IMODE(status.st_mode):04o}"


def _read_only_file_system(folder: Path) -> bool:
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except OSError:
        return False

