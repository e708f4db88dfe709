"""The pytest plugin behind the suites: options, fixtures, markers and per-test scoring.

Registered through the ``pytest11`` entry point, so ``pytest tests/public/... --submission DIR``
works anywhere the package is installed. Tests reach student code only through the ``student``
fixture; which backend stands behind it (in-process, or the sandboxed worker) is decided here or
by `grader.suites.runner`, never by a test.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from grader.core import device
from grader.core.course import CourseError, find_root, load_course
from grader.core.feedback import clip
from grader.core.jsonread import JsonMissing, JsonReadError, read_metrics
from grader.core.notebook import choose_notebook
from grader.core.pairing import pair, release_for
from grader.core.results import TestResult
from grader.sandbox.harness import load_module
from grader.suites.student import InProcessBackend, Student, StudentError, WorkerTimeout

POINTS_KEY = pytest.StashKey[float]()
SESSION_KEY = pytest.StashKey["GraderSession"]()


@dataclass
class GraderSession:
    """What one suite run grades: where the submission is and how to reach its code."""

    root: Path
    submission: Path
    metrics: Path | None
    reference: Path
    backend: Any = None  # a grader.suites.student.Backend; built lazily when None
    results: list[TestResult] = field(default_factory=list)
    _reference_modules: dict[str, Any] = field(default_factory=dict)

    def get_backend(self, course) -> Any:
        if self.backend is None:  # a plain `pytest tests/public`: grading's pairing rule
            release = release_for(self.submission, self.root / "exercises")
            notebooks = {}
            for a in course.assignment_ids:
                chosen = pair(self.submission, a, release)
                if chosen.path is not None:
                    notebooks[a] = chosen.path
            self.backend = InProcessBackend(notebooks)
        return self.backend

    def reference_module(self, assignment_id: str):
        if assignment_id not in self._reference_modules:
            path = choose_notebook(self.reference, assignment_id)
            self._reference_modules[assignment_id] = load_module(path, f"reference_{assignment_id}")
        return self._reference_modules[assignment_id]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("grader", "course grader")
    group.addoption(
        "--submission",
        default=None,
        help="folder holding <id>/<id>.py|.ipynb (default: <root>/solutions, else exercises)",
    )
    group.addoption(
        "--metrics",
        default=None,
        help="the submission's metrics.json (default: next to --submission's folder)",
    )
    group.addoption(
        "--reference",
        default=None,
        help="folder of the reference solutions (default: <course root>/solutions)",
    )


def pytest_configure(config: pytest.Config) -> None:
    device.prepare_numba()
    # Registered here as well as in pyproject.toml: suites also run from other roots (a student's
    # fork, a scratch course in the grader's tests), where an unknown mark would be a warning.
    config.addinivalue_line("markers", "points(n): points a graded test is worth")
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU; skipped with a reason on CPU")
    if SESSION_KEY in config.stash:
        return
    submission = config.getoption("--submission", None)
    if submission is None and not _is_suite_run(config):
        return

    # The course is where the suites live (pytest's rootdir), not where the submission is: a
    # submission folder may sit anywhere (a scratch copy, a student's fork checkout).
    try:
        root = find_root(config.rootpath)
    except CourseError:
        root = find_root(Path(submission) if submission else None)
    # A student's fork has no solutions/: there the default is their own exercises/.
    default = root / "solutions" if (root / "solutions").is_dir() else root / "exercises"
    sub = Path(submission).resolve() if submission else default
    metrics = config.getoption("--metrics")
    config.stash[SESSION_KEY] = GraderSession(
        root=root,
        submission=sub,
        metrics=Path(metrics).resolve() if metrics else sub.parent / "metrics.json",
        reference=Path(config.getoption("--reference") or root / "solutions").resolve(),
    )


def _is_suite_run(config: pytest.Config) -> bool:
    return any("tests/public" in str(a) or "tests/hidden" in str(a) for a in config.args)


def session(config: pytest.Config) -> GraderSession:
    if SESSION_KEY not in config.stash:
        raise pytest.UsageError("the grader suites need --submission (or run them via `grader`)")
    return config.stash[SESSION_KEY]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    groups = Counter(
        (item.module.__name__ if item.module else "", item.originalname)
        for item in items
        if isinstance(item, pytest.Function)
    )
    for item in items:
        marker = item.get_closest_marker("points")
        if marker is not None and isinstance(item, pytest.Function):
            n = groups[(item.module.__name__ if item.module else "", item.originalname)]
            item.stash[POINTS_KEY] = float(marker.args[0]) / n
        if item.get_closest_marker("gpu") and not device.has_gpu():
            item.add_marker(
                pytest.mark.skip(
                    reason="needs a CUDA GPU: counted on the GPU grading runner, skipped here"
                )
            )
    if SESSION_KEY in config.stash:
        # Load the reference solutions now, while the sandboxed worker is still warming up,
        # rather than inside the first hidden test. A failure resurfaces in the fixture.
        s = config.stash[SESSION_KEY]
        for assignment in sorted(
            {assignment_of(i.path) for i in items if "reference" in getattr(i, "fixturenames", ())}
        ):
            try:
                s.reference_module(assignment)
            except Exception:  # noqa: BLE001
                pass


def assignment_of(path: Path) -> str:
    """Tests live in tests/{public,hidden}/<assignment id>/."""
    return Path(path).parent.name


def suite_of(path: Path) -> str:
    return Path(path).parent.parent.name


@pytest.fixture
def course(request: pytest.FixtureRequest):

    return load_course(session(request.config).root)


@pytest.fixture
def on_gpu() -> bool:
    return device.has_gpu()


@pytest.fixture
def student(request: pytest.FixtureRequest, course):
    """The submission's notebook for this test file's assignment."""

    s = session(request.config)
    limits = course.limits
    return Student(
        s.get_backend(course),
        assignment_of(request.path),
        call_timeout=limits.call_timeout_s,
        kernel_timeout=limits.kernel_timeout_s,
        cc=course.gpu.compute_capability,
    )


@pytest.fixture
def reference(request: pytest.FixtureRequest):
    """The reference solution module, loaded in the trusted process (hidden suites only)."""
    return session(request.config).reference_module(assignment_of(request.path))


@pytest.fixture
def metrics(request: pytest.FixtureRequest) -> dict:
    """The submission's metrics.json as data; a missing or broken file fails the test."""

    path = session(request.config).metrics
    try:
        if path is None:
            raise JsonMissing("metrics.json not found")
        return read_metrics(path)
    except JsonMissing:
        pytest.fail(
            "metrics.json not found at the repository root: run the M9 notebook's "
            "last cell (it calls save_metric) and commit metrics.json",
            pytrace=False,
        )
    except JsonReadError as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    if SESSION_KEY not in item.config.stash:
        return
    results = item.config.stash[SESSION_KEY].results
    if report.when == "call" or (report.when == "setup" and not report.passed):
        results.append(_result(item, report, call))


def _result(item: pytest.Item, report: pytest.TestReport, call: pytest.CallInfo) -> TestResult:
    points = item.stash.get(POINTS_KEY, 0.0)
    name = f"{suite_of(item.path)}/{item.name}"
    if report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else "skipped"
        return TestResult(
            name,
            0.0,
            points,
            "skipped",
            str(reason).removeprefix("Skipped: "),
            suite_of(item.path),
            report.duration,
        )
    if report.passed:
        return TestResult(name, points, points, "passed", "", suite_of(item.path), report.duration)
    outcome, feedback = classify(call.excinfo)
    return TestResult(name, 0.0, points, outcome, feedback, suite_of(item.path), report.duration)


def classify(excinfo: pytest.ExceptionInfo | None) -> tuple[str, str]:
    """Outcome and student-facing feedback for a failed test."""

    if excinfo is None:
        return "error", "the test failed without an exception"
    exc = excinfo.value
    if isinstance(exc, WorkerTimeout):
        return "timeout", clip(exc.feedback())
    if isinstance(exc, StudentError):
        text = exc.feedback()
        if exc.traceback and not exc.stub:  # a stub is said in one line, nothing else
            text += "\n" + exc.traceback
        return "error", clip(text)
    if isinstance(exc, (AssertionError, pytest.fail.Exception)):
        return "failed", clip(str(exc) or "assertion failed")
    return "error", clip(f"{type(exc).__name__}: {exc}")
