"""Grades into nbgrader's gradebook (gradebook.db), so `nbgrader export` and formgrader read them.

Mapping onto nbgrader's model (nbgrader.api):

| course                        | nbgrader                                                        |
|-------------------------------|-----------------------------------------------------------------|
| assignment (course.toml)      | `Assignment(name=id, duedate=due as naive UTC, course_id)`      |
| the assignment's notebook     | `Notebook(name=id)`, one per assignment                         |
| one test (pytest node)        | `GradeCell(name=test name, max_score=points, cell_type="code")` |
| student id                    | `Student(id=...)`                                               |
| one grading of a submission   | `SubmittedAssignment(timestamp=trusted time, naive UTC)` with   |
|                               | one `SubmittedNotebook` and one `Grade` per grade cell          |
| a test's score                | `Grade.auto_score`                                              |
| late penalty (a fraction)     | `SubmittedNotebook.late_submission_penalty`, in *points*        |
| the student's extension       | `SubmittedAssignment.extension` (extended due date - due date)  |
| an instructor's override      | a test's: its `Grade.auto_score`; the assignment's score: in    |
|                               | the penalty column (raw - score, below), negative when raised   |

Late penalty: nbgrader stores the penalty in points on the submitted notebook (its
`LateSubmissionPlugin` writes it during `nbgrader autograde`; `SubmittedAssignment.
late_submission_penalty` is the sum over notebooks) and `nbgrader export` subtracts it:
`score = max(0, raw - penalty)`. We never run `nbgrader autograde`, so nbgrader's own late plugin
and its config never run; we store the points the late policy took (raw - score, whole eighths:
grader.core.points) in that column, and nbgrader's export then reports exactly the result's score.
An instructor's override of a whole assignment's score (grader.grading.finalize) lands in the
same column, since it is what makes the score differ from the raw score: `nbgrader export` then
prints the overridden score (a raised score is a negative penalty). A test's override is its
grade's `auto_score`: the tests' sum stays the raw score.

Grade cells are created on first sight. A regrade replaces the student's `auto_score`s in place
(unique rows: one submission per student and assignment, one grade per cell); a human's
`manual_score` from formgrader is kept, as `nbgrader autograde` keeps it. A grade cell without a
result in this grading (a test that no longer exists, or a cell created after another student was
graded) gets `auto_score=None, needs_manual_grade=True`, so formgrader flags it instead of
silently scoring it 0.

Concurrency: every write holds an exclusive `fcntl.flock` on `<db>.lock` (parallel batch shards on
one file system, or a CLI run beside a batch) and SQLite's busy timeout covers readers such as
formgrader; each student's write is one `BEGIN IMMEDIATE` transaction, so a crash, a full disk or a
read-only directory leaves the previous state of the database intact (SQLite's journal rolls an
interrupted transaction back). A new database is built under a temporary name and renamed into
place (grader.core.files.atomic_path, as the exported CSV), so no half-created schema is ever
visible.

nbgrader, SQLAlchemy and alembic are imported where they are used (lazy: together they take about
a second to import, and every spawned batch child imports grader.batch, and with it this module,
without writing a gradebook).
"""

from __future__ import annotations

import csv
import errno
import fcntl
import os
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grader.core.course import Course
from grader.core.errors import UsageError
from grader.core.files import atomic_path
from grader.core.late import parse_timestamp
from grader.core.points import shown, stored, total
from grader.core.results import GradeResult, TestResult

if TYPE_CHECKING:
    from nbgrader.api import Gradebook
    from sqlalchemy.orm import Session

BUSY_TIMEOUT_S = 60.0
LOCK_TIMEOUT_S = 300.0


class GradebookError(UsageError, OSError):
    """The gradebook could not be written (read-only directory, full disk, locked, corrupt)."""

    def __init__(self, path: Path | str, reason: str):
        super().__init__(f"gradebook {path}: {reason}")
        self.path = Path(path)
        self.reason = reason


def _url(path: Path) -> str:
    text = str(path)
    if any(c in text for c in "?#%"):
        raise GradebookError(path, "the path may not contain '?', '#' or '%'")
    return f"sqlite:///{text}?timeout={BUSY_TIMEOUT_S:g}"


def _naive_utc(value: datetime | str | None) -> datetime | None:
    """nbgrader stores times as naive UTC (see nbgrader.utils.parse_utc)."""
    if value is None:
        return None
    if isinstance(value, str):
        value = parse_timestamp(value)
    if value.tzinfo is None:
        raise ValueError(f"time {value.isoformat()} has no time zone")
    return value.astimezone(UTC).replace(tzinfo=None)


def cell_names(tests: list[TestResult]) -> list[str]:
    """Grade-cell names for a list of tests: the test's name; `suite/name` only where two suites
    of one assignment share a test name (a grade cell's name is unique within its notebook)."""
    counts = Counter(t.name for t in tests)
    names = [t.name if counts[t.name] == 1 else f"{t.suite}/{t.name}" for t in tests]
    seen: Counter[str] = Counter()
    out = []
    for n in names:
        seen[n] += 1
        out.append(n if seen[n] == 1 else f"{n}#{seen[n]}")
    return out


@contextmanager
def _locked(db_path: Path, timeout: float = LOCK_TIMEOUT_S) -> Iterator[None]:
    lock = db_path.with_name(db_path.name + ".lock")
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o664)
    except OSError as exc:
        if not lock.exists():
            raise GradebookError(
                db_path, f"cannot create the lock file {lock}: {exc.strerror}"
            ) from exc
        fd = os.open(lock, os.O_RDONLY)  # flock works on a read-only descriptor too
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise GradebookError(db_path, f"cannot lock {lock}: {exc.strerror}") from exc
                if time.monotonic() > deadline:
                    raise GradebookError(
                        db_path, f"another writer held {lock} for over {timeout:.0f} s"
                    ) from exc
                time.sleep(0.02)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _alembic_head() -> str | None:
    """nbgrader's current schema revision, read in-process (nbgrader shells out to `alembic`)."""
    import nbgrader  # lazy: see the module docstring
    from alembic.script import ScriptDirectory

    return ScriptDirectory(str(Path(nbgrader.__file__).parent / "alembic")).get_current_head()


def _create_database(db_path: Path) -> None:
    """Build an empty nbgrader gradebook under a temporary name, then rename it into place."""
    from nbgrader.api import Base  # lazy: see the module docstring
    from sqlalchemy import create_engine, text

    with atomic_path(db_path, sync_dir=True) as tmp:
        engine = create_engine(_url(tmp))
        try:
            with engine.begin() as conn:
                Base.metadata.create_all(conn)
                conn.execute(
                    text("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)")
                )
                conn.execute(
                    text("INSERT INTO alembic_version (version_num) VALUES (:v)"),
                    {"v": _alembic_head()},
                )
        finally:
            engine.dispose()


@contextmanager
def open_gradebook(
    db_path: Path | str, course_id: str | None = None, create: bool = True
) -> Iterator[Gradebook]:
    """nbgrader's `Gradebook` on `db_path` (created with nbgrader's schema when missing).

    Errors of the database or the file system become GradebookError.
    """
    from nbgrader.api import Gradebook  # lazy: see the module docstring
    from sqlalchemy.exc import SQLAlchemyError

    path = Path(db_path).absolute()
    try:
        if not path.exists():
            if not create:
                raise GradebookError(path, "no such gradebook")
            _create_database(path)
        gb = Gradebook(_url(path), course_id=course_id or "")
    except (SQLAlchemyError, OSError) as exc:
        if isinstance(exc, GradebookError):
            raise
        raise GradebookError(path, _reason(exc)) from exc
    try:
        yield gb
    finally:
        gb.close()


def _reason(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None)
    text = str(orig if orig is not None else exc)
    hints = {
        "readonly": " (is the directory or the file read-only?)",
        "unable to open": " (is the directory missing or read-only?)",
        "disk is full": " (free some space; the database was left as it was)",
        "disk I/O": " (free some space or check the file system; the database was rolled back)",
    }
    for key, hint in hints.items():
        if key in text:
            return text + hint
    return text


def record(db_path: Path | str, result: GradeResult, course: Course) -> None:
    """Record (or replace) one student's grades, one transaction under an exclusive file lock."""
    from sqlalchemy.exc import SQLAlchemyError  # lazy: see the module docstring

    path = Path(db_path).absolute()
    for a in result.assignments:
        course.assignment(a.id)  # unknown assignment: CourseError before touching the database
    if not result.student:
        raise ValueError("result has no student id")
    if not path.parent.is_dir():
        raise GradebookError(path, f"directory {path.parent} does not exist")
    with _locked(path):
        with open_gradebook(path, course.id) as gb:
            session = gb.db
            try:
                _write(session, result, course)
                session.commit()
            except SQLAlchemyError as exc:
                session.rollback()
                raise GradebookError(path, _reason(exc)) from exc
            except BaseException:
                session.rollback()
                raise


def _get_or_add(session: Session, model: Any, key: dict, **fields: Any) -> Any:
    """The row of `model` matching `key`, or a new one made of `fields`, added and flushed (so
    that it has its id)."""
    row = session.query(model).filter_by(**key).one_or_none()
    if row is None:
        row = model(**fields)
        session.add(row)
        session.flush()
    return row


def _write(session: Session, result: GradeResult, course: Course) -> None:
    """Upsert one student's result into nbgrader's tables, inside one write transaction.

    Long because it walks nbgrader's row chain in order (student, assignment, notebook, cells,
    submission, grades), each step needing the rows the one before it made or found."""
    from nbgrader.api import (  # lazy: see the module docstring
        Assignment,
        Grade,
        GradeCell,
        Notebook,
        Student,
        SubmittedAssignment,
        SubmittedNotebook,
    )
    from sqlalchemy import text  # lazy: with nbgrader.api above

    # take the write lock now, so that every read below belongs to this transaction
    session.execute(text("BEGIN IMMEDIATE"))
    timestamp = _naive_utc(result.timestamp)
    student = session.get(Student, result.student)
    if student is None:
        student = Student(id=result.student)
        session.add(student)
    for a in result.assignments:
        due = _naive_utc(course.assignment(a.id).due)
        assignment = _get_or_add(
            session, Assignment, {"name": a.id}, name=a.id, duedate=due, course_id=course.id
        )
        if assignment.duedate != due:
            assignment.duedate = due
        key = {"name": a.id, "assignment_id": assignment.id}
        notebook = _get_or_add(session, Notebook, key, name=a.id, assignment=assignment)

        cells = {c.name: c for c in notebook.grade_cells}
        by_name: dict[str, TestResult] = {}
        new_cells = []
        for name, t in zip(cell_names(a.tests), a.tests, strict=True):
            by_name[name] = t
            cell = cells.get(name)
            if cell is None:
                cell = GradeCell(
                    name=name, notebook=notebook, max_score=float(t.max_score), cell_type="code"
                )
                session.add(cell)
                cells[name] = cell
                new_cells.append(cell)
            elif cell.max_score != float(t.max_score):
                cell.max_score = float(t.max_score)
        session.flush()

        key = {"assignment_id": assignment.id, "student_id": student.id}
        fields = {"assignment": assignment, "student": student, "timestamp": timestamp}
        submission = _get_or_add(session, SubmittedAssignment, key, **fields)
        submission.timestamp = timestamp
        # the student's extension, as nbgrader keeps one (its `duedate` adds it)
        extended = _naive_utc(a.extended_due) if a.extended_due else None
        submission.extension = extended - due if extended is not None and due else None
        session.flush()
        key = {"notebook_id": notebook.id, "assignment_id": submission.id}
        snb = _get_or_add(session, SubmittedNotebook, key, notebook=notebook, assignment=submission)

        if new_cells:  # other students' notebooks get an ungraded row, flagged for a human
            others = (
                session.query(SubmittedNotebook)
                .filter(SubmittedNotebook.notebook_id == notebook.id)
                .filter(SubmittedNotebook.id != snb.id)
                .all()
            )
            for other in others:
                for cell in new_cells:
                    session.add(
                        Grade(cell=cell, notebook=other, auto_score=None, needs_manual_grade=True)
                    )

        grades = {g.cell_id: g for g in snb.grades}
        for name, cell in cells.items():
            grade = grades.get(cell.id)
            if grade is None:
                grade = Grade(cell=cell, notebook=snb)
                session.add(grade)
            test = by_name.get(name)
            grade.auto_score = stored(test.score) if test is not None else None
            # as nbgrader's SaveAutoGrades: a human's manual score stays and is flagged for review
            grade.needs_manual_grade = grade.manual_score is not None or grade.auto_score is None
        # the penalty in points is what the late policy took: raw - score, exact (core.points)
        snb.late_submission_penalty = stored(total(t.score for t in a.tests) - a.score)
        session.flush()


CSV_SCORES = ("raw_score", "late_submission_penalty", "score", "max_score")
CSV_STAFF = ("extended_due", "override")  # the columns grades.csv adds to nbgrader's


def _round_csv(path: Path, results: dict[str, GradeResult] | None = None) -> None:
    """nbgrader prints its float sums as `36.0`: write its score columns in the shown points
    format (`36`, `41.125`). Points are whole eighths, so its sums are exact and this only
    reformats; it never rounds a value. With `results` (student -> result), the staff's
    columns are added: each row's extended due date and its overrides (`staff_columns`)."""
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
        fields = list(rows[0]) if rows else None
    if not rows or fields is None:
        return
    if results is not None:
        fields += list(CSV_STAFF)
    for row in rows:
        for key in CSV_SCORES:
            if row.get(key) not in (None, ""):
                try:
                    row[key] = shown(float(row[key]))
                except ValueError:
                    continue
        if results is not None:
            row.update(staff_columns(results.get(row.get("student_id", "")), row["assignment"]))
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)


def staff_columns(result: GradeResult | None, assignment: str) -> dict[str, str]:
    """grades.csv's `extended_due` (ISO 8601, or empty) and `override` (`score 3.5: reason`, a
    test's `hidden/test_x 2: reason`, `;`-separated; empty without one) of one row."""
    a = next((x for x in result.assignments if x.id == assignment), None) if result else None
    if a is None:
        return dict.fromkeys(CSV_STAFF, "")
    said = [f"score {shown(a.override['points'])}: {a.override['reason']}"] if a.override else []
    said += [
        f"{t.name} {shown(t.override['points'])}: {t.override['reason']}"
        for t in a.tests
        if t.override
    ]
    return {"extended_due": a.extended_due or "", "override": "; ".join(said)}


def export_csv(
    db_path: Path | str, out_csv: Path | str, results: dict[str, GradeResult] | None = None
) -> Path:
    """`nbgrader export`'s CSV (nbgrader's own CsvExportPlugin): one row per student and assignment.

    Columns: assignment, duedate, timestamp, student_id, last_name, first_name, email, raw_score,
    late_submission_penalty, score, max_score, and with `results` (student -> result, what
    grade-all graded) the staff's `extended_due` and `override` (`staff_columns`). Written to
    a temporary file and renamed.
    """
    from nbgrader.plugins.export import CsvExportPlugin  # lazy: see the module docstring

    path = Path(db_path).absolute()
    out = Path(out_csv)
    try:
        with atomic_path(out) as tmp, open_gradebook(path, create=False) as gb:
            CsvExportPlugin(to=str(tmp)).export(gb)
            _round_csv(tmp, results)
    except OSError as exc:
        if isinstance(exc, GradebookError):
            raise
        raise GradebookError(path, f"cannot write {out}: {exc.strerror or exc}") from exc
    return out


def nbgrader_rows(db_path: Path | str) -> list[dict[str, str]]:
    """`nbgrader export`'s rows exactly as it prints them (no reformatting), for the points
    audit: its sums must come out exact (`36.0`, never `35.999999999999986`)."""
    from nbgrader.plugins.export import CsvExportPlugin  # lazy: see the module docstring

    with tempfile.TemporaryDirectory(prefix="nbgrader-export-") as tmp:
        out = Path(tmp) / "export.csv"
        with open_gradebook(Path(db_path).absolute(), create=False) as gb:
            CsvExportPlugin(to=str(out)).export(gb)
        with open(out, newline="", encoding="utf-8") as fh:
            return list(csv.DictReader(fh))
