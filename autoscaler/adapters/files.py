"""Atomic file writes: a reader sees the old files or the whole new set, never a part of one."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from autoscaler.core.errors import AutoscalerError


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
