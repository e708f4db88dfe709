"""The pytest plugin behind the suites: options, fixtures, markers and per-test scoring.

Registered through the ``pytest11`` entry point, so ``pytest tests/public/... --submission DIR``
works anywhere the package is installed. Tests reach student code only through the ``student``
fixture; which backend stands behind it (in-process, or the sandboxed worker) is decided here or
by `grader.suites.runner`, never by a test.
"""

from __future__ import annotations

import functools
import random
from collections import defaultdict
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck
from hypothesis import seed as hypothesis_seed
from hypothesis import settings as hypothesis_settings
from hypothesis.internal.conjecture import providers as hypothesis_providers

from grader.core import device, heap, points
from grader.core.course import Course, CourseError, find_root, load_course
from grader.core.errors import InfrastructureError
from grader.core.feedback import FEEDBACK_CHARS, clip
from grader.core.jsonread import JsonMissing, JsonReadError, read_metrics
from grader.core.notebook import choose_notebook
from grader.core.pairing import pair, release_for
from grader.core.results import KernelMemory, Outcome, TestResult
from grader.sandbox.harness import load_module
from grader.suites import seeds, timing
from grader.suites.student import Backend, InProcessBackend, Student, StudentError, WorkerTimeout

POINTS_KEY = pytest.StashKey[float]()
SESSION_KEY = pytest.StashKey["GraderSession"]()


@dataclass
class GraderSession:
    """What one suite run grades: where the submission is and how to reach its code."""

    root: Path
    submission: Path
    metrics: Path | None
    reference: Path
    backend: Backend | None = None  # built lazily when None
    course: Course | None = None  # the course at root: the grading's own, else loaded once
    results: list[TestResult] = field(default_factory=list)
    memory: list[KernelMemory] = field(default_factory=list)  # what the suites profiled
    # the grader's own failures met inside a test (an impossible time): the runner raises the
    # first after the session, so the grading is refused rather than scored
    refusals: list[InfrastructureError] = field(default_factory=list)
    # assignment id -> the grading's seed (grader.suites.seeds); the runner sets the one it
    # grades, a plain pytest run derives one with an empty identity
    seeds: dict[str, str] = field(default_factory=dict)
    _reference_modules: dict[str, Any] = field(default_factory=dict)

    def public_seed(self, assignment_id: str) -> str:
        """The seed of the public suites' draws: the public suites and the assignment alone, no
        student. A student's own check cannot know the identity or the hidden suites a grading
        keys its seed on, and the public tests must draw in it what the grading of their pull
        request draws; a seed of the notebook's text would let an edit re-roll them."""
        key = f"public/{assignment_id}"
        if key not in self.seeds:
            public = self.root / "tests" / "public" / assignment_id
            digest = seeds.suite_digest(self.root, [public] if public.is_dir() else [])
            self.seeds[key] = seeds.assignment_seed(assignment_id, "public", digest)
        return self.seeds[key]

    def seed(self, assignment_id: str) -> str:
        if assignment_id not in self.seeds:
            dirs = [self.root / "tests" / s / assignment_id for s in ("public", "hidden")]
            digest = seeds.suite_digest(self.root, [d for d in dirs if d.is_dir()])
            self.seeds[assignment_id] = seeds.assignment_seed(assignment_id, "", digest)
        return self.seeds[assignment_id]

    def get_course(self) -> Course:
        """The course at root, read once per session (a grading hands its own in)."""
        if self.course is None:
            self.course = load_course(self.root)
        return self.course

    def get_backend(self, course: Course) -> Backend:
        if self.backend is None:  # a plain `pytest tests/public`: grading's pairing rule
            release = release_for(self.submission, self.root / "exercises")
            notebooks = {}
            for a in course.assignment_ids:
                chosen = pair(self.submission, a, release)
                if chosen.path is not None:
                    notebooks[a] = chosen.path
            self.backend = InProcessBackend(notebooks)
        return self.backend

    def reference_module(self, assignment_id: str) -> ModuleType:
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
    groups: dict[tuple[str, str], list[pytest.Function]] = defaultdict(list)
    for item in items:
        if isinstance(item, pytest.Function) and item.get_closest_marker("points") is not None:
            groups[(item.module.__name__ if item.module else "", item.originalname)].append(item)
    for cases in groups.values():
        marker = cases[0].get_closest_marker("points")
        assert marker is not None  # grouped above for having one
        try:
            shares = points.split(float(marker.args[0]), len(cases))
        except ValueError as exc:
            raise pytest.UsageError(f"{cases[0].path}: {cases[0].originalname}: {exc}") from exc
        for item, share in zip(cases, shares, strict=True):
            item.stash[POINTS_KEY] = share
    for item in items:
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


@pytest.hookimpl(hookwrapper=True)
def pytest_runtestloop(session: pytest.Session) -> Generator[None, None, None]:
    """A grading's tests run with the heap built before them frozen (`grader.core.heap`): the
    imports, the suites and the reference solutions are never walked by a collection again."""
    if SESSION_KEY not in session.config.stash:
        yield
        return
    with heap.frozen():
        yield


def _test_seed(item: pytest.Item) -> int | None:
    """This test's seed, or None outside a grading session (the unit tests' own runs)."""
    if SESSION_KEY not in item.config.stash:
        return None
    assignment, suite = assignment_of(item.path), suite_of(item.path)
    session = item.config.stash[SESSION_KEY]
    seed = session.public_seed(assignment) if suite == "public" else session.seed(assignment)
    key = f"{suite}/{assignment}/{item.path.name}::{item.name}"
    return seeds.test_seed(seed, key)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Seed every draw the test can make: hypothesis's, and the stdlib's and NumPy's global
    generators (a suite draws with hypothesis or the `rng` fixture; these are the backstop)."""
    timing.take_records()  # none left over from a test that ended before its report
    n = _test_seed(item)
    if n is None:
        return
    fn = getattr(item, "obj", None)
    fn = getattr(fn, "__func__", fn)
    if getattr(fn, "is_hypothesis_test", False):
        _seed_hypothesis(fn, n)
    random.seed(n)
    np.random.seed(n % 2**32)


def _seed_hypothesis(fn: Any, n: int) -> None:
    """Seed a hypothesis test and take out what varies with the machine rather than the
    student: the example database (`seed` drops it), the deadline, the health checks and the
    constants of the process's own source (`without_local_constants`).

    `hypothesis.seed` is public; the settings go where it puts them (the attribute `@settings`
    sets, which refuses a second application), on top of the suite's own settings.
    """
    without_local_constants()
    hypothesis_seed(n)(fn)
    fn._hypothesis_internal_use_settings = hypothesis_settings(
        fn._hypothesis_internal_use_settings,
        deadline=None,
        database=None,
        suppress_health_check=tuple(HealthCheck),
        print_blob=False,
    )


def without_local_constants() -> None:
    """Draw from hypothesis's own constants only, never from this process's source code.

    Hypothesis mixes into its draws numbers and strings it finds in the source of every module in
    `sys.modules` that it counts as the user's (outside site-packages and the standard library):
    an editable grader's modules, and whatever else the process imported. Which those are depends
    on how the grader was installed and what the process imported before the test, so one seed
    drew different examples in `grader grade`, in a grade-all child (its fork server preloads
    other modules) and in a student's own check. Hypothesis has no setting for it; its provider
    asks `providers._get_local_constants` (a private name: tests/unit/suites/test_seeds.py fails
    if a release changes it), which answers an empty set from here on.
    """
    if hypothesis_providers._get_local_constants is not _no_local_constants:
        hypothesis_providers._get_local_constants = _no_local_constants
        hypothesis_providers.CONSTANTS_CACHE.cache.clear()  # earlier draws kept the old ones here


_NO_CONSTANTS = hypothesis_providers.Constants()


def _no_local_constants() -> Any:
    return _NO_CONSTANTS


def assignment_of(path: Path) -> str:
    """Tests live in tests/{public,hidden}/<assignment id>/."""
    return Path(path).parent.name


def suite_of(path: Path) -> str:
    return Path(path).parent.parent.name


@pytest.fixture(scope="session")
def course(request: pytest.FixtureRequest) -> Course:
    """The course manifest: frozen, so one object serves every test of the run."""
    return session(request.config).get_course()


@pytest.fixture
def on_gpu() -> bool:
    return device.has_gpu()


@pytest.fixture
def student(request: pytest.FixtureRequest, course: Course) -> Student:
    """The submission's notebook for this test file's assignment."""

    s = session(request.config)
    assignment = assignment_of(request.path)
    return Student(
        s.get_backend(course),
        assignment,
        cc=course.gpu.compute_capability,
        memory=s.memory,
        limits=course.limits_for(assignment),
        limit_source=functools.partial(course.limit_source, assignment),
    )


@pytest.fixture
def rng(request: pytest.FixtureRequest) -> np.random.Generator:
    """A NumPy generator seeded for this student and this test (grader.suites.seeds)."""
    n = _test_seed(request.node)
    return np.random.default_rng(0 if n is None else n)


@pytest.fixture
def reference(request: pytest.FixtureRequest) -> ModuleType:
    """The reference solution module, loaded in the trusted process (hidden suites only)."""
    return session(request.config).reference_module(assignment_of(request.path))


@pytest.fixture
def metrics(request: pytest.FixtureRequest) -> dict:
    """The submission's metrics.json as data; a missing or broken file fails the test."""

    s = session(request.config)
    try:
        if s.metrics is None:
            raise JsonMissing("metrics.json not found")
        return read_metrics(s.metrics)
    except JsonMissing:
        spec = s.get_course().metrics
        writer = s.get_course().assignment(spec.assignment).notebook if spec else "the notebook"
        pytest.fail(
            f"metrics.json not found at the repository root: run {writer}'s cell that writes "
            "it (its last cell) and commit metrics.json",
            pytrace=False,
        )
    except JsonReadError as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo
) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    if SESSION_KEY not in item.config.stash:
        return
    session = item.config.stash[SESSION_KEY]
    if report.when == "call" or (report.when == "setup" and not report.passed):
        result = _result(item, report, call)
        result.timings = timing.take_records()
        close = [n for r in result.timings for n in r.get("notes", [])]
        if result.outcome == "passed" and close:  # a verdict near its threshold says so
            result.feedback = clip(" ".join(close))
        session.results.append(result)
        if call.excinfo is not None and isinstance(call.excinfo.value, InfrastructureError):
            session.refusals.append(call.excinfo.value)


def _result(item: pytest.Item, report: pytest.TestReport, call: pytest.CallInfo) -> TestResult:
    worth = item.stash.get(POINTS_KEY, 0.0)
    name = f"{suite_of(item.path)}/{item.name}"
    used = _functions(item)
    if report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else "skipped"
        return TestResult(
            name,
            0.0,
            worth,
            "skipped",
            str(reason).removeprefix("Skipped: "),
            suite_of(item.path),
            report.duration,
            functions=used,
        )
    if report.passed:
        return TestResult(
            name, worth, worth, "passed", "", suite_of(item.path), report.duration, functions=used
        )
    outcome, feedback = classify(call.excinfo, tuple(getattr(item, "fixturenames", ())))
    return TestResult(
        name, 0.0, worth, outcome, feedback, suite_of(item.path), report.duration, functions=used
    )


METRICS_FILE = "metrics.json"  # what a test of the `metrics` fixture is grouped under


def _functions(item: pytest.Item) -> list[str]:
    """The graded names the test used through the `student` fixture (and metrics.json when it
    asked for the `metrics` fixture): how a score-only report groups the hidden tests."""
    funcargs = getattr(item, "funcargs", {}) or {}
    found = funcargs.get("student")
    used = list(found.touched) if isinstance(found, Student) else []
    if "metrics" in getattr(item, "fixturenames", ()):  # requested: its setup may have failed
        used.append(METRICS_FILE)
    return used


def classify(
    excinfo: pytest.ExceptionInfo | None, fixtures: tuple[str, ...] = ()
) -> tuple[Outcome, str]:
    """Outcome and student-facing feedback for a failed test (`fixtures`: the test's fixture
    names, left out of a falsifying example)."""

    if excinfo is None:
        return "error", "the test failed without an exception"
    exc = excinfo.value
    example = _falsifying_example(exc, fixtures)
    if isinstance(exc, WorkerTimeout):
        return "timeout", _with(exc.feedback(), example)
    if isinstance(exc, StudentError):
        text = exc.feedback()
        if exc.traceback and not exc.stub:  # a stub is said in one line, nothing else
            text += "\n" + exc.traceback
        return "error", _with(text, example)
    if isinstance(exc, (AssertionError, pytest.fail.Exception)):
        return "failed", _with(str(exc) or "assertion failed", example)
    return "error", _with(f"{type(exc).__name__}: {exc}", example)


def _with(text: str, example: str) -> str:
    """The feedback cut to make room for the falsifying example, which is kept whole when short
    (it is what the student reruns)."""
    if not example or len(example) > FEEDBACK_CHARS // 3:
        return clip(text + example)
    return clip(text, FEEDBACK_CHARS - len(example)) + example


def _falsifying_example(exc: BaseException, fixtures: tuple[str, ...]) -> str:
    """The inputs hypothesis drew when the test failed (its note on the exception), so the
    student can rerun the failing case; the fixtures' reprs are left out."""
    notes = [
        str(n)
        for n in getattr(exc, "__notes__", ())
        if str(n).startswith(("Falsifying example", "Failing test case"))
    ]
    if not notes:
        return ""
    own = tuple(f"{name}=" for name in fixtures)
    lines = [ln for ln in notes[0].splitlines() if not (own and ln.strip().startswith(own))]
    text = "\n".join(lines).replace("Failing test case:", "Falsifying example:", 1)
    return "\n" + text
