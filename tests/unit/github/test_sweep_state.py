"""The sweep finishes what a grading left for later, from the state line of the grader's comment:
a capped push is re-run when its next grading time comes (or the cap is lifted), a grading
whose hidden feedback was held is graded again once the student's own due date (their
extension included) has passed, and a comment about an older head asks nothing."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from factories import ROOT

from grader.core.course import load_course
from grader.core.staff import load_staff
from grader.github import sweep as sweep_module
from grader.github.comment import MARKER, state_line
from grader.github.event import SWEEP_KEY

REPO = "gpu-course/gpu-mental-model"
HEAD = "c" * 40
DUE = datetime(2026, 12, 21, 23, 59, tzinfo=UTC)  # m9_roofline's due date in course.toml


@pytest.fixture
def course():
    return load_course(ROOT)


@pytest.fixture
def staff(tmp_path, course):
    folder = tmp_path / "staff"
    folder.mkdir()
    (folder / "extensions.toml").write_text(
        '[[extension]]\nstudent = "bo"\nassignment = "m9_roofline"\nhours = 48\n'
    )
    return load_staff(folder, course)


def pr_with(github, student: str, state: dict) -> None:
    """PR 7 of `student`, head HEAD, with the grader's comment holding `state`."""
    named = state["head"][:12]
    body = f"{MARKER}\n{state_line(state)}\n## words\n\n<sub>commit {named}</sub>\n"
    github.update(
        pulls=[{"number": 7, "sha": HEAD, "head": f"{student}:work",
                "updated_at": "2026-12-10T00:00:00Z", "mergeable": True}],
        comments=[{"id": 1, "pr": 7, "login": "github-actions[bot]", "body": body}],
        runs=[{"workflow": "grade.yml", "id": 55, "created_at": "2026-12-10T00:00:00Z",
               "display_title": f"Grade {student} {HEAD}", "jobs": []}],
    )  # fmt: skip


def swept(github, now, course, staff, lifted=frozenset()):
    [one] = sweep_module.sweep(REPO, 60, now, github, course, staff, lifted)
    reruns = json.loads(github.state.read_text()).get("reruns", [])
    return one, reruns


def capped(student="ada", next_at="2026-12-11T09:00:00Z"):
    return {"head": HEAD, "status": "capped", "run": 55, "student": student, "next": next_at}


def test_a_capped_push_waits_for_its_time_then_its_run_is_rerun(github, course, staff):
    pr_with(github, "ada", capped())
    one, reruns = swept(github, datetime(2026, 12, 11, 8, 47, tzinfo=UTC), course, staff)
    assert (one.action, reruns) == ("capped", [])
    one, reruns = swept(github, datetime(2026, 12, 11, 9, 17, tzinfo=UTC), course, staff)
    assert (one.action, reruns) == ("regrading", [55])
    comments = json.loads(github.state.read_text())["comments"]
    assert len(comments) == 1  # the sweep posts nothing: the re-run's own comment replaces it


def test_a_lifted_cap_reruns_at_once(github, course, staff):
    pr_with(github, "ada", capped())
    one, reruns = swept(github, datetime(2026, 12, 11, 8, 0, tzinfo=UTC), course, staff,
                        frozenset({"ada"}))  # fmt: skip
    assert (one.action, reruns) == ("regrading", [55])


def test_a_rerun_github_refuses_is_reported_and_left_for_the_next_sweep(github, course, staff):
    pr_with(github, "ada", {**capped(), "run": 56})  # no such run: GitHub answers 404
    one, reruns = swept(github, datetime(2026, 12, 12, tzinfo=UTC), course, staff)
    assert (one.action, reruns) == ("rerun failed", [])


def held(student: str, via="check") -> dict:
    return {"head": HEAD, "status": "graded", "run": 55, "student": student, "via": via,
            "at": "2026-12-20T10:00:00Z", "graded_at": "2026-12-20T10:20:00Z",
            "held": ["m9_roofline"]}  # fmt: skip


@pytest.mark.parametrize(
    ("student", "until"), [("ada", DUE), ("bo", DUE + timedelta(hours=48))]
)
def test_held_feedback_is_delivered_once_the_students_own_due_date_passed(
    github, course, staff, student, until
):
    pr_with(github, student, held(student))
    one, reruns = swept(github, until - timedelta(minutes=1), course, staff)
    assert (one.action, reruns) == ("held", [])
    one, reruns = swept(github, until + timedelta(minutes=1), course, staff)
    assert (one.action, reruns) == ("delivering", [55])


def test_a_head_the_sweep_graded_is_graded_again_with_its_own_time(github, course, staff):
    pr_with(github, "ada", held("ada", via="sweep"))
    [one] = sweep_module.sweep(REPO, 60, DUE + timedelta(hours=1), github, course, staff)
    assert one.action == "delivering (sweep)"
    assert one.head == {SWEEP_KEY: {"number": 7, "head_sha": HEAD, "student": "ada",
                                    "updated_at": "2026-12-20T10:00:00Z"}}  # fmt: skip
    assert sweep_module.plan([one]) == [one.head[SWEEP_KEY]]


def test_a_state_about_an_older_head_asks_nothing(github, course, staff):
    pr_with(github, "ada", {**capped(), "head": "d" * 40})
    one, reruns = swept(github, datetime(2026, 12, 12, tzinfo=UTC), course, staff)
    assert one.action == "commented" and reruns == []  # the current head was never answered


def test_a_graded_head_with_nothing_held_is_left_alone(github, course, staff):
    pr_with(github, "ada", {**held("ada"), "held": []})
    one, reruns = swept(github, DUE + timedelta(days=3), course, staff)
    assert (one.action, reruns) == ("graded", [])
