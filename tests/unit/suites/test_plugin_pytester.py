"""The plugin as pytest loads it (its ``pytest11`` entry point): a plain ``pytest tests/public``
run of a tiny course, through `pytester`, scores each test with the points of its marker.

`test_plugin.py` runs suites through the grader's runner, which hands the plugin its session;
here nothing does, so the plugin's own options, defaults and pairing rule are what is tested.
"""

from __future__ import annotations

import textwrap

import pytest
from factories import ROOT

from grader.core import device
from grader.suites import plugin

pytest_plugins = ("pytester",)

ASSIGNMENT = "gpu_fundamentals"  # any id course.toml defines
NOTEBOOK = "# %%\ndef double(x):\n    return 2 * x\n"
WRONG = "# %%\ndef double(x):\n    return x + x + 1\n"
SUITE = textwrap.dedent(
    """
    import pytest


    @pytest.mark.points(3)
    @pytest.mark.parametrize("x", [1, 2, 3])
    def test_split(student, x):
        assert student.double(x) == 2 * x, f"double({x}) is wrong"


    @pytest.mark.points(2)
    def test_course_fixture(student, course):
        assert course.assignment("gpu_fundamentals").points > 0
        assert student.double(0) == 0, "double(0) is not 0"


    @pytest.mark.points(1)
    def test_missing(student):
        student.no_such_function()


    @pytest.mark.gpu
    @pytest.mark.points(1)
    def test_gpu_only(student):
        assert student.double(1) == 2
    """
)


@pytest.fixture
def course_dir(pytester: pytest.Pytester):
    """A course of its own in pytester's folder: course.toml, one notebook, one public suite."""
    pytester.path.joinpath("course.toml").write_text((ROOT / "course.toml").read_text())
    for where, text in (("solutions", NOTEBOOK), ("wrong", WRONG)):
        folder = pytester.mkdir(where) / ASSIGNMENT
        folder.mkdir()
        (folder / f"{ASSIGNMENT}.py").write_text(text)
    suite = pytester.mkdir("tests") / "public"
    suite.mkdir()
    (suite / ASSIGNMENT).mkdir()
    (suite / ASSIGNMENT / "test_probe.py").write_text(SUITE)
    return pytester


def _graded(pytester: pytest.Pytester, *args: str) -> tuple[pytest.HookRecorder, dict]:
    """Run the public suite in this process; the plugin's scored results by test name."""
    rec = pytester.inline_run(f"tests/public/{ASSIGNMENT}", "-p", "no:cacheprovider", *args)
    config = rec.getcalls("pytest_unconfigure")[0].config
    session = config.stash[plugin.SESSION_KEY]
    return rec, {t.name.removeprefix("public/"): t for t in session.results}


def test_plain_pytest_scores_the_reference_by_its_markers(course_dir):
    rec, tests = _graded(course_dir)
    gpu = device.has_gpu()
    rec.assertoutcome(passed=4 + gpu, failed=1, skipped=0 if gpu else 1)
    split = [t for name, t in tests.items() if name.startswith("test_split[")]
    assert [t.outcome for t in split] == ["passed"] * 3
    assert sum(t.score for t in split) == pytest.approx(3.0)  # 3 points over 3 cases
    assert tests["test_course_fixture"].score == 2.0
    missing = tests["test_missing"]
    assert (missing.outcome, missing.score, missing.max_score) == ("error", 0.0, 1.0)
    assert "no_such_function" in missing.feedback
    if not gpu:
        only = tests["test_gpu_only"]
        assert only.outcome == "skipped" and "GPU" in only.feedback
    assert sum(t.max_score for t in tests.values()) == pytest.approx(7.0)


def test_submission_option_grades_another_folder(course_dir):
    rec, tests = _graded(course_dir, "--submission", str(course_dir.path / "wrong"))
    split = [t for name, t in tests.items() if name.startswith("test_split[")]
    assert [t.outcome for t in split] == ["failed"] * 3 and sum(t.score for t in split) == 0
    assert split[0].feedback.startswith("double(1) is wrong")
    assert tests["test_course_fixture"].outcome == "failed"
    assert "double(0) is not 0" in tests["test_course_fixture"].feedback


def test_a_gradings_tests_run_with_the_start_up_heap_frozen_and_thawed_after(course_dir):
    """`grader.core.heap`: the heap built before the tests (imports, suites, reference) is out
    of the collector's passes while they run, and back in it once the run ends."""
    import gc

    seen = course_dir.path / "freeze_count.txt"
    (course_dir.path / "tests" / "public" / ASSIGNMENT / "test_frozen.py").write_text(
        "import gc\n\n\n"
        "def test_frozen(student):\n"
        f"    open({str(seen)!r}, 'w').write(str(gc.get_freeze_count()))\n"
    )
    assert gc.get_freeze_count() == 0
    rec, tests = _graded(course_dir, "-k", "test_frozen")
    rec.assertoutcome(passed=1)
    assert int(seen.read_text()) > 10_000  # pytest, hypothesis, numpy and the grader, at least
    assert gc.get_freeze_count() == 0
