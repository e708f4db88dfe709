"""One process per submission: start it, let it die with the batch, read what it left.

Each submission is graded by `grade_one(submission, student, work_dir)` in a fresh process of its
own. Why not a pool: a pool worker that dies (segfault, out-of-memory kill, `os._exit` in a
native library) breaks a `ProcessPoolExecutor` and fails every queued submission with it, and a
pool worker keeps whatever the previous grading imported or leaked (numba/torch caches, CUDA
context). A process per submission returns all its memory when it exits, can be killed on a
wall-clock timeout, and its failure is attributed to exactly one student. Never forked from the
batch itself, which holds gradebook connections, threads and matplotlib.

On Linux the children come from the batch's fork server (`context`): a fresh interpreter that
multiprocessing starts once per batch and that imports `grader.batch.preload` (the grader,
pytest, hypothesis, numpy, jupytext, jsonschema: about a second of CPU) before it forks the first
child; each child is a copy of that clean, single-purpose process, not of the batch. The server
is stopped when the batch ends, so the next batch's children see the environment of their own
batch, and the server's CPU (its children's included) is counted in the batch's getrusage.
Elsewhere (macOS) each child is a `spawn`: an interpreter of its own that imports what it needs.
Either way `grade_one` must be picklable: a top-level function or a functools.partial of one.

The child writes nothing but `work_dir/grade.log` and `work_dir/.child-result.json` (the result
or the error, and when it ended): `collect` turns that, a timeout, or a death without a result
into this student's `Collected`: its `GradeResult`, whether it is a real grade, and the grading's
seconds, from its start to the child's own end (not to when the batch got round to it). Children
die with the batch, however it ends (`die_with_parent`), and `exit_on_termination` makes SIGTERM
and SIGHUP on the batch run its cleanup like Ctrl-C does, so no grading outlives a killed run.
"""

from __future__ import annotations

import contextlib
import faulthandler
import functools
import json
import multiprocessing
import os
import select
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader.core.course import Course
from grader.core.feedback import FEEDBACK_CHARS
from grader.core.results import AssignmentResult, Environment, GradeResult, validate
from grader.sandbox import procs

GradeOne = Callable[[Path, str, Path], GradeResult]
CHILD_RESULT = ".child-result.json"
PRELOAD = "grader.batch.preload"  # what the fork server imports before its first fork
STACKS_AT = 0.9  # of the batch's timeout: a child still grading then writes its threads' stacks
SLOW_S = 30.0  # and every this many seconds before that: a grading this slow is stuck somewhere


def stacks_every(timeout: float) -> float:
    """How often a child still grading writes its threads' stacks to grade.log: every `SLOW_S` s
    (most gradings take 2-20 s), and at least once before the batch kills it at `timeout`."""
    return min(SLOW_S, timeout * STACKS_AT)


_server_lock = threading.Lock()
_server_users = 0  # batches of this process using the fork server now


@contextlib.contextmanager
def context() -> Iterator[Any]:
    """The multiprocessing context a batch starts its children with, for the batch's length:
    the fork server on Linux, where a child can follow the batch itself (a pidfd, see
    `die_with_parent`), else spawn. The server ends with the last batch of this process that
    uses it."""
    global _server_users
    if not sys.platform.startswith("linux"):
        yield multiprocessing.get_context("spawn")
        return
    ctx = multiprocessing.get_context("forkserver")
    with _server_lock:
        ctx.set_forkserver_preload([PRELOAD])
        _server_users += 1
    try:
        yield ctx
    finally:
        with _server_lock:
            _server_users -= 1
            if _server_users == 0:
                _stop_server()


def _stop_server() -> None:
    """End this process's fork server and reap it (nothing when none was started).

    multiprocessing keeps one server per process and has no public way to stop it; its `_stop`
    (there since Python 3.8, what CPython's own tests call) closes the pipe the server watches
    and waits for it. Without it the server would live on, with this batch's environment, into
    the next batch of the same process (a test session, the bench), and its children's CPU
    would never reach the batch's getrusage."""
    from multiprocessing import forkserver  # lazy: only where the server was used

    forkserver._forkserver._stop()  # type: ignore[attr-defined]  # private: see above


def run_child(
    grade_one: GradeOne,
    submission: str,
    student: str,
    work_dir: str,
    digest: str,
    parent: int,
    dump_after: float,
) -> None:
    """Runs in the child process: grade, then leave the result (or the error) as JSON.

    Reports are rendered by the parent, not here: matplotlib and jsonschema cost ~4 s of imports
    per fresh process against ~0.5 s per report in the parent that has them loaded.
    """
    die_with_parent(parent)
    work = Path(work_dir)
    log = os.open(work / "grade.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    # a grading still running after `dump_after` s leaves where each of its threads was in
    # grade.log, and again each `dump_after` s: a stall that ends by itself (a slow grading) and
    # a hang the batch kills both say where they were, which nothing else would. Written to
    # `log` itself, not to fd 2: inside the suites, pytest's capture holds fds 1 and 2
    faulthandler.dump_traceback_later(dump_after, repeat=True, exit=False, file=log)
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
    faulthandler.cancel_dump_traceback_later()
    payload["ended"] = time.monotonic()  # the clock of `Running.started`
    tmp = work / (CHILD_RESULT + ".tmp")
    tmp.write_text(json.dumps(payload, allow_nan=False), encoding="utf-8")
    os.replace(tmp, work / CHILD_RESULT)


def die_with_parent(batch: int) -> None:
    """SIGKILL this process when the batch (pid `batch`) goes, however it goes.

    A spawned child's parent is the batch: the kernel's PR_SET_PDEATHSIG (Linux) ends it, and a
    thread that watches the parent's pid is the second line (the only one on macOS). A child of
    the fork server (`context`) has the server as its parent, which outlives the batch while any
    child holds multiprocessing's pipe to it: PDEATHSIG covers the server's death, and a thread
    blocked on a pidfd of the batch itself ends the child the moment the batch exits. Any other
    parent means the batch is already gone: exit at once."""
    if sys.platform.startswith("linux"):
        procs.die_with_parent()
    parent = os.getppid()
    if parent == batch:
        watch = functools.partial(_watch_parent, parent)
    else:
        try:
            pidfd = os.pidfd_open(batch)  # opened before the check: a reused pid cannot pass it
        except (AttributeError, OSError):
            os._exit(1)
        if procs.parent_of(parent) != batch:
            os._exit(1)
        watch = functools.partial(_watch_pidfd, pidfd)
    threading.Thread(target=watch, daemon=True, name="die-with-batch").start()


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(1.0)
    os.kill(os.getpid(), signal.SIGKILL)


def _watch_pidfd(pidfd: int) -> None:
    select.select([pidfd], [], [])  # readable once the process has exited
    os.kill(os.getpid(), signal.SIGKILL)


@dataclass
class Running:
    """A started child: whose grading it is and since when (`time.monotonic()`, a clock that
    the children share with the batch: CLOCK_MONOTONIC on Linux, mach time on macOS)."""

    student: str
    process: Any
    started: float
    digest: str


@dataclass
class Collected:
    """What a child left: this student's result, whether it is a real grade, and the seconds
    from the child's start to its end (its own record of when it ended, so that the time the
    batch spent committing other students before it got to this one does not count; the
    batch's own clock where the child left no record: a timeout, a death)."""

    result: GradeResult
    ok: bool
    seconds: float


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
    job: Running, work: Path, course: Course, timed_out: bool, timeout: float, now: float
) -> Collected:
    """The child's result (a real grade), or this student's error result; `now` is when the
    batch saw the child end (`time.monotonic()`)."""
    path = work / CHILD_RESULT
    seconds = now - job.started
    if timed_out:
        msg = (
            f"grading timed out after {timeout:.0f} s and was killed (grade.log shows where its "
            "threads were shortly before)"
        )
    else:
        try:
            payload = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            code = job.process.exitcode
            how = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
            msg = f"the grading process died ({how}) without a result; see grade.log"
        else:
            ended = payload.get("ended")
            if isinstance(ended, float) and job.started <= ended <= now:
                seconds = ended - job.started
            if "result" in payload:
                try:
                    validate(payload["result"])
                    path.unlink(missing_ok=True)
                    return Collected(GradeResult.from_dict(payload["result"]), True, seconds)
                except Exception as exc:  # off-schema: this submission's error row
                    msg = f"invalid result: {exc}"
            else:
                msg = str(payload.get("error", "unknown error"))
    path.unlink(missing_ok=True)
    return Collected(error_result(job.student, course, msg, job.digest), False, seconds)
