"""Reading back, in the trusted process, what student code wrote into its scratch directory.

The directory belongs to the student's process, which may have planted symlinks, FIFOs, device
nodes or huge files there. Every path component is opened relative to the one before with
``O_NOFOLLOW`` (a symlink anywhere fails), the file must be a regular file (``fstat`` on the open
descriptor, so it cannot be swapped after the check) and at most `max_bytes` are read.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path, PurePosixPath

from grader.core.errors import SubmissionError

READ_MAX_BYTES = 1 << 20
LIST_MAX_NAMES = 10_000
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class ReadBackError(SubmissionError):
    """A path the student's code named cannot be read back safely (why, for feedback)."""


def _parts(rel: str) -> list[str]:
    p = PurePosixPath(rel)
    if p.is_absolute() or any(x in ("..", "") for x in p.parts) or "\0" in rel:
        raise ReadBackError(f"{rel!r}: only relative paths inside the working directory")
    return [x for x in p.parts if x != "."]


def _open_dir(base: Path, parts: list[str]) -> int:
    # `base` is the grader's choice (it may be a /proc/self/fd link to the sandbox's scratch
    # tmpfs), so it alone is followed; everything below it is the student's and is not.
    fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts:
            nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_file(base: Path, rel: str, max_bytes: int = READ_MAX_BYTES) -> bytes | None:
    """The bytes of regular file `rel` under `base`; None when it does not exist."""
    parts = _parts(rel)
    if not parts:
        raise ReadBackError(f"{rel!r} names a directory, not a file")
    try:
        dfd = _open_dir(base, parts[:-1])
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ReadBackError(
            f"{rel}: a folder on the way is not a plain folder ({exc.strerror})"
        ) from None
    try:
        try:
            fd = os.open(parts[-1], _FILE_FLAGS, dir_fd=dfd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise ReadBackError(
                f"{rel} is not a regular file the grader may read ({exc.strerror}); write "
                "a plain file, not a link"
            ) from None
        with contextlib.closing(os.fdopen(fd, "rb")) as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise ReadBackError(f"{rel} is not a regular file (a FIFO, device or folder)")
            data = f.read(max_bytes + 1)
    finally:
        os.close(dfd)
    if len(data) > max_bytes:
        raise ReadBackError(f"{rel} is larger than {max_bytes} bytes")
    return data


def list_dir(base: Path, rel: str = ".") -> list[str]:
    """Sorted names in folder `rel` under `base` (empty when it does not exist)."""
    try:
        fd = _open_dir(base, _parts(rel))
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise ReadBackError(f"{rel}: not a plain folder ({exc.strerror})") from None
    try:
        names = os.listdir(fd)
    finally:
        os.close(fd)
    if len(names) > LIST_MAX_NAMES:
        raise ReadBackError(f"{rel} holds more than {LIST_MAX_NAMES} entries")
    return sorted(names)
