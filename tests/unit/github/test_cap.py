"""The grading cap (grader.github.cap): gradings counted from GitHub's record of grade.yml's runs
and jobs, answered by the stand-in `fake_gh.py` (GitHub's JSON, filtered as GitHub filters it),
and the gate's decision with the comment of a capped push."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from factories import EVENT

from grader import github as gha
from grader.core.course import GradingCap
from grader.github import cap
from grader.github.comment import read_state

REPO = "gpu-course/gpu-mental-model"
NOW = datetime(2026, 12, 10, 12, 0, tzinfo=UTC)
DAY = timedelta(hours=24)
SIX = GradingCap(gradings=6, window_hours=24)


def t(hours_ago: float) -> str:
    return cap.github_time(NOW - timedelta(hours=hours_ago))


def gpu_job(attempt: int, started: str, step: str | None = "success", status="completed"):
    """The GPU job of one attempt as the jobs API lists it (`step`: its grading step's
    conclusion; None: the job ended before that step ran)."""
    steps = [{"name": "Validate the submission artifact", "status": "completed",
              "conclusion": "success"}]  # fmt: skip
    if step is not None:
        steps.append({"name": cap.GRADING_STEP, "status": "completed", "conclusion": step})
    return {"name": cap.GPU_JOB, "run_attempt": attempt, "status": status,
            "conclusion": step if status == "completed" else None, "started_at": started,
            "steps": steps}  # fmt: skip


def run(run_id: int, student: str, created: str, *jobs: dict, head: str = "a" * 40) -> dict:
    gate = {"name": "Hold the push against the grading cap", "run_attempt": 1,
            "status": "completed", "conclusion": "success", "started_at": created, "steps": []}
    return {"workflow": "grade.yml", "id": run_id, "created_at": created, "actor": student,
            "display_title": f"Grade {student} {head}", "jobs": [gate, *jobs]}  # fmt: skip


def test_what_counts_is_a_gpu_job_whose_grading_step_ran(github):
    """Counted: a grading step that ran (graded, cancelled by a newer push mid-grading, running
    now), in the window, of this student, each attempt; not a failure of the machine's."""
    github.runs(
        run(1, "ada", t(30), gpu_job(1, t(30))),  # outside the window
        run(2, "ada", t(20), gpu_job(1, t(20))),  # graded
        run(3, "ada", t(10), gpu_job(1, t(10), step="failure")),  # the machine could not grade
        run(4, "ada", t(9), gpu_job(1, t(9), step=None, status="completed")),  # cancelled early
        run(5, "ada", t(8), gpu_job(1, t(8), step="cancelled")),  # a newer push, mid-grading
        run(6, "ada", t(7), gpu_job(1, t(7), status="in_progress")),  # grading now
        run(7, "bob", t(6), gpu_job(1, t(6))),  # another student
        run(8, "ada", t(40), gpu_job(1, t(40)), gpu_job(2, t(2))),  # re-run by the sweep
    )
    found = cap.gradings(REPO, "ada", NOW, DAY, github)
    assert [(g.run, g.attempt) for g in found] == [(2, 1), (5, 1), (6, 1), (8, 2)]
    assert [g.at for g in found] == sorted(g.at for g in found)


def test_this_runs_own_attempt_is_left_out_but_its_earlier_attempts_count(github):
    # run 9 was capped at attempt 1 (no GPU job), graded at attempt 2; attempt 3 asks now
    github.runs(run(9, "ada", t(23), gpu_job(2, t(3)), gpu_job(3, t(0.01), status="queued")))
    found = cap.gradings(REPO, "ada", NOW, DAY, github, own=(9, 3))
    assert [(g.run, g.attempt) for g in found] == [(9, 2)]


def test_a_listing_by_actor_that_misses_this_run_falls_back_to_the_titles(github):
    """GitHub may name another actor on a workflow_run run: the titles (our run-name) decide."""
    graded = run(3, "ada", t(5), gpu_job(1, t(5)))
    graded["actor"] = "the-instructor"
    mine = run(4, "ada", t(0.01))
    mine["actor"] = "the-instructor"
    github.runs(graded, mine)
    assert [g.run for g in cap.gradings(REPO, "ada", NOW, DAY, github, own=(4, 1))] == [3]


def test_the_cap_decides_and_names_when_the_next_grading_runs():
    times = [NOW - timedelta(hours=h) for h in (23, 20, 10, 5, 3, 1)]
    assert cap.decide(SIX, "ada", times[1:]).grade
    full = cap.decide(SIX, "ada", times)
    assert not full.grade and full.counted == 6
    assert full.next_at == times[0] + DAY  # the oldest of the six leaves the window
    assert cap.decide(SIX, "ada", times + [NOW], frozenset()).next_at == times[1] + DAY
    assert cap.decide(SIX, "ada", times, cap.lifted_logins("bo, ada")).grade
    assert cap.decide(None, "ada", times).grade
    assert cap.lifted_logins(" ada,bo  cy;x ") == frozenset({"ada", "bo"})


def _gate(tmp_path, github, monkeypatch, capped: bool):
    course = tmp_path / "course"
    course.mkdir()
    text = (Path(gha.__file__).resolve().parents[2] / "course.toml").read_text()
    (course / "course.toml").write_text(text + "\n[grading_cap]\ngradings = 6\nwindow_hours = 24\n")
    event = json.loads(EVENT.read_text())
    login = event["workflow_run"]["head_repository"]["owner"]["login"]
    now = datetime.now(UTC)
    n = 6 if capped else 5
    github.runs(*[run(i, login, cap.github_time(now - timedelta(hours=20 - i)),
                      gpu_job(1, cap.github_time(now - timedelta(hours=20 - i))))
                  for i in range(1, n + 1)],
                run(99, login, cap.github_time(now)))  # fmt: skip
    monkeypatch.setattr(cap, "_gh", github)
    (tmp_path / "event.json").write_text(json.dumps(event))
    out, outputs = tmp_path / "out", tmp_path / "outputs"
    rc = gha.main(["gate", "--repo", REPO, "--event", str(tmp_path / "event.json"),
                   "--run-id", "99", "--out", str(out), "--root", str(course),
                   "--github-output", str(outputs)])  # fmt: skip
    return rc, out, outputs.read_text(), login, now


def test_the_gate_grades_a_push_under_the_cap_and_writes_no_comment(tmp_path, github, monkeypatch):
    rc, out, outputs, _, _ = _gate(tmp_path, github, monkeypatch, capped=False)
    assert rc == 0 and outputs == "grade=true\n" and not out.exists()


def test_a_push_over_the_cap_gets_a_comment_with_the_next_grading_time(
    tmp_path, github, monkeypatch
):
    rc, out, outputs, login, now = _gate(tmp_path, github, monkeypatch, capped=True)
    assert rc == 0 and outputs == "grade=false\n"
    body = (out / "comment.md").read_text()
    assert body.startswith(gha.MARKER)
    state = read_state(body)
    event = json.loads(EVENT.read_text())
    head = event["workflow_run"]["head_sha"]
    oldest = now - timedelta(hours=19)
    assert state == {"head": head, "status": "capped", "run": 99, "student": login,
                     "next": cap.github_time(oldest + DAY)}  # fmt: skip
    assert f"next grading will run at {(oldest + DAY).strftime('%Y-%m-%d %H:%M UTC')}" in body
    assert "6 times in 24 hours" in body and f"commit {head[:12]}" in body
    assert (out / "summary.md").read_text() in body  # the job summary says the same, no state
