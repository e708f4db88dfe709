"""Atomic file writes: a reader sees the old file or the new one, never half of either.

Reports are read by people and by web servers other than the user who graded (a course
assistant, a Pages site), so they are written 0644 (before the umask), not the 0600 that
`tempfile.mkstemp` gives.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

REPORT_MODE = 0o644


def atomic_write(path: Path | str, data: str | bytes, mode: int = REPORT_MODE) -> Path:
    """Write `data` to `path` through a temporary file in the same folder, fsync'd and renamed."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, mode & ~umask)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data.encode("utf-8") if isinstance(data, str) else data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
