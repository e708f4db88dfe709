"""What a grade-all run grades, and whether an earlier grade still stands.

Input: a folder whose subfolders are submissions (student id = folder name), or a CSV file of
`student_id,path[,submitted_at]` rows (a header row is optional; relative paths are relative to
the CSV's folder). `submitted_at` is the trusted submission time (ISO 8601 with a zone, e.g.
from the PR's grading run or your LMS; never a commit date) and the late policy applies to it;
without it no late policy is applied. It is part of the resume key (`resume_key`): the
submission digest (`grader.grading.intake.submission_digest`, the one result.json records) with
`@<time>` appended.

A student keeps an earlier grade only when the resume key *and* the grading digest
(`grading_inputs`: the test suites, the grader package, course.toml and the reference solutions)
are unchanged; `regrade_reason` says why not.

Shards: `shard=(i, N)` (1-based, as in `--shard 2/4`) selects the students whose index in the
sorted list of all student ids satisfies `index % N == i - 1`.
"""

from __future__ import annotations

import csv
import hashlib
import os
import re
from pathlib import Path
from typing import Any

from grader import __version__
from grader.core.late import parse_timestamp
from grader.grading.intake import submission_digest

STUDENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
GRADING_SKIP = {"__pycache__", ".pytest_cache", ".ipynb_checkpoints", ".git", ".venv"}
GRADER_DIR = Path(__file__).resolve().parents[1]


def resume_key(submission: Path, submitted_at: str | None = None) -> str:
    """The submission part of the resume key: its digest, and its trusted time when it has one
    (a new time changes the late penalty, so it regrades)."""
    key = submission_digest(submission)
    return f"{key}@{submitted_at}" if submitted_at else key


def _tree_digest(h: Any, root: Path, label: str) -> None:
    """Feed every regular file under root (sorted, caches skipped) into h, length-prefixed."""
    files: list[Path] = []
    if root.is_file():
        files = [root]
    elif root.is_dir():
        for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
            dirnames[:] = sorted(d for d in dirnames if d not in GRADING_SKIP)
            files += [Path(dirpath, f) for f in filenames if not f.endswith((".pyc", ".pyo"))]
    for p in sorted(files):
        rel = f"{label}/{p.relative_to(root).as_posix()}" if root.is_dir() else label
        data = p.read_bytes() if p.is_file() and not p.is_symlink() else b""
        for chunk in (rel.encode(), data):
            h.update(len(chunk).to_bytes(8, "big"))
            h.update(chunk)


def grading_inputs(root: Path) -> dict[str, str]:
    """A digest per thing that decides a grade besides the submission: the suites (public and
    hidden), the grader (its version and its source), course.toml and the reference solutions.
    A change in any of them makes every earlier grade stale."""
    root = Path(root)
    parts = {
        "suites": [root / "tests" / "public", root / "tests" / "hidden"],
        "grader": [GRADER_DIR],
        "course.toml": [root / "course.toml"],
        "reference": [root / "solutions"],
    }
    out: dict[str, str] = {}
    for name, paths in parts.items():
        h = hashlib.sha256(__version__.encode() if name == "grader" else b"")
        for path in paths:
            _tree_digest(h, path, path.name)
        out[name] = h.hexdigest()
    return out


def regrade_reason(
    prev: dict[str, Any] | None, digest: str, inputs: dict[str, str], force: bool
) -> str:
    """Why a student is graded in this run; "" when their earlier grade still stands."""
    if force:
        return "forced"
    if prev is None:
        return "new"
    if prev.get("status") != "ok":
        return "last grading failed"
    if prev.get("digest") != digest:
        same_files = str(prev.get("digest", "")).split("@")[0] == digest.split("@")[0]
        return "submission time changed" if same_files else "submission changed"
    before = prev.get("inputs")
    if not isinstance(before, dict):
        return "graded by an older grader"
    changed = [k for k in inputs if before.get(k) != inputs[k]]
    return (", ".join(changed) + " changed") if changed else ""


def parse_shard(text: str | None) -> tuple[int, int] | None:
    """`"2/4"` -> (2, 4); None -> None. 1-based: shards 1/N .. N/N cover the class."""
    if text is None or text == "":
        return None
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if not m:
        raise ValueError(f"--shard {text!r}: expected i/N such as 2/4")
    return _check_shard((int(m.group(1)), int(m.group(2))))


def _check_shard(shard: tuple[int, int]) -> tuple[int, int]:
    i, n = shard
    if n < 1 or not 1 <= i <= n:
        raise ValueError(f"shard {i}/{n}: need 1 <= i <= N (shards are 1-based)")
    return shard


def select_shard(students: list[str], shard: tuple[int, int] | None) -> list[str]:
    """The students of `shard` (all of them for None), sorted."""
    ordered = sorted(students)
    if shard is None:
        return ordered
    i, n = _check_shard(shard)
    return [s for k, s in enumerate(ordered) if k % n == i - 1]


def discover(submissions: Path, exclude: Path | None = None) -> dict[str, Path]:
    """{student id: submission folder}: subfolders of a folder, or the rows of a CSV file."""
    src = Path(submissions)
    found: dict[str, Path] = {}
    if src.is_file():
        with src.open(newline="", encoding="utf-8") as fh:
            for lineno, row in enumerate(csv.reader(fh), 1):
                if not row or not "".join(row).strip() or row[0].lstrip().startswith("#"):
                    continue
                if lineno == 1 and [c.strip().lower() for c in row[:2]] == ["student_id", "path"]:
                    continue
                if len(row) < 2:
                    raise ValueError(f"{src}:{lineno}: expected student_id,path")
                student, raw = row[0].strip(), row[1].strip()
                _check_student(student, f"{src}:{lineno}")
                if student in found:
                    raise ValueError(f"{src}:{lineno}: student {student!r} listed twice")
                p = Path(raw)
                found[student] = p if p.is_absolute() else src.parent / p
    elif src.is_dir():
        skip = exclude.resolve() if exclude is not None else None
        for p in sorted(src.iterdir()):
            if not p.is_dir() or p.name.startswith(".") or p.resolve() == skip:
                continue
            _check_student(p.name, str(p))
            found[p.name] = p
    else:
        raise ValueError(f"{src}: neither a folder of submissions nor a CSV file")
    for student, p in found.items():
        if not p.is_dir():
            raise ValueError(f"submission of {student}: {p} is not a folder")
    return dict(sorted(found.items()))


def submission_times(submissions: Path) -> dict[str, str]:
    """{student id: trusted submission time} from the third column of a CSV listing (checked
    here, so a typo stops the batch before any grading); {} for a folder."""
    src = Path(submissions)
    if not src.is_file():
        return {}
    times: dict[str, str] = {}
    with src.open(newline="", encoding="utf-8") as fh:
        for lineno, row in enumerate(csv.reader(fh), 1):
            if len(row) < 3 or row[0].lstrip().startswith("#") or not row[2].strip():
                continue
            if lineno == 1 and row[2].strip().lower() == "submitted_at":
                continue
            try:
                times[row[0].strip()] = parse_timestamp(row[2].strip()).isoformat()
            except ValueError as exc:
                raise ValueError(f"{src}:{lineno}: submitted_at: {exc}") from exc
    return times


def _check_student(student: str, where: str) -> None:
    if not STUDENT_ID.fullmatch(student):
        raise ValueError(
            f"{where}: student id {student!r} must be letters, digits, '.', '_' or '-' "
            "(it names a folder and a gradebook row)"
        )
