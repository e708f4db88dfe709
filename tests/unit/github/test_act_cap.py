"""Seven pushes in a window with a cap of 6 (course.toml's `[grading_cap]`), run by act: grade.yml
once per push and the sweep after, offline, with GitHub's API answered by fake_gh.py (see
test_act.py and test_act_grade.py for the stand-ins).

The test plays GitHub's part between the runs: it keeps the record the gate counts from (each
grade.yml run, titled by its run-name, and its jobs) and, when the sweep asks for a re-run,
runs that run again as attempt 2. A GPU job the gate let start is recorded as having graded
(its grading step succeeded): offline it stops at the artifact download, since grading needs
the private instructor repository and a GPU (docs/GITHUB_SETUP.md, "Tested offline"). The
pushes' times are set in the record relative to the clock, so that the first of the six
gradings leaves the 24-hour window 45 seconds after the seventh push is turned away.

What is asserted: six pushes start a GPU job and the seventh does not; the seventh gets the
one comment saying when its grading will run; the sweep leaves it until then and re-runs its
run after, which the gate then lets through; each head is graded once."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from factories import EVENT, PR, ROOT
from test_act import sweep_args
from test_act_grade import act_args

from grader import github as gha
from grader.github.cap import GPU_JOB, GRADING_STEP, github_time
from grader.github.comment import read_state

pytestmark = pytest.mark.slow
STUDENT = "ada-student"  # the event's fork owner
HEADS = [f"{i:x}" * 40 for i in range(1, 8)]
MARGIN_S = 45  # the oldest grading leaves the window this long after the seventh push


@pytest.fixture
def main_branch(tmp_path):
    """The student repository's default branch: this course, with a grading cap of 6 a day."""
    main = tmp_path / "main"
    shutil.copytree(ROOT, main, symlinks=True, ignore=shutil.ignore_patterns(
        ".git", ".venv", "__pycache__", "*-output", ".pytest_cache", ".hypothesis"))  # fmt: skip
    with (main / "course.toml").open("a") as fh:
        fh.write("\n[grading_cap]\ngradings = 6\nwindow_hours = 24\n")
    return main


class GitHub:
    """The fake API's state, and the record of grade.yml's runs the test keeps as GitHub would."""

    def __init__(self, tmp: Path):
        self.tmp, self.state = tmp, tmp / "state.json"
        self.graded: dict[int, list[int]] = {}  # run -> attempts whose GPU job started
        self.runs: set[int] = set()  # every grade.yml run so far
        self.frozen: datetime | None = None  # from the seventh push on, the times stand
        self.state.write_text(json.dumps({"comments": [], "runs": [], "pulls": []}))

    def data(self) -> dict:
        return json.loads(self.state.read_text())

    def write(self, head: str, current: tuple[int, int] | None) -> None:
        """The record as of now: each grading's GPU job started at its push's time (the first
        one 24 h - MARGIN_S before the seventh push, the others 3 hours apart), and the run
        asking now."""
        now = self.frozen or datetime.now(UTC)
        started = [now - timedelta(hours=24) + timedelta(seconds=MARGIN_S)]
        started += [now - timedelta(hours=3 * (7 - k)) for k in range(2, 7)]
        started.append(datetime.now(UTC))  # the seventh's grading, when the re-run made it
        runs = []
        if current:
            self.runs.add(current[0])
        for run in sorted(self.runs):
            jobs = [
                {"name": GPU_JOB, "run_attempt": attempt, "status": "completed",
                 "conclusion": "success", "started_at": github_time(started[run - 1]),
                 "steps": [{"name": GRADING_STEP, "status": "completed",
                            "conclusion": "success"}]}
                for attempt in self.graded.get(run, [])
            ]  # fmt: skip
            created = started[run - 1] if run <= 6 else now - timedelta(minutes=1)
            runs.append({"workflow": "grade.yml", "id": run, "actor": STUDENT,
                         "created_at": github_time(created - timedelta(seconds=30)),
                         "display_title": f"Grade {STUDENT} {HEADS[run - 1]}", "jobs": jobs})
        data = self.data()
        data["runs"] = runs
        data["pulls"] = [{"number": PR, "sha": head, "head": f"{STUDENT}:m9-roofline",
                          "updated_at": github_time(now - timedelta(hours=2))}]  # fmt: skip
        self.state.write_text(json.dumps(data))


def grade_run(act, github: GitHub, main: Path, run: int, attempt: int = 1) -> str:
    """grade.yml for push `run` (its run id), attempt `attempt`: the act log."""
    head = HEADS[run - 1]
    github.write(head, (run, attempt))
    event = json.loads(EVENT.read_text())
    event["workflow_run"]["head_sha"] = head
    event["workflow_run"]["pull_requests"] = [{"number": PR}]
    path = github.tmp / f"event-{run}-{attempt}.json"
    path.write_text(json.dumps(event))
    args = act_args(act, github.tmp, github.state, github.tmp / "remote", source=main)
    proc = subprocess.run(
        [*args, "-e", str(path), "--env", f"GITHUB_RUN_ID={run}",
         "--env", f"GITHUB_RUN_ATTEMPT={attempt}"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    log = proc.stdout + proc.stderr
    (github.tmp / f"act-{run}-{attempt}.log").write_text(log)
    started = "Check the GPU (driver) before installing anything" in "\n".join(
        ln for ln in log.splitlines() if "⭐ Run" in ln
    )
    if started:
        github.graded.setdefault(run, []).append(attempt)
    return log


def sweep_run(act, github: GitHub, main: Path) -> str:
    github.write(HEADS[-1], None)
    bin_dir = github.tmp / "bin"
    event = github.tmp / "schedule.json"
    event.write_text(json.dumps({"schedule": "17,47 * * * *"}))
    args = sweep_args(act, github.tmp, github.state, bin_dir)
    proc = subprocess.run([*args, "schedule", "-e", str(event),
                           "--env", f"ACT_STANDIN_SOURCE={main}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)  # fmt: skip
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-3000:]
    return log


def our_comment(github: GitHub) -> dict:
    [c] = [c for c in github.data()["comments"] if c["pr"] == PR]
    return c


def test_seven_pushes_six_gradings_and_the_seventh_after_the_window(act, tmp_path, main_branch):
    github = GitHub(tmp_path)
    (tmp_path / "remote").mkdir()
    for run in range(1, 7):
        log = grade_run(act, github, main_branch, run)
        assert f"grade {HEADS[run - 1][:12]} of {STUDENT}: {run - 1} of 6 gradings" in log, (
            log[-4000:]
        )
        assert github.graded.get(run) == [1], log[-4000:]

    github.frozen = datetime.now(UTC)  # the seventh push: from now on the record's times stand
    log = grade_run(act, github, main_branch, 7)
    assert "not graded now (6 of 6 gradings in the window)" in log, log[-4000:]
    assert 7 not in github.graded  # no GPU job for the seventh push
    comment = our_comment(github)
    state = read_state(comment["body"])
    assert state["status"] == "capped" and state["head"] == HEADS[6] and state["run"] == 7
    next_at = datetime.fromisoformat(state["next"].replace("Z", "+00:00"))
    assert timedelta(0) < next_at - datetime.now(UTC) <= timedelta(seconds=MARGIN_S)
    assert f"next grading will run at {next_at.strftime('%Y-%m-%d %H:%M UTC')}" in comment["body"]
    assert comment["body"].startswith(gha.MARKER) and "Graded later" in comment["body"]

    log = sweep_run(act, github, main_branch)  # before the next grading time: nothing
    assert f"PR #{PR} at {HEADS[6][:12]}: capped" in log, log[-3000:]
    assert github.data().get("reruns", []) == []

    time.sleep(max(0.0, (next_at - datetime.now(UTC)).total_seconds()) + 2)
    log = sweep_run(act, github, main_branch)  # after it: the seventh push's run, re-run
    assert f"PR #{PR} at {HEADS[6][:12]}: regrading" in log, log[-3000:]
    assert github.data()["reruns"] == [7]

    log = grade_run(act, github, main_branch, 7, attempt=2)  # GitHub runs it again
    assert f"grade {HEADS[6][:12]} of {STUDENT}: 5 of 6 gradings" in log, log[-4000:]
    assert github.graded[7] == [2]

    log = sweep_run(act, github, main_branch)  # the head is answered: nothing more to do
    assert f"PR #{PR} at {HEADS[6][:12]}: graded" in log, log[-3000:]
    assert github.data()["reruns"] == [7]
    # seven heads, seven gradings, none twice
    assert {run: len(attempts) for run, attempts in github.graded.items()} == {
        run: 1 for run in range(1, 8)
    }
