"""One process per submission: start it, let it die with the batch, read what it left.

Each submission is graded by `grade_one(submission, student, work_dir)` in a fresh process of its
own, started with multiprocessing's `spawn` context. Why not a pool: a pool worker that dies
(segfault, out-of-memory kill, `os._exit` in a native library) breaks a `ProcessPoolExecutor` and
fails every queued submission with it, and a pool worker keeps whatever the previous grading
imported or leaked (numba/torch caches, CUDA context). A process per submission costs one
interpreter start (~0.1-0.3 s plus the imports grade_one needs, small next to a grading that runs
suites in the simulator), returns all its memory when it exits, can be killed on a wall-clock
timeout, and its failure is attributed to exactly one student. `spawn` (not fork) keeps the
children independent of the parent's state (open gradebook connections, threads, matplotlib).
`grade_one` must therefore be picklable: a top-level function or a functools.partial of one.

The child writes nothing but `work_dir/grade.log` and `work_dir/.child-result.json` (the result,
or the error): `collect` turns that, a timeout, or a death without a result into this student's
`GradeResult` and whether it is a real grade. Children die with the batch: each child asks the
kernel for SIGKILL when the batch process exits (PR_SET_PDEATHSIG on Linux; elsewhere a thread
that watches the parent's pid), and `exit_on_termination` makes SIGTERM and SIGHUP on the batch
run its cleanup like Ctrl-C does, so no grading outlives a killed run.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader.core.course import Course
from grader.core.feedback import FEEDBACK_CHARS
from grader.core.results import AssignmentResult, Environment, GradeResult, validate
from grader.sandbox import procs

GradeOne = Callable[[Path, str, Path], GradeResult]
CHILD_RESULT = ".child-result.json"


def run_child(
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
    die_with_parent(parent)
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


def die_with_parent(parent: int) -> None:
    """SIGKILL this process when the batch (pid `parent`) goes, however it goes."""
    if sys.platform.startswith("linux"):
        procs.die_with_parent()
    if os.getppid() != parent:  # the batch died before the request took effect
        os._exit(1)

    def watch() -> None:  # macOS has no PDEATHSIG; on Linux this is a second line of defence
        while os.getppid() == parent:
            time.sleep(1.0)
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, daemon=True, name="die-with-parent").start()


@dataclass
class Running:
    """A started child: whose grading it is and since when."""

    student: str
    process: Any
    started: float
    digest: str


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


def cause(what: str, exc: BaseException) -> str:
    """An error row's cause: what failed and the exception, short (it reaches a report)."""
    return f"{what} ({type(exc).__name__}: {str(exc)[:300]})"


def exit_on_termination() -> Callable[[], None]:
    """SIGTERM/SIGHUP raise SystemExit in the main thread, so the batch's cleanup kills its
    children as on Ctrl-C; returns a function that puts the old handlers back."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def stop(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)

    old = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGHUP)}

    def restore() -> None:
        for sig, h in old.items():
            signal.signal(sig, h)

    return restore


def collect(
    job: Running, work: Path, course: Course, timed_out: bool, timeout: float
) -> tuple[GradeResult, bool]:
    """The child's result and True, or this student's error result and False."""
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
