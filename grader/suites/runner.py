"""Running the pytest suites of one assignment against one submission, in this process.

The suites are trusted code; the student's code sits behind the `student` fixture's backend.
Results come back as typed `TestResult`s collected by `grader.suites.plugin`, never parsed from
pytest's output (which student code could print into).
"""

from __future__ import annotations

import io
import sys
import tempfile
from collections.abc import Sequence
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import TYPE_CHECKING

from grader.core import points
from grader.core.course import Course, load_course
from grader.core.feedback import excerpt
from grader.core.results import AssignmentResult
from grader.suites.seeds import assignment_seed, suite_digest

if TYPE_CHECKING:
    from grader.suites.student import Backend

SUITES = ("public", "hidden")


def suite_dirs(root: Path, assignment_id: str, suites: Sequence[str] = SUITES) -> list[Path]:
    return [
        root / "tests" / s / assignment_id
        for s in suites
        if (root / "tests" / s / assignment_id).is_dir()
    ]


def run_assignment(
    root: Path,
    assignment_id: str,
    submission: Path,
    metrics: Path | None = None,
    suites: Sequence[str] = SUITES,
    backend: Backend | None = None,
    reference: Path | None = None,
    quiet: bool = True,
    identity: str = "",
    select: str | None = None,
    course: Course | None = None,
) -> AssignmentResult:
    """Run the suites of `assignment_id` and score them.

    `submission` is the folder holding `<id>/<id>.py|.ipynb`; `backend` is a ready
    `grader.suites.student` backend (default: in-process over `submission`). `identity` (the
    student's id, or the submission's digest) keys the suites' draws (`grader.suites.seeds`);
    `select`, a pytest ``-k`` expression, runs only some tests (the grader's own mutation check).
    `course` is the course at `root` when the caller has loaded it (a grading loads it once and
    hands it to every assignment and every test); loaded here otherwise.

    Long because it builds the session the plugin reads, runs pytest on it in a scratch folder
    of its own (its flags are `pytest_args`'s) and forgets the suites' modules after, in one
    place.
    """
    # lazy: grading starts its workers before it pays for pytest's import, so the two overlap
    # (bench/README.md, start-up); the plugin imports pytest too
    import pytest

    from grader.suites import plugin

    root = Path(root).resolve()
    submission = Path(submission).resolve()
    dirs = suite_dirs(root, assignment_id, suites)
    if course is None:
        course = load_course(root)
    elif course.root.resolve() != root:
        raise ValueError(f"the course given is at {course.root}, not at {root}")
    assignment = course.assignment(assignment_id)
    session = plugin.GraderSession(
        root=root,
        course=course,
        submission=submission,
        metrics=Path(metrics).resolve() if metrics else submission.parent / "metrics.json",
        reference=Path(reference or root / "solutions").resolve(),
        backend=backend,
    )
    # the assignment's seed is over all its suites, whichever this run runs: a grading runs the
    # public and the hidden suites in runs of their own (grader.grading.grade) and draws the same
    every = suite_dirs(root, assignment_id)
    seed = assignment_seed(assignment_id, identity, suite_digest(root, every))
    session.seeds[assignment_id] = seed
    if not dirs:
        return AssignmentResult(
            assignment_id, 0.0, assignment.points, error=f"no test suites found for {assignment_id}"
        )

    class Inject:
        @pytest.hookimpl(tryfirst=True)
        def pytest_configure(self, config: pytest.Config) -> None:
            config.stash[plugin.SESSION_KEY] = session

    sink = io.StringIO()
    owns_backend = backend is None
    before = set(sys.modules)
    try:
        with tempfile.TemporaryDirectory(prefix="grader-suites-") as scratch:
            args = pytest_args(dirs, root, Path(scratch) / "basetemp", select)
            if quiet:
                with redirect_stdout(sink), redirect_stderr(sink):
                    code = pytest.main(args, plugins=[Inject()])
            else:
                code = pytest.main(args, plugins=[Inject()])
    finally:
        if owns_backend and session.backend is not None:
            session.backend.close()
        # Test modules are named from their path under the course root, so two courses (or a
        # course and a scratch copy) share names: forget them so the next run imports its own.
        for name in set(sys.modules) - before:
            if name.startswith(("tests.", "conftest")) or "test_" in name.rsplit(".", 1)[-1]:
                del sys.modules[name]
    error = None
    if code not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        error = f"the test suites could not run (pytest exit code {int(code)})"
        if quiet:
            error += ": " + excerpt(sink.getvalue())
    if session.refusals:  # the grader's own failure inside a test: no score, exit 3
        raise session.refusals[0]
    tests = session.results
    score = points.total(t.score for t in tests)
    return AssignmentResult(
        id=assignment_id,
        score=score,
        max_score=points.total(t.max_score for t in tests) if tests else assignment.points,
        raw_score=score,
        error=error,
        tests=tests,
        seed=seed,
        memory=list(session.memory),
    )


def pytest_args(
    paths: Sequence[Path], root: Path, basetemp: Path, select: str | None = None
) -> list[str]:
    """pytest's arguments for a grading's run of `paths` (each flag with why it is there);
    `basetemp` is the suites' `tmp_path` root, a folder of this run's own."""
    return [
        *map(str, paths),
        "-q",
        # Without it, pytest numbers a session folder under the machine's shared
        # $TMPDIR/pytest-of-<user> and, as the session ends, deletes the older ones there:
        # other sessions' folders (a test run's, a fresh install's venvs), whose deletion took
        # 70-97 s of one student's grading in CI. Given, it is the only folder pytest touches.
        "--basetemp",
        str(basetemp),
        "-p",
        "no:cacheprovider",
        "-p",
        "no:anyio",  # an autoloaded plugin no suite uses: 0.1-0.3 s of imports per grading
        # The asserts' own messages are the feedback, and rewriting every module of every
        # autoloaded plugin (hypothesis, grader) cost about 1 s per grading.
        "--assert=plain",
        # pytest's own failure report is never shown (the feedback comes from the exception);
        # its default style parses the source of every frame of every failure with `ast`
        "--tb=native",
        "--import-mode=importlib",
        "--rootdir",
        str(root),
        "-o",
        "addopts=",
        "-W",
        "ignore::DeprecationWarning",
        "-p",
        "no:warnings",
        # It reports exceptions raised where Python cannot raise them, as warnings (off above),
        # and collects garbage five times at the end of every run: ~0.3 s per assignment.
        "-p",
        "no:unraisableexception",
        # Its plugin cancels any pending `faulthandler.dump_traceback_later` at every failing
        # test (`pytest_exception_interact`): a batch child's stack dumps (grader.batch.children)
        # would stop at a grading's first lost point, and a later stall would leave no trace.
        "-p",
        "no:faulthandler",
        *(["-k", select] if select else []),
    ]
