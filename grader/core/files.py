"""Atomic file writes: a reader sees the old file or the new one, never half of either.

The one way the grader replaces a file: the new content goes to a temporary file in the same
folder, is fsync'd, given its mode and renamed over the old one; on any error the temporary file
is removed and the old file is untouched. `atomic_write` does it for bytes or text in hand;
`atomic_path` hands the temporary path to another library that writes a file itself (SQLite
building a gradebook, nbgrader exporting a CSV).

Reports are read by people and by web servers other than the user who graded (a course
assistant, a Pages site), so they are written 0644 (before the umask), not the 0600 that
`tempfile.mkstemp` gives.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPORT_MODE = 0o644


def umask() -> int:
    """The process's umask (reading it means setting it: set it straight back)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextmanager
def atomic_path(
    path: Path | str, mode: int = REPORT_MODE, sync_dir: bool = False
) -> Iterator[Path]:
    """A temporary path beside `path`; what the block writes there replaces `path` when the block
    ends without an error. `sync_dir` also fsyncs the folder, so the rename survives a crash."""
    path = Path(path)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fchmod(fd, mode & ~umask())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if sync_dir:
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def atomic_write(path: Path | str, data: str | bytes, mode: int = REPORT_MODE) -> Path:
    """Write `data` to `path` atomically (see the module docstring); returns the path."""
    with atomic_path(path, mode) as tmp:
        tmp.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return Path(path)
