"""Copies of a job store: ``backup_store`` (``autoscaler store backup``) and ``restore_store``
(``autoscaler store restore``), both through SQLite's online backup API into a file staged beside
its target, checked whole, synced, and only then renamed into place.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import stat
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path

from autoscaler.adapters.files import file_kind, require_regular_file
from autoscaler.adapters.lock import StoreLock, held_by_a_process, lock_path
from autoscaler.adapters.store_check import (
    SQLITE_HEADER_BYTES,
    SQLITE_MAGIC,
    StoreSummary,
    check_file,
    connect_read_only,
    quick_check,
    read_every_row,
    summary_of,
)
from autoscaler.adapters.store_difference import backup_lacks
from autoscaler.adapters.store_files import (
    beside,
    marker_path,
    new_marker,
    os_store_error,
    read_marker,
    side_file_of,
    side_file_role,
    store_error,
    write_marker,
)
from autoscaler.adapters.store_schema import APPLICATION, schema_verdict
from autoscaler.adapters.store_staging import staged_file
from autoscaler.core.errors import StoreError
from autoscaler.core.readable import utc_text

_SHM_DMS_BYTE = 128
"""The byte of ``<store>-shm`` every SQLite connection to a WAL database holds a shared POSIX lock on
for as long as it is open (the unix VFS's "dead man switch", UNIX_SHM_DMS in sqlite3.c)."""
_DB_LOCK_BYTE = 0x40000000
_DB_LOCK_BYTES = 2 + 510
"""The bytes of the database file SQLite's POSIX locks are on: PENDING_BYTE (2**30), the RESERVED byte
after it, then the 510 SHARED bytes (os_unix.c). SQLite never keeps data on the page that holds them,
so locking them, as SQLite does, takes nothing from a reader but the lock."""


def backup_store(
    connection: Callable[[], AbstractContextManager[sqlite3.Connection]], store_path: Path, dest: str | os.PathLike, force: bool = False
) -> StoreSummary:
    """Copy the store at ``store_path`` to a new file ``dest``: what ``SqliteJobStore.backup`` does
    (see there). ``connection()`` holds the store's open connection for the copy."""
    dest = Path(dest)
    _require_backup_dest(dest, store_path, force)
    with staged_file(dest, dest, ".tmp", "cannot write the backup") as staged:
        with connection() as conn:
            summary = _copy_database(conn, staged, dest)
        _copy_mode(Path(os.path.realpath(store_path)), staged)
        _place(staged, dest, replace=force)
    return summary


def _require_backup_dest(dest: Path, store_path: Path, force: bool) -> None:
    """Nothing if a backup may be written at ``dest``; StoreError naming it otherwise: it is the
    store, one of the store's side files or another store's (its WAL, -shm, journal, lock or marker:
    replacing one loses commits or guards; see ``store_files.side_file_of``), a folder, in a missing
    folder, exists without ``force``, exists and is not a regular file (a FIFO or a device, which a
    rename would replace by a plain file), is held (``flock``) by a running process, or is a store a
    daemon runs on (it holds the store's lock)."""
    if os.path.realpath(dest) == os.path.realpath(store_path):
        raise StoreError(f"{dest}: is the job store itself; back it up to another file")
    role = side_file_role(dest, store_path)
    if role is not None:
        raise StoreError(f"{dest}: is the job store's {role} (beside {store_path}); back the store up to another file")
    if dest.is_dir():
        raise StoreError(f"{dest}: is a folder; give the backup's file name")
    if not dest.parent.is_dir():
        raise StoreError(f"{dest}: cannot write the backup: folder {dest.parent} does not exist")
    _require_no_side_file(dest, "back the store up to another file")
    if os.path.lexists(dest) and not force:
        raise StoreError(f"{dest}: exists; give --force to replace it, or another file name")
    try:
        mode = os.stat(dest).st_mode  # through a symlink: what a reader of dest would get
    except OSError:
        return  # nothing there, or a dangling symlink, which the backup replaces
    if not stat.S_ISREG(mode):
        raise StoreError(f"{dest}: is {file_kind(mode)}, not a regular file; the backup is written only as a new file or over one")
    _require_unheld(dest, "back the store up to another file")
    if held_by_a_process(lock_path(dest)):
        raise StoreError(
            f"{dest}: a daemon is running on this job store (it holds {lock_path(dest)}); "
            "stop it before replacing the store, or back the store up to another file"
        )
    _require_no_pending_writes(dest)


def _require_no_pending_writes(dest: Path) -> None:
    """StoreError when the file ``dest`` would replace has writes SQLite keeps beside it: a WAL with
    frames in it, or a rollback journal (a process killed mid-write leaves them). SQLite names them
    after the file, not its contents, so the next open would replay the old store's writes onto the
    backup: a store that mixes two (a job count of one, an index of the other) and still passes
    quick_check."""
    real = os.path.realpath(dest)
    for suffix, what in (("-wal", "write-ahead log"), ("-journal", "rollback journal")):
        side = Path(real + suffix)
        try:
            size = side.stat().st_size
        except OSError:
            continue
        if suffix == "-journal" or size > 0:
            raise StoreError(
                f"{dest}: has a {what} beside it ({side}, {size:,} bytes) with writes not yet in the file, left by a "
                "process that stopped while writing; replaced, the next open would apply them to the backup. Remove "
                f"{dest} with its -wal, -shm and -journal files first (the backup replaces that store anyway), or back "
                "the store up to another file"
            )


def _require_no_side_file(path: Path, instead: str) -> None:
    """StoreError naming ``path`` if it is named as another store's side file (``side_file_of``)."""
    side = side_file_of(path)
    if side is not None:
        role, base = side
        raise StoreError(f"{path}: is the {role} of the job store {base}; replacing it takes that from the store: {instead}")


def _require_unheld(path: Path, instead: str) -> None:
    """StoreError naming the existing regular file ``path`` if a process holds ``flock`` on it
    (a daemon's lock whose store was moved, a copy being staged): a rename would put a new file
    beside the one it holds."""
    if held_by_a_process(path):
        raise StoreError(f"{path}: is held by a running process (an advisory lock, as a daemon holds its store's); {instead}")


@dataclass(frozen=True)
class RestoreResult:
    """A restore: the restored store's summary, and the files of the store it replaced, kept under
    new names (``<store>.before-restore-<UTC time>`` and its ``-wal``), oldest name first."""

    summary: StoreSummary
    kept: tuple[Path, ...]
    lacking: str | None = None
    """What the replaced store had that the backup lacked (see ``store_difference.backup_lacks``),
    lost from the store by a forced restore, or None."""


def restore_store(source: str | os.PathLike, store_path: str | os.PathLike, force: bool = False) -> RestoreResult:
    """Replace the store at ``store_path`` with a copy of the store ``source`` (a backup).

    ``source`` must be one of our stores that passes ``check_store`` (quick_check of every page,
    schema, every row read back); it is read only. The store being replaced must be absent, empty,
    one of ours (even damaged) or have our marker: another program's file is never replaced. While
    holding the store's lock (so no daemon runs on it) and the SQLite locks its connections hold
    (so no dry run, ``submit`` or ``jobs`` has it open, nor, in rollback-journal mode, is in a
    transaction on it), the copy, staged and synced beside the store, is renamed into place.
    The replaced store and its ``-wal`` are renamed aside first, together, so no WAL of the old
    store is ever beside the new one; its ``-shm`` is left for SQLite, which rebuilds it at the next
    open. The marker beside the store is then written, noting the restore.

    A store that can be read is compared with the backup first: when it has what the backup lacks
    (jobs submitted after it, jobs further along, slots decided since), the restore is refused
    naming them, unless ``force`` (the result then says what was lost from the store).

    Raises StoreError (ConfigError when a daemon holds the lock) with the store unchanged when the
    source is not a whole store of ours, the store is another program's file or in use, has what
    the backup lacks (without ``force``), changed while the copy was made, or the
    copy cannot be written ("disk full: ..." when that is why). Not to be called by a process that
    has the store open itself: POSIX locks do not set a process's own connections apart.
    """
    source, path = Path(source), Path(store_path)
    real = Path(os.path.realpath(path))
    if os.path.realpath(source) == str(real):
        raise StoreError(f"{source}: is the job store itself; restore from a backup file")
    verdict, _ = check_file(source, None, to_write=False, flag="SRC")
    if verdict == "new":
        raise StoreError(f"{source}: not a job store to restore from (no file, an empty file, or an SQLite file without tables)")
    _require_replaceable(path, real)
    with StoreLock(path):
        seen = _file_state(real)
        lacking = _what_the_backup_lacks(real, source)
        if lacking is not None and not force:
            raise StoreError(
                f"{path}: the store has what the backup {source} lacks: {lacking}. A restore takes them out of the store "
                f"(they stay in the replaced file, kept beside it as {real.name}.before-restore-<UTC time>): "
                "give --force to restore anyway, or take a newer backup"
            )
        with staged_file(real, path, ".restore.tmp", "cannot stage the copy") as staged:
            try:
                conn = connect_read_only(Path(os.path.realpath(source)))
            except sqlite3.Error as exc:
                raise StoreError(f"{source}: cannot open the backup read-only: {exc}") from None
            try:
                # With check_file above, what `autoscaler store check` runs: on the very copy put in place.
                summary = _copy_database(conn, staged, path, rows_of=source)
            finally:
                conn.close()
            _copy_mode(real, staged)
            with _nothing_else_open(path, real):
                if _file_state(real) != seen:
                    raise StoreError(f"{path}: the store changed while the backup was being copied (another program wrote to it); restore again")
                try:
                    kept = _move_aside(real)
                    os.replace(staged, real)
                except OSError as exc:
                    raise os_store_error(path, exc, "cannot put the copy in place") from None
                _fsync_folder(real.parent)
        marker = marker_path(path)
        document = read_marker(marker) or {}
        if document.get("application") != APPLICATION:
            document = new_marker(path)
        now_s = time.time()
        document.update(restored_s=now_s, restored=utc_text(now_s), restored_from=os.path.realpath(source))
        try:
            write_marker(marker, document)
        except StoreError as exc:
            raise StoreError(f"{path}: the store was restored from {source}, but its marker was not updated: {exc}") from None
    return RestoreResult(summary, kept, lacking)


def _what_the_backup_lacks(real: Path, source: Path) -> str | None:
    """``backup_lacks`` for a store that can be read; None for one that is absent, empty or cannot
    be read (a cut or damaged store: nothing in it can be compared, and its files are kept)."""
    if not real.exists() or real.stat().st_size == 0:
        return None
    try:
        return backup_lacks(real, source)
    except sqlite3.Error:
        return None


def _file_state(real: Path) -> tuple:
    """What tells that the store or its WAL was written to: their inode, size and modification time
    (not the change time, which SQLite's read-only open of a WAL changes)."""
    state = []
    for name in (real, beside(real, "-wal")):
        try:
            status = os.stat(name)
        except FileNotFoundError:
            state.append(None)
            continue
        state.append((status.st_ino, status.st_size, status.st_mtime_ns))
    return tuple(state)


def _require_replaceable(path: Path, real: Path) -> None:
    """Nothing if restore may replace what is at ``path``; StoreError naming it otherwise (naming
    --store too for a FIFO or a device: the rename aside would leave a plain file in its place; and
    for another store's side file, or a file a process holds ``flock`` on, see ``_require_backup_dest``)."""
    _require_no_side_file(path, "give the store's own path as --store")
    if not real.exists():
        return
    if real.is_dir():
        raise StoreError(f"{path}: is a folder, expected a job store file")
    require_regular_file(path, "--store", StoreError)
    _require_unheld(path, "give the store's own path as --store")
    if marker_path(path).exists() or real.stat().st_size == 0:
        return
    refusal = f"restore replaces only a job store (or a file with its marker {marker_path(path)}): move it away or give another --store"
    with open(real, "rb") as handle:
        header = handle.read(SQLITE_HEADER_BYTES)
    if not header.startswith(SQLITE_MAGIC):
        raise StoreError(f"{path}: not an SQLite database; {refusal}")
    try:
        conn = connect_read_only(real)
    except sqlite3.Error as exc:
        raise StoreError(f"{path}: cannot be read ({exc}); {refusal}") from None
    try:
        schema_verdict(conn, path)
    except StoreError as exc:
        raise StoreError(f"{exc}; {refusal}") from None
    except sqlite3.Error as exc:
        raise StoreError(f"{path}: a corrupt SQLite file that nothing says is a job store ({exc}); {refusal}") from None
    finally:
        conn.close()


@contextmanager
def _nothing_else_open(path: Path, real: Path) -> Iterator[None]:
    """Hold, exclusively, the locks SQLite's connections hold on the store: the ``-shm`` dead man
    switch (every connection to a store in WAL mode, for as long as it is open) and the database
    file's lock bytes (a reader or writer in a transaction, in either journal mode; in WAL mode every
    connection that has read). Refused (StoreError) while any is held; while held, a connection that
    tries to open or read the store waits (SQLite's busy wait) instead of reading or writing the file
    being replaced. POSIX locks: they are dropped if this process closes any descriptor of these
    files, so nothing else here opens them meanwhile.

    An idle connection to a store in rollback-journal mode holds no lock and cannot be seen; the
    stores this program writes, backups included, are in WAL mode."""
    in_use = StoreError(
        f"{path}: the job store is open in another program (a dry run, `autoscaler jobs`, `submit` or an sqlite3 shell); "
        "restore replaces it only while nothing has it open: stop them and retry"
    )
    fds = []
    try:
        for name, offset, length in ((beside(real, "-shm"), _SHM_DMS_BYTE, 1), (real, _DB_LOCK_BYTE, _DB_LOCK_BYTES)):
            if name == real and not real.exists():
                continue
            try:
                fds.append(os.open(name, os.O_RDWR | os.O_CREAT, 0o644))
            except OSError as exc:
                raise os_store_error(path, exc, f"cannot open {name} to see whether the store is in use") from None
            try:
                fcntl.lockf(fds[-1], fcntl.LOCK_EX | fcntl.LOCK_NB, length, offset)
            except OSError:
                raise in_use from None
        yield
    finally:
        for fd in fds:
            os.close(fd)


def _move_aside(real: Path) -> tuple[Path, ...]:
    """Rename the store file, then its -wal and -journal, to ``<store>.before-restore-<UTC time>``
    (plus the same suffixes), never over an existing file; returns the new names."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    aside, n = real.with_name(f"{real.name}.before-restore-{stamp}"), 1
    while any(os.path.lexists(f"{aside}{suffix}") for suffix in ("", "-wal", "-journal")):
        aside, n = real.with_name(f"{real.name}.before-restore-{stamp}-{n}"), n + 1
    kept = []
    for suffix in ("", "-wal", "-journal"):
        current = Path(f"{real}{suffix}")
        if os.path.lexists(current):
            os.rename(current, f"{aside}{suffix}")
            kept.append(Path(f"{aside}{suffix}"))
    return tuple(kept)


def _copy_database(source: sqlite3.Connection, staged: Path, named: Path, rows_of: Path | None = None) -> StoreSummary:
    """Copy ``source`` into the file ``staged`` (SQLite's backup API, one step), as one file in
    WAL mode, check the copy whole (``rows_of``: and read every row back, a damaged one refused
    naming ``rows_of``, the file copied) and fsync it; its summary is named ``named``."""
    try:
        target = sqlite3.connect(staged, isolation_level=None)
        try:
            source.backup(target)
            # WAL, as the store itself: a store restored from it is at once one whose readers the
            # next restore sees. Closing the copy checkpoints and removes its WAL: one file.
            mode = target.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise StoreError(f"{named}: SQLite could not put the copy in WAL mode (got {mode!r})")
            problem = quick_check(target, full=True)
            if problem:
                raise StoreError(
                    f"{named}: the copy does not check out ({problem}); run `autoscaler store check` on the store it was copied from"
                )
            if rows_of is not None:
                try:
                    read_every_row(target, rows_of)
                except StoreError as exc:
                    raise StoreError(f"{rows_of}: the backup does not pass `autoscaler store check`, so it is not restored: {exc}") from None
            summary = summary_of(target, named)
        finally:
            target.close()
        fd = os.open(staged, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except sqlite3.Error as exc:
        raise store_error(named, exc, "cannot write the copy") from None
    except OSError as exc:
        raise os_store_error(named, exc, "cannot write the copy") from None
    return summary


def _place(staged: Path, dest: Path, replace: bool) -> None:
    """Give the complete file ``staged`` the name ``dest``: atomically replacing it when ``replace``,
    else only if ``dest`` does not exist (a hard link refuses an existing name)."""
    try:
        if replace:
            os.replace(staged, dest)
        else:
            try:
                os.link(staged, dest)
            except FileExistsError:
                raise StoreError(f"{dest}: exists (it appeared while the copy was written); give --force to replace it") from None
            except OSError:  # a file system without hard links
                if os.path.lexists(dest):
                    raise StoreError(f"{dest}: exists; give --force to replace it") from None
                os.replace(staged, dest)
        _fsync_folder(dest.parent)
    except OSError as exc:
        raise os_store_error(dest, exc, "cannot write the backup") from None


def _copy_mode(real: Path, staged: Path) -> None:
    try:
        mode = real.stat().st_mode & 0o777 if real.exists() else 0o644 & ~_umask()
        os.chmod(staged, mode)
    except OSError:
        pass


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _fsync_folder(folder: Path) -> None:
    """Make a rename in ``folder`` durable; a file system that cannot sync a folder is let be."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
