"""The staff's data: extensions and overrides, kept with the staff, never in the student repository.

Two files in the staff folder (`staff/` beside course.toml in the instructor repository by
default, `--staff DIR` otherwise; `grader export-student` never copies it, and course.toml, which
students get, holds none of it):

    staff/extensions.toml   written by hand: one [[extension]] table per student and assignment

        [[extension]]
        student = "ada"
        assignment = "m9_roofline"
        hours = 48                               # or: due = 2026-12-23T23:59:00+00:00
        note = "medical certificate, 12 Dec"     # optional; the staff's own, never shown

    staff/overrides.toml    a log appended by `grader override`: one [[override]] table per
                            decision, the last one for a student, assignment and test standing

        [[override]]
        student = "bo"
        assignment = "m9_roofline"
        test = "hidden/test_crossover_batch_random"   # left out: the assignment's whole score
        points = 3.5
        reason = "the test rejected a valid None at context 0"
        by = "lecturer@example.edu"
        at = 2026-12-20T10:00:00+00:00
        remove = false                                # true: the earlier override is undone

Validation is strict, like course.toml's: an unknown key, an unknown assignment, a student id
that cannot be one, points off the grid of whole eighths (`grader.core.points`) or over the
assignment's maximum, two extensions for one student and assignment: each a `StaffError`
naming the file and the line of its table. `Staff.check_students` holds the students against
a class (grade-all's listing): an entry for a student the class does not hold is an error too.

What the data does is elsewhere: an extension moves the due date the late policy and the
feedback policy see (`Staff.due`); overrides are applied after grading
(`grader.grading.finalize`).
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from grader.core import points
from grader.core.course import Course
from grader.core.errors import UsageError
from grader.core.files import atomic_write

STAFF_DIR = "staff"
EXTENSIONS = "extensions.toml"
OVERRIDES = "overrides.toml"
# a student id names a folder and a gradebook row; a GitHub login is one
STUDENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
MAX_REASON_CHARS = 2000
_EXTENSION_KEYS = {"student": str, "assignment": str, "hours": float, "due": datetime, "note": str}
_OVERRIDE_KEYS = {
    "student": str,
    "assignment": str,
    "test": str,
    "points": float,
    "reason": str,
    "by": str,
    "at": datetime,
    "remove": bool,
}


class StaffError(UsageError):
    """The staff's data is invalid; the message names the file, the line and what to fix."""


@dataclass(frozen=True)
class Extension:
    """A student's own due date for one assignment (the course's, moved later)."""

    student: str
    assignment: str
    due: datetime
    note: str = ""
    where: str = ""  # file:line of its table


@dataclass(frozen=True)
class Override:
    """One instructor decision: a test's points (`test`), or the assignment's score (`test`
    None), with why, who and when; `remove` undoes the decision before it."""

    student: str
    assignment: str
    test: str | None
    points: float | None
    reason: str
    by: str
    at: str  # ISO 8601 with a zone
    remove: bool = False
    where: str = ""

    @property
    def key(self) -> tuple[str, str, str | None]:
        return (self.student, self.assignment, self.test)

    def record(self) -> dict[str, Any]:
        """What a result keeps of it (grader.core.results: `override` of a test or assignment)."""
        return {"points": self.points, "reason": self.reason, "by": self.by, "at": self.at}


@dataclass(frozen=True)
class Staff:
    """The staff's data for a course: extensions by (student, assignment), and the override log
    in order. Empty when the course keeps none (`folder` None)."""

    folder: Path | None = None
    extensions: dict[tuple[str, str], Extension] = field(default_factory=dict)
    log: tuple[Override, ...] = ()

    def extension(self, student: str, assignment: str) -> Extension | None:
        return self.extensions.get((student, assignment))

    def due(self, course: Course, student: str, assignment: str) -> datetime:
        """The due date that applies to this student: the course's, or their extension's."""
        ext = self.extension(student, assignment)
        return ext.due if ext is not None else course.assignment(assignment).due

    def overrides(self, student: str) -> dict[tuple[str, str | None], Override]:
        """The student's standing overrides by (assignment, test): the last decision for each,
        less those removed."""
        standing: dict[tuple[str, str | None], Override] = {}
        for o in self.log:
            if o.student != student:
                continue
            if o.remove:
                standing.pop((o.assignment, o.test), None)
            else:
                standing[(o.assignment, o.test)] = o
        return standing

    def students(self) -> set[str]:
        return {s for s, _ in self.extensions} | {o.student for o in self.log}

    def check_students(self, students: Iterable[str], what: str = "the class") -> None:
        """Every student the data names is one of `students`; else the first stranger's line."""
        known = set(students)
        entries: list[Extension | Override] = [*self.extensions.values(), *self.log]
        for entry in entries:
            if entry.student not in known:
                raise StaffError(
                    f"{entry.where}: student {entry.student!r} is not in {what}; correct the id "
                    "or remove the entry"
                )


def staff_folder(root: Path, given: Path | str | None = None) -> Path:
    """`given`, or the course's default `<root>/staff`."""
    return Path(given) if given is not None else Path(root) / STAFF_DIR


def load_staff(folder: Path | str | None, course: Course) -> Staff:
    """The staff's data in `folder` (either file may be absent), validated against `course`."""
    if folder is None:
        return Staff()
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise StaffError(f"{folder}: the staff data is a folder (extensions.toml, overrides.toml)")
    extensions: dict[tuple[str, str], Extension] = {}
    for ext in _entries(folder / EXTENSIONS, "extension", _EXTENSION_KEYS, course, _extension):
        key = (ext.student, ext.assignment)
        if key in extensions:
            raise StaffError(
                f"{ext.where}: a second extension for {ext.student} on {ext.assignment} (the "
                f"first at {extensions[key].where}); keep one"
            )
        extensions[key] = ext
    log = tuple(_entries(folder / OVERRIDES, "override", _OVERRIDE_KEYS, course, _override))
    return Staff(folder if folder.is_dir() else None, extensions, log)


def _entries(path: Path, table: str, keys: dict[str, type], course: Course, make: Any) -> list:
    """Each `[[table]]` of the file at `path` made into its entry, with its line; [] without it."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as exc:
        raise StaffError(f"{path}: cannot read it ({exc}); save it as UTF-8") from None
    return _parse(text, path, table, keys, course, make)


def _parse(
    text: str, path: Path, table: str, keys: dict[str, type], course: Course, make: Any
) -> list:
    """The entries of one staff file's text (see `_entries`)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise StaffError(f"{path}: not valid TOML: {exc}") from None
    unknown = sorted(set(data) - {table})
    if unknown:
        raise StaffError(f"{path}: unknown key {unknown[0]!r}: write [[{table}]] tables only")
    rows = data.get(table, [])
    lines = [
        n
        for n, line in enumerate(text.splitlines(), 1)
        if re.fullmatch(rf"\s*\[\[\s*{table}\s*\]\]\s*(#.*)?", line)
    ]
    if not isinstance(rows, list) or len(lines) != len(rows):
        raise StaffError(f"{path}: write each entry as its own [[{table}]] table")
    out = []
    for row, line in zip(rows, lines, strict=True):
        where = f"{path}:{line}"
        _check_keys(where, row, keys)
        out.append(make(where, row, course))
    return out


def _check_keys(where: str, row: dict[str, Any], keys: dict[str, type]) -> None:
    unknown = sorted(set(row) - set(keys))
    if unknown:
        raise StaffError(f"{where}: unknown key {unknown[0]!r}; allowed: {', '.join(keys)}")
    for name, kind in keys.items():
        if name not in row:
            continue
        value = row[name]
        ok = isinstance(value, kind) and (kind is bool or not isinstance(value, bool))
        if kind is float:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if kind is datetime and isinstance(value, str):
            try:
                value = row[name] = datetime.fromisoformat(value)
            except ValueError:
                ok = False
            else:
                ok = True
        if not ok:
            raise StaffError(f"{where}: {name} = {value!r} is not a {kind.__name__}")
        if kind is datetime and (value.tzinfo is None or value.utcoffset() is None):
            raise StaffError(f"{where}: {name} = {value.isoformat()} needs a time zone (+00:00)")


def _who(where: str, row: dict[str, Any], course: Course) -> tuple[str, str]:
    for name in ("student", "assignment"):
        if name not in row:
            raise StaffError(f"{where}: missing key {name!r}")
    student, assignment = row["student"], row["assignment"]
    if not STUDENT_ID.fullmatch(student):
        raise StaffError(f"{where}: {student!r} is not a student id (letters, digits, . _ -)")
    if assignment not in course.assignment_ids:
        raise StaffError(
            f"{where}: unknown assignment {assignment!r}; course.toml defines: "
            f"{', '.join(course.assignment_ids)}"
        )
    return student, assignment


def _extension(where: str, row: dict[str, Any], course: Course) -> Extension:
    student, assignment = _who(where, row, course)
    course_due = course.assignment(assignment).due
    if ("hours" in row) == ("due" in row):
        raise StaffError(f"{where}: give the extension as hours = H or due = DATE (one of them)")
    if "hours" in row:
        hours = float(row["hours"])
        if not 0 < hours <= 24 * 366:
            raise StaffError(f"{where}: hours = {hours:g} must be positive (and under a year)")
        due = course_due + timedelta(hours=hours)
    else:
        due = row["due"]
        if due <= course_due:
            raise StaffError(
                f"{where}: due = {due.isoformat()} is not after the course's due date "
                f"{course_due.isoformat()}; an extension moves it later"
            )
    return Extension(student, assignment, due, str(row.get("note", "")), where)


def _override(where: str, row: dict[str, Any], course: Course) -> Override:
    student, assignment = _who(where, row, course)
    remove = bool(row.get("remove", False))
    for name in ("reason", "by", "at"):
        if name not in row:
            raise StaffError(f"{where}: missing key {name!r}")
    reason = row["reason"].strip()
    if not reason or len(reason) > MAX_REASON_CHARS:
        raise StaffError(f"{where}: reason must say why, in 1 to {MAX_REASON_CHARS} characters")
    test = row.get("test")
    if test is not None and not test.strip():
        raise StaffError(f"{where}: test is empty; name a test or leave the key out")
    value = row.get("points")
    if value is None and not remove:
        raise StaffError(f"{where}: missing key 'points'")
    if value is not None:
        value = float(value)
        if value < 0 or points.stored(value) != value:
            raise StaffError(
                f"{where}: points = {value!r}: points are whole eighths of a point, at least 0 "
                "(e.g. 3, 2.5, 1.125)"
            )
        top = course.assignment(assignment).points
        if value > top:
            raise StaffError(f"{where}: points = {value:g} is over {assignment}'s {top:g}")
    return Override(
        student, assignment, test, value, reason, row["by"], row["at"].isoformat(), remove, where
    )


def toml_string(text: str) -> str:
    """`text` as a TOML basic string (quotes, backslashes and control characters escaped)."""
    out = []
    for ch in text:
        code = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch in "\n\t\r":
            out.append({"\n": "\\n", "\t": "\\t", "\r": "\\r"}[ch])
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\u{code:04X}")
        elif 0xD800 <= code <= 0xDFFF:
            raise StaffError("the text holds a character that is not Unicode text; retype it")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def now_iso() -> str:
    """Now, in UTC to the second (when a decision is recorded)."""
    return datetime.now(UTC).replace(microsecond=0).isoformat()


def append_override(folder: Path | str, course: Course, decision: Override) -> Path:
    """Append one decision to the override log, after proving the log still loads with it;
    the file is replaced whole and atomically, so a refusal or a crash loses nothing."""
    folder = Path(folder)
    path = folder / OVERRIDES
    if decision.points is not None and points.stored(decision.points) != decision.points:
        raise StaffError(f"points = {decision.points!r}: points are whole eighths (e.g. 2.5)")
    old = path.read_text(encoding="utf-8") if path.is_file() else (
        "# Instructor overrides, appended by `grader override`; the last decision for a student,\n"
        "# assignment and test stands. Applied after grading, on every regrade.\n"
    )  # fmt: skip
    block = ["", "[[override]]"]
    block.append(f"student = {toml_string(decision.student)}")
    block.append(f"assignment = {toml_string(decision.assignment)}")
    if decision.test is not None:
        block.append(f"test = {toml_string(decision.test)}")
    if decision.points is not None:
        block.append(f"points = {points.shown(decision.points)}")
    block.append(f"reason = {toml_string(decision.reason)}")
    block.append(f"by = {toml_string(decision.by)}")
    block.append(f"at = {decision.at}")
    if decision.remove:
        block.append("remove = true")
    text = old + ("" if old.endswith("\n") or not old else "\n") + "\n".join(block) + "\n"
    _parse(text, path, "override", _OVERRIDE_KEYS, course, _override)  # refused: nothing written
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write(path, text)
    return path
