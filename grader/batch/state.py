"""`state.jsonl`, the commit log of a grade-all run: one JSON line per finished student.

The parent process alone writes it, after the student's reports and gradebook row, so a line is
the commit point of one student: a rerun skips a student whose latest line says "ok" for the same
resume key and grading digest (`grader.batch.inputs`). Lines are appended under a file lock (shards
may share a folder) and fsync'd; a torn last line (a crash mid-write) is ignored on reading and
never swallows the next. `compact()` rewrites the file atomically to one line per student.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import Any

STATE = "state.jsonl"


class StateFile:
    """`state.jsonl`: one JSON line per finished student; appended and fsync'd, never rewritten
    except by `compact()` (atomically, under the same lock)."""

    def __init__(self, path: Path):
        self.path = path
        self.lock_path = path.with_name(path.name + ".lock")

    def _lock(self) -> int:
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o664)
        fcntl.flock(fd, fcntl.LOCK_EX)
        return fd

    def read(self) -> dict[str, dict[str, Any]]:
        """The latest entry per student; a torn or corrupt line (a crash mid-write) is ignored."""
        latest: dict[str, dict[str, Any]] = {}
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return latest
        for line in text.splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict) and isinstance(entry.get("student"), str):
                latest[entry["student"]] = entry
        return latest

    def append(self, entry: dict[str, Any]) -> None:
        line = (json.dumps(entry, sort_keys=True) + "\n").encode()
        fd = self._lock()
        try:
            out = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o664)
            try:
                size = os.fstat(out).st_size
                if size:  # a torn last line must not swallow this one
                    with open(self.path, "rb") as fh:
                        fh.seek(size - 1)
                        if fh.read(1) != b"\n":
                            line = b"\n" + line
                os.write(out, line)
                os.fsync(out)
            finally:
                os.close(out)
        finally:
            os.close(fd)

    def compact(self) -> None:
        fd = self._lock()
        try:
            entries = self.read()
            tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
            with open(tmp, "w", encoding="utf-8") as fh:
                for student in sorted(entries):
                    fh.write(json.dumps(entries[student], sort_keys=True) + "\n")
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        finally:
            os.close(fd)
