"""One grading reads the course once and decides isolation once, and hands both down: to every
assignment's suites, every test's `course` fixture and every worker it starts.

A second read could see a different course.toml than the first (an edit mid-grading), and a
second decision could disagree with the first; both also cost time per test and per worker.
"""

from __future__ import annotations

import json
import tomllib
import types
from pathlib import Path

import pytest
from factories import course_tree

from grader import cli
from grader.core import course as course_module
from grader.sandbox import isolation

ASSIGNMENT = "gpu_fundamentals"  # any id course.toml defines
NOTEBOOK = "# %%\ndef double(x):\n    return 2 * x\n"
SUITE = """\
import pytest


@pytest.mark.points(1)
@pytest.mark.parametrize("x", [1, 2, 3])
def test_double(student, course, x):
    assert course.assignment("gpu_fundamentals").id == "gpu_fundamentals"
    assert student.double(x) == 2 * x


@pytest.mark.points(1)
def test_wrong(student, course):
    assert student.double(1) == 3, "double(1) is 2; this test wants 3"
"""


@pytest.fixture
def counted(monkeypatch) -> dict[str, int]:
    """How often this process reads a course.toml and decides isolation."""
    calls = {"course reads": 0, "decisions": 0}

    def loads(text: str, **kw):
        calls["course reads"] += 1
        return tomllib.loads(text, **kw)

    fake = types.SimpleNamespace(loads=loads, TOMLDecodeError=tomllib.TOMLDecodeError)
    monkeypatch.setattr(course_module, "tomllib", fake)
    decided = isolation.Decision.__post_init__

    def post_init(self) -> None:
        calls["decisions"] += 1
        decided(self)

    monkeypatch.setattr(isolation.Decision, "__post_init__", post_init)
    return calls


def test_grader_grade_reads_the_course_once_and_decides_isolation_once(counted, tmp_path):
    root = course_tree(
        tmp_path / "course",
        {
            f"solutions/{ASSIGNMENT}/{ASSIGNMENT}.py": NOTEBOOK,
            f"tests/public/{ASSIGNMENT}/test_once_public.py": SUITE,
            f"tests/hidden/{ASSIGNMENT}/test_once_hidden.py": SUITE,
        },
    )
    sub = course_tree(tmp_path / "sub", {f"exercises/{ASSIGNMENT}/{ASSIGNMENT}.py": NOTEBOOK}, ())
    out = tmp_path / "result.json"
    argv = ["--root", str(root), "grade", str(sub), "--assignment", ASSIGNMENT]
    assert cli.main([*argv, "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    tests = {t["name"]: t["outcome"] for t in result["assignments"][0]["tests"]}
    assert len(tests) == 8 and list(tests.values()).count("failed") == 2, tests  # 8 tests ran
    assert (result["score"], result["max_score"]) == (2.0, 4.0)  # test_wrong's point lost twice
    assert counted == {"course reads": 1, "decisions": 1}


def test_run_assignment_refuses_a_course_of_another_root(course, tmp_path):
    from grader.suites.runner import run_assignment

    other = course_tree(tmp_path / "other")
    with pytest.raises(ValueError, match="not at"):
        run_assignment(other, ASSIGNMENT, other / "solutions", course=course)


def test_the_plugin_reads_the_course_once_per_run(counted, tmp_path):
    from grader.suites.runner import run_assignment

    root = course_tree(
        tmp_path / "course",
        {
            f"solutions/{ASSIGNMENT}/{ASSIGNMENT}.py": NOTEBOOK,
            f"tests/public/{ASSIGNMENT}/test_once_public.py": SUITE,
        },
    )
    result = run_assignment(Path(root), ASSIGNMENT, root / "solutions", suites=("public",))
    assert [t.outcome for t in result.tests].count("passed") == 3
    assert counted["course reads"] == 1  # four tests, each with the `course` fixture


def test_a_callers_decision_is_the_one_grading_uses(counted, tmp_path):
    from grader.grading.grade import grade_submission

    root = course_tree(
        tmp_path / "course",
        {
            f"solutions/{ASSIGNMENT}/{ASSIGNMENT}.py": NOTEBOOK,
            f"tests/public/{ASSIGNMENT}/test_once_public.py": SUITE,
        },
    )
    sub = course_tree(tmp_path / "sub", {f"exercises/{ASSIGNMENT}/{ASSIGNMENT}.py": NOTEBOOK}, ())
    decision = isolation.decide()
    result = grade_submission(sub, root=root, assignments=[ASSIGNMENT], decision=decision)
    assert result.environment.isolation[: len(decision.probe.layers)] == list(
        decision.probe.layers
    )
    assert result.environment.bubblewrap == decision.probe.binary
    assert counted["decisions"] == 1  # the caller's; grading made none of its own


def test_grade_pr_reads_the_course_once_and_decides_isolation_once(counted, tmp_path):
    """grade-pr reads the course for its reports and decides isolation for its refusal: the
    grading gets both, and makes neither again."""
    from factories import EVENT, PR, make_artifact, staff_identity

    from grader import github
    from grader.github import private

    root = course_tree(
        tmp_path / "course",
        {
            f"solutions/{ASSIGNMENT}/{ASSIGNMENT}.py": NOTEBOOK,
            f"tests/public/{ASSIGNMENT}/test_once_public.py": SUITE,
        },
    )
    art = make_artifact(tmp_path)
    (art / "exercises" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").unlink()
    (art / "exercises" / ASSIGNMENT / f"{ASSIGNMENT}.py").write_text(NOTEBOOK)
    staff = staff_identity()
    out = tmp_path / "out"
    argv = ["grade-pr", "--artifact", str(art), "--event", str(EVENT), "--out", str(out)]
    argv += ["--root", str(root), "--staff-recipient", str(staff.to_public())]
    assert github.main(argv) == 0
    key = tmp_path / "staff.key"
    key.write_text(f"{staff}\n")
    private.open_report(out / "report.age", key, tmp_path / "opened")
    result = json.loads((tmp_path / "opened" / "result.json").read_text())
    assert json.loads((tmp_path / "opened" / "pr.json").read_text())["number"] == PR
    (graded,) = [a for a in result["assignments"] if a["id"] == ASSIGNMENT]
    outcomes = [t["outcome"] for t in graded["tests"]]
    assert outcomes.count("passed") == 3 and outcomes.count("failed") == 1, outcomes
    assert counted == {"course reads": 1, "decisions": 1}
