"""Grade a whole class: parallel, crash-proof, resumable, shardable.

Input: a folder whose subfolders are submissions (student id = folder name), or a CSV file of
`student_id,path[,submitted_at]` rows (a header row is optional; relative paths are relative to
the CSV's folder). `submitted_at` is the trusted submission time (ISO 8601 with a zone, e.g.
from the PR's grading run or your LMS; never a commit date) and the late policy applies to it;
without it no late policy is applied. It is part of the resume key.

Processes: each submission is graded by `grade_one(submission, student, work_dir)` in a fresh
process of its own, started with multiprocessing's `spawn` context (`jobs` of them at a time).
Why not a pool: a pool worker that dies (segfault, out-of-memory kill, `os._exit` in a native
library) breaks a `ProcessPoolExecutor` and fails every queued submission with it, and a pool
worker keeps whatever the previous grading imported or leaked (numba/torch caches, CUDA context).
A process per submission costs one interpreter start (~0.1-0.3 s plus the imports grade_one needs,
small next to a grading that runs suites in the simulator), returns all its memory when it exits,
can be killed on a wall-clock timeout, and its failure is attributed to exactly one student.
`spawn` (not fork) keeps the children independent of the parent's state (open gradebook
connections, threads, matplotlib). `grade_one` must therefore be picklable: a top-level function
or a functools.partial of one.

Only the parent writes: reports (`out_dir/<student>/result.json`, `report.md`, `report.html`), the
gradebook (`out_dir/gradebook.db`, under a file lock so that shards sharing a folder are safe),
and `out_dir/state.jsonl`. The state line is appended (and fsync'd) after the reports and the
gradebook row, so it is the commit point of one student: a rerun skips a student whose state line
says "ok" for the same submission digest *and* the same grading digest (`grading_inputs`: the
test suites, the grader package, course.toml and the reference solutions) and whose result.json
exists; everything else is graded again and the summary says why (`regrade_reason`) and what
changed in the score (before -> after); `force=True` (`--force`) regrades everyone. The gradebook
write replaces rows, so an interruption at any point neither loses nor duplicates grades. Skipped
students' results are re-recorded into the gradebook (cheap and idempotent), so a deleted or
fresh gradebook.db is rebuilt complete. At the end of a run the state
file is compacted to one line per student.

Children die with the batch: each child asks the kernel for SIGKILL when the batch process
exits (PR_SET_PDEATHSIG on Linux; elsewhere a thread that watches the parent's pid), and SIGTERM
and SIGHUP on the batch run its cleanup like Ctrl-C does, so no grading outlives a killed run.

Shards: `shard=(i, N)` (1-based, as in `--shard 2/4`) selects the students whose index in the
sorted list of all student ids satisfies `index % N == i - 1`.
"""

from __future__ import annotations

import csv
import fcntl
import functools
import hashlib
import json
import multiprocessing
import os
import re
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from pathlib import Path
from typing import IO, Any

from grader.core.jsonread import metrics_or_none
from grader.core.course import Course, load_course
from grader.core.feedback import FEEDBACK_CHARS
from grader.core.results import AssignmentResult, Environment, GradeResult, validate
from grader.core.tables import points

GradeOne = Callable[[Path, str, Path], GradeResult]
STUDENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
STATE = "state.jsonl"
CHILD_RESULT = ".child-result.json"
GRADING_SKIP = {"__pycache__", ".pytest_cache", ".ipynb_checkpoints", ".git", ".venv"}
PR_SET_PDEATHSIG = 1


# ----------------------------------------------------------------------------- inputs


def submission_digest(path: Path) -> str:
    """sha256 over `exercises/**` and `metrics.json` of a submission: sorted relative paths and
    bytes, length-prefixed. Symlinks are hashed by their target text and never followed; other
    special files by their type alone."""
    root = Path(path)
    h = hashlib.sha256()
    entries: list[Path] = []
    if (root / "metrics.json").is_symlink() or (root / "metrics.json").exists():
        entries.append(root / "metrics.json")
    ex = root / "exercises"
    if ex.is_dir() and not ex.is_symlink():
        for dirpath, dirnames, filenames in os.walk(ex, followlinks=False):
            dirnames.sort()
            for name in dirnames:
                if os.path.islink(os.path.join(dirpath, name)):
                    entries.append(Path(dirpath, name))
            entries.extend(Path(dirpath, f) for f in filenames)
    elif ex.is_symlink():
        entries.append(ex)
    for p in sorted(entries, key=lambda q: q.relative_to(root).as_posix()):
        rel = p.relative_to(root).as_posix().encode()
        if p.is_symlink():
            kind, data = b"L", os.readlink(p).encode()
        elif p.is_file():
            kind, data = b"F", p.read_bytes()
        else:
            kind, data = b"S", b""
        for chunk in (kind, rel, data):
            h.update(len(chunk).to_bytes(8, "big"))
            h.update(chunk)
    return h.hexdigest()


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
    from grader import __version__

    root = Path(root)
    parts = {
        "suites": [root / "tests" / "public", root / "tests" / "hidden"],
        "grader": [Path(__file__).resolve().parent.parent],
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
    from grader.core.late import parse_timestamp

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


# ----------------------------------------------------------------------------- state file


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


# ----------------------------------------------------------------------------- child process


def _child(
    grade_one: GradeOne,
    submission: str,
    student: str,
    work_dir: str,
    digest: str,
    parent: int,
) -> None:
    """Runs in a spawned process: grade, then leave the result (or the error) as JSON.

    Reports are rendered by the parent, not here: matplotlib and jsonschema cost ~4 s of imports
    per fresh process against ~0.5 s per report in the parent that has them loaded.
    """
    _die_with_parent(parent)
    work = Path(work_dir)
    log = os.open(work / "grade.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    try:
        result = grade_one(Path(submission), student, work)
        if not isinstance(result, GradeResult):
            raise TypeError(f"grade_one returned {type(result).__name__}, not a GradeResult")
        result.student = student
        result.submission_digest = result.submission_digest or digest
        payload: dict[str, Any] = {"result": result.to_dict()}
    except BaseException as exc:  # noqa: BLE001 - every failure becomes a recorded error
        payload = {
            "error": f"{type(exc).__name__}: {exc}"[:FEEDBACK_CHARS],
            "traceback": traceback.format_exc()[-8000:],
        }
        traceback.print_exc()
    tmp = work / (CHILD_RESULT + ".tmp")
    tmp.write_text(json.dumps(payload, allow_nan=False), encoding="utf-8")
    os.replace(tmp, work / CHILD_RESULT)


def _die_with_parent(parent: int) -> None:
    """SIGKILL this process when the batch (pid `parent`) goes, however it goes."""
    import signal
    import threading

    if sys.platform.startswith("linux"):
        import ctypes

        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:  # the batch died before the request took effect
        os._exit(1)

    def watch() -> None:  # macOS has no PDEATHSIG; on Linux this is a second line of defence
        while os.getppid() == parent:
            time.sleep(1.0)
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, daemon=True, name="die-with-parent").start()


@dataclass
class _Running:
    student: str
    process: Any
    started: float
    digest: str


# ----------------------------------------------------------------------------- results


def error_result(student: str, course: Course, message: str, digest: str = "") -> GradeResult:
    """A submission whose grading failed: every assignment scores 0 with the error attached."""
    return GradeResult(
        student=student,
        score=0.0,
        max_score=float(sum(a.points for a in course.assignments)),
        environment=Environment(device="unknown", simulator=False),
        assignments=[
            AssignmentResult(id=a.id, score=0.0, max_score=float(a.points), error=message)
            for a in course.assignments
        ],
        warnings=[f"grading failed: {message}"],
        submission_digest=digest,
    )


def _read_metrics(submission: Path) -> dict | None:
    return metrics_or_none(submission / "metrics.json")


@dataclass
class BatchOutcome:
    results: dict[str, GradeResult] = field(default_factory=dict)
    graded: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    csv: Path | None = None
    gradebook: Path | None = None
    seconds: float = 0.0


def summary_table(
    results: dict[str, GradeResult],
    course: Course,
    failed: list[str],
    regraded: dict[str, tuple[str, float | None]] | None = None,
) -> str:
    """The class table; `regraded` maps a student graded in this run to (why, score before)."""
    from grader.core.tables import format_table, points, score

    ids = course.assignment_ids
    regraded = regraded or {}
    rows = []
    for student in sorted(results):
        r = results[student]
        by_id = {a.id: a for a in r.assignments}
        why, before = regraded.get(student, ("", None))
        change = ""
        if student in regraded:
            change = f"{'–' if before is None else score(before)} -> {score(r.score)}"
        rows.append(
            [student]
            + [points(by_id[i].score, by_id[i].max_score) if i in by_id else "-" for i in ids]
            + [
                points(r.score, r.max_score),
                "yes" if student in regraded else "no",
                why,
                change,
                "ERROR" if student in failed else "",
            ]
        )
    text = format_table(
        ["student", *ids, "total", "regraded", "why", "before -> after", "note"], rows
    )
    scores = [r.score for r in results.values()]
    if scores:
        text += (
            f"\n\n{len(scores)} students; mean {score(statistics.fmean(scores))}, "
            f"median {score(statistics.median(scores))}, min {score(min(scores))}, "
            f"max {score(max(scores))}"
        )
    return text


def grade_all(
    submissions: Path,
    out_dir: Path,
    jobs: int = 1,
    shard: tuple[int, int] | None = None,
    grade_one: GradeOne | None = None,
    *,
    course: Course | None = None,
    reference: dict | None = None,
    timeout_s: float | None = None,
    force: bool = False,
    progress: IO[str] | None = None,
    summary: IO[str] | None = None,
) -> BatchOutcome:
    """Grade every submission (of this shard) and write reports, gradebook.db and grades.csv.

    `grade_one(submission, student, work_dir) -> GradeResult` runs in a spawned process per
    submission. `timeout_s` (default: the course's submission timeout + 120 s) kills a grading
    that hangs. `force` regrades submissions even when unchanged.
    """
    from grader.gradebook import export_csv, record
    from grader.reports import write_reports

    if grade_one is None:
        raise ValueError("grade_one is required (e.g. functools.partial(grade_entry, root=...))")
    if jobs < 1:
        raise ValueError("jobs must be >= 1")
    course = course or load_course()
    progress = progress if progress is not None else sys.stderr
    summary = summary if summary is not None else sys.stdout
    timeout = timeout_s if timeout_s is not None else course.limits.submission_timeout_s + 120
    started_all = time.perf_counter()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    found = discover(Path(submissions), exclude=out)
    times = submission_times(Path(submissions))
    selected = select_shard(list(found), shard)
    db = out / "gradebook.db"
    state = StateFile(out / STATE)
    done = state.read()
    inputs = grading_inputs(course.root)
    regraded: dict[str, tuple[str, float | None]] = {}
    outcome = BatchOutcome(gradebook=db)
    total = len(selected)
    counter = 0

    def line(student: str, r: GradeResult, note: str) -> None:
        nonlocal counter
        counter += 1
        print(f"[{counter}/{total}] {student} {points(r.score, r.max_score)} {note}", file=progress)
        progress.flush()

    todo: list[tuple[str, str]] = []
    for student in selected:
        digest = submission_digest(found[student])
        if student in times:  # a new trusted time changes the late penalty: regrade
            digest += "@" + times[student]
        prev = done.get(student)
        result_json = out / student / "result.json"
        why = regrade_reason(prev, digest, inputs, force)
        if not why and not result_json.is_file():
            why = "result.json missing"
        before = prev.get("score") if prev is not None and prev.get("status") == "ok" else None
        if not why:
            try:
                r = GradeResult.read(result_json)
                validate(r.to_dict())
            except (OSError, ValueError, TypeError, KeyError):
                regraded[student] = ("result.json unreadable", before)
                todo.append((student, digest))
                continue
            record(db, r, course)  # idempotent: keeps the gradebook complete after a crash
            outcome.results[student] = r
            outcome.skipped.append(student)
            line(student, r, "(unchanged, skipped)")
        else:
            regraded[student] = (why, before if isinstance(before, (int, float)) else None)
            todo.append((student, digest))

    def finish(student: str, digest: str, result: GradeResult, seconds: float, ok: bool) -> None:
        # Whatever fails here is this submission's error row, never the batch's end.
        try:
            metrics = _read_metrics(found[student]) if ok else None
            write_reports(result, course, out / student, metrics, reference)
        except Exception as exc:  # off-schema result, or a report that cannot be written
            ok = False
            cause = _cause("writing its reports failed", exc)
            result = error_result(student, course, cause, digest)
            try:
                write_reports(result, course, out / student, None, reference)
            except Exception as again:
                result.warnings.append(_cause("its error report could not be written", again))
        try:
            record(db, result, course)
        except Exception as exc:
            ok = False
            result.warnings.append(_cause("its gradebook row could not be written", exc))
        state.append(
            {
                "student": student,
                "digest": digest,
                "submission": str(Path(found[student]).resolve()),
                "inputs": inputs,
                "score": result.score,
                "max_score": result.max_score,
                "status": "ok" if ok else "error",
                "seconds": round(seconds, 3),
                "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            }
        )
        outcome.results[student] = result
        (outcome.graded if ok else outcome.failed).append(student)
        note = f"{seconds:.1f}s" + ("" if ok else f" ERROR: {result.warnings[-1][:200]}")
        line(student, result, note)

    ctx = multiprocessing.get_context("spawn")
    queue = list(todo)
    running: dict[Any, _Running] = {}
    restore = _exit_on_termination()
    try:
        while queue or running:
            while queue and len(running) < jobs:
                student, digest = queue.pop(0)
                work = out / student
                work.mkdir(parents=True, exist_ok=True)
                (work / CHILD_RESULT).unlink(missing_ok=True)
                (work / "result.json").unlink(missing_ok=True)  # stale until the child's lands
                one = grade_one
                if student in times:
                    one = functools.partial(grade_one, timestamp=times[student])
                p = ctx.Process(
                    target=_child,
                    args=(one, str(found[student]), student, str(work), digest, os.getpid()),
                    name=f"grade-{student}",
                    daemon=False,
                )
                p.start()
                running[p.sentinel] = _Running(student, p, time.perf_counter(), digest)
            ready = wait(list(running), timeout=0.5)
            now = time.perf_counter()
            for key in list(running):
                job = running[key]
                timed_out = key not in ready and now - job.started > timeout
                if key not in ready and not timed_out:
                    continue
                if timed_out:
                    job.process.kill()
                job.process.join()
                del running[key]
                seconds = now - job.started
                result, ok = _collect(job, out / job.student, course, timed_out, timeout)
                finish(job.student, job.digest, result, seconds, ok)
    finally:
        for job in running.values():  # interrupted: leave no orphan graders behind
            job.process.kill()
            job.process.join()
        restore()

    state.compact()
    for names in (outcome.graded, outcome.skipped, outcome.failed):
        names.sort()
    if db.exists():
        outcome.csv = export_csv(db, out / "grades.csv")
    outcome.seconds = time.perf_counter() - started_all
    print(summary_table(outcome.results, course, outcome.failed, regraded), file=summary)
    print(
        f"graded {len(outcome.graded)}, unchanged {len(outcome.skipped)}, failed "
        f"{len(outcome.failed)} in {outcome.seconds:.1f} s; results in {out}",
        file=summary,
    )
    return outcome


def _cause(what: str, exc: BaseException) -> str:
    """An error row's cause: what failed and the exception, short (it reaches a report)."""
    return f"{what} ({type(exc).__name__}: {str(exc)[:300]})"


def _exit_on_termination() -> Callable[[], None]:
    """SIGTERM/SIGHUP raise SystemExit in the main thread, so the batch's cleanup kills its
    children as on Ctrl-C; returns a function that puts the old handlers back."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def stop(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)

    old = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGHUP)}
    return lambda: [signal.signal(sig, h) for sig, h in old.items()] and None


def _collect(
    job: _Running, work: Path, course: Course, timed_out: bool, timeout: float
) -> tuple[GradeResult, bool]:
    path = work / CHILD_RESULT
    if timed_out:
        msg = f"grading timed out after {timeout:.0f} s and was killed"
    else:
        try:
            payload = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            code = job.process.exitcode
            how = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
            msg = f"the grading process died ({how}) without a result; see grade.log"
        else:
            if "result" in payload:
                try:
                    validate(payload["result"])
                    path.unlink(missing_ok=True)
                    return GradeResult.from_dict(payload["result"]), True
                except Exception as exc:  # off-schema: this submission's error row
                    msg = f"invalid result: {exc}"
            else:
                msg = str(payload.get("error", "unknown error"))
    path.unlink(missing_ok=True)
    return error_result(job.student, course, msg, job.digest), False


# ----------------------------------------------------------------------------- CLI entry


def grade_entry(
    submission: Path,
    student: str,
    work_dir: Path,
    root: str,
    timestamp: str | None = None,
    allow_incomplete: bool = False,
) -> GradeResult:
    """The real `grade_one`: grade.grade_submission in the sandbox (top-level, so picklable).
    `timestamp`: the trusted submission time from the CSV listing, for the late policy."""
    from grader.grading.grade import grade_submission
    from grader.core.late import parse_timestamp

    when = parse_timestamp(timestamp) if timestamp else None
    return grade_submission(
        Path(submission),
        root=Path(root),
        student=student,
        timestamp=when,
        allow_incomplete_isolation=allow_incomplete,
    )


def reference_m9_record(course: Course) -> dict | None:
    from grader.demo.samples import reference_m9_record as compute

    try:
        return compute(course)
    except Exception:  # the roofline then shows the student's points alone
        return None


def run_class(
    submissions: Path,
    out_dir: Path,
    jobs: int = 1,
    shard: str | tuple[int, int] | None = None,
    root: Path | None = None,
    force: bool = False,
    allow_incomplete_isolation: bool = False,
) -> int:
    """`grader grade-all`: 0 when every submission was graded, 1 when some failed. Refuses
    (`IsolationRefused`) before grading anything when a sandbox layer is missing."""
    from grader.sandbox.isolation import require_isolation

    require_isolation(allow_incomplete_isolation)
    course = load_course(root)
    parsed = parse_shard(shard) if isinstance(shard, str) or shard is None else shard
    outcome = grade_all(
        Path(submissions),
        Path(out_dir),
        jobs=jobs,
        shard=parsed,
        grade_one=functools.partial(
            grade_entry, root=str(course.root), allow_incomplete=allow_incomplete_isolation
        ),
        course=course,
        reference=reference_m9_record(course),
        force=force,
    )
    return 1 if outcome.failed else 0
