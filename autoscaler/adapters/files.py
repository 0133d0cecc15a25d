"""Files given by the user: atomic writes (a reader sees the old files or the whole new set, never a
part of one), and the check that an input path is a regular file before it is opened."""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

from autoscaler.core.errors import AutoscalerError, ConfigError


def file_kind(mode: int) -> str:
    """The kind of file an ``st_mode`` says, as words: "a FIFO", "a character device" ..."""
    for test, words in (
        (stat.S_ISREG, "a regular file"),
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return words
    return "not a file"


def require_regular_file(
    path: str | os.PathLike, flag: str, error: Callable[[str], AutoscalerError] = ConfigError
) -> None:
    """Nothing if ``path`` (symlinks followed) is a regular file, a folder or missing; else raises
    ``error`` (ConfigError unless given) with one line naming ``flag`` (the option or setting the
    path came from: "--store", "[carbon] source"), the path and its kind: "--trace /tmp/f: is a
    FIFO, not a regular file".

    Call it before opening a path the user gave for reading: opening a FIFO blocks until a writer
    comes, and a device reads forever. Only ``os.stat`` is used, which never blocks on them. A
    missing or unreadable path, and a folder, are left to the opener, whose messages for them
    say more (where the file was expected, how to make it).
    """
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return
    raise error(f"{flag} {path}: is {file_kind(mode)}, not a regular file")


def write_all_atomic(contents: dict[Path, str | bytes]) -> list[Path]:
    """Write every file through a temporary file in its folder, and rename them only once all are written.

    Files are created with mode 0644 (less the umask). A failure before the renames leaves every
    target untouched; raises AutoscalerError naming the target path, not the temporary one.
    """
    staged: list[tuple[str, Path]] = []
    try:
        for path, content in contents.items():
            path = Path(path)
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                if path.is_dir():
                    raise IsADirectoryError(f"{path} is a folder")
                fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
                staged.append((tmp, path))
                data = content.encode("utf-8") if isinstance(content, str) else content
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                    handle.flush()
                    os.fsync(handle.fileno())
                umask = os.umask(0)
                os.umask(umask)
                os.chmod(tmp, 0o644 & ~umask)
            except OSError as exc:
                raise AutoscalerError(f"cannot write {path}: {exc.strerror or exc}") from None
        for tmp, path in staged:
            try:
                os.replace(tmp, path)
            except OSError as exc:
                raise AutoscalerError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        for tmp, _ in staged:
            Path(tmp).unlink(missing_ok=True)
    return [path for _, path in staged]
