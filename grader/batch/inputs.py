"""What a grade-all run grades, and whether an earlier grade still stands, per assignment.

Input: a folder whose subfolders are submissions (student id = folder name), or a CSV file of
`student_id,path[,submitted_at]` rows (a header row is optional; relative paths are relative to
the CSV's folder). `submitted_at` is the trusted submission time (ISO 8601 with a zone, e.g.
from the PR's grading run or your LMS; never a commit date) and the late policy applies to it.
It is part of the resume key (`resume_key`): the submission digest
(`grader.grading.intake.submission_digest`, the one result.json records) with `@<time>` appended.

A listing that gives no time for a student keeps the time of that student's previous grading
when the files are the same (`kept_times`), and says so; when the files changed, the old time
belongs to other work and dropping it would silently drop a late penalty, so the run refuses
unless the instructor passes `--drop-times`.

What decides a grade besides the submission (`grading_inputs`) is digested per assignment: the
assignment's own suites (`tests/public/<id>`, `tests/hidden/<id>`) and reference solution, plus
the parts every assignment shares (the suites' shared conftests, the grader package and its
version, course.toml). A student keeps an earlier assignment grade only when the resume key and
that assignment's digests are unchanged; `regrade_plan` says which assignments to grade and why,
so a fixed test regrades its assignment for everyone and nothing else.

Shards: `shard=(i, N)` (1-based, as in `--shard 2/4`) selects the students whose index in the
sorted list of all student ids satisfies `index % N == i - 1`.
"""

from __future__ import annotations

import csv
import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader import __version__
from grader.core.errors import UsageError
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


SHARED_PARTS = ("suites (shared)", "grader", "course.toml")


def _digest(paths: list[Path], seed: bytes = b"") -> str:
    h = hashlib.sha256(seed)
    for path in paths:
        _tree_digest(h, path, path.name)
    return h.hexdigest()


def grading_inputs(root: Path, assignments: list[str]) -> dict[str, dict[str, str]]:
    """{assignment: {part: digest}}: what decides that assignment's grade besides the work.

    Parts: its own suites and reference solution, and the shared ones (`SHARED_PARTS`: the
    suites' top-level conftests, the grader with its version, course.toml)."""
    root = Path(root)
    tests = [root / "tests" / "public", root / "tests" / "hidden"]
    shared = {
        "suites (shared)": _digest(
            [p for d in tests if d.is_dir() for p in sorted(d.glob("*")) if p.is_file()]
        ),
        "grader": _digest([GRADER_DIR], __version__.encode()),
        "course.toml": _digest([root / "course.toml"]),
    }
    return {
        a: {
            "suites": _digest([d / a for d in tests]),
            "reference": _digest([root / "solutions" / a]),
            **shared,
        }
        for a in assignments
    }


@dataclass(frozen=True)
class RegradePlan:
    """Which assignments of one student to grade in this run, and why ("", (): none).

    `partial`: some assignments keep their earlier grade, so this run's result is merged with
    the earlier result.json."""

    why: str
    assignments: tuple[str, ...]
    partial: bool = False


def regrade_plan(
    prev: dict[str, Any] | None, digest: str, inputs: dict[str, dict[str, str]], force: bool
) -> RegradePlan:
    """What to grade of a student whose previous state entry is `prev`.

    Everything when forced, new, failed last time, or when the submission (or its time)
    changed; otherwise the assignments whose own or shared inputs changed."""
    everything = tuple(inputs)
    if force:
        return RegradePlan("forced", everything)
    if prev is None:
        return RegradePlan("new", everything)
    if prev.get("status") != "ok":
        return RegradePlan("last grading failed", everything)
    if prev.get("digest") != digest:
        same_files = str(prev.get("digest", "")).split("@")[0] == digest.split("@")[0]
        why = "submission time changed" if same_files else "submission changed"
        return RegradePlan(why, everything)
    before = prev.get("inputs")
    if not isinstance(before, dict) or not all(isinstance(v, dict) for v in before.values()):
        return RegradePlan("graded by an older grader", everything)
    stale: dict[str, list[str]] = {}
    for a, parts in inputs.items():
        old = before.get(a)
        if not isinstance(old, dict):
            stale[a] = ["not graded before"]
            continue
        changed = [k for k in parts if old.get(k) != parts[k]]
        if changed:
            stale[a] = changed
    if not stale:
        return RegradePlan("", ())
    shared = {k for parts in stale.values() for k in parts if k in SHARED_PARTS}
    if len(stale) == len(inputs) and shared:
        return RegradePlan(", ".join(sorted(shared)) + " changed", everything)
    why = "; ".join(f"{a}: {', '.join(parts)} changed" for a, parts in stale.items())
    return RegradePlan(why, tuple(stale), partial=len(stale) < len(inputs))


def parse_shard(text: str | None) -> tuple[int, int] | None:
    """`"2/4"` -> (2, 4); None -> None. 1-based: shards 1/N .. N/N cover the class."""
    if text is None or text == "":
        return None
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if not m:
        raise UsageError(f"--shard {text!r}: expected i/N such as 2/4")
    return _check_shard((int(m.group(1)), int(m.group(2))))


def _check_shard(shard: tuple[int, int]) -> tuple[int, int]:
    i, n = shard
    if n < 1 or not 1 <= i <= n:
        raise UsageError(f"shard {i}/{n}: need 1 <= i <= N (shards are 1-based)")
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
        for lineno, row in enumerate(_csv_rows(src), 1):
            if not row or not "".join(row).strip() or row[0].lstrip().startswith("#"):
                continue
            if lineno == 1 and [c.strip().lower() for c in row[:2]] == ["student_id", "path"]:
                continue
            if len(row) < 2:
                raise UsageError(f"{src}:{lineno}: expected student_id,path")
            student, raw = row[0].strip(), row[1].strip()
            _check_student(student, f"{src}:{lineno}")
            if student in found:
                raise UsageError(f"{src}:{lineno}: student {student!r} listed twice")
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
        raise UsageError(f"{src}: neither a folder of submissions nor a CSV file")
    for student, p in found.items():
        if not p.is_dir():
            raise UsageError(f"submission of {student}: {p} is not a folder")
    return dict(sorted(found.items()))


def submission_times(submissions: Path) -> dict[str, str]:
    """{student id: trusted submission time} from the third column of a CSV listing (checked
    here, so a typo stops the batch before any grading); {} for a folder."""
    src = Path(submissions)
    if not src.is_file():
        return {}
    times: dict[str, str] = {}
    for lineno, row in enumerate(_csv_rows(src), 1):
        if len(row) < 3 or row[0].lstrip().startswith("#") or not row[2].strip():
            continue
        if lineno == 1 and row[2].strip().lower() == "submitted_at":
            continue
        try:
            times[row[0].strip()] = parse_timestamp(row[2].strip()).isoformat()
        except ValueError as exc:
            raise UsageError(f"{src}:{lineno}: submitted_at: {exc}") from exc
    return times


def _csv_rows(src: Path) -> list[list[str]]:
    """The rows of a class listing; a listing that cannot be read is the user's to fix."""
    try:
        with src.open(newline="", encoding="utf-8") as fh:
            return list(csv.reader(fh))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        why = f"{src}: cannot read the class listing ({exc}); save it as UTF-8 CSV"
        raise UsageError(why) from None


class DroppedTimes(UsageError):
    """A listing without the submission times an earlier grading of changed work used."""


def time_of(entry: dict[str, Any] | None) -> str | None:
    """The trusted submission time a state entry graded with (older entries: from its key)."""
    if not entry:
        return None
    when = entry.get("submitted_at")
    if isinstance(when, str) and when:
        return when
    _, at, rest = str(entry.get("digest", "")).partition("@")
    return rest if at and rest else None


def kept_times(
    found: dict[str, Path],
    times: dict[str, str],
    done: dict[str, dict[str, Any]],
    drop_times: bool = False,
) -> tuple[dict[str, str], list[str]]:
    """The listing's times, plus each earlier time the listing leaves out for the same files.

    Returns (times to grade with, students whose time was kept). Raises DroppedTimes naming
    every student whose files changed while the listing dropped their earlier time, unless
    `drop_times`: the regrade would otherwise lose a late penalty without anyone deciding so."""
    merged = dict(times)
    kept: list[str] = []
    refused: list[str] = []
    for student, path in found.items():
        prev = done.get(student)
        before = time_of(prev)
        if student in times or before is None or drop_times:
            continue
        assert prev is not None  # time_of(None) is None
        same_files = str(prev.get("digest", "")).split("@")[0] == submission_digest(path)
        if same_files:
            merged[student] = before
            kept.append(student)
        else:
            refused.append(f"{student} (graded before as submitted at {before})")
    if refused:
        raise DroppedTimes(
            "the listing gives no submission time for work that changed since a grading with "
            "one: " + ", ".join(refused) + ". Grading it without a time would drop a late "
            "penalty: list the times as student_id,path,submitted_at in a CSV, or pass "
            "--drop-times to grade those students without one."
        )
    return merged, sorted(kept)


def _check_student(student: str, where: str) -> None:
    if not STUDENT_ID.fullmatch(student):
        raise UsageError(
            f"{where}: student id {student!r} must be letters, digits, '.', '_' or '-' "
            "(it names a folder and a gradebook row)"
        )
