"""Seven pushes at once on seven branches with 5 of a cap of 6 used (issue 50): one grades, six
are held. The real gate (`python -m grader.github gate`, here `grader.github.main` in a thread
per push) runs concurrently against the API stand-in (fake_gh.py), and the test plays GitHub:

- the record the gate counts from: five graded runs in the window and the seven new runs, each
  with its gate job; a gate that lets its push grade records its `cap.RESERVE_STEP` as it ends;
  the GPU jobs are never listed while the gates run (the worst case: GitHub has not created
  them yet);
- grade.yml's concurrency group for one student's gates (`GateQueue`): at most one running and
  one waiting; a newer waiting gate cancels the older waiting one, which then writes the held
  comment (`held-comment`), as grade.yml's comment job does.

act runs one workflow at a time and has no concurrency groups, so the seven gates are driven
here, not under act; grade.yml's group and steps are held to this model in test_workflows.py
(`test_one_students_gates_run_one_at_a_time_and_a_cancelled_gate_is_held`). The first two
parameter sets show what each part prevents: without the queue all seven grade (each gate counts
5), with the queue but no reservation two do (the waiting gate counts before the GPU job of the
running one exists)."""

from __future__ import annotations

import json
import os
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from factories import EVENT

from grader import github as gha
from grader.github import cap
from grader.github.comment import read_state

REPO = "gpu-course/gpu-mental-model"
PUSHES = 7
USED = 5
RESERVE = cap.RESERVE_STEP  # the step grade.yml's gate runs when it lets a push grade


class GateQueue:
    """GitHub's concurrency group of one student's gates (`cancel-in-progress: false`): one
    running, one waiting; a newer waiting gate cancels the older waiting one."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.running: int | None = None
        self.waiting: int | None = None
        self.cancelled: set[int] = set()

    def enter(self, run: int) -> bool:
        """Wait until `run`'s gate may start (True), or it was cancelled (False)."""
        with self.cond:
            if self.running is None and self.waiting is None:
                self.running = run
                return True
            if self.waiting is not None:
                self.cancelled.add(self.waiting)
            self.waiting = run
            self.cond.notify_all()
            while True:
                if run in self.cancelled:
                    return False
                if self.running is None and self.waiting == run:
                    self.running, self.waiting = run, None
                    return True
                self.cond.wait()

    def leave(self) -> None:
        with self.cond:
            self.running = None
            self.cond.notify_all()


class Record:
    """The record GitHub keeps of grade.yml's runs, in the stand-in's state file (each write
    atomic: the gates' `gh` read it meanwhile)."""

    def __init__(self, state: Path, login: str, now: datetime) -> None:
        self.state, self.lock = state, threading.Lock()
        runs = []
        for i in range(1, USED + 1):
            at = cap.github_time(now - timedelta(hours=20 - i))
            gpu = {"name": cap.GPU_JOB, "run_attempt": 1, "status": "completed",
                   "conclusion": "success", "started_at": at,
                   "steps": [{"name": cap.GRADING_STEP, "status": "completed",
                              "conclusion": "success"}]}  # fmt: skip
            runs.append(self._run(i, login, f"{i:x}" * 40, at, "completed", [gpu]))
        for k in range(PUSHES):
            gate = {"name": cap.GATE_JOB, "run_attempt": 1, "status": "queued", "steps": []}
            runs.append(self._run(100 + k, login, head(k), cap.github_time(now), "in_progress",
                                  [gate]))  # fmt: skip
        self._write({"pulls": [], "comments": [], "runs": runs})

    @staticmethod
    def _run(run_id: int, login: str, sha: str, at: str, status: str, jobs: list) -> dict:
        return {"workflow": cap.GRADE_WORKFLOW, "id": run_id, "created_at": at, "actor": login,
                "status": status, "run_attempt": 1, "display_title": f"Grade {login} {sha}",
                "jobs": jobs}  # fmt: skip

    def _write(self, data: dict) -> None:
        tmp = self.state.with_suffix(f".{threading.get_ident()}.tmp")
        tmp.write_text(json.dumps(data))
        os.replace(tmp, self.state)

    def gate_ended(self, run_id: int, conclusion: str, reserved: bool) -> None:
        """The gate job of `run_id` ended; its reservation step is recorded when it ran."""
        with self.lock:
            data = json.loads(self.state.read_text())
            run = next(r for r in data["runs"] if r["id"] == run_id)
            gate = run["jobs"][0]
            gate.update(status="completed", conclusion=conclusion,
                        started_at=cap.github_time(datetime.now(UTC)))  # fmt: skip
            if reserved:
                gate["steps"] = [{"name": RESERVE, "status": "completed",
                                  "conclusion": "success",
                                  "completed_at": cap.github_time(datetime.now(UTC))}]  # fmt: skip
            self._write(data)


def head(k: int) -> str:
    return f"{k + 16:02x}" * 20


def push_event(tmp: Path, k: int) -> tuple[Path, str]:
    """The workflow_run event of push k (its own branch and head), and the fork owner's login."""
    event = json.loads(EVENT.read_text())
    event["workflow_run"]["head_sha"] = head(k)
    event["workflow_run"]["head_branch"] = f"try-{k}"
    path = tmp / f"event-{k}.json"
    path.write_text(json.dumps(event))
    return path, event["workflow_run"]["head_repository"]["owner"]["login"]


def course_root(tmp: Path) -> Path:
    course = tmp / "course"
    course.mkdir()
    text = (Path(gha.__file__).resolve().parents[2] / "course.toml").read_text()
    (course / "course.toml").write_text(text + "\n[grading_cap]\ngradings = 6\nwindow_hours = 24\n")
    return course


def simultaneous_pushes(tmp: Path, github, monkeypatch, queue: bool, reserve: bool) -> dict:
    """Seven gates started at once; each push's outcome: 'graded', 'capped' or 'held'."""
    monkeypatch.setattr(cap, "_gh", github)
    if not reserve:  # the gate as before issue 50: a reservation step is not counted
        monkeypatch.setattr(cap, "RESERVE_STEP", "(no reservation step)")
    course = course_root(tmp)
    events = [push_event(tmp, k) for k in range(PUSHES)]
    record = Record(github.state, events[0][1], datetime.now(UTC))
    gates = GateQueue()
    start = threading.Barrier(PUSHES)
    outcome: dict[int, str] = {}

    def push(k: int) -> None:
        run, (event, _) = 100 + k, events[k]
        out, outputs = tmp / f"out-{k}", tmp / f"outputs-{k}"
        start.wait()
        if queue and not gates.enter(run):
            record.gate_ended(run, "cancelled", reserved=False)
            gha.main(["held-comment", "--event", str(event), "--run-id", str(run),
                      "--out", str(out)])  # fmt: skip
            outcome[k] = "held"
            return
        rc = gha.main(["gate", "--repo", REPO, "--event", str(event), "--run-id", str(run),
                       "--out", str(out), "--root", str(course),
                       "--github-output", str(outputs)])  # fmt: skip
        assert rc == 0
        grades = outputs.read_text() == "grade=true\n"
        record.gate_ended(run, "success", reserved=grades)
        if queue:
            gates.leave()
        outcome[k] = "graded" if grades else "capped"

    threads = [threading.Thread(target=push, args=(k,)) for k in range(PUSHES)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert len(outcome) == PUSHES, outcome
    return outcome


@pytest.mark.parametrize(
    ("queue", "reserve", "graded"),
    [(False, False, PUSHES), (True, False, 2), (True, True, 1)],
    ids=["no-queue-no-reservation", "queue-no-reservation", "queue-and-reservation"],
)
def test_seven_simultaneous_pushes_with_five_of_six_used(
    tmp_path, github, monkeypatch, queue, reserve, graded
):
    outcome = simultaneous_pushes(tmp_path, github, monkeypatch, queue, reserve)
    counts = {o: list(outcome.values()).count(o) for o in ("graded", "capped", "held")}
    print(f"queue={queue} reservation={reserve}: {counts}")
    assert counts["graded"] == graded, counts
    if not (queue and reserve):
        return
    assert counts == {"graded": 1, "capped": 1, "held": PUSHES - 2}
    for k, what in outcome.items():
        comment = tmp_path / f"out-{k}" / "comment.md"
        if what == "graded":
            assert not comment.exists()
            continue
        body = comment.read_text()
        state = read_state(body)
        assert state is not None and state["status"] == "capped" and state["run"] == 100 + k
        assert state["head"] == head(k)
        assert ("Held: commit" in body) == (what == "held")
        assert ("Graded later" in body) == (what == "capped")


def test_a_reservation_counts_until_the_gpu_job_is_listed_and_lapses_with_its_run(github):
    """The gate's reservation counts while its run goes on without a listed GPU job; a finished
    run without one lets it lapse; once the GPU job is listed, the job decides."""
    now = datetime(2026, 12, 10, 12, 0, tzinfo=UTC)
    at = cap.github_time(now - timedelta(minutes=1))

    def run(run_id: int, status: str, *extra: dict) -> dict:
        gate = {"name": cap.GATE_JOB, "run_attempt": 1, "status": "completed",
                "conclusion": "success", "started_at": at,
                "steps": [{"name": cap.RESERVE_STEP, "status": "completed",
                           "conclusion": "success", "completed_at": at}]}  # fmt: skip
        return Record._run(run_id, "ada", "a" * 40, at, status, [gate, *extra])

    failed = {"name": cap.GPU_JOB, "run_attempt": 1, "status": "completed",
              "conclusion": "failure", "started_at": at,
              "steps": [{"name": cap.GRADING_STEP, "status": "completed",
                         "conclusion": "failure"}]}  # fmt: skip
    github.runs(run(1, "in_progress"), run(2, "completed"), run(3, "in_progress", failed))
    found = cap.gradings(REPO, "ada", now, timedelta(hours=24), github)
    assert [g.run for g in found] == [1]
